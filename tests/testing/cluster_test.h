// ClusterTest is the GoogleTest fixture of the integration tests that run a LocalCluster of this
// tree's cohort-coordinator and cohort-agent (tests/testing/local_cluster.h), and often the cohort
// CLI as a process. It holds the cluster and what those tests repeated: skipping, with the reason,
// when a program is not built (binaries.h), starting the coordinator, node ids unique on the host,
// the CLI's command line for the cluster, and the daemons' logs when a test fails.
//
// Use from SetUp():
//   if (!NeedBinaries({COHORT_CLI_BIN})) return;
//   ASSERT_NO_FATAL_FAILURE(StartOneNodeCluster({UniqueNodeId("watch")}));
// (or StartCoordinator(), then cluster_->StartAgent() for each node).
//
// Thread safety: none; one test thread. The cluster's daemons die with cluster_ (and with the
// test process).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tests/testing/binaries.h"
#include "tests/testing/local_cluster.h"
#include "tests/testing/process.h"

namespace cohort::testing {

class ClusterTest : public ::testing::Test {
 protected:
  // True when cohort-coordinator, cohort-agent and every program in `more` are built; otherwise
  // the test is skipped, naming the first one missing, and it returns false.
  bool NeedBinaries(std::initializer_list<std::string> more = {}) {
    std::vector<std::string> needed = {COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN};
    needed.insert(needed.end(), more.begin(), more.end());
    const std::string missing = MissingBinary(needed);
    if (missing.empty()) return true;
    [&] { GTEST_SKIP() << missing; }();  // GTEST_SKIP returns (void) from the lambda only
    return false;
  }

  // Makes cluster_ with `options` and starts its coordinator; a coordinator that does not start
  // is a fatal failure (callers wrap it in ASSERT_NO_FATAL_FAILURE).
  void StartCoordinator(ClusterOptions options = {}) {
    cluster_ = std::make_unique<LocalCluster>(
        ClusterBinaries{COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN}, std::move(options));
    ASSERT_EQ(cluster_->StartCoordinator(), "");
  }

  // Starts the coordinator (with `options`) and one agent (`agent`); a daemon that does not start
  // is a fatal failure (callers wrap it in ASSERT_NO_FATAL_FAILURE).
  void StartOneNodeCluster(const AgentOptions& agent, ClusterOptions options = {}) {
    ASSERT_NO_FATAL_FAILURE(StartCoordinator(std::move(options)));
    ASSERT_EQ(cluster_->StartAgent(agent), "");
  }

  // "<prefix>-<pid>": ctest runs test binaries in parallel on one host, whose agents are then told
  // apart by their node ids alone (ps, logs).
  static std::string UniqueNodeId(const std::string& prefix) {
    return prefix + "-" + std::to_string(::getpid());
  }

  // The cohort CLI's arguments that reach this cluster (--insecure --coordinator ENDPOINT), then
  // `args`.
  std::vector<std::string> Cli(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--insecure", "--coordinator", cluster_->client_endpoint()});
    return args;
  }
  // Runs the cohort CLI with Cli(args) to completion.
  RunResult RunCli(std::vector<std::string> args,
                   std::chrono::milliseconds timeout = std::chrono::seconds(30)) const {
    return RunProcess(COHORT_CLI_BIN, Cli(std::move(args)), {}, timeout);
  }

  // On a failure the daemons' log tails go to stderr; then the cluster stops (agents first).
  void TearDown() override {
    if (cluster_ && HasFailure()) std::cerr << cluster_->Logs();
    cluster_.reset();
  }

  std::unique_ptr<LocalCluster> cluster_;
};

// A ClusterTest whose every test has the cohort CLI and a one-node cluster: the coordinator and an
// agent, node id UniqueNodeId(node_prefix), with the defaults.
class OneNodeCliTest : public ClusterTest {
 protected:
  explicit OneNodeCliTest(std::string node_prefix) : node_prefix_(std::move(node_prefix)) {}

  void SetUp() override {
    if (!NeedBinaries({COHORT_CLI_BIN})) return;
    ASSERT_NO_FATAL_FAILURE(StartOneNodeCluster({UniqueNodeId(node_prefix_)}));
  }

 private:
  std::string node_prefix_;
};

}  // namespace cohort::testing
