#include "collective/transport/loopback/loopback_transport.h"

#include <gtest/gtest.h>

#include <thread>

#include "collective/transport/faulty_transport.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

// Ranks 0 (a_) and 1 (b_) of one loopback fabric of two.
class LoopbackTransportTest : public ::testing::Test {
 protected:
  LoopbackFabric fabric_{2};
  std::unique_ptr<Transport> a_ = fabric_.CreateTransport(0);
  std::unique_ptr<Transport> b_ = fabric_.CreateTransport(1);
};

TEST_F(LoopbackTransportTest, SendThenReceiveAndReceiveThenSend) {
  EXPECT_EQ(a_->rank(), 0);
  EXPECT_EQ(b_->size(), 2);
  int x = 42, y = 0;
  auto s = a_->Isend(1, MakeTag(1, 1), ConstBytes{&x, sizeof(x)});
  ASSERT_TRUE(s.ok());
  auto r = b_->Irecv(0, MakeTag(1, 1), MutableBytes{&y, sizeof(y)});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->Wait(DeadlineAfter(milliseconds(1000))).ok());
  EXPECT_TRUE(s->Wait(DeadlineAfter(milliseconds(1000))).ok());
  EXPECT_EQ(y, 42);

  int z = 0;
  auto r2 = b_->Irecv(0, MakeTag(1, 2), MutableBytes{&z, sizeof(z)});
  auto s2 = a_->Isend(1, MakeTag(1, 2), ConstBytes{&x, sizeof(x)});
  ASSERT_TRUE(r2.ok() && s2.ok());
  EXPECT_TRUE(r2->Wait(DeadlineAfter(milliseconds(1000))).ok());
  EXPECT_TRUE(s2->Wait(DeadlineAfter(milliseconds(1000))).ok());
  EXPECT_EQ(z, 42);
}

TEST_F(LoopbackTransportTest, SameTagKeepsOrderAndTagsAreSeparate) {
  int v[3] = {1, 2, 3};
  std::vector<Request> sends;
  sends.push_back(*a_->Isend(1, 7, ConstBytes{&v[0], 4}));
  sends.push_back(*a_->Isend(1, 7, ConstBytes{&v[1], 4}));
  sends.push_back(*a_->Isend(1, 8, ConstBytes{&v[2], 4}));
  int got[3] = {0, 0, 0};
  auto r8 = b_->Irecv(0, 8, MutableBytes{&got[2], 4});
  auto r7a = b_->Irecv(0, 7, MutableBytes{&got[0], 4});
  auto r7b = b_->Irecv(0, 7, MutableBytes{&got[1], 4});
  const auto d = DeadlineAfter(milliseconds(1000));
  EXPECT_TRUE(r8->Wait(d).ok());
  EXPECT_TRUE(r7a->Wait(d).ok());
  EXPECT_TRUE(r7b->Wait(d).ok());
  for (auto& s : sends) EXPECT_TRUE(s.Wait(d).ok());
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 2);
  EXPECT_EQ(got[2], 3);
}

TEST_F(LoopbackTransportTest, DeadlinePoisonsTheTransport) {
  int y = 0;
  auto r = a_->Irecv(1, 1, MutableBytes{&y, 4});
  ASSERT_TRUE(r.ok());
  Status s = r->Wait(DeadlineAfter(milliseconds(20)));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  auto again = a_->Isend(1, 1, ConstBytes{&y, 4});
  EXPECT_EQ(again.status().code(), StatusCode::kAborted);
}

TEST_F(LoopbackTransportTest, PollDoesNotCancel) {
  int x = 5, y = 0;
  auto r = b_->Irecv(0, 1, MutableBytes{&y, 4});
  EXPECT_FALSE(r->Poll(DeadlineAfter(milliseconds(10))));
  auto s = a_->Isend(1, 1, ConstBytes{&x, 4});
  EXPECT_TRUE(r->Poll(DeadlineAfter(milliseconds(1000))));
  EXPECT_TRUE(r->Wait(DeadlineAfter(milliseconds(10))).ok());
  EXPECT_TRUE(s->Wait(DeadlineAfter(milliseconds(10))).ok());
  EXPECT_EQ(y, 5);
}

