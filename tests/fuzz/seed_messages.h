// What the coordinator and agent fuzz targets share: the ZeroMQ context of their inproc://
// sockets, and the seed messages both sides take of job "target" chief-0 attempt 0 (a client's
// DumpStacks, ExecInReplica and ExecSessionIo reach the coordinator, which sends them on to the
// agent as they are), with every field set, for mutations to start from.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <zmq.hpp>

#include "common/schema/cohort_generated.h"

namespace cohort::fuzz {

inline zmq::context_t& Context() {
  static zmq::context_t context;
  return context;
}

inline std::unique_ptr<wire::KeyValueT> Kv(const std::string& key, const std::string& value) {
  auto kv = std::make_unique<wire::KeyValueT>();
  kv->key = key;
  kv->value = value;
  return kv;
}

inline wire::DumpStacksT TargetDumpStacks() {
  wire::DumpStacksT dump;
  dump.job = "target";
  dump.replica = "chief-0";
  dump.attempt = 0;
  dump.reason = "hang";
  return dump;
}

inline wire::ExecInReplicaT TargetExec() {
  wire::ExecInReplicaT exec;
  exec.job = "target";
  exec.replica = "chief-0";
  exec.argv = {"nvidia-smi", "-q"};
  exec.timeout_ms = 1000;
  exec.attempt = 0;
  exec.exec_id = 1;
  return exec;
}

// An interactive session's opening (a command on a terminal, its first input) and its end (input
// closed, the command killed).
inline std::pair<wire::ExecSessionIoT, wire::ExecSessionIoT> TargetExecSession() {
  wire::ExecSessionIoT session;
  session.job = "target";
  session.replica = "chief-0";
  session.session = 1;
  session.argv = {"bash"};
  session.tty = true;
  session.rows = 24;
  session.cols = 80;
  session.input = {'l', 's', '\n'};
  session.attempt = 0;
  session.exec_id = 2;
  wire::ExecSessionIoT end = session;
  end.input_closed = true;
  end.kill = true;
  return {std::move(session), std::move(end)};
}

}  // namespace cohort::fuzz
