// Helpers of the agent tests beside tests/testing/process.h's: process-group checks, a
// recording stand-in for the socket under an Outbox and the resend check of the Outbox's users.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "agent/launcher.h"
#include "agent/outbox.h"
#include "common/clock.h"
#include "tests/testing/process.h"

namespace cohort::testing {

// Stands in for the agent's socket under an Outbox: keeps every message sent, with its id.
struct SentMessages {
  std::vector<std::pair<uint64_t, wire::BodyUnion>> messages;
  uint64_t next_id = 1;

  agent::Outbox::Transmit Transmit() {
    return [this](wire::BodyUnion body) {
      messages.emplace_back(next_id, std::move(body));
      return next_id++;
    };
  }
  uint64_t last_id() const { return messages.back().first; }
};

// The resend rule of a class sending through an Outbox: with exactly one message sent and
// unanswered, send() (the class's Ship or Forward) sends nothing until `interval` has passed on
// `clock`, then sends it again. A failure is fatal (callers wrap it in ASSERT_NO_FATAL_FAILURE).
inline void ExpectResentAfter(ManualClock& clock, std::chrono::milliseconds interval,
                              const std::function<void()>& send, const SentMessages& sent) {
  ASSERT_EQ(sent.messages.size(), 1u);
  clock.Advance(interval - std::chrono::milliseconds(1));
  send();
  EXPECT_EQ(sent.messages.size(), 1u) << "resent before the interval";
  clock.Advance(std::chrono::milliseconds(1));
  send();
  ASSERT_EQ(sent.messages.size(), 2u) << "not resent once the interval passed";
}

// Waits up to `timeout` for `p`'s main process to exit, reaps it and hands its status to
// p.OnExited. False when it did not exit in time.
inline bool Reap(agent::ReplicaProcess& p,
                 std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  int status = 0;
  const bool exited =
      WaitUntil([&] { return ::waitpid(p.pid(), &status, WNOHANG) == p.pid(); }, timeout);
  if (exited) p.OnExited(status);
  return exited;
}

// True while some process of group `pgid` exists that is not a zombie.
inline bool GroupAlive(pid_t pgid) {
  if (::kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  DIR* dir = ::opendir("/proc");
  bool found = false;
  while (dirent* entry = dir ? ::readdir(dir) : nullptr) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::string stat = ReadFile(std::string("/proc/") + entry->d_name + "/stat");
    auto paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 1));
    char state = 0;
    int ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z' && state != 'X') found = true;
  }
  if (dir) ::closedir(dir);
  return found;
}

inline bool ProcessAlive(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  if (paren == std::string::npos) return false;
  char state = stat.size() > paren + 2 ? stat[paren + 2] : 'X';
  return state != 'Z' && state != 'X';
}

}  // namespace cohort::testing
