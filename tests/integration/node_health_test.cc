// A node's health check in a real cluster: a coordinator and two agents on loopback, one running
// --health-check (a shell script that fails while a marker file holds a reason, as a GPU check
// does after an XID error), a replica there that crashes with exit 1 as a trainer does when its
// GPU falls off the bus, and the cohort CLI as a process. And a GPU's own health as NVML tells
// it, its counters and its Xid events, through the stand-in NVML (tests/agent/fake_nvml.cc: this
// machine has no NVIDIA driver) that the agent loads as libnvidia-ml.so.1 by LD_LIBRARY_PATH.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sched.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
namespace ct = ::cohort::testing;

class NodeHealthTest : public ct::ClusterTest {
 protected:
  void SetUp() override {
    if (!NeedBinaries({COHORT_CLI_BIN})) return;
    // Jobs of the queue notebooks fail when their GPUs sit idle for 6 s.
    ct::ClusterOptions options;
    options.coordinator_args = {"--queue", "notebooks gpu-idle-limit=6s"};
    ASSERT_NO_FATAL_FAILURE(StartCoordinator(std::move(options)));
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

  // Submits job "train": one chief of 1 GPU running `trainer`, two restarts allowed; returns once
  // it runs.
  void SubmitTrainer(CoordinatorClient& client, const std::string& trainer) {
    ASSERT_TRUE(client
                    .Submit("name: train\nworker_pools:\n  - role: chief\n    resources: {gpus: "
                            "1, cpus: 1}\n    process: {command: [" +
                            trainer + "]}\nscheduling: {max_restarts: 2}\n")
                    .ok());
    ASSERT_TRUE(ct::WaitForJobState(client, "train", wire::JobState::RUNNING, 20s));
  }

  // Submits job `name`, one chief of 1 GPU running /bin/true, and returns it once it has ended.
  static wire::JobInfoT RunOneGpuJob(CoordinatorClient& client, const std::string& name) {
    EXPECT_TRUE(client
                    .Submit("name: " + name +
                            "\nworker_pools:\n  - role: chief\n    resources: {gpus: 1, cpus: "
                            "1}\n    process: {command: [/bin/true]}\n")
                    .ok());
    return ct::WaitForJobEnd(client, name, 30s);
  }

  // Expects an event of `job` to say that `fault` caused its one restart of chief-0 ("restart 1/2:
  // chief-0 as attempt 1 because chief-0 attempt 0 exited with code 1 (...) <fault>"); returns
  // that event ("" when none names `fault`).
  static std::string ExpectFirstRestartFor(const wire::JobInfoT& job, const std::string& fault) {
    std::string event;
    for (const auto& e : job.events) {
      if (e && e->message.find(fault) != std::string::npos) event = e->message;
    }
    EXPECT_EQ(event.rfind("restart 1/2: chief-0 as attempt 1 because chief-0 attempt 0 exited "
                          "with code 1 (",
                          0),
              0u)
        << "no restart event names the fault (" << fault << "): " << event;
    return event;
  }

  // Starts an agent whose NVML is the stand-in, reading `gpus_file`, written with `gpus_text`
  // first; it declares `gpus` GPUs (-1: it offers those NVML finds).
  void StartAgentWithFakeNvml(const std::string& node, const std::string& gpus_file,
                              const std::string& gpus_text = "uuid=GPU-0\nuuid=GPU-1\n",
                              int gpus = 2) {
    ct::WriteFile(gpus_file, gpus_text);
    ct::AgentOptions agent{node, gpus};
    agent.wrapper = {
        "/usr/bin/env",
        "LD_LIBRARY_PATH=" + std::filesystem::path(COHORT_FAKE_NVML_LIB).parent_path().string(),
        "COHORT_FAKE_NVML=" + gpus_file};
    ASSERT_EQ(cluster_->StartAgent(agent), "");
  }

  // Runs job "train" (SubmitTrainer) on a node of StartAgentWithFakeNvml: its first attempt waits
  // for the test's go, then plays a GPU's failure (`fault`: shell lines, $CUDA_VISIBLE_DEVICES
  // naming its GPU) and ends as they say; a later attempt exits 0. Expects the job to succeed
  // after one restart on the other GPU; returns the GPU of the failure (-1: it ran on none).
  int RunThroughGpuFault(CoordinatorClient& client, const std::string& fault,
                         wire::JobInfoT* done) {
    const std::string go = cluster_->scratch("gpu-fault-go");
    const std::string trainer = cluster_->scratch("gpu_fault_train.sh");
    ct::WriteFile(trainer,
                  "#!/bin/sh\nif [ \"$COHORT_RESTART_COUNT\" = 0 ]; then\n  while [ ! -e " + go +
                      " ]; do sleep 0.05; done\n" + fault +
                      "fi\necho \"done on GPU $CUDA_VISIBLE_DEVICES\"\n",
                  /*executable=*/true);
    SubmitTrainer(client, trainer);
    const auto running = client.GetJob("train");
    if (!running.ok() || running->replicas.size() != 1 || running->replicas[0]->gpus.size() != 1) {
      ADD_FAILURE() << "train runs on no one GPU";
      return -1;
    }
    const int bad = running->replicas[0]->gpus[0];
    ct::WriteFile(go, "");
    *done = ct::WaitForJobEnd(client, "train", 60s);
    EXPECT_EQ(done->state, wire::JobState::SUCCEEDED) << done->message;
    EXPECT_EQ(done->restarts, 1);
    EXPECT_TRUE(!done->replicas.empty() && done->replicas[0]->gpus == std::vector<int>{1 - bad});
    return bad;
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
  ASSERT_NO_FATAL_FAILURE(SubmitTrainer(client, trainer));
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
  const std::string event = ExpectFirstRestartFor(done, fault);
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
  const wire::JobInfoT after = RunOneGpuJob(client, "after");
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

// One GPU of a two-GPU node meets an uncorrectable ECC error under a replica, which dies of it:
// the replica starts again on the other GPU, the node keeps taking work on its fit GPU, and a job
// that needs both waits until the GPU is fit again.
// The CPUs this test may run on, ascending.
std::vector<int> OwnCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// A node of 4 GPUs on two NUMA nodes, as NVML names them: 0 and 1 near one CPU, 2 and 3 near
// another. A replica of 2 GPUs gets two of one NUMA node, though the lowest free would straddle
// both, and runs on the CPU near them; `cohort nodes --json` says where each GPU sits.
TEST_F(NodeHealthTest, AReplicasGpusShareANumaNodeAndItRunsOnTheCpusNearThem) {
  const std::vector<int> cpus = OwnCpus();
  if (cpus.size() < 2) {
    GTEST_SKIP() << "this test runs on " << cpus.size()
                 << " CPU: two are needed to tell the two NUMA nodes' CPUs apart";
  }
  const std::string near0 = std::to_string(cpus[0]), near1 = std::to_string(cpus[1]);
  const std::string node = UniqueNodeId("numa");
  const std::string gpus_file = cluster_->scratch("nvml-numa-gpus");
  ASSERT_NO_FATAL_FAILURE(StartAgentWithFakeNvml(
      node, gpus_file,
      "uuid=GPU-0 numa=0 cpus=" + near0 + "\nuuid=GPU-1 numa=0 cpus=" + near0 +
          "\nuuid=GPU-2 numa=1 cpus=" + near1 + "\nuuid=GPU-3 numa=1 cpus=" + near1 + "\n",
      -1));

  const ct::RunResult listed = RunCli({"nodes", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const nlohmann::json json = nlohmann::json::parse(listed.out, nullptr, false);
  ASSERT_TRUE(json.is_array() && json.size() == 1 && json[0]["gpus"].size() == 4) << listed.out;
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(json[0]["gpus"][g]["numa_node"], g < 2 ? 0 : 1) << listed.out;
  }

  // GPU 0 held: GPUs 1, 2, 3 are free, and lowest first would give the pair 1 and 2.
  auto client = cluster_->Client();
  ASSERT_TRUE(client
                  .Submit("name: holder\nworker_pools:\n  - role: chief\n    resources: {gpus: "
                          "1, cpus: 1}\n    process: {command: [sleep, '600']}\n")
                  .ok());
  ASSERT_TRUE(ct::WaitForJobState(client, "holder", wire::JobState::RUNNING, 20s));
  EXPECT_EQ(client.GetJob("holder")->replicas[0]->gpus, std::vector<int>{0});
  // Runs job `name`, one chief of `gpus` GPUs and `cpus` CPUs that prints the CPUs it may run on;
  // returns its GPUs and output once it has ended.
  const auto run = [&](const std::string& name, int gpus, int cpus) {
    EXPECT_TRUE(client
                    .Submit("name: " + name +
                            "\nworker_pools:\n  - role: chief\n    resources: {gpus: " +
                            std::to_string(gpus) + ", cpus: " + std::to_string(cpus) +
                            "}\n    process: {command: [grep, Cpus_allowed_list, "
                            "/proc/self/status]}\n")
                    .ok());
    const wire::JobInfoT done = ct::WaitForJobEnd(client, name, 30s);
    EXPECT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
    const std::vector<int> pinned =
        done.replicas.empty() ? std::vector<int>{} : done.replicas[0]->gpus;
    return std::make_pair(pinned, RunCli({"logs", name}).out);
  };
  const auto [pair_gpus, pair_log] = run("pair", 2, 1);
  EXPECT_EQ(pair_gpus, (std::vector<int>{2, 3}));
  EXPECT_NE(pair_log.find("Cpus_allowed_list:\t" + near1 + "\n"), std::string::npos) << pair_log;
  // The holder's GPU is near the other CPU.
  const auto [one_gpus, one_log] = run("one", 1, 1);
  EXPECT_EQ(one_gpus, std::vector<int>{1});
  EXPECT_NE(one_log.find("Cpus_allowed_list:\t" + near0 + "\n"), std::string::npos) << one_log;
  // A replica that asks for more CPUs than are near its GPUs runs wherever the agent may.
  const auto [wide_gpus, wide_log] = run("wide", 1, 2);
  EXPECT_EQ(wide_gpus, std::vector<int>{1});
  EXPECT_EQ(wide_log.find("Cpus_allowed_list:\t" + near0 + "\n"), std::string::npos) << wide_log;
  EXPECT_EQ(wide_log.find("Cpus_allowed_list:\t" + near1 + "\n"), std::string::npos) << wide_log;
  EXPECT_NE(wide_log.find("Cpus_allowed_list:\t"), std::string::npos) << wide_log;
  ASSERT_TRUE(client.Cancel("holder").ok());
}

// A node whose two GPUs are each partitioned into two MIG devices of one profile offers the
// four MIG devices as its GPUs, labelled as GPU feature discovery's single strategy labels them;
// a replica pinned to one sees it by its UUID, so CUDA runs it on that slice. An Xid of a GPU
// kills the replicas on its MIG devices, not those on the other GPU's.
TEST_F(NodeHealthTest, EveryGpuPartitionedAlikeOffersItsMigDevicesAsGpus) {
  const std::string node = UniqueNodeId("mig");
  const std::string gpus_file = cluster_->scratch("nvml-mig-gpus");
  ASSERT_NO_FATAL_FAILURE(StartAgentWithFakeNvml(
      node, gpus_file,
      "model=NVIDIA_H100_80GB_HBM3 mig=1 mig_devices=1g.10gb:9984,1g.10gb:9984\n"
      "model=NVIDIA_H100_80GB_HBM3 mig=1 mig_devices=1g.10gb:9984,1g.10gb:9984\n",
      -1));
  const wire::NodeInfoT info = NodeInfo(node);
  ASSERT_EQ(info.gpus.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(info.gpus[i]->model, "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
    EXPECT_EQ(info.gpus[i]->uuid,
              "MIG-fake-" + std::to_string(i / 2) + "-" + std::to_string(i % 2));
    EXPECT_EQ(info.gpus[i]->memory_mb, 9984);
  }
  EXPECT_NE(info.labels.find("nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"),
            std::string::npos)
      << info.labels;
  EXPECT_NE(info.labels.find("nvidia.com/mig.strategy=single"), std::string::npos) << info.labels;
  EXPECT_EQ(info.labels.find("gke-accelerator"), std::string::npos) << info.labels;
  EXPECT_TRUE(info.unhealthy.empty()) << info.unhealthy;

  // Three replicas on three slices, each seeing its own by its UUID, each local rank 0 (a
  // process sees one MIG device, so each is a torchrun node of its own).
  auto client = cluster_->Client();
  const std::string pool = R"(resources: {gpus: 1, cpus: 0}
    process: {command: [sh, -c, 'echo "on $CUDA_VISIBLE_DEVICES local $LOCAL_RANK"; sleep 600']})";
  ASSERT_TRUE(client
                  .Submit("name: slices\nworker_pools:\n  - role: chief\n    " + pool +
                          "\n  - role: worker\n    replicas: 2\n    " + pool + "\n")
                  .ok());
  ASSERT_TRUE(ct::WaitForJobState(client, "slices", wire::JobState::RUNNING, 20s));
  std::map<std::string, int> gpu_of;
  const auto running = client.GetJob("slices");
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  for (const auto& r : running->replicas) {
    ASSERT_EQ(r->gpus.size(), 1u);
    gpu_of[r->replica] = r->gpus[0];
  }
  ASSERT_EQ(gpu_of.size(), 3u);
  int on_second_gpu = -1;
  for (const auto& [replica, gpu] : gpu_of) {
    if (gpu >= 2) on_second_gpu = gpu;
    const std::string uuid = "MIG-fake-" + std::to_string(gpu / 2) + "-" + std::to_string(gpu % 2);
    EXPECT_TRUE(ct::WaitUntil(
        [&] {
          return RunCli({"logs", "slices", "--replica", replica})
                     .out.find("on " + uuid + " local 0\n") != std::string::npos;
        },
        20s))
        << replica << " on GPU " << gpu << ": "
        << RunCli({"logs", "slices", "--replica", replica}).out;
  }
  ASSERT_GE(on_second_gpu, 2) << "three slices of four leave at least one on the second GPU";

  // The second GPU falls off the bus: both its MIG devices are unfit, and the replica on one of
  // them is killed, naming its GPU.
  std::ofstream(gpus_file + ".xids", std::ios::app) << "1 79\n";
  const auto unfit = [&] {
    std::vector<int> indices;
    for (const auto& g : NodeInfo(node).unhealthy_gpus) indices.push_back(g->index);
    return indices;
  };
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        return unfit() == std::vector<int>{2, 3};
      },
      20s))
      << ::testing::PrintToString(unfit());
  const std::string killed = "killed by its agent: its MIG device " +
                             std::to_string(on_second_gpu) +
                             " (of GPU 1) reported Xid 79 (GPU has fallen off the bus) at ";
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        const auto job = client.GetJob("slices");
        if (!job.ok()) return false;
        for (const auto& e : job->events) {
          if (e && e->message.find(killed) != std::string::npos) return true;
        }
        return false;
      },
      20s))
      << RunCli({"status", "slices"}).out;
  ASSERT_TRUE(client.Cancel("slices").ok());
}

