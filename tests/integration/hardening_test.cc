// A control plane that cannot be knocked over (issue 15), with the real daemons as processes on
// loopback: a garbage flood from many sockets while agents heartbeat, and specs over the size
// limit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/client.h"
#include "common/curve_keys.h"
#include "common/messaging.h"
#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
namespace ct = ::cohort::testing;
using SteadyClock = std::chrono::steady_clock;

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

// Submits job `name` to `cluster`, one chief that sleeps 300 s, and waits until it runs; the
// processes of its replica go to `replica`.
void RunSleeper(ct::LocalCluster& cluster, const std::string& name, std::vector<pid_t>* replica) {
  auto client = cluster.Client();
  ASSERT_TRUE(client
                  .Submit("name: " + name +
                          "\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                          "    resources: {cpus: 1}\n    process: {command: [/bin/sleep, '300']}\n")
                  .ok());
  ASSERT_TRUE(ct::WaitForJobState(client, name, wire::JobState::RUNNING, 30s)) << cluster.Logs();
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        *replica = cluster.ReplicaProcesses();
        return !replica->empty();
      },
      10s));
}

class HardeningTest : public ct::ClusterTest {
 protected:
  void SetUp() override { NeedBinaries({COHORT_CLI_BIN}); }

  // Starts cluster_ with `options` and two one-GPU nodes, <prefix>-a-<pid> and <prefix>-b-<pid>,
  // whose ids go to *a and *b. A daemon that does not start is a fatal failure.
  void StartTwoNodes(ct::ClusterOptions options, const std::string& prefix, std::string* a,
                     std::string* b) {
    ASSERT_NO_FATAL_FAILURE(StartCoordinator(std::move(options)));
    *a = UniqueNodeId(prefix + "-a");
    *b = UniqueNodeId(prefix + "-b");
    ASSERT_EQ(cluster_->StartAgent({*a, 1}), "");
    ASSERT_EQ(cluster_->StartAgent({*b, 1}), "");
  }
};

