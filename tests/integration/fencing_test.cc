// Fencing across a real partition: a cohort-coordinator with --fence-after, one agent reaching it
// through a TcpProxy that the test cuts (both TCP connections stay up, nothing crosses), another
// agent reaching it directly. The job's chief runs on the cut-off node and logs, with the host's
// clock, when each attempt starts and ends. The coordinator declares the node lost and restarts the
// chief on the other node; the question is whether the cut-off attempt was still running then.
#include <gtest/gtest.h>
#include <httplib.h>

#include <map>
#include <sstream>
#include <string>

#include "tests/testing/cluster_test.h"
#include "tests/testing/tcp_proxy.h"

namespace cohort::testing {
namespace {

using namespace std::chrono_literals;

// Each attempt appends "start <restart count> <ns>" and, once stopped (SIGTERM) or done,
// "end <restart count> <ns> term|done" to the file named by its argument. The first attempt runs
// until it is stopped; a restart finishes after 3 s.
constexpr const char* kAttemptScript = R"sh(#!/bin/sh
log="$1"
n="${COHORT_RESTART_COUNT:-0}"
echo "start $n $(date +%s%N)" >> "$log"
trap 'echo "end $n $(date +%s%N) term" >> "$log"; exit 0' TERM
if [ "$n" = 0 ]; then limit=100000; else limit=30; fi
i=0
while [ $i -lt $limit ]; do sleep 0.1; i=$((i + 1)); done
echo "end $n $(date +%s%N) done" >> "$log"
)sh";

struct Attempt {
  int64_t start_ns = 0;
  int64_t end_ns = 0;  // 0: not ended
  std::string how;
};

// The attempts the log names, by restart count.
std::map<int, Attempt> ReadAttempts(const std::string& log) {
  std::map<int, Attempt> out;
  std::istringstream in(ReadFile(log));
  std::string what;
  int n = 0;
  int64_t ns = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    if (!(fields >> what >> n >> ns)) continue;
    if (what == "start") out[n].start_ns = ns;
    if (what == "end") {
      out[n].end_ns = ns;
      fields >> out[n].how;
    }
  }
  return out;
}

class PartitionTest : public ClusterTest {
 protected:
  // A coordinator (heartbeat timeout 3 s, stop grace 2 s, and `fence_after` with a fence grace
  // of 1 s unless empty), node cut_ behind proxy_, the job's chief running there, and node other_
  // up. Then cuts the proxy and waits until attempt 1 started; returns the attempts.
  std::map<int, Attempt> CutTheChiefsNodeOff(const std::string& fence_after) {
    ClusterOptions options;
    options.heartbeat_timeout = "3s";
    options.coordinator_args = {"--stop-grace", "2s"};
    if (!fence_after.empty()) {
      options.coordinator_args.insert(options.coordinator_args.end(),
                                      {"--fence-after", fence_after, "--fence-grace", "1s"});
    }
    [&] { ASSERT_NO_FATAL_FAILURE(StartCoordinator(options)); }();
    if (HasFatalFailure()) return {};
    const std::string& endpoint = cluster_->agent_endpoint();
    proxy_ = std::make_unique<TcpProxy>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
    EXPECT_GT(proxy_->port(), 0);
    cut_ = UniqueNodeId("fence-cut");
    other_ = UniqueNodeId("fence-other");
    AgentOptions cut{.node_id = cut_, .coordinator_endpoint = proxy_->endpoint()};
    EXPECT_EQ(cluster_->StartAgent(cut), "");

    log_ = cluster_->scratch("attempts.log");
    const std::string script = cluster_->scratch("attempt.sh");
    WriteFile(script, kAttemptScript, true);
    auto client = cluster_->Client();
    auto submitted = client.Submit(
        "name: fenced\n"
        "output_dir: " +
        cluster_->scratch("out") +
        "\n"
        "worker_pools:\n"
        "  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n"
        "    process: {command: [/bin/sh, " +
        script + ", " + log_ +
        "]}\n"
        "scheduling: {max_restarts: 2}\n");
    EXPECT_TRUE(submitted.ok()) << submitted.status().ToString();
    EXPECT_TRUE(WaitUntil([&] { return ReadAttempts(log_).count(0) > 0; }, 20s))
        << "attempt 0 never started";
    EXPECT_EQ(cluster_->StartAgent({.node_id = other_}), "");
    if (HasFailure()) return {};

    proxy_->Cut();
    EXPECT_TRUE(WaitUntil([&] { return ReadAttempts(log_).count(1) > 0; }, 30s))
        << "attempt 1 never started";
    return ReadAttempts(log_);
  }