// A node of H100s as NVML names them carries GKE's label of the kind, so that a Vertex job file
// asking for NVIDIA_H100_80GB could go there; one asking for A100s, which no node has, is
// refused at submit, naming the label.
TEST_F(NodeHealthTest, AVertexJobsAcceleratorTypeAsksForNodesOfThatKind) {
  const std::string node = UniqueNodeId("h100");
  const std::string gpus_file = cluster_->scratch("nvml-h100-gpus");
  ASSERT_NO_FATAL_FAILURE(StartAgentWithFakeNvml(node, gpus_file,
                                                 "model=NVIDIA_H100_80GB_HBM3 memory_mib=81559\n"
                                                 "model=NVIDIA_H100_80GB_HBM3 memory_mib=81559\n",
                                                 -1));
  const std::string labels = NodeInfo(node).labels;
  EXPECT_NE(labels.find("cloud.google.com/gke-accelerator=nvidia-h100-80gb"), std::string::npos)
      << labels;

  const auto vertex = [&](const std::string& type) {
    const std::string file = cluster_->scratch("vertex-" + type + ".yaml");
    ct::WriteFile(file,
                  "workerPoolSpecs:\n  - machineSpec: {machineType: a3-highgpu-2g, "
                  "acceleratorType: " +
                      type +
                      ", acceleratorCount: 2}\n    replicaCount: 1\n    containerSpec: "
                      "{imageUri: /srv/images/trainer}\n");
    return file;
  };
  const ct::RunResult h100 = RunCli({"submit", vertex("NVIDIA_H100_80GB"), "--dry-run"});
  EXPECT_EQ(h100.exit_code, 0) << h100.out << h100.err;
  EXPECT_NE(h100.err.find("acceleratorType: only nodes labelled "
                          "cloud.google.com/gke-accelerator=nvidia-h100-80gb"),
            std::string::npos)
      << h100.err;
  EXPECT_NE(h100.out.find(node), std::string::npos) << h100.out;
  // Past the coordinator's registration grace (its heartbeat timeout) the submit check judges.
  const std::string a100 = vertex("NVIDIA_TESLA_A100");
  ct::RunResult refused;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        refused = RunCli({"submit", a100, "--dry-run"});
        return refused.exit_code != 0;
      },
      20s, 250ms))
      << refused.out;
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("chief pool needs a node with labels "
                             "cloud.google.com/gke-accelerator=nvidia-tesla-a100"),
            std::string::npos)
      << refused.err;
}

