// The Communicator's calls in the flight recorder (common/flight_recorder.h), and the error of a
// call whose peer is alive but silent: it names the peer, the operation and its sequence number.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collective/communicator.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "common/flight_recorder.h"
#include "tests/collective/test_util.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

// `workers` Communicators on threads over loopback, each recording into its own recorder.
struct RecordedJob {
  explicit RecordedJob(int workers) : fabric(workers), recorders(workers) {
    for (auto& r : recorders) r = std::move(*FlightRecorder::CreateInMemory(64, 0, workers));
  }
  void Run(milliseconds timeout, const std::function<void(int, Communicator&)>& body) {
    const int n = static_cast<int>(recorders.size());
    testing::RunRanks(n, [&](int r) {
      CommunicatorOptions o;
      o.transport = CommunicatorOptions::TransportKind::kLoopback;
      o.loopback_fabric = &fabric;
      o.timeout = timeout;
      o.flight_recorder = recorders[r].get();
      auto comm = Communicator::Create(bootstrap, r, n, 0, o);
      ASSERT_TRUE(comm.ok()) << comm.status().ToString();
      body(r, **comm);
    });
  }
  FlightRecorderSnapshot Snapshot(int rank) const {
    return FlightRecorderReader::Attach(*recorders[rank])->Snapshot();
  }

  LoopbackFabric fabric;
  InMemoryBootstrap bootstrap;
  std::vector<std::unique_ptr<FlightRecorder>> recorders;
};

TEST(FlightRecorderCollective, EveryCallIsRecordedOnceOnEveryRank) {
  constexpr int kWorkers = 3;
  RecordedJob job(kWorkers);
  job.Run(milliseconds(10000), [](int r, Communicator& comm) {
    std::vector<float> grads(1024, 1.0f);
    EXPECT_TRUE(
        comm.Allreduce(grads.data(), grads.size(), DataType::kF32, ReduceOp::kSum, Algorithm::kRing)
            .ok());
    std::vector<int64_t> ids(16, r);
    EXPECT_TRUE(comm.Broadcast(ids.data(), ids.size(), DataType::kI64, 1).ok());
    EXPECT_TRUE(comm.Barrier().ok());
    std::vector<double> all(kWorkers * 8);
    EXPECT_TRUE(comm.Allgather(all.data() + r * 8, all.data(), 8, DataType::kF64).ok());
    int32_t token = 7;
    if (r == 0) {
      EXPECT_TRUE(comm.Send(&token, 1, DataType::kI32, 1, 5).ok());
    } else if (r == 1) {
      EXPECT_TRUE(comm.Recv(&token, 1, DataType::kI32, 0, 5).ok());
    }
  });
  for (int r = 0; r < kWorkers; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    FlightRecorderSnapshot s = job.Snapshot(r);
    ASSERT_EQ(s.recent.size(), r < 2 ? 5u : 4u);
    const FlightRecord& allreduce = s.recent[0].record;
    EXPECT_EQ(allreduce.op, FlightOp::kAllreduce);
    EXPECT_EQ(allreduce.op_seq, 0u);
    EXPECT_EQ(allreduce.bytes, 4096u);
    EXPECT_EQ(FlightDataTypeName(allreduce.dtype), "f32");
    EXPECT_EQ(FlightAlgorithmName(allreduce.algorithm), "ring");
    EXPECT_EQ(allreduce.peer, -1);
    EXPECT_EQ(allreduce.group_size, kWorkers);
    const FlightRecord& broadcast = s.recent[1].record;
    EXPECT_EQ(broadcast.op, FlightOp::kBroadcast);
    EXPECT_EQ(broadcast.op_seq, 1u);
    EXPECT_EQ(broadcast.peer, 1) << "the root";
    EXPECT_EQ(FlightDataTypeName(broadcast.dtype), "i64");
    EXPECT_EQ(broadcast.bytes, 128u);
    EXPECT_EQ(s.recent[2].record.op, FlightOp::kBarrier);
    EXPECT_EQ(s.recent[2].record.op_seq, 2u);
    EXPECT_EQ(s.recent[2].record.dtype, 0) << "a barrier moves no elements";
    EXPECT_EQ(s.recent[3].record.op, FlightOp::kAllgather);
    EXPECT_EQ(s.recent[3].record.op_seq, 3u);
    if (r < 2) {
      const FlightRecord& p2p = s.recent[4].record;
      EXPECT_EQ(p2p.op, r == 0 ? FlightOp::kSend : FlightOp::kRecv);
      EXPECT_EQ(p2p.op_seq, 5u) << "the tag";
      EXPECT_EQ(p2p.peer, 1 - r);
    }
    for (const FlightEntry& e : s.recent) {
      EXPECT_EQ(e.record.outcome, FlightOutcome::kOk) << DescribeFlightEntry(e, s.taken_ns);
      EXPECT_GE(e.record.end_ns, e.record.start_ns);
      EXPECT_EQ(e.record.enqueue_ns, e.record.start_ns);
    }
    ASSERT_EQ(s.communicators.size(), 1u);
    EXPECT_EQ(*s.communicators[0].last_completed_seq, 3u);
    EXPECT_FALSE(s.communicators[0].current.has_value());
  }
}

