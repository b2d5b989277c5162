// Integration tests: a real cohort-coordinator and real cohort-agent processes on loopback (free
// ports, temp dirs), real replica processes (tests/integration/probe.py), driven through the
// `cohort` CLI as users do and through the C++ client library (common/client.h).
//
// Binaries come from CMake ($<TARGET_FILE:...>) or the environment (COHORT_COORDINATOR_BIN,
// COHORT_AGENT_BIN, COHORT_CLI_BIN); a test whose binaries are missing is skipped, saying which.
// Waiting is deadline-driven (poll until a condition holds); no test relies on sleeping.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/client.h"
#include "common/messaging.h"
#include "common/study_spec.h"
#include "tests/testing/binaries.h"
#include "tests/testing/local_cluster.h"
#include "tests/testing/process.h"
#include "tests/testing/specs.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
namespace ct = ::cohort::testing;

std::string BinaryPath(const char* env, const char* built) {
  const char* from_env = std::getenv(env);
  return from_env && *from_env ? from_env : built;
}

std::string CoordinatorBin() {
  return BinaryPath("COHORT_COORDINATOR_BIN", COHORT_COORDINATOR_BIN);
}
std::string AgentBin() { return BinaryPath("COHORT_AGENT_BIN", COHORT_AGENT_BIN); }
std::string CliBin() { return BinaryPath("COHORT_CLI_BIN", COHORT_CLI_BIN); }

// One pool of a probe job.
struct PoolSpec {
  std::string role;
  int replicas = 1;
  int gpus = 0;
};

struct ProbeJob {
  std::string name;
  std::vector<PoolSpec> pools = {{"chief", 1, 0}};
  std::string mode = "ok";   // chief: ok | fail | wait | sleep
  std::string out_dir;       // where replicas write env-*.json
  std::string release_file;  // mode wait
  std::string marker;        // an argument every replica carries, to find them in /proc
  int max_restarts = 0;
  // The probe's other replicas sleep until stopped, unless finish_after (seconds) is set: then
  // they exit 0 on their own that long after they start.
  std::string finish_after;
  // scheduling.finish_grace: 0s, since the probe's other replicas wait to be stopped.
  std::string finish_grace = "0s";
};

int TotalReplicas(const ProbeJob& job) {
  int n = 0;
  for (const auto& p : job.pools) n += p.replicas;
  return n;
}

std::string ProbeJobYaml(const ProbeJob& job) {
  std::string args = "[--out=" + job.out_dir + ", --mode=" + job.mode +
                     ", --expect=" + std::to_string(TotalReplicas(job)) +
                     ", --marker=" + job.marker + ", --max-seconds=60";
  if (!job.release_file.empty()) args += ", --release=" + job.release_file;
  if (!job.finish_after.empty()) args += ", --finish-after=" + job.finish_after;
  args += "]";
  std::string yaml =
      "name: " + job.name + "\noutput_dir: " + job.out_dir + "/output\n" + "worker_pools:\n";
  for (const auto& pool : job.pools) {
    yaml += "  - role: " + pool.role + "\n";
    yaml += "    replicas: " + std::to_string(pool.replicas) + "\n";
    yaml += "    resources: {gpus: " + std::to_string(pool.gpus) + ", cpus: 1}\n";
    yaml += "    process:\n";
    yaml += "      command: [/usr/bin/python3, " + std::string(COHORT_PROBE_SCRIPT) + "]\n";
    yaml += "      args: " + args + "\n";
    yaml += "      env: {PROBE_POOL: " + pool.role + "}\n";
  }
  yaml += "scheduling: {timeout: 5m, max_restarts: " + std::to_string(job.max_restarts) +
          ", finish_grace: " + job.finish_grace + "}\n";
  return yaml;
}

std::string StateName(wire::JobState state) { return wire::EnumNameJobState(state); }

class IntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& [what, path] :
         std::vector<std::pair<std::string, std::string>>{{"cohort-coordinator", CoordinatorBin()},
                                                          {"cohort-agent", AgentBin()},
                                                          {"cohort", CliBin()}}) {
      if (path.empty() || !ct::FileExists(path)) {
        GTEST_SKIP() << what << " is not built in this tree (" << path << ")";
      }
    }
    if (!ct::FileExists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 is missing";
    cluster_ =
        std::make_unique<ct::LocalCluster>(ct::ClusterBinaries{CoordinatorBin(), AgentBin()});
    std::string error = cluster_->StartCoordinator();
    ASSERT_EQ(error, "");
    marker_ = "cohort-it-marker-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  void TearDown() override {
    // Every job of every test here has ended by now: no replica may outlive its job.
    if (cluster_ && !HasFatalFailure()) {
      EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "") << "replicas outlived their jobs";
    }
    if (HasFailure() && cluster_) {
      std::cerr << cluster_->Logs();
    }
    cluster_.reset();
    // Safety net only: tests assert on leftovers themselves before this.
    ct::KillProcessesWithArg("--marker=" + marker_);
  }

  // Node ids carry the test process's pid, so that an agent is told from those of the tests ctest
  // runs beside it by its node id alone (ps, logs).
  static std::string Node(const std::string& name) { return name + "-" + std::to_string(getpid()); }

  void StartAgent(const std::string& name, int gpus) {
    std::string error = cluster_->StartAgent({Node(name), gpus});
    ASSERT_EQ(error, "");
  }

  ProbeJob MakeJob(const std::string& name) {
    ProbeJob job;
    job.name = name;
    job.out_dir = cluster_->scratch(name);
    job.marker = marker_;
    std::filesystem::create_directories(job.out_dir);
    return job;
  }

  // Submits `name`, a job of `pools` whose chief waits until ReleaseFile(name) exists, and waits
  // until it runs. A failure is fatal.
  void SubmitWaitingJob(const std::string& name, std::vector<PoolSpec> pools) {
    ProbeJob job = MakeJob(name);
    job.pools = std::move(pools);
    job.mode = "wait";
    job.release_file = ReleaseFile(name);
    ASSERT_EQ(Submit(job), name);
    WaitForState(name, {wire::JobState::RUNNING});
  }

  // A job of a chief and two workers, no GPUs, the chief in `mode`.
  ProbeJob ChiefAndTwoWorkers(const std::string& name, const std::string& mode) {
    ProbeJob job = MakeJob(name);
    job.pools = {{"chief", 1, 0}, {"worker", 2, 0}};
    job.mode = mode;
    return job;
  }

  std::string ReleaseFile(const std::string& job) const {
    return cluster_->scratch("release-" + job);
  }

  // Writes the job file; returns its path.
  std::string WriteJob(const ProbeJob& job) {
    std::string path = cluster_->scratch(job.name + ".yaml");
    ct::WriteFile(path, ProbeJobYaml(job));
    return path;
  }

  std::string Submit(const ProbeJob& job) {
    auto client = cluster_->Client();
    auto name = client.Submit(ProbeJobYaml(job));
    EXPECT_TRUE(name.ok()) << name.status().ToString();
    return name.ok() ? *name : "";
  }

  // Runs the CLI against this cluster.
  ct::RunResult Cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 25s) {
    std::vector<std::string> full = {"--insecure", "--coordinator", cluster_->client_endpoint()};
    full.insert(full.end(), args.begin(), args.end());
    return ct::RunProcess(CliBin(), full, {}, timeout);
  }

  wire::JobInfoT WaitForState(const std::string& name, std::set<wire::JobState> states,
                              std::chrono::milliseconds timeout = 20s) {
    auto client = cluster_->Client();
    auto job = client.WaitForJob(
        name, [&](const wire::JobInfoT& j) { return states.count(j.state) > 0; },
        SteadyClock::now() + timeout, 100ms);
    EXPECT_TRUE(job.ok()) << "waiting for " << name << ": " << job.status().ToString();
    return job.ok() ? std::move(*job) : wire::JobInfoT{};
  }

  // Waits until the job has ended and so has each of its replicas: a job ends when its chief
  // succeeds, while workers may still be exiting and holding their CPUs, which a test placing the
  // next job on an empty cluster must wait out.
  wire::JobInfoT WaitForJobAndReplicasToEnd(const std::string& name) {
    auto client = cluster_->Client();
    auto ended = [](wire::ReplicaState s) {
      return s != wire::ReplicaState::PENDING && s != wire::ReplicaState::STARTING &&
             s != wire::ReplicaState::RUNNING;
    };
    auto job = client.WaitForJob(
        name,
        [&](const wire::JobInfoT& j) {
          if (j.state != wire::JobState::SUCCEEDED && j.state != wire::JobState::FAILED &&
              j.state != wire::JobState::CANCELLED) {
            return false;
          }
          for (const auto& r : j.replicas) {
            if (!ended(r->state)) return false;
          }
          return true;
        },
        SteadyClock::now() + 20s, 100ms);
    EXPECT_TRUE(job.ok()) << "waiting for " << name << " to end: " << job.status().ToString();
    return job.ok() ? std::move(*job) : wire::JobInfoT{};
  }

  bool NoReplicaProcessesLeft(std::chrono::milliseconds timeout = 10s) {
    return ct::WaitUntil([&] { return ct::FindProcessesWithArg("--marker=" + marker_).empty(); },
                         timeout, 50ms);
  }

  std::unique_ptr<ct::LocalCluster> cluster_;
  std::string marker_;
};

