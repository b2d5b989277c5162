#include "python/torch_backend/completion_pool.h"

namespace cohort::torch_backend {

CompletionPool::CompletionPool(int max_threads)
    : max_threads_(static_cast<size_t>(max_threads < 1 ? 1 : max_threads)) {}

CompletionPool::~CompletionPool() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

void CompletionPool::Submit(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.push_back(std::move(task));
  if (tasks_.size() > idle_ && threads_.size() < max_threads_) {
    threads_.emplace_back([this] { Loop(); });
  } else {
    cv_.notify_one();
  }
}

void CompletionPool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_;
    cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace cohort::torch_backend