TEST_F(NodeHealthTest, AGpuNvmlFindsUnfitTakesNoWorkAndAFailureOnItRestartsOnAnother) {
  const std::string node = UniqueNodeId("gpus");
  const std::string gpus_file = cluster_->scratch("nvml-gpus");
  ASSERT_NO_FATAL_FAILURE(StartAgentWithFakeNvml(node, gpus_file));
  // On its first attempt the trainer's GPU memory fails: the driver counts an uncorrectable
  // error, and the CUDA process that met it dies.
  auto client = cluster_->Client();
  wire::JobInfoT done;
  const int bad = RunThroughGpuFault(
      client,
      "  if [ \"$CUDA_VISIBLE_DEVICES\" = 0 ]; then\n    printf "
      "'uuid=GPU-0 ecc=1 remap=pending\\nuuid=GPU-1\\n' > " +
          gpus_file + "\n  else\n    printf 'uuid=GPU-0\\nuuid=GPU-1 ecc=1 remap=pending\\n' > " +
          gpus_file +
          "\n  fi\n  echo 'RuntimeError: CUDA error: uncorrectable ECC error encountered' >&2\n  "
          "exit 1\n",
      &done);
  ASSERT_GE(bad, 0);
  ASSERT_EQ(done.replicas.size(), 1u);
  const int good = 1 - bad;
  EXPECT_EQ(done.replicas[0]->node_id, node);
  const std::string why =
      "1 uncorrectable ECC error since the driver loaded (it needs a reset); a row remapping is "
      "pending (it needs a reset)";
  const std::string fault =
      "on GPU " + std::to_string(bad) + " of node " + node + ", which NVML finds unfit: " + why;
  ExpectFirstRestartFor(done, fault);

  // The node stays READY; `cohort nodes` names the GPU, as --json and the agent's /metrics do.
  const wire::NodeInfoT info = NodeInfo(node);
  EXPECT_EQ(info.state, "READY");
  ASSERT_EQ(info.unhealthy_gpus.size(), 1u);
  EXPECT_EQ(info.unhealthy_gpus[0]->index, bad);
  EXPECT_EQ(info.unhealthy_gpus[0]->reason, why);
  const ct::RunResult nodes = RunCli({"nodes"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_NE(nodes.out.find("0/2 declared (1 unfit)"), std::string::npos) << nodes.out;
  EXPECT_NE(nodes.out.find(node + " GPU " + std::to_string(bad) + " is unfit: " + why),
            std::string::npos)
      << nodes.out;
  const ct::RunResult listed = RunCli({"nodes", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const nlohmann::json json = nlohmann::json::parse(listed.out, nullptr, false);
  ASSERT_TRUE(json.is_array() && json.size() == 1) << listed.out;
  EXPECT_EQ(json[0]["unhealthy_gpus"], nlohmann::json::parse("[{\"index\": " + std::to_string(bad) +
                                                             ", \"reason\": \"" + why + "\"}]"))
      << listed.out;
  const std::string unfit = "cohort_gpu_healthy{node=\"" + node + "\",gpu=\"" +
                            std::to_string(bad) + "\",uuid=\"GPU-" + std::to_string(bad);
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        const std::string metrics = AgentMetrics(node);
        const size_t at = metrics.find(unfit);
        return at != std::string::npos && metrics.find("} 0\n", at) == metrics.find('}', at);
      },
      5s))
      << AgentMetrics(node);

  // A one-GPU job goes to the fit GPU; one that needs both would wait.
  const wire::JobInfoT small = RunOneGpuJob(client, "small");
  ASSERT_EQ(small.state, wire::JobState::SUCCEEDED) << small.message;
  EXPECT_EQ(small.replicas[0]->gpus, std::vector<int>{good});
  const std::string both =
      "name: both\nworker_pools:\n  - role: chief\n    resources: {gpus: 2, cpus: 1}\n    "
      "process: {command: [/bin/true]}\n";
  auto plan = client.DryRun(both);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_NE(plan->dry_run, nullptr);
  EXPECT_EQ(plan->dry_run->outcome, wire::DryRunOutcome::WAIT) << plan->dry_run->reason;
  EXPECT_NE(plan->dry_run->reason.find("none fits now (1 GPU is unfit: cohort nodes says which)"),
            std::string::npos)
      << plan->dry_run->reason;

  // Reset: the GPU is fit again, and the job that needs both runs.
  ct::WriteFile(gpus_file, "uuid=GPU-0\nuuid=GPU-1\n");
  EXPECT_TRUE(ct::WaitUntil([&] { return NodeInfo(node).unhealthy_gpus.empty(); }, 20s, 200ms));
  ASSERT_TRUE(client.Submit(both).ok());
  const wire::JobInfoT ran = ct::WaitForJobEnd(client, "both", 30s);
  ASSERT_EQ(ran.state, wire::JobState::SUCCEEDED) << ran.message;
}

// The driver reports Xid 48 (a double-bit ECC error) on a running replica's GPU, and the replica
// dies of it a moment later (exit 1): no counter says so here, yet the replica restarts on the
// other GPU, this one takes no work, and only the agent's reload (SIGHUP, systemctl reload, once
// the admin reset the GPU) puts it back.
TEST_F(NodeHealthTest, AGpuThatReportsAnXidIsOutOfServiceUntilTheAgentIsReloaded) {
  const std::string node = UniqueNodeId("xid");
  const std::string gpus_file = cluster_->scratch("nvml-xid-gpus");
  ASSERT_NO_FATAL_FAILURE(StartAgentWithFakeNvml(node, gpus_file));
  auto client = cluster_->Client();
  wire::JobInfoT done;
  const int bad = RunThroughGpuFault(
      client,
      "  echo \"$CUDA_VISIBLE_DEVICES 48\" >> " + gpus_file +
          ".xids\n  echo 'RuntimeError: CUDA error: uncorrectable ECC error encountered' >&2\n  "
          "exit 1\n",
      &done);
  ASSERT_GE(bad, 0);
  const int good = 1 - bad;
  const std::string xid = "Xid 48 (double-bit ECC error) at ";
  ExpectFirstRestartFor(done, "on GPU " + std::to_string(bad) + " of node " + node +
                                  ", which NVML finds unfit: " + xid);

  // It stays out of service: a one-GPU job goes to the other.
  const wire::JobInfoT small = RunOneGpuJob(client, "small");
  ASSERT_EQ(small.state, wire::JobState::SUCCEEDED) << small.message;
  EXPECT_EQ(small.replicas[0]->gpus, std::vector<int>{good});
  const wire::NodeInfoT info = NodeInfo(node);
  ASSERT_EQ(info.unhealthy_gpus.size(), 1u);
  EXPECT_EQ(info.unhealthy_gpus[0]->index, bad);
  const std::string& reason = info.unhealthy_gpus[0]->reason;
  EXPECT_EQ(reason.rfind(xid, 0), 0u) << reason;
  EXPECT_NE(reason.find(" UTC (it needs a reset, then a reload of the agent)"), std::string::npos)
      << reason;

  cluster_->agent(node).Signal(SIGHUP);
  EXPECT_TRUE(ct::WaitUntil([&] { return NodeInfo(node).unhealthy_gpus.empty(); }, 10s, 100ms))
      << cluster_->Logs();
  EXPECT_EQ(NodeInfo(node).state, "READY");
}

// Xid 79: the GPU fell off the bus, and the replica on it hangs in the driver instead of dying.
// Its agent kills it at once, and the job restarts on the other GPU, spending one restart,
// instead of hanging until a watchdog's timeout.
TEST_F(NodeHealthTest, AReplicaOnAGpuThatFellOffTheBusIsKilledAndRestartsElsewhere) {
  const std::string node = UniqueNodeId("xid79");
  const std::string gpus_file = cluster_->scratch("nvml-xid79-gpus");
  ASSERT_NO_FATAL_FAILURE(StartAgentWithFakeNvml(node, gpus_file));
  auto client = cluster_->Client();
  wire::JobInfoT done;
  const int bad = RunThroughGpuFault(
      client, "  echo \"$CUDA_VISIBLE_DEVICES 79\" >> " + gpus_file + ".xids\n  exec sleep 600\n",
      &done);
  ASSERT_GE(bad, 0);
  std::string restart;
  for (const auto& e : done.events) {
    if (e && e->message.rfind("restart 1/2: ", 0) == 0) restart = e->message;
  }
  EXPECT_NE(restart.find("killed by its agent: its GPU " + std::to_string(bad) +
                         " reported Xid 79 (GPU has fallen off the bus) at "),
            std::string::npos)
      << restart;
  const wire::NodeInfoT info = NodeInfo(node);
  ASSERT_EQ(info.unhealthy_gpus.size(), 1u);
  EXPECT_EQ(info.unhealthy_gpus[0]->index, bad);
  const std::string counted = "cohort_gpu_xid_errors_total{node=\"" + node + "\",gpu=\"" +
                              std::to_string(bad) + "\",xid=\"79\"} 1\n";
  EXPECT_TRUE(
      ct::WaitUntil([&] { return AgentMetrics(node).find(counted) != std::string::npos; }, 5s))
      << AgentMetrics(node);
}

// scheduling.progress: gpus through real agents and the stand-in NVML: a job whose GPU is in use
// runs past its hang_timeout; once NVML samples it at 0% for that long, it is hung, and with
// hang_action: fail it ends FAILED saying so (a notebook holding a GPU it no longer uses). Then
// the same of a job that asks nothing of the kind, by its queue's gpu-idle-limit.
TEST_F(NodeHealthTest, AJobWhoseGpuSitsIdleFailsByItsHangTimeoutOrItsQueuesLimit) {
  const std::string node = UniqueNodeId("idle");
  const std::string gpus_file = cluster_->scratch("nvml-idle-gpus");
  ASSERT_NO_FATAL_FAILURE(StartAgentWithFakeNvml(node, gpus_file));
  ct::WriteFile(gpus_file, "uuid=GPU-0 util=60\nuuid=GPU-1 util=60\n");
  auto client = cluster_->Client();
  ASSERT_TRUE(client
                  .Submit("name: notebook\nworker_pools:\n  - role: chief\n    resources: {gpus: "
                          "1, cpus: 1}\n    process: {command: [sleep, '600']}\nscheduling: "
                          "{hang_timeout: 6s, progress: gpus, hang_action: fail}\n")
                  .ok());
  auto utilization = [&]() -> double {
    auto job = client.GetJob("notebook");
    if (!job.ok() || job->replicas.empty() || !job->replicas[0]->usage ||
        job->replicas[0]->usage->gpus.empty()) {
      return -1;
    }
    return job->replicas[0]->usage->gpus[0]->utilization;
  };
  ASSERT_TRUE(ct::WaitUntil([&] { return utilization() == 60; }, 30s, 100ms)) << cluster_->Logs();
  std::this_thread::sleep_for(8s);  // past its hang_timeout, its GPU in use
  EXPECT_EQ(client.GetJob("notebook")->state, wire::JobState::RUNNING);

  ct::WriteFile(gpus_file, "uuid=GPU-0 util=0\nuuid=GPU-1 util=0\n");
  const wire::JobInfoT done = ct::WaitForJobEnd(client, "notebook", 60s);
  EXPECT_EQ(done.state, wire::JobState::FAILED) << done.message;
  std::string hang;
  for (const auto& e : done.events) {
    if (e && e->message.rfind("hang: ", 0) == 0) hang = e->message;
  }
  EXPECT_EQ(hang.rfind("hang: no replica has used its GPUs for ", 0), 0u) << hang;
  EXPECT_NE(hang.find(" (progress: gpus; every GPU below 1%): chief-0"), std::string::npos) << hang;

  ASSERT_TRUE(client
                  .Submit("name: lab\nworker_pools:\n  - role: chief\n    resources: {gpus: 1, "
                          "cpus: 1}\n    process: {command: [sleep, '600']}\nscheduling: {queue: "
                          "notebooks}\n")
                  .ok());
  const wire::JobInfoT idle = ct::WaitForJobEnd(client, "lab", 60s);
  EXPECT_EQ(idle.state, wire::JobState::FAILED);
  EXPECT_EQ(idle.message, "its GPUs sat idle for 6s (queue notebooks: gpu-idle-limit=6s)");
  EXPECT_EQ(idle.restarts, 0);
  // /metrics counts both verdicts: the notebook's own (hang_action: fail) and the queue's.
  httplib::Client http("127.0.0.1", cluster_->coordinator_http_port());
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto r = http.Get("/metrics");
        return r && r->body.find("cohort_hangs_total{outcome=\"gpu_idle_limit\"} 1\n") !=
                        std::string::npos;
      },
      5s, 100ms));
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("cohort_hangs_total{outcome=\"fail\"} 1\n"), std::string::npos)
      << metrics->body;
  // `cohort queues` says so; --json has it.
  auto queues = RunCli({"queues"});
  EXPECT_NE(
      queues.out.find("notebooks: a job whose GPUs all sit idle for 6s fails (gpu-idle-limit)"),
      std::string::npos)
      << queues.out << queues.err;
  auto listed = RunCli({"queues", "--json"});
  bool found = false;
  for (const auto& q : nlohmann::json::parse(listed.out, nullptr, false)) {
    if (q.value("name", "") != "notebooks") continue;
    found = true;
    EXPECT_EQ(q.value("gpu_idle_limit_ms", 0), 6000) << q;
  }
  EXPECT_TRUE(found) << listed.out;
}

}  // namespace
}  // namespace cohort
