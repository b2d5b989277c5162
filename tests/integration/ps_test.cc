// Parameter server end to end: a real coordinator and agent run a digits-trainer job whose pool 2
// is `builtin: parameter_server` (the agent starts cohort-ps); the trainers run in their
// parameter-server mode, the job SUCCEEDS with a trained model, the servers checkpoint their
// shards, and no replica outlives the job.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "common/checkpoint.h"
#include "common/client.h"
#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
using namespace std::chrono_literals;

std::string TrainerPool(const std::string& role, int replicas, int epochs = 4) {
  return "  - role: " + role + "\n    replicas: " + std::to_string(replicas) +
         "\n    resources: {cpus: 1}\n    process:\n      command: [" +
         std::string(COHORT_TRAINER_BIN) +
         "]\n      args: [--mode=ps, --staleness=0, --epochs=" + std::to_string(epochs) +
         ", --hidden=32, --batch-size=48, --lr=0.05, --optimizer=momentum, --seed=3]\n";
}

std::string PsJob(const std::string& name, const std::string& out, int epochs, int max_restarts) {
  return "name: " + name + "\noutput_dir: " + out + "\nworker_pools:\n" +
         TrainerPool("chief", 1, epochs) + TrainerPool("worker", 1, epochs) +
         "  - role: parameter_server\n    replicas: 2\n    resources: {cpus: 1}\n"
         "    builtin: parameter_server\n"
         "scheduling: {timeout: 5m, max_restarts: " +
         std::to_string(max_restarts) + "}\n";
}

// Every attempt log of every replica under a job's work dir, for failure messages.
std::string ReplicaLogs(const std::string& job_dir) {
  std::string out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(job_dir, ec)) {
    if (entry.path().extension() != ".log") continue;
    out += "--- " + entry.path().string() + " ---\n" + ct::ReadFile(entry.path().string());
  }
  return out;
}

// A coordinator and one agent with 8 CPUs, node_ on the agent.
class PsIntegrationTest : public ct::ClusterTest {
 protected:
  void SetUp() override {
    if (!NeedBinaries({COHORT_TRAINER_BIN, COHORT_PS_BIN})) return;
    ASSERT_NO_FATAL_FAILURE(StartCoordinator());
    ASSERT_EQ(cluster_->StartAgent({.node_id = node_, .cpus = 8}), "");
  }

  const std::string node_ = UniqueNodeId("ps-node");
};

TEST_F(PsIntegrationTest, JobWithParameterServerPoolTrainsToSuccess) {
  ct::LocalCluster& cluster = *cluster_;
  const std::string out = cluster.scratch("digits_ps");
  auto client = cluster.Client();
  auto submitted = client.Submit(PsJob("digits_ps", out, 4, 0));
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  wire::JobInfoT last = ct::WaitForJobEnd(client, "digits_ps", 120s);
  ASSERT_EQ(last.state, wire::JobState::SUCCEEDED) << last.message << "\n" << cluster.Logs();

  // The chief wrote a trained model; the metrics say it came from two parameter servers.
  ASSERT_TRUE(ct::FileExists(out + "/model/model.bin"));
  auto metrics = nlohmann::json::parse(ct::ReadFile(out + "/model/metrics.json"), nullptr, false);
  ASSERT_FALSE(metrics.is_discarded());
  EXPECT_EQ(metrics["parameter_servers"], 2);
  EXPECT_EQ(metrics["world_size"], 2);
  EXPECT_GT(metrics["test_accuracy"].get<double>(), 0.85);
  // Both servers checkpointed their shard (every 100 steps; the run has 4 x 30 = 120).
  for (int i = 0; i < 2; ++i) {
    auto ckpt = FindLatestValidCheckpoint(out + "/checkpoints/ps-" + std::to_string(i));
    EXPECT_TRUE(ckpt.ok()) << "server " << i << ": " << ckpt.status().ToString();
  }
  EXPECT_EQ(cluster.WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
}

TEST_F(PsIntegrationTest, KilledParameterServerRestartsFromItsCheckpointAndTheJobSucceeds) {
  ct::LocalCluster& cluster = *cluster_;
  const std::string& node = node_;
  const std::string out = cluster.scratch("ps_kill");
  auto client = cluster.Client();
  // 30 epochs x 30 steps; the servers checkpoint every 100 steps.
  auto submitted = client.Submit(PsJob("ps_kill", out, 30, 5));
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  // Once server 0 has a checkpoint, SIGKILL it.
  static const std::regex kStarted("ps_kill/parameter_server-0 attempt 0: started pid ([0-9]+)");
  pid_t server0 = 0;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        std::smatch match;
        const std::string logs = cluster.Logs();
        if (server0 == 0 && std::regex_search(logs, match, kStarted))
          server0 = std::stoi(match[1].str());
        return server0 != 0 && FindLatestValidCheckpoint(out + "/checkpoints/ps-0").ok();
      },
      60s))
      << "server 0 never started or never checkpointed\n"
      << cluster.Logs();
  ASSERT_EQ(::kill(server0, SIGKILL), 0);

  wire::JobInfoT last = ct::WaitForJobEnd(client, "ps_kill", 150s);
  ASSERT_EQ(last.state, wire::JobState::SUCCEEDED)
      << last.message << "\n"
      << cluster.Logs() << ReplicaLogs(cluster.scratch() + "/../work/" + node + "/ps_kill");
  bool restarted = false;
  for (const auto& r : last.replicas) {
    if (r && r->replica == "parameter_server-0" && r->attempt >= 1) restarted = true;
  }
  EXPECT_TRUE(restarted) << "parameter_server-0 was not restarted";
  // Its second attempt restored its last checkpoint (LocalCluster's agent work dir is beside
  // scratch/; the agent keeps each attempt's output in <work>/<job>/<replica>/attempt-N.log).
  const std::string log = ct::ReadFile(cluster.scratch() + "/../work/" + node +
                                       "/ps_kill/parameter_server-0/attempt-1.log");
  EXPECT_NE(log.find("parameter server 0: restored"), std::string::npos) << log;
  auto metrics = nlohmann::json::parse(ct::ReadFile(out + "/model/metrics.json"), nullptr, false);
  ASSERT_FALSE(metrics.is_discarded());
  EXPECT_EQ(metrics["global_step"], 900);
  EXPECT_GT(metrics["test_accuracy"].get<double>(), 0.85);
  EXPECT_EQ(cluster.WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
}

}  // namespace
}  // namespace cohort
