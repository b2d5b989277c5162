// Day-2 operations end to end (issue 16 part 4), with real cohort-coordinator, cohort-agent and
// cohort (CLI) processes on loopback: cordon keeps new jobs off a node (or one GPU of it), also
// across a coordinator restart; label edits a node's labels, also across a coordinator restart;
// drain lets a running job finish there and then places nothing there; drain --now moves a
// running job to another node without spending a restart; forget removes a LOST node (and is
// refused for a live one); delete removes a finished job from list/status/logs and the store (and
// is refused for a running one); --job-retention deletes old finished jobs by itself; studies and
// cancel STUDY; hyphenated names, name_prefix and submit --name; the client config file, read by
// the CLI and the Python client.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/build_version.h"
#include "common/client.h"
#include "tests/testing/cluster_test.h"
#include "tests/testing/specs.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
using namespace std::chrono_literals;
using nlohmann::json;

class Day2Test : public ct::ClusterTest {
 protected:
  void SetUp() override {
    if (!NeedBinaries({COHORT_CLI_BIN})) return;
    ASSERT_NO_FATAL_FAILURE(StartCoordinator(Options()));
  }
  virtual ct::ClusterOptions Options() { return {}; }

  std::string StartNode(const std::string& prefix) {
    std::string id = UniqueNodeId(prefix);
    ct::AgentOptions options;
    options.node_id = id;
    options.cpus = 4;
    EXPECT_EQ(cluster_->StartAgent(options), "");
    return id;
  }

  // A one-replica job (1 CPU) running `command` under /bin/sh -c; `head` is its name line(s).
  std::string JobFile(const std::string& head, const std::string& command,
                      const std::string& file = "") {
    std::string path =
        cluster_->scratch(file.empty() ? "job-" + std::to_string(++files_) + ".yaml" : file);
    ct::WriteFile(path, head +
                            "\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                            "    resources: {gpus: 0, cpus: 1}\n"
                            "    process: {command: [/bin/sh, -c, '" +
                            command + "']}\nscheduling: {max_restarts: 2}\n");
    return path;
  }