  // Heals the partition; the job then ends SUCCEEDED (attempt 1 finishes) having spent one
  // restart, and no replica process is left.
  void HealAndFinish() {
    proxy_->Heal();
    auto client = cluster_->Client();
    wire::JobInfoT info = WaitForJobEnd(client, "fenced", 60s);
    EXPECT_EQ(info.state, wire::JobState::SUCCEEDED) << info.message;
    EXPECT_EQ(info.restarts, 1);
    EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "");
  }

  std::unique_ptr<TcpProxy> proxy_;
  std::string cut_;
  std::string other_;
  std::string log_;
};

// With --fence-after the cut-off agent stops its replica (SIGTERM, which the script answers) before
// the coordinator starts the restart elsewhere: never two attempts at once.
TEST_F(PartitionTest, AReplicaCutOffFromTheCoordinatorEndsBeforeItsRestartStarts) {
  if (!NeedBinaries()) return;
  std::map<int, Attempt> attempts = CutTheChiefsNodeOff("3s");
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(attempts.count(0), 1u);
  ASSERT_EQ(attempts.count(1), 1u);
  EXPECT_NE(attempts[0].end_ns, 0) << "attempt 0 still ran when attempt 1 started";
  EXPECT_EQ(attempts[0].how, "term");
  EXPECT_LT(attempts[0].end_ns, attempts[1].start_ns);
  const std::string agent_log = ReadFile(cluster_->agent(cut_).log_path());
  EXPECT_NE(agent_log.find("fenced: no word from the coordinator"), std::string::npos);
  // It stopped it within the coordinator's --fence-grace, handed at registration.
  EXPECT_NE(agent_log.find("stopping 1 replica(s), grace period 1s"), std::string::npos)
      << agent_log;
  // Its agent counts the fence for Prometheus.
  httplib::Client agent_http("127.0.0.1", cluster_->agent_http_port(cut_));
  agent_http.set_read_timeout(5, 0);
  auto metrics = agent_http.Get("/metrics");
  ASSERT_TRUE(metrics) << "the cut-off agent's /metrics did not answer";
  EXPECT_NE(metrics->body.find("cohort_agent_replicas_fenced_total{node=\"" + cut_ + "\"} 1\n"),
            std::string::npos)
      << metrics->body;
  auto client = cluster_->Client();
  auto info = client.GetJob("fenced");
  ASSERT_TRUE(info.ok());
  bool told = false;
  for (const auto& e : info->events) {
    if (e->message.find("is placed again in") != std::string::npos) told = true;
  }
  EXPECT_TRUE(told) << "no event says the restart waits for the fence";
  ASSERT_NO_FATAL_FAILURE(HealAndFinish());
}

// Without it (the default) the cut-off attempt runs on beside its restart until the partition
// heals and the coordinator stops it: what fencing is for.
TEST_F(PartitionTest, WithoutFencingTheCutOffReplicaRunsBesideItsRestart) {
  if (!NeedBinaries()) return;
  std::map<int, Attempt> attempts = CutTheChiefsNodeOff("");
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(attempts.count(1), 1u);
  EXPECT_EQ(attempts[0].end_ns, 0) << "attempt 0 ended before attempt 1 started";
  ASSERT_NO_FATAL_FAILURE(HealAndFinish());
  attempts = ReadAttempts(log_);
  EXPECT_GT(attempts[0].end_ns, attempts[1].start_ns);  // stopped once heard from again
  EXPECT_EQ(attempts[0].how, "term");
}

}  // namespace
}  // namespace cohort::testing