json ReadEnvFile(const std::string& dir, const std::string& replica) {
  std::string text = ct::ReadFile(dir + "/env-" + replica + ".json");
  if (text.empty()) return json();
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// "127.0.0.1:20001" -> "127.0.0.1"
std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }

TEST_F(IntegrationTest, SubmitWaitRunsChiefAndTwoWorkersWithConsistentClusterEnv) {
  StartAgent("node-a", 4);
  ProbeJob job = MakeJob("env_probe");
  job.pools = {{"chief", 1, 1}, {"worker", 2, 1}};
  std::string file = WriteJob(job);

  auto submit = Cli({"submit", file, "--wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit.out << submit.err;
  EXPECT_EQ(submit.out, "env_probe\n");
  EXPECT_NE(submit.err.find("SUCCEEDED"), std::string::npos) << submit.err;

  // Every replica saw a correct and mutually consistent cluster.
  const std::vector<std::string> replicas = {"chief-0", "worker-0", "worker-1"};
  std::map<std::string, json> env;
  for (const auto& r : replicas) {
    env[r] = ReadEnvFile(job.out_dir, r);
    ASSERT_TRUE(env[r].is_object()) << "no env file from " << r;
  }
  json tf_cluster;
  json spec_cluster;
  std::string master_addr;
  std::string master_port;
  std::set<std::string> gpus_seen;
  std::set<std::string> local_ranks;
  for (size_t i = 0; i < replicas.size(); ++i) {
    const std::string& r = replicas[i];
    const json& e = env[r];
    SCOPED_TRACE(r);
    ASSERT_TRUE(e.contains("TF_CONFIG"));
    ASSERT_TRUE(e.contains("CLUSTER_SPEC"));
    json tf = json::parse(e["TF_CONFIG"].get<std::string>(), nullptr, false);
    json spec = json::parse(e["CLUSTER_SPEC"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(tf.is_object()) << e["TF_CONFIG"];
    ASSERT_TRUE(spec.is_object()) << e["CLUSTER_SPEC"];
    const bool chief = r == "chief-0";
    const int index = chief ? 0 : static_cast<int>(i) - 1;
    EXPECT_EQ(tf["task"]["type"], chief ? "chief" : "worker");
    EXPECT_EQ(tf["task"]["index"], index);
    EXPECT_EQ(tf["environment"], "cloud");
    EXPECT_EQ(spec["task"]["type"], chief ? "workerpool0" : "workerpool1");
    EXPECT_EQ(spec["task"]["index"], index);
    EXPECT_EQ(spec["environment"], "cloud");
    ASSERT_EQ(tf["cluster"]["chief"].size(), 1u);
    ASSERT_EQ(tf["cluster"]["worker"].size(), 2u);
    EXPECT_EQ(spec["cluster"]["workerpool0"], tf["cluster"]["chief"]);
    EXPECT_EQ(spec["cluster"]["workerpool1"], tf["cluster"]["worker"]);
    if (i == 0) {
      tf_cluster = tf["cluster"];
      spec_cluster = spec["cluster"];
    }
    EXPECT_EQ(tf["cluster"], tf_cluster) << "TF_CONFIG clusters differ between replicas";
    EXPECT_EQ(spec["cluster"], spec_cluster) << "CLUSTER_SPEC clusters differ between replicas";
    EXPECT_EQ(e.value("RANK", ""), std::to_string(chief ? 0 : index + 1));
    EXPECT_EQ(e.value("WORLD_SIZE", ""), "3");
    // The rest of torchrun's contract: one node, the first attempt, one CPU asked for.
    EXPECT_EQ(e.value("ROLE_RANK", ""), e.value("RANK", "?"));
    EXPECT_EQ(e.value("ROLE_WORLD_SIZE", ""), "3");
    EXPECT_EQ(e.value("GROUP_RANK", ""), "0");
    EXPECT_EQ(e.value("GROUP_WORLD_SIZE", ""), "1");
    EXPECT_EQ(e.value("LOCAL_WORLD_SIZE", ""), "3");
    EXPECT_EQ(e.value("TORCHELASTIC_RUN_ID", ""), "env_probe");
    EXPECT_EQ(e.value("TORCHELASTIC_RESTART_COUNT", ""), "0");
    EXPECT_EQ(e.value("OMP_NUM_THREADS", ""), "1");
    if (i == 0) {
      master_addr = e.value("MASTER_ADDR", "");
      master_port = e.value("MASTER_PORT", "");
    }
    EXPECT_FALSE(e.value("MASTER_ADDR", "").empty());
    EXPECT_FALSE(e.value("MASTER_PORT", "").empty());
    EXPECT_EQ(e.value("MASTER_ADDR", ""), master_addr);
    EXPECT_EQ(e.value("MASTER_PORT", ""), master_port);
    EXPECT_EQ(e.value("AIP_MODEL_DIR", ""), job.out_dir + "/output/model/");
    EXPECT_EQ(e.value("AIP_CHECKPOINT_DIR", ""), job.out_dir + "/output/checkpoints/");
    EXPECT_EQ(e.value("PROBE_POOL", ""), chief ? "chief" : "worker");  // the pool's own env
    // One-GPU replicas sharing a node see the job's GPUs there in local-rank order; device
    // LOCAL_RANK is the replica's own.
    std::vector<std::string> visible;
    std::stringstream devices(e.value("CUDA_VISIBLE_DEVICES", "?"));
    for (std::string d; std::getline(devices, d, ',');) visible.push_back(d);
    const size_t local_rank = std::stoul(e.value("LOCAL_RANK", "0"));
    ASSERT_LT(local_rank, visible.size()) << e.value("CUDA_VISIBLE_DEVICES", "?");
    gpus_seen.insert(visible[local_rank]);
    local_ranks.insert(e.value("LOCAL_RANK", ""));
  }
  // The chief's address in the cluster is where MASTER_ADDR points.
  EXPECT_EQ(HostOf(tf_cluster["chief"][0].get<std::string>()), master_addr);
  std::set<std::string> addresses;
  for (const auto& a : tf_cluster["chief"]) addresses.insert(a.get<std::string>());
  for (const auto& a : tf_cluster["worker"]) addresses.insert(a.get<std::string>());
  EXPECT_EQ(addresses.size(), 3u) << "replica addresses must be distinct: " << tf_cluster;
  // One GPU each, never the same one twice.
  EXPECT_EQ(gpus_seen.size(), 3u);
  EXPECT_EQ(local_ranks.size(), 3u);

  // status --json as scripts see it.
  auto status = Cli({"status", "env_probe", "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  json info = json::parse(status.out, nullptr, false);
  ASSERT_TRUE(info.is_object()) << status.out;
  EXPECT_EQ(info["state"], "SUCCEEDED");
  ASSERT_EQ(info["replicas"].size(), 3u);
  for (const auto& r : info["replicas"]) {
    EXPECT_EQ(r["node_id"], Node("node-a"));
    if (r["replica"] == "chief-0") {
      EXPECT_EQ(r["state"], "SUCCEEDED");
      EXPECT_EQ(r["exit_code"], 0);
    } else {
      EXPECT_NE(r["state"], "FAILED") << r;
    }
  }
  EXPECT_FALSE(info["events"].empty());

  // The human-readable form names every replica.
  auto table = Cli({"status", "env_probe"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const auto& r : replicas) EXPECT_NE(table.out.find(r), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("SUCCEEDED"), std::string::npos);

  // Logs: chief by default, a worker by --replica; --follow returns once the replica is done.
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto logs = Cli({"logs", "env_probe"});
        return logs.exit_code == 0 && logs.out.find("probe chief done") != std::string::npos;
      },
      10s, 200ms))
      << Cli({"logs", "env_probe"}).out;
  auto chief_logs = Cli({"logs", "env_probe", "--follow"});
  EXPECT_EQ(chief_logs.exit_code, 0) << chief_logs.err;
  EXPECT_NE(chief_logs.out.find("probe chief-0 started rank=0 world=3"), std::string::npos)
      << chief_logs.out;
  EXPECT_NE(chief_logs.out.find("probe chief-0 stderr line"), std::string::npos);
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto logs = Cli({"logs", "env_probe", "--replica", "worker-1"});
        return logs.out.find("probe worker-1 started rank=2 world=3") != std::string::npos;
      },
      10s, 200ms));

  auto list = Cli({"list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  json jobs = json::parse(list.out, nullptr, false);
  ASSERT_TRUE(jobs.is_array()) << list.out;
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["name"], "env_probe");

  EXPECT_TRUE(NoReplicaProcessesLeft()) << "workers outlived the finished job";
}

TEST_F(IntegrationTest, FailingChiefFailsTheJobAndStopsTheWorkers) {
  StartAgent("node-a", 0);
  const ProbeJob job = ChiefAndTwoWorkers("failing_chief", "fail");
  std::string name = Submit(job);
  ASSERT_EQ(name, "failing_chief");

  auto client = cluster_->Client();
  auto final_job = client.WaitForTerminal(name, SteadyClock::now() + 20s);
  ASSERT_TRUE(final_job.ok()) << final_job.status().ToString();
  EXPECT_EQ(StateName(final_job->state), "FAILED") << final_job->message;
  EXPECT_FALSE(final_job->message.empty());
  bool chief_seen = false;
  for (const auto& r : final_job->replicas) {
    if (r->replica == "chief-0") {
      chief_seen = true;
      EXPECT_EQ(r->exit_code, 1);
      EXPECT_EQ(wire::EnumNameReplicaState(r->state), std::string("FAILED"));
    }
  }
  EXPECT_TRUE(chief_seen);
  // Both workers had started (the chief waits for them) and must all be gone now.
  EXPECT_TRUE(ct::FileExists(job.out_dir + "/env-worker-0.json"));
  EXPECT_TRUE(ct::FileExists(job.out_dir + "/env-worker-1.json"));
  EXPECT_TRUE(NoReplicaProcessesLeft()) << "worker processes survived the failed job";
  // Once stopped, no replica is reported as still running (the agent's STOPPED reports may land
  // a moment after the processes are gone, so wait for them).
  auto settled = client.WaitForJob(
      name,
      [](const wire::JobInfoT& j) {
        for (const auto& r : j.replicas) {
          if (r->state == wire::ReplicaState::RUNNING) return false;
        }
        return j.state == wire::JobState::FAILED;
      },
      SteadyClock::now() + 10s, 50ms);
  ASSERT_TRUE(settled.ok()) << "replicas still reported RUNNING: " << settled.status().ToString();

  // The CLI's --wait reports failure with exit 1.
  ProbeJob again = MakeJob("failing_chief_cli");
  again.mode = "fail";
  auto submit = Cli({"submit", WriteJob(again), "--wait"});
  EXPECT_EQ(submit.exit_code, 1) << submit.out << submit.err;
  EXPECT_NE(submit.err.find("FAILED"), std::string::npos) << submit.err;
}

// The chief's exit 0 ends the job SUCCEEDED; workers still finishing their own last work (here
// 3 s of it, then a file) are not cut off: each ends on its own, exit 0, within the default
// finish_grace, and says so in the job's events.
TEST_F(IntegrationTest, WorkersStillFinishingWhenTheChiefSucceedsEndOnTheirOwn) {
  StartAgent("node-a", 0);
  ProbeJob job = ChiefAndTwoWorkers("finishing", "ok");
  job.finish_after = "3";
  job.finish_grace = "30s";
  ASSERT_EQ(Submit(job), "finishing");
  wire::JobInfoT done =
      WaitForState("finishing", {wire::JobState::SUCCEEDED, wire::JobState::FAILED}, 30s);
  ASSERT_EQ(StateName(done.state), "SUCCEEDED") << done.message;
  auto client = cluster_->Client();
  const wire::JobInfoT settled = ct::WaitForReplicasEnded(client, "finishing", 20s);
  std::string events;
  for (const auto& e : settled.events) events += e->message + "\n";
  for (const std::string worker : {"worker-0", "worker-1"}) {
    SCOPED_TRACE(worker);
    const wire::ReplicaInfoT* r = nullptr;
    for (const auto& each : settled.replicas) {
      if (each->replica == worker) r = each.get();
    }
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(wire::EnumNameReplicaState(r->state), std::string("SUCCEEDED"));
    EXPECT_EQ(r->exit_code, 0);
    EXPECT_TRUE(ct::FileExists(job.out_dir + "/finished-" + worker)) << "cut off";
    EXPECT_NE(events.find(worker + " attempt 0 exited 0 after the job ended"), std::string::npos)
        << events;
  }
  EXPECT_EQ(settled.state, wire::JobState::SUCCEEDED);
}

// A script that prints as the tutorials do (print(), no flush) into its log file: its lines reach
// `cohort logs` as they are printed (the agent sets PYTHONUNBUFFERED), not once 8 KiB have
// gathered or the process has ended.
TEST_F(IntegrationTest, APythonScriptsPrintsReachItsLogWhileItRuns) {
  StartAgent("node-a", 0);
  const std::string release = ReleaseFile("prints");
  const std::string yaml =
      "name: prints\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n"
      "    process:\n      command: [/usr/bin/python3, -c, \"import os, time\\n"
      "print('epoch 1/3 loss 0.5')\\nwhile not os.path.exists('" +
      release + "'): time.sleep(0.05)\\n\", --marker=" + marker_ + "]\n";
  auto client = cluster_->Client();
  auto name = client.Submit(yaml);
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  WaitForState("prints", {wire::JobState::RUNNING});
  std::string seen;
  const bool printed = ct::WaitUntil(
      [&] {
        seen = Cli({"logs", "prints"}).out;
        return seen.find("epoch 1/3 loss 0.5") != std::string::npos;
      },
      10s, 200ms);
  EXPECT_TRUE(printed) << "the script's line is not in its log while it runs: " << seen;
  EXPECT_EQ(StateName(WaitForState("prints", {wire::JobState::RUNNING}).state), "RUNNING");
  ct::WriteFile(release, "go\n");
  EXPECT_EQ(StateName(WaitForState("prints", {wire::JobState::SUCCEEDED}).state), "SUCCEEDED");
}

// Two real agents, one started with --label gpu=h100: a job whose pool selects gpu=h100 runs on
// that one (twice, though the other node is as free), `cohort nodes` lists the labels, a job
// selecting a label no agent has is refused at submit, NotIn takes the other agent, and jobs that
// either takes go where their preferred_node_affinity points.
TEST_F(IntegrationTest, ANodeSelectorPlacesReplicasOnTheAgentWithTheLabel) {
  StartAgent("node-a", 0);
  ASSERT_EQ(cluster_->StartAgent({Node("node-b"), 0, 8, 16384, "2s", {"--label", "gpu=h100"}}), "");
  const std::string yaml =
      "worker_pools:\n  - role: chief\n    resources: {cpus: 1}\n"
      "    node_selector: {gpu: h100}\n    process: {command: [/bin/true, --marker=" +
      marker_ + "]}\n";
  auto client = cluster_->Client();
  for (const char* name : {"selected1", "selected2"}) {
    auto submitted = client.Submit("name: " + std::string(name) + "\n" + yaml);
    ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
    const wire::JobInfoT done = WaitForState(name, {wire::JobState::SUCCEEDED});
    ASSERT_EQ(done.replicas.size(), 1u);
    EXPECT_EQ(done.replicas[0]->node_id, Node("node-b")) << name;
  }
  const ct::RunResult nodes = Cli({"nodes", "--json"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  const nlohmann::json listed = nlohmann::json::parse(nodes.out, nullptr, false);
  std::map<std::string, std::string> labels;
  for (const auto& n : listed) labels[n.value("node_id", "")] = n.value("labels", "?");
  EXPECT_EQ(labels, (std::map<std::string, std::string>{{Node("node-a"), ""},
                                                        {Node("node-b"), "gpu=h100"}}))
      << nodes.out;
  // Past the coordinator's registration grace the submit check refuses what no node can take
  // (within it such a job waits: each try has a name of its own).
  int tries = 0;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto refused = client.Submit("name: nowhere" + std::to_string(++tries) +
                                     "\nworker_pools:\n  - role: chief\n"
                                     "    node_selector: {gpu: tpu}\n"
                                     "    process: {command: [/bin/true]}\n");
        return !refused.ok() && refused.status().message().find(
                                    "needs a node with labels gpu=tpu") != std::string::npos;
      },
      15s, 500ms))
      << "a job no node's labels suit was not refused";
  // node_affinity: anything but an H100 is the unlabelled node's.
  auto avoided = client.Submit(
      "name: not_h100\nworker_pools:\n  - role: chief\n    resources: {cpus: 1}\n"
      "    node_affinity: [{key: gpu, operator: NotIn, values: [h100]}]\n"
      "    process: {command: [/bin/true]}\n");
  ASSERT_TRUE(avoided.ok()) << avoided.status().ToString();
  const wire::JobInfoT elsewhere = WaitForState("not_h100", {wire::JobState::SUCCEEDED});
  ASSERT_EQ(elsewhere.replicas.size(), 1u);
  EXPECT_EQ(elsewhere.replicas[0]->node_id, Node("node-a"));
  // preferred_node_affinity: either node takes these; each goes to the one it prefers (one of
  // the two is not where packing alone would put it). A term of match_expressions counts where
  // all of them hold: the H100 without a zone label is worth 80 to the first, nothing to the
  // second (it has no zone), which the bare node's 50 then takes.
  const std::string bare = "{weight: 50, key: gpu, operator: DoesNotExist}";
  const std::string h100_and =
      "{weight: 80, match_expressions: [{key: gpu, operator: In, "
      "values: [h100]}, {key: zone, operator: ";
  for (const auto& [name, preference, node] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"likes_h100", "{weight: 50, key: gpu, operator: In, values: [h100]}", "node-b"},
           {"likes_bare", bare, "node-a"},
           {"h100_no_zone", bare + ", " + h100_and + "DoesNotExist}]}", "node-b"},
           {"h100_in_a_zone", bare + ", " + h100_and + "Exists}]}", "node-a"}}) {
    auto preferring = client.Submit("name: " + name +
                                    "\nworker_pools:\n  - role: chief\n    resources: {cpus: 1}\n"
                                    "    preferred_node_affinity: [" +
                                    preference + "]\n    process: {command: [/bin/true]}\n");
    ASSERT_TRUE(preferring.ok()) << preferring.status().ToString();
    const wire::JobInfoT done = WaitForState(name, {wire::JobState::SUCCEEDED});
    ASSERT_EQ(done.replicas.size(), 1u);
    EXPECT_EQ(done.replicas[0]->node_id, Node(node)) << name;
  }
}

