// A stock PyTorch DDP script under Cohort (issue 13): real cohort-coordinator and cohort-agent
// processes on loopback run examples/torch/ddp_digits.py (torch.distributed with the gloo backend,
// `init_method="env://"`, a DistributedSampler, per-epoch checkpoints to $AIP_CHECKPOINT_DIR and
// resume from the newest) as chief + 2 workers on one-GPU agents (GPUs configured with --gpus;
// torch trains on CPU). Each fault hits the job after a given epoch's checkpoint is committed:
//
//   - node loss: the agent running RANK=1 and that replica's process group are SIGKILLed;
//   - preemption: the agent running RANK=1 gets SIGTERM;
//   - a lone replica: RANK=1's process group is SIGKILLed, its agent lives;
//   - a partition: the node running RANK=1 is cut off (its agent reaches the coordinator through
//     a TCP proxy the test cuts, and RANK=1 is frozen, as if its link to the other ranks were
//     gone too), with --fence-after: RANK=1 is ended by its own agent before the job runs again
//     elsewhere;
//   - a node holding two replicas of the job (chief and a worker) is lost, with
//     restart_job_on_worker_restart false and true;
//
// and in each the other ranks then die of gloo's "Connection reset by peer" with exit 1, so the
// job must end SUCCEEDED having resumed from a checkpoint (the script logs the epoch), with one
// restart spent for the incident. A script that exits 1 on its own while every node is healthy
// still fails the job at once, with no restart. `cohort suspend --wait` takes the job off its GPUs
// (another job runs there meanwhile) and `cohort resume` brings it back from its checkpoint,
// spending no restart. A script that checkpoints as the tutorials do
// (ddp_plain_save.py: torch.save straight into epoch_<N>.pt) loses the node that writes, its
// newest checkpoint cut short: an agent sets it aside and the job resumes from the one before.
//
// The same script with --backend=cohort and a reducer pool (the `cohort` torch.distributed
// backend on the Reduction Server) reaches gloo's accuracy, every rank ends with byte-identical
// parameters, and a node loss costs it one restart, as under gloo. Through four incidents in one
// job (a node loss, a coordinator restart, a preemption, a lone replica's kill) it spends three
// restarts and ends with the parameter bytes of a fault-free run.
//
// The tests need /usr/bin/python3 with torch (Debian's python3-torch); without it they skip,
// saying so. Three variables run them on another torch, as tests/torch/debian_torch_check.sh does
// for newer Debians' in a chroot: COHORT_TEST_TORCH_PYTHON (the replicas' interpreter),
// COHORT_TEST_PYTHON_DIR (the cohort package built for it) and COHORT_TEST_BUILTIN_DIR (the
// agents' --builtin-dir, with a cohort-reducer on that torch's UCX). They are kept short (a small
// MLP, 5 epochs of about a second, a 3 s heartbeat timeout) and wait on deadlines, never on sleeps.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/client.h"
#include "common/flight_recorder.h"
#include "common/job_spec.h"
#include "tests/testing/binaries.h"
#include "tests/testing/local_cluster.h"
#include "tests/testing/process.h"
#include "tests/testing/tcp_proxy.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
using namespace std::chrono_literals;
constexpr int kEpochs = 5;
// The fault comes once this epoch's checkpoint is committed: later epochs are still to run.
constexpr int kFaultAfterEpoch = 2;

// Environment variable `name`, or `fallback` where it is unset or empty.
std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

// The interpreter the replicas run: Debian's python3, or COHORT_TEST_TORCH_PYTHON, another torch's
// (tests/torch/debian_torch_check.sh points it at a newer Debian's python3 in a chroot).
std::string TorchPython() { return EnvOr("COHORT_TEST_TORCH_PYTHON", ct::kPython); }

// The cohort package with the torch backend built for TorchPython(): COHORT_TEST_PYTHON_DIR, or
// this build's for Debian's python3; "" when there is none.
std::string CohortPythonDir() {
  return EnvOr("COHORT_TEST_PYTHON_DIR", TorchPython() == ct::kPython ? COHORT_PYTHON_DIR : "");
}

// The agents' --builtin-dir, where they look for cohort-reducer first: COHORT_TEST_BUILTIN_DIR
// (with the two above, the reducers built against that other interpreter's UCX: a process and its
// peers must run one UCX release), or "" for this build's.
std::string BuiltinDir() { return EnvOr("COHORT_TEST_BUILTIN_DIR", ""); }

// Why the cohort backend's tests cannot run ("" when they can).
std::string CohortBackendMissing() {
  if (!CohortPythonDir().empty()) return "";
  if (TorchPython() != ct::kPython) {
    return "no cohort package built for " + TorchPython() + " (set COHORT_TEST_PYTHON_DIR)";
  }
  return std::string("the cohort torch backend was not built: ") + COHORT_TORCH_BACKEND_WHY;
}

// The parameter digest the script logs at its end ("parameters sha256 <hex>"), or "".
std::string LoggedDigest(const std::string& log) {
  static const std::regex kDigest("parameters sha256 ([0-9a-f]{64})");
  std::smatch digest;
  return std::regex_search(log, digest, kDigest) ? digest[1].str() : "";
}

// The last number in `log` after `label` (e.g. "final test accuracy 0.9610"), or -1.
double LoggedNumber(const std::string& log, const std::string& label) {
  const std::regex pattern(label + " ([0-9.]+)");
  double value = -1;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), pattern);
       it != std::sregex_iterator(); ++it) {
    value = std::stod((*it)[1].str());
  }
  return value;
}

// Why torch cannot run here ("" when it can).
std::string TorchMissing() { return ct::TorchMissing(TorchPython()); }

struct JobOptions {
  int epochs = kEpochs;
  bool restart_job_on_worker_restart = true;
  std::string extra_args;  // ", --flag=value" appended to the script's arguments
  std::string backend = "gloo";
  int reducers = 0;      // a pool of built-in reducers (for the cohort backend)
  int min_workers = -1;  // the worker pool's min_replicas (an elastic job); -1: none
  // A program each training replica runs the script under (its command line follows); "": none.
  std::string wrapper;
};

class TorchDdpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string missing = ct::MissingBinary({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN});
    if (!missing.empty()) GTEST_SKIP() << missing;
    if (!TorchMissing().empty()) GTEST_SKIP() << TorchMissing();
    ct::ClusterOptions options;
    options.heartbeat_timeout = "3s";
    cluster_ = std::make_unique<ct::LocalCluster>(
        ct::ClusterBinaries{COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN}, options);
    ASSERT_EQ(cluster_->StartCoordinator(), "");
  }

  void TearDown() override {
    if (!cluster_) return;
    if (HasFailure()) {
      std::cerr << cluster_->Logs();
      if (!job_.empty()) std::cerr << "--- chief-0 log ---\n" << ReplicaLog("chief-0") << "\n";
    }
    for (pid_t pid : cluster_->ReplicaProcesses()) ::kill(pid, SIGKILL);  // safety net only
    cluster_.reset();
  }

  // Node ids carry the pid: agents on one host must not share one (ctest runs tests in parallel).
  static std::string Node(const std::string& name) {
    return name + "-" + std::to_string(::getpid());
  }

  void StartAgents(const std::vector<std::string>& names, int gpus) {
    for (const auto& name : names) {
      ct::AgentOptions agent{Node(name), gpus, 4};
      if (!BuiltinDir().empty()) agent.extra_args = {"--builtin-dir", BuiltinDir()};
      ASSERT_EQ(cluster_->StartAgent(agent), "");
    }
  }

  std::string OutputDir() { return cluster_->scratch(job_); }

  // A job file's pool of `replicas` built-in reducers.
  static std::string ReducerPool(int replicas) {
    return "  - role: reducer\n    replicas: " + std::to_string(replicas) +
           "\n    resources: {cpus: 1, memory_mb: 256}\n    builtin: reducer\n";
  }

  // Chief + 2 workers of the stock script, one GPU each, the whole job restarted on a restart
  // unless told otherwise.
  std::string JobYaml(const JobOptions& options) {
    std::string env = "{OMP_NUM_THREADS: \"1\"";
    if (options.backend == "cohort") env += ", PYTHONPATH: " + CohortPythonDir();
    env += "}";
    std::string process =
        "    resources: {gpus: 1, cpus: 1}\n    process:\n      command: [" +
        (options.wrapper.empty() ? "" : options.wrapper + ", ") + TorchPython() + ", " +
        COHORT_TORCH_DDP_SCRIPT + "]\n      args: [--backend=" + options.backend +
        ", --epochs=" + std::to_string(options.epochs) +
        ", --hidden=32, --batch-size=32, --lr=0.1, --seed=3, --step-delay=0.06, --timeout=60" +
        options.extra_args + "]\n      env: " + env + "\n";
    const std::string reducers = options.reducers > 0 ? ReducerPool(options.reducers) : "";
    return "name: " + job_ + "\noutput_dir: " + OutputDir() +
           "\nworker_pools:\n  - role: chief\n    replicas: 1\n" + process +
           "  - role: worker\n    replicas: 2\n" +
           (options.min_workers >= 0
                ? "    min_replicas: " + std::to_string(options.min_workers) + "\n"
                : "") +
           process + reducers +
           "scheduling: {timeout: 5m, max_restarts: 3, restart_job_on_worker_restart: " +
           (options.restart_job_on_worker_restart ? "true" : "false") + "}\n";
  }

  void Submit(const std::string& job, const JobOptions& options = {}) {
    job_ = job;
    auto client = cluster_->Client();
    auto sub = client.Submit(JobYaml(options));
    ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  }

  std::optional<wire::JobInfoT> Job() {
    auto client = cluster_->Client();
    auto info = client.GetJob(job_);
    if (!info.ok()) return std::nullopt;
    return std::move(*info);
  }

  void WaitForRunning() {
    ASSERT_TRUE(ct::WaitUntil(
        [&] {
          auto job = Job();
          return job && job->state == wire::JobState::RUNNING;
        },
        60s))
        << "the job never ran";
  }

  // Waits until the job runs and rank 0 has committed the checkpoint of `epoch`; with
  // `restarts`, once the job has spent that many restarts.
  void WaitForCheckpoint(int epoch, std::optional<int> restarts = std::nullopt) {
    const std::string path = OutputDir() + "/checkpoints/epoch-" + std::to_string(epoch) + ".pt";
    ASSERT_TRUE(ct::WaitUntil(
        [&] {
          auto job = Job();
          return job && job->state == wire::JobState::RUNNING && ct::FileExists(path) &&
                 (!restarts || job->restarts == *restarts);
        },
        90s))
        << "the job never committed the checkpoint of epoch " << epoch
        << (restarts ? " after restart " + std::to_string(*restarts) : "");
  }

  std::string NodeOf(const std::string& replica) {
    auto job = Job();
    if (!job) return "";
    for (const auto& r : job->replicas) {
      if (r && r->replica == replica) return r->node_id;
    }
    return "";
  }

  // The live process of `replica` (the group leader the agent started), or -1.
  pid_t ReplicaPid(const std::string& replica) {
    const std::vector<pid_t> mine = ct::FindProcessesWithEnvOrCwd("COHORT_REPLICA=" + replica);
    for (pid_t pid : cluster_->ReplicaProcesses()) {
      bool named = std::find(mine.begin(), mine.end(), pid) != mine.end();
      if (named && ::getpgid(pid) == pid) return pid;
    }
    return -1;
  }

  // SIGKILLs the process group of `replica`'s process; false when it is not running.
  bool KillReplicaGroup(const std::string& replica) {
    pid_t pid = ReplicaPid(replica);
    return pid > 0 && ::kill(-pid, SIGKILL) == 0;
  }

  // Loses `node` as a machine is lost: its agent is SIGKILLed first, then the process groups of
  // `replicas` (each must be running there), every pid found before. An agent killed after its
  // replicas could first report their deaths as a crash, a different incident from a node loss.
  void LoseNode(const std::string& node, const std::vector<std::string>& replicas) {
    std::vector<pid_t> groups;
    for (const std::string& replica : replicas) {
      const pid_t pid = ReplicaPid(replica);
      ASSERT_GT(pid, 0) << replica << " is not running";
      groups.push_back(pid);
    }
    cluster_->agent(node).Kill();
    for (pid_t pid : groups) ::kill(-pid, SIGKILL);
  }

  // The replicas among `candidates` that run on `node`.
  std::vector<std::string> ReplicasOn(const std::string& node,
                                      const std::vector<std::string>& candidates) {
    std::vector<std::string> on;
    for (const std::string& replica : candidates) {
      if (NodeOf(replica) == node) on.push_back(replica);
    }
    return on;
  }

  // What `cohort checkpoint --job` says of this test's job (--json); discarded (not an object)
  // where the CLI failed, which fails the test.
  nlohmann::json CheckpointReport() {
    ct::RunResult listed = Cli({"checkpoint", "--job", job_, "--json"});
    EXPECT_EQ(listed.exit_code, 0) << listed.out << listed.err;
    nlohmann::json report = nlohmann::json::parse(listed.out, nullptr, false);
    EXPECT_TRUE(report.is_object()) << listed.out << listed.err;
    return report;
  }

  // The `cohort` CLI run against this cluster's coordinator with `args`.
  ct::RunResult Cli(const std::vector<std::string>& args) {
    EXPECT_EQ(ct::MissingBinary({COHORT_CLI_BIN}), "");
    std::vector<std::string> all = {"--insecure", "--coordinator", cluster_->client_endpoint()};
    all.insert(all.end(), args.begin(), args.end());
    return ct::RunProcess(COHORT_CLI_BIN, all, {}, 60s);
  }

  std::string ReplicaLog(const std::string& replica) {
    auto client = cluster_->Client();
    auto logs = client.ReadLogs(job_, replica, 0);
    if (!logs.ok()) return "(no log: " + logs.status().ToString() + ")";
    return std::string(logs->data.begin(), logs->data.end());
  }

  // chief-0's log once it holds the script's final accuracy (a failure says it never did).
  std::string ChiefFinalLog() {
    std::string log;
    EXPECT_TRUE(ct::WaitUntil(
        [&] {
          log = ReplicaLog("chief-0");
          return log.find("final test accuracy") != std::string::npos;
        },
        20s))
        << "chief-0 never logged its final accuracy: " << log;
    return log;
  }

  // The log of each training replica once it holds the script's final parameter digest (a
  // failure names `what` and the replica whose log never did).
  std::map<std::string, std::string> FinalLogs(const std::string& what) {
    std::map<std::string, std::string> logs;
    for (const std::string replica : {"chief-0", "worker-0", "worker-1"}) {
      std::string& log = logs[replica];
      EXPECT_TRUE(ct::WaitUntil(
          [&] {
            log = ReplicaLog(replica);
            return log.find("parameters sha256") != std::string::npos;
          },
          20s))
          << what << " " << replica << ": " << log;
    }
    return logs;
  }

  // Waits for the end of the job; then checks it SUCCEEDED once, every training replica ran a
  // second attempt, the chief's second attempt resumed from a checkpoint at or after the fault's
  // epoch and trained to the end, and no replica outlived the job.
  // `final_attempt`: the attempt every replica ends on (2 after a relaunch that spent nothing).
  void ExpectResumedAfterOneRestart(int final_attempt = 1) {
    ExpectResumed(/*restarts=*/1, final_attempt);
  }
  // The same, with `restarts` spent (0 after a suspension).
  void ExpectResumed(int restarts, int final_attempt) {
    auto client = cluster_->Client();
    wire::JobInfoT done = ct::WaitForJobEnd(client, job_, 150s);
    ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
    EXPECT_EQ(done.restarts, restarts) << "one incident spends one restart, a suspension none";
    for (const auto& r : done.replicas) EXPECT_EQ(r->attempt, final_attempt) << r->replica;

    std::smatch resumed;
    static const std::regex kResumed("resumed from epoch ([0-9]+)");
    const std::string log = ChiefFinalLog();
    EXPECT_NE(log.find("starting from scratch"), std::string::npos) << log;
    // Each attempt was told its restart count as torchrun tells it, and takes itself for one of
    // torchrun's workers (torch.distributed.is_torchelastic_launched()).
    for (int attempt : {0, final_attempt}) {
      const std::string line = "restart " + std::to_string(attempt) + " torchelastic True";
      EXPECT_NE(log.find(line), std::string::npos) << line << "\n" << log;
    }
    ASSERT_TRUE(std::regex_search(log, resumed, kResumed)) << log;
    int epoch = std::stoi(resumed[1].str());
    EXPECT_GE(epoch, kFaultAfterEpoch) << log;
    EXPECT_LT(epoch, kEpochs) << "the fault came after training ended: " << log;
    EXPECT_NE(log.find("epoch " + std::to_string(kEpochs) + "/" + std::to_string(kEpochs)),
              std::string::npos)
        << log;
    EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
    // Every rank ran the script to its end (none was stopped when the chief exited first:
    // scheduling.finish_grace).
    const wire::JobInfoT settled = ct::WaitForReplicasEnded(client, job_, 10s);
    for (const auto& r : settled.replicas) {
      if (r->replica.rfind("reducer-", 0) == 0) continue;
      EXPECT_EQ(r->state, wire::ReplicaState::SUCCEEDED) << r->replica << ": " << r->message;
      EXPECT_EQ(r->exit_code, 0) << r->replica;
    }
  }

  // Three one-GPU nodes run elastic job `job` (`options`, 12 epochs) of the stock script; past
  // the fault's epoch worker-0's node is lost (with any reducer there), and once two ranks have
  // trained three epochs more a fourth node joins. Expects the job SUCCEEDED with one restart,
  // the chief's log showing three, two, then three ranks, each later attempt resumed from a
  // later checkpoint, and every rank ending with the same parameters.
  void RunElasticJobThroughALossAndAGrowth(const std::string& job, JobOptions options) {
    StartAgents({"node-a", "node-b", "node-c"}, 1);
    options.epochs = 12;
    Submit(job, options);
    WaitForCheckpoint(kFaultAfterEpoch);
    const std::string node = NodeOf("worker-0");  // RANK=1
    ASSERT_FALSE(node.empty());
    LoseNode(node, ReplicasOn(node, {"worker-0", "reducer-0", "reducer-1"}));
    WaitForCheckpoint(kFaultAfterEpoch + 3, 1);
    auto info = Job();
    ASSERT_TRUE(info);
    for (const auto& r : info->replicas) {
      if (r->replica != "worker-1") continue;
      EXPECT_EQ(r->state, wire::ReplicaState::STOPPED);
      EXPECT_EQ(r->message.rfind("idle: the job runs without it", 0), 0u) << r->message;
    }
    StartAgents({"node-d"}, 1);

    auto client = cluster_->Client();
    wire::JobInfoT done = ct::WaitForJobEnd(client, job_, 150s);
    ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
    EXPECT_EQ(done.restarts, 1) << "the node loss spends one restart, the growth none";
    auto has_event = [&](const std::string& text) {
      return std::any_of(done.events.begin(), done.events.end(),
                         [&](const auto& e) { return e->message.find(text) != std::string::npos; });
    };
    EXPECT_TRUE(has_event("elastic: 1 of 2 workers (min_replicas 1), no room for worker-1"));
    EXPECT_TRUE(has_event("elastic: room for 1 more worker on " + Node("node-d") +
                          ": the job grows to 2 of 2 workers"));
    const std::string log = ChiefFinalLog();
    // Attempt 0 with three ranks, 1 with two, 2 with three again.
    for (const std::string& line :
         {"rank 0/3 local rank 0/1 node 0/3 backend " + options.backend + " device cpu restart 0 ",
          "rank 0/2 local rank 0/1 node 0/2 backend " + options.backend + " device cpu restart 1 ",
          "rank 0/3 local rank 0/1 node 0/3 backend " + options.backend +
              " device cpu restart 2 "}) {
      EXPECT_NE(log.find(line), std::string::npos) << line << "\n" << log;
    }
    static const std::regex kResumed("resumed from epoch ([0-9]+)");
    std::vector<int> resumed;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), kResumed);
         it != std::sregex_iterator(); ++it) {
      resumed.push_back(std::stoi((*it)[1].str()));
    }
    ASSERT_EQ(resumed.size(), 2u) << log;
    EXPECT_GE(resumed[0], kFaultAfterEpoch) << log;
    EXPECT_GE(resumed[1], kFaultAfterEpoch + 3) << log;
    EXPECT_NE(log.find("epoch 12/12"), std::string::npos) << log;
    std::set<std::string> digests;
    const std::map<std::string, std::string> final_logs = FinalLogs(job);
    for (const auto& [replica, final_log] : final_logs) digests.insert(LoggedDigest(final_log));
    EXPECT_EQ(digests.size(), 1u) << "the ranks ended with different parameters";
    // worker-1 sat attempt 1 out and joined the growth at the others' attempt, as torchrun's
    // workers share one restart count.
    const std::string& rejoined = final_logs.at("worker-1");
    EXPECT_NE(rejoined.find("restart 2 torchelastic True"), std::string::npos) << rejoined;
    EXPECT_EQ(rejoined.find("restart 1 torchelastic"), std::string::npos) << rejoined;
    // The coordinator counts the shrink and the growth for Prometheus.
    httplib::Client http("127.0.0.1", cluster_->coordinator_http_port());
    http.set_read_timeout(5, 0);
    auto metrics = http.Get("/metrics");
    ASSERT_TRUE(metrics) << "the coordinator's /metrics did not answer";
    for (const char* line : {"cohort_elastic_resizes_total{direction=\"shrink\"} 1\n",
                             "cohort_elastic_resizes_total{direction=\"grow\"} 1\n"}) {
      EXPECT_NE(metrics->body.find(line), std::string::npos) << line << metrics->body;
    }
    EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
  }

  // Chief + 1 worker, each running torchrun with 2 ranks of the stock script on the cohort
  // backend (`--redirects 9:1 --tee 9:1` only gets Debian's torch 1.13 torchrun past its start
  // under Python 3.11: tests/torch/torchrun_check.py), beside a pool of 2 reducers. torchrun is
  // given no --nnodes, --node_rank, --master_addr or --master_port: it takes them from the
  // replica's PET_* variables, as under Kubeflow's PyTorchJob.
  void SubmitTorchrunJob(const std::string& job, int epochs, const std::string& extra_args,
                         const std::string& scheduling) {
    job_ = job;
    const std::string launch =
        "exec " + TorchPython() +
        " -m torch.distributed.run --redirects 9:1 --tee 9:1 --nproc_per_node 2 " +
        COHORT_TORCH_DDP_SCRIPT + " --backend=cohort --epochs=" + std::to_string(epochs) +
        " --hidden=32 --batch-size=32 --lr=0.1 --seed=3 --timeout=60" + extra_args;
    const std::string process =
        "    resources: {gpus: 1, cpus: 2}\n    process:\n      command: "
        "[/bin/sh, -c, \"" +
        launch + "\"]\n      env: {PYTHONPATH: " + CohortPythonDir() + "}\n";
    auto client = cluster_->Client();
    auto sub = client.Submit("name: " + job_ + "\noutput_dir: " + OutputDir() +
                             "\nworker_pools:\n  - role: chief\n    replicas: 1\n" + process +
                             "  - role: worker\n    replicas: 1\n" + process + ReducerPool(2) +
                             "scheduling: {timeout: 5m, " + scheduling + "}\n");
    ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  }

  // A torchrun job (SubmitTorchrunJob, steps slowed down) on three one-GPU nodes, once it has
  // committed the checkpoint of kFaultAfterEpoch.
  void RunTorchrunJobPastTheFaultsEpoch(const std::string& job, const std::string& scheduling) {
    StartAgents({"node-a", "node-b", "node-c"}, 1);
    SubmitTorchrunJob(job, kEpochs, " --step-delay=0.03", scheduling);
    WaitForCheckpoint(kFaultAfterEpoch);
  }

  // The chief's last attempt resumed from the checkpoint of the fault's epoch or a later one, and
  // no replica outlived the job.
  void ExpectChiefResumedFromTheFaultsCheckpoint() {
    const std::string log = ChiefFinalLog();
    static const std::regex kResumed("resumed from epoch ([0-9]+)");
    std::smatch resumed;
    ASSERT_TRUE(std::regex_search(log, resumed, kResumed)) << log;
    EXPECT_GE(std::stoi(resumed[1].str()), kFaultAfterEpoch) << log;
    EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
  }

  // The processes of `replica`'s torchrun rank of local rank `local_rank`: the script's, not
  // torchrun's own.
  std::vector<pid_t> TorchrunRanks(const std::string& replica, int local_rank) {
    const std::vector<pid_t> of_replica =
        ct::FindProcessesWithEnvOrCwd("COHORT_REPLICA=" + replica);
    const std::vector<pid_t> of_rank =
        ct::FindProcessesWithEnvOrCwd("LOCAL_RANK=" + std::to_string(local_rank));
    std::vector<pid_t> found;
    for (pid_t pid : ct::FindProcessesWithEnvOrCwd("COHORT_JOB=" + job_)) {
      const std::string command = ct::ProcessCommandLine(pid);
      if (std::count(of_replica.begin(), of_replica.end(), pid) &&
          std::count(of_rank.begin(), of_rank.end(), pid) &&
          command.find("ddp_digits.py") != std::string::npos &&
          command.find("torch.distributed.run") == std::string::npos) {
        found.push_back(pid);
      }
    }
    return found;
  }

  // Proxies between agents and the coordinator, by node id, for the tests that cut one; declared
  // first, so they outlive the cluster (TearDown stops its agents while they still reach it).
  std::map<std::string, std::unique_ptr<ct::TcpProxy>> proxies_;
  std::unique_ptr<ct::LocalCluster> cluster_;
  std::string job_;
};

