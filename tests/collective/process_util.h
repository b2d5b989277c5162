// Fork-based helpers for the multi-process tests: each child runs a function and _exits with its
// return value; the parent waits with a deadline and SIGKILLs whatever is left.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

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

}  // namespace cohort::collective::testing