TEST_F(HardeningTest, AGarbageFloodFromManySocketsLosesNoNodeAndKeepsTheLogSmall) {
  ct::ClusterOptions options;
  options.heartbeat_timeout = "4s";
  ct::LocalCluster cluster({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN}, options);
  ASSERT_EQ(cluster.StartCoordinator(), "");
  ASSERT_EQ(cluster.StartAgent({UniqueNodeId("flood-a")}), "");
  ASSERT_EQ(cluster.StartAgent({UniqueNodeId("flood-b")}), "");

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
  ASSERT_EQ(cluster.StartAgent({UniqueNodeId("fit-a"), 1}), "");
  ASSERT_EQ(cluster.StartAgent({UniqueNodeId("fit-b"), 1}), "");
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

// The agent key of one node may not speak for another, and removing a node's key file ends its
// session within one heartbeat interval (CURVE cluster, real agents).
TEST_F(HardeningTest, NodeIdentityIsBoundToKeysAndARemovedKeyEndsTheSession) {
  ct::ClusterOptions options;
  options.secure = true;
  // Heartbeats every second (a quarter of the timeout, at most 1 s) and a timeout far longer than
  // the test waits: a node LOST while the test waits was ended by its key's removal, not by
  // silence.
  options.heartbeat_timeout = "60s";
  std::string a, b;
  ASSERT_NO_FATAL_FAILURE(StartTwoNodes(options, "id", &a, &b));
  auto client = cluster_->Client();
  ASSERT_TRUE(client.Submit(TinyJob("pair", 1, 1, "/bin/sleep, '60'")).ok());
  auto running = client.WaitForJob(
      "pair", [](const wire::JobInfoT& j) { return j.state == wire::JobState::RUNNING; },
      SteadyClock::now() + 20s, 100ms);
  ASSERT_TRUE(running.ok()) << running.status().ToString() << cluster_->Logs();
  const wire::ReplicaInfoT* on_b = nullptr;
  for (const auto& r : running->replicas) {
    if (r->node_id == b) on_b = r.get();
  }
  ASSERT_NE(on_b, nullptr);

  // A's key reports B's replica SUCCEEDED (from a routing id of its own: taking A's would hand
  // A's connection over): refused and logged; the job keeps running.
  zmq::context_t context(1);
  auto security = CurveClientSecurity(cluster_->keys_dir() + "/" + a + ".key",
                                      cluster_->keys_dir() + "/coordinator.pub");
  ASSERT_TRUE(security.ok()) << security.status().ToString();
  auto spoofer = DealerSocket::Connect(context, cluster_->agent_endpoint(), "spoofer", *security);
  ASSERT_TRUE(spoofer.ok());
  wire::ReplicaUpdateT update;
  update.node_id = b;
  update.status = std::make_unique<wire::ReplicaStatusT>();
  update.status->job = "pair";
  update.status->replica = on_b->replica;
  update.status->attempt = on_b->attempt;
  update.status->state = wire::ReplicaState::SUCCEEDED;
  update.status->exit_code = 0;
  auto spoofed = spoofer->Call(std::move(update), 5s);
  EXPECT_EQ(spoofed.status().code(), StatusCode::kPermissionDenied) << spoofed.status().ToString();
  EXPECT_NE(spoofed.status().message().find("listed as node '" + a + "'"), std::string::npos)
      << spoofed.status().ToString();
  auto after = client.GetJob("pair");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, wire::JobState::RUNNING);
  EXPECT_NE(ct::ReadFile(cluster_->coordinator().log_path()).find("refused a ReplicaUpdate"),
            std::string::npos)
      << cluster_->Logs();

  // B's key file goes: B is LOST at its next heartbeat, long before the 60 s timeout.
  std::filesystem::remove(cluster_->keys_dir() + "/agents/" + b + ".pub");
  std::string state;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto nodes = client.ListNodes();
        if (!nodes.ok()) return false;
        for (const auto& n : *nodes) {
          if (n.node_id == b) state = n.state;
        }
        return state == "LOST";
      },
      15s, 100ms))
      << state << cluster_->Logs();
  std::string log = ct::ReadFile(cluster_->coordinator().log_path());
  EXPECT_NE(log.find("its agent's key was removed"), std::string::npos) << log;
  ASSERT_TRUE(client.Cancel("pair").ok());
}

