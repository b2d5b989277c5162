// digits-trainer's parameter-server mode over the loopback transport (ranks and servers are
// threads): synchronous ranks end with one model, asynchronous training reaches an accuracy
// within 3 points of synchronous, and Adam on the servers trains.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "collective/ps/ps_server.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "examples/digits_trainer/digits_split_test.h"
#include "examples/digits_trainer/ps_trainer.h"

namespace cohort::examples {
namespace {

using collective::LoopbackFabric;
using collective::ps::OptimizerKind;
using collective::ps::PsServer;
using collective::ps::PsServerOptions;
using collective::ps::PsWorker;

class DigitsPsTest : public DigitsSplitTest {
 protected:
  // Trains with `workers` ranks and `servers` servers; returns every rank's result.
  std::vector<TrainResult> Run(int workers, int servers, int staleness, OptimizerKind optimizer,
                               int epochs) {
    LoopbackFabric fabric(workers + servers);
    std::vector<std::unique_ptr<PsServer>> ps;
    for (int j = 0; j < servers; ++j) {
      PsServerOptions o;
      o.num_workers = workers;
      o.num_servers = servers;
      o.server_index = j;
      o.poll_interval = std::chrono::milliseconds(20);
      ps.push_back(std::make_unique<PsServer>(o));
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int j = 0; j < servers; ++j) {
      threads.emplace_back([&, j] {
        auto t = fabric.CreateTransport(workers + j);
        (void)ps[j]->Serve(*t, stop);
      });
    }
    std::vector<TrainResult> results(workers);
    std::vector<std::thread> ranks;
    for (int r = 0; r < workers; ++r) {
      ranks.emplace_back([&, r] {
        auto w = PsWorker::Attach(fabric.CreateTransport(r), workers, servers, {});
        ASSERT_TRUE(w.ok());
        PsTrainerOptions po;
        po.base.epochs = epochs;
        po.base.learning_rate = 0.05;
        po.base.log = nullptr;
        po.optimizer = optimizer;
        po.staleness = staleness;
        PsTrainer trainer(po, train_, test_, w->get());
        auto result = trainer.Run();
        ASSERT_TRUE(result.ok()) << result.status().ToString();
        results[r] = *result;
      });
    }
    for (auto& t : ranks) t.join();
    stop.store(true);
    for (auto& t : threads) t.join();
    return results;
  }
};

TEST_F(DigitsPsTest, SynchronousRanksEndWithOneModelThatTrains) {
  // (Synchronous mode against a single-process optimizer, element by element, is in
  // tests/collective/ps_loopback_test.cc.)
  auto results = Run(3, 2, 0, OptimizerKind::kMomentum, 3);
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) {
    EXPECT_EQ(r.params, results[0].params);
    EXPECT_EQ(r.steps, results[0].steps);
  }
  EXPECT_GT(results[0].test_accuracy, 0.9);
}

// Asynchronous updates depend on how the threads are scheduled: over 18 runs here one
// asynchronous run ended at 0.9415-0.9694 against a synchronous 0.9666 (2 of them more than two
// points below, one of those under CI's load), and under CI's heaviest load two runs of three
// ended at 0.9304 and 0.9359 (a median of three 0.0006 short of three points). The median of
// five runs must be within three points; synchronous training is deterministic.
TEST_F(DigitsPsTest, AsynchronousAccuracyMedianOfFiveWithinThreePointsOfSynchronous) {
  const double a_sync = Run(4, 2, 0, OptimizerKind::kMomentum, 8)[0].test_accuracy;
  std::vector<double> a_async;
  for (int run = 0; run < 5; ++run)
    a_async.push_back(Run(4, 2, -1, OptimizerKind::kMomentum, 8)[0].test_accuracy);
  std::sort(a_async.begin(), a_async.end());
  std::printf(
      "test accuracy after 8 epochs: synchronous %.4f, asynchronous %.4f %.4f %.4f %.4f %.4f\n",
      a_sync, a_async[0], a_async[1], a_async[2], a_async[3], a_async[4]);
  EXPECT_GT(a_sync, 0.9);
  EXPECT_GE(a_async[2], a_sync - 0.03) << "sync " << a_sync << ", median async " << a_async[2];
}

// Synchronous, so that the result is one number, not a draw: with staleness 1 the two ranks' pulls
// interleave as the threads are scheduled, and one CI run ended at 0.8997. (The staleness bound
// itself is tested in tests/collective/ps_loopback_test.cc.)
TEST_F(DigitsPsTest, AdamOnTheServersTrains) {
  auto results = Run(2, 1, 0, OptimizerKind::kAdam, 3);
  std::printf("test accuracy after 3 epochs of Adam on the server: %.4f\n",
              results[0].test_accuracy);
  EXPECT_EQ(results[1].params, results[0].params);
  EXPECT_GT(results[0].test_accuracy, 0.9);
}

}  // namespace
}  // namespace cohort::examples
