// Fork-based helpers for the multi-process tests: each child runs a function and _exits with its
// return value; the parent waits with a deadline and SIGKILLs whatever is left.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace cohort::collective::testing {

// A TCP port that was free a moment ago on 127.0.0.1.
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

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
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      bool all = true;
      for (int i : which) {
        if (codes_[i] != -1) continue;
        int status = 0;
        pid_t r = waitpid(pids_[i], &status, WNOHANG);
        if (r == pids_[i]) {
          codes_[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        } else {
          all = false;
        }
      }
      if (all) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
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
