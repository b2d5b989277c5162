// SignalStorm: signals sent to one thread, as fast as they go, while the storm lives. Each
// interrupts whatever system call that thread is in: its handler (SIGUSR1's, put back afterwards)
// is installed without SA_RESTART, as Python's and our daemons' handlers are, and a poll is never
// restarted anyway. Tests run calls under it that a handled signal must not fail.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace cohort::testing {

class SignalStorm {
 public:
  explicit SignalStorm(pthread_t target) {
    struct sigaction action {};
    action.sa_handler = [](int) {};
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGUSR1, &action, &previous_);
    sender_ = std::thread([this, target] {
      while (!stop_.load()) {
        pthread_kill(target, SIGUSR1);
        ++sent_;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    });
  }
  SignalStorm(const SignalStorm&) = delete;
  SignalStorm& operator=(const SignalStorm&) = delete;
  ~SignalStorm() {
    stop_ = true;
    sender_.join();
    ::sigaction(SIGUSR1, &previous_, nullptr);
  }
  // How many signals were sent so far.
  int sent() const { return sent_.load(); }

 private:
  struct sigaction previous_ {};
  std::atomic<bool> stop_{false};
  std::atomic<int> sent_{0};
  std::thread sender_;
};

}  // namespace cohort::testing
