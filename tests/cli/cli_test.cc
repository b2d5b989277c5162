// In-process tests of the `cohort` CLI (cli/cli.h): RunCli with string streams, so each verb's
// output and exit code are checked without starting the binary. Verbs that need a coordinator run
// against a real cohort-coordinator process (tests/testing/local_cluster.h); that test skips,
// saying why, when the coordinator is not built.
#include "cli/cli.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/output.h"
#include "common/build_version.h"
#include "common/checkpoint.h"
#include "common/curve_keys.h"
#include "common/job_spec.h"
#include "common/version.h"
#include "tests/testing/binaries.h"
#include "tests/testing/checkpoint_bytes.h"
#include "tests/testing/local_cluster.h"
#include "tests/testing/process.h"
#include "tests/testing/scoped_env.h"

namespace cohort::cli {
namespace {

namespace ct = ::cohort::testing;
using ct::ScopedEnv;
using nlohmann::json;

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CliResult RunCohort(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  CliResult result;
  result.exit_code = RunCli(args, out, err);
  result.out = out.str();
  result.err = err.str();
  return result;
}

const std::vector<std::string> kVerbs = {
    "submit",  "status", "list",       "top",    "logs",  "exec",   "stacks",   "watch", "cancel",
    "suspend", "resume", "update",     "delete", "nodes", "cordon", "uncordon", "drain", "label",
    "forget",  "queues", "checkpoint", "keygen", "tune",  "trials", "studies"};

TEST(CliTest, HelpListsEveryVerbInOrderAndEachVerbHasItsOwnUsage) {
  CliResult help = RunCohort({"--help"});
  ASSERT_EQ(help.exit_code, kExitOk) << help.err;
  EXPECT_EQ(help.out.rfind("usage: cohort [--coordinator", 0), 0u) << help.out;
  size_t previous = 0;
  for (const std::string& verb : kVerbs) {
    const size_t at = help.out.find("\n  " + verb + " ");
    ASSERT_NE(at, std::string::npos) << verb << " missing from:\n" << help.out;
    EXPECT_GT(at, previous) << verb << " out of order";
    previous = at;

    CliResult own = RunCohort({verb, "--help"});
    EXPECT_EQ(own.exit_code, kExitOk) << verb;
    EXPECT_EQ(own.out.rfind("usage: cohort " + verb, 0), 0u) << own.out;
    EXPECT_EQ(RunCohort({"help", verb}).out, own.out) << verb;
    EXPECT_EQ(RunCohort({verb, "-h"}).out, own.out) << verb;
  }
  // A synopsis too long for its column puts the description on the next line, aligned; one
  // wider than 100 columns goes on below its verb, broken between its [...] groups.
  EXPECT_NE(help.out.find("  logs JOB [--replica ROLE-INDEX|--all] [--attempt N] [--tail N] "
                          "[--since T] [--timestamps]\n       [--follow] [--dump]\n" +
                          std::string(30, ' ') + "a replica's output"),
            std::string::npos)
      << help.out;
  EXPECT_NE(help.out.find("\n         [--label K=V]... [--wait [--replica R|--all] | --dry-run "
                          "[--json]]"),
            std::string::npos)
      << help.out;
  std::istringstream lines(help.out);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 100u) << line;
  }
  EXPECT_EQ(RunCohort({"help"}).out, help.out);
  EXPECT_EQ(RunCohort({"help", "nosuch"}).out, help.out);
  // The exact build: the project version, then the commit where built from a git checkout.
  const std::string version = RunCohort({"--version"}).out;
  EXPECT_EQ(version, "cohort " + std::string(CohortBuildVersion()) + "\n");
  EXPECT_TRUE(std::regex_match(version, std::regex("cohort " + std::string(COHORT_VERSION) +
                                                   "(\\+g[0-9a-f]{12}(\\.dirty)?)?\n")))
      << version;
}

// A mistyped verb or flag is a usage error (exit 2) that names what was probably meant.
TEST(CliTest, AMistypedVerbOrFlagNamesTheOneMeant) {
  CliResult verb = RunCohort({"sumbit", "job.yaml"});
  EXPECT_EQ(verb.exit_code, kExitUsage);
  EXPECT_EQ(verb.err.rfind("cohort: unknown verb 'sumbit' (did you mean 'submit'?)\n", 0), 0u)
      << verb.err;
  CliResult flag = RunCohort({"submit", "job.yaml", "--wiat"});
  EXPECT_EQ(flag.exit_code, kExitUsage);
  EXPECT_EQ(flag.err.rfind("cohort: unknown option --wiat (did you mean '--wait'?)\n", 0), 0u)
      << flag.err;
  CliResult far = RunCohort({"status", "j", "--colour"});
  EXPECT_EQ(far.err.rfind("cohort: unknown option --colour\n", 0), 0u) << far.err;
}

// What a running replica uses, as `cohort top`, `status` and `watch` print it: what is not known
// is "-", never 0; a replica not reported yet is counted, not shown as idle.
TEST(CliTest, UsageCellsAndTopSayWhatIsKnown) {
  wire::ReplicaUsageT u;
  u.cpu_cores = 1.968;
  u.memory_bytes = 812LL << 20;
  for (int index : {0, 3}) {
    auto g = std::make_unique<wire::GpuUsageT>();
    g->index = index;
    g->utilization = index == 0 ? 97.4 : 12;
    g->memory_used_bytes = 31LL << 30;
    g->memory_total_bytes = 80LL << 30;
    u.gpus.push_back(std::move(g));
  }
  EXPECT_EQ(UsageCells(&u),
            (std::vector<std::string>{"1.97", "812M", "0: 97% 31G/80G, 3: 12% 31G/80G"}));
  EXPECT_EQ(UsageCells(&u, /*compact=*/true),
            (std::vector<std::string>{"1.97", "812M", "97% 12%"}));
  for (auto& g : u.gpus) g->utilization = 0;
  u.gpus_idle_ms = kIdleShownMs - 1;
  EXPECT_EQ(UsageCells(&u, true)[2], "0% 0%");
  u.gpus_idle_ms = 725'000;
  EXPECT_EQ(UsageCells(&u, true)[2], "0% 0% (idle 12m05s)");
  u.gpus[0]->utilization = 97.4;
  u.gpus[1]->utilization = 12;
  u.gpus_idle_ms = 0;
  wire::ReplicaUsageT unknown;  // no cgroup, no NVML, one sample so far
  EXPECT_EQ(UsageCells(&unknown), (std::vector<std::string>{"-", "-", "-"}));
  EXPECT_EQ(UsageCells(nullptr), (std::vector<std::string>{"-", "-", "-"}));

  wire::JobInfoT job;
  job.name = "train";
  for (const char* name : {"chief-0", "worker-0", "worker-1"}) {
    auto r = std::make_unique<wire::ReplicaInfoT>();
    r->replica = name;
    r->node_id = "gpu-1";
    r->state = std::string(name) == "worker-1" ? wire::ReplicaState::SUCCEEDED
                                               : wire::ReplicaState::RUNNING;
    if (std::string(name) == "chief-0") r->usage = std::make_unique<wire::ReplicaUsageT>(u);
    job.replicas.push_back(std::move(r));
  }
  std::vector<wire::JobInfoT> jobs;
  jobs.push_back(std::move(job));
  std::ostringstream top;
  PrintTop(jobs, top);
  EXPECT_NE(top.str().find("train  chief-0  gpu-1  1.97  812M    0: 97% 31G/80G"),
            std::string::npos)
      << top.str();
  EXPECT_EQ(top.str().find("worker-"), std::string::npos) << top.str();
  EXPECT_NE(top.str().find("1 running replica(s) not reported yet"), std::string::npos)
      << top.str();
  std::ostringstream none;
  PrintTop({}, none);
  EXPECT_EQ(none.str(), "No replica is running.\n");
}

