// RuntimeCommands: the container runtime's short commands (`runc kill`, `runc state`,
// `runc delete`, `docker rm -f`, ...) run off the agent loop, so that a slow or wedged runtime
// (a docker CLI call takes 0.1-1 s, a wedged dockerd minutes) never holds the loop's heartbeats
// and launches (agent/oci_launcher.h says who queues what).
//
// Lanes: each container id has a lane. A lane's commands run one at a time, in the order they
// were queued, on a thread of the lane's own, started when the lane gets work and ended when it
// has none: a SIGTERM's kill runs before the SIGKILL's, and a delete after every command queued
// before it, while a command wedged on one container holds only that container's later ones.
// A command queued while an identical one (same argv) waits, not started, on its lane is not
// queued again (unless the caller says so): the waiting one stands for both (a stop that asks for
// SIGKILL every loop turn queues one kill).
//
// Each command runs under RunCaptured (agent/captured_command.h), hidden from the agent's reaper,
// killed at `timeout` (its result then says timed_out), and `done` gets its result on the lane's
// thread; a command dropped at shutdown gets one that says cancelled, with no exit code.
//
// Shutdown: Shutdown(drain) takes no new commands, lets the queued ones run for up to `drain`,
// then SIGKILLs those still running (RunCaptured notices within 100 ms) and drops those not
// started, each logged, and joins the lanes' threads: it returns within about drain + 100 ms
// whatever the runtime does. The destructor shuts down with no drain.
//
// Thread safety: every method may be called from any thread; `done` must not call back into it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/captured_command.h"

namespace cohort::agent {

class RuntimeCommands {
 public:
  using Done = std::function<void(const CapturedCommand&)>;

  explicit RuntimeCommands(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  ~RuntimeCommands() { Shutdown(std::chrono::milliseconds(0)); }
  RuntimeCommands(const RuntimeCommands&) = delete;
  RuntimeCommands& operator=(const RuntimeCommands&) = delete;

  // Queues argv (argv[0] a path) on `lane`. False, and `done` never called, after Shutdown or,
  // with `coalesce`, when an identical command already waits on the lane.
  bool Enqueue(const std::string& lane, std::vector<std::string> argv, Done done,
               bool coalesce = true);
  // See "Shutdown" above. Safe to repeat.
  void Shutdown(std::chrono::milliseconds drain);

  // Commands queued or running, on every lane (for tests and logs).
  size_t pending() const;

 private:
  struct Job {
    std::vector<std::string> argv;
    Done done;
  };
  struct Lane {
    std::deque<Job> jobs;  // not started yet
    bool busy = false;     // its thread runs (or is about to end)
    std::thread thread;
  };
  void RunLane(const std::string& name);

  const std::chrono::milliseconds timeout_;
  std::atomic<bool> cancel_{false};  // set at the end of a shutdown's drain
  mutable std::mutex mu_;
  std::condition_variable idle_;  // a lane's thread ended
  std::map<std::string, Lane> lanes_;
  bool closed_ = false;
  size_t running_ = 0;  // commands started, not yet done
};

// Whether a runtime's error output says the container is not there or not running (what a kill
// or delete of a container already gone says): such failures are expected, not logged as errors.
bool RuntimeSaysGone(const std::string& output);

}  // namespace cohort::agent
