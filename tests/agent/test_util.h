// Helpers of the agent tests beside tests/testing/process.h's: process-group checks, coordinator
// messages built as the coordinator does, a recording stand-in for the socket under an Outbox, the
// resend check of the Outbox's users, the one-signal-each check of a launcher's replicas (with
// and without a cgroup) and a metric file whose reads hang.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/cgroup.h"
#include "agent/launcher.h"
#include "agent/outbox.h"
#include "agent/process_launcher.h"
#include "agent/reading_thread.h"
#include "common/clock.h"
#include "tests/testing/process.h"

namespace cohort::testing {

// A message as the coordinator would send it, read back from its own buffer.
template <typename T>
class Built {
 public:
  explicit Built(const typename T::NativeTableType& native) { fbb_.Finish(T::Pack(fbb_, &native)); }
  const T& operator*() const { return *flatbuffers::GetRoot<T>(fbb_.GetBufferPointer()); }

 private:
  flatbuffers::FlatBufferBuilder fbb_;
};

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

// Polls p.PollLaunch() (as the agent loop does) until the launch is settled, up to `timeout`;
// returns the last state (kStarting: it did not settle in time).
inline agent::ReplicaProcess::LaunchState WaitForLaunch(
    agent::ReplicaProcess& p, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  WaitUntil([&] { return p.PollLaunch() != agent::ReplicaProcess::LaunchState::kStarting; },
            timeout);
  return p.PollLaunch();
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

// Launches with `launcher` (`request` as given, its argv replaced) a replica of three processes
// that count the signals they get, each SIGTERM and SIGRTMIN+1 (sigwaitinfo, written to
// <name>.<signal number> in the working directory): the command ("main"), a child in its process
// group ("member") and one that left the group with setsid ("escaped"). Then
// ReplicaProcess::Signal() once with each, and each process must have counted exactly 1 of each:
// stock training scripts take a second SIGTERM as "exit now, skip the checkpoint". SIGRTMIN+1
// makes the check exact: real-time signals queue, so two deliveries always count as two, where
// two SIGTERMs pending at once are merged by the kernel. Kills, reaps and releases the replica
// after. Failures are fatal (callers wrap it in ASSERT_NO_FATAL_FAILURE).
inline void ExpectOneSignalEach(agent::Launcher& launcher, agent::LaunchRequest request) {
  const std::string& dir = request.working_dir;
  const std::vector<int> signals = {SIGRTMIN + 1, SIGTERM};
  WriteFile(dir + "/counter.py",
            "import signal, sys\n"
            "name, sigs = sys.argv[1], [int(s) for s in sys.argv[2:]]\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK, sigs)\n"
            "counts = dict.fromkeys(sigs, 0)\n"
            "open(name + '.ready', 'w').close()\n"
            "while True:\n"
            "    sig = signal.sigwaitinfo(sigs).si_signo\n"
            "    counts[sig] += 1\n"
            "    with open(f'{name}.{sig}.tmp', 'w') as f:\n"
            "        f.write(f'{counts[sig]}\\n')\n"
            "    import os; os.rename(f'{name}.{sig}.tmp', f'{name}.{sig}')\n");
  std::string counter = "/usr/bin/python3 ./counter.py";
  auto args = [&](const std::string& name) {
    std::string out = counter + " " + name;
    for (int sig : signals) out += " " + std::to_string(sig);
    return out;
  };
  request.argv = {"/bin/sh", "-c",
                  args("member") + " & setsid " + args("escaped") + " & exec " + args("main")};
  auto launched = launcher.Launch(request);
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  agent::ReplicaProcess& p = **launched;
  const std::vector<std::string> names = {"main", "member", "escaped"};
  auto all_have = [&](const std::string& suffix) {
    for (const auto& name : names) {
      if (!FileExists(dir + "/" + name + suffix)) return false;
    }
    return true;
  };
  ASSERT_TRUE(WaitUntil([&] { return all_have(".ready"); }, std::chrono::seconds(30)))
      << ReadFile(request.log_path);
  for (int sig : signals) {
    p.Signal(sig);
    const std::string suffix = "." + std::to_string(sig);
    EXPECT_TRUE(WaitUntil([&] { return all_have(suffix); }, std::chrono::seconds(20)))
        << "signal " << sig << " did not reach every process";
    // A second delivery (init forwards asynchronously) lands within moments of the first; this
    // only gives it time to show. It never fails a correct Signal().
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    for (const auto& name : names) {
      EXPECT_EQ(ReadFile(dir + "/" + name + suffix), "1\n")
          << name << " counted signal " << sig << " that many times";
    }
  }
  p.KillAll();
  ASSERT_TRUE(Reap(p, std::chrono::seconds(20))) << "the replica did not exit";
  EXPECT_TRUE(WaitUntil([&] { return !p.AnyAlive(); }, std::chrono::seconds(20)));
  p.Release();
}

// A CgroupManager over an agent level of this test process's own ("<node>@<pid>", the pid for
// the agent's tag): ctest runs test processes side by side that launch replicas of the same
// names, which must never share a cgroup (the release of one kills every process of its cgroup,
// the other's replica too). RemoveOwnCgroups() removes the level, and the replica cgroups a
// test's agent left in it (one destroyed with its replicas running ends them, the daemon's
// shutdown also removes their cgroups), killing what is still in them.
inline agent::CgroupManager OwnCgroups(const std::string& node) {
  return agent::CgroupManager::Detect(node, std::to_string(::getpid()));
}
inline void RemoveOwnCgroups(const agent::CgroupManager& cgroups) {
  if (!cgroups.available()) return;
  (void)cgroups.SweepStale({});  // every replica cgroup of the level: none is kept
  ::rmdir(cgroups.base().c_str());
}

// ExpectOneSignalEach with a ProcessLauncher over OwnCgroups(node) (cohort-replica-init at
// `replica_init`, "" for none), the replica's processes then listed by their cgroup; skips where
// no cgroup can be made. Removes the node after.
inline void ExpectOneSignalEachInACgroup(const std::string& node, const std::string& replica_init) {
  agent::CgroupManager cgroups = OwnCgroups(node);
  if (!cgroups.available()) GTEST_SKIP() << "no writable cgroup v2 here: " << cgroups.reason();
  TempDir dir;
  agent::ProcessLauncher launcher(cgroups, replica_init);
  agent::LaunchRequest request;
  request.job = "signals";
  request.replica = "worker-0";
  request.env = {{"PATH", "/usr/bin:/bin"}};
  request.working_dir = dir.path();
  request.log_path = dir.path() + "/log";
  ExpectOneSignalEach(launcher, request);
  RemoveOwnCgroups(cgroups);
}

// Holds every reading of the file `path` (agent/reading_thread.h's test seam: the metric file's,
// the flight recorder's) on its reader's thread until Release(), a minute at most, standing in for
// a hung storage. Its state is shared with the held threads, which may still be leaving the hook
// when it is gone.
class HeldReads {
 public:
  explicit HeldReads(std::string path) : state_(std::make_shared<State>()) {
    agent::SetReadingHookForTesting(
        [state = state_, path = std::move(path)](const std::string& read) {
          if (read != path) return;
          std::unique_lock<std::mutex> lock(state->mu);
          ++state->entered;
          state->cv.wait_for(lock, std::chrono::minutes(1), [&] { return state->released; });
        });
  }
  ~HeldReads() {
    Release();
    agent::SetReadingHookForTesting(nullptr);
  }
  HeldReads(const HeldReads&) = delete;
  HeldReads& operator=(const HeldReads&) = delete;

  // Readings that reached the hook (held until Release()).
  int entered() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->entered;
  }
  // Lets them go, now and later.
  void Release() {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->released = true;
    }
    state_->cv.notify_all();
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int entered = 0;
    bool released = false;
  };
  std::shared_ptr<State> state_;
};

}  // namespace cohort::testing
