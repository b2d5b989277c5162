// Recovery end to end: real cohort-coordinator and cohort-agent processes on loopback,
// real replicas (the digits-trainer, the built-in cohort-reducer, small shell programs), driven
// through the client library and the `cohort` CLI. Each test ends by checking the process table:
// no replica of the cluster outlives its job (LocalCluster::WaitForNoReplicaProcesses).
//
//   - the newest checkpoint is corrupted while a trainer is frozen, then the trainer is killed:
//     the restarted attempt resumes from the previous valid checkpoint (the agent's log and the
//     attempt's own log in `cohort logs` say which one it skipped and why) and ends with the
//     uninterrupted run's model;
//   - a permanent exit code fails the job with no retry; a retryable one that keeps coming spends
//     the restart budget and fails the job; `cohort status` says which and why;
//   - a SIGKILLed reducer makes the trainers' all-reduce fail (they name the reducer) and restarts
//     the Reduction Server job from its checkpoint with replacement reducers; the job ends with
//     the uninterrupted run's model;
//   - SIGTERM to an agent (preemption) makes its node DRAINING: its replica restarts on the other
//     node while the drained node is not yet LOST, and nothing new is placed on it;
//   - a chief that succeeds while the coordinator is down, on an agent then stopped and started
//     again before the coordinator returns: the job ends SUCCEEDED, run once;
//   - the coordinator's state dir is lost while a job runs and restored from a --backup-dir
//     backup (--restore-state): the job goes on untouched, its replica never restarted; the
//     replica of a job submitted after the backup is stopped.
//
// Binaries come from CMake ($<TARGET_FILE:...>); a test whose binaries are missing skips.
// Waiting is deadline-driven; no test sleeps for timing.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "common/client.h"
#include "tests/testing/binaries.h"
#include "tests/testing/local_cluster.h"
#include "tests/testing/process.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// Committed checkpoints (ckpt-<step> directories with a MANIFEST) under `dir`, by step.
std::map<int64_t, std::string> CommittedCheckpoints(const std::string& dir) {
  std::map<int64_t, std::string> out;
  std::error_code ec;
  static const std::regex kName("ckpt-([0-9]+)");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    std::smatch match;
    if (!std::regex_match(name, match, kName)) continue;
    if (!ct::FileExists(entry.path().string() + "/MANIFEST")) continue;
    out[std::stoll(match[1].str())] = entry.path().string();
  }
  return out;
}

// "model crc32 1a2b3c4d after 900 steps" -> "1a2b3c4d"; "" when the log has no such line.
std::string ModelCrc(const std::string& log) {
  static const std::regex kCrc("model crc32 ([0-9a-f]{8}) after");
  std::smatch match;
  return std::regex_search(log, match, kCrc) ? match[1].str() : "";
}

class RecoveryTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!cluster_) return;
    if (HasFailure()) std::cerr << cluster_->Logs();
    // Safety net only: every test checks for leftovers itself before this.
    for (pid_t pid : cluster_->ReplicaProcesses()) ::kill(pid, SIGKILL);
    cluster_.reset();
  }

  void StartCluster(ct::ClusterOptions options = {}) {
    cluster_ = std::make_unique<ct::LocalCluster>(
        ct::ClusterBinaries{COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN}, options);
    ASSERT_EQ(cluster_->StartCoordinator(), "");
  }

  // Node ids carry the pid: agents on one host must not share one (ctest runs tests in parallel).
  static std::string Node(const std::string& name) {
    return name + "-" + std::to_string(::getpid());
  }

  std::string OutputDir(const std::string& job) { return cluster_->scratch(job); }

  wire::JobInfoT WaitForEnd(const std::string& job, std::chrono::milliseconds timeout) {
    auto client = cluster_->Client();
    return ct::WaitForJobEnd(client, job, timeout);
  }

  const wire::ReplicaInfoT* FindReplica(const wire::JobInfoT& job, const std::string& name) {
    for (const auto& r : job.replicas) {
      if (r && r->replica == name) return r.get();
    }
    return nullptr;
  }

  // Every log of every attempt of `replica`, as `cohort logs` prints them.
  std::string CliLogs(const std::string& job, const std::string& replica = "chief-0") {
    auto r = Cli({"logs", job, "--replica", replica});
    return r.out + r.err;
  }

  ct::RunResult Cli(std::vector<std::string> args) {
    std::vector<std::string> full = {"--insecure", "--coordinator", cluster_->client_endpoint()};
    full.insert(full.end(), args.begin(), args.end());
    return ct::RunProcess(COHORT_CLI_BIN, full, {}, 20s);
  }

  // Live replica processes of this cluster whose command line contains `needle`: where replicas
  // run in PID namespaces, each replica's cohort-replica-init (whose arguments hold the command,
  // and whose pid the agent logs as the replica's) as well as the command's own process.
  std::vector<pid_t> ReplicaProcessesRunning(const std::string& needle) {
    std::vector<pid_t> out;
    for (pid_t pid : cluster_->ReplicaProcesses()) {
      if (ct::ProcessCommandLine(pid).find(needle) != std::string::npos) out.push_back(pid);
    }
    return out;
  }

  // The same without cohort-replica-init: the processes of the command itself (the ones a
  // SIGSTOP freezes).
  std::vector<pid_t> CommandProcessesRunning(const std::string& needle) {
    std::vector<pid_t> out;
    for (pid_t pid : ReplicaProcessesRunning(needle)) {
      const std::string command_line = ct::ProcessCommandLine(pid);
      const fs::path argv0 = command_line.substr(0, command_line.find(' '));
      if (argv0.filename() != "cohort-replica-init") out.push_back(pid);
    }
    return out;
  }

  std::string NodeState(const std::string& node_id) {
    auto client = cluster_->Client();
    auto nodes = client.ListNodes();
    if (!nodes.ok()) return "?";
    for (const auto& n : *nodes) {
      if (n.node_id == node_id) return n.state;
    }
    return "absent";
  }

  std::unique_ptr<ct::LocalCluster> cluster_;
};

#define REQUIRE_BINARIES(...)                                                             \
  do {                                                                                    \
    if (const std::string missing = ct::MissingBinary({__VA_ARGS__}); !missing.empty()) { \
      GTEST_SKIP() << missing;                                                            \
    }                                                                                     \
  } while (0)

// A digits-trainer pool entry (chief or worker), deterministic, checkpointing every
// `checkpoint_every` steps; about 30 steps an epoch at batch 48, and a 100 ms pause after each
// epoch (the model is unchanged) so the job is still running when a test strikes, however fast
// the machine.
// `env`: a YAML flow map for the pool's environment ("" for none).
std::string TrainerPool(const std::string& role, int replicas, int epochs, int checkpoint_every,
                        int hidden, const std::string& env = "") {
  return "  - role: " + role + "\n    replicas: " + std::to_string(replicas) +
         "\n    resources: {cpus: 1}\n    process:\n      command: [" +
         std::string(COHORT_TRAINER_BIN) + "]\n      args: [--epochs=" + std::to_string(epochs) +
         ", --checkpoint-every=" + std::to_string(checkpoint_every) +
         ", --keep-checkpoints=5, --seed=5, --hidden=" + std::to_string(hidden) +
         ", --batch-size=48, --optimizer=momentum, --epoch-pause-ms=100]\n" +
         (env.empty() ? std::string() : "      env: " + env + "\n");
}

