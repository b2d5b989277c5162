// A node's health check in a real cluster: a coordinator and two agents on loopback, one running
// --health-check (a shell script that fails while a marker file holds a reason, as a GPU check
// does after an XID error), a replica there that crashes with exit 1 as a trainer does when its
// GPU falls off the bus, and the cohort CLI as a process.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
namespace ct = ::cohort::testing;

class NodeHealthTest : public ct::ClusterTest {
 protected:
  void SetUp() override {
    if (!NeedBinaries({COHORT_CLI_BIN})) return;
    ASSERT_NO_FATAL_FAILURE(StartCoordinator());
  }

  // The coordinator's view of node `id` ("" state when it is not listed).
  wire::NodeInfoT NodeInfo(const std::string& id) {
    auto client = cluster_->Client();
    auto nodes = client.ListNodes();
    if (nodes.ok()) {
      for (auto& n : *nodes) {
        if (n.node_id == id) return std::move(n);
      }
    }
    return {};
  }

  // Agent `id`'s /metrics ("" when it does not answer).
  std::string AgentMetrics(const std::string& id) {
    httplib::Client http("127.0.0.1", cluster_->agent_http_port(id));
    http.set_read_timeout(5, 0);
    auto got = http.Get("/metrics");
    return got && got->status == 200 ? got->body : "";
  }
};

