// MetricForwarder over a real metric file, read on a MetricFileReader's thread, and an Outbox
// whose messages are recorded (no sockets): file order, one measurement in flight, reads on the
// poll interval and a last read after the end, and a read that hangs holds nothing but its lines.
#include "agent/metric_forwarder.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

using std::chrono::milliseconds;

class MetricForwarderTest : public ::testing::Test {
 protected:
  // Forward, then (once the reads it asked for are done) again, taking what they found.
  void Forward(bool ended) {
    forwarder_.Forward(ended);
    ASSERT_TRUE(testing::WaitUntil([&] { return reader_->Latest().done >= reader_->asked(); },
                                   std::chrono::seconds(30)));
    forwarder_.Forward(ended);
  }
  void Append(int step) {
    std::ofstream(path_, std::ios::app) << "{\"accuracy\":\"0." << step << "\",\"global_step\":\""
                                        << step << "\",\"timestamp\":" << step << ".5}\n";
  }
  const wire::TrialMeasurementT& Last() const {
    return *sent_.messages.back().second.AsTrialMeasurement();
  }
  size_t SentCount() const { return sent_.messages.size(); }
  void AnswerLast(const Status& status = Status::Ok()) {
    auto answer = outbox_.Answered(sent_.last_id());
    ASSERT_TRUE(answer.has_value());
    forwarder_.OnAnswer(*answer, status);
  }

  testing::TempDir dir_;
  const std::string path_ = dir_.path() + "/hp_metrics.jsonl";
  ManualClock clock_;
  testing::SentMessages sent_;
  Outbox outbox_{clock_, sent_.Transmit()};
  std::shared_ptr<MetricFileReader> reader_ =
      std::make_shared<MetricFileReader>(path_, /*tail=*/true);
  MetricForwarder forwarder_{outbox_,           clock_,    "key", reader_,
                             "trial7",          "chief-0", "7",   milliseconds(200),
                             milliseconds(1000)};
};

TEST_F(MetricForwarderTest, ForwardsInFileOrderOneAtATime) {
  Append(1);
  Append(2);
  Forward(false);
  ASSERT_EQ(SentCount(), 1u);
  EXPECT_EQ(Last().job, "trial7");
  EXPECT_EQ(Last().replica, "chief-0");
  EXPECT_EQ(Last().trial, "7");
  EXPECT_EQ(Last().step, 1);
  EXPECT_DOUBLE_EQ(Last().timestamp, 1.5);
  ASSERT_EQ(Last().metrics.size(), 1u);
  EXPECT_EQ(Last().metrics[0]->key, "accuracy");
  Forward(false);
  EXPECT_EQ(SentCount(), 1u);  // the first is in flight
  AnswerLast();
  Forward(false);
  ASSERT_EQ(SentCount(), 2u);
  EXPECT_EQ(Last().step, 2);
  AnswerLast();
  EXPECT_FALSE(forwarder_.done());  // the replica may write more
}

TEST_F(MetricForwarderTest, ReadsEveryPollIntervalAndOnceMoreAfterTheEnd) {
  Forward(false);  // reads an empty (missing) file
  Append(1);
  Forward(false);
  EXPECT_EQ(SentCount(), 0u);
  clock_.Advance(milliseconds(200));
  Forward(false);
  ASSERT_EQ(SentCount(), 1u);
  AnswerLast();
  Append(2);
  Forward(true);  // ended: read at once, the last time
  ASSERT_EQ(SentCount(), 2u);
  EXPECT_EQ(Last().step, 2);
  EXPECT_FALSE(forwarder_.done());
  AnswerLast();
  EXPECT_TRUE(forwarder_.done());
  Append(3);
  clock_.Advance(milliseconds(200));
  Forward(true);
  EXPECT_EQ(SentCount(), 2u);
}

TEST_F(MetricForwarderTest, UnansweredIsResentAndARefusedOneIsDropped) {
  Append(1);
  Append(2);
  Forward(false);
  ASSERT_NO_FATAL_FAILURE(testing::ExpectResentAfter(
      clock_, milliseconds(1000), [&] { forwarder_.Forward(false); }, sent_));
  EXPECT_EQ(Last().step, 1);
  AnswerLast(InvalidArgument("unknown trial"));
  Forward(false);
  ASSERT_EQ(SentCount(), 3u);
  EXPECT_EQ(Last().step, 2);
}

TEST_F(MetricForwarderTest, AnOutboxResetSendsTheFrontAgainAtOnce) {
  Append(1);
  Forward(false);
  outbox_.Reset();  // the coordinator forgot this node; the agent registered again
  Forward(false);
  ASSERT_EQ(SentCount(), 2u);
  EXPECT_EQ(Last().step, 1);
}

TEST_F(MetricForwarderTest, AReadThatHangsHoldsNothingButItsLines) {
  testing::HeldReads held(path_);
  Append(1);
  forwarder_.Forward(false);  // asks for a read, which hangs
  ASSERT_TRUE(testing::WaitUntil([&] { return held.entered() == 1; }, std::chrono::seconds(30)));
  Append(2);
  clock_.Advance(milliseconds(200));
  forwarder_.Forward(true);  // the attempt ended: the last read is asked for; nothing waits
  forwarder_.Forward(true);
  EXPECT_EQ(SentCount(), 0u);
  EXPECT_FALSE(forwarder_.done());  // the trial's final status waits for the last read
  held.Release();
  ASSERT_NO_FATAL_FAILURE(Forward(true));
  ASSERT_EQ(SentCount(), 1u);
  EXPECT_EQ(Last().step, 1);
  AnswerLast();
  ASSERT_NO_FATAL_FAILURE(Forward(true));
  ASSERT_EQ(SentCount(), 2u);
  EXPECT_EQ(Last().step, 2);
  EXPECT_FALSE(forwarder_.done());
  AnswerLast();
  EXPECT_TRUE(forwarder_.done());
}

TEST_F(MetricForwarderTest, AfterALiveRestartOnlyWhatWasNotAnsweredGoesAgain) {
  // An earlier image of the agent had two of the file's measurements answered.
  MetricForwarder taken_over{outbox_,
                             clock_,
                             "key2",
                             reader_,
                             "trial7",
                             "chief-0",
                             "7",
                             milliseconds(200),
                             milliseconds(1000),
                             /*answered=*/2};
  Append(1);
  Append(2);
  Append(3);
  taken_over.Forward(false);
  ASSERT_TRUE(testing::WaitUntil([&] { return reader_->Latest().done >= reader_->asked(); },
                                 std::chrono::seconds(30)));
  taken_over.Forward(false);
  ASSERT_EQ(SentCount(), 1u);
  EXPECT_EQ(Last().step, 3);
  EXPECT_EQ(taken_over.answered(), 2u);
  auto answer = outbox_.Answered(sent_.last_id());
  ASSERT_TRUE(answer.has_value());
  taken_over.OnAnswer(*answer, Status::Ok());
  EXPECT_EQ(taken_over.answered(), 3u);
}

}  // namespace
}  // namespace cohort::agent