// one_per_node on real agents: the two workers of a pool that says so run on the two agents,
// where the same job without it packs onto one.
TEST_F(IntegrationTest, APoolWithOnePerNodeRunsEachReplicaOnItsOwnAgent) {
  StartAgent("node-a", 0);
  StartAgent("node-b", 0);
  auto client = cluster_->Client();
  auto nodes_of = [&](const std::string& name, bool one_per_node) {
    auto submitted =
        client.Submit("name: " + name +
                      "\nworker_pools:\n  - role: chief\n    resources: {cpus: 1}\n"
                      "    process: {command: [/bin/true]}\n"
                      "  - role: worker\n    replicas: 2\n    resources: {cpus: 1}\n" +
                      (one_per_node ? "    one_per_node: true\n" : "") +
                      "    process: {command: [/bin/true, --marker=" + marker_ + "]}\n");
    EXPECT_TRUE(submitted.ok()) << submitted.status().ToString();
    const wire::JobInfoT done = WaitForJobAndReplicasToEnd(name);
    EXPECT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
    std::map<std::string, std::string> where;
    for (const auto& r : done.replicas) where[r->replica] = r->node_id;
    return where;
  };
  const auto spread = nodes_of("spread", true);
  ASSERT_EQ(spread.size(), 3u);
  EXPECT_NE(spread.at("worker-0"), spread.at("worker-1"));
  const auto packed = nodes_of("packed", false);
  ASSERT_EQ(packed.size(), 3u);
  EXPECT_EQ(packed.at("worker-0"), packed.at("worker-1"));
  EXPECT_EQ(packed.at("chief-0"), packed.at("worker-0"));
}

