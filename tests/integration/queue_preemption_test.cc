// Priority preemption end to end: a real coordinator (with a configured queue) and agent on
// loopback run the real digits-trainer. A low-priority job fills the node's GPUs; a high-priority
// job arrives; the scheduler preempts the low one through the stop path (SIGTERM, the trainer
// checkpoints within the grace period, its replicas end PREEMPTED), runs the high one to success,
// then resumes the low one from its checkpoint to success with a final model equal byte for byte
// to an uninterrupted run's, its restart budget untouched. Both jobs' events say what happened.
// It also prints the time from the high job's submit to RUNNING without the victims' stop (from
// the coordinator's own event times; see bench/RESULTS.md "Queues and preemption").
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "common/client.h"
#include "tests/testing/trainer_cluster_test.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
using namespace std::chrono_literals;

class QueuePreemptionTest : public ct::TrainerClusterTest {
 protected:
  void SetUp() override {
    ct::ClusterOptions options;
    // A queue of its own with a quota of the node's GPUs; the coordinator's stop grace is the
    // grace period the preempted trainer gets.
    options.coordinator_args = {"--queue", "team gpus=2 weight=2", "--stop-grace", "20s"};
    ASSERT_NO_FATAL_FAILURE(StartTrainerCluster(2000, options));
  }

  // Chief + one worker with one GPU each; no periodic checkpoints, so the only checkpoint is the
  // one a stop makes. A pause after each epoch (the model is unchanged) keeps the low job running
  // for seconds: unpaused, 30 epochs take well under a second on a quiet machine, and the job
  // could end before the high one came.
  std::string JobYaml(const std::string& name, const std::string& priority, int epochs) {
    return TrainerJob(name, "{gpus: 1, cpus: 1}",
                      "--epochs=" + std::to_string(epochs) +
                          ", --checkpoint-every=0, --seed=5, --hidden=32, --batch-size=48, "
                          "--optimizer=momentum, --epoch-pause-ms=100",
                      "{timeout: 5m, max_restarts: 2, restart_job_on_worker_restart: true, "
                      "queue: team, priority: " +
                          priority + "}");
  }

  static int64_t EventTime(const wire::JobInfoT& job, const std::string& prefix) {
    for (const auto& e : job.events) {
      if (e->message.rfind(prefix, 0) == 0) return e->time_ms;
    }
    return -1;
  }
  static bool HasEvent(const wire::JobInfoT& job, const std::string& text) {
    for (const auto& e : job.events) {
      if (e->message.find(text) != std::string::npos) return true;
    }
    return false;
  }
};

