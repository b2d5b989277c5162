// The generation protocol (collective/generation.h) over an in-memory store: the chief
// publishes, every other rank joins each generation once, a restarted rank skips the generation
// its earlier incarnation joined, and an id the store no longer names is not joined.
#include "collective/generation.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

TEST(GenerationTest, EveryRankJoinsThePublishedGenerationOnce) {
  InMemoryBootstrap store;
  auto g1 = PublishGeneration(store, "job", 3);
  ASSERT_TRUE(g1.ok()) << g1.status().ToString();
  EXPECT_EQ(g1->size(), 16u);
  EXPECT_EQ(*store.Get(GenerationKey("job"), DeadlineAfter(milliseconds(0))), *g1);
  EXPECT_EQ(GenerationPrefix("job", *g1), "job/" + *g1);

  for (int rank : {1, 2}) {
    auto joined = AwaitGeneration(store, "job", rank, DeadlineAfter(milliseconds(5000)));
    ASSERT_TRUE(joined.ok()) << joined.status().ToString();
    EXPECT_EQ(*joined, *g1);
  }
  // Rank 1 again (rebuilding, or restarted and reading the same store): g1 is stale for it.
  const auto late = AwaitGeneration(store, "job", 1, DeadlineAfter(milliseconds(100)));
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(late.status().message().find("job"), std::string::npos) << late.status().ToString();

  // Until the chief publishes the next one.
  std::string g2;
  std::thread chief([&] {
    std::this_thread::sleep_for(milliseconds(50));
    auto g = PublishGeneration(store, "job", 3);
    ASSERT_TRUE(g.ok());
    g2 = *g;
  });
  auto next = AwaitGeneration(store, "job", 1, DeadlineAfter(milliseconds(10000)));
  chief.join();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(*next, g2);
  EXPECT_NE(g2, *g1);
  // Prefixes are separate namespaces.
  EXPECT_EQ(AwaitGeneration(store, "other", 1, DeadlineAfter(milliseconds(50))).status().code(),
            StatusCode::kDeadlineExceeded);
}

// The chief records the generation's workers before the id; a missing or hostile record is told
// apart from a count.
TEST(GenerationTest, TheChiefRecordsHowManyWorkersTheGenerationHas) {
  InMemoryBootstrap store;
  auto g = PublishGeneration(store, "job", 8);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto workers = GenerationWorkers(store, "job", *g, DeadlineAfter(milliseconds(100)));
  ASSERT_TRUE(workers.ok()) << workers.status().ToString();
  EXPECT_EQ(*workers, 8);
  EXPECT_EQ(GenerationWorkers(store, "job", "0123456789abcdef", DeadlineAfter(milliseconds(100)))
                .status()
                .code(),
            StatusCode::kNotFound);
  for (const char* bad : {"", "0", "-2", "65536", "4x", "99999999999999999999"}) {
    ASSERT_TRUE(store.Put("job/bad/num_workers", bad).ok());
    const auto got = GenerationWorkers(store, "job", "bad", DeadlineAfter(milliseconds(100)));
    EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << "'" << bad << "'";
    EXPECT_NE(got.status().message().find("job/bad/num_workers"), std::string::npos)
        << got.status().ToString();
  }
  // A member named rather than numbered (a reducer) joins once, like a rank.
  auto joined =
      AwaitGeneration(store, "job", std::string("reducer0"), DeadlineAfter(milliseconds(1000)));
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(*joined, *g);
  EXPECT_EQ(AwaitGeneration(store, "job", std::string("reducer0"), DeadlineAfter(milliseconds(50)))
                .status()
                .code(),
            StatusCode::kDeadlineExceeded);
}

TEST(GenerationTest, AStoppedWaitIsCancelled) {
  InMemoryBootstrap store;
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(50));
    stop.store(true);
  });
  auto g = AwaitGeneration(store, "job", 3, DeadlineAfter(milliseconds(60000)), &stop);
  stopper.join();
  EXPECT_EQ(g.status().code(), StatusCode::kCancelled);
}

// A store that answers the first read of the generation key with an id its chief published
// before it was replaced: the dead chief's store answered it, the live one names another.
class ReplacedStore final : public Bootstrap {
 public:
  Status Put(const std::string& key, const std::string& value) override {
    return live_.Put(key, value);
  }
  StatusOr<std::string> Get(const std::string& key, Deadline deadline) override {
    if (key == GenerationKey("job") && !answered_stale_) {
      answered_stale_ = true;
      return std::string("dead-chiefs-generation");
    }
    return live_.Get(key, deadline);
  }
  InMemoryBootstrap live_;
  bool answered_stale_ = false;
};

TEST(GenerationTest, AnIdTheLiveStoreNoLongerNamesIsNotJoined) {
  ReplacedStore store;
  auto live = PublishGeneration(store, "job", 3);
  ASSERT_TRUE(live.ok());
  auto joined = AwaitGeneration(store, "job", 1, DeadlineAfter(milliseconds(5000)));
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_TRUE(store.answered_stale_);
  EXPECT_EQ(*joined, *live);
}

}  // namespace
}  // namespace cohort::collective
