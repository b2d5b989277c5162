// LogShipper over a real log file and an Outbox whose messages are recorded (no sockets): chunks
// from the acked offset, eof only once the attempt ended, resends, errors.
#include "agent/log_shipper.h"

#include <gtest/gtest.h>

#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

using std::chrono::milliseconds;

class LogShipperTest : public ::testing::Test {
 protected:
  LogShipperTest() { testing::WriteFile(path_, "0123456789"); }

  // The chunk sent last, and how many messages went out in all.
  const wire::LogChunkT& Last() const { return *sent_.messages.back().second.AsLogChunk(); }
  size_t SentCount() const { return sent_.messages.size(); }
  Outbox::Answer AnswerLast() {
    auto answer = outbox_.Answered(sent_.last_id());
    EXPECT_TRUE(answer.has_value());
    return answer.value_or(Outbox::Answer{});
  }
  // Ships (`ended`: the attempt has ended) and answers the chunk sent last with `acked`.
  void ShipAndAck(bool ended, uint64_t acked) {
    shipper_.Ship(ended);
    shipper_.OnLogAck(AnswerLast(), acked);
  }
  std::string Data(const wire::LogChunkT& chunk) const {
    return std::string(chunk.data.begin(), chunk.data.end());
  }

  testing::TempDir dir_;
  const std::string path_ = dir_.path() + "/attempt-0.log";
  ManualClock clock_;
  testing::SentMessages sent_;
  Outbox outbox_{clock_, sent_.Transmit()};
  LogShipper shipper_{outbox_, "key", "job", "chief-0", 0, path_, 4, milliseconds(400)};
};

TEST_F(LogShipperTest, ShipsChunksFromTheAckedOffsetAndEofOnlyAfterTheEnd) {
  shipper_.Ship(false);
  ASSERT_EQ(SentCount(), 1u);
  EXPECT_EQ(Last().job, "job");
  EXPECT_EQ(Last().replica, "chief-0");
  EXPECT_EQ(Last().offset, 0u);
  EXPECT_EQ(Data(Last()), "0123");
  EXPECT_FALSE(Last().eof);
  shipper_.Ship(false);  // one chunk in flight
  EXPECT_EQ(SentCount(), 1u);

  shipper_.OnLogAck(AnswerLast(), 4);
  shipper_.Ship(false);
  EXPECT_EQ(Last().offset, 4u);
  EXPECT_EQ(Data(Last()), "4567");
  shipper_.OnLogAck(AnswerLast(), 8);
  shipper_.Ship(false);
  EXPECT_EQ(Data(Last()), "89");
  EXPECT_FALSE(Last().eof);  // the replica may still write
  shipper_.OnLogAck(AnswerLast(), 10);
  shipper_.Ship(false);
  EXPECT_EQ(SentCount(), 3u);  // nothing new, not ended: nothing to send
  EXPECT_FALSE(shipper_.done());

  shipper_.Ship(true);
  EXPECT_EQ(Last().offset, 10u);
  EXPECT_TRUE(Last().data.empty());
  EXPECT_TRUE(Last().eof);
  EXPECT_FALSE(shipper_.done());  // until the coordinator acknowledges it
  shipper_.OnLogAck(AnswerLast(), 10);
  EXPECT_TRUE(shipper_.done());
}

TEST_F(LogShipperTest, TheLastDataChunkCarriesEofWhenTheAttemptHasEnded) {
  ShipAndAck(true, 4);
  ShipAndAck(true, 8);
  shipper_.Ship(true);
  EXPECT_EQ(Data(Last()), "89");
  EXPECT_TRUE(Last().eof);
  shipper_.OnLogAck(AnswerLast(), 10);
  EXPECT_TRUE(shipper_.done());
}

TEST_F(LogShipperTest, ACoordinatorHoldingLessMovesTheOffsetBack) {
  ShipAndAck(false, 4);
  ShipAndAck(false, 2);  // it restarted and kept only two bytes
  shipper_.Ship(false);
  EXPECT_EQ(Last().offset, 2u);
  EXPECT_EQ(Data(Last()), "2345");
}

TEST_F(LogShipperTest, AnUnansweredChunkIsResentAfterTheInterval) {
  shipper_.Ship(false);
  uint64_t first = sent_.last_id();
  ASSERT_NO_FATAL_FAILURE(testing::ExpectResentAfter(
      clock_, milliseconds(400), [&] { shipper_.Ship(false); }, sent_));
  EXPECT_EQ(Last().offset, 0u);
  // The answer to the first copy is stale: it does not move the offset.
  shipper_.OnLogAck(*outbox_.Answered(first), 4);
  shipper_.Ship(false);
  EXPECT_EQ(SentCount(), 2u);
  shipper_.OnLogAck(AnswerLast(), 4);
  shipper_.Ship(false);
  EXPECT_EQ(Last().offset, 4u);
}

TEST_F(LogShipperTest, PassingTroubleIsRetriedAndARefusalEndsShipping) {
  shipper_.Ship(false);
  shipper_.OnError(AnswerLast(), Unavailable("store busy"));
  shipper_.Ship(false);
  EXPECT_EQ(SentCount(), 1u);  // not at once: after the resend interval
  clock_.Advance(milliseconds(400));
  shipper_.Ship(false);
  ASSERT_EQ(SentCount(), 2u);
  EXPECT_EQ(Last().offset, 0u);
  shipper_.OnError(AnswerLast(), InvalidArgument("no such job"));
  EXPECT_TRUE(shipper_.done());
  clock_.Advance(milliseconds(400));
  shipper_.Ship(true);
  EXPECT_EQ(SentCount(), 2u);
}

TEST_F(LogShipperTest, NothingMoreToSendWhenTheCoordinatorHoldsMore) {
  ShipAndAck(false, 20);  // more than the file has
  shipper_.Ship(false);
  EXPECT_FALSE(shipper_.done());
  shipper_.Ship(true);
  EXPECT_TRUE(shipper_.done());
  EXPECT_EQ(SentCount(), 1u);
}

TEST_F(LogShipperTest, ATakenOverShipperStartsWhereTheCoordinatorsCopyEnds) {
  LogShipper taken_over{outbox_,    "key2", "job", "chief-0", 0, path_, 4, milliseconds(400),
                        /*acked=*/6};
  EXPECT_EQ(taken_over.acked(), 6u);
  taken_over.Ship(false);
  ASSERT_EQ(SentCount(), 1u);
  EXPECT_EQ(Last().offset, 6u);
  EXPECT_EQ(Data(Last()), "6789");
}

}  // namespace
}  // namespace cohort::agent
