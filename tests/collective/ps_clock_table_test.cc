// The parameter server's SSP clock table (collective/ps/ps_clock_table.h) without a server or a
// transport: which clocks are finished, who holds a read back, barriers and goodbyes.
#include "collective/ps/ps_clock_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace cohort::collective::ps {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kPoll{5};
const ClockTable::Cancelled kNever = [] { return false; };

TEST(ClockTableTest, AClockIsFinishedWhenTheSlowestPresentWorkerFinishesIt) {
  ClockTable t(3, kPoll);
  EXPECT_FALSE(t.Tick(0));
  EXPECT_FALSE(t.Tick(1));
  EXPECT_FALSE(t.Tick(0));
  EXPECT_TRUE(t.Tick(2)) << "worker 2 was the last at clock 0";
  EXPECT_EQ(t.Unapplied(), std::make_pair(int64_t{0}, int64_t{1}));
  t.SetApplied(1);
  EXPECT_EQ(t.applied(), 1);
  EXPECT_EQ(t.Unapplied(), std::make_pair(int64_t{1}, int64_t{1}));
  EXPECT_EQ(t.ClockAndApplied(0), std::make_pair(int64_t{2}, int64_t{1}));

  // A worker that leaves holds nobody back; once all left, every pushed clock is final.
  EXPECT_FALSE(t.Tick(0));  // clocks 3, 1, 1
  EXPECT_FALSE(t.Leave(1));
  EXPECT_TRUE(t.Tick(2));  // clocks 3, (1), 2: the slowest present worker finished clock 1
  EXPECT_EQ(t.Unapplied(), std::make_pair(int64_t{1}, int64_t{2}));
  EXPECT_TRUE(t.Leave(2));
  EXPECT_TRUE(t.Leave(0));
  EXPECT_EQ(t.Unapplied(), std::make_pair(int64_t{1}, int64_t{3}));
}

TEST(ClockTableTest, ANewGenerationStartsEveryWorkerAtTheAppliedClock) {
  ClockTable t(2, kPoll);
  t.ResetTo(7);
  EXPECT_EQ(t.ClockAndApplied(1), std::make_pair(int64_t{7}, int64_t{7}));
  (void)t.Tick(0);
  (void)t.Leave(1);
  t.StartGeneration(3);
  for (int w = 0; w < 3; ++w) EXPECT_EQ(t.ClockAndApplied(w).first, 7);
  EXPECT_FALSE(t.Tick(0)) << "worker 1 is present again in the new generation";
}

TEST(ClockTableTest, AReadWaitsUntilTheSlowestIsWithinTheStaleness) {
  ClockTable t(2, kPoll);
  for (int i = 0; i < 3; ++i) (void)t.Tick(0);  // worker 0 at clock 3, worker 1 at 0
  EXPECT_TRUE(t.WaitReadable(0, 3, milliseconds(10000), kNever).ok()) << "3 - 3 <= applied 0";
  std::atomic<bool> read{false};
  std::thread reader([&] {
    EXPECT_TRUE(t.WaitReadable(0, 1, milliseconds(60000), kNever).ok());
    read.store(true);
  });
  // The reader needs applied >= 2: worker 1 finishes two clocks, the server applies them.
  (void)t.Tick(1);
  EXPECT_TRUE(t.Tick(1));
  EXPECT_FALSE(read.load()) << "nothing is applied yet";
  t.SetApplied(t.Unapplied().second);
  reader.join();
  EXPECT_TRUE(read.load());
  EXPECT_EQ(t.max_read_gap(), 3) << "the first read was 3 clocks ahead of worker 1";
}

TEST(ClockTableTest, AStuckReadNamesTheSlowestWorkerOrEndsWhenCancelled) {
  ClockTable t(3, kPoll);
  (void)t.Tick(0);
  (void)t.Tick(0);
  (void)t.Tick(1);
  const Status late = t.WaitReadable(0, 0, milliseconds(20), kNever);
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(late.message().find("for worker 2 (clock 0)"), std::string::npos) << late.ToString();
  const Status cancelled = t.WaitReadable(0, 0, milliseconds(60000), [] { return true; });
  EXPECT_EQ(cancelled.code(), StatusCode::kAborted);
}

TEST(ClockTableTest, BarriersWaitForEveryPresentWorkerAndGoodbyesForAll) {
  ClockTable t(3, kPoll);
  const Deadline far = DeadlineAfter(milliseconds(60000));
  (void)t.Leave(2);
  std::thread first([&] { EXPECT_TRUE(t.Barrier(0, far, kNever).ok()); });
  EXPECT_TRUE(t.Barrier(1, far, kNever).ok()) << "worker 2 left: it is not waited for";
  first.join();
  EXPECT_EQ(t.Barrier(0, DeadlineAfter(milliseconds(20)), kNever).code(),
            StatusCode::kDeadlineExceeded)
      << "worker 1 has not passed a second barrier";

  EXPECT_EQ(t.WaitAllLeft(DeadlineAfter(milliseconds(20)), kNever).code(),
            StatusCode::kDeadlineExceeded);
  std::thread leaver([&] { EXPECT_TRUE(t.WaitAllLeft(far, kNever).ok()); });
  (void)t.Leave(0);
  (void)t.Leave(1);
  leaver.join();
  EXPECT_TRUE(t.Barrier(0, far, [] { return true; }).ok())
      << "with everyone gone a barrier has nobody to wait for";
}

}  // namespace
}  // namespace cohort::collective::ps