// The example job files: valid, and the cohort one is the gloo one with one word changed and a
// reducer pool added.
TEST(TorchDdpExampleTest, ShippedJobFilesDifferOnlyInTheBackendAndTheReducerPool) {
  const std::string dir = COHORT_TORCH_EXAMPLES_DIR;
  auto gloo = LoadJobSpec(dir + "/ddp_gloo.yaml");
  auto with_cohort = LoadJobSpec(dir + "/ddp_cohort.yaml");
  ASSERT_TRUE(gloo.ok()) << gloo.status().ToString();
  ASSERT_TRUE(with_cohort.ok()) << with_cohort.status().ToString();
  EXPECT_EQ(gloo->FindPool(Role::kReducer), nullptr);
  const WorkerPoolSpec* reducers = with_cohort->FindPool(Role::kReducer);
  ASSERT_NE(reducers, nullptr);
  EXPECT_EQ(reducers->builtin, Builtin::kReducer);
  EXPECT_TRUE(reducers->one_per_node) << "reducers that share a node share its link";
  for (Role role : {Role::kChief, Role::kWorker}) {
    const WorkerPoolSpec* a = gloo->FindPool(role);
    const WorkerPoolSpec* b = with_cohort->FindPool(role);
    ASSERT_TRUE(a && b && a->process && b->process) << RoleName(role);
    ProcessSpec as_gloo = *b->process;
    for (auto& arg : as_gloo.args) {
      if (arg == "--backend=cohort") arg = "--backend=gloo";
    }
    EXPECT_EQ(as_gloo, *a->process) << RoleName(role);
    EXPECT_NE(*b->process, *a->process) << RoleName(role) << ": no --backend=cohort";
    EXPECT_EQ(a->replicas, b->replicas);
  }
  EXPECT_EQ(gloo->scheduling, with_cohort->scheduling);
  EXPECT_EQ(gloo->scheduling.restart_job_on_worker_restart, true);
}

// A partition rather than a crash: the node of RANK=1 is cut off, its agent and its rank alive,
// their TCP connections up. The agent's link to the coordinator goes through a proxy the test
// cuts; the ranks talk directly, so RANK=1 is frozen (SIGSTOP) to stand for its side of the cut.
// The other ranks block in their next all-reduce (nothing resets their connections to RANK=1);
// the coordinator declares the node lost after its heartbeat timeout and stops them, and, with
// --fence-after, places the job again only once the cut-off agent has surely ended RANK=1, which
// it does when it has heard nothing for the fence (a SIGTERM, which waits on the frozen rank,
// then the SIGKILL of the grace). RANK=1's old process is gone before the job is placed again:
// never two RANK=1s at once.
TEST_F(TorchDdpTest, APartitionedRankIsFencedBeforeTheJobRestartsFromItsCheckpoint) {
  ct::ClusterOptions options;
  options.heartbeat_timeout = "3s";
  options.coordinator_args = {"--fence-after", "3s", "--stop-grace", "3s"};
  cluster_ = std::make_unique<ct::LocalCluster>(
      ct::ClusterBinaries{COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN}, options);
  ASSERT_EQ(cluster_->StartCoordinator(), "");
  const std::string& endpoint = cluster_->agent_endpoint();
  const int upstream = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  for (const std::string name : {"node-a", "node-b", "node-c", "node-d"}) {
    auto proxy = std::make_unique<ct::TcpProxy>(upstream);
    ASSERT_GT(proxy->port(), 0);
    ct::AgentOptions agent{Node(name), 1, 4};
    if (!BuiltinDir().empty()) agent.extra_args = {"--builtin-dir", BuiltinDir()};
    agent.coordinator_endpoint = proxy->endpoint();
    ASSERT_EQ(cluster_->StartAgent(agent), "");
    proxies_[Node(name)] = std::move(proxy);
  }
  Submit("partition");
  // RANK=1's node and process are found before the checkpoint: the fault then comes at once after
  // it, however slowly a loaded machine scans /proc, well before training could end.
  std::string node;
  pid_t rank1 = -1;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        node = NodeOf("worker-0");
        rank1 = ReplicaPid("worker-0");
        return !node.empty() && rank1 > 0;
      },
      60s))
      << "worker-0 never ran";
  ASSERT_EQ(proxies_.count(node), 1u) << node;
  WaitForCheckpoint(kFaultAfterEpoch);
  ASSERT_EQ(::kill(-rank1, SIGSTOP), 0);
  proxies_.at(node)->Cut();

  // When RANK=1's process was last seen alive (polled), and when the job was placed again.
  auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  int64_t rank1_gone_ms = 0;
  int64_t placed_again_ms = 0;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        if (rank1_gone_ms == 0 && ::kill(rank1, 0) != 0) rank1_gone_ms = now_ms();
        auto job = Job();
        if (!job) return false;
        int placements = 0;
        for (const auto& e : job->events) {
          if (e->message.rfind("placed on ", 0) != 0) continue;
          ++placements;
          placed_again_ms = e->time_ms;
        }
        return placements >= 2;
      },
      60s, 20ms))
      << "the job was never placed again";
  EXPECT_NE(rank1_gone_ms, 0) << "RANK=1 still ran when the job was placed again";
  EXPECT_LE(rank1_gone_ms, placed_again_ms) << "RANK=1 ended after the job was placed again";
  EXPECT_NE(ct::ReadFile(cluster_->agent(node).log_path()).find("fenced: no word"),
            std::string::npos);
  proxies_.at(node)->Heal();
  ExpectResumedAfterOneRestart();
}

