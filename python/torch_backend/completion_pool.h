// CompletionPool runs short tasks (completing futures) off the process group's queue thread. A
// future's callbacks run where it is completed, and a callback may issue a collective and wait for
// it (PowerSGD's hook does): run on the queue thread, that would wait for itself. The pool starts a
// thread whenever a task finds none idle, up to `max_threads`, so a callback that blocks leaves
// another thread to complete the future it waits on.
//
// Thread safety: Submit may be called from any thread. Lifetime: the destructor runs every task
// submitted before it, then joins the threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cohort::torch_backend {

class CompletionPool {
 public:
  explicit CompletionPool(int max_threads);
  ~CompletionPool();
  CompletionPool(const CompletionPool&) = delete;
  CompletionPool& operator=(const CompletionPool&) = delete;

  void Submit(std::function<void()> task);

 private:
  void Loop();

  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  size_t idle_ = 0;                          // guarded by mu_: threads waiting for a task
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;         // guarded by mu_
};

}  // namespace cohort::torch_backend
