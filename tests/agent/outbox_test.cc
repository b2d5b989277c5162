// Outbox: one message in flight per stream, resends after the interval, answers matched to the
// message in flight or an older one; no sockets (tests/agent/test_util.h records what is sent).
#include "agent/outbox.h"

#include <gtest/gtest.h>

#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

using std::chrono::milliseconds;

wire::BodyUnion Heartbeat() {
  wire::BodyUnion body;
  body.Set(wire::HeartbeatT());
  return body;
}

class OutboxTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  testing::SentMessages sent_;
  Outbox outbox_{clock_, sent_.Transmit()};
  const Outbox::Stream status_{Outbox::Kind::kStatus, "job\nchief-0\n0"};
  const Outbox::Stream log_{Outbox::Kind::kLog, "job\nchief-0\n0"};
  const Outbox::Stream other_{Outbox::Kind::kStatus, "job\nworker-0\n0"};
};

TEST_F(OutboxTest, AStreamSendsAgainOnlyAfterItsResendInterval) {
  EXPECT_TRUE(outbox_.Ready(status_, milliseconds(200)));
  uint64_t id = outbox_.Send(status_, 1, Heartbeat());
  EXPECT_EQ(id, sent_.last_id());
  EXPECT_TRUE(outbox_.Awaits(id));
  EXPECT_FALSE(outbox_.Ready(status_, milliseconds(200)));
  EXPECT_TRUE(outbox_.Ready(log_, milliseconds(200)));  // streams are independent
  EXPECT_TRUE(outbox_.Ready(other_, milliseconds(200)));
  clock_.Advance(milliseconds(199));
  EXPECT_FALSE(outbox_.Ready(status_, milliseconds(200)));
  clock_.Advance(milliseconds(1));
  EXPECT_TRUE(outbox_.Ready(status_, milliseconds(200)));
}

TEST_F(OutboxTest, AnswersSayWhetherTheyAnswerTheMessageInFlight) {
  uint64_t first = outbox_.Send(status_, 1, Heartbeat());
  clock_.Advance(milliseconds(200));
  uint64_t second = outbox_.Send(status_, 2, Heartbeat());

  auto late = outbox_.Answered(first);
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(late->stream, status_);
  EXPECT_EQ(late->version, 1u);
  EXPECT_FALSE(late->current);
  EXPECT_FALSE(outbox_.Awaits(first));

  auto answer = outbox_.Answered(second);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->version, 2u);
  EXPECT_TRUE(answer->current);
  // An answer leaves the stream in flight until the stream settles it.
  EXPECT_FALSE(outbox_.Ready(status_, milliseconds(200)));
  outbox_.Settle(status_);
  EXPECT_TRUE(outbox_.Ready(status_, milliseconds(200)));

  EXPECT_FALSE(outbox_.Answered(second).has_value());  // answered once only
  EXPECT_FALSE(outbox_.Answered(12345).has_value());   // never sent here
}

TEST_F(OutboxTest, RefusalsForNowAreTransientOthersAreNot) {
  EXPECT_TRUE(Outbox::Transient(ResourceExhausted("the disk is full")));
  EXPECT_TRUE(Outbox::Transient(Unavailable("the coordinator could not store its state")));
  EXPECT_FALSE(Outbox::Transient(Status::Ok()));
  EXPECT_FALSE(Outbox::Transient(FailedPrecondition("node is not registered")));
  EXPECT_FALSE(Outbox::Transient(InvalidArgument("bad update")));
  EXPECT_FALSE(Outbox::Transient(NotFound("no such job")));
}

TEST_F(OutboxTest, AMessageLeftInFlightAfterATransientRefusalGoesAgainAfterTheInterval) {
  uint64_t first = outbox_.Send(status_, 1, Heartbeat());
  auto refused = outbox_.Answered(first);
  ASSERT_TRUE(refused.has_value());
  EXPECT_TRUE(refused->current);
  // The stream does not settle a transient refusal: nothing goes out before the interval.
  EXPECT_FALSE(outbox_.Ready(status_, milliseconds(200)));
  clock_.Advance(milliseconds(200));
  ASSERT_TRUE(outbox_.Ready(status_, milliseconds(200)));
  uint64_t again = outbox_.Send(status_, 1, Heartbeat());
  EXPECT_NE(again, first);
  EXPECT_EQ(sent_.messages.size(), 2u);
  auto taken = outbox_.Answered(again);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->version, 1u);
  EXPECT_TRUE(taken->current);
}

TEST_F(OutboxTest, ResetDropsEverythingInFlight) {
  uint64_t id = outbox_.Send(status_, 1, Heartbeat());
  outbox_.Send(log_, 100, Heartbeat());
  outbox_.Reset();
  EXPECT_TRUE(outbox_.Ready(status_, milliseconds(200)));
  EXPECT_TRUE(outbox_.Ready(log_, milliseconds(200)));
  EXPECT_FALSE(outbox_.Awaits(id));
  EXPECT_FALSE(outbox_.Answered(id).has_value());
}

TEST_F(OutboxTest, CloseEndsEveryStreamOfOneAttempt) {
  uint64_t id = outbox_.Send(status_, 1, Heartbeat());
  outbox_.Send(log_, 100, Heartbeat());
  outbox_.Send(other_, 1, Heartbeat());
  outbox_.Close(status_.key);
  EXPECT_TRUE(outbox_.Ready(status_, milliseconds(200)));
  EXPECT_TRUE(outbox_.Ready(log_, milliseconds(200)));
  EXPECT_FALSE(outbox_.Ready(other_, milliseconds(200)));
  // A late answer is still recognised, as no longer in flight.
  auto answer = outbox_.Answered(id);
  ASSERT_TRUE(answer.has_value());
  EXPECT_FALSE(answer->current);
}

TEST_F(OutboxTest, UnansweredRequestsAreForgottenAfterAWhile) {
  uint64_t old_id = outbox_.Send(status_, 1, Heartbeat());
  clock_.Advance(milliseconds(30'000));
  uint64_t new_id = outbox_.Send(other_, 1, Heartbeat());
  clock_.Advance(milliseconds(30'001));
  outbox_.ForgetOlderThan(milliseconds(60'000));
  EXPECT_FALSE(outbox_.Awaits(old_id));
  EXPECT_TRUE(outbox_.Awaits(new_id));
}

}  // namespace
}  // namespace cohort::agent
