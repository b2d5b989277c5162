// CompletionPool runs short tasks (completing futures) off the process group's queue thread. A
// future's callbacks run where it is completed, and a callback may issue a collective and wait for
// it (PowerSGD's hook does): run on the queue thread, that would wait for itself. The pool starts a
// thread whenever a task finds none idle, up to `max_threads`, so a callback that blocks leaves
// another thread to complete the future it waits on.
//
// Thread safety: Submit may be called from any thread. Lifetime: the destructor runs every task
// submitted before it, then joins the threads. It may also run on one of the pool's own threads (a
// callback that shuts its process group down, or drops the group's last reference): then every
// other task still runs before it returns, but that thread is not joined, it is detached, and
// leaves once its own task returns, owning the pool's state. That task must then not touch what
// the pool's owner has freed.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
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
  // What the threads share with the pool; each thread holds it, so one detached by a destructor
  // on its own thread outlives the pool safely.
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> tasks;  // guarded by mu
    size_t idle = 0;                          // guarded by mu: threads waiting for a task
    bool stopping = false;                    // guarded by mu
  };
  static void Loop(const std::shared_ptr<State>& state);

  const size_t max_threads_;
  const std::shared_ptr<State> state_ = std::make_shared<State>();
  std::vector<std::thread> threads_;  // guarded by state_->mu
};

}  // namespace cohort::torch_backend