TEST_F(TorchDdpTest, NodeLossRestartsTheJobOnceFromItsCheckpoint) {
  StartAgents({"node-a", "node-b", "node-c", "node-d"}, 1);
  Submit("node_loss");
  WaitForCheckpoint(kFaultAfterEpoch);
  const std::string node = NodeOf("worker-0");  // RANK=1
  ASSERT_FALSE(node.empty());
  LoseNode(node, {"worker-0"});
  ExpectResumedAfterOneRestart();
}

// An elastic stock DDP job (its worker pool's min_replicas: 1) loses a node of a cluster with no
// spare one: instead of waiting in the queue for a node, it restarts with the ranks left
// (WORLD_SIZE 2), from its checkpoint; once a node joins it grows back to three ranks, from its
// checkpoint again, spending no second restart, and trains to the end, every rank with the same
// parameters.
TEST_F(TorchDdpTest, AnElasticJobGoesOnWithTheRanksLeftAfterANodeLossAndGrowsBack) {
  JobOptions options;
  options.min_workers = 1;
  RunElasticJobThroughALossAndAGrowth("elastic", options);
}

// The same on the Reduction Server: the reducers are told of each new world as the ranks are.
TEST_F(TorchDdpTest, AnElasticJobOnTheCohortBackendShrinksAndGrowsWithItsReducers) {
  if (!CohortBackendMissing().empty()) GTEST_SKIP() << CohortBackendMissing();
  JobOptions options;
  options.min_workers = 1;
  options.backend = "cohort";
  options.reducers = 2;
  RunElasticJobThroughALossAndAGrowth("cohort_elastic", options);
}

// An agent reports its replica killed and dies a moment later, before the heartbeat timeout: the
// job's restart is placed on its node again (the gang needs all three), and that launch is never
// answered. When the node is declared lost, the launch that never ran costs nothing: the job is
// placed again on a new node, resumes from its checkpoint and has spent one restart, the kill's.
// The other agents are held (SIGSTOP) from the kill until the dying agent is gone, so that the
// restart cannot be placed, and its launch reach that agent, before it dies.
TEST_F(TorchDdpTest, ARestartLaunchedToAnAgentThatJustDiedSpendsNoSecondRestart) {
  StartAgents({"node-a", "node-b", "node-c"}, 1);
  Submit("launch_into_silence");
  WaitForCheckpoint(kFaultAfterEpoch);
  const std::string dying = NodeOf("worker-0");  // RANK=1
  ASSERT_FALSE(dying.empty());
  std::vector<std::string> held;
  for (const char* name : {"node-a", "node-b", "node-c"}) {
    if (Node(name) != dying) held.push_back(Node(name));
  }
  for (const std::string& node : held) cluster_->agent(node).Signal(SIGSTOP);
  ASSERT_TRUE(KillReplicaGroup("worker-0")) << "worker-0 is not running";
  const bool reported = ct::WaitUntil(
      [&] {
        auto job = Job();
        if (!job) return false;
        for (const auto& r : job->replicas) {
          if (r->replica == "worker-0") return r->state == wire::ReplicaState::FAILED;
        }
        return false;
      },
      2s);
  cluster_->agent(dying).Kill();  // its last word was worker-0's end
  for (const std::string& node : held) cluster_->agent(node).Signal(SIGCONT);
  ASSERT_TRUE(reported) << "the dying agent did not report worker-0's kill";
  // The restart goes to all three nodes; once the dead one is lost, a fourth takes its place.
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto job = Job();
        if (!job) return false;
        for (const auto& e : job->events) {
          if (e->message.rfind("relaunch (no restart spent): ", 0) == 0) return true;
        }
        return false;
      },
      30s))
      << "no relaunch event";
  StartAgents({"node-d"}, 1);
  ExpectResumedAfterOneRestart(/*final_attempt=*/2);
}

// The same node loss with the one word changed: the cohort backend on a pool of two reducers.
// Every replica on the lost node dies with it (a reducer may share worker-0's node); the
// survivors' all-reduces fail naming the lost rank or a reducer, and the job resumes as under gloo.
TEST_F(TorchDdpTest, CohortBackendNodeLossRestartsTheJobOnceFromItsCheckpoint) {
  if (!CohortBackendMissing().empty()) GTEST_SKIP() << CohortBackendMissing();
  StartAgents({"node-a", "node-b", "node-c", "node-d"}, 1);
  JobOptions options;
  options.backend = "cohort";
  options.reducers = 2;
  Submit("cohort_node_loss", options);
  WaitForCheckpoint(kFaultAfterEpoch);
  const std::string node = NodeOf("worker-0");  // RANK=1
  ASSERT_FALSE(node.empty());
  LoseNode(node, ReplicasOn(node, {"worker-0", "reducer-0", "reducer-1"}));
  ExpectResumedAfterOneRestart();
  EXPECT_NE(ReplicaLog("chief-0").find("backend cohort"), std::string::npos);
}

TEST_F(TorchDdpTest, PreemptedAgentRestartsTheJobOnceFromItsCheckpoint) {
  StartAgents({"node-a", "node-b", "node-c", "node-d"}, 1);
  Submit("preempted");
  WaitForCheckpoint(kFaultAfterEpoch);
  const std::string node = NodeOf("worker-0");
  ASSERT_FALSE(node.empty());
  cluster_->agent(node).Signal(SIGTERM);  // as a preemption notice or `systemctl stop` does
  ExpectResumedAfterOneRestart();
  EXPECT_TRUE(cluster_->agent(node).Wait(30s).has_value()) << "the agent did not exit";
}

// A rolling upgrade under a stock DDP job on the Reduction Server: mid-training, every agent in
// turn is live-restarted (SIGUSR2: it executes its binary anew and takes its replicas over,
// agent/handoff.h). Nothing of the job notices: no rank, reducer or UCX connection is touched,
// it spends no restart, every rank stays on its first attempt, the chief never resumes from a
// checkpoint, and all ranks end with the same parameters. (On gloo where the backend is not
// built.)
TEST_F(TorchDdpTest, LiveRestartsOfEveryAgentMidTrainingLeaveTheJobUntouched) {
  const bool cohort = CohortBackendMissing().empty();
  const std::vector<std::string> nodes = {"node-a", "node-b", "node-c"};
  StartAgents(nodes, 1);
  JobOptions options;
  options.backend = cohort ? "cohort" : "gloo";
  options.reducers = cohort ? 2 : 0;
  Submit("rolling_upgrade", options);
  WaitForCheckpoint(kFaultAfterEpoch);
  for (const std::string& name : nodes) {
    ct::DaemonProcess& agent = cluster_->agent(Node(name));
    agent.Signal(SIGUSR2);
    static const std::regex kTook("live restart: took over ([0-9]+) of ([0-9]+) replica");
    std::string log;  // what `took` points into
    std::smatch took;
    ASSERT_TRUE(ct::WaitUntil(
        [&] {
          log = agent.Log(1 << 20);
          return std::regex_search(log, took, kTook);
        },
        60s))
        << agent.Log();
    EXPECT_EQ(took[1].str(), took[2].str()) << name << ": every replica there taken over";
    EXPECT_NE(took[2].str(), "0") << name << " ran none of the job's replicas";
    EXPECT_TRUE(agent.running()) << name;
  }
  auto client = cluster_->Client();
  wire::JobInfoT done = ct::WaitForJobEnd(client, job_, 150s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_EQ(done.restarts, 0);
  for (const auto& r : done.replicas) EXPECT_EQ(r->attempt, 0) << r->replica;
  const std::string chief = ChiefFinalLog();
  EXPECT_EQ(chief.find("resumed from epoch"), std::string::npos) << chief;
  if (cohort) {
    EXPECT_NE(chief.find("backend cohort"), std::string::npos) << chief;
  }
  std::set<std::string> digests;
  for (const auto& [replica, log] : FinalLogs("rolling upgrade")) {
    ASSERT_NE(LoggedDigest(log), "") << log;
    digests.insert(LoggedDigest(log));
  }
  EXPECT_EQ(digests.size(), 1u) << "the ranks ended with different parameters";
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "");
}

