// Chaos (issue 15): jobs are submitted and run while the coordinator and the agents are killed
// with SIGKILL and started again, with the state in the coordinator's SQLite store. Afterwards
// every accepted job is there exactly once and ends as its command says (SUCCEEDED, or FAILED for
// the ones that exit 3 with no restarts), nothing that was not accepted appears, and no replica
// process is left. The short form (CI) runs 4 kills over about 20 s; COHORT_CHAOS_ROUNDS=N runs
// N rounds (one kill each) for a soak.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/client.h"
#include "tests/testing/binaries.h"
#include "tests/testing/local_cluster.h"
#include "tests/testing/process.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
namespace ct = ::cohort::testing;
using SteadyClock = std::chrono::steady_clock;

// A job whose chief sleeps `sleep_ms` and exits `exit_code`: with exit 0 it may be restarted
// (its node killed) up to 20 times; with another code it fails for good at once. Its worker waits
// to be stopped: after the chief's success, once the 2 s finish_grace is over (kills or not).
std::string ChaosJob(const std::string& name, int sleep_ms, int exit_code) {
  std::string command = "sleep " + std::to_string(sleep_ms / 1000) + "." +
                        std::to_string(sleep_ms % 1000 / 100) + "; exit " +
                        std::to_string(exit_code);
  return "name: " + name +
         "\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n"
         "    process: {command: [/bin/sh, -c, '" +
         command + "']}\n  - role: worker\n    replicas: 1\n    resources: {cpus: 1}\n" +
         "    process: {command: [/bin/sleep, '600']}\n" +
         "scheduling: {finish_grace: 2s, max_restarts: " + (exit_code == 0 ? "20" : "0") + "}\n";
}

int Rounds() {
  const char* env = std::getenv("COHORT_CHAOS_ROUNDS");
  int rounds = env ? std::atoi(env) : 0;
  return rounds > 0 ? rounds : 4;
}

TEST(ChaosTest, KillsOfTheCoordinatorAndAgentsLoseNothingAcceptedAndLeaveNoProcess) {
  std::string missing = ct::MissingBinary({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN});
  if (!missing.empty()) GTEST_SKIP() << missing;
  ct::ClusterOptions options;
  options.heartbeat_timeout = "3s";  // a killed agent's node is LOST soon after
  ct::LocalCluster cluster({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN}, options);
  ASSERT_EQ(cluster.StartCoordinator(), "");
  const std::string pid = std::to_string(::getpid());
  const std::vector<std::string> nodes = {"chaos-a-" + pid, "chaos-b-" + pid, "chaos-c-" + pid};
  for (const auto& node : nodes) ASSERT_EQ(cluster.StartAgent({node, 0, 4}), "");
  auto client = cluster.Client(2s);

  std::mt19937 random(20261125);
  std::map<std::string, wire::JobState> expected;  // accepted job -> how it must end
  int next_job = 0;
  // Submits one job; a reply lost to a kill is asked again (ALREADY_EXISTS then means it was
  // taken). Returns false when the coordinator did not answer at all.
  auto submit = [&] {
    std::string name = "chaos_" + std::to_string(next_job++);
    bool fails = next_job % 5 == 0;
    std::string yaml = ChaosJob(name, 300 + static_cast<int>(random() % 2500), fails ? 3 : 0);
    for (int attempt = 0; attempt < 10; ++attempt) {
      auto accepted = client.Submit(yaml);
      if (accepted.ok() || accepted.status().code() == StatusCode::kAlreadyExists) {
        expected[name] = fails ? wire::JobState::FAILED : wire::JobState::SUCCEEDED;
        return;
      }
      ASSERT_EQ(accepted.status().code(), StatusCode::kUnavailable) << accepted.status().ToString();
      std::this_thread::sleep_for(300ms);
    }
    FAIL() << "the coordinator did not take " << name << cluster.Logs();
  };

  const int rounds = Rounds();
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < 4; ++i) {
      submit();
      if (HasFatalFailure()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200 + random() % 500));
    }
    // Alternate: the coordinator, then an agent (a different one each time).
    if (round % 2 == 0) {
      cluster.coordinator().Kill();
      std::this_thread::sleep_for(std::chrono::milliseconds(random() % 1000));
      ASSERT_EQ(cluster.StartCoordinator(), "") << "round " << round;
    } else {
      const std::string& node = nodes[static_cast<size_t>(round / 2) % nodes.size()];
      cluster.agent(node).Kill();
      std::this_thread::sleep_for(std::chrono::milliseconds(random() % 4000));
      ASSERT_EQ(cluster.StartAgent({node, 0, 4}), "") << "round " << round;
    }
  }

  // Every accepted job ends as its command says, and only those exist.
  std::map<std::string, std::string> wrong;
  for (const auto& [name, state] : expected) {
    auto job = ct::WaitForJobEnd(client, name, 120s);
    if (job.state != state) {
      wrong[name] = std::string(wire::EnumNameJobState(job.state)) + " (" + job.message + ")";
    }
  }
  EXPECT_TRUE(wrong.empty()) << ::testing::PrintToString(wrong) << cluster.Logs();
  auto listed = client.ListJobs();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  std::multiset<std::string> names;
  for (const auto& job : *listed) names.insert(job.name);
  std::multiset<std::string> accepted;
  for (const auto& [name, state] : expected) accepted.insert(name);
  EXPECT_EQ(names, accepted);
  EXPECT_EQ(static_cast<int>(expected.size()), 4 * rounds);
  // The SQLite store answers the same after one more SIGKILL.
  cluster.coordinator().Kill();
  ASSERT_EQ(cluster.StartCoordinator(), "");
  wire::ListJobsT ended;
  ended.states = {wire::JobState::SUCCEEDED, wire::JobState::FAILED};
  auto stored = client.ListJobs(ended);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  std::map<std::string, wire::JobState> after;
  for (const auto& job : *stored) after[job.name] = job.state;
  EXPECT_EQ(after, expected);
  EXPECT_EQ(cluster.WaitForNoReplicaProcesses(30s), "");
}

}  // namespace
}  // namespace cohort
