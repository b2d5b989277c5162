#include "python/torch_backend/completion_pool.h"

namespace cohort::torch_backend {

CompletionPool::CompletionPool(int max_threads)
    : max_threads_(static_cast<size_t>(max_threads < 1 ? 1 : max_threads)) {}

CompletionPool::~CompletionPool() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    threads.swap(threads_);
  }
  state_->cv.notify_all();
  bool on_own_thread = false;
  for (std::thread& t : threads) {
    // Joining the calling thread would wait for itself: it leaves on its own (see the header).
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();
      on_own_thread = true;
    } else {
      t.join();
    }
  }
  // The others have left, having run what was queued, unless this was the only thread: then the
  // tasks still queued run here, before their owner goes.
  while (on_own_thread) {
    std::function<void()> task;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (state_->tasks.empty()) break;
      task = std::move(state_->tasks.front());
      state_->tasks.pop_front();
    }
    task();
  }
}

void CompletionPool::Submit(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->tasks.push_back(std::move(task));
  if (state_->tasks.size() > state_->idle && threads_.size() < max_threads_) {
    threads_.emplace_back([state = state_] { Loop(state); });
  } else {
    state_->cv.notify_one();
  }
}

void CompletionPool::Loop(const std::shared_ptr<State>& state) {
  std::unique_lock<std::mutex> lock(state->mu);
  while (true) {
    ++state->idle;
    state->cv.wait(lock, [&] { return state->stopping || !state->tasks.empty(); });
    --state->idle;
    if (state->tasks.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(state->tasks.front());
    state->tasks.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // what it holds goes outside the lock: the pool's owner, it may be
    lock.lock();
  }
}

}  // namespace cohort::torch_backend