TEST(FlightRecorderCollective, ACallerSetEnqueueTimeIsRecorded) {
  RecordedJob job(1);
  int64_t queued = 0;
  job.Run(milliseconds(10000), [&](int, Communicator& comm) {
    queued = FlightClockNs() - 3'000'000;
    comm.set_enqueue_time(queued);
    float x = 1;
    EXPECT_TRUE(comm.Allreduce(&x, 1, DataType::kF32, ReduceOp::kSum).ok());
    comm.set_enqueue_time(0);
    EXPECT_TRUE(comm.Barrier().ok());
  });
  FlightRecorderSnapshot s = job.Snapshot(0);
  ASSERT_EQ(s.recent.size(), 2u);
  EXPECT_EQ(s.recent[0].record.enqueue_ns, queued);
  EXPECT_LT(s.recent[0].record.enqueue_ns, s.recent[0].record.start_ns);
  EXPECT_EQ(s.recent[1].record.enqueue_ns, s.recent[1].record.start_ns);
}

// Worker 0 enters call #1 while worker 1, alive, never does: worker 0's error names worker 1, the
// operation and #1, and meanwhile worker 0's recorder shows it in that call (what the agent sees).
void ExpectSilentPeerNamed(const std::string& op,
                           const std::function<Status(Communicator&)>& call) {
  SCOPED_TRACE(op);
  RecordedJob job(2);
  std::promise<void> worker0_done;
  std::shared_future<void> done = worker0_done.get_future().share();
  Status error;
  std::optional<FlightEntry> seen_running;
  job.Run(milliseconds(600), [&](int r, Communicator& comm) {
    EXPECT_TRUE(comm.Barrier().ok());  // call #0, together
    if (r == 0) {
      error = call(comm);
      worker0_done.set_value();
      return;
    }
    // Worker 1 stays silent and watches worker 0's recorder until worker 0 gives up.
    auto reader = FlightRecorderReader::Attach(*job.recorders[0]);
    while (done.wait_for(milliseconds(5)) != std::future_status::ready) {
      FlightRecorderSnapshot s = reader->Snapshot();
      if (!s.communicators.empty() && s.communicators[0].current) {
        seen_running = s.communicators[0].current;
      }
    }
  });
  EXPECT_EQ(error.code(), StatusCode::kDeadlineExceeded) << error.ToString();
  EXPECT_NE(error.message().find(op + " #1 ("), std::string::npos) << error.ToString();
  EXPECT_NE(error.message().find("worker 1"), std::string::npos) << error.ToString();
  ASSERT_TRUE(seen_running.has_value());
  EXPECT_EQ(FlightOpName(seen_running->record.op), op);
  EXPECT_EQ(seen_running->record.op_seq, 1u);
  FlightRecorderSnapshot s = job.Snapshot(0);
  ASSERT_EQ(s.recent.size(), 2u);
  EXPECT_EQ(s.recent[1].record.outcome, FlightOutcome::kFailed);
  EXPECT_EQ(s.recent[1].record.status_code, static_cast<uint8_t>(StatusCode::kDeadlineExceeded));
  EXPECT_GE(s.recent[1].record.end_ns - s.recent[1].record.start_ns, 600'000'000)
      << "it failed at its deadline, not before";
}

TEST(FlightRecorderCollective, ASilentPeerIsNamedWithTheOperationAndItsSequenceNumber) {
  ExpectSilentPeerNamed("allreduce", [](Communicator& comm) {
    std::vector<float> x(256, 1.0f);
    return comm.Allreduce(x.data(), x.size(), DataType::kF32, ReduceOp::kSum, Algorithm::kRing);
  });
  ExpectSilentPeerNamed("broadcast", [](Communicator& comm) {
    std::vector<int32_t> x(16);
    return comm.Broadcast(x.data(), x.size(), DataType::kI32, 1);
  });
  ExpectSilentPeerNamed("allgather", [](Communicator& comm) {
    std::vector<int32_t> x(32);
    return comm.Allgather(x.data(), x.data(), 16, DataType::kI32);
  });
}

}  // namespace
}  // namespace cohort::collective