TEST_F(NodeHealthTest, AFailingCheckKeepsWorkOffTheNodeAndAFailureThereRestartsTheJobElsewhere) {
  const std::string sick = UniqueNodeId("sick"), well = UniqueNodeId("well");
  const std::string reason_file = cluster_->scratch("gpu-fault");
  const std::string check = cluster_->scratch("node-check");
  ct::WriteFile(check,
                "#!/bin/sh\n# $1: the GPU to check\nif [ -s " + reason_file + " ]; then\n  cat " +
                    reason_file + "\n  exit 1\nfi\necho \"GPU $1 ok\"\n",
                /*executable=*/true);
  ct::AgentOptions checked{sick, 1};
  checked.extra_args = {"--health-check",         check + " 0", "--health-check-interval", "3s",
                        "--health-check-timeout", "5s"};
  ASSERT_EQ(cluster_->StartAgent(checked), "");
  // The trainer: on its first attempt it runs until its GPU fails (the test's trigger), when the
  // driver logs the fault (the reason file the check reads) and the trainer dies of a CUDA error;
  // a restart (on another node) finishes.
  const std::string trigger = cluster_->scratch("fail-the-gpu");
  const std::string trainer = cluster_->scratch("train.sh");
  ct::WriteFile(trainer,
                "#!/bin/sh\nif [ \"$COHORT_RESTART_COUNT\" = 0 ]; then\n  while [ ! -e " + trigger +
                    " ]; do sleep 0.05; done\n  echo 'GPU 0: XID 79, fell off the bus' > " +
                    reason_file +
                    "\n  echo 'RuntimeError: CUDA error: unspecified launch failure' >&2\n  exit "
                    "1\nfi\necho done\n",
                /*executable=*/true);
  auto client = cluster_->Client();
  ASSERT_TRUE(client
                  .Submit("name: train\nworker_pools:\n  - role: chief\n    resources: {gpus: 1, "
                          "cpus: 1}\n    process: {command: [" +
                          trainer + "]}\nscheduling: {max_restarts: 2}\n")
                  .ok());
  ASSERT_TRUE(ct::WaitForJobState(client, "train", wire::JobState::RUNNING, 20s));
  ASSERT_EQ(cluster_->StartAgent({well, 1}), "");

  // The GPU fails: the replica dies of it, and the check it has run again says why.
  ct::WriteFile(trigger, "");
  const wire::JobInfoT done = ct::WaitForJobEnd(client, "train", 60s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_EQ(done.restarts, 1);
  ASSERT_EQ(done.replicas.size(), 1u);
  EXPECT_EQ(done.replicas[0]->node_id, well);
  EXPECT_EQ(done.replicas[0]->attempt, 1);
  // "restart 1/2: chief-0 as attempt 1 because chief-0 attempt 0 exited with code 1 (<its log's
  // error line>) on node <sick>, which fails its health check: <the check's first line>".
  const std::string fault = "on node " + sick +
                            ", which fails its health check: GPU 0: XID 79, fell off the bus "
                            "(health check exited with code 1)";
  std::string event;
  for (const auto& e : done.events) {
    if (e && e->message.find(fault) != std::string::npos) event = e->message;
  }
  EXPECT_EQ(event.rfind("restart 1/2: chief-0 as attempt 1 because chief-0 attempt 0 exited with "
                        "code 1 (",
                        0),
            0u)
      << "no restart event names the node fault (" << fault << "): " << event;
  EXPECT_NE(event.find("CUDA error: unspecified launch failure"), std::string::npos) << event;

  // `cohort nodes` says why the node takes no work; a job that fits either node goes to the other.
  EXPECT_EQ(NodeInfo(sick).state, "UNHEALTHY");
  const ct::RunResult nodes = RunCli({"nodes"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_NE(nodes.out.find("UNHEALTHY"), std::string::npos) << nodes.out;
  EXPECT_NE(
      nodes.out.find(sick + " fails its health check: GPU 0: XID 79, fell off the bus (health "
                            "check exited with code 1)"),
      std::string::npos)
      << nodes.out;
  const ct::RunResult listed = RunCli({"nodes", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  std::map<std::string, std::string> unhealthy;
  for (const auto& n : nlohmann::json::parse(listed.out, nullptr, false)) {
    unhealthy[n.value("node_id", "")] = n.value("unhealthy", "?");
  }
  EXPECT_EQ(
      unhealthy,
      (std::map<std::string, std::string>{
          {sick, "GPU 0: XID 79, fell off the bus (health check exited with code 1)"}, {well, ""}}))
      << listed.out;
  ASSERT_TRUE(client
                  .Submit("name: after\nworker_pools:\n  - role: chief\n    resources: {gpus: 1, "
                          "cpus: 1}\n    process: {command: [/bin/true]}\n")
                  .ok());
  const wire::JobInfoT after = ct::WaitForJobEnd(client, "after", 30s);
  ASSERT_EQ(after.state, wire::JobState::SUCCEEDED) << after.message;
  EXPECT_EQ(after.replicas[0]->node_id, well);

  // The agent's /metrics says so too (for an alert per node); the other agent, without a check,
  // has no such series.
  const std::string failing = "cohort_agent_health_check_passing{node=\"" + sick + "\"} 0\n";
  EXPECT_TRUE(
      ct::WaitUntil([&] { return AgentMetrics(sick).find(failing) != std::string::npos; }, 5s))
      << AgentMetrics(sick);
  EXPECT_NE(AgentMetrics(sick).find("cohort_agent_health_check_runs_total{node=\"" + sick + "\"} "),
            std::string::npos);
  EXPECT_EQ(AgentMetrics(well).find("cohort_agent_health_check"), std::string::npos);

  // Mended: the next run passes and the node is READY again.
  std::filesystem::remove(reason_file);
  EXPECT_TRUE(ct::WaitUntil([&] { return NodeInfo(sick).state == "READY"; }, 15s, 200ms))
      << "still " << NodeInfo(sick).state << ": " << NodeInfo(sick).unhealthy;
  EXPECT_EQ(NodeInfo(sick).unhealthy, "");
  const std::string passing = "cohort_agent_health_check_passing{node=\"" + sick + "\"} 1\n";
  EXPECT_TRUE(
      ct::WaitUntil([&] { return AgentMetrics(sick).find(passing) != std::string::npos; }, 5s))
      << AgentMetrics(sick);
}

}  // namespace
}  // namespace cohort
