// StallNotices and StalledCallCheck over the loopback transport: which notices a call finds, what a
// hostile one does, and when a check speaks. (Workers whose sizes run different algorithms end to
// end: AllreduceAgreementTest.WorkersWhoseSizesPickDifferentAlgorithmsAllFailNamingOne.)
#include "collective/algorithms/stalled_call_check.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "collective/algorithms/collective_call.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "common/flight_recorder.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

constexpr Tag kNoticeTag = MakeTag(0, kStallNoticeStep);

AgreementCall Call(uint64_t count, int rank) {
  return {.count = count,
          .type = static_cast<uint8_t>(DataType::kF32),
          .op = static_cast<uint8_t>(ReduceOp::kSum),
          .rank = rank};
}

StallNotice CallNotice(uint32_t seq, const AgreementCall& call) {
  StallNotice n;
  n.seq = seq;
  n.kind = StallNotice::kCall;
  n.calls[0] = call;
  return n;
}

// Rank 1 sends to rank 0's StallNotices, on the notices' tag.
class StallNoticesTest : public ::testing::Test {
 protected:
  // Sends `size` bytes of `message` (a copy) from rank 1 to rank 0.
  void Send(const StallNotice& message, size_t size = sizeof(StallNotice)) {
    messages_.push_back(message);
    auto sent = t1_->Isend(0, kNoticeTag, ConstBytes{&messages_.back(), size});
    ASSERT_TRUE(sent.ok()) << sent.status().ToString();
    in_flight_.push_back(std::move(*sent));  // loopback completes it when it is taken
  }

  LoopbackFabric fabric_{2};
  std::unique_ptr<Transport> t0_ = fabric_.CreateTransport(0);
  std::unique_ptr<Transport> t1_ = fabric_.CreateTransport(1);
  std::deque<StallNotice> messages_;
  std::vector<Request> in_flight_;
  StallNotices notices_{*t0_, 2};
};

// Take(seq) returns the notices of that call and keeps those of seq - kKeepBehind ..
// seq + kKeepAhead for later; older and farther ones are dropped.
TEST_F(StallNoticesTest, KeepsTheNoticesOfCallsInFlightAndDropsTheRest) {
  constexpr uint32_t kNow = 100 + StallNotices::kKeepBehind;
  constexpr uint32_t kOldest = kNow - StallNotices::kKeepBehind;
  constexpr uint32_t kFarthest = kNow + StallNotices::kKeepAhead;
  // Kept: the call before may still be in flight, a worker behind or ahead may be there.
  for (uint32_t seq : {kNow - 1, kOldest, kFarthest, kOldest - 1, kFarthest + 1}) {
    Send(CallNotice(seq, Call(seq, 1)));
    Send(CallNotice(kNow, Call(kNow, 1)));
    auto now = notices_.Take(kNow);
    ASSERT_TRUE(now.ok()) << now.status().ToString();
    ASSERT_EQ(now->size(), 1u);
    EXPECT_EQ((*now)[0].calls[0].count, kNow);
    auto later = notices_.Take(seq);
    ASSERT_TRUE(later.ok());
    const bool kept = seq >= kOldest && seq <= kFarthest;
    ASSERT_EQ(later->size(), kept ? 1u : 0u) << "seq " << seq;
    if (kept) EXPECT_EQ((*later)[0].calls[0].count, seq);
  }
  auto none = notices_.Take(kNow);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Take(seq) also returns the notices of earlier calls that find a disagreement: a call that
// differs from the one this worker remembers making then, or a kDisagreement. It keeps them for
// that call's own check. A notice of an earlier call that is the call this worker made, or of a
// call it does not remember, is not returned.
TEST_F(StallNoticesTest, ReturnsTheNoticesOfEarlierCallsThatDifferFromThoseThisWorkerMade) {
  for (uint32_t seq = 20; seq < 25; ++seq) notices_.Remember(seq, Call(seq, 0));
  EXPECT_FALSE(notices_.Recall(19).has_value());  // never made
  ASSERT_TRUE(notices_.Recall(22).has_value());
  EXPECT_EQ(notices_.Recall(22)->count, 22u);
  // Call 20 is remembered while calls up to kKeepBehind after it are made.
  notices_.Remember(20 + StallNotices::kKeepBehind, Call(7, 0));
  EXPECT_TRUE(notices_.Recall(20).has_value());
  notices_.Remember(21 + StallNotices::kKeepBehind, Call(7, 0));
  EXPECT_FALSE(notices_.Recall(20).has_value());

  Send(CallNotice(21, Call(21, 1)));   // the same as this worker's call 21
  Send(CallNotice(22, Call(999, 1)));  // differs from this worker's call 22
  StallNotice told = CallNotice(23, Call(5, 1));
  told.kind = StallNotice::kDisagreement;
  told.calls[1] = Call(6, 2);
  Send(told);
  Send(CallNotice(20, Call(999, 1)));  // a call no longer remembered

  auto got = notices_.Take(24);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].seq, 22u);
  EXPECT_EQ((*got)[0].calls[0].count, 999u);
  EXPECT_EQ((*got)[1].seq, 23u);
  EXPECT_EQ((*got)[1].kind, StallNotice::kDisagreement);
  auto again = notices_.Take(22);  // that call's own check still finds its notice
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].calls[0].count, 999u);
}

