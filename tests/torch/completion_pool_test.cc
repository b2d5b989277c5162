// CompletionPool (python/torch_backend/completion_pool.h), which needs no torch: every task runs,
// a blocked task leaves others to threads of their own, and the pool may be destroyed from one of
// its own tasks (a future's callback that shuts its process group down).
#include "python/torch_backend/completion_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cohort::torch_backend {
namespace {

// What the tasks did, in order.
class Journal {
 public:
  void Add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_back(what);
  }
  std::vector<std::string> entries() {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> entries_;
};

TEST(CompletionPoolTest, TheDestructorRunsEveryTaskSubmittedBeforeIt) {
  std::atomic<int> ran{0};
  {
    CompletionPool pool(2);
    for (int i = 0; i < 100; ++i) pool.Submit([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(CompletionPoolTest, ATaskThatBlocksLeavesTheNextToAnotherThread) {
  CompletionPool pool(2);
  std::promise<void> second_ran;
  std::future<void> second = second_ran.get_future();
  std::promise<bool> first_saw;
  pool.Submit([&] {
    // Waits for the task submitted after it: only another thread can run that one.
    first_saw.set_value(second.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  });
  pool.Submit([&] { second_ran.set_value(); });
  EXPECT_TRUE(first_saw.get_future().get());
}

// A task that destroys its own pool (one thread, so the tasks queued behind it have no other
// thread): the destructor does not join the thread it runs on (std::system_error, "Resource
// deadlock avoided", then std::terminate), and the queued tasks run before it returns.
TEST(CompletionPoolTest, ATaskMayDestroyItsOwnPoolAndTheQueuedTasksRunBeforeItReturns) {
  Journal journal;
  auto pool = std::make_unique<CompletionPool>(1);
  std::promise<void> queued;
  std::promise<void> done;
  pool->Submit([&] {
    queued.get_future().wait();
    pool.reset();
    journal.Add("destroyed");
    done.set_value();
  });
  pool->Submit([&] { journal.Add("second"); });
  pool->Submit([&] { journal.Add("third"); });
  queued.set_value();
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(journal.entries(), (std::vector<std::string>{"second", "third", "destroyed"}));
}

// The same with other threads busy: the destructor joins them (their tasks finish first).
TEST(CompletionPoolTest, ATaskThatDestroysItsPoolWaitsForTheOtherThreadsTasks) {
  Journal journal;
  auto pool = std::make_unique<CompletionPool>(4);
  std::promise<void> others_started;
  std::atomic<int> started{0};
  std::promise<void> done;
  for (int i = 0; i < 2; ++i) {
    pool->Submit([&, i] {
      if (started.fetch_add(1) == 1) others_started.set_value();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      journal.Add("other " + std::to_string(i));
    });
  }
  others_started.get_future().wait();
  pool->Submit([&] {
    pool.reset();
    journal.Add("destroyed");
    done.set_value();
  });
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  std::vector<std::string> entries = journal.entries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries.back(), "destroyed");
}

}  // namespace
}  // namespace cohort::torch_backend
