// Preemption-safe training end to end: real coordinator and agents on loopback run the
// real digits-trainer (chief + worker, gradients averaged over the collective ring). An agent is
// SIGKILLed mid-training; the job must finish SUCCEEDED on the other node, restored from its
// newest checkpoint, with a final model equal byte for byte to an uninterrupted run's, and no
// trainer process may outlive its job.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "common/client.h"
#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

class PreemptionTest : public ct::ClusterTest {
 protected:
  void SetUp() override {
    if (!NeedBinaries({COHORT_TRAINER_BIN})) return;
    ASSERT_NO_FATAL_FAILURE(StartCoordinator());
    // The split seed doubles as a marker that finds this test's trainers in /proc.
    marker_ = "--split-seed=" + std::to_string(1000 + ::getpid() % 100000);
  }

  void TearDown() override {
    ClusterTest::TearDown();
    ct::KillProcessesWithArg(marker_);
  }

  std::string OutputDir(const std::string& job) { return cluster_->scratch(job); }

  // Chief + one worker; about 30 steps an epoch, a checkpoint every `checkpoint_every` steps
  // (0: only when stopped by a signal). A pause after each epoch (the model is unchanged) keeps
  // the job running for seconds, so the fault lands mid-run even on a quiet, fast machine.
  std::string JobYaml(const std::string& name, int checkpoint_every = 30) {
    std::string process =
        "      command: [" + std::string(COHORT_TRAINER_BIN) +
        "]\n      args: [--epochs=60, --checkpoint-every=" + std::to_string(checkpoint_every) +
        ", --seed=3, " + marker_ +
        ", --hidden=32, --batch-size=48, --optimizer=momentum, --epoch-pause-ms=50]\n";
    return "name: " + name + "\noutput_dir: " + OutputDir(name) +
           "\nworker_pools:\n"
           "  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n    process:\n" +
           process + "  - role: worker\n    replicas: 1\n    resources: {cpus: 1}\n    process:\n" +
           process +
           "scheduling: {timeout: 5m, max_restarts: 3, restart_job_on_worker_restart: true}\n";
  }

  bool HasCheckpoint(const std::string& job) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(OutputDir(job) + "/checkpoints", ec)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("ckpt-", 0) == 0 && name.find(".tmp") == std::string::npos) return true;
    }
    return false;
  }

  std::string marker_;
};

TEST_F(PreemptionTest, AgentKilledMidTrainingJobFinishesElsewhereWithTheUninterruptedModel) {
  ASSERT_EQ(cluster_->StartAgent({UniqueNodeId("node-a")}), "");
  ASSERT_EQ(cluster_->StartAgent({UniqueNodeId("node-b")}), "");
  auto client = cluster_->Client();

  // The reference: the same job, never interrupted.
  auto ref = client.Submit(JobYaml("reference"));
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  wire::JobInfoT reference = ct::WaitForJobEnd(client, "reference", 120s);
  ASSERT_EQ(reference.state, wire::JobState::SUCCEEDED) << reference.message;
  std::string reference_model = ct::ReadFile(OutputDir("reference") + "/model/model.bin");
  ASSERT_FALSE(reference_model.empty());

  auto sub = client.Submit(JobYaml("preempted"));
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  // Kill the chief's node as soon as the first checkpoint is committed.
  std::string chief_node;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto info = client.GetJob("preempted");
        if (!info.ok() || info->state != wire::JobState::RUNNING) return false;
        for (const auto& r : info->replicas) {
          if (r->replica == "chief-0") chief_node = r->node_id;
        }
        return !chief_node.empty() && HasCheckpoint("preempted");
      },
      60s))
      << "the job never ran to its first checkpoint";
  cluster_->agent(chief_node).Kill();

  wire::JobInfoT done = ct::WaitForJobEnd(client, "preempted", 120s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_GE(done.restarts, 1);
  for (const auto& r : done.replicas) {
    EXPECT_NE(r->node_id, chief_node) << r->replica << " still placed on the killed node";
    EXPECT_GE(r->attempt, 1) << r->replica;
  }
  auto logs = client.ReadLogs("preempted", "chief-0", 0);
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  std::string chief_log(logs->data.begin(), logs->data.end());
  EXPECT_NE(chief_log.find("restored checkpoint"), std::string::npos) << chief_log;

  std::string model = ct::ReadFile(OutputDir("preempted") + "/model/model.bin");
  EXPECT_EQ(model.size(), reference_model.size());
  EXPECT_TRUE(model == reference_model) << "the resumed run's model differs from the reference";

  // No trainer outlives its job: the killed agent's replicas died with it (PDEATHSIG), the
  // others were reaped by their agent.
  EXPECT_TRUE(ct::WaitUntil([&] { return ct::FindProcessesWithArg(marker_).empty(); }, 10s))
      << ct::FindProcessesWithArg(marker_).size() << " trainer process(es) left";
}