// Something on the notices' tag that is not a notice fails the call that takes it with kDataLoss
// naming the sender, and nothing else: later notices are taken as before.
TEST_F(StallNoticesTest, AMalformedNoticeIsDataLossNamingItsSender) {
  StallNotice bad = CallNotice(3, Call(7, 1));
  bad.magic = 0x12345678;
  Send(bad);
  StallNotice wrong_kind = CallNotice(3, Call(7, 1));
  wrong_kind.kind = 99;
  Send(wrong_kind);
  Send(CallNotice(3, Call(7, 1)), 8);  // too short to say its kind
  for (int i = 0; i < 3; ++i) {
    auto got = notices_.Take(3);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << got.status().ToString();
    EXPECT_NE(got.status().message().find("from rank 1 is malformed"), std::string::npos)
        << got.status().ToString();
  }
  Send(CallNotice(3, Call(7, 1)));
  auto got = notices_.Take(3);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), 1u);
}

// A kDisagreement whose two calls are the same says nothing true: the check fails with kDataLoss
// quoting it, of this call or an earlier one.
TEST_F(StallNoticesTest, ADisagreementBetweenTwoEqualCallsIsDataLoss) {
  const std::vector<int> workers = {0, 1};
  for (uint32_t seq : {5u, 4u}) {
    StalledCallCheck check(notices_, workers, Call(10, 0), 5, "all-reduce",
                           SteadyClock::now() - kStalledCallAfter);
    StallNotice told = CallNotice(seq, Call(7, 1));
    told.kind = StallNotice::kDisagreement;
    told.calls[1] = Call(7, 2);
    Send(told);
    const Status s = check.Check();
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
    EXPECT_NE(s.message().find("differ, and both are all-reduce of 7 f32 (sum)"), std::string::npos)
        << s.ToString();
  }
}

// Three workers, each with its StallNotices over the loopback transport.
class StalledCallCheckTest : public ::testing::Test {
 protected:
  StalledCallCheckTest() {
    for (int r = 0; r < 3; ++r) t_.push_back(fabric_.CreateTransport(r));
    for (int r = 0; r < 3; ++r) notices_.push_back(std::make_unique<StallNotices>(*t_[r], 3));
  }

  LoopbackFabric fabric_{3};
  std::vector<std::unique_ptr<Transport>> t_;
  std::vector<std::unique_ptr<StallNotices>> notices_;
  const std::vector<int> workers_ = {0, 1, 2};
};