// scheduling.required_topology on real agents: a job of 8 CPUs goes whole to the two agents of
// rack r2 (8 CPUs between them) though the one agent of r1 (10 CPUs) would hold it alone, which is
// where the same job without it goes; a job no rack holds is refused at submit, and placed
// anywhere with preferred_topology. Levels: r2's two agents lie in two blocks, so a rack inside
// one block is r1 alone; a job no rack holds stays inside one block (b1: node-a and node-b).
TEST_F(IntegrationTest, ARequiredTopologyPutsTheWholeJobInOneRack) {
  for (const auto& [name, cpus, rack, block] :
       std::vector<std::tuple<std::string, int, std::string, std::string>>{
           {"node-a", 10, "r1", "b1"}, {"node-b", 4, "r2", "b1"}, {"node-c", 4, "r2", "b2"}}) {
    ASSERT_EQ(cluster_->StartAgent({Node(name),
                                    0,
                                    cpus,
                                    16384,
                                    "2s",
                                    {"--label", "rack=" + rack, "--label", "block=" + block}}),
              "");
  }
  auto client = cluster_->Client();
  auto job = [&](const std::string& name, int workers, const std::string& scheduling) {
    return "name: " + name +
           "\nworker_pools:\n  - role: chief\n    resources: {cpus: 2}\n"
           "    process: {command: [/bin/true]}\n"
           "  - role: worker\n    replicas: " +
           std::to_string(workers) +
           "\n    resources: {cpus: 2}\n"
           "    process: {command: [/bin/true, --marker=" +
           marker_ + "]}\nscheduling: " + scheduling + "\n";
  };
  auto nodes_of = [&](const std::string& name, int workers, const std::string& scheduling) {
    auto submitted = client.Submit(job(name, workers, scheduling));
    EXPECT_TRUE(submitted.ok()) << submitted.status().ToString();
    const wire::JobInfoT done = WaitForJobAndReplicasToEnd(name);
    EXPECT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
    std::set<std::string> where;
    for (const auto& r : done.replicas) where.insert(r->node_id);
    return where;
  };
  EXPECT_EQ(nodes_of("in_rack", 3, "{required_topology: rack}"),
            (std::set<std::string>{Node("node-b"), Node("node-c")}));
  EXPECT_EQ(nodes_of("packed", 3, "{}"), std::set<std::string>{Node("node-a")});
  // 12 CPUs: no rack has them. Past the registration grace the submit check says so.
  int tries = 0;
  std::string refusal;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto refused =
            client.Submit(job("too_big" + std::to_string(++tries), 5, "{required_topology: rack}"));
        refusal = refused.ok() ? "accepted" : refused.status().message();
        return refusal.find(
                   "need nodes of one rack (scheduling.required_topology); none of its 2 "
                   "values (r1, r2) has room for them all") != std::string::npos;
      },
      15s, 500ms))
      << refusal;
  EXPECT_EQ(nodes_of("anywhere", 5, "{preferred_topology: rack}").size(), 2u);
  const std::string levels = "{preferred_topology: [rack], required_topology: block}";
  EXPECT_EQ(nodes_of("rack_in_block", 3, levels), std::set<std::string>{Node("node-a")});
  EXPECT_EQ(nodes_of("block_only", 5, levels),
            (std::set<std::string>{Node("node-a"), Node("node-b")}));
}

// `cohort submit --after`: a job runs only once the job before it has SUCCEEDED, so it finds what
// that one wrote, though the agent had room for both at once; a job after one that fails fails
// too, naming it, and never runs, while that one's fallback (`--after JOB:failed`) and cleanup
// (`JOB:ended`) run; a fallback of a job that succeeded already is refused.
TEST_F(IntegrationTest, AJobSubmittedAfterAnotherRunsOnceThatOneSucceeded) {
  StartAgent("node-a", 0);
  const std::string ready = cluster_->scratch("prep-ready");
  const std::string ran = cluster_->scratch("after-failed-ran");
  auto job_file = [&](const std::string& name, const std::string& script) {
    const std::string path = cluster_->scratch(name + ".yaml");
    ct::WriteFile(path, "name: " + name +
                            "\nworker_pools:\n  - role: chief\n    resources: {cpus: 1}\n"
                            "    process: {command: [/bin/sh, -c, \"" +
                            script + "\"]}\n");
    return path;
  };
  ASSERT_EQ(Cli({"submit", job_file("prep", "sleep 2 && echo ok > " + ready)}).exit_code, 0);
  const ct::RunResult train =
      Cli({"submit", job_file("train", "test -f " + ready), "--after", "prep"});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const wire::JobInfoT trained =
      WaitForState("train", {wire::JobState::SUCCEEDED, wire::JobState::FAILED});
  EXPECT_EQ(trained.state, wire::JobState::SUCCEEDED) << trained.message;
  // broken fails once the jobs after it are in (a job after one that FAILED already is refused).
  const std::string release = cluster_->scratch("broken-may-fail");
  ASSERT_EQ(Cli({"submit",
                 job_file("broken", "while [ ! -f " + release + " ]; do sleep 0.1; done; exit 3")})
                .exit_code,
            0);
  ASSERT_EQ(Cli({"submit", job_file("report", "touch " + ran), "--after", "broken"}).exit_code, 0);
  // Its fallback (broken:failed) and its cleanup (broken:ended) run; a job waiting for train's
  // failure is not needed.
  const std::string fell_back = cluster_->scratch("fallback-ran");
  const std::string cleaned = cluster_->scratch("cleanup-ran");
  ASSERT_EQ(Cli({"submit", job_file("fallback", "touch " + fell_back), "--after", "broken:failed"})
                .exit_code,
            0);
  ASSERT_EQ(
      Cli({"submit", job_file("cleanup", "touch " + cleaned), "--after", "broken:ended"}).exit_code,
      0);
  ct::WriteFile(release, "go\n");
  const ct::RunResult unneeded =
      Cli({"submit", job_file("unneeded", "touch " + ran), "--after", "train:failed"});
  EXPECT_EQ(unneeded.exit_code, 2) << "train SUCCEEDED already: " << unneeded.err;
  const wire::JobInfoT report = WaitForState("report", {wire::JobState::FAILED});
  EXPECT_EQ(report.message, "job broken, which it runs after (scheduling.after), ended FAILED");
  for (const char* name : {"fallback", "cleanup"}) {
    const wire::JobInfoT done =
        WaitForState(name, {wire::JobState::SUCCEEDED, wire::JobState::FAILED});
    EXPECT_EQ(done.state, wire::JobState::SUCCEEDED) << name << ": " << done.message;
  }
  EXPECT_TRUE(ct::FileExists(fell_back));
  EXPECT_TRUE(ct::FileExists(cleaned));
  EXPECT_FALSE(ct::FileExists(ran)) << "a job ran after the one it waited for failed";
}