// An admitted agent key that connects with another node's routing id takes nothing over: agents
// connect with "<node-id>/<random bits>", which no other peer knows, and the coordinator refuses
// every message from a routing id that is not of the connection's own node (PERMISSION_DENIED).
TEST_F(HardeningTest, AnotherNodesRoutingIdIsRefusedAndTakesOverNothing) {
  ct::ClusterOptions options;
  options.secure = true;
  std::string a, b;
  ASSERT_NO_FATAL_FAILURE(StartTwoNodes(options, "route", &a, &b));
  auto client = cluster_->Client();

  // A's key, connected under the routing ids B could have: its bare node id and the "B/" form.
  zmq::context_t context(1);
  auto security = CurveClientSecurity(cluster_->keys_dir() + "/" + a + ".key",
                                      cluster_->keys_dir() + "/coordinator.pub");
  ASSERT_TRUE(security.ok()) << security.status().ToString();
  std::vector<DealerSocket> rogues;
  for (const std::string& id : {b, b + "/0000000000000000"}) {
    auto rogue = DealerSocket::Connect(context, cluster_->agent_endpoint(), id, *security);
    ASSERT_TRUE(rogue.ok()) << rogue.status().ToString();
    for (const std::string& node : {a, b}) {
      wire::HeartbeatT heartbeat;
      heartbeat.node_id = node;
      auto refused = rogue->Call(std::move(heartbeat), 5s);
      EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied)
          << id << " for " << node << ": " << refused.status().ToString();
      EXPECT_NE(refused.status().message().find("its routing id must be '" + a + "/...'"),
                std::string::npos)
          << refused.status().ToString();
    }
    rogues.push_back(std::move(*rogue));
  }

  // With the rogues connected, B's launches still reach B: a gang over both nodes runs, and B
  // stays READY through several heartbeats.
  ASSERT_TRUE(client.Submit(TinyJob("over_both", 1, 1, "/bin/sleep, '60'")).ok());
  auto running = client.WaitForJob(
      "over_both", [](const wire::JobInfoT& j) { return j.state == wire::JobState::RUNNING; },
      SteadyClock::now() + 20s, 100ms);
  ASSERT_TRUE(running.ok()) << running.status().ToString() << cluster_->Logs();
  std::set<std::string> nodes;
  for (const auto& r : running->replicas) nodes.insert(r->node_id);
  EXPECT_EQ(nodes, (std::set<std::string>{a, b}));
  std::this_thread::sleep_for(3s);
  auto listed = client.ListNodes();
  ASSERT_TRUE(listed.ok());
  for (const auto& n : *listed) EXPECT_EQ(n.state, "READY") << n.node_id;
  // Nothing meant for B went to a rogue.
  for (auto& rogue : rogues) {
    while (true) {
      auto got = rogue.Receive(200ms);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      if (!got->has_value()) break;
      EXPECT_NE((*got)->type(), wire::Body::LaunchReplica);
      EXPECT_NE((*got)->type(), wire::Body::StopReplica);
    }
  }
  ASSERT_TRUE(client.Cancel("over_both").ok());
  auto ended = ct::WaitForJobEnd(client, "over_both", 20s);
  EXPECT_EQ(ended.state, wire::JobState::CANCELLED) << cluster_->Logs();
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "");
  EXPECT_NE(
      ct::ReadFile(cluster_->coordinator().log_path()).find("refused a Heartbeat from routing id"),
      std::string::npos)
      << cluster_->Logs();
}