// Before kStalledCallAfter a check sends and takes nothing. Once overdue, worker 0 sends its call
// to its right neighbour (worker 1) once; worker 1, whose call differs, fails naming worker 0 and
// tells worker 2, which fails naming worker 0 too without a notice of its own neighbour's.
TEST_F(StalledCallCheckTest, AnOverdueCheckSendsItsCallOnceAndAFindingReachesEveryWorker) {
  StalledCallCheck w0(*notices_[0], workers_, Call(1000, 0), 4, "all-reduce");
  StalledCallCheck w1(*notices_[1], workers_, Call(3000, 1), 4, "all-reduce");
  StalledCallCheck w2(*notices_[2], workers_, Call(3000, 2), 4, "all-reduce");

  EXPECT_TRUE(w0.Check().ok());
  EXPECT_FALSE(t_[1]->Probe(kNoticeTag, SteadyClock::now() + milliseconds(20)).ok())
      << "a notice before the call was overdue";

  std::this_thread::sleep_for(kStalledCallAfter);
  EXPECT_TRUE(w0.Check().ok());  // nothing has come to worker 0 (worker 2 has not looked)
  EXPECT_TRUE(w0.Check().ok());  // and it sent its call once
  const Status one = w1.Check();
  EXPECT_EQ(one.code(), StatusCode::kInvalidArgument) << one.ToString();
  EXPECT_NE(one.message().find("worker 0 called 1000 f32 (sum), this worker 3000 f32 (sum)"),
            std::string::npos)
      << one.ToString();
  EXPECT_EQ(w1.Check().ToString(), one.ToString()) << "the verdict stays";
  const Status two = w2.Check();
  EXPECT_EQ(two.code(), StatusCode::kInvalidArgument) << two.ToString();
  EXPECT_NE(two.message().find("worker 0 called 1000 f32 (sum), this worker 3000 f32 (sum)"),
            std::string::npos)
      << two.ToString();
  // Worker 1 told worker 0 too; worker 2's own call reached worker 0 as well (it differs).
  const Status zero = w0.Check();
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument) << zero.ToString();
  auto leftover = notices_[1]->Take(4);
  ASSERT_TRUE(leftover.ok());
  for (const StallNotice& n : *leftover)
    EXPECT_NE(n.kind, StallNotice::kCall) << "worker 0 sent its call more than once";
}

// Worker 0's call 4 ended at once (a broadcast's root) and it waits in call 5; workers 1 and 2
// wait in call 4, an all-reduce. Worker 2's notice of call 4 reaches worker 0, which remembers
// another call 4: it fails naming worker 2 and the call one back, and tells the others of call
// 4's finding, which fails them as their own.
TEST_F(StalledCallCheckTest, AWorkerAheadFindsThatItsEarlierCallDiffersFromTheOthers) {
  AgreementCall broadcast = Call(8, 0);
  broadcast.collective = static_cast<uint8_t>(FlightOp::kBroadcast);
  broadcast.root = 0;
  { StalledCallCheck ended(*notices_[0], workers_, broadcast, 4, "broadcast"); }
  StalledCallCheck w0(*notices_[0], workers_, Call(1000, 0), 5, "all-reduce");
  StalledCallCheck w1(*notices_[1], workers_, Call(1000, 1), 4, "all-reduce");
  StalledCallCheck w2(*notices_[2], workers_, Call(1000, 2), 4, "all-reduce");

  std::this_thread::sleep_for(kStalledCallAfter);
  EXPECT_TRUE(w0.Check().ok());  // sends its call 5 to worker 1, which keeps it for later
  EXPECT_TRUE(w1.Check().ok());  // sends its call 4 to worker 2: the same
  EXPECT_TRUE(w2.Check().ok());  // sends its call 4 to worker 0
  const Status zero = w0.Check();
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument) << zero.ToString();
  EXPECT_NE(zero.message().find("worker 2 called all-reduce of 1000 f32 (sum) where this worker "
                                "called broadcast of 8 f32 from root 0, 1 call before this one"),
            std::string::npos)
      << zero.ToString();
  for (StalledCallCheck* behind : {&w1, &w2}) {
    const Status s = behind->Check();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("worker 0 called broadcast of 8 f32 from root 0, this worker "
                               "all-reduce of 1000 f32 (sum)"),
              std::string::npos)
        << s.ToString();
  }
}

