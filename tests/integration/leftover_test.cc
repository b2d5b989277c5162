// Replicas that leave processes behind, on an agent with cgroups turned off (--cgroups off), with
// real cohort-coordinator and cohort-agent processes on loopback: a child in its own session, a
// double-forked daemon (both ignoring SIGTERM), and one more daemon that also clears its
// environment. Without cgroups the agent finds the first two by the COHORT_ATTEMPT_DIR they
// inherit (agent/process_launcher.h) and the last as its own descendant (it is a
// PR_SET_CHILD_SUBREAPER). Cancel, success and the agent's own shutdown are covered in-process by
// tests/agent (AgentWithoutCgroupsTest); here: an agent killed with SIGKILL, whose next start
// with the same node id and work dir kills what its replica left, and an agent's SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/client.h"
#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
using namespace std::chrono_literals;

// $1: where to write the pids. With a third argument, also the daemon that clears its
// environment. Then the replica runs until stopped.
constexpr char kDaemonizingScript[] = R"(out="$1"
setsid sh -c 'trap "" TERM; exec sleep 1000' </dev/null >/dev/null 2>&1 &
echo $! > "$out/setsid.pid"
(setsid sh -c 'trap "" TERM; sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "$0/daemon.pid"' "$out" &)
if [ -n "$2" ]; then
  (setsid env -i /bin/sh -c 'trap "" TERM; /bin/sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "$0/bare.pid"' "$out" &)
fi
while :; do sleep 0.1; done
)";

bool Alive(pid_t pid) {
  std::string stat = ct::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return paren != std::string::npos && stat.size() > paren + 2 && stat[paren + 2] != 'Z' &&
         stat[paren + 2] != 'X';
}

class LeftoverTest : public ct::ClusterTest {
 protected:
  void SetUp() override {
    if (!NeedBinaries()) return;
    ASSERT_NO_FATAL_FAILURE(StartCoordinator());
    ASSERT_EQ(StartAgent(), "");
  }

  void TearDown() override {
    ClusterTest::TearDown();
    for (pid_t pid : pids_) ::kill(pid, SIGKILL);  // whatever a failed test left
  }

  std::string StartAgent() {
    ct::AgentOptions options;
    options.node_id = node_;
    options.extra_args = {"--cgroups", "off"};
    return cluster_->StartAgent(options);
  }

  // Submits a job whose chief daemonizes as kDaemonizingScript says; returns the pids of what it
  // left, once they are all written.
  std::vector<pid_t> RunDaemonizingJob(bool with_bare) {
    std::string out = cluster_->scratch("pids");
    std::filesystem::create_directories(out);
    std::string script = cluster_->scratch("daemonize.sh");
    ct::WriteFile(script, kDaemonizingScript);
    std::string yaml =
        "name: leftover\nworker_pools:\n  - role: chief\n    replicas: 1\n"
        "    resources: {gpus: 0, cpus: 1}\n    process:\n"
        "      command: [/bin/sh, " +
        script + ", " + out + (with_bare ? ", bare" : "") + "]\nscheduling: {max_restarts: 0}\n";
    auto client = cluster_->Client();
    auto name = client.Submit(yaml);
    EXPECT_TRUE(name.ok()) << name.status().ToString();
    std::vector<std::string> files = {"setsid.pid", "daemon.pid"};
    if (with_bare) files.push_back("bare.pid");
    EXPECT_TRUE(ct::WaitUntil(
        [&] {
          for (const auto& f : files) {
            if (ct::ReadFile(out + "/" + f).empty()) return false;
          }
          return true;
        },
        20s))
        << cluster_->Logs();
    for (const auto& f : files) pids_.push_back(std::atoi(ct::ReadFile(out + "/" + f).c_str()));
    for (pid_t pid : pids_) EXPECT_TRUE(pid > 0 && Alive(pid)) << pid;
    return pids_;
  }

  bool AllGone(const std::vector<pid_t>& pids) {
    for (pid_t pid : pids) {
      if (Alive(pid)) return false;
    }
    return true;
  }

  const std::string node_ = UniqueNodeId("leftover");
  std::vector<pid_t> pids_;
};

TEST_F(LeftoverTest, NextStartOfASigkilledAgentKillsWhatItsReplicasLeft) {
  auto left = RunDaemonizingJob(/*with_bare=*/false);
  cluster_->agent(node_).Kill();
  // The replica's main process dies with its agent (PR_SET_PDEATHSIG); what it left does not.
  for (pid_t pid : left) EXPECT_TRUE(Alive(pid)) << pid;
  ASSERT_EQ(StartAgent(), "");
  EXPECT_TRUE(ct::WaitUntil([&] { return AllGone(left); }, 10s));
  EXPECT_NE(cluster_->agent(node_).Log().find("left by an earlier run"), std::string::npos)
      << cluster_->agent(node_).Log();
}

TEST_F(LeftoverTest, AgentShutdownKillsEveryProcessItsReplicasLeft) {
  auto left = RunDaemonizingJob(/*with_bare=*/true);
  cluster_->agent(node_).Signal(SIGTERM);
  EXPECT_TRUE(cluster_->agent(node_).Wait(20s).has_value());
  EXPECT_TRUE(ct::WaitUntil([&] { return AllGone(left); }, 10s));
}

}  // namespace
}  // namespace cohort
