// Fork-based helpers for the multi-process tests: each child runs a function and _exits with its
// return value; the parent waits with a deadline and SIGKILLs whatever is left. UCX jobs of worker
// and reducer processes with the environment an agent injects, as RunUcxJob runs them.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "collective/reducer.h"
#include "tests/testing/process.h"

namespace cohort::collective::testing {

class ProcessGroup {
 public:
  ~ProcessGroup() { KillAll(); }
  // Forks a child running fn(); returns its index.
  int Spawn(const std::function<int()>& fn) {
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      int code = 1;
      code = fn();
      std::fflush(nullptr);
      _exit(code);
    }
    pids_.push_back(pid);
    codes_.push_back(-1);
    return static_cast<int>(pids_.size()) - 1;
  }
  pid_t pid(int i) const { return pids_[i]; }
  void Kill(int i) { ::kill(pids_[i], SIGKILL); }
  // Waits for the children in `which` (all if empty) until `timeout`; returns false on timeout.
  bool Wait(std::chrono::milliseconds timeout, std::vector<int> which = {}) {
    if (which.empty()) {
      for (size_t i = 0; i < pids_.size(); ++i) which.push_back(static_cast<int>(i));
    }
    return cohort::testing::WaitUntil(
        [&] {
          bool all = true;
          for (int i : which) {
            if (codes_[i] != -1) continue;
            int status = 0;
            if (waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
              codes_[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            } else {
              all = false;
            }
          }
          return all;
        },
        timeout, std::chrono::milliseconds(10));
  }
  // Exit code (or 128 + signal) of child i; -1 while running.
  int code(int i) const { return codes_[i]; }
  void KillAll() {
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (codes_[i] == -1) {
        ::kill(pids_[i], SIGKILL);
        int status;
        waitpid(pids_[i], &status, 0);
        codes_[i] = 128 + SIGKILL;
      }
    }
  }

 private:
  std::vector<pid_t> pids_;
  std::vector<int> codes_;
};

// The environment of one process of a UCX job on 127.0.0.1 (RANK or COHORT_REDUCER_INDEX is
// the process's own): UCX_TLS `tls`, the bootstrap at `port`, 64 KiB chunks. reduction_server:
// COHORT_ALLREDUCE_ALGORITHM=reduction-server, else the variable is unset (kAuto).
inline void SetJobEnv(const std::string& tls, int port, int workers, int reducers, int timeout_ms,
                      bool reduction_server = false) {
  setenv("UCX_TLS", tls.c_str(), 1);
  setenv("UCX_WARN_UNUSED_ENV_VARS", "n", 1);
  setenv("COHORT_BOOTSTRAP_ADDR", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(workers).c_str(), 1);
  setenv("COHORT_NUM_REDUCERS", std::to_string(reducers).c_str(), 1);
  setenv("COHORT_COMM_TIMEOUT_MS", std::to_string(timeout_ms).c_str(), 1);
  setenv("COHORT_CHUNK_BYTES", "65536", 1);
  if (reduction_server) {
    setenv("COHORT_ALLREDUCE_ALGORITHM", "reduction-server", 1);
  } else {
    unsetenv("COHORT_ALLREDUCE_ALGORITHM");
  }
}

// A reducer process: RunReducerFromEnvironment as reducer `index`; 0 when it returned OK.
// It does not wait for a lost worker to rejoin (COHORT_REDUCER_REJOIN_MS=0).
inline int ReducerMain(int index) {
  setenv("COHORT_REDUCER_INDEX", std::to_string(index).c_str(), 1);
  setenv("COHORT_REDUCER_REJOIN_MS", "0", 1);
  std::atomic<bool> stop{false};
  Status s = RunReducerFromEnvironment(stop);
  if (!s.ok()) std::fprintf(stderr, "reducer %d: %s\n", index, s.ToString().c_str());
  return s.ok() ? 0 : 1;
}

// A UCX job's shape: UCX_TLS, workers, reducers.
using UcxJob = std::tuple<std::string, int, int>;

// "tcp_w3_r1".
inline std::string UcxJobName(const ::testing::TestParamInfo<UcxJob>& info) {
  return std::get<0>(info.param) + "_w" + std::to_string(std::get<1>(info.param)) + "_r" +
         std::to_string(std::get<2>(info.param));
}

// Runs `job` as processes: reducers first, then workers in reverse rank order (no start-order
// dependence), each running worker_main(rank) with the job's environment (SetJobEnv, 30 s
// timeout); every process must exit 0 within four minutes.
inline void RunUcxJob(const UcxJob& job, bool reduction_server,
                      const std::function<int(int rank)>& worker_main) {
  const auto& [tls, workers, reducers] = job;
  const int port = cohort::testing::PickFreePort();
  ProcessGroup group;
  for (int i = 0; i < reducers; ++i) {
    group.Spawn([&, i] {
      SetJobEnv(tls, port, workers, reducers, 30000, reduction_server);
      return ReducerMain(i);
    });
  }
  for (int r = workers - 1; r >= 0; --r) {
    group.Spawn([&, r] {
      SetJobEnv(tls, port, workers, reducers, 30000, reduction_server);
      return worker_main(r);
    });
  }
  ASSERT_TRUE(group.Wait(std::chrono::milliseconds(240000))) << "processes did not finish";
  for (int i = 0; i < reducers + workers; ++i) {
    EXPECT_EQ(group.code(i), 0) << (i < reducers
                                        ? "reducer " + std::to_string(i)
                                        : "worker " + std::to_string(workers - 1 - (i - reducers)));
  }
}

}  // namespace cohort::collective::testing
