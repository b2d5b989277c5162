// The storage check end to end (issue 16 part 5), with a real cohort-coordinator given
// --output-root and real agents on loopback: one agent sees the output root where the coordinator
// does (shared), the other does not (not shared: it checks another directory, or, where a mount
// namespace can be made, another filesystem is mounted at the root's path). `cohort nodes` shows
// each verdict; jobs with the default output dir (<output_root>/<job>) are placed and restarted
// only on the sharing node, even where best fit would pick the other; a job whose output dir is
// outside the root gets the submit warning and runs anywhere.
//
// The sharing node has 2 GPUs and the other 1, so that best fit (fewest free GPUs) would place a
// one-GPU job on the other node: a job that lands on the sharing node every time was steered by
// the storage check, not by luck.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "common/client.h"
#include "common/storage_marker.h"
#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
using namespace std::chrono_literals;

class StorageClusterTest : public ct::ClusterTest {
 protected:
  void SetUp() override {
    if (!NeedBinaries({COHORT_CLI_BIN})) return;
    ct::ClusterOptions options;
    options.heartbeat_timeout = "3s";  // the node-loss test waits for it
    // Given with a trailing slash: the coordinator normalises it, and names it without.
    options.coordinator_args = {"--output-root", root_ + "/"};
    ASSERT_NO_FATAL_FAILURE(StartCoordinator(options));
  }

  // The sharing node: the coordinator's root, read where it is.
  std::string StartSharingNode(const std::string& prefix, int gpus) {
    std::string id = UniqueNodeId(prefix);
    std::string started = cluster_->StartAgent({id, gpus});
    return started.empty() ? id : "";
  }

  // A node that does not share the root: one GPU, and the agent checks another directory.
  ct::AgentOptions ElsewhereNode() const {
    return {UniqueNodeId("far"), 1, 8, 16384, "2s", {"--output-root", root_dir_.Join("elsewhere")}};
  }

  // Starts `far_node` (a node that does not share the root) and a sharing node with 2 GPUs (best
  // fit prefers the other's single GPU); their node ids go to *far and *near. A node that does not
  // start is a fatal failure.
  void StartFarAndNear(const ct::AgentOptions& far_node, std::string* far, std::string* near) {
    ASSERT_EQ(cluster_->StartAgent(far_node), "");
    *far = far_node.node_id;
    *near = StartSharingNode("near", 2);
    ASSERT_FALSE(near->empty()) << cluster_->Logs();
  }

  static std::string Storage(CoordinatorClient& client, const std::string& node) {
    auto nodes = client.ListNodes();
    if (!nodes.ok()) return "";
    for (const auto& n : *nodes) {
      if (n.node_id == node) return n.storage;
    }
    return "";
  }

  // Waits until `node`'s verdict is no longer "checking" (the agent learns the root when it
  // registers and reports with its next heartbeat) and returns it.
  std::string WaitForVerdict(CoordinatorClient& client, const std::string& node) {
    std::string verdict;
    EXPECT_TRUE(ct::WaitUntil(
        [&] {
          verdict = Storage(client, node);
          return !verdict.empty() && verdict != "checking";
        },
        30s))
        << node << ": " << verdict;
    return verdict;
  }

  // A chief and `replicas` - 1 workers, one GPU each.
  static std::string JobYaml(const std::string& name, int replicas, const std::string& command,
                             const std::string& output_dir = "") {
    auto pool = [&](const std::string& role, int count) {
      return "  - role: " + role + "\n    replicas: " + std::to_string(count) +
             "\n    resources: {gpus: 1, cpus: 1}\n    process:\n      command: " + command + "\n";
    };
    return "name: " + name + "\n" + (output_dir.empty() ? "" : "output_dir: " + output_dir + "\n") +
           "worker_pools:\n" + pool("chief", 1) +
           (replicas > 1 ? pool("worker", replicas - 1) : "") +
           "scheduling: {timeout: 5m, max_restarts: 3}\n";
  }

  // The node of every replica the job has now.
  static std::vector<std::string> NodesOf(const wire::JobInfoT& job) {
    std::vector<std::string> nodes;
    for (const auto& r : job.replicas) nodes.push_back(r->node_id);
    return nodes;
  }

  static bool HasEvent(const wire::JobInfoT& job, const std::string& text) {
    for (const auto& e : job.events) {
      if (e->message.find(text) != std::string::npos) return true;
    }
    return false;
  }

  // The `cohort nodes` line of `node`.
  std::string NodesLine(const std::string& node) {
    ct::RunResult nodes = RunCli({"nodes"});
    EXPECT_EQ(nodes.exit_code, 0) << nodes.err;
    EXPECT_NE(nodes.out.find("STORAGE"), std::string::npos) << nodes.out;
    std::istringstream lines(nodes.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(node + " ", 0) == 0) return line;
    }
    ADD_FAILURE() << "no line for " << node << " in:\n" << nodes.out;
    return "";
  }

  // The output root (its own directory, so that the cluster's scratch dir is outside it).
  ct::TempDir root_dir_{"cohort-storage-root"};
  const std::string root_ = root_dir_.Join("shared");
};

