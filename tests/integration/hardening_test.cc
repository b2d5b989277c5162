// A control plane that cannot be knocked over (issue 15), with the real daemons as processes on
// loopback: a garbage flood from many sockets while agents heartbeat, and specs over the size
// limit.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/client.h"
#include "tests/testing/binaries.h"
#include "tests/testing/local_cluster.h"
#include "tests/testing/process.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
namespace ct = ::cohort::testing;
using SteadyClock = std::chrono::steady_clock;

std::string NodeId(const std::string& name) { return name + "-" + std::to_string(getpid()); }

std::string TinyJob(const std::string& name, int gpus = 0, int workers = 0,
                    const std::string& command = "/bin/true") {
  std::string pool = "    resources: {gpus: " + std::to_string(gpus) +
                     ", cpus: 1}\n    process: {command: [" + command + "]}\n";
  std::string yaml = "name: " + name + "\nworker_pools:\n  - role: chief\n    replicas: 1\n" + pool;
  if (workers > 0) {
    yaml += "  - role: worker\n    replicas: " + std::to_string(workers) + "\n" + pool;
  }
  return yaml;
}

// Sends random bytes from `sockets` DEALERs (half to each endpoint) for `duration`, paced so the
// flood does not take the whole machine from the daemons it is aimed at; returns frames sent.
uint64_t Flood(const std::vector<std::string>& endpoints, int sockets,
               std::chrono::milliseconds duration) {
  zmq::context_t context(2);
  std::vector<zmq::socket_t> dealers;
  for (int i = 0; i < sockets; ++i) {
    dealers.emplace_back(context, zmq::socket_type::dealer);
    dealers.back().set(zmq::sockopt::linger, 0);
    dealers.back().connect(endpoints[static_cast<size_t>(i) % endpoints.size()]);
  }
  std::mt19937 random(12345);
  uint64_t sent = 0;
  auto end = SteadyClock::now() + duration;
  while (SteadyClock::now() < end) {
    for (auto& dealer : dealers) {
      for (int k = 0; k < 8; ++k) {
        std::string bytes(1 + random() % 512, '\0');
        for (char& c : bytes) c = static_cast<char>(random());
        if (dealer.send(zmq::buffer(bytes), zmq::send_flags::dontwait)) ++sent;
      }
      // The replies to garbage are not read: ZeroMQ drops them at the high-water mark.
      zmq::message_t reply;
      while (dealer.recv(reply, zmq::recv_flags::dontwait)) {
      }
    }
    std::this_thread::sleep_for(1ms);
  }
  return sent;
}

class HardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string missing =
        ct::MissingBinary({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN, COHORT_CLI_BIN});
    if (!missing.empty()) GTEST_SKIP() << missing;
  }
};

TEST_F(HardeningTest, AGarbageFloodFromManySocketsLosesNoNodeAndKeepsTheLogSmall) {
  ct::ClusterOptions options;
  options.heartbeat_timeout = "4s";
  ct::LocalCluster cluster({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN}, options);
  ASSERT_EQ(cluster.StartCoordinator(), "");
  ASSERT_EQ(cluster.StartAgent({NodeId("flood-a")}), "");
  ASSERT_EQ(cluster.StartAgent({NodeId("flood-b")}), "");

  std::atomic<uint64_t> sent{0};
  std::thread flooder([&] {
    sent = Flood({cluster.agent_endpoint(), cluster.client_endpoint()}, 12, 5s);
  });
  // Valid requests are answered all along, and both nodes stay READY.
  auto client = cluster.Client(3s);
  int answered = 0, asked = 0;
  std::vector<std::string> problems;
  auto until = SteadyClock::now() + 5s;
  while (SteadyClock::now() < until) {
    ++asked;
    auto nodes = client.ListNodes();
    if (!nodes.ok()) {
      problems.push_back(nodes.status().ToString());
    } else {
      ++answered;
      for (const auto& n : *nodes) {
        if (n.state != "READY") problems.push_back(n.node_id + " is " + n.state);
      }
    }
    std::this_thread::sleep_for(250ms);
  }
  flooder.join();
  EXPECT_EQ(answered, asked) << ::testing::PrintToString(problems);
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
  EXPECT_GT(sent.load(), 1000u) << "the flood did not get going";

  // A job still runs through.
  auto name = client.Submit(TinyJob("after_flood"));
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  auto job = ct::WaitForJobEnd(client, *name, 30s);
  EXPECT_EQ(job.state, wire::JobState::SUCCEEDED) << job.message;

  // Stopping it writes its totals: the flood was read, and the log stayed small.
  cluster.coordinator().Stop();
  std::string log = ct::ReadFile(cluster.coordinator().log_path());
  EXPECT_EQ(log.find("LOST"), std::string::npos) << cluster.Logs();
  EXPECT_LT(log.size(), 64u * 1024) << "the coordinator log grew to " << log.size() << " bytes";
  std::smatch match;
  ASSERT_TRUE(std::regex_search(log, match, std::regex("bad_frames=([0-9]+)"))) << log;
  uint64_t bad = std::stoull(match[1]);
  EXPECT_GT(bad, sent.load() / 2) << "frames sent: " << sent.load();
  size_t lines = 0;
  for (size_t at = log.find("bad frame"); at != std::string::npos;
       at = log.find("bad frame", at + 1)) {
    ++lines;
  }
  EXPECT_LE(lines, 30u) << "bad frames read: " << bad;
}