// `cohort top --nodes`: a node of 4 GPUs, 3 held by 2 replicas (one reported: GPU 1 at 97%,
// GPU 2 held and not sampled), GPU 3 free; a node with nothing; a node whose replica has not
// reported.
// An array's dry run: each task that would wait says how many of the jobs queued before it are
// the array's own tasks, drafted before it.
TEST(CliTest, AnArraysDryRunNamesItsOwnTasksAmongThoseQueuedBeforeATask) {
  wire::SubmitJobReplyT reply;
  reply.name = "sw";
  for (uint32_t ahead : {0u, 1u, 3u}) {
    reply.tasks.push_back("sw-" + std::to_string(reply.tasks.size()));
    auto plan = std::make_unique<wire::DryRunPlanT>();
    plan->outcome = wire::DryRunOutcome::WAIT;
    plan->queue = "default";
    plan->queued_ahead = ahead;
    plan->reason = "none fits now";
    reply.task_dry_runs.push_back(std::move(plan));
  }
  reply.task_dry_runs[2]->queued_ahead = 2;  // only the two tasks before it
  std::ostringstream out;
  PrintArrayDryRun(reply, 5, out);
  EXPECT_EQ(out.str(),
            "dry run, nothing was submitted: array sw (5 tasks): of the 3 tasks it would let in at "
            "once,\n"
            "  sw-0 would wait in queue default: none fits now\n"
            "  sw-1 would wait in queue default (1 job queued before it: a task of this array): "
            "none fits now\n"
            "  sw-2 would wait in queue default (2 jobs queued before it: tasks of this array): "
            "none fits now\n"
            "the other 2 would wait for their turn (scheduling.array)\n");
  reply.task_dry_runs[2]->queued_ahead = 7;
  out.str("");
  PrintArrayDryRun(reply, 3, out);
  EXPECT_NE(out.str().find("  sw-2 would wait in queue default (7 jobs queued before it, 2 of them "
                           "this array's): none fits now\n"),
            std::string::npos)
      << out.str();
}

