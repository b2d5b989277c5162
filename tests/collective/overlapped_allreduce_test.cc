// Communicator::StartAllreduce: an all-reduce in two halves, so that the next call's chunks travel
// while this call's results come back (the torch backend runs DDP's buckets this way). The calls'
// results must be what whole calls give, on every worker, with or without wire compression; the
// second halves may run on another thread; the contract's limits (two calls in flight, no other
// collective meanwhile) are refused, not run.
#include <gtest/gtest.h>

#include <thread>

#include "collective/communicator.h"
#include "tests/collective/loopback_job.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

// Small integers: exact in float32 and in bf16 (8 significant bits), sums of three included.
float Input(int rank, int call, size_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>((i + call) % 7) + call % 5);
}
float Expected(int workers, int call, size_t i) {
  float sum = 0;
  for (int w = 0; w < workers; ++w) sum += Input(w, call, i);
  return sum;
}

std::string CheckCall(int workers, int call, const std::vector<float>& data) {
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] != Expected(workers, call, i)) {
      return "call " + std::to_string(call) + ": element " + std::to_string(i) + " is " +
             std::to_string(data[i]) + ", expected " + std::to_string(Expected(workers, call, i));
    }
  }
  return "";
}

class OverlappedAllreduceTest : public ::testing::TestWithParam<DataType> {};

// As the torch backend runs them: this thread starts call k while a thread of its own finishes
// call k-1; before starting call k+1 it waits for that thread (at most one call pending).
TEST_P(OverlappedAllreduceTest, SecondHalvesOnAnotherThreadGiveWholeCallsResults) {
  constexpr int kWorkers = 3;
  constexpr int kReducers = 2;
  const std::vector<size_t> sizes = {100000, 70001, 5, 300000, 4096, 250000};
  constexpr int kCalls = 12;
  CommunicatorOptions options = testing::LoopbackOptions(milliseconds(60000), 16 << 10);
  options.algorithm = Algorithm::kReductionServer;
  options.wire_dtype = GetParam();
  std::vector<std::string> failures;
  testing::RunLoopbackJob(
      kWorkers, kReducers, options,
      [&](Communicator& comm, std::vector<std::string>* fail) {
        std::vector<std::vector<float>> bufs(kCalls);
        std::vector<Status> finished(kCalls);
        std::thread finisher;
        for (int k = 0; k < kCalls; ++k) {
          auto& b = bufs[k];
          b.resize(sizes[k % sizes.size()]);
          for (size_t i = 0; i < b.size(); ++i) b[i] = Input(comm.rank(), k, i);
          auto pending = comm.StartAllreduce(b.data(), b.size(), DataType::kF32, ReduceOp::kSum);
          if (finisher.joinable()) finisher.join();  // call k-1, which overlapped this start
          if (!pending.ok()) {
            fail->push_back("start of call " + std::to_string(k) + ": " +
                            pending.status().ToString());
            return;
          }
          finisher = std::thread(
              [&finished, k, p = std::move(*pending)]() mutable { finished[k] = p.Finish(); });
        }
        if (finisher.joinable()) finisher.join();
        for (int k = 0; k < kCalls; ++k) {
          if (!finished[k].ok()) {
            fail->push_back("call " + std::to_string(k) + ": " + finished[k].ToString());
          } else if (std::string e = CheckCall(kWorkers, k, bufs[k]); !e.empty()) {
            fail->push_back(e);
          }
        }
      },
      &failures);
  EXPECT_TRUE(failures.empty()) << ::testing::PrintToString(failures);
}

INSTANTIATE_TEST_SUITE_P(Wire, OverlappedAllreduceTest,
                         ::testing::Values(DataType::kF32, DataType::kBF16),
                         [](const auto& info) { return std::string(DataTypeName(info.param)); });

// Two pending calls are the most: a third start, and any other collective meanwhile, are refused
// with kFailedPrecondition before anything is sent (the communicator stays usable).
TEST(OverlappedAllreduceLimitsTest, AThirdCallAndOtherCollectivesWaitForThePendingOnes) {
  constexpr int kWorkers = 2;
  CommunicatorOptions options = testing::LoopbackOptions(milliseconds(60000), 16 << 10);
  options.algorithm = Algorithm::kReductionServer;
  std::vector<std::string> failures;
  testing::RunLoopbackJob(
      kWorkers, 1, options,
      [&](Communicator& comm, std::vector<std::string>* fail) {
        auto expect = [&](const Status& s, StatusCode code, const std::string& what) {
          if (s.code() != code) fail->push_back(what + ": " + s.ToString());
        };
        std::vector<std::vector<float>> bufs(4, std::vector<float>(1000));
        for (int k = 0; k < 4; ++k) {
          for (size_t i = 0; i < 1000; ++i) bufs[k][i] = Input(comm.rank(), k, i);
        }
        auto a = comm.StartAllreduce(bufs[0].data(), 1000, DataType::kF32, ReduceOp::kSum);
        auto b = comm.StartAllreduce(bufs[1].data(), 1000, DataType::kF32, ReduceOp::kSum);
        if (!a.ok() || !b.ok()) {
          fail->push_back("starts: " + a.status().ToString() + " / " + b.status().ToString());
          return;
        }
        auto c = comm.StartAllreduce(bufs[2].data(), 1000, DataType::kF32, ReduceOp::kSum);
        expect(c.status(), StatusCode::kFailedPrecondition, "third start");
        expect(comm.Broadcast(bufs[2].data(), 1000, DataType::kF32, 0),
               StatusCode::kFailedPrecondition, "broadcast while pending");
        expect(a->Finish(), StatusCode::kOk, "finish a");
        // One pending: a ring all-reduce (which runs whole) still waits for it.
        expect(
            comm.Allreduce(bufs[2].data(), 1000, DataType::kF32, ReduceOp::kSum, Algorithm::kRing),
            StatusCode::kFailedPrecondition, "ring while pending");
        expect(b->Finish(), StatusCode::kOk, "finish b");
        expect(comm.Allreduce(bufs[2].data(), 1000, DataType::kF32, ReduceOp::kSum),
               StatusCode::kOk, "all-reduce after both finished");
        expect(comm.Broadcast(bufs[3].data(), 1000, DataType::kF32, 0), StatusCode::kOk,
               "broadcast after both finished");
        for (int k = 0; k < 3; ++k) {
          if (std::string e = CheckCall(kWorkers, k, bufs[k]); !e.empty()) fail->push_back(e);
        }
      },
      &failures);
  EXPECT_TRUE(failures.empty()) << ::testing::PrintToString(failures);
}

}  // namespace
}  // namespace cohort::collective
