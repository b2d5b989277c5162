// Preemption-safe training end to end: real coordinator and agents on loopback run the
// real digits-trainer (chief + worker, gradients averaged over the collective ring). An agent is
// SIGKILLed mid-training; the job must finish SUCCEEDED on the other node, restored from its
// newest checkpoint, with a final model equal byte for byte to an uninterrupted run's, and no
// trainer process may outlive its job.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "common/client.h"
#include "tests/testing/trainer_cluster_test.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

class PreemptionTest : public ct::TrainerClusterTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartTrainerCluster(1000)); }

  // Chief + one worker; about 30 steps an epoch, a checkpoint every `checkpoint_every` steps
  // (0: only when stopped by a signal). A pause after each epoch (the model is unchanged) keeps
  // the job running for seconds, so the fault lands mid-run even on a quiet, fast machine.
  std::string JobYaml(const std::string& name, int checkpoint_every = 30) {
    return TrainerJob(name, "{cpus: 1}",
                      "--epochs=60, --checkpoint-every=" + std::to_string(checkpoint_every) +
                          ", --seed=3, --hidden=32, --batch-size=48, --optimizer=momentum, "
                          "--epoch-pause-ms=50",
                      "{timeout: 5m, max_restarts: 3, restart_job_on_worker_restart: true}");
  }

  bool HasCheckpoint(const std::string& job) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(OutputDir(job) + "/checkpoints", ec)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("ckpt-", 0) == 0 && name.find(".tmp") == std::string::npos) return true;
    }
    return false;
  }
};

TEST_F(PreemptionTest, AgentKilledMidTrainingJobFinishesElsewhereWithTheUninterruptedModel) {
  ASSERT_EQ(cluster_->StartAgent({UniqueNodeId("node-a")}), "");
  ASSERT_EQ(cluster_->StartAgent({UniqueNodeId("node-b")}), "");
  auto client = cluster_->Client();

  // The reference: the same job, never interrupted.
  const std::string reference_model = ReferenceModel(client, "reference", JobYaml("reference"));
  ASSERT_FALSE(reference_model.empty());

  auto sub = client.Submit(JobYaml("preempted"));
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  // Kill the chief's node as soon as the first checkpoint is committed.
  std::string chief_node;
  ASSERT_TRUE(WaitForRunning(
      client, "preempted", [&] { return HasCheckpoint("preempted"); }, &chief_node))
      << "the job never ran to its first checkpoint";
  cluster_->agent(chief_node).Kill();

  wire::JobInfoT done = ct::WaitForJobEnd(client, "preempted", 120s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_GE(done.restarts, 1);
  for (const auto& r : done.replicas) {
    EXPECT_NE(r->node_id, chief_node) << r->replica << " still placed on the killed node";
    EXPECT_GE(r->attempt, 1) << r->replica;
  }
  const std::string chief_log = ChiefLog(client, "preempted");
  EXPECT_NE(chief_log.find("restored checkpoint"), std::string::npos) << chief_log;

  std::string model = Model("preempted");
  EXPECT_EQ(model.size(), reference_model.size());
  EXPECT_TRUE(model == reference_model) << "the resumed run's model differs from the reference";

  // No trainer outlives its job: the killed agent's replicas died with it (PDEATHSIG), the
  // others were reaped by their agent.
  EXPECT_EQ(TrainersLeft(), 0u) << "trainer process(es) left";
}

TEST_F(PreemptionTest, AgentSigtermCheckpointsWithinTheGracePeriodAndResumesElsewhere) {
  ASSERT_EQ(cluster_->StartAgent({UniqueNodeId("node-a")}), "");
  ASSERT_EQ(cluster_->StartAgent({UniqueNodeId("node-b")}), "");
  auto client = cluster_->Client();

  const std::string reference_model = ReferenceModel(client, "reference", JobYaml("reference", 0));
  ASSERT_FALSE(reference_model.empty());

  // No periodic checkpoints: the only one can come from the preemption itself.
  auto sub = client.Submit(JobYaml("sigtermed", 0));
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  std::string chief_node;
  ASSERT_TRUE(WaitForRunning(
      client, "sigtermed",
      [&] { return ChiefLog(client, "sigtermed").find("epoch 2/") != std::string::npos; },
      &chief_node))
      << "the job never got to its second epoch";
  EXPECT_FALSE(HasCheckpoint("sigtermed"));
  cluster_->agent(chief_node).Signal(SIGTERM);  // as `systemctl stop` or a preemption notice does
  auto status = cluster_->agent(chief_node).Wait(30s);
  ASSERT_TRUE(status.has_value()) << "the agent did not exit after its grace period";

  wire::JobInfoT done = ct::WaitForJobEnd(client, "sigtermed", 120s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_GE(done.restarts, 1);
  for (const auto& r : done.replicas) EXPECT_NE(r->node_id, chief_node) << r->replica;
  const std::string chief_log = ChiefLog(client, "sigtermed");
  EXPECT_NE(chief_log.find("stop requested"), std::string::npos) << chief_log;
  EXPECT_NE(chief_log.find("restored checkpoint"), std::string::npos) << chief_log;
  EXPECT_TRUE(Model("sigtermed") == reference_model)
      << "the resumed run's model differs from the reference";
  EXPECT_EQ(TrainersLeft(), 0u) << "trainer process(es) left";
}

}  // namespace
}  // namespace cohort