// `cohort suspend --wait` on a stock DDP job filling the cluster: every rank stops (gloo's peers
// may exit 1 as the first goes: no failure), and once the command returns the job holds no GPU:
// another job of three GPUs runs to its end meanwhile. `cohort resume` queues it again: it
// resumes from its checkpoint and succeeds, having spent no restart.
TEST_F(TorchDdpTest, ASuspendedJobFreesItsGpusAndResumesFromItsCheckpointSpendingNoRestart) {
  StartAgents({"node-a", "node-b", "node-c"}, 1);
  Submit("suspended");
  WaitForCheckpoint(kFaultAfterEpoch);
  const ct::RunResult suspend = Cli({"suspend", job_, "--wait"});
  ASSERT_EQ(suspend.exit_code, 0) << suspend.out << suspend.err;
  EXPECT_EQ(suspend.out.rfind("job suspended: SUSPENDED (suspended by ", 0), 0u) << suspend.out;
  auto info = Job();
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, wire::JobState::SUSPENDED);
  EXPECT_EQ(info->restarts, 0);
  for (const auto& r : info->replicas) {
    EXPECT_TRUE(r->state != wire::ReplicaState::PENDING &&
                r->state != wire::ReplicaState::STARTING && r->state != wire::ReplicaState::RUNNING)
        << r->replica << " " << wire::EnumNameReplicaState(r->state);
  }
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "a rank outlived the suspension";

  auto client = cluster_->Client();
  auto filler = client.Submit(
      "name: filler\nworker_pools:\n"
      "  - role: chief\n    resources: {gpus: 1}\n    process: {command: [/bin/true]}\n"
      "  - role: worker\n    replicas: 2\n    resources: {gpus: 1}\n"
      "    process: {command: [/bin/true]}\n");
  ASSERT_TRUE(filler.ok()) << filler.status().ToString();
  const wire::JobInfoT filled = ct::WaitForJobEnd(client, "filler", 60s);
  EXPECT_EQ(filled.state, wire::JobState::SUCCEEDED) << filled.message;
  ct::WaitForReplicasEnded(client, "filler", 30s);
  info = Job();
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, wire::JobState::SUSPENDED) << "resumed before anyone asked";

  const ct::RunResult resume = Cli({"resume", job_});
  ASSERT_EQ(resume.exit_code, 0) << resume.out << resume.err;
  EXPECT_EQ(resume.out.rfind("job suspended: QUEUED", 0), 0u) << resume.out;
  ExpectResumed(/*restarts=*/0, /*final_attempt=*/1);
  info = Job();
  ASSERT_TRUE(info);
  bool said = false;
  for (const auto& e : info->events) {
    said |= e->message.find(": back in the queue after ") != std::string::npos;
  }
  EXPECT_TRUE(said) << "no event of the resume";
}

TEST_F(TorchDdpTest, LoneReplicaKilledRestartsTheJobOnceFromItsCheckpoint) {
  StartAgents({"node-a", "node-b", "node-c"}, 1);
  Submit("lone_replica");
  WaitForCheckpoint(kFaultAfterEpoch);
  ASSERT_TRUE(KillReplicaGroup("worker-0")) << "worker-0 is not running";
  ExpectResumedAfterOneRestart();
}

// A rank's GPU fails: on node-b, whose agent runs a health check, the stock script's rank dies
// with exit 1 (as of a CUDA error; a wrapper gives it --fail-at-epoch there only, and then logs
// the fault where the check reads it; gloo's threads may abort() it in its teardown instead). An
// exit 1 alone would fail the job at once (ScriptExitingOneOnItsOwnFailsTheJobAtOnce); here the
// check the agent runs again after the failure fails, so it is the node's fault: the job restarts
// once, on the nodes that pass, and resumes from its checkpoint.
TEST_F(TorchDdpTest, ARankDyingOnANodeThatFailsItsHealthCheckRestartsTheJobElsewhere) {
  const std::string reason = cluster_->scratch("xid");
  const std::string check = cluster_->scratch("node-check");
  ct::WriteFile(check, "#!/bin/sh\nif [ -s " + reason + " ]; then cat " + reason + "; exit 1; fi\n",
                /*executable=*/true);
  const std::string wrapper = cluster_->scratch("gpu-fault-on-node-b");
  ct::WriteFile(wrapper,
                "#!/bin/sh\ncase \"$COHORT_ATTEMPT_DIR\" in\n  */work/" + Node("node-b") +
                    "/*) set -- \"$@\" --fail-at-epoch=" + std::to_string(kFaultAfterEpoch + 1) +
                    " --fail-rank=$RANK ;;\nesac\n\"$@\"\nrc=$?\n[ $rc -eq 0 ] || echo 'GPU 0: XID "
                    "79, fell off the bus' > " +
                    reason + "\nexit $rc\n",
                /*executable=*/true);
  StartAgents({"node-a", "node-c"}, 1);
  ct::AgentOptions sick{Node("node-b"), 1, 4};
  sick.extra_args = {"--health-check", check, "--health-check-interval", "60s"};
  if (!BuiltinDir().empty()) {
    sick.extra_args.insert(sick.extra_args.end(), {"--builtin-dir", BuiltinDir()});
  }
  ASSERT_EQ(cluster_->StartAgent(sick), "");
  JobOptions options;
  options.wrapper = wrapper;
  Submit("gpu_fault", options);
  WaitForRunning();
  StartAgents({"node-d"}, 1);  // where the restart can go instead of node-b
  ExpectResumedAfterOneRestart();
  auto info = Job();
  ASSERT_TRUE(info);
  const std::string fault = "on node " + Node("node-b") +
                            ", which fails its health check: GPU 0: XID 79, fell off the bus "
                            "(health check exited with code 1)";
  std::string event;
  for (const auto& e : info->events) {
    if (e->message.find(fault) != std::string::npos) event = e->message;
  }
  EXPECT_EQ(event.rfind("restart 1/3: the whole job (restart_job_on_worker_restart) because ", 0),
            0u)
      << "no restart names the node fault (" << fault << ")";
  for (const auto& r : info->replicas) EXPECT_NE(r->node_id, Node("node-b")) << r->replica;
}