TEST(CliTest, NodeTopSaysWhatEachNodesReplicasUseBesideWhatTheyHold) {
  std::vector<wire::NodeInfoT> nodes(3);
  nodes[0].node_id = "gpu-1";
  nodes[0].state = "READY";
  nodes[0].cpus = 32;
  nodes[0].cpus_used = 8;
  nodes[0].memory_mb = 256 << 10;
  nodes[0].replicas = 2;
  for (int i = 0; i < 4; ++i) {
    auto g = std::make_unique<wire::GpuInfoT>();
    g->index = i;
    nodes[0].gpus.push_back(std::move(g));
  }
  nodes[0].gpus_used = {0, 1, 2};
  nodes[0].usage = std::make_unique<wire::NodeUsageT>();
  nodes[0].usage->cpu_cores = 6.5;
  nodes[0].usage->memory_bytes = 40LL << 30;
  nodes[0].usage->replicas = 1;
  for (auto [index, util] : {std::pair{0, 0.0}, std::pair{1, 97.4}}) {
    auto g = std::make_unique<wire::GpuUsageT>();
    g->index = index;
    g->utilization = util;
    nodes[0].usage->gpus.push_back(std::move(g));
  }
  EXPECT_EQ(NodeGpuCells(nodes[0]), "0:0% 1:97% 2:- 3:free");
  nodes[1].node_id = "cpu-1";
  nodes[1].state = "READY";
  nodes[1].cpus = 16;
  nodes[2].node_id = "gpu-2";
  nodes[2].state = "LOST";
  nodes[2].replicas = 1;
  std::ostringstream out;
  PrintNodeTop(nodes, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("NODE   STATE  REPLICAS        CPU   CPUS  MEMORY    GPUS\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("gpu-1  READY  2 (1 reported)  6.50  8/32  40G/256G  0:0% 1:97% 2:- 3:free\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("cpu-1  READY  0               -     0/16  -         -\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("gpu-2  LOST   1 (0 reported)"), std::string::npos) << text;
  std::ostringstream none;
  PrintNodeTop({}, none);
  EXPECT_EQ(none.str(), "No nodes registered.\n");
}

// `cohort nodes NODE`: each GPU with who holds it and why nothing new may go there, and the
// replicas holding part of the node.
TEST(CliTest, OneNodeAtLengthSaysWhoHoldsEachGpu) {
  wire::NodeInfoT node;
  node.node_id = "gpu-1";
  node.address = "10.0.0.7:7070";
  node.version = "0.9.1";
  node.state = "READY";
  node.cpus = 32;
  node.cpus_used = 9;
  node.memory_mb = 256 << 10;
  node.memory_used_mb = 64 << 10;
  node.replicas = 2;
  node.storage = "shared";
  node.labels = "gpu=h100";
  for (int i = 0; i < 4; ++i) {
    auto g = std::make_unique<wire::GpuInfoT>();
    g->index = i;
    g->model = "NVIDIA H100 80GB HBM3";
    g->memory_mb = 81559;
    g->uuid = "GPU-" + std::to_string(i);
    g->numa_node = i / 2;
    node.gpus.push_back(std::move(g));
  }
  node.gpus_used = {0, 1, 3};
  auto holder = [&](const std::string& job, const std::string& replica, std::vector<int> gpus,
                    int cpus, int64_t memory_mb) {
    auto h = std::make_unique<wire::NodeReplicaT>();
    h->job = job;
    h->replica = replica;
    h->state = wire::ReplicaState::RUNNING;
    h->gpus = std::move(gpus);
    h->cpus = cpus;
    h->memory_mb = memory_mb;
    node.holders.push_back(std::move(h));
  };
  holder("notebook", "chief-0", {3}, 1, 0);
  holder("train", "worker-0", {0, 1}, 8, 64 << 10);
  auto unfit = std::make_unique<wire::UnhealthyGpuT>();
  unfit->index = 2;
  unfit->reason = "3 uncorrectable ECC errors";
  node.unhealthy_gpus.push_back(std::move(unfit));
  node.cordoned_gpus = {3};
  node.usage = std::make_unique<wire::NodeUsageT>();
  node.usage->cpu_cores = 7.25;
  node.usage->memory_bytes = 40LL << 30;
  node.usage->replicas = 1;
  auto sample = std::make_unique<wire::GpuUsageT>();
  sample->index = 1;
  sample->utilization = 97.4;
  sample->memory_used_bytes = 31LL << 30;
  sample->memory_total_bytes = 80LL << 30;
  node.usage->gpus.push_back(std::move(sample));
  node.agent_started_ms = NowMs() - (3 * 3600 + 12 * 60 + 30) * 1000;

  std::ostringstream out;
  PrintNode(node, out);
  EXPECT_EQ(out.str(),
            "Node:       gpu-1\n"
            "Address:    10.0.0.7:7070\n"
            "State:      READY\n"
            "Heartbeat:  -\n"
            "Agent:      cohort-agent 0.9.1, started 3h12m ago\n"
            "CPUs:       9/32 held\n"
            "Memory:     64G/256G held\n"
            "In use:     7.25 cores, memory 40G (1 of 2 replicas reported)\n"
            "Storage:    shared\n"
            "Labels:     gpu=h100\n"
            "\n"
            "GPUs:\n"
            "GPU  MODEL                  MEMORY  NUMA  UUID   USE          STATE\n"
            "0    NVIDIA H100 80GB HBM3  79G     0     GPU-0  -            train/worker-0\n"
            "1    NVIDIA H100 80GB HBM3  79G     0     GPU-1  97% 31G/80G  train/worker-0\n"
            "2    NVIDIA H100 80GB HBM3  79G     1     GPU-2  -            unfit: 3 uncorrectable "
            "ECC errors\n"
            "3    NVIDIA H100 80GB HBM3  79G     1     GPU-3  -            notebook/chief-0, "
            "cordoned\n"
            "\n"
            "Replicas:\n"
            "JOB       REPLICA   STATE    GPUS  CPUS  MEMORY\n"
            "notebook  chief-0   RUNNING  3     1     -\n"
            "train     worker-0  RUNNING  0,1   8     64G\n"
            "\n"
            "Events:\n"
            "  (none)\n");

  // A node with nothing, whose GPUs its agent declared (no NUMA node known).
  wire::NodeInfoT idle;
  idle.node_id = "gpu-2";
  idle.state = "CORDONED";
  auto declared = std::make_unique<wire::GpuInfoT>();
  declared->index = 0;
  idle.gpus.push_back(std::move(declared));
  out.str("");
  PrintNode(idle, out);
  EXPECT_NE(out.str().find("0    -      -       -     -     -    free\n"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("Replicas:\n  (none)\n"), std::string::npos) << out.str();
}

// The note kept with a cordon: who, since when (and how long ago), why; on the node's page as
// "Cordon:" and under `cohort nodes`' table; a node cordoned by GPUs alone says so; a node with
// no note has no such line.
TEST(CliTest, ACordonNoteSaysWhoSinceWhenAndWhy) {
  wire::NodeInfoT drained;
  drained.node_id = "gpu-1";
  drained.state = "DRAINED";
  drained.admin = "drained";
  drained.admin_reason = "PSU swap, ticket 4411";
  drained.admin_by = "alice";
  drained.admin_since_ms = NowMs() - 2 * 3600 * 1000 - 500;
  wire::NodeInfoT gpus_only;
  gpus_only.node_id = "gpu-2";
  gpus_only.state = "READY";
  gpus_only.cordoned_gpus = {3};
  gpus_only.admin_by = "bob";
  gpus_only.admin_since_ms = NowMs() - 90 * 1000;
  wire::NodeInfoT ready;
  ready.node_id = "gpu-3";
  ready.state = "READY";
  std::vector<wire::NodeInfoT> nodes;
  nodes.push_back(std::move(drained));
  nodes.push_back(std::move(gpus_only));
  nodes.push_back(std::move(ready));

  std::ostringstream out;
  PrintNodes(nodes, out);
  const std::string when = FormatTime(nodes[0].admin_since_ms);
  EXPECT_NE(out.str().find("\ngpu-1 drained by alice since " + when +
                           " (2h00m ago): PSU swap, ticket 4411\n"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("\ngpu-2 GPUs cordoned by bob since " +
                           FormatTime(nodes[1].admin_since_ms) + " (1m30s ago)\n"),
            std::string::npos)
      << out.str();
  // gpu-3's one line is its row of the table.
  const std::string text = out.str();
  EXPECT_EQ(text.find("\ngpu-3 ", text.find("\ngpu-3 ") + 1), std::string::npos) << text;

  out.str("");
  PrintNode(nodes[0], out);
  EXPECT_NE(out.str().find("State:      DRAINED\nCordon:     drained by alice since " + when +
                           " (2h00m ago): PSU swap, ticket 4411\n"),
            std::string::npos)
      << out.str();
  out.str("");
  PrintNode(nodes[2], out);
  EXPECT_EQ(out.str().find("Cordon:"), std::string::npos) << out.str();

  // Its events, oldest first, each at its time.
  for (const char* text :
       {"registered: cohort-agent 0.9.1 at 10.0.0.7, 8 GPUs, 64 CPUs, 524288 MiB",
        "cordoned by alice: PSU swap"}) {
    auto event = std::make_unique<wire::NodeEventT>();
    event->seq = static_cast<int64_t>(nodes[0].events.size()) + 1;
    event->time_ms = 1'764'964'800'000 + event->seq * 60'000;
    event->text = text;
    nodes[0].events.push_back(std::move(event));
  }
  out.str("");
  PrintNode(nodes[0], out);
  EXPECT_NE(out.str().find("\nEvents:\n  " + FormatTime(1'764'964'860'000) +
                           "  registered: cohort-agent 0.9.1 at 10.0.0.7, 8 GPUs, 64 CPUs, 524288 "
                           "MiB\n  " +
                           FormatTime(1'764'964'920'000) + "  cordoned by alice: PSU swap\n"),
            std::string::npos)
      << out.str();
}

// A node of two sockets shows its free GPUs per NUMA node (what a replica could get on one
// socket): not those held, unfit or cordoned. Nodes of one NUMA node, or of GPUs NVML did not
// place, show "-", and a cluster of none such has no column at all.
TEST(CliTest, NodesOfSeveralNumaNodesShowTheirFreeGpusByNumaNode) {
  wire::NodeInfoT two_sockets;
  two_sockets.node_id = "gpu-8";
  two_sockets.state = "READY";
  for (int i = 0; i < 8; ++i) {
    auto gpu = std::make_unique<wire::GpuInfoT>();
    gpu->index = i;
    gpu->numa_node = i < 4 ? 0 : 1;
    two_sockets.gpus.push_back(std::move(gpu));
  }
  two_sockets.gpus_used = {0, 1, 2};
  auto unfit = std::make_unique<wire::UnhealthyGpuT>();
  unfit->index = 4;
  unfit->reason = "ECC";
  two_sockets.unhealthy_gpus.push_back(std::move(unfit));
  two_sockets.cordoned_gpus = {5};
  wire::NodeInfoT declared;
  declared.node_id = "gpu-d";
  declared.state = "READY";
  auto gpu = std::make_unique<wire::GpuInfoT>();
  gpu->index = 0;
  declared.gpus.push_back(std::move(gpu));
  std::vector<wire::NodeInfoT> nodes;
  nodes.push_back(std::move(two_sockets));
  nodes.push_back(std::move(declared));

  std::ostringstream out;
  PrintNodes(nodes, out);
  const std::string text = out.str();
  ASSERT_NE(text.find("FREE-BY-NUMA"), std::string::npos) << text;
  const size_t column = text.find("FREE-BY-NUMA");
  const size_t eight = text.find("\ngpu-8 ") + 1, other = text.find("\ngpu-d ") + 1;
  const size_t line = text.find('\n') + 1;  // the table's columns line up under the header
  EXPECT_EQ(text.compare(eight + column, 7, "0:1 1:2"), 0) << text;
  EXPECT_EQ(text.compare(other + column, 2, "- "), 0) << text;
  EXPECT_EQ(eight, line) << text;

  nodes.erase(nodes.begin());
  out.str("");
  PrintNodes(nodes, out);
  EXPECT_EQ(out.str().find("FREE-BY-NUMA"), std::string::npos) << out.str();
}

// Nodes whose agents run different builds (a rolling upgrade under way) get one line after the
// table saying which, most nodes first, naming up to three of each; a lost node does not count,
// and one build says nothing.
TEST(CliTest, NodesSaysWhichBuildsTheAgentsRunWhereTheyDiffer) {
  std::vector<wire::NodeInfoT> nodes;
  auto add = [&](const std::string& id, const std::string& version, const std::string& state) {
    wire::NodeInfoT n;
    n.node_id = id;
    n.version = version;
    n.state = state;
    nodes.push_back(std::move(n));
  };
  for (const char* id : {"gpu-1", "gpu-2", "gpu-3", "gpu-4"}) add(id, "0.1.0+gaaa", "READY");
  add("gpu-5", "0.1.0+gbbb", "LOST");
  std::ostringstream out;
  PrintNodes(nodes, out);
  EXPECT_EQ(out.str().find("builds"), std::string::npos) << out.str();

  add("gpu-7", "0.1.0+gbbb", "READY");
  add("gpu-8", "", "READY");  // an agent that said none
  out.str("");
  PrintNodes(nodes, out);
  EXPECT_NE(out.str().find("\nagents run 3 builds: 0.1.0+gaaa on 4 nodes (gpu-1, gpu-2, gpu-3 and "
                           "1 more), 0.1.0+gbbb on 1 node (gpu-7), unknown on 1 node (gpu-8)\n"),
            std::string::npos)
      << out.str();
}

TEST(CliTest, BadUsageExitsTwoWithTheVerbsUsage) {
  CliResult none = RunCohort({});
  EXPECT_EQ(none.exit_code, kExitUsage);
  EXPECT_NE(none.err.find("no verb given"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("Verbs:"), std::string::npos) << none.err;

  CliResult unknown = RunCohort({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, kExitUsage);
  EXPECT_NE(unknown.err.find("unknown verb 'frobnicate'"), std::string::npos) << unknown.err;

  CliResult status = RunCohort({"--insecure", "status"});
  EXPECT_EQ(status.exit_code, kExitUsage);
  EXPECT_NE(status.err.find("status needs one JOB"), std::string::npos) << status.err;
  EXPECT_NE(status.err.find("usage: cohort status JOB"), std::string::npos) << status.err;

  CliResult flag = RunCohort({"--insecure", "logs", "j", "--bogus"});
  EXPECT_EQ(flag.exit_code, kExitUsage);
  EXPECT_NE(flag.err.find("unknown option --bogus"), std::string::npos) << flag.err;
  EXPECT_NE(flag.err.find("usage: cohort logs"), std::string::npos) << flag.err;

  EXPECT_EQ(RunCohort({"--insecure", "logs", "j", "--attempt", "x"}).exit_code, kExitUsage);
  EXPECT_EQ(RunCohort({"--insecure", "list", "extra"}).exit_code, kExitUsage);
  EXPECT_EQ(RunCohort({"--insecure", "submit", "--wait=1", "f"}).exit_code, kExitUsage);
  EXPECT_EQ(RunCohort({"--insecure", "checkpoint", "dir", "--job", "j"}).exit_code, kExitUsage);
  EXPECT_EQ(RunCohort({"keygen", "--name", "a/b"}).exit_code, kExitUsage);

  CliResult timeout = RunCohort({"--insecure", "--timeout", "soon", "list"});
  EXPECT_EQ(timeout.exit_code, kExitUsage);
  EXPECT_NE(timeout.err.find("--timeout"), std::string::npos) << timeout.err;
  EXPECT_EQ(RunCohort({"--insecure", "--timeout", "0s", "list"}).exit_code, kExitUsage);

  ct::TempDir files("cohort-cli-usage");
  CliResult missing = RunCohort({"--insecure", "tune", files.Join("missing-study.yaml")});
  EXPECT_EQ(missing.exit_code, kExitUsage) << missing.err;
  ct::WriteFile(files.Join("study.yaml"),
                "name: s1\nmetric: {id: acc, goal: maximize}\nparameters:\n"
                "  - {id: lr, type: double, min: 0.1, max: 0.01}\nalgorithm: grid\n"
                "max_trials: 2\ntrial_job: {worker_pools: [{role: chief, replicas: 1, "
                "process: {command: [/bin/true]}}]}\n");
  CliResult bad_study = RunCohort({"--insecure", "tune", files.Join("study.yaml")});
  EXPECT_EQ(bad_study.exit_code, kExitUsage) << bad_study.err;
  EXPECT_NE(bad_study.err.find("invalid study spec"), std::string::npos) << bad_study.err;
  EXPECT_NE(bad_study.err.find("parameters[0]"), std::string::npos) << bad_study.err;
  // A Vertex AI HyperparameterTuningJob file is read before anything is sent.
  ct::WriteFile(files.Join("hp.yaml"),
                "studySpec: {metrics: [{metricId: acc, goal: MAXIMIZE}], parameters: "
                "[{parameterId: lr, doubleValueSpec: {minValue: 0.1, maxValue: 1}}]}\n"
                "trialJobSpec: {workerPoolSpecs: [{containerSpec: {imageUri: x}}]}\n");
  CliResult bad_vertex_study = RunCohort({"--insecure", "tune", files.Join("hp.yaml")});
  EXPECT_EQ(bad_vertex_study.exit_code, kExitUsage) << bad_vertex_study.err;
  EXPECT_NE(bad_vertex_study.err.find("displayName: required: it names the study"),
            std::string::npos)
      << bad_vertex_study.err;
  // --name stands for it: the file passes, and the CLI goes on to the (absent) coordinator.
  CliResult named_vertex_study = RunCohort(
      {"--insecure", "--coordinator", "tcp://127.0.0.1:" + std::to_string(ct::PickFreePort()),
       "--timeout", "300ms", "tune", files.Join("hp.yaml"), "--name", "hp_2"});
  EXPECT_EQ(named_vertex_study.exit_code, kExitUnreachable) << named_vertex_study.err;
  ct::WriteFile(files.Join("job.yaml"), "name: j1\nworker_pools: []\n");
  CliResult bad_job = RunCohort({"--insecure", "submit", files.Join("job.yaml")});
  EXPECT_EQ(bad_job.exit_code, kExitUsage) << bad_job.err;
  EXPECT_NE(bad_job.err.find("invalid job spec"), std::string::npos) << bad_job.err;
  ct::WriteFile(files.Join("good.yaml"),
                "name: j2\nworker_pools: [{role: chief, process: {command: [/bin/true]}}]\n");
  CliResult bad_name = RunCohort({"--insecure", "submit", files.Join("good.yaml"), "--name", "9"});
  EXPECT_EQ(bad_name.exit_code, kExitUsage) << bad_name.err;
  EXPECT_NE(bad_name.err.find("name: '9' is not a valid job name"), std::string::npos)
      << bad_name.err;
  EXPECT_EQ(RunCohort({"--insecure", "submit", files.Join("good.yaml"), "--name="}).exit_code,
            kExitUsage);
  CliResult bad_env = RunCohort({"--insecure", "submit", files.Join("good.yaml"), "--env", "LR"});
  EXPECT_EQ(bad_env.exit_code, kExitUsage) << bad_env.err;
  EXPECT_NE(bad_env.err.find("--env: expected KEY=VALUE, got 'LR'"), std::string::npos)
      << bad_env.err;
  CliResult bad_env_name =
      RunCohort({"--insecure", "submit", files.Join("good.yaml"), "--env", "1X=2"});
  EXPECT_EQ(bad_env_name.exit_code, kExitUsage) << bad_env_name.err;
  EXPECT_NE(bad_env_name.err.find("--env: '1X' is not an environment variable's name"),
            std::string::npos)
      << bad_env_name.err;
  // Two files, or args with no FILE before "--": one FILE is needed.
  EXPECT_EQ(RunCohort({"--insecure", "submit", files.Join("good.yaml"), files.Join("job.yaml")})
                .exit_code,
            kExitUsage);
  EXPECT_EQ(RunCohort({"--insecure", "submit", "--", files.Join("good.yaml")}).exit_code,
            kExitUsage);

  // Without --insecure the client needs key files; their absence is a usage error naming them.
  ct::TempDir home("cohort-cli-home");
  ScopedEnv home_env("HOME", home.path());
  ScopedEnv insecure_env("COHORT_INSECURE", "0");
  CliResult secure = RunCohort({"--timeout", "1s", "list"});
  EXPECT_EQ(secure.exit_code, kExitUsage) << secure.err;
  EXPECT_NE(secure.err.find("client.key"), std::string::npos) << secure.err;
}

TEST(CliTest, UnreachableCoordinatorExitsThreeNamingTheAddress) {
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(ct::PickFreePort());
  CliResult flags =
      RunCohort({"--insecure", "--coordinator", endpoint, "--timeout", "300ms", "list"});
  EXPECT_EQ(flags.exit_code, kExitUnreachable) << flags.out << flags.err;
  EXPECT_NE(flags.err.find(endpoint), std::string::npos) << flags.err;

  // Global flags are accepted after the verb too, and the environment works as well as flags.
  CliResult after =
      RunCohort({"nodes", "--insecure", "--coordinator=" + endpoint, "--timeout=300ms"});
  EXPECT_EQ(after.exit_code, kExitUnreachable) << after.err;
  ScopedEnv coordinator_env("COHORT_COORDINATOR", endpoint);
  ScopedEnv insecure_env("COHORT_INSECURE", "1");
  CliResult env = RunCohort({"--timeout=300ms", "nodes"});
  EXPECT_EQ(env.exit_code, kExitUnreachable) << env.err;
  EXPECT_NE(env.err.find(endpoint), std::string::npos) << env.err;

  // `version` still says the client's build, then why the coordinator's is missing.
  CliResult version = RunCohort({"--timeout=300ms", "version"});
  EXPECT_EQ(version.exit_code, kExitUnreachable) << version.err;
  EXPECT_EQ(version.out, "cohort " + std::string(CohortBuildVersion()) + "\n");
  EXPECT_NE(version.err.find("the coordinator's version"), std::string::npos) << version.err;
  EXPECT_NE(version.err.find(endpoint), std::string::npos) << version.err;
}

// The client config file (common/client_config.h): read for the endpoint, insecure and the
// timeout; the environment overrides it, flags override both; a bad file is a usage error naming
// the file and line.
TEST(CliTest, TheClientConfigFileIsReadAndTheEnvironmentAndFlagsOverrideIt) {
  ct::TempDir dir("cohort-cli-config");
  const std::string in_file = "tcp://127.0.0.1:" + std::to_string(ct::PickFreePort());
  const std::string in_env = "tcp://127.0.0.1:" + std::to_string(ct::PickFreePort());
  const std::string in_flag = "tcp://127.0.0.1:" + std::to_string(ct::PickFreePort());
  ct::WriteFile(dir.Join("client.conf"), "# a test\ncoordinator = " + in_file +
                                             "\ninsecure = true\n\n; short\ntimeout = 300ms\n");
  ScopedEnv config_env("COHORT_CLIENT_CONFIG", dir.Join("client.conf"));
  ScopedEnv no_coordinator("COHORT_COORDINATOR", "");  // empty counts as unset
  ScopedEnv no_insecure_env("COHORT_INSECURE", "");
  // No --insecure and no keys: the file's insecure = true holds, and its endpoint is asked.
  CliResult file = RunCohort({"nodes"});
  EXPECT_EQ(file.exit_code, kExitUnreachable) << file.out << file.err;
  EXPECT_NE(file.err.find(in_file), std::string::npos) << file.err;
  CliResult flag = RunCohort({"--coordinator", in_flag, "nodes"});
  EXPECT_EQ(flag.exit_code, kExitUnreachable) << flag.err;
  EXPECT_NE(flag.err.find(in_flag), std::string::npos) << flag.err;
  {
    ScopedEnv env("COHORT_COORDINATOR", in_env);
    CliResult from_env = RunCohort({"nodes"});
    EXPECT_EQ(from_env.exit_code, kExitUnreachable) << from_env.err;
    EXPECT_NE(from_env.err.find(in_env), std::string::npos) << from_env.err;
  }

  ct::WriteFile(dir.Join("client.conf"), "coordinator = " + in_file + "\ncolour = blue\n");
  CliResult unknown = RunCohort({"nodes"});
  EXPECT_EQ(unknown.exit_code, kExitUsage) << unknown.err;
  EXPECT_NE(unknown.err.find("client.conf:2: unknown name 'colour'"), std::string::npos)
      << unknown.err;
  ct::WriteFile(dir.Join("client.conf"), "insecure = maybe\n");
  EXPECT_EQ(RunCohort({"nodes"}).exit_code, kExitUsage);
  ScopedEnv missing("COHORT_CLIENT_CONFIG", dir.Join("nothing.conf"));
  CliResult gone = RunCohort({"nodes"});
  EXPECT_EQ(gone.exit_code, kExitUsage) << gone.err;
  EXPECT_NE(gone.err.find("nothing.conf"), std::string::npos) << gone.err;
}

TEST(CliTest, CheckpointVerifiesEachAndNamesTheRestorePoint) {
  ct::TempDir dir("cohort-ckpt-cli");
  for (int64_t step : {10, 20}) {
    CheckpointWriter writer(dir.path(), step);
    ASSERT_TRUE(writer.AddFile("model.bin", "weights-" + std::to_string(step)).ok());
    ASSERT_TRUE(writer.Commit().ok());
  }
  // The newest is corrupted in place (same size, other bytes), and a crashed write is left over.
  ct::WriteFile(dir.Join("ckpt-20/model.bin"), "WEIGHTS-20");
  std::filesystem::create_directories(dir.Join("ckpt-30.tmp"));

  CliResult r = RunCohort({"checkpoint", dir.path() + "/", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.out << r.err;
  json report = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << r.out;
  EXPECT_EQ(report["dir"], dir.path());
  EXPECT_EQ(report["restore"], dir.Join("ckpt-10"));
  ASSERT_EQ(report["checkpoints"].size(), 3u) << r.out;
  // Ordered by step, then name: the staging directory has no step (-1) and comes first.
  EXPECT_EQ(report["checkpoints"][0]["name"], "ckpt-30.tmp");
  EXPECT_EQ(report["checkpoints"][0]["valid"], false);
  EXPECT_EQ(report["checkpoints"][0]["step"], -1);
  EXPECT_EQ(report["checkpoints"][1]["name"], "ckpt-10");
  EXPECT_EQ(report["checkpoints"][1]["valid"], true);
  EXPECT_EQ(report["checkpoints"][1]["step"], 10);
  EXPECT_EQ(report["checkpoints"][1]["files"], 1);
  EXPECT_EQ(report["checkpoints"][1]["bytes"], std::string("weights-10").size());
  EXPECT_EQ(report["checkpoints"][2]["name"], "ckpt-20");
  EXPECT_EQ(report["checkpoints"][2]["valid"], false);
  EXPECT_NE(report["checkpoints"][2]["error"].get<std::string>().find("model.bin"),
            std::string::npos)
      << r.out;

  CliResult table = RunCohort({"checkpoint", dir.path()});
  EXPECT_EQ(table.exit_code, kExitOk);
  EXPECT_NE(table.out.find("Checkpoints in " + dir.path() + ":\n"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("INVALID: "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("Restore would use: " + dir.Join("ckpt-10")), std::string::npos)
      << table.out;

  ct::TempDir empty("cohort-ckpt-empty");
  CliResult none = RunCohort({"checkpoint", empty.path()});
  EXPECT_EQ(none.exit_code, kExitJobFailed) << none.out << none.err;
  EXPECT_NE(none.out.find("(none)"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("nothing (start fresh)"), std::string::npos) << none.out;

  CliResult missing = RunCohort({"checkpoint", empty.Join("nonexistent")});
  EXPECT_EQ(missing.exit_code, kExitJobFailed) << missing.err;
  EXPECT_NE(missing.err.find("cannot list " + empty.Join("nonexistent")), std::string::npos)
      << missing.err;
  ct::WriteFile(empty.Join("file"), "x");
  CliResult not_dir = RunCohort({"checkpoint", empty.Join("file")});
  EXPECT_EQ(not_dir.exit_code, kExitUsage) << not_dir.err;
}

// A stock script's own checkpoints (no ckpt-<step>/ of Cohort's): listed with their verdicts,
// with those the agent set aside before a restart; the exit code says whether one is whole.
TEST(CliTest, CheckpointListsAScriptsOwnCheckpointsAndThoseSetAside) {
  ct::TempDir dir("cohort-ckpt-script");
  const std::string whole = ct::Zip("archive/data.pkl", std::string(500, 'x'));
  ct::WriteFile(dir.Join("epoch_1.pt"), whole);
  ct::WriteFile(dir.Join("epoch_2.pt"), whole.substr(0, 100));
  std::filesystem::create_directories(dir.Join(".cohort-torn/attempt-1"));
  ct::WriteFile(dir.Join(".cohort-torn/attempt-1/epoch_3.pt"), "");

  CliResult table = RunCohort({"checkpoint", dir.path()});
  EXPECT_EQ(table.exit_code, kExitOk) << table.out << table.err;
  EXPECT_NE(table.out.find("Checkpoints in " + dir.path() + ": none of Cohort's (ckpt-<step>/)"),
            std::string::npos)
      << table.out;
  EXPECT_EQ(table.out.find("Restore would use"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("The script's own checkpoints"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("TORN: a torch.save archive (zip) cut short"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("Newest not torn: epoch_1.pt\n"), std::string::npos) << table.out;
  EXPECT_NE(
      table.out.find("Set aside as torn before a restart, in " + dir.path() + "/.cohort-torn/:"),
      std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("attempt-1/epoch_3.pt"), std::string::npos) << table.out;

  CliResult r = RunCohort({"checkpoint", dir.path(), "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.out << r.err;
  json report = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << r.out;
  EXPECT_EQ(report["restore"], "");
  EXPECT_EQ(report["script_newest"], "epoch_1.pt");
  EXPECT_EQ(report["script_walk_complete"], true);
  ASSERT_EQ(report["script_checkpoints"].size(), 2u) << r.out;
  std::set<std::string> torn;
  for (const auto& c : report["script_checkpoints"]) {
    if (c["torn"] != "") torn.insert(c["path"].get<std::string>());
    EXPECT_EQ(c["folder"], false);
  }
  EXPECT_EQ(torn, std::set<std::string>{"epoch_2.pt"});
  ASSERT_EQ(report["set_aside"].size(), 1u) << r.out;
  EXPECT_EQ(report["set_aside"][0]["path"], "attempt-1/epoch_3.pt");
  EXPECT_EQ(report["set_aside"][0]["torn"], "an empty file");

  // Only torn ones left: nothing to resume from.
  std::filesystem::remove(dir.Join("epoch_1.pt"));
  CliResult none = RunCohort({"checkpoint", dir.path()});
  EXPECT_EQ(none.exit_code, kExitJobFailed) << none.out << none.err;
  EXPECT_NE(none.out.find("Newest not torn: none\n"), std::string::npos) << none.out;
}

TEST(CliTest, KeygenWritesAKeyPairAndRefusesToOverwrite) {
  ct::TempDir dir("cohort-keygen");
  CliResult r = RunCohort({"keygen", "--dir", dir.path(), "--name", "alice"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  auto keys = ReadCurveKeyFile(dir.Join("alice.key"));
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(keys->public_key.size(), 40u);
  EXPECT_EQ(keys->secret_key.size(), 40u);
  auto pub = ReadCurveKeyFile(dir.Join("alice.pub"));
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(pub->public_key, keys->public_key);
  EXPECT_TRUE(pub->secret_key.empty());
  EXPECT_NE(r.out.find(keys->public_key), std::string::npos);
  CliResult again = RunCohort({"keygen", "--dir", dir.path(), "--name", "alice"});
  EXPECT_EQ(again.exit_code, kExitJobFailed) << again.err;
  auto still = ReadCurveKeyFile(dir.Join("alice.key"));
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->secret_key, keys->secret_key);
}

TEST(CliTest, SinceTakesADurationAgoOrALocalTime) {
  const int64_t now = 1'800'000'000'000;
  EXPECT_EQ(*ParseSince("2h", now), now - 2 * 3600 * 1000);
  EXPECT_EQ(*ParseSince("7d", now), now - 7 * 24 * 3600 * 1000LL);
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 10;
  tm.tm_mday = 25;
  tm.tm_hour = 14;
  tm.tm_min = 30;
  tm.tm_isdst = -1;
  const int64_t local = static_cast<int64_t>(std::mktime(&tm)) * 1000;
  EXPECT_EQ(*ParseSince("2026-11-25T14:30", now), local);
  EXPECT_EQ(*ParseSince("2026-11-25 14:30:00", now), local);
  EXPECT_EQ(*ParseSince("2026-11-25", now), local - (14 * 60 + 30) * 60 * 1000LL);
  for (const char* bad : {"", "yesterday", "2026-13-45x", "-5m"}) {
    EXPECT_FALSE(ParseSince(bad, now).ok()) << bad;
  }
  EXPECT_EQ(*ParseJobState("Running"), wire::JobState::RUNNING);
  EXPECT_FALSE(ParseJobState("done").ok());
}

// Submit, status, list, cancel and nodes against a real coordinator with no agents: the job stays
// QUEUED until it is cancelled.
TEST(CliTest, VerbsAgainstARealCoordinator) {
  if (auto missing = ct::MissingBinary({COHORT_COORDINATOR_BIN}); !missing.empty()) {
    GTEST_SKIP() << missing;
  }
  ct::LocalCluster cluster(ct::ClusterBinaries{COHORT_COORDINATOR_BIN, ""});
  ASSERT_EQ(cluster.StartCoordinator(), "");
  const std::vector<std::string> global = {"--insecure", "--coordinator",
                                           cluster.client_endpoint()};
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), global.begin(), global.end());
    return RunCohort(args);
  };
  const std::string spec = cluster.scratch("job.yaml");
  ct::WriteFile(spec,
                "name: cli_job\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                "    resources: {cpus: 1}\n    process: {command: [/bin/true]}\n");

  CliResult submit = run({"submit", spec});
  ASSERT_EQ(submit.exit_code, kExitOk) << submit.err;
  const std::string name = submit.out.substr(0, submit.out.find('\n'));
  EXPECT_FALSE(name.empty());

  CliResult status = run({"status", name, "--json"});
  ASSERT_EQ(status.exit_code, kExitOk) << status.err;
  json job = json::parse(status.out, nullptr, false);
  ASSERT_TRUE(job.is_object()) << status.out;
  EXPECT_EQ(job["name"], name);
  EXPECT_EQ(job["state"], "QUEUED");

  // This client's build and the coordinator's (the same build here).
  const std::string build(CohortBuildVersion());
  CliResult version = run({"version"});
  ASSERT_EQ(version.exit_code, kExitOk) << version.err;
  EXPECT_EQ(version.out, "cohort " + build + "\ncohort-coordinator " + build + " (" +
                             cluster.client_endpoint() + ")\n");
  json versions = json::parse(run({"version", "--json"}).out, nullptr, false);
  EXPECT_EQ(versions["client"], build) << versions;
  EXPECT_EQ(versions["coordinator"], build) << versions;

  CliResult list = run({"list", "--json"});
  ASSERT_EQ(list.exit_code, kExitOk) << list.err;
  json jobs = json::parse(list.out, nullptr, false);
  ASSERT_TRUE(jobs.is_array()) << list.out;
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["name"], name);
  EXPECT_NE(run({"list"}).out.find(name), std::string::npos);
  // History queries, answered by the coordinator's state store.
  ct::WriteFile(cluster.scratch("job2.yaml"),
                "name: cli_job_two\nlabels: {team: cli, sweep: wd}\n"
                "worker_pools:\n  - role: chief\n    replicas: 1\n"
                "    resources: {cpus: 1}\n    process: {command: [/bin/true]}\n");
  // --label sets one over the file's; a malformed one is a usage error naming it.
  CliResult bad_label = run({"submit", cluster.scratch("job2.yaml"), "--label", "sweep=l r"});
  EXPECT_EQ(bad_label.exit_code, kExitUsage);
  EXPECT_NE(bad_label.err.find("--label: label value 'l r' is not valid"), std::string::npos)
      << bad_label.err;
  CliResult second = run({"submit", cluster.scratch("job2.yaml"), "--label", "sweep=lr"});
  ASSERT_EQ(second.exit_code, kExitOk) << second.err;
  auto listed = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "list");
    args.push_back("--json");
    CliResult r = run(args);
    EXPECT_EQ(r.exit_code, kExitOk) << r.err;
    std::vector<std::string> out;
    json array = json::parse(r.out, nullptr, false);
    if (!array.is_array()) {
      ADD_FAILURE() << r.out;
      return out;
    }
    for (const auto& j : array) out.push_back(j["name"]);
    return out;
  };
  EXPECT_EQ(listed({"--state", "queued"}), (std::vector<std::string>{name, "cli_job_two"}));
  EXPECT_EQ(listed({"--state", "QUEUED,running", "--limit", "1"}),
            (std::vector<std::string>{"cli_job_two"}));
  EXPECT_EQ(listed({"--since", "1h"}), (std::vector<std::string>{name, "cli_job_two"}));
  EXPECT_EQ(listed({"--since", "2000-01-01"}), (std::vector<std::string>{name, "cli_job_two"}));
  EXPECT_TRUE(listed({"--state", "succeeded"}).empty());
  EXPECT_EQ(run({"list", "--state", "succeeded"}).out, "No jobs.\n");
  CliResult bad_state = run({"list", "--state", "done"});
  EXPECT_EQ(bad_state.exit_code, kExitUsage);
  EXPECT_NE(bad_state.err.find("--state: no job state 'done' (one of QUEUED, PENDING, RUNNING"),
            std::string::npos)
      << bad_state.err;
  CliResult bad_since = run({"list", "--since", "yesterday"});
  EXPECT_EQ(bad_since.exit_code, kExitUsage);
  EXPECT_NE(bad_since.err.find("--since: 'yesterday' is neither a duration ago"), std::string::npos)
      << bad_since.err;
  EXPECT_EQ(run({"list", "--limit", "0"}).exit_code, kExitUsage);
  // By label: -l selects; the table has a LABELS column once a job has labels, status a line.
  EXPECT_EQ(listed({"-l", "team=cli"}), std::vector<std::string>{"cli_job_two"});
  EXPECT_EQ(listed({"--selector", "team in (cli),!sweep"}), std::vector<std::string>{});
  json labelled = json::parse(run({"list", "-l", "sweep", "--json"}).out, nullptr, false);
  ASSERT_EQ(labelled.size(), 1u) << labelled;
  EXPECT_EQ(labelled[0]["labels"], (json{{"sweep", "lr"}, {"team", "cli"}})) << labelled;
  const std::string table = run({"list"}).out;
  EXPECT_NE(table.find(" LABELS "), std::string::npos) << table;
  EXPECT_NE(table.find(" sweep=lr,team=cli "), std::string::npos) << table;
  EXPECT_NE(run({"status", "cli_job_two"}).out.find("\nLabels:     sweep=lr,team=cli\n"),
            std::string::npos);
  CliResult bad_selector = run({"list", "-l", "team in cli"});
  EXPECT_NE(bad_selector.exit_code, kExitOk);
  EXPECT_NE(bad_selector.err.find("selector: "), std::string::npos) << bad_selector.err;
  // Usage by the label's value (neither job ran: counted, no hours), and of the selected jobs.
  json by_team = json::parse(run({"usage", "--by-label", "team", "--json"}).out, nullptr, false);
  EXPECT_EQ(by_team, json::parse(R"([
      {"label": "cli", "jobs": 1, "failed": 0, "gpu_hours": 0.0, "cpu_hours": 0.0},
      {"label": null, "jobs": 1, "failed": 0, "gpu_hours": 0.0, "cpu_hours": 0.0}])"))
      << by_team;
  const std::string usage_table = run({"usage", "--by-label", "team"}).out;
  EXPECT_NE(usage_table.find("TEAM    JOBS"), std::string::npos) << usage_table;
  EXPECT_NE(usage_table.find("\n<none>  1 "), std::string::npos) << usage_table;
  EXPECT_NE(usage_table.find("\nTOTAL   2 "), std::string::npos) << usage_table;
  json selected = json::parse(run({"usage", "-l", "sweep=lr", "--json"}).out, nullptr, false);
  ASSERT_EQ(selected.size(), 1u) << selected;
  EXPECT_EQ(selected[0]["jobs"], 1) << selected;
  EXPECT_EQ(selected[0]["user"], json::parse(list.out)[0]["owner"]) << selected;
  CliResult bad_key = run({"usage", "--by-label", "te am"});
  EXPECT_EQ(bad_key.exit_code, kExitUsage);
  EXPECT_NE(bad_key.err.find("--by-label: label key 'te am' is not valid"), std::string::npos)
      << bad_key.err;
  CliResult bad_usage_selector = run({"usage", "-l", "team in cli"});
  EXPECT_NE(bad_usage_selector.exit_code, kExitOk);
  EXPECT_NE(bad_usage_selector.err.find("selector: "), std::string::npos) << bad_usage_selector.err;
  // Suspended, the second job leaves the queue (no replica of it runs: --wait returns at once);
  // resumed, it is back in it. A job that ended is refused, naming its state.
  CliResult suspended = run({"suspend", "cli_job_two", "--wait"});
  EXPECT_EQ(suspended.exit_code, kExitOk) << suspended.err;
  EXPECT_EQ(suspended.out.rfind("job cli_job_two: SUSPENDED (suspended", 0), 0u) << suspended.out;
  EXPECT_EQ(listed({"--state", "suspended"}), std::vector<std::string>{"cli_job_two"});
  EXPECT_EQ(listed({"--state", "queued"}), std::vector<std::string>{name});
  json suspended_queue = json::parse(run({"queues", "--json"}).out, nullptr, false);
  EXPECT_EQ(suspended_queue[0]["suspended"], 1) << suspended_queue;
  EXPECT_EQ(suspended_queue[0]["waiting"], 1) << suspended_queue;
  EXPECT_EQ(run({"suspend", "cli_job_two"}).exit_code, kExitOk);
  CliResult resumed = run({"resume", "cli_job_two"});
  EXPECT_EQ(resumed.exit_code, kExitOk) << resumed.err;
  EXPECT_EQ(resumed.out.rfind("job cli_job_two: QUEUED", 0), 0u) << resumed.out;
  EXPECT_EQ(run({"suspend"}).exit_code, kExitUsage);
  EXPECT_EQ(run({"resume", "no-such-job"}).exit_code, kExitUsage);
  // update: another class, kept in the job; what the coordinator does not have is refused.
  CliResult updated = run({"update", "cli_job_two", "--priority", "high"});
  EXPECT_EQ(updated.exit_code, kExitOk) << updated.err;
  EXPECT_EQ(updated.out, "job cli_job_two: QUEUED, priority high, queue default\n");
  EXPECT_EQ(json::parse(run({"status", "cli_job_two", "--json"}).out, nullptr, false)["priority"],
            "high");
  CliResult no_class = run({"update", "cli_job_two", "--priority", "urgent"});
  EXPECT_EQ(no_class.exit_code, kExitUsage);
  EXPECT_NE(no_class.err.find("no priority class named 'urgent'"), std::string::npos)
      << no_class.err;
  EXPECT_EQ(run({"update", "cli_job_two"}).exit_code, kExitUsage);
  // --after: the third job waits for the second to succeed, and fails when it is cancelled.
  ct::WriteFile(cluster.scratch("job3.yaml"),
                "name: cli_job_three\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                "    resources: {cpus: 1}\n    process: {command: [/bin/true]}\n");
  CliResult third = run({"submit", cluster.scratch("job3.yaml"), "--after", "cli_job_two," + name});
  ASSERT_EQ(third.exit_code, kExitOk) << third.err;
  json waiting = json::parse(run({"status", "cli_job_three", "--json"}).out, nullptr, false);
  EXPECT_EQ(waiting["message"],
            "waiting for jobs cli_job_two, " + name + " to succeed (scheduling.after)")
      << waiting;
  // Counted among the waiting, not listed as next: no round tries it yet.
  json after_queue = json::parse(run({"queues", "--json"}).out, nullptr, false);
  EXPECT_EQ(after_queue[0]["waiting"], 3) << after_queue;
  // cli_job_two, moved to priority high above, is tried first.
  EXPECT_EQ(after_queue[0]["waiting_jobs"], json::array({"cli_job_two", name})) << after_queue;
  EXPECT_NE(run({"queues"}).out.find("SUSPENDED"), std::string::npos);
  // --dry-run: nothing is submitted. With no agent the job would wait, behind the two queued
  // (not behind the one that waits for other jobs); with --after, for those jobs.
  CliResult dry =
      run({"submit", cluster.scratch("job3.yaml"), "--name", "cli_dry", "--dry-run", "--json"});
  ASSERT_EQ(dry.exit_code, kExitOk) << dry.err;
  json plan = json::parse(dry.out, nullptr, false);
  EXPECT_EQ(plan["name"], "cli_dry") << dry.out;
  EXPECT_EQ(plan["dry_run"]["outcome"], "WAIT") << dry.out;
  EXPECT_EQ(plan["dry_run"]["queue"], "default") << dry.out;
  EXPECT_EQ(plan["dry_run"]["queued_ahead"], 2) << dry.out;
  CliResult dry_text =
      run({"submit", cluster.scratch("job3.yaml"), "--name", "cli_dry", "--dry-run"});
  EXPECT_EQ(dry_text.out.rfind("dry run, nothing was submitted: job cli_dry would wait in queue "
                               "default (2 jobs queued before it): waiting for ",
                               0),
            0u)
      << dry_text.out;
  CliResult dry_after = run({"submit", cluster.scratch("job3.yaml"), "--name", "cli_dry", "--after",
                             "cli_job_two", "--dry-run"});
  EXPECT_EQ(dry_after.out,
            "dry run, nothing was submitted: job cli_dry would be waiting for job cli_job_two to "
            "succeed (scheduling.after)\n")
      << dry_after.err;
  // An array: each task it would let in at once, behind those queued and the tasks before it.
  CliResult dry_array = run({"submit", cluster.scratch("job3.yaml"), "--name", "cli_dry", "--array",
                             "0-4%2", "--dry-run"});
  EXPECT_EQ(dry_array.out.rfind("dry run, nothing was submitted: array cli_dry (5 tasks): of the "
                                "2 tasks it would let in at once,\n  cli_dry-0 would wait in "
                                "queue default (2 jobs queued before it): waiting for ",
                                0),
            0u)
      << dry_array.out;
  EXPECT_NE(dry_array.out.find("\n  cli_dry-1 would wait in queue default (3 jobs queued before "
                               "it, 1 of them this array's): waiting for "),
            std::string::npos)
      << dry_array.out;
  EXPECT_NE(dry_array.out.find("\nthe other 3 would wait for their turn (scheduling.array)\n"),
            std::string::npos)
      << dry_array.out;
  json array_plan = json::parse(run({"submit", cluster.scratch("job3.yaml"), "--name", "cli_dry",
                                     "--array", "0-4%2", "--dry-run", "--json"})
                                    .out,
                                nullptr, false);
  ASSERT_TRUE(array_plan["tasks"].is_array()) << array_plan;
  ASSERT_EQ(array_plan["tasks"].size(), 2u) << array_plan;
  EXPECT_EQ(array_plan["tasks"][1]["name"], "cli_dry-1") << array_plan;
  EXPECT_EQ(array_plan["tasks"][1]["outcome"], "WAIT") << array_plan;
  EXPECT_EQ(array_plan["tasks"][1]["queued_ahead"], 3) << array_plan;
  EXPECT_EQ(run({"status", "cli_dry"}).exit_code, kExitUsage) << "a dry run stored its job";
  EXPECT_EQ(run({"submit", cluster.scratch("job3.yaml"), "--dry-run", "--wait"}).exit_code,
            kExitUsage);
  EXPECT_EQ(run({"submit", cluster.scratch("job3.yaml"), "--json"}).exit_code, kExitUsage);
  EXPECT_EQ(run({"submit", cluster.scratch("job3.yaml"), "--after", "no such"}).exit_code,
            kExitUsage);
  CliResult stray = run(
      {"submit", cluster.scratch("job3.yaml"), "--name", "cli_job_four", "--after", "no-such-job"});
  EXPECT_EQ(stray.exit_code, kExitUsage);
  EXPECT_NE(stray.err.find("scheduling.after: no job or array named 'no-such-job'"),
            std::string::npos)
      << stray.err;
  CliResult bad_condition =
      run({"submit", cluster.scratch("job3.yaml"), "--after", "cli_job_two:maybe"});
  EXPECT_EQ(bad_condition.exit_code, kExitUsage);
  EXPECT_NE(bad_condition.err.find("the condition must be succeeded, failed or ended, got 'maybe'"),
            std::string::npos)
      << bad_condition.err;
  // --hold with --after JOB:failed: SUSPENDED from its submission; the failure it waits for
  // comes, and it still waits for `cohort resume`.
  CliResult held = run({"submit", cluster.scratch("job3.yaml"), "--name", "cli_job_five", "--after",
                        "cli_job_two:failed", "--hold"});
  ASSERT_EQ(held.exit_code, kExitOk) << held.err;
  json held_status = json::parse(run({"status", "cli_job_five", "--json"}).out, nullptr, false);
  EXPECT_EQ(held_status["state"], "SUSPENDED") << held_status;
  EXPECT_EQ(held_status["message"],
            "held at submit (scheduling.hold); `cohort resume cli_job_five` queues it")
      << held_status;
  ASSERT_EQ(run({"cancel", "cli_job_two"}).exit_code, kExitOk);
  CliResult held_after = run({"status", "cli_job_five"});
  EXPECT_NE(held_after.out.find("SUSPENDED"), std::string::npos) << held_after.out;
  EXPECT_NE(held_after.out.find("job cli_job_two ended CANCELLED (scheduling.after: "
                                "cli_job_two:failed): it may run now"),
            std::string::npos)
      << held_after.out;
  CliResult released = run({"resume", "cli_job_five"});
  EXPECT_EQ(released.exit_code, kExitOk) << released.err;
  EXPECT_EQ(released.out.rfind("job cli_job_five: QUEUED", 0), 0u) << released.out;
  ASSERT_EQ(run({"cancel", "cli_job_five"}).exit_code, kExitOk);
  json failed = json::parse(run({"status", "cli_job_three", "--json"}).out, nullptr, false);
  EXPECT_EQ(failed["state"], "FAILED") << failed;
  EXPECT_EQ(failed["message"],
            "job cli_job_two, which it runs after (scheduling.after), ended "
            "CANCELLED")
      << failed;
  // A Vertex AI CustomJob file, as gcloud takes it: submitted as it is (held, under --name); a
  // note names each field without a counterpart; a malformed one is refused before sending.
  ct::WriteFile(cluster.scratch("vertex.yaml"),
                "workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-4}\n"
                "    replicaCount: 1\n"
                "    containerSpec: {imageUri: /no/such/image, args: [--epochs=1]}\n");
  CliResult vertex =
      run({"submit", cluster.scratch("vertex.yaml"), "--name", "cli_vertex", "--hold", "--env",
           "LR=3e-4", "--env=OPTS=a=b,c", "--", "--lr=3e-4", "--tag", "two words"});
  ASSERT_EQ(vertex.exit_code, kExitOk) << vertex.err;
  EXPECT_EQ(vertex.out, "cli_vertex\n");
  EXPECT_NE(vertex.err.find("cohort: note: Vertex workerPoolSpecs[0].machineSpec.machineType: "
                            "ignored 'n1-standard-4'"),
            std::string::npos)
      << vertex.err;
  // The job file it became, as the coordinator stored it: it submits again as it is.
  CliResult stored = run({"status", "cli_vertex", "--spec"});
  ASSERT_EQ(stored.exit_code, kExitOk) << stored.err;
  StatusOr<JobSpec> stored_spec = ParseJobSpec(stored.out, "stored");
  ASSERT_TRUE(stored_spec.ok()) << stored_spec.status().ToString() << "\n" << stored.out;
  EXPECT_EQ(stored_spec->name, "cli_vertex");
  EXPECT_TRUE(stored_spec->scheduling.hold);
  ASSERT_EQ(stored_spec->pools.size(), 1u);
  ASSERT_TRUE(stored_spec->pools[0].container.has_value());
  EXPECT_EQ(stored_spec->pools[0].container->image, "/no/such/image");
  // --env and -- ARGS, applied to the job file it became.
  EXPECT_EQ(stored_spec->pools[0].container->args,
            (std::vector<std::string>{"--epochs=1", "--lr=3e-4", "--tag", "two words"}));
  EXPECT_EQ(stored_spec->pools[0].container->env,
            (std::map<std::string, std::string>{{"LR", "3e-4"}, {"OPTS", "a=b,c"}}));
  EXPECT_EQ(run({"status", "cli_vertex", "--spec", "--json"}).exit_code, kExitUsage);
  EXPECT_EQ(run({"status", "no_such_job", "--spec"}).exit_code, kExitUsage);
  ASSERT_EQ(run({"cancel", "cli_vertex"}).exit_code, kExitOk);
  ct::WriteFile(cluster.scratch("vertex_bad.yaml"),
                "workerPoolSpecs:\n  - replicaCount: 1\n    containerSpec: {image: x}\n");
  CliResult vertex_bad = run({"submit", cluster.scratch("vertex_bad.yaml")});
  EXPECT_EQ(vertex_bad.exit_code, kExitUsage);
  EXPECT_NE(vertex_bad.err.find("workerPoolSpecs[0].containerSpec.image: unknown key"),
            std::string::npos)
      << vertex_bad.err;
  CliResult ended = run({"suspend", "cli_job_two"});
  EXPECT_EQ(ended.exit_code, kExitUsage);
  EXPECT_NE(ended.err.find("job cli_job_two is CANCELLED: only a job queued or running can be "
                           "suspended"),
            std::string::npos)
      << ended.err;

  CliResult nodes = run({"nodes", "--json"});
  EXPECT_EQ(nodes.exit_code, kExitOk) << nodes.err;
  EXPECT_EQ(json::parse(nodes.out, nullptr, false), json::array());

  // The job waits in the default queue (no quota: everything it would use is borrowed).
  CliResult queues = run({"queues", "--json"});
  ASSERT_EQ(queues.exit_code, kExitOk) << queues.err;
  json queue_list = json::parse(queues.out, nullptr, false);
  ASSERT_TRUE(queue_list.is_array() && queue_list.size() == 1u) << queues.out;
  EXPECT_EQ(queue_list[0]["name"], "default");
  EXPECT_EQ(queue_list[0]["gpu_quota"], 0);
  EXPECT_EQ(queue_list[0]["waiting"], 1);
  EXPECT_EQ(queue_list[0]["waiting_jobs"], json::array({name}));
  EXPECT_NE(run({"queues"}).out.find("default"), std::string::npos);

  CliResult unknown = run({"status", "no-such-job"});
  EXPECT_EQ(unknown.exit_code, kExitUsage) << unknown.err;

  CliResult cancel = run({"cancel", name, "--wait"});
  EXPECT_EQ(cancel.exit_code, kExitOk) << cancel.err;
  EXPECT_EQ(cancel.out.rfind("job " + name + ": CANCELLED", 0), 0u) << cancel.out;
  CliResult after = run({"status", name, "--json"});
  EXPECT_EQ(json::parse(after.out, nullptr, false)["state"], "CANCELLED") << after.out;
}

}  // namespace
}  // namespace cohort::cli