// A client whose key is not listed is told so (CLI exit 4, the Python client raises Refused), and
// the coordinator logs the refused key once per peer; removing a client's key file refuses its
// later requests; a plaintext client gets no answer at all (exit 3).
TEST_F(HardeningTest, ARefusedClientKeyIsSaidToBeRefused) {
  if (!ct::FileExists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 is missing";
  ct::ClusterOptions options;
  options.secure = true;
  ct::LocalCluster cluster({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN}, options);
  ASSERT_EQ(cluster.StartCoordinator(), "");
  std::string mallory_dir = cluster.scratch("mallory");
  auto keys = GenerateCurveKeyPair();
  ASSERT_TRUE(keys.ok());
  ASSERT_TRUE(WriteCurveKeyFiles(mallory_dir, "client", *keys).ok());
  const std::string server_key = cluster.keys_dir() + "/coordinator.pub";
  auto cli = [&](const std::string& key) {
    return ct::RunProcess(COHORT_CLI_BIN, {"--coordinator", cluster.client_endpoint(), "--key", key,
                                           "--server-key", server_key, "--timeout", "10s", "list"});
  };
  for (int i = 0; i < 2; ++i) {
    auto refused = cli(mallory_dir + "/client.key");
    EXPECT_EQ(refused.exit_code, 4) << refused.out << refused.err;
    EXPECT_NE(refused.err.find("refused this key (not listed)"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find(keys->public_key), std::string::npos) << refused.err;
  }
  auto python = ct::RunProcess(
      "/usr/bin/python3",
      {"-c",
       "import sys\n"
       "from cohort import Client, Refused\n"
       "try:\n"
       "    Client(sys.argv[1], timeout_s=10, key_file=sys.argv[2], server_key_file=sys.argv[3])"
       ".list_jobs()\n"
       "except Refused as e:\n"
       "    print('refused:', e.code, e.message)\n"
       "    sys.exit(0)\n"
       "sys.exit(1)\n",
       cluster.client_endpoint(), mallory_dir + "/client.key", server_key},
      {"PYTHONPATH=" + std::string(COHORT_PYTHON_DIR)});
  EXPECT_EQ(python.exit_code, 0) << python.out << python.err;
  EXPECT_NE(python.out.find("refused: UNAUTHENTICATED"), std::string::npos) << python.out;

  // Logged once for that peer, with the key, however often it tried.
  std::string log = ct::ReadFile(cluster.coordinator().log_path());
  size_t lines = 0;
  for (size_t at = log.find(keys->public_key); at != std::string::npos;
       at = log.find(keys->public_key, at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << log;

  // The admin's key is removed: its live connection is refused from then on; so is a new one.
  auto admin = cluster.Client();
  ASSERT_TRUE(admin.ListJobs().ok());
  std::filesystem::remove(cluster.keys_dir() + "/clients/admin.pub");
  Status revoked;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        revoked = admin.ListJobs().status();
        return revoked.code() == StatusCode::kUnauthenticated;
      },
      10s, 100ms))
      << revoked.ToString();
  auto admin_cli = cli(cluster.keys_dir() + "/admin.key");
  EXPECT_EQ(admin_cli.exit_code, 4) << admin_cli.err;

  // Plaintext against a CURVE endpoint: nothing answers (exit 3), which is not a refusal.
  auto plain = ct::RunProcess(
      COHORT_CLI_BIN,
      {"--insecure", "--coordinator", cluster.client_endpoint(), "--timeout", "1s", "list"});
  EXPECT_EQ(plain.exit_code, 3) << plain.err;
  EXPECT_TRUE(cluster.coordinator().running());
}

// A second agent started on the work dir of one that runs (a second unit, one started by hand
// beside systemd's) is refused before it touches anything: it would take the first one's replicas
// for leftovers of an earlier run and kill them. The refusal names the dir and the agent holding
// it; the first agent and its replica run on.
TEST_F(HardeningTest, ASecondAgentOnARunningAgentsWorkDirIsRefusedAndKillsNothing) {
  ct::LocalCluster cluster({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN});
  ASSERT_EQ(cluster.StartCoordinator(), "");
  const std::string node = UniqueNodeId("dir-owner");
  ASSERT_EQ(cluster.StartAgent({.node_id = node}), "");
  std::vector<pid_t> replica;
  ASSERT_NO_FATAL_FAILURE(RunSleeper(cluster, "dir_lock", &replica));
  auto client = cluster.Client();

  const std::string work_dir = cluster.agent_work_dir(node);
  ct::RunResult second = ct::RunProcess(
      COHORT_AGENT_BIN, {"--insecure", "--coordinator", cluster.agent_endpoint(), "--node-id",
                         UniqueNodeId("dir-intruder"), "--work-dir", work_dir});
  EXPECT_EQ(second.exit_code, 1) << second.out << second.err;
  EXPECT_NE((second.out + second.err)
                .find("work dir " + work_dir + " is in use by another cohort-agent (pid " +
                      std::to_string(cluster.agent(node).pid()) +
                      "): each agent on a host needs a --work-dir of its own"),
            std::string::npos)
      << second.out << second.err;

  EXPECT_TRUE(cluster.agent(node).running());
  for (pid_t pid : replica) EXPECT_EQ(::kill(pid, 0), 0) << "replica process " << pid << " died";
  const std::vector<pid_t> after = cluster.ReplicaProcesses();
  EXPECT_EQ(std::set<pid_t>(after.begin(), after.end()),
            std::set<pid_t>(replica.begin(), replica.end()));
  auto job = client.GetJob("dir_lock");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->state, wire::JobState::RUNNING);
  ASSERT_TRUE(client.Cancel("dir_lock").ok());
  EXPECT_EQ(ct::WaitForJobEnd(client, "dir_lock", 30s).state, wire::JobState::CANCELLED);
}