// torchrun's fault-tolerance tutorial saves its snapshot into a relative path
// (ddp_plain_save.py --snapshot snapshot.pt: torch.save into the working directory) and resumes
// from it when torchrun restarts the worker in the same directory. Under Cohort the replica's
// process is SIGKILLed after epoch 2's snapshot; its restart on the same node starts with the
// working files of the attempt before (agent/working_files.h), resumes from the snapshot, and the
// job succeeds with one restart spent; the job's events say what was carried.
TEST_F(TorchDdpTest, ASnapshotInTheWorkingDirectoryIsFoundByTheRestartOnItsNode) {
  StartAgents({"node-a"}, 1);
  job_ = "relative_snapshot";
  auto client = cluster_->Client();
  auto sub = client.Submit("name: " + job_ + "\noutput_dir: " + OutputDir() +
                           "\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                           "    resources: {gpus: 1, cpus: 1}\n    process:\n      command: [" +
                           TorchPython() + ", " + COHORT_DDP_PLAIN_SAVE +
                           "]\n      args: [--epochs=" + std::to_string(kEpochs) +
                           ", --step-delay=0.03, --snapshot=snapshot.pt]\n"
                           "      env: {OMP_NUM_THREADS: \"1\"}\n"
                           "scheduling: {timeout: 5m, max_restarts: 1}\n");
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  const std::string saved = "epoch " + std::to_string(kFaultAfterEpoch) + "/";
  ASSERT_TRUE(
      ct::WaitUntil([&] { return ReplicaLog("chief-0").find(saved) != std::string::npos; }, 90s))
      << "no snapshot of epoch " << kFaultAfterEpoch << ": " << ReplicaLog("chief-0");
  ASSERT_TRUE(KillReplicaGroup("chief-0")) << "chief-0 is not running";
  wire::JobInfoT done = ct::WaitForJobEnd(client, job_, 150s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_EQ(done.restarts, 1);
  const std::string log = ReplicaLog("chief-0");
  EXPECT_NE(log.find("starting from scratch"), std::string::npos) << log;
  const size_t resumed = log.find("resumed from epoch ");
  ASSERT_NE(resumed, std::string::npos) << log;
  EXPECT_GE(std::stoi(log.substr(resumed + std::strlen("resumed from epoch "))), kFaultAfterEpoch)
      << log;
  EXPECT_NE(log.find("(snapshot.pt)"), std::string::npos) << log;
  EXPECT_NE(log.find("epoch " + std::to_string(kEpochs) + "/" + std::to_string(kEpochs)),
            std::string::npos)
      << log;
  bool carried = false;
  for (const auto& e : done.events) {
    carried |= e->message.find(
                   "chief-0 attempt 1: carried attempt 0's working files into this "
                   "attempt's (snapshot.pt), as torchrun restarts a worker where it "
                   "ran") != std::string::npos;
  }
  EXPECT_TRUE(carried) << "no event says the snapshot was carried";
}

// A script that checkpoints as the PyTorch tutorials do (tests/integration/ddp_plain_save.py:
// torch.save() straight into epoch_<N>.pt, resume from the highest N) loses the chief's node, the
// one writing, as it begins epoch 2's checkpoint: its newest checkpoint is left cut short (here
// cut to half its bytes the moment the node is gone, before any restart can start), which
// torch.load refuses, so the restarted script would fail with every node healthy. Before the
// whole job restarts an agent sets the file aside into .cohort-torn/attempt-1/
// (agent/torn_checkpoints.h): the script resumes from the epoch before, writes that one again,
// and the job succeeds with one restart spent.
TEST_F(TorchDdpTest, ACheckpointCutShortByANodeLossIsSetAsideAndTheJobResumesFromTheOneBefore) {
  StartAgents({"node-a", "node-b", "node-c", "node-d"}, 1);
  job_ = "torn_checkpoint";
  const std::string process = "    resources: {gpus: 1, cpus: 1}\n    process:\n      command: [" +
                              TorchPython() + ", " + COHORT_DDP_PLAIN_SAVE +
                              "]\n      args: [--epochs=" + std::to_string(kEpochs) +
                              ", --step-delay=0.03]\n      env: {OMP_NUM_THREADS: \"1\"}\n";
  auto client = cluster_->Client();
  auto sub = client.Submit("name: " + job_ + "\noutput_dir: " + OutputDir() +
                           "\nworker_pools:\n  - role: chief\n    replicas: 1\n" + process +
                           "  - role: worker\n    replicas: 2\n" + process +
                           "scheduling: {timeout: 5m, max_restarts: 3, "
                           "restart_job_on_worker_restart: true}\n");
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  // The node goes as soon as rank 0 has begun to write epoch 2's checkpoint: it may be torn
  // already; whatever its newest one holds, it is cut to half its bytes.
  const std::string dir = OutputDir() + "/checkpoints/";
  const std::string first = dir + "epoch_" + std::to_string(kFaultAfterEpoch) + ".pt";
  ASSERT_TRUE(ct::WaitUntil([&] { return ct::FileExists(first); }, 90s))
      << "rank 0 never saved epoch " << kFaultAfterEpoch << ": " << ReplicaLog("chief-0");
  const std::string node = NodeOf("chief-0");
  ASSERT_FALSE(node.empty());
  LoseNode(node, {"chief-0"});
  int newest = kFaultAfterEpoch;
  while (ct::FileExists(dir + "epoch_" + std::to_string(newest + 1) + ".pt")) ++newest;
  ASSERT_LT(newest, kEpochs);
  const std::string name = "epoch_" + std::to_string(newest) + ".pt";
  struct stat st;
  ASSERT_EQ(::stat((dir + name).c_str(), &st), 0) << name;
  const off_t cut = st.st_size / 2;
  ASSERT_EQ(::truncate((dir + name).c_str(), cut), 0) << name;

  wire::JobInfoT done = ct::WaitForJobEnd(client, job_, 150s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_EQ(done.restarts, 1);
  const std::string log = ReplicaLog("chief-0");
  EXPECT_NE(log.find("starting from scratch"), std::string::npos) << log;
  EXPECT_NE(log.find("resumed from epoch " + std::to_string(newest - 1) + " ("), std::string::npos)
      << log;
  EXPECT_NE(log.find("epoch " + std::to_string(kEpochs) + "/" + std::to_string(kEpochs)),
            std::string::npos)
      << log;
  // One agent set it aside and said so in its replica's log; the bytes are the torn file's.
  const std::string aside = OutputDir() + "/checkpoints/.cohort-torn/attempt-1/" + name;
  ASSERT_EQ(::stat(aside.c_str(), &st), 0) << aside << " was not set aside";
  EXPECT_EQ(st.st_size, cut);
  // Its line: "set aside torn checkpoint <name> (<why>) as .cohort-torn/attempt-1/<name>", why
  // being how it was cut (short of its zip end record, or empty where the write had not begun).
  const std::string note = "set aside torn checkpoint " + name + " (";
  const std::string moved = ") as .cohort-torn/attempt-1/" + name + "\n";
  int noted = 0;
  for (const char* replica : {"chief-0", "worker-0", "worker-1"}) {
    const std::string replica_log = ReplicaLog(replica);
    const size_t at = replica_log.find(note);
    if (at == std::string::npos) continue;
    const size_t end = replica_log.find('\n', at);
    EXPECT_EQ(replica_log.substr(end + 1 - moved.size(), moved.size()), moved) << replica_log;
    ++noted;
  }
  EXPECT_EQ(noted, 1) << "no replica's log (or more than one) says: " << note;
  // And the job's events, from that replica's RUNNING report.
  int events = 0;
  for (const auto& e : done.events) {
    events += e->message.find(" attempt 1: set aside torn checkpoint " + name +
                              " (cohort logs says why)") != std::string::npos;
  }
  EXPECT_EQ(events, 1);
  // `cohort checkpoint --job` lists it among those set aside, torn, and the script's own
  // checkpoints, every epoch whole, the last one newest.
  const nlohmann::json report = CheckpointReport();
  ASSERT_TRUE(report.is_object());
  ASSERT_EQ(report["set_aside"].size(), 1u) << report.dump(1);
  EXPECT_EQ(report["set_aside"][0]["path"], "attempt-1/" + name) << report.dump(1);
  EXPECT_EQ(report["set_aside"][0]["bytes"], cut) << report.dump(1);
  EXPECT_NE(report["set_aside"][0]["torn"], "") << report.dump(1);
  std::set<std::string> whole;
  for (const auto& c : report["script_checkpoints"]) {
    EXPECT_EQ(c["torn"], "") << report.dump(1);
    whole.insert(c["path"].get<std::string>());
  }
  EXPECT_EQ(whole.size(), static_cast<size_t>(kEpochs)) << report.dump(1);
  EXPECT_EQ(report["script_newest"], "epoch_" + std::to_string(kEpochs) + ".pt") << report.dump(1);
  // The file set aside is one the script could not have resumed from: torch.load refuses it
  // (exit 2 below; 3 would mean that it is not there).
  ct::RunResult load = ct::RunProcess(TorchPython(),
                                      {"-c",
                                       "import sys, torch\n"
                                       "try:\n    torch.load(sys.argv[1])\n"
                                       "except FileNotFoundError:\n    sys.exit(3)\n"
                                       "except Exception as e:\n    print(repr(e)); sys.exit(2)\n",
                                       aside},
                                      {}, 60s);
  EXPECT_EQ(load.exit_code, 2) << load.out << load.err;
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
}

// Hugging Face's Trainer (tests/integration/hf_trainer_job.py: get_last_checkpoint and
// resume_from_checkpoint, as its docs write a script) loses its node while it writes
// checkpoint-10: the folder is left without trainer_state.json, which Trainer writes last (here
// removed the moment the node is gone). get_last_checkpoint would pick it and the restarted
// script would fail on it; an agent sets the folder aside, and Trainer resumes from checkpoint-5
// and trains to the end. One process: on CPU, transformers 5.12 with torch 2.14 cannot resume a
// run of several (examples/torch/README.md). Runs where TorchPython() has transformers (sid's,
// through tests/torch/debian_torch_check.sh); Debian 12 has no python3-transformers.
TEST_F(TorchDdpTest, ATrainerCheckpointTheNodeDiedWritingIsSetAsideAndTrainerResumes) {
  ct::RunResult has = ct::RunProcess(TorchPython(), {"-c", "import transformers"}, {}, 60s);
  if (has.exit_code != 0) {
    GTEST_SKIP() << TorchPython() << " cannot import transformers (Debian 12 has no "
                 << "python3-transformers; tests/torch/debian_torch_check.sh sid runs this)";
  }
  StartAgents({"node-a", "node-b"}, 1);
  job_ = "trainer_torn";
  auto client = cluster_->Client();
  auto sub = client.Submit(
      "name: " + job_ + "\noutput_dir: " + OutputDir() +
      "\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {gpus: 1, cpus: 1}\n"
      "    process:\n      command: [" +
      TorchPython() + ", " + COHORT_HF_TRAINER_JOB +
      "]\n      args: [--steps=30, --save-steps=5, --step-delay=0.2]\n"
      "      env: {OMP_NUM_THREADS: \"1\"}\nscheduling: {timeout: 5m, max_restarts: 3}\n");
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  const std::string trainer_dir = OutputDir() + "/checkpoints/trainer";
  const std::string state = trainer_dir + "/checkpoint-10/trainer_state.json";
  ASSERT_TRUE(ct::WaitUntil([&] { return ct::FileExists(state); }, 120s))
      << "Trainer never wrote " << state << ": " << ReplicaLog("chief-0");
  LoseNode(NodeOf("chief-0"), {"chief-0"});
  ASSERT_EQ(::unlink(state.c_str()), 0) << state;

  wire::JobInfoT done = ct::WaitForJobEnd(client, job_, 180s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_EQ(done.restarts, 1);
  const std::string log = ReplicaLog("chief-0");
  EXPECT_NE(log.find("starting from scratch"), std::string::npos) << log;
  EXPECT_NE(log.find("resuming from " + trainer_dir + "/checkpoint-5\n"), std::string::npos) << log;
  EXPECT_NE(log.find("trained to step 30"), std::string::npos) << log;
  EXPECT_NE(log.find("set aside torn checkpoint trainer/checkpoint-10 (a Hugging Face Trainer "
                     "checkpoint without its trainer_state.json, written last) as "
                     ".cohort-torn/attempt-1/trainer/checkpoint-10"),
            std::string::npos)
      << log;
  EXPECT_TRUE(ct::FileExists(OutputDir() +
                             "/checkpoints/.cohort-torn/attempt-1/trainer/checkpoint-10/"
                             "model.safetensors"));
  // `cohort checkpoint --job` lists the folder set aside, and every checkpoint Trainer left whole.
  const nlohmann::json report = CheckpointReport();
  ASSERT_TRUE(report.is_object());
  ASSERT_EQ(report["set_aside"].size(), 1u) << report.dump(1);
  EXPECT_EQ(report["set_aside"][0]["path"], "attempt-1/trainer/checkpoint-10") << report.dump(1);
  EXPECT_EQ(report["set_aside"][0]["folder"], true);
  EXPECT_NE(report["set_aside"][0]["torn"].get<std::string>().find("without its trainer_state"),
            std::string::npos)
      << report.dump(1);
  ASSERT_FALSE(report["script_checkpoints"].empty()) << report.dump(1);
  for (const auto& c : report["script_checkpoints"]) EXPECT_EQ(c["torn"], "") << report.dump(1);
  EXPECT_EQ(report["script_newest"], "trainer/checkpoint-30") << report.dump(1);
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
}

TEST_F(TorchDdpTest, ScriptExitingOneOnItsOwnFailsTheJobAtOnce) {
  StartAgents({"node-a", "node-b", "node-c"}, 1);
  JobOptions options;
  options.extra_args = ", --fail-at-epoch=" + std::to_string(kFaultAfterEpoch) + ", --fail-rank=1";
  Submit("script_bug", options);
  auto client = cluster_->Client();
  wire::JobInfoT done = ct::WaitForJobEnd(client, job_, 120s);
  ASSERT_EQ(done.state, wire::JobState::FAILED) << done.message;
  EXPECT_NE(done.message.find("permanent failure"), std::string::npos) << done.message;
  // The job's message quotes the cause from the failed rank's own log (agent/failure_excerpt.h).
  // The rank's sys.exit(1) ends it with code 1, or, now and then, torch's gloo threads abort() it
  // in its teardown: the log's last word is the same.
  const std::string cause = " (log: rank 1 failing on purpose at epoch " +
                            std::to_string(kFaultAfterEpoch) + " (--fail-at-epoch))";
  EXPECT_TRUE(done.message.find("worker-0 attempt 0 exited with code 1" + cause) !=
                  std::string::npos ||
              done.message.find("worker-0 attempt 0 was killed by signal 6 (SIGABRT)" + cause) !=
                  std::string::npos)
      << done.message;
  EXPECT_EQ(done.restarts, 0);
  for (const auto& r : done.replicas) EXPECT_EQ(r->attempt, 0) << r->replica;
  std::string log = ReplicaLog("worker-0");
  EXPECT_NE(log.find("rank 1 failing on purpose at epoch " + std::to_string(kFaultAfterEpoch)),
            std::string::npos)
      << log;
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
}

// One job of the stock script per backend, one after the other on the same three nodes: gloo,
// then cohort with two reducers. Both reach the same accuracy (their sums differ in rounding
// only); under cohort every rank ends with the same parameter bytes.
TEST_F(TorchDdpTest, CohortBackendReachesGlooAccuracyWithIdenticalParametersOnEveryRank) {
  if (!CohortBackendMissing().empty()) GTEST_SKIP() << CohortBackendMissing();
  StartAgents({"node-a", "node-b", "node-c"}, 1);
  auto client = cluster_->Client();
  std::map<std::string, double> accuracy;
  for (const std::string backend : {"gloo", "cohort"}) {
    JobOptions options;
    options.backend = backend;
    options.reducers = backend == "cohort" ? 2 : 0;
    options.extra_args = ", --step-delay=0";
    Submit("backend_" + backend, options);
    wire::JobInfoT done = ct::WaitForJobEnd(client, job_, 150s);
    ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << backend << ": " << done.message;
    EXPECT_EQ(done.restarts, 0) << backend;
    std::set<std::string> digests;
    for (const auto& [replica, log] : FinalLogs(backend)) {
      if (backend == "cohort") {
        EXPECT_NE(log.find("backend cohort"), std::string::npos) << log;
      }
      ASSERT_NE(LoggedDigest(log), "") << log;
      digests.insert(LoggedDigest(log));
      if (replica == "chief-0") accuracy[backend] = LoggedNumber(log, "final test accuracy");
    }
    EXPECT_EQ(digests.size(), 1u) << backend << ": the ranks ended with different parameters";
  }
  std::cout << "final test accuracy: gloo " << accuracy["gloo"] << ", cohort " << accuracy["cohort"]
            << "\n";
  // 359 test images: one image is 0.0028 of accuracy. Both learn (10 classes: chance is 0.1).
  EXPECT_GT(accuracy["gloo"], 0.85);
  EXPECT_NEAR(accuracy["cohort"], accuracy["gloo"], 0.02)
      << "gloo " << accuracy["gloo"] << ", cohort " << accuracy["cohort"];
}

// Four incidents in one job of the stock script on the Reduction Server: a node loss, a SIGKILL
// and restart of the coordinator, a preemption of the chief's node and a lone replica's SIGKILL,
// each after a later epoch's checkpoint. The job ends SUCCEEDED having spent one restart per
// incident of its replicas (the coordinator's restart spends none), and with the very parameter
// bytes of a fault-free run of the same job: the reducers sum each element in worker order
// whatever DDP's buckets look like, so resuming from a checkpoint changes nothing. (Under gloo a
// resumed run ended a few bits off, most likely because the ring's order of addition follows
// DDP's bucket layout, which differs in a process's first step.)
TEST_F(TorchDdpTest, CohortBackendJobThroughFourIncidentsEndsWithTheFaultFreeModel) {
  if (!CohortBackendMissing().empty()) GTEST_SKIP() << CohortBackendMissing();
  StartAgents({"node-a", "node-b", "node-c", "node-d", "node-e"}, 1);
  JobOptions options;
  options.backend = "cohort";
  options.reducers = 2;
  options.epochs = 10;
  auto client = cluster_->Client();
  auto digests_of = [&](const std::string& what) {
    std::set<std::string> digests;
    for (const auto& [replica, log] : FinalLogs(what)) digests.insert(LoggedDigest(log));
    return digests;
  };

  // The fault-free run (the step delay changes no number).
  options.extra_args = ", --step-delay=0";
  Submit("chain_reference", options);
  wire::JobInfoT reference = ct::WaitForJobEnd(client, job_, 150s);
  ASSERT_EQ(reference.state, wire::JobState::SUCCEEDED) << reference.message;
  const std::set<std::string> expected = digests_of("fault-free run");
  ASSERT_EQ(expected.size(), 1u) << "the fault-free run's ranks ended with different parameters";

  options.extra_args = "";
  Submit("chain", options);
  // 1. After epoch 1: the node of worker-0 (RANK=1) is lost, with any reducer it holds.
  WaitForCheckpoint(1, 0);
  const std::string lost = NodeOf("worker-0");
  ASSERT_FALSE(lost.empty());
  LoseNode(lost, ReplicasOn(lost, {"worker-0", "reducer-0", "reducer-1"}));
  // 2. After epoch 3: the coordinator is SIGKILLed and started again; the replicas train on.
  WaitForCheckpoint(3, 1);
  cluster_->coordinator().Kill();
  ASSERT_EQ(cluster_->StartCoordinator(), "");
  // 3. After epoch 5: the chief's node is preempted (its agent gets SIGTERM).
  WaitForCheckpoint(5, 1);
  const std::string preempted = NodeOf("chief-0");
  ASSERT_FALSE(preempted.empty());
  ASSERT_NE(preempted, lost);
  cluster_->agent(preempted).Signal(SIGTERM);
  // 4. After epoch 7: worker-1 alone is SIGKILLed, its agent lives.
  WaitForCheckpoint(7, 2);
  ASSERT_TRUE(KillReplicaGroup("worker-1")) << "worker-1 is not running";

  wire::JobInfoT done = ct::WaitForJobEnd(client, job_, 150s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_EQ(done.restarts, 3) << "one restart for each incident of the replicas";
  const std::set<std::string> digests = digests_of("after four incidents");
  EXPECT_EQ(digests, expected) << "the job's model differs from the fault-free run's";
  const std::string log = ReplicaLog("chief-0");
  static const std::regex kResumed("resumed from epoch ([0-9]+)");
  std::vector<int> resumed;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), kResumed);
       it != std::sregex_iterator(); ++it) {
    resumed.push_back(std::stoi((*it)[1].str()));
  }
  ASSERT_EQ(resumed.size(), 3u) << log;
  EXPECT_GE(resumed[0], 1) << log;
  EXPECT_GE(resumed[1], 5) << log;
  EXPECT_GE(resumed[2], 7) << log;
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
}

// torchrun inside each replica, as guides for managed services launch several processes per
// machine: 2 training replicas (chief + 1 worker) each run `torchrun --nnodes $WORLD_SIZE
// --node_rank $RANK --nproc_per_node 2 --master_addr $MASTER_ADDR --master_port $MASTER_PORT` on
// the stock script with --backend=cohort, beside a pool of 2 reducers. The 4 ranks torchrun starts
// join the job's communicator, the job's reducers (started for the 2 replicas) serve all 4, the
// job succeeds, and every rank ends with the same parameter bytes. (`--redirects 9:1 --tee 9:1`
// only gets Debian's torch 1.13 torchrun past its start under Python 3.11: tests/torch/
// torchrun_check.py.)
TEST_F(TorchDdpTest, TorchrunInsideEachReplicaRunsOnTheJobsReducers) {
  if (!CohortBackendMissing().empty()) GTEST_SKIP() << CohortBackendMissing();
  StartAgents({"node-a", "node-b", "node-c"}, 1);
  SubmitTorchrunJob("torchrun_inside", 3, "", "max_restarts: 0");
  auto client = cluster_->Client();
  wire::JobInfoT done = ct::WaitForJobEnd(client, job_, 150s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_EQ(done.restarts, 0);

  // Each replica's log holds its two ranks' lines: torchrun's ranks, not Cohort's.
  std::set<std::string> digests;
  std::set<int> ranks;
  static const std::regex kRank("rank ([0-9]+)/4 local rank [01]/2 node ([01])/2 backend cohort");
  static const std::regex kDigest("parameters sha256 ([0-9a-f]{64})");
  int digest_lines = 0;
  for (const std::string replica : {"chief-0", "worker-0"}) {
    std::string log;
    EXPECT_TRUE(ct::WaitUntil(
        [&] {
          log = ReplicaLog(replica);
          const auto found = std::sregex_iterator(log.begin(), log.end(), kDigest);
          return std::distance(found, std::sregex_iterator()) == 2;
        },
        20s))
        << replica << ": " << log;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), kRank);
         it != std::sregex_iterator(); ++it) {
      ranks.insert(std::stoi((*it)[1].str()));
      EXPECT_EQ((*it)[2].str(), replica == "chief-0" ? "0" : "1") << replica << ": " << log;
    }
    for (auto it = std::sregex_iterator(log.begin(), log.end(), kDigest);
         it != std::sregex_iterator(); ++it) {
      digests.insert((*it)[1].str());
      ++digest_lines;
    }
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(digest_lines, 4);
  EXPECT_EQ(digests.size(), 1u) << "the ranks ended with different parameters";
  for (const std::string replica : {"reducer-0", "reducer-1"}) {
    const std::string log = ReplicaLog(replica);
    EXPECT_NE(log.find("has 4 workers, not the 2 it was started for"), std::string::npos)
        << replica << ": " << log;
    EXPECT_NE(log.find("ended after"), std::string::npos) << replica << ": " << log;
  }
  // The two ranks of a replica inherit one COHORT_FLIGHT_RECORDER: each kept a recorder file of
  // its own (common/flight_recorder.h), "flight-recorder" and "flight-recorder.1".
  for (const auto& r : done.replicas) {
    if (r->replica != "chief-0" && r->replica != "worker-0") continue;
    const std::string dir = cluster_->scratch() + "/../work/" + r->node_id + "/" + job_ + "/" +
                            r->replica + "/attempt-0/flight-recorder";
    std::set<int> pids, local_ranks;
    for (const std::string& file : {dir, dir + ".1"}) {
      auto reader = FlightRecorderFileReader::Open(file);
      ASSERT_TRUE(reader.ok()) << file << ": " << reader.status().ToString();
      auto read = (*reader)->Snapshot();
      ASSERT_TRUE(read.ok()) << file << ": " << read.status().ToString();
      const FlightRecorderSnapshot& snap = *read;
      EXPECT_FALSE(snap.recent.empty()) << file << " recorded nothing";
      pids.insert(snap.pid);
      local_ranks.insert(snap.rank % 2);
    }
    EXPECT_EQ(pids.size(), 2u) << r->replica << ": one process wrote both files";
    EXPECT_EQ(local_ranks, (std::set<int>{0, 1})) << r->replica;
  }
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their job";
}

// torchrun inside a replica ends with exit 1 when one of its ranks is SIGKILLed (as the kernel's
// OOM killer ends one): the agent reads the signal from torchrun's report, and the coordinator
// judges the replica's end by it, as it would a replica of its own killed so. The job restarts
// once, resumes from its checkpoint and succeeds; the other replica's torchrun, whose ranks lost
// their peer, is collateral.
TEST_F(TorchDdpTest, TorchrunWhoseRankIsKilledRestartsTheJobOnceFromItsCheckpoint) {
  if (!CohortBackendMissing().empty()) GTEST_SKIP() << CohortBackendMissing();
  RunTorchrunJobPastTheFaultsEpoch("torchrun_rank_killed",
                                   "max_restarts: 3, restart_job_on_worker_restart: true");
  // The worker replica's torchrun rank of local rank 1 (global rank 3), not torchrun itself.
  const std::vector<pid_t> victims = TorchrunRanks("worker-0", 1);
  ASSERT_EQ(victims.size(), 1u) << "torchrun's rank 3 is not one process";
  ASSERT_EQ(::kill(victims[0], SIGKILL), 0);

  auto client = cluster_->Client();
  wire::JobInfoT done = ct::WaitForJobEnd(client, job_, 150s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  EXPECT_EQ(done.restarts, 1) << "one incident spends one restart";
  bool named = false;
  for (const auto& event : done.events) {
    if (event->message.find("restart 1/3") != std::string::npos) {
      named = event->message.find(
                  "worker-0 attempt 0 exited with code 1 after signal 9 (SIGKILL) "
                  "killed a process inside it") != std::string::npos;
      EXPECT_TRUE(named) << event->message;
    }
  }
  EXPECT_TRUE(named) << "no restart event";
  ExpectChiefResumedFromTheFaultsCheckpoint();
}

// A rank of torchrun inside a replica stops outside the collectives (SIGSTOP: as if stuck
// computing or in its data loader) while its peers wait in the next all-reduce. The agent reads
// every rank's recorder of the replica and reports the slowest, so the watchdog names that replica
// (and the rank) as not having entered the operation its peers wait in (when only the first rank's
// file was read, both replicas seemed to wait in it, and the verdict blamed something outside the
// ranks). The hang restarts the job from its checkpoint, spending one restart.
TEST_F(TorchDdpTest, TorchrunRankStuckOutsideTheCollectivesIsNamedByTheWatchdog) {
  if (!CohortBackendMissing().empty()) GTEST_SKIP() << CohortBackendMissing();
  RunTorchrunJobPastTheFaultsEpoch(
      "torchrun_rank_stuck",
      "max_restarts: 2, restart_job_on_worker_restart: true, hang_timeout: 5s");
  // worker-0's rank of local rank 1, not torchrun itself.
  const std::vector<pid_t> ranks = TorchrunRanks("worker-0", 1);
  ASSERT_EQ(ranks.size(), 1u) << "worker-0's local rank 1 is not one process";
  const pid_t victim = ranks[0];
  // Its own recorder file (of the two the replica's ranks keep) says where it is; frozen while it
  // is stopped. It is stopped again until it is outside every operation. The file is told by its
  // rank (the header's pid is the replica's PID namespace's): worker-0 is torchrun's node 1, so
  // its local rank 1 is rank 3.
  const std::string dir = cluster_->scratch() + "/../work/" + NodeOf("worker-0") + "/" + job_ +
                          "/worker-0/attempt-0/flight-recorder";
  std::unique_ptr<FlightRecorderFileReader> file;
  for (const std::string& path : {dir, dir + ".1"}) {
    auto reader = FlightRecorderFileReader::Open(path);
    ASSERT_TRUE(reader.ok()) << path << ": " << reader.status().ToString();
    auto snap = (*reader)->Snapshot();
    ASSERT_TRUE(snap.ok()) << path << ": " << snap.status().ToString();
    if (snap->rank == 3) file = std::move(*reader);
  }
  ASSERT_NE(file, nullptr) << "no recorder file of rank 3 in " << dir;
  bool outside = false;
  for (int attempt = 0; attempt < 200 && !outside; ++attempt) {
    ASSERT_EQ(::kill(victim, SIGSTOP), 0);
    ASSERT_TRUE(ct::WaitUntil([&] { return ct::ProcessState(victim) == 'T'; }, 10s));
    auto snap = file->Snapshot();
    ASSERT_TRUE(snap.ok()) << snap.status().ToString();
    outside = std::none_of(snap->communicators.begin(), snap->communicators.end(),
                           [](const auto& c) { return c.current.has_value(); });
    if (!outside) {
      ASSERT_EQ(::kill(victim, SIGCONT), 0);
      std::this_thread::sleep_for(7ms);
    }
  }
  ASSERT_TRUE(outside) << "the rank was inside an operation at each of 200 stops";
  // Once judged hung, it is let go, so that the restart's SIGTERM ends it within the grace period
  // (a stopped process would wait out the grace period for its SIGKILL).
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto job = Job();
        return job && std::any_of(job->events.begin(), job->events.end(),
                                  [](const auto& e) { return e->message.rfind("hang: ", 0) == 0; });
      },
      60s))
      << "no hang verdict";
  ::kill(victim, SIGCONT);

  auto client = cluster_->Client();
  wire::JobInfoT done = ct::WaitForJobEnd(client, job_, 150s);
  std::string events;
  const wire::JobEventT* hang = nullptr;
  for (const auto& event : done.events) {
    events += event->message + "\n";
    if (hang == nullptr && event->message.rfind("hang: ", 0) == 0) hang = event.get();
  }
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message << "\n" << events;
  EXPECT_EQ(done.restarts, 1) << events << ReplicaLog("chief-0");
  ASSERT_NE(hang, nullptr) << events;
  static const std::regex kNamed(
      "hang: worker-0 \\(rank 3\\) has not entered [a-z-]+ #[0-9]+ .* chief-0 is waiting in it");
  EXPECT_TRUE(std::regex_search(hang->message, kNamed)) << hang->message;
  ExpectChiefResumedFromTheFaultsCheckpoint();
}