TEST_F(PreemptionTest, AgentSigtermCheckpointsWithinTheGracePeriodAndResumesElsewhere) {
  ASSERT_EQ(cluster_->StartAgent({UniqueNodeId("node-a")}), "");
  ASSERT_EQ(cluster_->StartAgent({UniqueNodeId("node-b")}), "");
  auto client = cluster_->Client();

  auto ref = client.Submit(JobYaml("reference", 0));
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  wire::JobInfoT reference = ct::WaitForJobEnd(client, "reference", 120s);
  ASSERT_EQ(reference.state, wire::JobState::SUCCEEDED) << reference.message;
  std::string reference_model = ct::ReadFile(OutputDir("reference") + "/model/model.bin");
  ASSERT_FALSE(reference_model.empty());

  // No periodic checkpoints: the only one can come from the preemption itself.
  auto sub = client.Submit(JobYaml("sigtermed", 0));
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  std::string chief_node;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto info = client.GetJob("sigtermed");
        if (!info.ok() || info->state != wire::JobState::RUNNING) return false;
        for (const auto& r : info->replicas) {
          if (r->replica == "chief-0") chief_node = r->node_id;
        }
        auto logs = client.ReadLogs("sigtermed", "chief-0", 0);
        if (!logs.ok()) return false;
        std::string text(logs->data.begin(), logs->data.end());
        return !chief_node.empty() && text.find("epoch 2/") != std::string::npos;
      },
      60s))
      << "the job never got to its second epoch";
  EXPECT_FALSE(HasCheckpoint("sigtermed"));
  cluster_->agent(chief_node).Signal(SIGTERM);  // as `systemctl stop` or a preemption notice does
  auto status = cluster_->agent(chief_node).Wait(30s);
  ASSERT_TRUE(status.has_value()) << "the agent did not exit after its grace period";

  wire::JobInfoT done = ct::WaitForJobEnd(client, "sigtermed", 120s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_GE(done.restarts, 1);
  for (const auto& r : done.replicas) EXPECT_NE(r->node_id, chief_node) << r->replica;
  auto logs = client.ReadLogs("sigtermed", "chief-0", 0);
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  std::string chief_log(logs->data.begin(), logs->data.end());
  EXPECT_NE(chief_log.find("stop requested"), std::string::npos) << chief_log;
  EXPECT_NE(chief_log.find("restored checkpoint"), std::string::npos) << chief_log;
  EXPECT_TRUE(ct::ReadFile(OutputDir("sigtermed") + "/model/model.bin") == reference_model)
      << "the resumed run's model differs from the reference";
  EXPECT_TRUE(ct::WaitUntil([&] { return ct::FindProcessesWithArg(marker_).empty(); }, 10s))
      << ct::FindProcessesWithArg(marker_).size() << " trainer process(es) left";
}

}  // namespace
}  // namespace cohort
