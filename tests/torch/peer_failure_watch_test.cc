// PeerFailureWatch over an in-memory store (no torch needed): a reason published by one rank
// reaches another rank's watch only while an operation there has waited its patience, never its
// own; a healthy group never touches the store; a reason published as the watch goes is written.
#include "python/torch_backend/peer_failure_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace cohort::torch_backend {
namespace {

using std::chrono::milliseconds;
using Clock = PeerFailureWatch::Clock;

// An InMemoryBootstrap shared by the ranks, counting lookups.
class CountingStore final : public collective::Bootstrap {
 public:
  explicit CountingStore(collective::InMemoryBootstrap* shared) : shared_(shared) {}
  Status Put(const std::string& key, const std::string& value) override {
    return shared_->Put(key, value);
  }
  StatusOr<std::string> Get(const std::string& key, collective::Deadline deadline) override {
    return shared_->Get(key, deadline);
  }
  StatusOr<std::optional<std::string>> Lookup(const std::string& key,
                                              collective::Deadline deadline) override {
    ++lookups;
    return shared_->Lookup(key, deadline);
  }
  static std::atomic<int> lookups;

 private:
  collective::InMemoryBootstrap* shared_;
};
std::atomic<int> CountingStore::lookups{0};

constexpr PeerFailureWatch::Timing kFast{milliseconds(20), milliseconds(100), milliseconds(200)};

struct Heard {
  std::promise<std::pair<int, std::string>> promise;
  std::atomic<int> calls{0};
};

std::unique_ptr<PeerFailureWatch> Watch(collective::InMemoryBootstrap* shared, int rank,
                                        Heard* heard) {
  return std::make_unique<PeerFailureWatch>(std::make_unique<CountingStore>(shared),
                                            "group/gave-up", rank, kFast,
                                            [heard](int peer, const std::string& why) {
                                              if (heard->calls++ == 0)
                                                heard->promise.set_value({peer, why});
                                            });
}

TEST(PeerFailureWatchTest, APeersReasonReachesAnOperationThatWaitedAndIsNotPastItsDeadline) {
  collective::InMemoryBootstrap shared;
  Heard heard0, heard1;
  auto zero = Watch(&shared, 0, &heard0);
  auto one = Watch(&shared, 1, &heard1);
  int op = 0;
  one->Started(&op, Clock::now() + std::chrono::seconds(60));
  zero->Publish("allreduce #3: worker 2 is gone");
  auto got = heard1.promise.get_future();
  ASSERT_EQ(got.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const auto [peer, why] = got.get();
  EXPECT_EQ(peer, 0);
  EXPECT_EQ(why, "allreduce #3: worker 2 is gone");
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(heard1.calls.load(), 1) << "on_remote runs once";
  EXPECT_EQ(heard0.calls.load(), 0) << "a rank does not hear its own reason";
}

TEST(PeerFailureWatchTest, WithoutALongWaitTheStoreIsNotReadAndNothingIsHeard) {
  collective::InMemoryBootstrap shared;
  Heard heard0, heard1;
  auto zero = Watch(&shared, 0, &heard0);
  auto one = Watch(&shared, 1, &heard1);
  CountingStore::lookups = 0;
  zero->Publish("gave up");
  // Short operations, and a long one whose deadline is within the margin: no look.
  for (int i = 0; i < 10; ++i) {
    one->Started(&i, Clock::now() + std::chrono::seconds(60));
    std::this_thread::sleep_for(milliseconds(10));
    one->Ended(&i);
  }
  int late = 0;
  one->Started(&late, Clock::now() + milliseconds(250));
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(CountingStore::lookups.load(), 0);
  EXPECT_EQ(heard1.calls.load(), 0);
  EXPECT_EQ(heard0.calls.load(), 0);
}

TEST(PeerFailureWatchTest, AReasonPublishedAsTheWatchGoesIsWritten) {
  collective::InMemoryBootstrap shared;
  Heard heard;
  Watch(&shared, 3, &heard)->Publish("it aborted its group");  // destroyed at once
  auto value = shared.Lookup("group/gave-up", Clock::now());
  ASSERT_TRUE(value.ok() && value->has_value());
  int rank = -1;
  std::string why;
  ASSERT_TRUE(PeerFailureWatch::Decode(**value, &rank, &why));
  EXPECT_EQ(rank, 3);
  EXPECT_EQ(why, "it aborted its group");
  EXPECT_FALSE(PeerFailureWatch::Decode("x\nwhy", &rank, &why));
  EXPECT_FALSE(PeerFailureWatch::Decode("no newline", &rank, &why));
  EXPECT_FALSE(PeerFailureWatch::Decode("-1\nwhy", &rank, &why));
  EXPECT_FALSE(PeerFailureWatch::Decode("3x\nwhy", &rank, &why));
}

}  // namespace
}  // namespace cohort::torch_backend