// Two clusters' agents of one node id on one host, under one cgroup (two clusters in one shell,
// two test suites, one --cgroup-root): each has a work dir of its own, so the start of the second
// sweeps nothing of the first's running replica (whose cgroup the second would have taken for a
// leftover of its own while replica cgroups were keyed by node id alone), and both run jobs.
TEST_F(HardeningTest, AnAgentOfAnotherClusterWithTheSameNodeIdSweepsNothingOfThisOnes) {
  ct::LocalCluster first({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN});
  if (first.cgroup_root().empty()) GTEST_SKIP() << "no writable cgroup v2 here";
  ct::LocalCluster second({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN});
  const std::string node = UniqueNodeId("twin");
  ASSERT_EQ(first.StartCoordinator(), "");
  ASSERT_EQ(first.StartAgent({.node_id = node}), "");
  std::vector<pid_t> replica, second_replica;
  ASSERT_NO_FATAL_FAILURE(RunSleeper(first, "twin", &replica));

  ASSERT_EQ(second.StartCoordinator(), "");
  ASSERT_EQ(
      second.StartAgent({.node_id = node, .extra_args = {"--cgroup-root", first.cgroup_root()}}),
      "");
  ASSERT_NO_FATAL_FAILURE(RunSleeper(second, "twin", &second_replica));
  EXPECT_NE(first.agent_cgroup_dir(node), second.agent_cgroup_dir(node));
  for (ct::LocalCluster* cluster : {&first, &second}) {
    const std::string level = cluster->agent_cgroup_dir(node);
    EXPECT_TRUE(std::filesystem::is_directory(level)) << level;
    const std::string log = cluster->agent(node).Log(1 << 20);
    EXPECT_NE(log.find("replica cgroups under " + level + "\n"), std::string::npos) << log;
  }

  for (pid_t pid : replica) EXPECT_EQ(::kill(pid, 0), 0) << "replica process " << pid << " died";
  auto first_client = first.Client(), second_client = second.Client();
  auto still = first_client.GetJob("twin");
  ASSERT_TRUE(still.ok()) << still.status().ToString();
  EXPECT_EQ(still->state, wire::JobState::RUNNING);
  EXPECT_EQ(still->restarts, 0) << first.Logs();
  for (auto* client : {&first_client, &second_client}) {
    ASSERT_TRUE(client->Cancel("twin").ok());
    EXPECT_EQ(ct::WaitForJobEnd(*client, "twin", 30s).state, wire::JobState::CANCELLED);
  }
}

// An agent with cgroups sweeps its own level of them at start, and then, as one without, the
// processes that carry its work dir's COHORT_ATTEMPT_DIR: what an earlier run left outside that
// level is killed too. Here a replica of an image older than agent tags, in that image's level
// (<root>/cohort/<node id>, no tag), that the older image handed over in a live restart before
// the new one was SIGKILLed.
TEST_F(HardeningTest, AStartWithCgroupsAlsoKillsWhatAnEarlierRunLeftOutsideItsLevel) {
  ct::LocalCluster cluster({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN});
  if (cluster.cgroup_root().empty()) GTEST_SKIP() << "no writable cgroup v2 here";
  ASSERT_EQ(cluster.StartCoordinator(), "");
  const std::string node = UniqueNodeId("legacy-level");
  const std::string legacy = cluster.cgroup_root() + "/cohort/" + node + "/leftover.chief-0.0";
  ASSERT_TRUE(std::filesystem::create_directories(legacy)) << legacy;
  const std::string attempt_dir = cluster.agent_work_dir(node) + "/leftover/chief-0/attempt-0";
  const std::string marker = "COHORT_ATTEMPT_DIR=" + attempt_dir;
  char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("300"), nullptr};
  char* const envp[] = {const_cast<char*>(marker.c_str()), nullptr};
  const pid_t left = ::fork();  // the child only execs: nothing allocated after the fork
  ASSERT_GE(left, 0);
  if (left == 0) {
    ::execve("/bin/sleep", argv, envp);
    ::_exit(127);
  }
  ct::WriteFile(legacy + "/cgroup.procs", std::to_string(left) + "\n");

  ASSERT_EQ(cluster.StartAgent({.node_id = node}), "");
  int status = 0;
  const bool ended = ct::WaitUntil([&] { return ::waitpid(left, &status, WNOHANG) == left; }, 20s);
  if (!ended) {
    ::kill(left, SIGKILL);
    ::waitpid(left, &status, 0);
  }
  EXPECT_TRUE(ended) << "the agent's start left the process outside its level running";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  std::string log;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        log = cluster.agent(node).Log();
        return log.find("killed 1 process(es) of replicas left by an earlier run") !=
               std::string::npos;
      },
      10s))
      << log;
  ::rmdir(legacy.c_str());
  ::rmdir((cluster.cgroup_root() + "/cohort/" + node).c_str());
}