// The digest of a history follows the calls' arguments and their order, never the rank that made
// them; it is never 0 once a call was made (0 says "no call before"), and `last` is the call.
TEST(CallHistoryTest, TheDigestFollowsTheCallsArgumentsInOrderButNotTheirRank) {
  AgreementCall broadcast = Call(8, 0);
  broadcast.collective = static_cast<uint8_t>(FlightOp::kBroadcast);
  broadcast.root = 0;
  const AgreementCall allreduce = Call(1000, 0);
  const CallHistory none;
  EXPECT_EQ(none.digest, 0u);
  EXPECT_LT(none.last.rank, 0);

  const CallHistory one = none.After(broadcast);
  EXPECT_NE(one.digest, 0u);
  EXPECT_TRUE(SameCall(one.last, broadcast));
  AgreementCall by_another = broadcast;
  by_another.rank = 2;
  EXPECT_EQ(none.After(by_another).digest, one.digest) << "the rank is not part of the call";
  AgreementCall other_root = broadcast;
  other_root.root = 1;
  EXPECT_NE(none.After(other_root).digest, one.digest);
  for (auto change :
       {+[](AgreementCall& c) { c.count += 1; },
        +[](AgreementCall& c) { c.type = static_cast<uint8_t>(DataType::kF64); },
        +[](AgreementCall& c) { c.op = static_cast<uint8_t>(ReduceOp::kMax); },
        +[](AgreementCall& c) { c.collective = static_cast<uint8_t>(FlightOp::kScatter); }}) {
    AgreementCall changed = broadcast;
    change(changed);
    EXPECT_NE(none.After(changed).digest, one.digest) << DescribeAnyCall(changed);
  }
  EXPECT_NE(one.After(allreduce).digest, none.After(allreduce).After(broadcast).digest)
      << "the same calls in another order";
  EXPECT_EQ(one.After(allreduce).digest, none.After(broadcast).After(allreduce).digest);
}

// Every worker was the root of its own broadcast as call 4 (which ended at once everywhere) and
// all-reduces the same 1000 f32 as call 5. Worker 0's overdue notice of call 5 reaches worker 1:
// the calls are the same but their histories are not, and worker 1 fails quoting its own call 4.
TEST_F(StalledCallCheckTest, TheSameCallAfterDifferentOnesFailsQuotingThisWorkersCallBefore) {
  std::vector<std::unique_ptr<StalledCallCheck>> now;
  for (int r = 0; r < 2; ++r) {
    AgreementCall broadcast = Call(8, r);
    broadcast.collective = static_cast<uint8_t>(FlightOp::kBroadcast);
    broadcast.root = r;
    { StalledCallCheck ended(*notices_[r], workers_, broadcast, 4, "broadcast"); }
    AgreementCall allreduce = Call(1000, r);
    allreduce.history = CallHistory{}.After(broadcast).digest;
    now.push_back(
        std::make_unique<StalledCallCheck>(*notices_[r], workers_, allreduce, 5, "all-reduce"));
  }
  std::this_thread::sleep_for(kStalledCallAfter);
  EXPECT_TRUE(now[0]->Check().ok());  // sends its call 5 to worker 1
  const Status s = now[1]->Check();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("worker 0 called 1000 f32 (sum) after other calls than this "
                             "worker's, this worker 1000 f32 (sum) after broadcast of 8 f32 from "
                             "root 1"),
            std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace cohort::collective