TEST_F(StorageClusterTest, NodesShowVerdictsAndDefaultOutputJobsRunOnlyWhereTheRootIsShared) {
  std::string far, near;
  ASSERT_NO_FATAL_FAILURE(StartFarAndNear(ElsewhereNode(), &far, &near));
  auto client = cluster_->Client();

  // The verdicts, through the API and in `cohort nodes`.
  EXPECT_EQ(WaitForVerdict(client, near), "shared");
  const std::string far_verdict = "not shared: the agent checks " + root_dir_.Join("elsewhere") +
                                  ", not the output root " + root_;
  EXPECT_EQ(WaitForVerdict(client, far), far_verdict);
  EXPECT_NE(NodesLine(near).find(" shared"), std::string::npos);
  EXPECT_EQ(NodesLine(near).find("not shared"), std::string::npos);
  EXPECT_NE(NodesLine(far).find(far_verdict), std::string::npos);
  // The coordinator wrote its marker there.
  EXPECT_TRUE(ReadStorageMarker(root_).ok());

  // One-GPU jobs with the default output dir: under the root, no warning, on the sharing node
  // every time (best fit alone would take the other node's single GPU).
  for (int i = 0; i < 3; ++i) {
    const std::string name = "one" + std::to_string(i);
    wire::SubmitJobReplyT reply;
    auto submitted = client.Submit(JobYaml(name, 1, "[/bin/true]"), &reply);
    ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
    EXPECT_TRUE(reply.warnings.empty()) << reply.warnings.front();
    wire::JobInfoT job = ct::WaitForJobEnd(client, name, 60s);
    ASSERT_EQ(job.state, wire::JobState::SUCCEEDED) << job.message;
    EXPECT_EQ(job.output_dir, root_ + "/" + name);
    EXPECT_EQ(NodesOf(job), std::vector<std::string>{near}) << name;
  }

  // Three one-GPU replicas fit the idle cluster (3 GPUs) but not the sharing node (2): the job
  // waits, saying why, while the other node's GPU is free.
  auto wide_submitted = client.Submit(JobYaml("wide", 3, "[/bin/sleep, '1000']"));
  ASSERT_TRUE(wide_submitted.ok()) << wide_submitted.status().ToString();
  std::string message;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        auto job = client.GetJob("wide");
        message = job.ok() ? job->message : "";
        return message.find("on the nodes that share the output root") != std::string::npos;
      },
      30s))
      << message;
  auto wide = client.GetJob("wide");
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->state, wire::JobState::QUEUED) << wide->message;
  ASSERT_TRUE(client.Cancel("wide").ok());
  EXPECT_EQ(ct::WaitForJobEnd(client, "wide", 30s).state, wire::JobState::CANCELLED);

  // Outside the root: warned at submit (the reply, a job event, the CLI's stderr), placed on any
  // node. While the sharing node's GPUs are taken, it runs on the other node.
  ASSERT_TRUE(client.Submit(JobYaml("hold", 2, "[/bin/sleep, '1000']")).ok());
  ASSERT_TRUE(ct::WaitForJobState(client, "hold", wire::JobState::RUNNING, 30s));
  EXPECT_EQ(NodesOf(*client.GetJob("hold")), (std::vector<std::string>{near, near}));
  const std::string local = cluster_->scratch("local");
  const std::string expected_warning =
      "output dir " + local + " is not on the checked shared storage (the output root " + root_ +
      "); a restart on another node will not find its "
      "checkpoints";
  wire::SubmitJobReplyT reply;
  ASSERT_TRUE(client.Submit(JobYaml("outside", 1, "[/bin/true]", local), &reply).ok());
  EXPECT_EQ(reply.warnings, std::vector<std::string>{expected_warning});
  wire::JobInfoT outside = ct::WaitForJobEnd(client, "outside", 60s);
  EXPECT_EQ(outside.state, wire::JobState::SUCCEEDED) << outside.message;
  EXPECT_EQ(NodesOf(outside), std::vector<std::string>{far});
  EXPECT_TRUE(HasEvent(outside, "warning: " + expected_warning));

  const std::string file = cluster_->scratch("outside-cli.yaml");
  ct::WriteFile(file, JobYaml("outside_cli", 1, "[/bin/true]", cluster_->scratch("local2")));
  ct::RunResult cli = RunCli({"submit", file});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_EQ(cli.out, "outside_cli\n");
  EXPECT_NE(cli.err.find("cohort: warning: output dir " + cluster_->scratch("local2") +
                         " is not on the checked shared storage"),
            std::string::npos)
      << cli.err;
  EXPECT_EQ(ct::WaitForJobEnd(client, "outside_cli", 60s).state, wire::JobState::SUCCEEDED);
  ASSERT_TRUE(client.Cancel("hold").ok());
  EXPECT_EQ(ct::WaitForJobEnd(client, "hold", 30s).state, wire::JobState::CANCELLED);
}