// An agent stopped cleanly (SIGTERM) leaves no cgroup of its own: its replicas' went with them, and
// then its level (<root>/cohort/<node id>@<tag>).
TEST_F(HardeningTest, AnAgentStoppedCleanlyLeavesNoCgroupBehind) {
  ct::LocalCluster cluster({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN});
  if (cluster.cgroup_root().empty()) GTEST_SKIP() << "no writable cgroup v2 here";
  ASSERT_EQ(cluster.StartCoordinator(), "");
  const std::string node = UniqueNodeId("cg-clean");
  ASSERT_EQ(cluster.StartAgent({.node_id = node}), "");
  const std::string node_dir = cluster.agent_cgroup_dir(node);
  ASSERT_TRUE(std::filesystem::is_directory(node_dir)) << node_dir;
  auto client = cluster.Client();
  ASSERT_TRUE(client
                  .Submit("name: cg_clean\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                          "    resources: {cpus: 1}\n    process: {command: [/bin/true]}\n")
                  .ok());
  EXPECT_EQ(ct::WaitForJobEnd(client, "cg_clean", 30s).state, wire::JobState::SUCCEEDED);
  cluster.agent(node).Signal(SIGTERM);
  ASSERT_EQ(cluster.agent(node).Wait(30s), std::optional<int>(0)) << "the agent did not stop";
  EXPECT_FALSE(std::filesystem::exists(node_dir)) << node_dir;
}

// An agent that cannot put replicas in cgroup v2 says so loudly at start, with the reason: turned
// off (--cgroups off), or a cgroup root that is no writable cgroup v2 directory (--cgroup-root at
// a plain directory, which stands for any unusable hierarchy: as root every real cgroup directory
// is writable). Both agents still register and serve (process groups and the environment marker
// then find replicas' processes: leftover_test).
TEST_F(HardeningTest, AnAgentWithoutWritableCgroupV2WarnsLoudlyAtStart) {
  ct::LocalCluster cluster({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN});
  ASSERT_EQ(cluster.StartCoordinator(), "");
  const std::string off = UniqueNodeId("cg-off"), plain = UniqueNodeId("cg-plain");
  const std::string root = cluster.scratch("not-a-cgroup");
  std::filesystem::create_directories(root);
  ASSERT_EQ(cluster.StartAgent({.node_id = off, .extra_args = {"--cgroups", "off"}}), "");
  ASSERT_EQ(cluster.StartAgent({.node_id = plain, .extra_args = {"--cgroup-root", root}}), "");

  std::string log_off = ct::ReadFile(cluster.agent(off).log_path());
  EXPECT_NE(log_off.find("NO CGROUPS: --cgroups off. Replicas run without CPU and memory limits"),
            std::string::npos)
      << log_off;
  std::string log_plain = ct::ReadFile(cluster.agent(plain).log_path());
  EXPECT_NE(log_plain.find("NO CGROUPS: no writable cgroup v2 (" + root +
                           " is not a cgroup v2 directory). Replicas run without CPU and memory "
                           "limits"),
            std::string::npos)
      << log_plain;
  // Nothing was made in a directory that is not a cgroup.
  EXPECT_TRUE(std::filesystem::is_empty(root));
  // At warning level (W), as the daemon's own line.
  for (const std::string* log : {&log_off, &log_plain}) {
    EXPECT_TRUE(std::regex_search(*log, std::regex(R"( W cohort-agent\[\d+\] NO CGROUPS: )")))
        << *log;
  }
}

}  // namespace
}  // namespace cohort