TEST_F(RecoveryTest, CorruptedNewestCheckpointRestartResumesFromThePreviousValidOne) {
  REQUIRE_BINARIES(COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN, COHORT_CLI_BIN, COHORT_TRAINER_BIN);
  StartCluster();
  ASSERT_EQ(cluster_->StartAgent({Node("node-a"), 0, 2}), "");
  auto client = cluster_->Client();
  auto job_yaml = [&](const std::string& name) {
    return "name: " + name + "\noutput_dir: " + OutputDir(name) + "\nworker_pools:\n" +
           TrainerPool("chief", 1, 10, 10, 16) + "scheduling: {timeout: 5m, max_restarts: 2}\n";
  };
  // The reference: the same job, never interrupted.
  ASSERT_TRUE(client.Submit(job_yaml("reference")).ok());
  wire::JobInfoT reference = WaitForEnd("reference", 90s);
  ASSERT_EQ(reference.state, wire::JobState::SUCCEEDED) << reference.message;
  const std::string reference_model = ct::ReadFile(OutputDir("reference") + "/model/model.bin");
  ASSERT_FALSE(reference_model.empty());

  const std::string job = "corrupt";
  const std::string checkpoints = OutputDir(job) + "/checkpoints";
  auto sub = client.Submit(job_yaml(job));
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();

  // Two committed checkpoints, then freeze the trainer so that none is added while we look.
  std::vector<pid_t> trainer;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        if (CommittedCheckpoints(checkpoints).size() < 2) return false;
        trainer = CommandProcessesRunning(COHORT_TRAINER_BIN);
        return trainer.size() == 1;
      },
      60s, 10ms))
      << "the trainer never committed two checkpoints while running";
  ASSERT_EQ(::kill(trainer[0], SIGSTOP), 0);
  auto committed = CommittedCheckpoints(checkpoints);
  ASSERT_GE(committed.size(), 2u);
  auto newest = std::prev(committed.end());
  auto previous = std::prev(newest);
  // Truncate the newest checkpoint's state file: its MANIFEST no longer verifies.
  const std::string state_file = newest->second + "/trainer_state.bin";
  ASSERT_TRUE(ct::FileExists(state_file)) << state_file;
  fs::resize_file(state_file, fs::file_size(state_file) / 2);
  // A crash: exit by SIGKILL is retryable, so the chief restarts as attempt 1.
  ASSERT_EQ(::kill(trainer[0], SIGKILL), 0);

  wire::JobInfoT done = WaitForEnd(job, 90s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_EQ(done.restarts, 1);
  const wire::ReplicaInfoT* chief = FindReplica(done, "chief-0");
  ASSERT_NE(chief, nullptr);
  EXPECT_EQ(chief->attempt, 1);

  // The agent skipped the torn checkpoint, naming it, and restored the previous one: the
  // restarted trainer got COHORT_RESTORE_CHECKPOINT = that one and says so in `cohort logs`.
  std::string agent_log = cluster_->agent(Node("node-a")).Log(1 << 20);
  EXPECT_NE(agent_log.find("skipping checkpoint: " + newest->second), std::string::npos)
      << agent_log;
  EXPECT_NE(agent_log.find("restoring from " + previous->second), std::string::npos) << agent_log;
  std::string logs = CliLogs(job);
  // The attempt's own log, too, says what the agent skipped and where it restores from.
  EXPECT_NE(logs.find("cohort-agent: skipped checkpoint: " + newest->second), std::string::npos)
      << logs;
  EXPECT_NE(logs.find("cohort-agent: restoring from checkpoint " + previous->second),
            std::string::npos)
      << logs;
  EXPECT_NE(logs.find("restored checkpoint " + previous->second + " at step " +
                      std::to_string(previous->first)),
            std::string::npos)
      << logs;
  // Resumed from an older step, it still trains to the uninterrupted run's model, bit for bit.
  EXPECT_TRUE(ct::ReadFile(OutputDir(job) + "/model/model.bin") == reference_model)
      << "the resumed run's model differs from the reference";
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
}

