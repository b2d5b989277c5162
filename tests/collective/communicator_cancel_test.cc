// Communicator::Cancel: a worker that gives up on its calls (the torch backend's abort, an exit on
// an error) is not held by peers that never answer. From another thread, Cancel ends the call in
// progress with kCancelled naming it, whatever the call waits in: a ring step, a Reduction Server
// all-reduce's second half on a thread of its own, a point-to-point receive. Every later call is
// refused. Calls here run under a one-minute deadline and nobody answers them, so a call that
// ended by its deadline would say kDeadlineExceeded, not kCancelled, and take a minute.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "collective/communicator.h"
#include "tests/collective/loopback_job.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

constexpr auto kTimeout = milliseconds(60000);

// Worker 0 runs `call` while worker 1 never calls anything; a thread cancels worker 0's
// communicator 100 ms in. Returns worker 0's status, and the status of a broadcast after it.
// Reducers, if any, end once the workers have left (worker 1 says goodbye; worker 0, cancelled,
// does not, and a reducer gives it up at the round's deadline, whose shortness is not the point).
struct Outcome {
  Status call;
  Status later;
};
Outcome CancelWhileWaiting(int reducers, CommunicatorOptions options,
                           const std::function<Status(Communicator&)>& call) {
  Outcome out;
  std::atomic<bool> worker0_done{false};
  std::vector<std::string> failures;
  std::vector<Status> reducer_status(reducers);
  testing::RunLoopbackJob(
      2, reducers, options,
      [&](Communicator& comm, std::vector<std::string>*) {
        if (comm.rank() == 1) {
          while (!worker0_done.load()) std::this_thread::sleep_for(milliseconds(5));
          return;
        }
        std::thread canceller([&] {
          std::this_thread::sleep_for(milliseconds(100));
          comm.Cancel();
        });
        out.call = call(comm);
        canceller.join();
        float x = 0;
        out.later = comm.Broadcast(&x, 1, DataType::kF32, 0);
        worker0_done.store(true);
      },
      &failures, &reducer_status);
  for (const auto& f : failures) ADD_FAILURE() << f;
  return out;
}

void ExpectCancelled(const Outcome& out, const std::string& call_name) {
  EXPECT_EQ(out.call.code(), StatusCode::kCancelled) << out.call.ToString();
  EXPECT_EQ(out.call.message().rfind(call_name, 0), 0u)
      << "the error names the call: " << out.call.ToString();
  EXPECT_EQ(out.later.code(), StatusCode::kCancelled) << out.later.ToString();
  EXPECT_NE(out.later.message().find("cancelled"), std::string::npos) << out.later.ToString();
}

TEST(CommunicatorCancelTest, EndsARingAllreduceWaitingForAPeer) {
  CommunicatorOptions options = testing::LoopbackOptions(kTimeout, 4096);
  std::vector<float> v(10000, 1.0f);
  ExpectCancelled(CancelWhileWaiting(0, options,
                                     [&](Communicator& c) {
                                       return c.Allreduce(v.data(), v.size(), DataType::kF32,
                                                          ReduceOp::kSum, Algorithm::kRing);
                                     }),
                  "allreduce #0");
}

// Started as the torch backend starts one, its second half to be waited for on a thread of its
// own: the call is cancelled wherever it waits (the reducer takes no chunk of a round before
// every worker's header has come, and worker 1 sends none).
TEST(CommunicatorCancelTest, EndsAReductionServerAllreduceInEitherHalf) {
  CommunicatorOptions options = testing::LoopbackOptions(milliseconds(5000), 4096);
  options.algorithm = Algorithm::kReductionServer;
  std::vector<float> v(10000, 1.0f);
  ExpectCancelled(CancelWhileWaiting(1, options,
                                     [&](Communicator& c) {
                                       auto pending = c.StartAllreduce(
                                           v.data(), v.size(), DataType::kF32, ReduceOp::kSum);
                                       if (!pending.ok()) return pending.status();
                                       Status finished;
                                       std::thread finisher([&] { finished = pending->Finish(); });
                                       finisher.join();
                                       return finished;
                                     }),
                  "allreduce #0");
}

TEST(CommunicatorCancelTest, EndsAPointToPointReceive) {
  CommunicatorOptions options = testing::LoopbackOptions(kTimeout, 4096);
  std::vector<float> v(100);
  ExpectCancelled(CancelWhileWaiting(0, options,
                                     [&](Communicator& c) {
                                       return c.Recv(v.data(), v.size(), DataType::kF32, 1, 7);
                                     }),
                  "recv");
}

}  // namespace
}  // namespace cohort::collective