// A node with two GPUs takes two of the three replicas (the other goes to a one-GPU node); the
// spare node joins only once the job runs, so that the first placement has no other choice.
class TorchDdpSharedNodeTest : public TorchDdpTest, public ::testing::WithParamInterface<bool> {};

TEST_P(TorchDdpSharedNodeTest, LosingANodeWithTwoReplicasSpendsOneRestart) {
  StartAgents({"node-big"}, 2);
  StartAgents({"node-small"}, 1);
  JobOptions options;
  options.restart_job_on_worker_restart = GetParam();
  Submit(GetParam() ? "shared_node_job_restart" : "shared_node_replica_restart", options);
  WaitForRunning();
  StartAgents({"node-spare"}, 2);
  WaitForCheckpoint(kFaultAfterEpoch);

  // The two co-located replicas were told so (torchrun's LOCAL_WORLD_SIZE), the lone one too,
  // and each its node's rank among the two (GROUP_RANK: the chief's node is 0).
  std::vector<std::string> shared;
  std::map<std::string, std::string> node_rank;  // node -> GROUP_RANK its replicas were told
  for (const std::string replica : {"chief-0", "worker-0", "worker-1"}) {
    const bool on_big = NodeOf(replica) == Node("node-big");
    if (on_big) shared.push_back(replica);
    static const std::regex kLocal("local rank ([0-9]+)/([0-9]+) node ([0-9]+)/([0-9]+)");
    std::string log = ReplicaLog(replica);
    std::smatch local;
    ASSERT_TRUE(std::regex_search(log, local, kLocal)) << replica << ": " << log;
    EXPECT_EQ(local[2].str(), on_big ? "2" : "1") << replica << ": " << log;
    EXPECT_EQ(local[4].str(), "2") << replica << ": " << log;
    auto [known, added] = node_rank.emplace(NodeOf(replica), local[3].str());
    EXPECT_EQ(known->second, local[3].str()) << "replicas of one node told two node ranks";
    if (replica == "chief-0") {
      EXPECT_EQ(local[3].str(), "0") << log;
    }
  }
  ASSERT_EQ(shared.size(), 2u);
  EXPECT_EQ(node_rank.size(), 2u);
  EXPECT_NE(node_rank.begin()->second, node_rank.rbegin()->second);
  LoseNode(Node("node-big"), shared);
  ExpectResumedAfterOneRestart();
}

INSTANTIATE_TEST_SUITE_P(RestartPolicy, TorchDdpSharedNodeTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("WholeJob") : std::string("Replicas");
                         });

}  // namespace
}  // namespace cohort