TEST_F(RecoveryTest, PermanentExitFailsAtOnceAndASpentRestartBudgetFailsWithItsReason) {
  REQUIRE_BINARIES(COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN, COHORT_CLI_BIN);
  StartCluster();
  ASSERT_EQ(cluster_->StartAgent({Node("node-a"), 0, 2}), "");
  auto client = cluster_->Client();
  auto job_yaml = [&](const std::string& name, const std::string& script, int max_restarts) {
    return "name: " + name + "\noutput_dir: " + OutputDir(name) +
           "\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n"
           "    process:\n      command: [/bin/sh, -c, '" +
           script + "', " + name + "]\n" +
           "scheduling: {timeout: 5m, max_restarts: " + std::to_string(max_restarts) + "}\n";
  };

  // Exit 2 is permanent: no retry, though the budget allows three.
  ASSERT_TRUE(client.Submit(job_yaml("permanent", "echo bad flags; exit 2", 3)).ok());
  wire::JobInfoT permanent = WaitForEnd("permanent", 30s);
  ASSERT_EQ(permanent.state, wire::JobState::FAILED) << permanent.message;
  EXPECT_EQ(permanent.restarts, 0);
  const wire::ReplicaInfoT* chief = FindReplica(permanent, "chief-0");
  ASSERT_NE(chief, nullptr);
  EXPECT_EQ(chief->attempt, 0);
  EXPECT_EQ(chief->exit_code, 2);
  auto status = Cli({"status", "permanent"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("FAILED"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("permanent failure"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("Restarts:"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("0 of 3, each of the replica that fell (restart_job_on_worker_restart "
                            "unset)\n"),
            std::string::npos)
      << status.out;

  // Exit 137 is retryable: two restarts, then the third failure spends the budget.
  ASSERT_TRUE(
      client.Submit(job_yaml("flaky", "echo attempt $COHORT_RESTART_COUNT; exit 137", 2)).ok());
  wire::JobInfoT flaky = WaitForEnd("flaky", 30s);
  ASSERT_EQ(flaky.state, wire::JobState::FAILED) << flaky.message;
  EXPECT_EQ(flaky.restarts, 2);
  chief = FindReplica(flaky, "chief-0");
  ASSERT_NE(chief, nullptr);
  EXPECT_EQ(chief->attempt, 2);
  EXPECT_EQ(chief->exit_code, 137);
  status = Cli({"status", "flaky"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("FAILED"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("the restart budget (max_restarts=2) is spent"), std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("2 of 2"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("restart 1/2"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("restart 2/2"), std::string::npos) << status.out;
  EXPECT_NE(CliLogs("flaky").find("attempt 2"), std::string::npos) << CliLogs("flaky");
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
}

TEST_F(RecoveryTest, KilledReducerRestartsTheJobFromItsCheckpointWithTheUninterruptedModel) {
  REQUIRE_BINARIES(COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN, COHORT_CLI_BIN, COHORT_TRAINER_BIN,
                   COHORT_REDUCER_BIN);
  StartCluster();
  ASSERT_EQ(cluster_->StartAgent({Node("node-a"), 0, 5}), "");
  auto client = cluster_->Client();
  // examples/jobs/digits_ddp.yaml, smaller: a chief and two workers averaging through two
  // reducers, the whole job restarted when any replica is. Without shared memory the trainers
  // talk as on separate hosts, so they use the Reduction Server (on one host over shared memory
  // the communicator picks the ring and the reducers would carry nothing).
  const std::string kAcrossHosts = "{UCX_TLS: \"tcp,self\"}";
  auto job_yaml = [&](const std::string& name) {
    return "name: " + name + "\noutput_dir: " + OutputDir(name) + "\nworker_pools:\n" +
           TrainerPool("chief", 1, 12, 20, 32, kAcrossHosts) +
           TrainerPool("worker", 2, 12, 20, 32, kAcrossHosts) +
           "  - role: reducer\n    replicas: 2\n    resources: {cpus: 1}\n    builtin: reducer\n"
           "scheduling: {timeout: 5m, max_restarts: 3, restart_job_on_worker_restart: true}\n";
  };

  ASSERT_TRUE(client.Submit(job_yaml("reference")).ok());
  wire::JobInfoT reference = WaitForEnd("reference", 120s);
  ASSERT_EQ(reference.state, wire::JobState::SUCCEEDED) << reference.message;
  EXPECT_EQ(reference.restarts, 0);
  const std::string reference_crc = ModelCrc(CliLogs("reference"));
  ASSERT_FALSE(reference_crc.empty()) << CliLogs("reference");
  ASSERT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived the reference job";

  ASSERT_TRUE(client.Submit(job_yaml("reducer_lost")).ok());
  const std::string checkpoints = OutputDir("reducer_lost") + "/checkpoints";
  // Reducer 0 gets chunk 0, which every all-reduce sends, however small the buffer.
  pid_t reducer0 = 0;
  static const std::regex kStarted("reducer_lost/reducer-0 attempt 0: started pid ([0-9]+)");
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        if (CommittedCheckpoints(checkpoints).empty()) return false;
        std::smatch match;
        std::string log = cluster_->agent(Node("node-a")).Log(1 << 20);
        if (!std::regex_search(log, match, kStarted)) return false;
        reducer0 = static_cast<pid_t>(std::stol(match[1].str()));
        auto running = ReplicaProcessesRunning("cohort-reducer");
        return std::find(running.begin(), running.end(), reducer0) != running.end();
      },
      60s, 10ms))
      << "the job never ran to its first checkpoint with reducer-0 up";
  ASSERT_EQ(::kill(reducer0, SIGKILL), 0);

  wire::JobInfoT done = WaitForEnd("reducer_lost", 120s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_GE(done.restarts, 1);
  for (const auto& r : done.replicas) EXPECT_GE(r->attempt, 1) << r->replica;
  bool reducer_event = false;
  for (const auto& e : done.events) {
    if (e->message.find("the whole job") != std::string::npos &&
        e->message.find("reducer-") != std::string::npos) {
      reducer_event = true;
    }
  }
  EXPECT_TRUE(reducer_event) << "no restart event names the killed reducer";
  // The trainers' all-reduce failed on the lost reducer (it did not hang until stopped).
  std::string first_attempts;
  for (const std::string replica : {"chief-0", "worker-0", "worker-1"}) {
    first_attempts += Cli({"logs", "reducer_lost", "--replica", replica, "--attempt", "0"}).out;
  }
  EXPECT_NE(first_attempts.find("UNAVAILABLE: averaging gradients at step"), std::string::npos)
      << first_attempts;
  EXPECT_NE(first_attempts.find("reducer 0"), std::string::npos) << first_attempts;
  std::string logs = CliLogs("reducer_lost");
  EXPECT_NE(logs.find("restored checkpoint " + checkpoints), std::string::npos) << logs;
  // Only an attempt that trained to the end prints the crc: the last one.
  EXPECT_EQ(ModelCrc(logs), reference_crc) << logs;
  EXPECT_TRUE(ct::ReadFile(OutputDir("reducer_lost") + "/model/model.bin") ==
              ct::ReadFile(OutputDir("reference") + "/model/model.bin"))
      << "the restarted run's model differs from the uninterrupted run's";
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
}

TEST_F(RecoveryTest, SigtermedAgentDrainsItsReplicaRestartsElsewhereBeforeTheNodeIsLost) {
  REQUIRE_BINARIES(COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN, COHORT_CLI_BIN);
  // A long heartbeat timeout: whatever happens here happens while the drained node is not LOST.
  StartCluster({"60s"});
  const std::string node_a = Node("node-a"), node_b = Node("node-b");
  ASSERT_EQ(cluster_->StartAgent({node_a, 0, 1}), "");
  auto client = cluster_->Client();
  const std::string script = cluster_->scratch("resumable.sh");
  const std::string release = cluster_->scratch("release");
  ct::WriteFile(
      script,
      "#!/bin/sh\n"
      "trap 'echo \"resumable: SIGTERM on attempt $COHORT_RESTART_COUNT\"; exit 143' TERM\n"
      "echo \"resumable: attempt $COHORT_RESTART_COUNT running\"\n"
      "while [ ! -e \"$1\" ]; do sleep 0.05; done\n"
      "echo resumable: released\n",
      /*executable=*/true);
  auto job_yaml = [&](const std::string& name, const std::string& command) {
    return "name: " + name + "\noutput_dir: " + OutputDir(name) +
           "\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n"
           "    process:\n      command: [" +
           command +
           "]\n"
           "scheduling: {timeout: 5m, max_restarts: 2}\n";
  };
  ASSERT_TRUE(client.Submit(job_yaml("drained", script + ", " + release)).ok());
  auto on = [&](const std::string& job, const std::string& node, int min_attempt) {
    auto info = client.GetJob(job);
    if (!info.ok()) return false;
    const wire::ReplicaInfoT* r = FindReplica(*info, "chief-0");
    return r && r->node_id == node && r->attempt >= min_attempt &&
           r->state == wire::ReplicaState::RUNNING;
  };
  ASSERT_TRUE(ct::WaitUntil([&] { return on("drained", node_a, 0); }, 20s))
      << "the job never ran on " << node_a;
  ASSERT_EQ(cluster_->StartAgent({node_b, 0, 1}), "");

  cluster_->agent(node_a).Signal(SIGTERM);  // a preemption notice
  // The replica is preempted and placed on node-b, not back on its previous node, which has the
  // free CPU but is draining (and not LOST: the heartbeat timeout is a minute).
  ASSERT_TRUE(ct::WaitUntil([&] { return on("drained", node_b, 1); }, 30s))
      << "chief-0 did not restart on " << node_b << " while " << node_a << " drained";
  std::string drained_state = NodeState(node_a);
  EXPECT_EQ(drained_state, "DRAINING");
  auto status = cluster_->agent(node_a).Wait(20s);
  ASSERT_TRUE(status.has_value()) << "the agent did not exit after its grace period";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;

  // A job submitted now fits only on the draining node (node-b is full): it must wait for node-b.
  ASSERT_TRUE(client.Submit(job_yaml("newcomer", "/bin/sh, -c, 'echo newcomer ran'")).ok());
  EXPECT_EQ(NodeState(node_a), "DRAINING");
  ct::WriteFile(release, "go");
  wire::JobInfoT drained = WaitForEnd("drained", 30s);
  ASSERT_EQ(drained.state, wire::JobState::SUCCEEDED) << drained.message;
  EXPECT_EQ(drained.restarts, 1);
  wire::JobInfoT newcomer = WaitForEnd("newcomer", 30s);
  ASSERT_EQ(newcomer.state, wire::JobState::SUCCEEDED) << newcomer.message;
  ASSERT_EQ(newcomer.replicas.size(), 1u);
  EXPECT_EQ(newcomer.replicas[0]->node_id, node_b);
  std::string logs = CliLogs("drained");
  EXPECT_NE(logs.find("resumable: SIGTERM on attempt 0"), std::string::npos) << logs;
  EXPECT_NE(logs.find("resumable: attempt 1 running"), std::string::npos) << logs;
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
}

// The coordinator is down (killed) when a job's chief succeeds, and the agent is then stopped and
// started again, an ordinary start (a reboot, a `systemctl restart`), before the coordinator comes
// back: the agent kept the end on disk (its ends file) and reports it, so the job ends SUCCEEDED
// having run once, instead of its replica being taken for lost with the node and run again.
TEST_F(RecoveryTest, AnEndTheCoordinatorMissedSurvivesTheAgentsRestart) {
  REQUIRE_BINARIES(COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN);
  StartCluster({"60s"});
  const std::string node = Node("node-a");
  ASSERT_EQ(cluster_->StartAgent({node, 0, 2}), "");
  auto client = cluster_->Client();
  const std::string release = cluster_->scratch("release"), runs = cluster_->scratch("runs");
  ASSERT_TRUE(client
                  .Submit("name: unheard\noutput_dir: " + OutputDir("unheard") +
                          "\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                          "    resources: {cpus: 1}\n    process:\n"
                          "      command: [/bin/sh, -c, 'echo run >> " +
                          runs + "; while [ ! -e " + release +
                          " ]; do sleep 0.05; done; echo unheard-done']\n"
                          "scheduling: {max_restarts: 3}\n")
                  .ok());
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto info = client.GetJob("unheard");
        return info.ok() && info->state == wire::JobState::RUNNING;
      },
      20s))
      << "the job never ran";

  cluster_->coordinator().Kill();
  ct::WriteFile(release, "go");
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "the chief did not end";
  cluster_->agent(node).Signal(SIGTERM);
  auto stopped = cluster_->agent(node).Wait(30s);
  ASSERT_TRUE(stopped.has_value()) << "the agent did not stop";
  EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0) << *stopped;

  ASSERT_EQ(cluster_->StartCoordinator(), "");
  ASSERT_EQ(cluster_->StartAgent({node, 0, 2}), "");
  wire::JobInfoT info = WaitForEnd("unheard", 30s);
  EXPECT_EQ(info.state, wire::JobState::SUCCEEDED) << info.message;
  EXPECT_EQ(info.restarts, 0);
  EXPECT_EQ(ct::ReadFile(runs), "run\n") << "the chief ran again";
  const std::string agent_log = cluster_->agent(node).Log(1 << 20);
  EXPECT_NE(agent_log.find("kept how 1 replica attempt(s) ended here before this start"),
            std::string::npos)
      << agent_log;
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
}

TEST_F(RecoveryTest, ALostStateDiskIsRestoredFromABackupAndTheRunningJobGoesOnUntouched) {
  REQUIRE_BINARIES(COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN, COHORT_CLI_BIN);
  const std::string backups =
      fs::path(::testing::TempDir()) / ("cohort-recovery-backups-" + std::to_string(::getpid()));
  fs::remove_all(backups);
  StartCluster(
      {"10s", false, {"--backup-dir", backups, "--backup-every", "1s", "--backup-keep", "3"}});
  const std::string node = Node("node-a");
  ASSERT_EQ(cluster_->StartAgent({node, 0, 2}), "");
  auto client = cluster_->Client();
  const std::string release = cluster_->scratch("release");
  const std::string job = "backed-up";
  // A one-CPU job of a chief that runs `script` (then `more` args), its output in OutputDir.
  auto submit = [&](const std::string& name, const std::string& script,
                    const std::string& more = "") {
    return client
        .Submit("name: " + name + "\noutput_dir: " + OutputDir(name) +
                "\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n"
                "    process:\n      command: [/bin/sh, -c, '" +
                script + "'" + more + "]\n")
        .ok();
  };
  ASSERT_TRUE(submit(job, "echo $$ > " + cluster_->scratch("pid") + "; while [ ! -e " + release +
                              " ]; do sleep 0.05; done; echo released"));
  auto running = [&] {
    auto info = client.GetJob(job);
    return info.ok() && info->state == wire::JobState::RUNNING;
  };
  ASSERT_TRUE(ct::WaitUntil(running, 20s)) << "the job never ran";
  // Not just there: the shell creates the file before it writes the pid.
  ASSERT_TRUE(ct::WaitUntil([&] { return !ct::ReadFile(cluster_->scratch("pid")).empty(); }, 10s));
  const std::string pid = ct::ReadFile(cluster_->scratch("pid"));
  // A job that runs when the backup is taken and succeeds after it: the restored coordinator
  // thinks it still runs, and must learn from the agent how it ended, not run it again. Each
  // start of it adds a line to `runs`.
  const std::string finisher = "ends-after-backup";
  const std::string finish = cluster_->scratch("finish");
  const std::string runs = cluster_->scratch("runs");
  ASSERT_TRUE(submit(
      finisher, "echo run >> " + runs + "; while [ ! -e " + finish + " ]; do sleep 0.05; done"));
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto info = client.GetJob(finisher);
        return info.ok() && info->state == wire::JobState::RUNNING;
      },
      20s));
  // A job queued when the backup is taken (the node's two CPUs are taken) that runs and succeeds
  // after it: the restored coordinator has it queued, never placed, and must learn from the
  // agent that it ran, not run it again.
  const std::string queued = "queued-at-backup";
  const std::string queued_runs = cluster_->scratch("queued-runs");
  ASSERT_TRUE(submit(queued, "echo run >> " + queued_runs));
  // A backup that began after the job ran: two more written from now on.
  auto written = [&] {
    std::string log = ct::ReadFile(cluster_->coordinator().log_path());
    size_t n = 0;
    for (size_t at = log.find("state backup: wrote"); at != std::string::npos;
         at = log.find("state backup: wrote", at + 1)) {
      ++n;
    }
    return n;
  };
  const size_t before = written();
  ASSERT_TRUE(ct::WaitUntil([&] { return written() >= before + 2; }, 20s))
      << cluster_->coordinator().Log();
  // Rotation: however many were written, three are kept.
  ASSERT_TRUE(ct::WaitUntil([&] { return written() >= 4; }, 20s));
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(backups)) {
    if (e.path().extension() == ".db") kept.push_back(e.path().string());
  }
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept.size(), 3u);
  ASSERT_FALSE(kept.empty());

  // Copied aside: rotation removes it within seconds.
  const std::string backup = cluster_->scratch("chosen-backup.db");
  fs::copy_file(kept.back(), backup);
  // The job that ends after that backup.
  ASSERT_EQ(client.GetJob(queued)->state, wire::JobState::QUEUED);
  ct::WriteFile(finish, "go");
  ASSERT_EQ(WaitForEnd(finisher, 30s).state, wire::JobState::SUCCEEDED);
  ASSERT_EQ(WaitForEnd(queued, 30s).state, wire::JobState::SUCCEEDED);
  // A job submitted after that backup: the restore will not know it.
  ASSERT_TRUE(submit("since", "while :; do sleep 0.05; done", ", since-marker"));
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto info = client.GetJob("since");
        return info.ok() && info->state == wire::JobState::RUNNING;
      },
      20s));
  ASSERT_FALSE(ReplicaProcessesRunning("since-marker").empty());

  // While the coordinator runs, a restore is refused and changes nothing.
  ct::RunResult busy =
      ct::RunProcess(COHORT_COORDINATOR_BIN,
                     {"--state-dir", cluster_->state_dir(), "--restore-state", backup}, {}, 30s);
  EXPECT_EQ(busy.exit_code, 1) << busy.out << busy.err;
  EXPECT_NE(busy.err.find("stop it first"), std::string::npos) << busy.err;

  // The coordinator's disk dies: its process and its whole state dir are gone.
  cluster_->coordinator().Kill();
  fs::remove_all(cluster_->state_dir());
  ct::RunResult restored =
      ct::RunProcess(COHORT_COORDINATOR_BIN,
                     {"--state-dir", cluster_->state_dir(), "--restore-state", backup}, {}, 30s);
  ASSERT_EQ(restored.exit_code, 0) << restored.out << restored.err;
  EXPECT_NE(restored.out.find("restored " + cluster_->state_dir() + "/state.db"), std::string::npos)
      << restored.out;
  ASSERT_EQ(cluster_->StartCoordinator(), "");

  // The agent registers again with the replica it kept running: the job goes on, no restart.
  ASSERT_TRUE(ct::WaitUntil([&] { return NodeState(node) == "READY"; }, 30s));
  auto info = client.GetJob(job);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->state, wire::JobState::RUNNING) << info->message;
  // The job the backup does not know is unknown, and its replica is stopped.
  EXPECT_EQ(client.GetJob("since").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(ct::WaitUntil([&] { return ReplicaProcessesRunning("since-marker").empty(); }, 20s))
      << "the replica of a job the restored coordinator does not know runs on";
  ct::WriteFile(release, "go");
  wire::JobInfoT ended = WaitForEnd(job, 30s);
  ASSERT_EQ(ended.state, wire::JobState::SUCCEEDED) << ended.message;
  EXPECT_EQ(ended.restarts, 0);
  ASSERT_EQ(ended.replicas.size(), 1u);
  EXPECT_EQ(ended.replicas[0]->attempt, 0);
  EXPECT_EQ(ct::ReadFile(cluster_->scratch("pid")), pid) << "the replica was started again";
  // The one that ended after the backup ended as it did, once: its agent said so at registration.
  wire::JobInfoT finished = WaitForEnd(finisher, 10s);
  EXPECT_EQ(finished.state, wire::JobState::SUCCEEDED) << finished.message;
  EXPECT_EQ(finished.restarts, 0);
  ASSERT_EQ(finished.replicas.size(), 1u);
  EXPECT_EQ(finished.replicas[0]->attempt, 0);
  EXPECT_EQ(ct::ReadFile(runs), "run\n") << "the job that ended after the backup ran again";
  // The one queued at backup time ended too, by its chief's exit 0 the agent remembered.
  wire::JobInfoT ran_since = WaitForEnd(queued, 10s);
  EXPECT_EQ(ran_since.state, wire::JobState::SUCCEEDED) << ran_since.message;
  EXPECT_NE(ran_since.message.find("the chief exited 0 (attempt 0 on node " + node +
                                   ", a run this coordinator's state had not recorded"),
            std::string::npos)
      << ran_since.message;
  EXPECT_EQ(ct::ReadFile(queued_runs), "run\n") << "the job queued at backup time ran again";
  EXPECT_NE(CliLogs(job).find("released"), std::string::npos);
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
  fs::remove_all(backups);
}

}  // namespace
}  // namespace cohort