TEST_F(LoopbackTransportTest, TruncationIsDataLoss) {
  int64_t x = 1;
  int32_t y = 0;
  auto s = a_->Isend(1, 1, ConstBytes{&x, 8});
  auto r = b_->Irecv(0, 1, MutableBytes{&y, 4});
  EXPECT_EQ(r->Wait(DeadlineAfter(milliseconds(1000))).code(), StatusCode::kDataLoss);
  EXPECT_TRUE(s->Wait(DeadlineAfter(milliseconds(1000))).ok());
}

TEST_F(LoopbackTransportTest, KillFailsPendingAndLaterOperations) {
  LoopbackFabric fabric(3);
  auto a = fabric.CreateTransport(0);
  int y = 0;
  auto r = a->Irecv(2, 1, MutableBytes{&y, 4});
  std::thread killer([&] {
    std::this_thread::sleep_for(milliseconds(20));
    fabric.Kill(2);
  });
  const auto start = SteadyClock::now();
  Status s = r->Wait(DeadlineAfter(milliseconds(10000)));
  killer.join();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_LT(SteadyClock::now() - start, milliseconds(5000));
  auto b = fabric.CreateTransport(1);
  EXPECT_EQ(b->Isend(2, 1, ConstBytes{&y, 4}).status().code(), StatusCode::kUnavailable);
}

// Cancel from another thread ends a wait in progress with kCancelled (its deadline is a minute
// away: a wait that ran to it would say kDeadlineExceeded), and refuses later posts, notices too.
// The peer's transport is untouched.
TEST_F(LoopbackTransportTest, CancelEndsWaitsInProgressAndRefusesLaterPosts) {
  int y = 0, x = 3;
  auto r = a_->Irecv(1, 1, MutableBytes{&y, 4});
  ASSERT_TRUE(r.ok());
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(20));
    a_->Cancel();
  });
  Status s = r->Wait(DeadlineAfter(milliseconds(60000)));
  canceller.join();
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
  EXPECT_EQ(a_->Isend(1, 2, ConstBytes{&x, 4}).status().code(), StatusCode::kCancelled);
  EXPECT_EQ(a_->Irecv(1, 2, MutableBytes{&y, 4}).status().code(), StatusCode::kCancelled);
  EXPECT_EQ(a_->IsendNotice(1, 2, ConstBytes{&x, 4}).status().code(), StatusCode::kCancelled);
  a_->Cancel();  // again: nothing changes
  auto posted = b_->Isend(0, 3, ConstBytes{&x, 4});
  EXPECT_TRUE(posted.ok()) << posted.status().ToString();
}

TEST_F(LoopbackTransportTest, DestroyingAPendingReceiveCancelsIt) {
  int y = 0, z = 0, x = 9;
  { auto r = b_->Irecv(0, 1, MutableBytes{&y, 4}); }
  auto r2 = b_->Irecv(0, 1, MutableBytes{&z, 4});
  auto s = a_->Isend(1, 1, ConstBytes{&x, 4});
  EXPECT_TRUE(r2->Wait(DeadlineAfter(milliseconds(1000))).ok());
  EXPECT_TRUE(s->Wait(DeadlineAfter(milliseconds(1000))).ok());
  EXPECT_EQ(y, 0);
  EXPECT_EQ(z, 9);
}

TEST(FaultyTransportTest, DiesAfterOpsAndDropsMessages) {
  LoopbackFabric fabric(2);
  auto base0 = fabric.CreateTransport(0);
  auto base1 = fabric.CreateTransport(1);
  bool died = false;
  FaultPlan plan;
  plan.die_after_ops = 1;
  plan.on_death = [&] {
    died = true;
    fabric.Kill(0);
  };
  plan.drop_sends_to = {1};
  FaultyTransport faulty(*base0, plan);
  int x = 1, y = 0;
  auto dropped = faulty.Isend(1, 1, ConstBytes{&x, 4});
  ASSERT_TRUE(dropped.ok());
  EXPECT_TRUE(dropped->Wait(DeadlineAfter(milliseconds(10))).ok());
  auto r = base1->Irecv(0, 1, MutableBytes{&y, 4});
  EXPECT_FALSE(r->Poll(DeadlineAfter(milliseconds(10))));
  EXPECT_EQ(faulty.Isend(1, 2, ConstBytes{&x, 4}).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(died);
  EXPECT_EQ(r->Wait(DeadlineAfter(milliseconds(1000))).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace cohort::collective