TEST_F(StorageClusterTest, RestartAfterNodeLossGoesOnlyToASharingNode) {
  std::string far, near;
  ASSERT_NO_FATAL_FAILURE(StartFarAndNear(ElsewhereNode(), &far, &near));
  auto client = cluster_->Client();
  ASSERT_EQ(WaitForVerdict(client, near), "shared");
  ASSERT_NE(WaitForVerdict(client, far), "shared");

  ASSERT_TRUE(client.Submit(JobYaml("moving", 1, "[/bin/sleep, '1000']")).ok());
  ASSERT_TRUE(ct::WaitForJobState(client, "moving", wire::JobState::RUNNING, 30s));
  EXPECT_EQ(NodesOf(*client.GetJob("moving")), std::vector<std::string>{near});

  // The sharing node is lost. The job's restart waits for a node that shares the root, though
  // the other node's GPU is free; no replica of it goes there.
  cluster_->agent(near).Kill();
  std::string message;
  bool ever_on_far = false;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        auto job = client.GetJob("moving");
        if (!job.ok() || job->replicas.empty()) return false;
        for (const auto& node : NodesOf(*job)) ever_on_far |= node == far;
        message = job->replicas[0]->message;
        return job->restarts >= 1 &&
               message.find(
                   "waiting to restart: waiting for a node that shares the output "
                   "root") != std::string::npos;
      },
      60s))
      << message;
  EXPECT_FALSE(ever_on_far);

  // A sharing node joins: the job restarts there.
  const std::string near2 = StartSharingNode("near2", 1);
  ASSERT_FALSE(near2.empty()) << cluster_->Logs();
  wire::JobInfoT moved;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        auto job = client.GetJob("moving");
        if (!job.ok()) return false;
        for (const auto& node : NodesOf(*job)) ever_on_far |= node == far;
        moved = *job;
        return job->state == wire::JobState::RUNNING && NodesOf(*job) == std::vector{near2};
      },
      60s))
      << moved.message;
  EXPECT_FALSE(ever_on_far);
  EXPECT_EQ(Storage(client, near2), "shared");
  ASSERT_TRUE(client.Cancel("moving").ok());
  EXPECT_EQ(ct::WaitForJobEnd(client, "moving", 30s).state, wire::JobState::CANCELLED);
}

// A node whose own filesystem is mounted at the root's path (the usual mistake: the share is not
// mounted there, or another one is): the agent runs in a mount namespace of its own where another
// directory, holding another coordinator's marker, is bind-mounted over the root.
TEST_F(StorageClusterTest, AnotherFilesystemAtTheRootsPathIsNotShared) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a mount namespace with a bind mount";
  const std::string other = root_dir_.Join("other-filesystem");
  ASSERT_TRUE(WriteStorageMarker(other, NewStorageToken()).ok());
  std::filesystem::create_directories(root_);
  ct::RunResult probe = ct::RunProcess(
      "/usr/bin/unshare",
      {"--mount", "--propagation", "private", "/bin/mount", "--bind", other, root_}, {}, 30s);
  if (probe.exit_code != 0) {
    GTEST_SKIP() << "cannot bind-mount in a new mount namespace here (unshare: " << probe.err
                 << ")";
  }
  ct::AgentOptions options{UniqueNodeId("far"), 1};
  options.wrapper = {"/usr/bin/unshare",
                     "--mount",
                     "--propagation",
                     "private",
                     "/bin/sh",
                     "-c",
                     "mount --bind \"$0\" \"$1\" && shift && exec \"$@\"",
                     other,
                     root_};
  std::string far, near;
  ASSERT_NO_FATAL_FAILURE(StartFarAndNear(options, &far, &near));
  auto client = cluster_->Client();
  EXPECT_EQ(WaitForVerdict(client, near), "shared");
  EXPECT_EQ(WaitForVerdict(client, far),
            "not shared: " + root_ +
                " holds another storage marker than the coordinator's (another filesystem is "
                "mounted there)");
  EXPECT_NE(NodesLine(far).find("holds another storage marker"), std::string::npos);

  ASSERT_TRUE(client.Submit(JobYaml("one", 1, "[/bin/true]")).ok());
  wire::JobInfoT job = ct::WaitForJobEnd(client, "one", 60s);
  EXPECT_EQ(job.state, wire::JobState::SUCCEEDED) << job.message;
  EXPECT_EQ(NodesOf(job), std::vector<std::string>{near});
}

}  // namespace
}  // namespace cohort