  // Submits `path` with the CLI; returns the name it printed.
  std::string Submit(const std::string& path, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"submit", path};
    args.insert(args.end(), more.begin(), more.end());
    auto run = RunCli(args);
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    std::string name = run.out;
    while (!name.empty() && name.back() == '\n') name.pop_back();
    return name;
  }

  wire::JobInfoT Job(const std::string& name) {
    auto client = cluster_->Client();
    auto job = client.GetJob(name);
    return job.ok() ? *job : wire::JobInfoT{};
  }

  // Waits until `name` is RUNNING with chief-0 on a node; returns that node.
  std::string WaitRunning(const std::string& name) {
    std::string node;
    EXPECT_TRUE(ct::WaitUntil(
        [&] {
          auto job = Job(name);
          if (job.state != wire::JobState::RUNNING || job.replicas.empty()) return false;
          node = job.replicas[0]->node_id;
          return job.replicas[0]->state == wire::ReplicaState::RUNNING;
        },
        30s))
        << name << " never ran\n"
        << cluster_->Logs();
    return node;
  }

  wire::JobInfoT WaitEnd(const std::string& name) {
    auto client = cluster_->Client();
    return ct::WaitForJobEnd(client, name, 30s);
  }

  // The node as `cohort nodes --json` shows it (an empty object when it is not listed).
  json Node(const std::string& id) {
    auto run = RunCli({"nodes", "--json"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    json nodes = json::parse(run.out, nullptr, false);
    if (!nodes.is_array()) return json::object();
    for (const auto& n : nodes) {
      if (n.value("node_id", "") == id) return n;
    }
    return json::object();
  }

  bool WaitNodeState(const std::string& id, const std::string& state) {
    return ct::WaitUntil([&] { return Node(id).value("state", "") == state; }, 30s);
  }

  int files_ = 0;
};

TEST_F(Day2Test, CordonKeepsNewJobsOffTheNodeAndUncordonEndsIt) {
  std::string a = StartNode("cordon-a");
  std::string b = StartNode("cordon-b");
  auto cordon = RunCli({"cordon", a});
  ASSERT_EQ(cordon.exit_code, 0) << cordon.out << cordon.err;
  EXPECT_NE(cordon.out.find("cordoned"), std::string::npos) << cordon.out;
  EXPECT_EQ(Node(a).value("state", ""), "CORDONED");
  EXPECT_EQ(Node(a).value("admin", ""), "cordoned");
  // Four jobs of one CPU each: the two nodes have room for all, only b takes them.
  std::vector<std::string> jobs;
  for (int i = 0; i < 4; ++i)
    jobs.push_back(Submit(JobFile("name: c" + std::to_string(i), "sleep 60")));
  for (const auto& j : jobs) EXPECT_EQ(WaitRunning(j), b) << j;

  ASSERT_EQ(RunCli({"uncordon", a}).exit_code, 0);
  EXPECT_EQ(Node(a).value("state", ""), "READY");
  EXPECT_EQ(Node(a).value("admin", ""), "");
  // b now has no CPU left; the next job can only go to a.
  EXPECT_EQ(WaitRunning(Submit(JobFile("name: after", "sleep 60"))), a);

  auto unknown = RunCli({"cordon", "no-such-node"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out << unknown.err;
  EXPECT_NE(unknown.err.find("no node 'no-such-node'"), std::string::npos) << unknown.err;
}

// The cordon, and the note of why, who and since when kept with it (`--reason`), survive a
// coordinator restart (SIGKILL) and the agents' re-registration; `cohort nodes` shows the note.
TEST_F(Day2Test, CordonSurvivesACoordinatorRestartAndTheAgentsReRegistering) {
  std::string a = StartNode("restart-a");
  std::string b = StartNode("restart-b");
  auto cordon = RunCli({"cordon", a, "--reason", "PSU swap, ticket 4411"});
  ASSERT_EQ(cordon.exit_code, 0) << cordon.out << cordon.err;
  const json noted = Node(a);
  const int64_t since = noted.value("admin_since_ms", int64_t{0});
  EXPECT_EQ(noted.value("admin_reason", ""), "PSU swap, ticket 4411") << noted.dump();
  EXPECT_GT(since, 0) << noted.dump();
  cluster_->coordinator().Kill();
  ASSERT_EQ(cluster_->StartCoordinator(), "");
  ASSERT_TRUE(WaitNodeState(b, "READY")) << cluster_->Logs();
  ASSERT_TRUE(WaitNodeState(a, "CORDONED")) << Node(a).dump();
  const json after = Node(a);
  EXPECT_EQ(after.value("admin_reason", ""), "PSU swap, ticket 4411") << after.dump();
  EXPECT_EQ(after.value("admin_by", ""), noted.value("admin_by", "")) << after.dump();
  EXPECT_EQ(after.value("admin_since_ms", int64_t{0}), since) << after.dump();
  auto nodes = RunCli({"nodes"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_NE(nodes.out.find("\n" + a + " cordoned "), std::string::npos) << nodes.out;
  EXPECT_NE(nodes.out.find("ago): PSU swap, ticket 4411\n"), std::string::npos) << nodes.out;
  EXPECT_EQ(Node(b).value("admin_since_ms", int64_t{-1}), 0);
  // The node's history came through the restart too: its registration, then the cordon; the
  // re-registration after the restart adds nothing (it was never LOST).
  auto page = RunCli({"nodes", a});
  ASSERT_EQ(page.exit_code, 0) << page.err;
  const size_t events = page.out.find("\nEvents:\n");
  ASSERT_NE(events, std::string::npos) << page.out;
  const size_t registered = page.out.find("  registered: cohort-agent ", events);
  const size_t cordoned = page.out.find(" cordoned by ", events);
  EXPECT_NE(registered, std::string::npos) << page.out;
  EXPECT_NE(cordoned, std::string::npos) << page.out;
  EXPECT_LT(registered, cordoned) << page.out;
  EXPECT_NE(page.out.find(": PSU swap, ticket 4411\n", cordoned), std::string::npos) << page.out;
  EXPECT_EQ(page.out.find("registered again", events), std::string::npos) << page.out;
  EXPECT_EQ(Node(a).count("events"), 1u);  // --json of every node: none's history
  EXPECT_TRUE(Node(a)["events"].empty());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(WaitRunning(Submit(JobFile("name: r" + std::to_string(i), "sleep 60"))), b);
  }

  // A reason is for a cordon or a drain, short and printable; refused, nothing changes.
  auto uncordon = RunCli({"uncordon", a, "--reason", "fixed"});
  EXPECT_EQ(uncordon.exit_code, 2) << uncordon.out << uncordon.err;
  auto long_reason = RunCli({"drain", a, "--reason", std::string(300, 'x')});
  EXPECT_EQ(long_reason.exit_code, 2) << long_reason.out << long_reason.err;
  EXPECT_NE(long_reason.err.find("NodeAdmin.reason: the reason has 300 bytes"), std::string::npos)
      << long_reason.err;
  auto control = RunCli({"drain", a, "--reason", "two\nlines"});
  EXPECT_EQ(control.exit_code, 2) << control.out << control.err;
  EXPECT_EQ(Node(a).value("admin", ""), "cordoned");
  EXPECT_EQ(Node(a).value("admin_reason", ""), "PSU swap, ticket 4411");
  // The uncordon ends the note with the cordon; the history tells it, refusals were not kept.
  ASSERT_EQ(RunCli({"uncordon", a}).exit_code, 0);
  EXPECT_EQ(Node(a).value("admin_reason", "?"), "");
  EXPECT_EQ(Node(a).value("admin_since_ms", int64_t{-1}), 0);
  auto json_page = RunCli({"nodes", a, "--json"});
  ASSERT_EQ(json_page.exit_code, 0) << json_page.err;
  const json history = json::parse(json_page.out)["events"];
  ASSERT_GE(history.size(), 3u) << history.dump();
  EXPECT_TRUE(history.back()["text"].get<std::string>().starts_with("uncordoned by"))
      << history.dump();
  EXPECT_EQ(history.dump().find("two"), std::string::npos) << history.dump();
}

// An agent killed and started again at once (as systemd's RestartSec=2s starts a crashed one) is
// in its node's history: told by which process it is, since by its uptime alone a start seconds
// after the last cannot be told from a late registration of the same process.
TEST_F(Day2Test, AnAgentKilledAndStartedAgainAtOnceIsInItsNodesHistory) {
  ct::AgentOptions options;
  options.node_id = UniqueNodeId("quick-restart");
  options.cpus = 4;
  ASSERT_EQ(cluster_->StartAgent(options), "");
  cluster_->agent(options.node_id).Kill();
  ASSERT_EQ(cluster_->StartAgent(options), "");
  auto history = [&] { return RunCli({"nodes", options.node_id}).out; };
  EXPECT_TRUE(ct::WaitUntil(
      [&] { return history().find("its agent started again") != std::string::npos; }, 30s))
      << history() << cluster_->Logs();
}

// `cohort cordon NODE --gpu N`: that GPU takes nothing new while the node's others do, `cohort
// nodes` (and --json) say so, the cordon survives a coordinator restart, and uncordon --gpu ends
// it; a GPU the node does not have is refused, naming its GPUs.
TEST_F(Day2Test, CordonOfOneGpuKeepsNewWorkOffItAndSurvivesACoordinatorRestart) {
  const std::string node = UniqueNodeId("gpu-cordon");
  ct::AgentOptions options{node, 2};
  options.cpus = 4;
  ASSERT_EQ(cluster_->StartAgent(options), "");
  auto cordon = RunCli({"cordon", node, "--gpu", "0"});
  ASSERT_EQ(cordon.exit_code, 0) << cordon.out << cordon.err;
  EXPECT_EQ(cordon.out, "node " + node + " GPU 0 cordoned: nothing new is placed on it (READY)\n");
  auto nodes = RunCli({"nodes"});
  EXPECT_NE(nodes.out.find("0/2 declared (1 cordoned)"), std::string::npos) << nodes.out;
  // Which agent each node runs (an upgrade's progress across the cluster): this build's.
  EXPECT_NE(nodes.out.find(" VERSION "), std::string::npos) << nodes.out;
  const std::string version(CohortBuildVersion());
  EXPECT_NE(nodes.out.find(" " + version + " "), std::string::npos) << nodes.out;
  EXPECT_EQ(Node(node)["version"], version);
  EXPECT_GT(Node(node).value("agent_started_ms", int64_t{0}), 0);  // from the agent's uptime
  EXPECT_NE(
      nodes.out.find(node + " GPU 0 is cordoned and free (cohort uncordon " + node + " --gpu 0)"),
      std::string::npos)
      << nodes.out;
  EXPECT_EQ(Node(node)["cordoned_gpus"], json::parse("[0]"));

  const std::string gpu_job = cluster_->scratch("one-gpu.yaml");
  ct::WriteFile(gpu_job,
                "name_prefix: g\nworker_pools:\n  - role: chief\n    resources: {gpus: 1, cpus: "
                "1}\n    process: {command: [/bin/true]}\n");
  const std::string first = Submit(gpu_job);
  wire::JobInfoT ran = WaitEnd(first);
  ASSERT_EQ(ran.state, wire::JobState::SUCCEEDED) << ran.message;
  EXPECT_EQ(ran.replicas[0]->gpus, std::vector<int>{1});

  cluster_->coordinator().Kill();
  ASSERT_EQ(cluster_->StartCoordinator(), "");
  ASSERT_TRUE(WaitNodeState(node, "READY")) << cluster_->Logs();
  EXPECT_EQ(Node(node)["cordoned_gpus"], json::parse("[0]"));
  const std::string second = Submit(gpu_job);
  ran = WaitEnd(second);
  ASSERT_EQ(ran.state, wire::JobState::SUCCEEDED) << ran.message;
  EXPECT_EQ(ran.replicas[0]->gpus, std::vector<int>{1});

  auto none = RunCli({"cordon", node, "--gpu", "2"});
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("node " + node + " has 2 GPUs (0-1): 2 is none of them"),
            std::string::npos)
      << none.err;
  EXPECT_EQ(RunCli({"cordon", node, "--gpu", "one"}).exit_code, 2);
  auto uncordon = RunCli({"uncordon", node, "--gpu", "0"});
  ASSERT_EQ(uncordon.exit_code, 0) << uncordon.out << uncordon.err;
  EXPECT_EQ(Node(node)["cordoned_gpus"], json::array());
}

// `cohort label`: the admin's edits apply over the agent's --label, jobs are placed by them, and
// they survive a coordinator restart and the agents' re-registration; --reset gives the node its
// agent's labels again.
TEST_F(Day2Test, LabelEditsANodesLabelsForPlacementAndSurviveACoordinatorRestart) {
  std::string a = StartNode("label-a");
  std::string b = UniqueNodeId("label-b");
  ct::AgentOptions options;
  options.node_id = b;
  options.cpus = 4;
  options.extra_args = {"--label", "zone=east", "--label", "disk=hdd"};
  ASSERT_EQ(cluster_->StartAgent(options), "");
  auto label = RunCli({"label", b, "pool=fast", "zone-"});
  ASSERT_EQ(label.exit_code, 0) << label.out << label.err;
  EXPECT_EQ(label.out,
            "node " + b + " labels edited: pool=fast,zone-\nlabels: disk=hdd,pool=fast\n");
  // Four one-CPU jobs for `pool: fast`: both nodes have room, only b carries the label.
  auto fast_job = [&](const std::string& name) {
    std::string path = JobFile("name: " + name, "sleep 60");
    std::string yaml = ct::ReadFile(path);
    yaml.replace(yaml.find("    resources:"), 0, "    node_selector: {pool: fast}\n");
    ct::WriteFile(path, yaml);
    return Submit(path);
  };
  for (int i = 0; i < 2; ++i) EXPECT_EQ(WaitRunning(fast_job("f" + std::to_string(i))), b);

  cluster_->coordinator().Kill();
  ASSERT_EQ(cluster_->StartCoordinator(), "");
  ASSERT_TRUE(WaitNodeState(a, "READY")) << cluster_->Logs();
  ASSERT_TRUE(WaitNodeState(b, "READY")) << cluster_->Logs();
  EXPECT_EQ(Node(b).value("labels", ""), "disk=hdd,pool=fast");
  EXPECT_EQ(Node(b).value("label_edits", ""), "pool=fast,zone-");
  EXPECT_EQ(WaitRunning(fast_job("f2")), b);

  // The label moves to a: b's edits are dropped, a's added; the next job goes to a.
  ASSERT_EQ(RunCli({"label", b, "--reset"}).exit_code, 0);
  EXPECT_EQ(Node(b).value("labels", ""), "disk=hdd,zone=east");
  EXPECT_EQ(Node(b).value("label_edits", ""), "");
  ASSERT_EQ(RunCli({"label", a, "pool=fast"}).exit_code, 0);
  EXPECT_EQ(WaitRunning(fast_job("f3")), a);

  // Bad input: named, nothing changed.
  auto bad = RunCli({"label", a, "pool"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("expected KEY=VALUE (set a label) or KEY- (remove one), got 'pool'"),
            std::string::npos)
      << bad.err;
  auto unknown = RunCli({"label", "no-such-node", "a=b"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out << unknown.err;
  EXPECT_NE(unknown.err.find("no node 'no-such-node'"), std::string::npos) << unknown.err;
  EXPECT_EQ(Node(a).value("labels", ""), "pool=fast");
}

// -l SELECTOR: `cohort nodes` lists, and cordon, label, uncordon, drain act on, every node whose
// labels match (a rack at once), as kubectl's -l.
TEST_F(Day2Test, ASelectorPicksTheNodesOfARackForNodesCordonLabelAndDrain) {
  std::vector<std::string> ids;
  for (const std::string rack : {"r1", "r1", "r2"}) {
    ct::AgentOptions options;
    options.node_id = UniqueNodeId("rack-" + rack);
    options.cpus = 2;
    options.extra_args = {"--label", "rack=" + rack};
    ASSERT_EQ(cluster_->StartAgent(options), "");
    ids.push_back(options.node_id);
  }
  auto listed = [&](const std::string& selector) {
    auto run = RunCli({"nodes", "-l", selector, "--json"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    std::set<std::string> out;
    json nodes = json::parse(run.out, nullptr, false);
    if (nodes.is_array()) {
      for (const auto& n : nodes) out.insert(n.value("node_id", ""));
    }
    return out;
  };
  const std::set<std::string> rack1 = {ids[0], ids[1]};
  EXPECT_EQ(listed("rack=r1"), rack1);
  EXPECT_EQ(listed("rack notin (r1)"), std::set<std::string>{ids[2]});
  EXPECT_EQ(listed("rack"), (std::set<std::string>{ids[0], ids[1], ids[2]}));
  EXPECT_EQ(listed("!rack"), std::set<std::string>{});

  auto cordon = RunCli({"cordon", "-l", "rack=r1"});
  ASSERT_EQ(cordon.exit_code, 0) << cordon.out << cordon.err;
  for (const std::string& id : rack1) {
    EXPECT_NE(cordon.out.find("node " + id + " cordoned (CORDONED)"), std::string::npos)
        << cordon.out;
    EXPECT_EQ(Node(id).value("state", ""), "CORDONED");
  }
  EXPECT_EQ(Node(ids[2]).value("state", ""), "READY");
  // A job goes to the one node of r2.
  EXPECT_EQ(WaitRunning(Submit(JobFile("name: off-r1", "sleep 60"))), ids[2]);

  auto label = RunCli({"label", "--selector=rack=r1", "maintenance=2026-12"});
  ASSERT_EQ(label.exit_code, 0) << label.out << label.err;
  EXPECT_EQ(listed("maintenance"), rack1);
  ASSERT_EQ(RunCli({"uncordon", "-l", "maintenance"}).exit_code, 0);
  for (const std::string& id : rack1) EXPECT_EQ(Node(id).value("state", ""), "READY");
  ASSERT_EQ(RunCli({"label", "-l", "rack in (r1, r2)", "--reset"}).exit_code, 0);
  EXPECT_EQ(listed("maintenance"), std::set<std::string>{});
  auto drain = RunCli({"drain", "-l", "rack=r2"});
  ASSERT_EQ(drain.exit_code, 0) << drain.out << drain.err;
  EXPECT_EQ(Node(ids[2]).value("state", ""), "DRAINING");

  // Nothing matching does nothing, and says so; a bad selector and NODE with -l are usage errors.
  auto none = RunCli({"cordon", "-l", "rack=r9"});
  EXPECT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(none.out, "");
  EXPECT_NE(none.err.find("no node matches rack=r9"), std::string::npos) << none.err;
  auto bad = RunCli({"cordon", "-l", "rack in (r1"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("selector 'rack in (r1': a '(' without its ')'"), std::string::npos)
      << bad.err;
  EXPECT_EQ(RunCli({"nodes", "-l", "rack=r 1"}).exit_code, 2);
  EXPECT_EQ(RunCli({"cordon", ids[0], "-l", "rack=r1"}).exit_code, 2);
  for (const std::string& id : rack1) EXPECT_EQ(Node(id).value("state", ""), "READY");
}

TEST_F(Day2Test, DrainLetsTheRunningJobFinishThenPlacesNothingThere) {
  std::string a = StartNode("drain-a");
  std::string marker = cluster_->scratch("release");
  std::string job =
      Submit(JobFile("name: long-runner", "while [ ! -e " + marker + " ]; do sleep 0.1; done"));
  ASSERT_EQ(WaitRunning(job), a);
  std::string b = StartNode("drain-b");
  auto drain = RunCli({"drain", a});
  ASSERT_EQ(drain.exit_code, 0) << drain.out << drain.err;
  EXPECT_EQ(Node(a).value("state", ""), "DRAINING");
  // It keeps running there, as the same attempt.
  auto running = Job(job);
  EXPECT_EQ(running.state, wire::JobState::RUNNING);
  EXPECT_EQ(running.replicas[0]->node_id, a);
  EXPECT_EQ(running.replicas[0]->attempt, 0);

  ct::WriteFile(marker, "go");
  EXPECT_EQ(WaitEnd(job).state, wire::JobState::SUCCEEDED);
  EXPECT_TRUE(WaitNodeState(a, "DRAINED"));
  EXPECT_EQ(Node(a).value("admin", ""), "drained");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(WaitRunning(Submit(JobFile("name: d" + std::to_string(i), "sleep 60"))), b);
  }
}

TEST_F(Day2Test, DrainNowMovesTheRunningJobElsewhereWithoutSpendingARestart) {
  std::string a = StartNode("now-a");
  std::string job = Submit(JobFile("name: mover", "sleep 600"));
  ASSERT_EQ(WaitRunning(job), a);
  std::string b = StartNode("now-b");
  auto drain = RunCli({"drain", a, "--now"});
  ASSERT_EQ(drain.exit_code, 0) << drain.out << drain.err;
  EXPECT_NE(drain.out.find("mover"), std::string::npos) << drain.out;
  std::string node;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto j = Job(job);
        return j.state == wire::JobState::RUNNING && j.replicas[0]->node_id == b &&
               j.replicas[0]->state == wire::ReplicaState::RUNNING;
      },
      30s))
      << cluster_->Logs();
  auto moved = Job(job);
  EXPECT_EQ(moved.restarts, 0);
  EXPECT_EQ(moved.replicas[0]->attempt, 1);
  bool noted = false;
  for (const auto& e : moved.events)
    noted |= e->message.find("drained by an admin") != std::string::npos;
  EXPECT_TRUE(noted);
  EXPECT_TRUE(WaitNodeState(a, "DRAINED"));
}

// `cohort drain NODE --gpu N --now`: the job pinned to GPU N is preempted and resumes on the node's
// other GPU (no restart spent); a drain of a GPU where nothing runs says so.
TEST_F(Day2Test, DrainOfOneGpuNowMovesItsJobToTheNodesOtherGpu) {
  const std::string node = UniqueNodeId("gpu-drain");
  ct::AgentOptions options{node, 2};
  options.cpus = 4;
  ASSERT_EQ(cluster_->StartAgent(options), "");
  const std::string gpu_job = cluster_->scratch("one-gpu-sleeps.yaml");
  ct::WriteFile(gpu_job,
                "name: pinned\nworker_pools:\n  - role: chief\n    resources: {gpus: 1, cpus: "
                "1}\n    process: {command: [sleep, '600']}\n");
  const std::string job = Submit(gpu_job);
  ASSERT_EQ(WaitRunning(job), node);
  const int gpu = Job(job).replicas[0]->gpus.at(0);
  const std::string other = std::to_string(1 - gpu);

  auto drain = RunCli({"drain", node, "--gpu", std::to_string(gpu), "--now"});
  ASSERT_EQ(drain.exit_code, 0) << drain.out << drain.err;
  EXPECT_EQ(drain.out, "node " + node + " GPU " + std::to_string(gpu) +
                           " cordoned: nothing new is placed on it; preempted to move elsewhere: "
                           "pinned (READY)\n");
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto j = Job(job);
        return j.state == wire::JobState::RUNNING && j.replicas[0]->attempt == 1 &&
               j.replicas[0]->state == wire::ReplicaState::RUNNING;
      },
      30s))
      << cluster_->Logs();
  const wire::JobInfoT moved = Job(job);
  EXPECT_EQ(moved.restarts, 0);
  EXPECT_EQ(moved.replicas[0]->gpus, std::vector<int>{1 - gpu});
  EXPECT_EQ(Node(node)["cordoned_gpus"], json::parse("[" + std::to_string(gpu) + "]"));

  auto idle = RunCli({"drain", node, "--gpu", std::to_string(gpu)});
  ASSERT_EQ(idle.exit_code, 0) << idle.out << idle.err;
  EXPECT_EQ(idle.out, "node " + node + " GPU " + std::to_string(gpu) +
                          " cordoned: nothing new is placed on it; nothing runs there (READY)\n");
  auto kept = RunCli({"drain", node, "--gpu", other});
  EXPECT_EQ(kept.out, "node " + node + " GPU " + other +
                          " cordoned: nothing new is placed on it; what runs there finishes: "
                          "pinned (READY)\n");
  EXPECT_EQ(Job(job).replicas[0]->attempt, 1) << "a drain without --now moved the job";
  auto nodes = RunCli({"nodes"});
  EXPECT_NE(nodes.out.find(node + " GPU " + other +
                           " is cordoned and in use until what runs there ends (cohort uncordon " +
                           node + " --gpu " + other + ")"),
            std::string::npos)
      << nodes.out;
  EXPECT_NE(nodes.out.find(node + " GPU " + std::to_string(gpu) + " is cordoned and free"),
            std::string::npos)
      << nodes.out;
  ASSERT_EQ(RunCli({"cancel", job}).exit_code, 0);
}

class Day2ShortTimeoutTest : public Day2Test {
 protected:
  ct::ClusterOptions Options() override {
    ct::ClusterOptions options;
    options.heartbeat_timeout = "2s";
    return options;
  }
};

TEST_F(Day2ShortTimeoutTest, ForgetRemovesALostNodeAndRefusesALiveOne) {
  std::string a = StartNode("forget-a");
  auto live = RunCli({"forget", a});
  EXPECT_EQ(live.exit_code, 2) << live.out << live.err;
  EXPECT_NE(live.err.find("not LOST"), std::string::npos) << live.err;
  EXPECT_FALSE(Node(a).empty());

  cluster_->agent(a).Kill();
  ASSERT_TRUE(WaitNodeState(a, "LOST"));
  auto forget = RunCli({"forget", a});
  ASSERT_EQ(forget.exit_code, 0) << forget.out << forget.err;
  EXPECT_TRUE(Node(a).empty());
  EXPECT_EQ(RunCli({"forget", a}).exit_code, 2);
}

TEST_F(Day2Test, DeleteRemovesAFinishedJobEverywhereAndRefusesARunningOne) {
  StartNode("delete-a");
  std::string done = Submit(JobFile("name: done-job", "echo hello-from-done"));
  ASSERT_EQ(WaitEnd(done).state, wire::JobState::SUCCEEDED);
  auto logs = RunCli({"logs", done});
  EXPECT_NE(logs.out.find("hello-from-done"), std::string::npos) << logs.out << logs.err;
  const std::string log_dir = cluster_->state_dir() + "/logs/" + done;
  EXPECT_TRUE(std::filesystem::exists(log_dir));

  std::string running = Submit(JobFile("name: busy-job", "sleep 600"));
  WaitRunning(running);
  auto refused = RunCli({"delete", running});
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("only a finished job"), std::string::npos) << refused.err;
  EXPECT_EQ(Job(running).state, wire::JobState::RUNNING);

  auto deleted = RunCli({"delete", done});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.out << deleted.err;
  EXPECT_EQ(RunCli({"status", done}).exit_code, 2);
  EXPECT_EQ(RunCli({"logs", done}).exit_code, 2);
  auto list = RunCli({"list", "--json"});
  EXPECT_EQ(list.out.find("done-job"), std::string::npos) << list.out;
  EXPECT_FALSE(std::filesystem::exists(log_dir));
  // Nor from the store: a restarted coordinator does not know it (a history query neither).
  cluster_->coordinator().Kill();
  ASSERT_EQ(cluster_->StartCoordinator(), "");
  EXPECT_EQ(RunCli({"status", done}).exit_code, 2);
  auto history = RunCli({"list", "--state", "succeeded", "--json"});
  EXPECT_EQ(history.out.find("done-job"), std::string::npos) << history.out;
  EXPECT_EQ(RunCli({"status", running}).exit_code, 0);
  // The name is free again.
  EXPECT_EQ(Submit(JobFile("name: done-job", "true")), "done-job");
}

class Day2RetentionTest : public Day2Test {
 protected:
  ct::ClusterOptions Options() override {
    ct::ClusterOptions options;
    options.coordinator_args = {"--job-retention", "2s"};
    return options;
  }
};

TEST_F(Day2RetentionTest, RetentionDeletesOldFinishedJobs) {
  StartNode("retain-a");
  std::string old = Submit(JobFile("name: short-lived", "true"));
  std::string running = Submit(JobFile("name: keeps-running", "sleep 600"));
  ASSERT_EQ(WaitEnd(old).state, wire::JobState::SUCCEEDED);
  auto client = cluster_->Client();
  EXPECT_TRUE(ct::WaitUntil(
      [&] { return client.GetJob(old).status().code() == StatusCode::kNotFound; }, 30s))
      << cluster_->Logs();
  EXPECT_TRUE(client.GetJob(running).ok());
  EXPECT_NE(cluster_->coordinator().Log().find("--job-retention"), std::string::npos);
}

TEST_F(Day2Test, StudiesListsAStudyAndCancelStudyStopsItsTrials) {
  StartNode("study-a");
  std::string study = cluster_->scratch("study.yaml");
  ct::WriteFile(study, ct::GridStudyYaml("lr-sweep", 4, 2, cluster_->scratch("study-out"),
                                         "      resources: {cpus: 1}\n"
                                         "      process:\n"
                                         "        command: [/bin/sh, -c, 'sleep 600']\n"));
  auto tune = RunCli({"tune", study});
  ASSERT_EQ(tune.exit_code, 0) << tune.out << tune.err;
  auto client = cluster_->Client();
  std::vector<std::string> trial_jobs;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto info = client.GetStudy("lr-sweep");
        if (!info.ok() || info->trials.size() < 2) return false;
        trial_jobs.clear();
        for (const auto& t : info->trials) trial_jobs.push_back(t->job);
        for (const auto& j : trial_jobs) {
          if (Job(j).state != wire::JobState::RUNNING) return false;
        }
        return true;
      },
      30s))
      << cluster_->Logs();

  auto list = RunCli({"studies"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("lr-sweep"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("ACTIVE"), std::string::npos) << list.out;
  auto list_json = json::parse(RunCli({"studies", "--json"}).out, nullptr, false);
  ASSERT_TRUE(list_json.is_array());
  ASSERT_EQ(list_json.size(), 1u);
  EXPECT_EQ(list_json[0]["name"], "lr-sweep");

  auto cancel = RunCli({"cancel", "lr-sweep"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err;
  EXPECT_NE(cancel.out.find("study lr-sweep: CANCELLED"), std::string::npos) << cancel.out;
  for (const auto& j : trial_jobs) EXPECT_EQ(WaitEnd(j).state, wire::JobState::CANCELLED) << j;
  // No new trials start, and it stays cancelled across a restart (journaled).
  cluster_->coordinator().Kill();
  ASSERT_EQ(cluster_->StartCoordinator(), "");
  auto after = cluster_->Client().GetStudy("lr-sweep");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->state, "CANCELLED");
  EXPECT_EQ(after->trials.size(), trial_jobs.size());
  auto neither = RunCli({"cancel", "no-such-thing"});
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_NE(neither.err.find("no job, array or study named 'no-such-thing'"), std::string::npos)
      << neither.err;
}

TEST_F(Day2Test, HyphenatedNamesNamePrefixAndSubmitName) {
  StartNode("names-a");
  EXPECT_EQ(Submit(JobFile("name: my-first-job", "true")), "my-first-job");

  std::string prefixed = JobFile("name_prefix: sweep-lr", "true");
  std::set<std::string> names;
  for (int i = 0; i < 3; ++i) {
    std::string name = Submit(prefixed);
    ASSERT_EQ(name.rfind("sweep-lr-", 0), 0u) << name;
    ASSERT_EQ(name.size(), std::string("sweep-lr-").size() + 8) << name;
    for (char c : name.substr(9)) EXPECT_TRUE(std::islower(c) || std::isdigit(c)) << name;
    names.insert(name);
    EXPECT_EQ(WaitEnd(name).state, wire::JobState::SUCCEEDED) << name;
  }
  EXPECT_EQ(names.size(), 3u);

  // --name overrides the file's name and its name_prefix.
  EXPECT_EQ(Submit(JobFile("name: in-file", "true"), {"--name", "from-flag"}), "from-flag");
  EXPECT_EQ(Submit(prefixed, {"--name", "flag-over-prefix"}), "flag-over-prefix");
  EXPECT_EQ(Job("from-flag").name, "from-flag");
  EXPECT_EQ(RunCli({"status", "in-file"}).exit_code, 2);

  auto bad = RunCli({"submit", prefixed, "--name", "9bad"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--name"), std::string::npos) << bad.err;
  auto both = RunCli({"submit", JobFile("name: a\nname_prefix: b", "true")});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("not both"), std::string::npos) << both.err;
}

TEST_F(Day2Test, ClientConfigIsReadByTheCliAndThePythonClient) {
  std::string a = StartNode("config-a");
  std::string config = cluster_->scratch("client.conf");
  ct::WriteFile(config, "coordinator = " + cluster_->client_endpoint() + "\ninsecure = true\n");
  // No --coordinator and no --insecure: both from the file.
  auto nodes = ct::RunProcess(
      COHORT_CLI_BIN, {"nodes", "--json"},
      {"COHORT_CLIENT_CONFIG=" + config, "COHORT_COORDINATOR=", "COHORT_INSECURE="}, 30s);
  ASSERT_EQ(nodes.exit_code, 0) << nodes.out << nodes.err;
  EXPECT_NE(nodes.out.find(a), std::string::npos) << nodes.out;
  // A flag overrides the file.
  const std::string elsewhere = "tcp://127.0.0.1:" + std::to_string(ct::PickFreePort());
  auto flag =
      ct::RunProcess(COHORT_CLI_BIN, {"--coordinator", elsewhere, "--timeout", "300ms", "nodes"},
                     {"COHORT_CLIENT_CONFIG=" + config}, 30s);
  EXPECT_EQ(flag.exit_code, 3) << flag.out << flag.err;
  EXPECT_NE(flag.err.find(elsewhere), std::string::npos) << flag.err;

  ASSERT_TRUE(std::filesystem::exists(std::string(COHORT_PYTHON_DIR) + "/cohort/wire/Envelope.py"))
      << "the cohort Python package (target cohort_python) is not in " << COHORT_PYTHON_DIR;
  auto python = ct::RunProcess(
      "/usr/bin/python3",
      {COHORT_CLIENT_CONFIG_CHECK, cluster_->client_endpoint(), cluster_->scratch("")},
      {"PYTHONPATH=" + std::string(COHORT_PYTHON_DIR)}, 60s);
  EXPECT_EQ(python.exit_code, 0) << python.out << python.err;
  EXPECT_NE(python.out.find("client config: ok"), std::string::npos) << python.out << python.err;
}

// Defaults per GPU: a replica with GPUs whose job file gives no cpus or memory_mb gets its
// queue's (or the coordinator's) CPUs and memory for each GPU, as Slurm's DefCpuPerGPU does and a
// Vertex machine type would; the stored spec, the job's events, a dry run, `cohort queues` and the
// replica's own OMP_NUM_THREADS say so.
class QueueDefaultsTest : public ct::ClusterTest {
 protected:
  void SetUp() override {
    if (!NeedBinaries({COHORT_CLI_BIN})) return;
    ct::ClusterOptions options;
    options.coordinator_args = {"--cpus-per-gpu", "3",       "--memory-mb-per-gpu",
                                "2048",           "--queue", "wide cpus-per-gpu=5"};
    options.heartbeat_timeout = "3s";  // it checks fits this long after its start
    ASSERT_NO_FATAL_FAILURE(StartOneNodeCluster({UniqueNodeId("defaults"), 2}, options));
  }

  // A job of one chief of `resources` that prints its OMP_NUM_THREADS; returns its file.
  std::string JobFile(const std::string& name, const std::string& resources,
                      const std::string& queue = "default") {
    const std::string file = cluster_->scratch(name + ".yaml");
    ct::WriteFile(file,
                  "name: " + name + "\nscheduling: {queue: " + queue +
                      "}\nworker_pools:\n  - role: chief\n    resources: " + resources +
                      "\n    process: {command: [/bin/sh, -c, 'echo threads=$OMP_NUM_THREADS']}"
                      "\n");
    return file;
  }
};

TEST_F(QueueDefaultsTest, AGpuReplicaWithoutCpusOrMemoryGetsItsQueuesPerGpu) {
  const std::string said =
      "pool chief: cpus 6 and memory_mb 4096 per replica, for its 2 GPUs (queue default's "
      "defaults: 3 CPUs and 2048 MB per GPU)";
  const std::string file = JobFile("fed", "{gpus: 2}");
  // Said as what the job would get, and got: no warning.
  auto dry = RunCli({"submit", file, "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.out << dry.err;
  EXPECT_NE(dry.out.find("would start now\n" + said + "\n"), std::string::npos) << dry.out;
  EXPECT_EQ(dry.err.find("warning"), std::string::npos) << dry.err;
  json dry_json = json::parse(RunCli({"submit", file, "--dry-run", "--json"}).out, nullptr, false);
  EXPECT_EQ(dry_json["defaults"], json::array({said})) << dry_json.dump();
  EXPECT_EQ(dry_json["warnings"], json::array()) << dry_json.dump();

  auto run = RunCli({"submit", file, "--wait"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.err.find("cohort: " + said + "\n"), std::string::npos) << run.err;
  auto logs = RunCli({"logs", "fed"});
  EXPECT_NE(logs.out.find("threads=6"), std::string::npos) << logs.out << logs.err;
  auto spec = RunCli({"status", "fed", "--spec"});
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_NE(spec.out.find("cpus: 6"), std::string::npos) << spec.out;
  EXPECT_NE(spec.out.find("memory_mb: 4096"), std::string::npos) << spec.out;
  auto status = RunCli({"status", "fed"});
  EXPECT_NE(status.out.find(said), std::string::npos) << status.out;

  // What the file gives is kept; a replica without GPUs keeps 1 CPU and no limit.
  auto mine = RunCli({"submit", JobFile("mine", "{gpus: 2, cpus: 1}"), "--wait"});
  ASSERT_EQ(mine.exit_code, 0) << mine.out << mine.err;
  EXPECT_NE(RunCli({"logs", "mine"}).out.find("threads=1"), std::string::npos);
  EXPECT_NE(RunCli({"status", "mine", "--spec"}).out.find("memory_mb: 4096"), std::string::npos);
  auto cpu_only = RunCli({"submit", JobFile("cpu-only", "{gpus: 0}"), "--wait"});
  ASSERT_EQ(cpu_only.exit_code, 0) << cpu_only.out << cpu_only.err;
  EXPECT_NE(RunCli({"logs", "cpu-only"}).out.find("threads=1"), std::string::npos);
  EXPECT_EQ(RunCli({"status", "cpu-only"}).out.find("per GPU"), std::string::npos);

  // Queue wide's 5 per GPU make 10 CPUs, more than the node's 8: refused, saying where they came
  // from and what to do (once the coordinator checks fits: a --heartbeat-timeout after its start).
  const std::string wide_file = JobFile("wide-job", "{gpus: 2}", "wide");
  ct::RunResult wide;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        wide = RunCli({"submit", wide_file, "--dry-run"});
        return wide.exit_code != 0;
      },
      20s, 200ms));
  EXPECT_EQ(wide.exit_code, 2) << wide.out << wide.err;
  EXPECT_NE(wide.err.find("cpus 10 and memory_mb 4096 per replica, for its 2 GPUs (queue wide's "
                          "defaults: 5 CPUs and 2048 MB per GPU); give resources.cpus and "
                          "memory_mb in the job file to ask for less"),
            std::string::npos)
      << wide.err;

  auto queues = RunCli({"queues"});
  ASSERT_EQ(queues.exit_code, 0) << queues.err;
  EXPECT_NE(queues.out.find("default: 3 CPUs and 2048 MB per GPU where a job file gives no cpus "
                            "or memory_mb"),
            std::string::npos)
      << queues.out;
  EXPECT_NE(queues.out.find("wide: 5 CPUs and 2048 MB per GPU"), std::string::npos) << queues.out;
  json listed = json::parse(RunCli({"queues", "--json"}).out, nullptr, false);
  ASSERT_TRUE(listed.is_array() && listed.size() == 2u) << listed.dump();
  EXPECT_EQ(listed[1]["cpus_per_gpu"], 5);
  EXPECT_EQ(listed[1]["memory_mb_per_gpu"], 2048);

  // A study's trial jobs take them as they are submitted.
  const std::string study = cluster_->scratch("study.yaml");
  ct::WriteFile(study, ct::GridStudyYaml(
                           "sweep", 2, 1, cluster_->scratch("study-out"),
                           "      resources: {gpus: 1}\n"
                           "      process:\n"
                           "        command: [/bin/sh, -c, 'echo threads=$OMP_NUM_THREADS']\n"));
  auto tune = RunCli({"tune", study});
  ASSERT_EQ(tune.exit_code, 0) << tune.out << tune.err;
  auto client = cluster_->Client();
  std::string trial_job;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto info = client.GetStudy("sweep");
        if (!info.ok() || info->trials.empty()) return false;
        trial_job = info->trials[0]->job;
        auto job = client.GetJob(trial_job);
        return job.ok() && job->state == wire::JobState::SUCCEEDED;
      },
      30s))
      << cluster_->Logs();
  EXPECT_NE(RunCli({"status", trial_job, "--spec"}).out.find("cpus: 3"), std::string::npos);
  EXPECT_NE(RunCli({"logs", trial_job}).out.find("threads=3"), std::string::npos);
}

}  // namespace
}  // namespace cohort