TEST_F(QueuePreemptionTest, HighPriorityPreemptsLowWhichResumesFromItsCheckpointUnchanged) {
  ASSERT_EQ(cluster_->StartAgent({UniqueNodeId("gpu-node"), 2}), "");
  auto client = cluster_->Client();
  constexpr int kEpochs = 30;

  // Unknown queue and priority class: refused at submit, naming what exists.
  std::string bad = JobYaml("bad", "low", 1);
  auto refused = client.Submit(bad.replace(bad.find("queue: team"), 11, "queue: nope"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no queue named 'nope' (queues: default, team)"),
            std::string::npos)
      << refused.status().ToString();
  refused = client.Submit(JobYaml("bad", "urgent", 1));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no priority class named 'urgent'"), std::string::npos)
      << refused.status().ToString();

  // The reference: the low job's spec, never interrupted.
  const std::string reference_model =
      ReferenceModel(client, "reference", JobYaml("reference", "low", kEpochs));
  ASSERT_FALSE(reference_model.empty());

  ASSERT_TRUE(client.Submit(JobYaml("low", "low", kEpochs)).ok());
  ASSERT_TRUE(WaitForRunning(client, "low", [&] {
    return ChiefLog(client, "low").find("epoch 2/") != std::string::npos;
  })) << "the low job never got to its second epoch";

  // The queue shows the low job holding both GPUs of its quota.
  auto queues = client.ListQueues();
  ASSERT_TRUE(queues.ok()) << queues.status().ToString();
  ASSERT_EQ(queues->size(), 2u);
  EXPECT_EQ((*queues)[1].name, "team");
  EXPECT_EQ((*queues)[1].gpu_quota, 2);
  EXPECT_EQ((*queues)[1].gpus_used, 2);
  EXPECT_EQ((*queues)[1].running, 1);

  ASSERT_TRUE(client.Submit(JobYaml("high", "high", 3)).ok());
  // The low job is preempted: its replicas end PREEMPTED, well within the 20 s grace period.
  // (A DDP peer may exit on its own when the chief leaves: any end of attempt 0 counts.)
  auto submitted = std::chrono::steady_clock::now();
  wire::JobInfoT stopped;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto info = client.GetJob("low");
        if (!info.ok()) return false;
        for (const auto& r : info->replicas) {
          if (r->attempt == 0 && r->state < wire::ReplicaState::SUCCEEDED) return false;
        }
        stopped = std::move(*info);
        return true;
      },
      20s))
      << "the low job's replicas did not stop within the grace period";
  EXPECT_LT(std::chrono::steady_clock::now() - submitted, 20s);
  for (const auto& r : stopped.replicas) {
    if (r->replica == "chief-0" && r->attempt == 0) {
      EXPECT_EQ(r->state, wire::ReplicaState::PREEMPTED) << r->message;
    }
  }
  EXPECT_TRUE(std::filesystem::exists(OutputDir("low") + "/checkpoints"))
      << "no checkpoint on preemption";

  wire::JobInfoT high = ct::WaitForJobEnd(client, "high", 120s);
  ASSERT_EQ(high.state, wire::JobState::SUCCEEDED) << high.message;
  wire::JobInfoT low = ct::WaitForJobEnd(client, "low", 180s);
  ASSERT_EQ(low.state, wire::JobState::SUCCEEDED) << low.message;

  EXPECT_EQ(low.restarts, 0) << "a preemption spent restart budget";
  EXPECT_EQ(high.restarts, 0);
  EXPECT_TRUE(HasEvent(low, "preempted by job high (priority high, queue team)"));
  EXPECT_TRUE(HasEvent(low, "no restart spent"));
  EXPECT_TRUE(HasEvent(high, "preempted job low (priority low, queue team) to run"));
  for (const auto& r : low.replicas) EXPECT_EQ(r->attempt, 1) << r->replica;

  const std::string chief_log = ChiefLog(client, "low");
  EXPECT_NE(chief_log.find("stop requested"), std::string::npos) << chief_log;
  EXPECT_NE(chief_log.find("restored checkpoint"), std::string::npos) << chief_log;
  EXPECT_TRUE(Model("low") == reference_model)
      << "the preempted and resumed run's model differs from the uninterrupted one";

  // Submit -> RUNNING with preemption, the victims' stop (SIGTERM to gone) left out: from submit
  // to the preemption, plus from the placement (right after the victims are gone) to RUNNING.
  int64_t preempt = EventTime(low, "preempted by job high");
  int64_t placed = EventTime(high, "placed on");
  int64_t running = EventTime(high, "running:");
  ASSERT_GT(preempt, 0);
  ASSERT_GT(placed, 0);
  ASSERT_GT(running, 0);
  std::printf(
      "high-priority submit -> RUNNING with preemption: %lld ms in all; %lld ms without the "
      "victims' stop (submit -> preemption %lld ms, placement -> RUNNING %lld ms)\n",
      static_cast<long long>(running - high.create_time_ms),
      static_cast<long long>((preempt - high.create_time_ms) + (running - placed)),
      static_cast<long long>(preempt - high.create_time_ms),
      static_cast<long long>(running - placed));
  EXPECT_EQ(TrainersLeft(), 0u) << "trainer process(es) left";
}

}  // namespace
}  // namespace cohort