TEST_F(HardeningTest, SpecsOverTheSizeLimitAreRefusedAndTheCoordinatorKeepsRunning) {
  ct::LocalCluster cluster({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN});
  ASSERT_EQ(cluster.StartCoordinator(), "");
  // A few MiB: a valid job whose file is padded by a comment.
  std::string big = TinyJob("too_big") + "# " + std::string(3u << 20, 'x') + "\n";
  std::string file = cluster.scratch("too_big.yaml");
  std::filesystem::create_directories(cluster.scratch());
  ct::WriteFile(file, big);

  // The C++ client sends it; the coordinator refuses it naming the limit.
  auto client = cluster.Client(10s);
  auto refused = client.Submit(big);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("over the limit of 1 MiB"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("--max-spec-size"), std::string::npos);
  auto study = client.SubmitStudy("name: s\n# " + std::string(2u << 20, 'y') + "\n");
  EXPECT_EQ(study.status().code(), StatusCode::kInvalidArgument) << study.status().ToString();

  // The CLI refuses it before sending (exit 2); told a larger limit, it sends it and reports
  // the coordinator's refusal (exit 2).
  std::vector<std::string> cli = {"--insecure", "--coordinator", cluster.client_endpoint(),
                                  "submit", file};
  auto local = ct::RunProcess(COHORT_CLI_BIN, cli);
  EXPECT_EQ(local.exit_code, 2) << local.err;
  EXPECT_NE(local.err.find("over the limit of 1 MiB"), std::string::npos) << local.err;
  auto remote = ct::RunProcess(COHORT_CLI_BIN, cli, {"COHORT_MAX_SPEC_SIZE=8MiB"});
  EXPECT_EQ(remote.exit_code, 2) << remote.err;
  EXPECT_NE(remote.err.find("the coordinator rejected the job spec"), std::string::npos)
      << remote.err;
  EXPECT_NE(remote.err.find("--max-spec-size"), std::string::npos) << remote.err;

  // Still running and serving; nothing of the refused job was kept.
  EXPECT_TRUE(cluster.coordinator().running()) << cluster.Logs();
  auto accepted = client.Submit(TinyJob("small_one"));
  EXPECT_TRUE(accepted.ok()) << accepted.status().ToString();
  auto jobs = client.ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ(jobs->front().name, "small_one");
}

TEST_F(HardeningTest, AGangThatCanNeverFitIsRefusedAndOneThatWaitsSaysWhy) {
  ct::ClusterOptions options;
  options.heartbeat_timeout = "2s";  // the registration grace before submits are checked
  ct::LocalCluster cluster({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN}, options);
  ASSERT_EQ(cluster.StartCoordinator(), "");
  ASSERT_EQ(cluster.StartAgent({NodeId("fit-a"), 1}), "");
  ASSERT_EQ(cluster.StartAgent({NodeId("fit-b"), 1}), "");
  auto client = cluster.Client();

  // Once the grace is over, a gang that no idle node holds is refused.
  Status refused;
  int probes = 0;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto name = client.Submit(TinyJob("probe_" + std::to_string(++probes), 64));
        if (name.ok()) {
          (void)client.Cancel(*name);
          return false;
        }
        refused = name.status();
        return true;
      },
      15s, 200ms));
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
  EXPECT_NE(refused.message().find("chief pool needs 64 GPUs per replica; the largest node has 1"),
            std::string::npos)
      << refused.ToString();
  std::filesystem::create_directories(cluster.scratch());
  ct::WriteFile(cluster.scratch("huge.yaml"), TinyJob("huge", 64));
  auto cli =
      ct::RunProcess(COHORT_CLI_BIN, {"--insecure", "--coordinator", cluster.client_endpoint(),
                                      "submit", cluster.scratch("huge.yaml")});
  EXPECT_EQ(cli.exit_code, 2) << cli.err;
  EXPECT_NE(cli.err.find("job huge cannot run on this cluster: chief pool needs 64 GPUs per "
                         "replica; the largest node has 1"),
            std::string::npos)
      << cli.err;

  // A gang that fits the idle cluster but not what is free now waits, and says why.
  auto blocker = client.Submit(TinyJob("blocker", 1, 0, "/bin/sleep, '60'"));
  ASSERT_TRUE(blocker.ok()) << blocker.status().ToString();
  auto running = client.WaitForJob(
      "blocker", [](const wire::JobInfoT& j) { return j.state == wire::JobState::RUNNING; },
      SteadyClock::now() + 20s, 100ms);
  ASSERT_TRUE(running.ok()) << running.status().ToString() << cluster.Logs();
  auto pair = client.Submit(TinyJob("pair", 1, 1));
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  std::string message;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        auto status = ct::RunProcess(COHORT_CLI_BIN, {"--insecure", "--coordinator",
                                                      cluster.client_endpoint(), "status", "pair"});
        message = status.out;
        return status.out.find(
                   "waiting for room for 2 replicas with 1 GPU, 1 CPU each; 1 fits "
                   "now") != std::string::npos;
      },
      10s, 200ms))
      << message;
  ASSERT_TRUE(client.Cancel("blocker").ok());
  auto done = ct::WaitForJobEnd(client, "pair", 30s);
  EXPECT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message << cluster.Logs();
}

}  // namespace
}  // namespace cohort