// A job array (`cohort submit --array 0-4%2 --wait`) on agents with room for every task: each
// index runs once with its own COHORT_ARRAY_INDEX and output dir, never more than two at once
// (the times each task wrote down), and --wait exits 0 once every task SUCCEEDED; an array with
// a failing task makes --wait exit 1 naming it.
TEST_F(IntegrationTest, AJobArrayRunsEachIndexOnceAndAtMostItsParallelismAtOnce) {
  StartAgent("node-a", 0);
  StartAgent("node-b", 0);
  const std::string runs = cluster_->scratch("array-runs");
  std::filesystem::create_directories(runs);
  const std::string file = cluster_->scratch("sweep.yaml");
  ct::WriteFile(file, "name: sweep\noutput_dir: " + cluster_->scratch("sweep-out") +
                          "\nworker_pools:\n  - role: chief\n    resources: {cpus: 1}\n"
                          "    process: {command: [/bin/sh, -c, \"cd " +
                          runs +
                          " && date +%s%N > $COHORT_ARRAY_INDEX.start && echo "
                          "$COHORT_ARRAY_COUNT $JOB_COMPLETION_INDEX $AIP_MODEL_DIR > "
                          "$COHORT_ARRAY_INDEX.env && sleep 2 && date +%s%N > "
                          "$COHORT_ARRAY_INDEX.end\"]}\n");
  const ct::RunResult submit = Cli({"submit", file, "--array", "0-4%2", "--wait"}, 90s);
  EXPECT_EQ(submit.exit_code, 0) << submit.out << submit.err;
  EXPECT_EQ(submit.out, "sweep\n");
  EXPECT_NE(submit.err.find("array sweep: 5 tasks (sweep-0 .. sweep-4), at most 2 at once"),
            std::string::npos)
      << submit.err;
  EXPECT_NE(submit.err.find("array sweep: all 5 tasks SUCCEEDED"), std::string::npos) << submit.err;
  std::vector<std::pair<int64_t, int>> edges;  // (time, +1 start / -1 end)
  for (int i = 0; i < 5; ++i) {
    const std::string at = runs + "/" + std::to_string(i);
    EXPECT_EQ(ct::ReadFile(at + ".env"), "5 " + std::to_string(i) + " " +
                                             cluster_->scratch("sweep-out") + "/" +
                                             std::to_string(i) + "/model/\n");
    const std::string start = ct::ReadFile(at + ".start");
    const std::string end = ct::ReadFile(at + ".end");
    ASSERT_FALSE(start.empty() || end.empty()) << "task " << i << " did not run through";
    edges.emplace_back(std::stoll(start), 1);
    edges.emplace_back(std::stoll(end), -1);
  }
  std::sort(edges.begin(), edges.end());
  int running = 0;
  int most = 0;
  for (const auto& [time, change] : edges) most = std::max(most, running += change);
  EXPECT_EQ(most, 2) << "tasks at once, with a parallelism of 2";
  const ct::RunResult listed = Cli({"list", "-l", "cohort/array=sweep"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  for (int i = 0; i < 5; ++i) {
    EXPECT_NE(listed.out.find("sweep-" + std::to_string(i)), std::string::npos) << listed.out;
  }

  const ct::RunResult watched = Cli({"watch", "sweep"});
  EXPECT_EQ(watched.exit_code, 0) << watched.err;
  EXPECT_NE(watched.out.find("job sweep-3: SUCCEEDED"), std::string::npos) << watched.out;
  EXPECT_NE(watched.out.find("array sweep: all 5 tasks SUCCEEDED"), std::string::npos)
      << watched.out;
  const ct::RunResult status = Cli({"status", "sweep"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(status.out.rfind("array sweep: SUCCEEDED, 5 tasks (0-4%2): 5 SUCCEEDED; 0 in flight "
                             "of at most 2\n",
                             0),
            0u)
      << status.out;
  EXPECT_NE(status.out.find("sweep-4"), std::string::npos) << status.out;
  const ct::RunResult arrays = Cli({"arrays"});
  EXPECT_EQ(arrays.exit_code, 0) << arrays.err;
  EXPECT_EQ(arrays.out.rfind("ARRAY ", 0), 0u) << arrays.out;
  EXPECT_NE(arrays.out.find("sweep  SUCCEEDED  0-4%2    5/5    0/2        5 SUCCEEDED"),
            std::string::npos)
      << arrays.out;
  const json arrays_json = json::parse(Cli({"arrays", "--json"}).out, nullptr, false);
  ASSERT_TRUE(arrays_json.is_array() && arrays_json.size() == 1) << arrays_json;
  EXPECT_EQ(arrays_json[0]["by_state"], json({{"SUCCEEDED", 5}})) << arrays_json;
  EXPECT_EQ(arrays_json[0]["ended"], 5) << arrays_json;

  const std::string failing = cluster_->scratch("exits.yaml");
  ct::WriteFile(failing,
                "name: exits\nworker_pools:\n  - role: chief\n    resources: {cpus: 1}\n"
                "    process: {command: [/bin/sh, -c, 'exit \"$1\"', sh], args: "
                "['$(COHORT_ARRAY_INDEX)']}\n");
  const ct::RunResult failed = Cli({"submit", failing, "--array", "0,3", "--wait"}, 60s);
  EXPECT_EQ(failed.exit_code, 1) << failed.out << failed.err;
  EXPECT_NE(failed.err.find("array exits: 1 of 2 tasks did not succeed: exits-3"),
            std::string::npos)
      << failed.err;
  const ct::RunResult cancelled = Cli({"cancel", "exits"});
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.err;
  EXPECT_NE(cancelled.out.find("exits-3"), std::string::npos) << cancelled.out;
  // Deleted whole once every task has ended; its name is free again.
  const ct::RunResult deleted = Cli({"delete", "exits"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_EQ(deleted.out, "array exits deleted (2 tasks)\n");
  EXPECT_EQ(Cli({"status", "exits-0"}).exit_code, 2);
  const std::string waiting = cluster_->scratch("waits.yaml");
  ct::WriteFile(waiting,
                "name: exits\nworker_pools:\n  - role: chief\n    resources: {cpus: 1}\n"
                "    process: {command: [sleep, '30']}\n");
  ASSERT_EQ(Cli({"submit", waiting, "--array", "0-1"}).exit_code, 0);
  const ct::RunResult busy = Cli({"delete", "exits"});
  EXPECT_EQ(busy.exit_code, 2) << busy.err;
  EXPECT_NE(busy.err.find("array exits: exits-0 ("), std::string::npos) << busy.err;
  EXPECT_NE(busy.err.find("cancel it first"), std::string::npos) << busy.err;
  // Suspended, moved to another class and resumed whole, a line a task.
  const ct::RunResult suspended = Cli({"suspend", "exits", "--wait"}, 30s);
  EXPECT_EQ(suspended.exit_code, 0) << suspended.err;
  EXPECT_NE(suspended.out.find("job exits-1: SUSPENDED (array exits suspended"), std::string::npos)
      << suspended.out;
  const ct::RunResult moved = Cli({"update", "exits", "--priority", "high"});
  EXPECT_EQ(moved.out,
            "job exits-0: SUSPENDED, priority high, queue default\n"
            "job exits-1: SUSPENDED, priority high, queue default\n")
      << moved.err;
  const ct::RunResult resumed = Cli({"resume", "exits"});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("job exits-0: QUEUED"), std::string::npos) << resumed.out;
  // The array's file, from its first task's: it submits those tasks again under another name.
  const ct::RunResult stored = Cli({"status", "exits", "--spec"});
  EXPECT_EQ(stored.exit_code, 0) << stored.err;
  EXPECT_NE(stored.out.find("name: \"exits\"\n"), std::string::npos) << stored.out;
  EXPECT_EQ(stored.out.find("array_index"), std::string::npos) << stored.out;
  ct::WriteFile(cluster_->scratch("exits-again.yaml"), stored.out);
  const ct::RunResult again = Cli({"submit", cluster_->scratch("exits-again.yaml"), "--name",
                                   "again", "--array", "1", "--dry-run"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("array again (1 task): of the 1 task it would let in at once"),
            std::string::npos)
      << again.out;
  const ct::RunResult nothing = Cli({"suspend", "no-such"});
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_NE(nothing.err.find("no job or array named 'no-such'"), std::string::npos) << nothing.err;
  EXPECT_EQ(Cli({"cancel", "exits", "--wait"}).exit_code, 0);
  const ct::RunResult refused = Cli({"submit", failing, "--array", "3-1"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--array: '3-1': '3-1' ends before it starts"), std::string::npos)
      << refused.err;
  EXPECT_TRUE(NoReplicaProcessesLeft());
}

// A script that saves its snapshot into a relative path (the torchrun fault-tolerance tutorial's
// torch.save(state, "snapshot.pt")) and is killed: its restart on the same node starts with what
// it left in its working directory (agent/working_files.h), as torchrun's restart would, and the
// attempt's log and the job's events say so.
TEST_F(IntegrationTest, ARestartOnItsNodeStartsWithTheWorkingFilesTheLastAttemptLeft) {
  StartAgent("node-a", 0);
  const std::string yaml =
      "name: relative\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n"
      "    process:\n      command: [/bin/sh, -c, 'if [ \"$COHORT_RESTART_COUNT\" = 0 ]; then "
      "echo epoch=3 > snapshot.pt; kill -9 $$; fi; echo found $(cat snapshot.pt) in $(pwd)', "
      "--marker=" +
      marker_ + "]\nscheduling: {max_restarts: 1}\n";
  auto client = cluster_->Client();
  auto name = client.Submit(yaml);
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  wire::JobInfoT done =
      WaitForState("relative", {wire::JobState::SUCCEEDED, wire::JobState::FAILED}, 30s);
  ASSERT_EQ(StateName(done.state), "SUCCEEDED") << done.message;
  std::string events;
  for (const auto& e : done.events) events += e->message + "\n";
  EXPECT_NE(events.find("chief-0 attempt 1: carried attempt 0's working files into this "
                        "attempt's (snapshot.pt), as torchrun restarts a worker where it ran"),
            std::string::npos)
      << events;
  const std::string log = Cli({"logs", "relative"}).out;
  EXPECT_NE(log.find("found epoch=3 in "), std::string::npos) << log;
  EXPECT_NE(log.find("/attempt-1\n"), std::string::npos) << "not in attempt 1's directory: " << log;
  EXPECT_NE(log.find("cohort-agent: carried attempt 0's working files"), std::string::npos) << log;
}

TEST_F(IntegrationTest, CancelStopsEveryReplicaAndSubmitWaitExitsOne) {
  StartAgent("node-a", 0);
  const ProbeJob job = ChiefAndTwoWorkers("to_cancel", "sleep");
  std::string file = WriteJob(job);

  ct::RunResult waiter;
  std::thread submit_thread([&] { waiter = Cli({"submit", file, "--wait"}, 28s); });
  // Every replica running: the job is RUNNING and each wrote its env file.
  bool all_started = ct::WaitUntil(
      [&] {
        return ct::FileExists(job.out_dir + "/env-chief-0.json") &&
               ct::FileExists(job.out_dir + "/env-worker-0.json") &&
               ct::FileExists(job.out_dir + "/env-worker-1.json");
      },
      20s);
  WaitForState("to_cancel", {wire::JobState::RUNNING});

  auto cancel = Cli({"cancel", "to_cancel", "--wait"});
  submit_thread.join();
  ASSERT_TRUE(all_started) << "replicas never started";
  EXPECT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err;
  EXPECT_NE(cancel.out.find("CANCELLED"), std::string::npos) << cancel.out;
  EXPECT_EQ(waiter.exit_code, 1) << waiter.out << waiter.err;
  EXPECT_EQ(waiter.out, "to_cancel\n");
  EXPECT_NE(waiter.err.find("CANCELLED"), std::string::npos) << waiter.err;
  EXPECT_TRUE(NoReplicaProcessesLeft()) << "replicas survived the cancel";

  auto client = cluster_->Client();
  auto info = client.GetJob("to_cancel");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(StateName(info->state), "CANCELLED");
}

TEST_F(IntegrationTest, JobThatDoesNotFitStaysQueuedUntilCapacityFrees) {
  StartAgent("node-a", 2);
  auto client = cluster_->Client();

  // A holds both GPUs of node-a until released.
  ASSERT_NO_FATAL_FAILURE(SubmitWaitingJob("holder", {{"chief", 1, 1}, {"worker", 1, 1}}));

  // B needs two GPUs at once; C needs more GPUs than any node declares.
  ProbeJob b = MakeJob("needs_two");
  b.pools = {{"chief", 1, 2}};
  ASSERT_EQ(Submit(b), "needs_two");
  ProbeJob c = MakeJob("needs_three");
  c.pools = {{"chief", 1, 3}};
  ASSERT_EQ(Submit(c), "needs_three");

  // Both stay QUEUED through many scheduling rounds while A runs (an observation window: the
  // claim is that nothing happens).
  auto observe_until = SteadyClock::now() + 2s;
  while (SteadyClock::now() < observe_until) {
    auto jb = client.GetJob("needs_two");
    auto jc = client.GetJob("needs_three");
    ASSERT_TRUE(jb.ok() && jc.ok());
    ASSERT_EQ(StateName(jb->state), "QUEUED") << jb->message;
    ASSERT_EQ(StateName(jc->state), "QUEUED") << jc->message;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_FALSE(ct::FileExists(b.out_dir + "/env-chief-0.json"));

  auto nodes = Cli({"nodes", "--json"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  json node_list = json::parse(nodes.out, nullptr, false);
  ASSERT_TRUE(node_list.is_array() && node_list.size() == 1u) << nodes.out;
  EXPECT_EQ(node_list[0]["gpus"].size(), 2u);
  EXPECT_EQ(node_list[0]["gpus_used"].size(), 2u);
  auto nodes_table = Cli({"nodes"});
  EXPECT_NE(nodes_table.out.find(Node("node-a")), std::string::npos) << nodes_table.out;
  // The node at length: A's two replicas hold its two GPUs, one each.
  ASSERT_EQ(node_list[0]["holders"].size(), 2u) << nodes.out;
  EXPECT_EQ(node_list[0]["holders"][0]["job"], "holder") << nodes.out;
  EXPECT_EQ(node_list[0]["holders"][0]["replica"], "chief-0") << nodes.out;
  EXPECT_EQ(node_list[0]["holders"][1]["replica"], "worker-0") << nodes.out;
  auto one_node = Cli({"nodes", Node("node-a")});
  ASSERT_EQ(one_node.exit_code, 0) << one_node.err;
  for (const char* gpu : {"0", "1"}) {
    EXPECT_TRUE(std::regex_search(
        one_node.out, std::regex(std::string("\n") + gpu + " .* holder/(chief|worker)-0\n")))
        << one_node.out;
  }
  EXPECT_TRUE(std::regex_search(one_node.out, std::regex("\nholder +chief-0 +RUNNING +[01] +1 ")))
      << one_node.out;
  EXPECT_TRUE(std::regex_search(one_node.out, std::regex("\nholder +worker-0 +RUNNING +[01] +1 ")))
      << one_node.out;
  // The dashboard's node page reads the same from /api/nodes (its snapshot at most half a
  // second behind).
  ASSERT_GT(cluster_->coordinator_http_port(), 0);
  httplib::Client http("127.0.0.1", cluster_->coordinator_http_port());
  std::string body;
  std::set<std::string> holders;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        auto got = http.Get("/api/nodes");
        body = got ? got->body : "";
        json api = json::parse(body, nullptr, false);
        holders.clear();
        if (!api.is_array() || api.size() != 1u) return false;
        for (const json& gpu : api[0]["gpu_list"]) {
          for (const json& h : gpu["holders"])
            holders.insert(h.get<std::string>() + "@" + gpu["index"].dump());
        }
        return holders.size() == 2u;
      },
      5s, 100ms))
      << body;
  std::set<std::string> held_by;  // who, whichever GPU
  for (const std::string& h : holders) held_by.insert(h.substr(0, h.find('@')));
  EXPECT_EQ(held_by, (std::set<std::string>{"holder/chief-0", "holder/worker-0"})) << body;
  auto no_node = Cli({"nodes", Node("node-a") + "x"});
  EXPECT_EQ(no_node.exit_code, 2) << no_node.out;
  EXPECT_NE(no_node.err.find("no node '" + Node("node-a") + "x' (did you mean '" + Node("node-a") +
                             "'?)"),
            std::string::npos)
      << no_node.err;

  // Follow A's chief log live: the follower prints what comes and returns once A has ended.
  ct::RunResult follower;
  std::thread follow_thread([&] { follower = Cli({"logs", "holder", "--follow"}, 25s); });
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        return Cli({"logs", "holder"}).out.find("probe chief-0 saw 2 replicas") !=
               std::string::npos;
      },
      10s, 100ms));

  // A ends; its GPUs go to B.
  ct::WriteFile(ReleaseFile("holder"), "go");
  EXPECT_EQ(
      StateName(WaitForState("holder", {wire::JobState::SUCCEEDED, wire::JobState::FAILED}).state),
      "SUCCEEDED");
  EXPECT_EQ(
      StateName(
          WaitForState("needs_two", {wire::JobState::SUCCEEDED, wire::JobState::FAILED}).state),
      "SUCCEEDED");
  follow_thread.join();
  EXPECT_EQ(follower.exit_code, 0) << follower.err;
  EXPECT_NE(follower.out.find("probe chief-0 started"), std::string::npos) << follower.out;
  EXPECT_NE(follower.out.find("probe chief-0 saw 2 replicas, mode wait"), std::string::npos)
      << follower.out;
  auto jc = client.GetJob("needs_three");
  ASSERT_TRUE(jc.ok());
  EXPECT_EQ(StateName(jc->state), "QUEUED");

  // A node big enough for C joins: C runs there.
  StartAgent("node-big", 4);
  auto done = WaitForState("needs_three", {wire::JobState::SUCCEEDED, wire::JobState::FAILED});
  EXPECT_EQ(StateName(done.state), "SUCCEEDED") << done.message;
  ASSERT_EQ(done.replicas.size(), 1u);
  EXPECT_EQ(done.replicas[0]->node_id, Node("node-big"));
  EXPECT_EQ(done.replicas[0]->gpus.size(), 3u);
}

TEST_F(IntegrationTest, CoordinatorKilledWithSigkillKeepsEveryJobAfterRestart) {
  StartAgent("node-a", 2);
  auto client = cluster_->Client();

  ProbeJob ok = MakeJob("done_ok");
  ASSERT_EQ(Submit(ok), "done_ok");
  ProbeJob failed = MakeJob("done_failed");
  failed.mode = "fail";
  ASSERT_EQ(Submit(failed), "done_failed");
  WaitForState("done_ok", {wire::JobState::SUCCEEDED});
  WaitForState("done_failed", {wire::JobState::FAILED});
  ASSERT_NO_FATAL_FAILURE(SubmitWaitingJob("still_running", {{"chief", 1, 1}, {"worker", 1, 0}}));
  ProbeJob queued = MakeJob("queued_big");
  queued.pools = {{"chief", 1, 8}};
  ASSERT_EQ(Submit(queued), "queued_big");

  auto before = client.ListJobs();
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->size(), 4u);

  cluster_->coordinator().Kill();  // SIGKILL: no chance to flush anything
  ASSERT_EQ(cluster_->StartCoordinator(), "");

  auto restarted = cluster_->Client();
  auto after = restarted.ListJobs();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  std::map<std::string, std::string> states;
  for (const auto& job : *after) states[job.name] = StateName(job.state);
  ASSERT_EQ(states.size(), 4u);
  EXPECT_EQ(states["done_ok"], "SUCCEEDED");
  EXPECT_EQ(states["done_failed"], "FAILED");
  EXPECT_EQ(states["queued_big"], "QUEUED");
  EXPECT_TRUE(states["still_running"] == "RUNNING" || states["still_running"] == "PENDING")
      << states["still_running"];

  // The CLI sees the same list.
  auto list = Cli({"list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  for (const auto& [name, state] : states) {
    EXPECT_NE(list.out.find(name), std::string::npos) << list.out;
  }

  // The running job was not lost: the agent re-registers, and the job finishes normally.
  ct::WriteFile(ReleaseFile("still_running"), "go");
  auto finished =
      WaitForState("still_running", {wire::JobState::SUCCEEDED, wire::JobState::FAILED}, 25s);
  EXPECT_EQ(StateName(finished.state), "SUCCEEDED") << finished.message;
}

TEST_F(IntegrationTest, TuneRunsAGridStudyAndTrialsShowsTheBest) {
  StartAgent("node-a", 0);
  std::string script = cluster_->scratch("trial.py");
  ct::WriteFile(script,
                "import json, os, sys, time\n"
                "x = [a.split('=', 1)[1] for a in sys.argv[1:] if a.startswith('--x=')][0]\n"
                "if '--offset=5' in sys.argv:  # tune -- ARGS: before the trial's parameters\n"
                "    assert sys.argv.index('--offset=5') < sys.argv.index('--x=' + x), sys.argv\n"
                "    x = str(int(x) * int(os.environ['SCALE']) + 5)  # and tune --env\n"
                "line = {'score': x, 'global_step': '1', 'timestamp': time.time(),\n"
                "        'trial': os.environ.get('CLOUD_ML_TRIAL_ID', '')}\n"
                "with open(os.environ['CLOUD_ML_HP_METRIC_FILE'], 'a') as f:\n"
                "    f.write(json.dumps(line) + '\\n')\n"
                "print('trial x=' + x, flush=True)\n");
  std::string study = cluster_->scratch("study.yaml");
  ct::WriteFile(study, ct::GridStudyYaml("grid_study", 3, 3, cluster_->scratch("study-out"),
                                         "      process:\n"
                                         "        command: [/usr/bin/python3, " +
                                             script + ", --marker=" + marker_ + "]\n"));
  auto tune = Cli({"tune", study, "--wait"}, 28s);
  ASSERT_EQ(tune.exit_code, 0) << tune.out << tune.err;
  EXPECT_EQ(tune.out.rfind("grid_study\n", 0), 0u) << tune.out;
  EXPECT_NE(tune.out.find("Best trial: "), std::string::npos) << tune.out;
  EXPECT_NE(tune.out.find("--x=3"), std::string::npos) << tune.out;

  auto trials = Cli({"trials", "grid_study", "--json"});
  ASSERT_EQ(trials.exit_code, 0) << trials.err;
  json info = json::parse(trials.out, nullptr, false);
  ASSERT_TRUE(info.is_object()) << trials.out;
  EXPECT_EQ(info["state"], "SUCCEEDED");
  ASSERT_EQ(info["trials"].size(), 3u) << trials.out;
  std::set<std::string> xs;
  std::string best_x;
  for (const auto& t : info["trials"]) {
    EXPECT_EQ(t["state"], "SUCCEEDED") << t;
    xs.insert(t["parameters"].value("x", ""));
    ASSERT_TRUE(t["final_metric"].is_number()) << t;
    EXPECT_DOUBLE_EQ(t["final_metric"].get<double>(), std::stod(t["parameters"].value("x", "0")));
    if (t["id"] == info["best_trial"]) best_x = t["parameters"].value("x", "");
  }
  EXPECT_EQ(xs, (std::set<std::string>{"1", "2", "3"}));
  EXPECT_EQ(best_x, "3");
  // The study file stored: it submits again as it is.
  auto stored = Cli({"trials", "grid_study", "--spec"});
  ASSERT_EQ(stored.exit_code, 0) << stored.err;
  StatusOr<StudySpec> stored_spec = ParseStudySpec(stored.out, "stored");
  ASSERT_TRUE(stored_spec.ok()) << stored_spec.status().ToString() << "\n" << stored.out;
  EXPECT_EQ(stored_spec->name, "grid_study");
  EXPECT_EQ(stored_spec->max_trials, 3);
  EXPECT_EQ(Cli({"trials", "grid_study", "--spec", "--json"}).exit_code, 2);
  // The same file again under another name; a name that is not one is refused before sending.
  auto bad_name = Cli({"tune", study, "--name", "2nd"});
  EXPECT_EQ(bad_name.exit_code, 2);
  EXPECT_NE(bad_name.err.find("name: '2nd' is not a valid study name"), std::string::npos)
      << bad_name.err;
  // With --env, --label and -- ARGS, which every trial gets: the scores are 10x + 5, and each
  // trial job is labelled.
  auto again = Cli({"tune", study, "--name", "grid_again", "--env", "SCALE=10", "--label",
                    "sweep=again", "--wait", "--", "--offset=5"},
                   28s);
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_EQ(again.out.rfind("grid_again\n", 0), 0u) << again.out;
  EXPECT_NE(again.out.find("grid_again_trial_"), std::string::npos) << again.out;
  json again_info = json::parse(Cli({"trials", "grid_again", "--json"}).out, nullptr, false);
  ASSERT_TRUE(again_info.is_object());
  std::set<double> scores;
  for (const auto& t : again_info["trials"]) {
    if (t["final_metric"].is_number()) scores.insert(t["final_metric"].get<double>());
  }
  EXPECT_EQ(scores, (std::set<double>{15, 25, 35})) << again_info;
  json labelled = json::parse(Cli({"list", "-l", "sweep=again", "--json"}).out, nullptr, false);
  ASSERT_TRUE(labelled.is_array());
  EXPECT_EQ(labelled.size(), again_info["trials"].size()) << labelled;
  auto bad_env = Cli({"tune", study, "--name", "grid_bad", "--env", "SCALE"});
  EXPECT_EQ(bad_env.exit_code, 2);
  EXPECT_NE(bad_env.err.find("--env: expected KEY=VALUE, got 'SCALE'"), std::string::npos)
      << bad_env.err;
  EXPECT_TRUE(NoReplicaProcessesLeft());
}

// The Python client (python/cohort) against the real daemons: jobs, logs, errors and a study.
TEST_F(IntegrationTest, PythonClientRunsJobsAndStudies) {
  ASSERT_TRUE(std::filesystem::exists(std::string(COHORT_PYTHON_DIR) + "/cohort/wire/Envelope.py"))
      << "the cohort Python package (target cohort_python) is not in " << COHORT_PYTHON_DIR;
  StartAgent("node-a", 0);
  StartAgent("node-b", 0);
  auto run = ct::RunProcess(
      "/usr/bin/python3", {COHORT_PYTHON_CHECK, cluster_->client_endpoint(), cluster_->scratch("")},
      {"PYTHONPATH=" + std::string(COHORT_PYTHON_DIR)}, 50s);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("python client: ok"), std::string::npos) << run.out << run.err;
  EXPECT_TRUE(NoReplicaProcessesLeft());
}

// Sends raw frames on a plain DEALER and returns the reply frame, if any.
std::optional<std::string> RawExchange(zmq::socket_t& socket, std::vector<std::string> frames,
                                       std::chrono::milliseconds timeout = 3s) {
  for (size_t i = 0; i < frames.size(); ++i) {
    zmq::message_t frame(frames[i].data(), frames[i].size());
    socket.send(frame, i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, timeout) <= 0) return std::nullopt;
  zmq::message_t reply;
  if (!socket.recv(reply)) return std::nullopt;
  return reply.to_string();
}

Status ReplyStatus(const std::optional<std::string>& reply) {
  if (!reply) return Unavailable("no reply");
  auto message = Message::Parse(zmq::message_t(reply->data(), reply->size()));
  if (!message.ok()) return Internal("the reply itself does not verify");
  if (message->type() != wire::Body::ErrorReply) return Internal("not an ErrorReply");
  return message->ErrorStatus();
}

TEST_F(IntegrationTest, MalformedFramesGetClearErrorsAndTheCoordinatorKeepsServing) {
  zmq::context_t context(1);
  for (const std::string& endpoint : {cluster_->client_endpoint(), cluster_->agent_endpoint()}) {
    SCOPED_TRACE(endpoint);
    zmq::socket_t socket(context, zmq::socket_type::dealer);
    socket.set(zmq::sockopt::linger, 0);
    socket.connect(endpoint);

    Status garbage = ReplyStatus(RawExchange(socket, {"this is not a flatbuffer at all"}));
    EXPECT_EQ(garbage.code(), StatusCode::kDataLoss) << garbage.ToString();
    EXPECT_FALSE(garbage.message().empty());

    Status tiny = ReplyStatus(RawExchange(socket, {"hi"}));
    EXPECT_EQ(tiny.code(), StatusCode::kDataLoss) << tiny.ToString();

    // A real envelope, truncated: the identifier matches but the verifier must refuse it.
    zmq::message_t valid = Encode(5, wire::ListJobsT{});
    std::string truncated(static_cast<const char*>(valid.data()), valid.size() / 2 + 4);
    truncated.replace(4, 4, "CHRT");
    Status cut = ReplyStatus(RawExchange(socket, {truncated}));
    EXPECT_EQ(cut.code(), StatusCode::kDataLoss) << cut.ToString();

    // Two frames where one is expected.
    std::string whole(static_cast<const char*>(valid.data()), valid.size());
    Status multi = ReplyStatus(RawExchange(socket, {whole, whole}));
    EXPECT_EQ(multi.code(), StatusCode::kDataLoss) << multi.ToString();

    // A protocol version this side does not speak.
    flatbuffers::FlatBufferBuilder builder;
    wire::EnvelopeT envelope;
    envelope.version = 999;
    envelope.request_id = 9;
    envelope.body.Set(wire::ListJobsT{});
    builder.Finish(wire::Envelope::Pack(builder, &envelope), wire::EnvelopeIdentifier());
    Status version = ReplyStatus(
        RawExchange(socket, {std::string(reinterpret_cast<const char*>(builder.GetBufferPointer()),
                                         builder.GetSize())}));
    EXPECT_NE(version.code(), StatusCode::kOk);
    EXPECT_NE(version.code(), StatusCode::kUnavailable) << "no reply to a wrong version";
    EXPECT_NE(version.message().find("version"), std::string::npos) << version.ToString();
  }

  // Still serving, and still alive.
  EXPECT_TRUE(cluster_->coordinator().running());
  auto client = cluster_->Client();
  auto jobs = client.ListJobs();
  EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
  auto list = Cli({"list"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
}

TEST_F(IntegrationTest, InvalidSpecsAreRejectedNamingTheField) {
  // Local validation by the CLI: exit 2, the message names the field.
  std::string typo = cluster_->scratch("typo.yaml");
  ct::WriteFile(typo,
                "name: typo_job\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                "    resorces: {gpus: 1}\n    process: {command: [/bin/true]}\n");
  auto r1 = Cli({"submit", typo});
  EXPECT_EQ(r1.exit_code, 2) << r1.out << r1.err;
  EXPECT_NE(r1.err.find("resorces"), std::string::npos) << r1.err;
  EXPECT_EQ(r1.out, "");

  std::string zero = cluster_->scratch("zero.yaml");
  ct::WriteFile(zero,
                "name: zero_job\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                "    process: {command: [/bin/true]}\n  - role: worker\n    replicas: 0\n"
                "    process: {command: [/bin/true]}\n");
  auto r2 = Cli({"submit", zero});
  EXPECT_EQ(r2.exit_code, 2) << r2.err;
  EXPECT_NE(r2.err.find("replicas"), std::string::npos) << r2.err;

  auto missing = Cli({"submit", cluster_->scratch("no-such-file.yaml")});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;

  // The coordinator validates too (a client that skips local validation).
  auto client = cluster_->Client();
  auto bad = client.Submit("name: 1bad\nworker_pools: []\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("name"), std::string::npos) << bad.status().ToString();
  auto bad_yaml = client.Submit("name: [unclosed\n");
  EXPECT_EQ(bad_yaml.status().code(), StatusCode::kInvalidArgument);

  // Unknown jobs and duplicate names.
  auto unknown = client.GetJob("no_such_job");
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  auto status = Cli({"status", "no_such_job"});
  EXPECT_EQ(status.exit_code, 2) << status.err;
  EXPECT_NE(status.err.find("no_such_job"), std::string::npos) << status.err;

  std::string good = cluster_->scratch("dup.yaml");
  ct::WriteFile(good,
                "name: dup_job\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                "    resources: {gpus: 64}\n    process: {command: [/bin/true]}\n");
  auto first = Cli({"submit", good});
  EXPECT_EQ(first.exit_code, 0) << first.err;
  auto second = Cli({"submit", good});
  EXPECT_EQ(second.exit_code, 2) << second.err;
  auto dup = client.Submit(ct::ReadFile(good));
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists) << dup.status().ToString();

  // Still serving.
  EXPECT_TRUE(cluster_->coordinator().running());
  auto jobs = client.ListJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), 1u);
}

// A CURVE coordinator (no --insecure) serves a client whose public key is listed in its clients/
// directory, and refuses one whose key is not (exit 4, saying so).
TEST(SecureIntegrationTest, CurveClientWithAListedKeyIsServedAndAnUnlistedOneIsNot) {
  for (const auto& path : {CoordinatorBin(), CliBin()}) {
    if (path.empty() || !ct::FileExists(path)) GTEST_SKIP() << "binary not built: " << path;
  }
  ct::TempDir dir("cohort-curve-it");
  for (const auto& [sub, name] : std::vector<std::pair<std::string, std::string>>{
           {"server", "coordinator"}, {"alice", "client"}, {"mallory", "client"}}) {
    auto r = ct::RunProcess(CliBin(), {"keygen", "--dir", dir.Join(sub), "--name", name});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::filesystem::create_directories(dir.Join("clients"));
  std::filesystem::create_directories(dir.Join("agents"));
  std::filesystem::copy_file(dir.Join("alice/client.pub"), dir.Join("clients/alice.pub"));

  std::string endpoint = "tcp://127.0.0.1:" + std::to_string(ct::PickFreePort());
  ct::DaemonProcess coordinator(
      CoordinatorBin(),
      {"--client-endpoint", endpoint, "--agent-endpoint",
       "tcp://127.0.0.1:" + std::to_string(ct::PickFreePort()), "--state-dir", dir.Join("state"),
       "--key-file", dir.Join("server/coordinator.key"), "--client-keys", dir.Join("clients"),
       "--agent-keys", dir.Join("agents")},
      dir.Join("coordinator.log"));
  ASSERT_TRUE(coordinator.Start());

  ClientOptions options;
  options.endpoint = endpoint;
  options.timeout = 300ms;
  options.key_file = dir.Join("alice/client.key");
  options.server_key_file = dir.Join("server/coordinator.pub");
  auto client = CoordinatorClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE(ct::WaitUntil([&] { return !coordinator.running() || client->ListJobs().ok(); }, 15s))
      << coordinator.Log();
  ASSERT_TRUE(coordinator.running()) << coordinator.Log();

  auto alice =
      ct::RunProcess(CliBin(), {"--coordinator", endpoint, "--key", dir.Join("alice/client.key"),
                                "--server-key", dir.Join("server/coordinator.pub"), "list"});
  EXPECT_EQ(alice.exit_code, 0) << alice.out << alice.err;
  EXPECT_NE(alice.out.find("No jobs."), std::string::npos) << alice.out;

  auto mallory = ct::RunProcess(
      CliBin(), {"--coordinator", endpoint, "--key", dir.Join("mallory/client.key"), "--server-key",
                 dir.Join("server/coordinator.pub"), "--timeout", "1s", "list"});
  EXPECT_EQ(mallory.exit_code, 4) << mallory.out << mallory.err;
  EXPECT_NE(mallory.err.find(endpoint), std::string::npos) << mallory.err;
  EXPECT_NE(mallory.err.find("refused this key (not listed)"), std::string::npos) << mallory.err;

  // A plaintext client gets nothing from a CURVE endpoint either.
  auto plain = ct::RunProcess(CliBin(),
                              {"--insecure", "--coordinator", endpoint, "--timeout", "1s", "list"});
  EXPECT_EQ(plain.exit_code, 3) << plain.err;
  EXPECT_TRUE(coordinator.running());
  coordinator.Stop();
}

}  // namespace
}  // namespace cohort
