// Replicas that leave processes behind, on an agent with cgroups turned off (--cgroups off), with
// real cohort-coordinator and cohort-agent processes on loopback: a child in its own session, a
// double-forked daemon (both ignoring SIGTERM), and one more daemon that also clears its
// environment (the "bare" one).
//
// Where the agent runs as root it gives each replica a PID namespace (agent/process_launcher.h):
// then all three, the bare daemon included, die on cancel, on success, on a failure that is
// restarted, at the agent's shutdown, and with an agent killed by SIGKILL (PR_SET_PDEATHSIG on
// the namespace's init: all are gone before the next start, whose sweep is for an init that
// missed its death signal and is not provoked here). Those tests skip elsewhere, saying why.
// Without namespaces the agent finds the first two by the COHORT_ATTEMPT_DIR they inherit and the
// bare one only as its own descendant (it is a PR_SET_CHILD_SUBREAPER): the SIGKILL test then
// checks that the next start kills the first two, the shutdown test all three. A container
// replica outlives a SIGKILLed agent whatever the mode; the next start removes it by its id.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/client.h"
#include "tests/testing/cluster_test.h"
#include "tests/testing/oci_image.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
using namespace std::chrono_literals;

// $1: where to write the pids. With a second argument, also the daemon that clears its
// environment. Then the replica runs until stopped, or until $1/go exists: then it exits with
// the code in that file.
constexpr char kDaemonizingScript[] = R"sh(out="$1"
readlink /proc/self/ns/pid > "$out/ns.tmp" && mv "$out/ns.tmp" "$out/ns"
setsid sh -c 'trap "" TERM; exec sleep 1000' </dev/null >/dev/null 2>&1 &
echo $! > "$out/setsid.pid"
(setsid sh -c 'trap "" TERM; sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "$0/daemon.pid"' "$out" &)
if [ -n "$2" ]; then
  (setsid env -i /bin/sh -c 'trap "" TERM; /bin/sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "$0/bare.pid"' "$out" &)
fi
while [ ! -s "$out/go" ]; do sleep 0.1; done
exit "$(cat "$out/go")"
)sh";

// The host pid of the process that is `ns_pid` in the PID namespace `ns` ("pid:[inode]", as
// /proc/PID/ns/pid reads): the pids a replica writes are its namespace's. 0 when none is.
pid_t HostPid(const std::string& ns, pid_t ns_pid) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    std::error_code ec;
    if (std::filesystem::read_symlink(entry.path() / "ns/pid", ec).string() != ns) continue;
    std::string status = ct::ReadFile(entry.path().string() + "/status");
    auto line = status.find("\nNSpid:");
    if (line == std::string::npos) continue;
    std::istringstream fields(status.substr(line + 7, status.find('\n', line + 1) - line - 7));
    pid_t innermost = 0;
    for (pid_t value; fields >> value;) innermost = value;
    if (innermost == ns_pid) return std::atoi(name.c_str());
  }
  return 0;
}

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
    ASSERT_TRUE(ct::WaitUntil([&] { return !Mode().empty(); }, 20s)) << AgentLog();
  }

  std::string AgentLog() { return cluster_->agent(node_).Log(); }

  // "pidns" or "none", as the agent's start said; "" until it has.
  std::string Mode() {
    std::string log = AgentLog();
    if (log.find("run in PID namespaces of their own") != std::string::npos) return "pidns";
    if (log.find("no PID namespace per replica") != std::string::npos) return "none";
    return "";
  }

  // The reason to skip a test that needs PID namespaces; "" where the agent uses them.
  std::string NoNamespaces() {
    if (Mode() == "pidns") return "";
    std::string log = AgentLog();
    auto at = log.find("no PID namespace per replica");
    return "the agent gives replicas no PID namespace here (it needs root or CAP_SYS_ADMIN): " +
           log.substr(at, log.find('\n', at) - at);
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
  std::vector<pid_t> RunDaemonizingJob(bool with_bare, int max_restarts = 0) {
    out_ = cluster_->scratch("pids");
    const std::string& out = out_;
    std::filesystem::create_directories(out);
    std::string script = cluster_->scratch("daemonize.sh");
    ct::WriteFile(script, kDaemonizingScript);
    std::string yaml =
        "name: leftover\nworker_pools:\n  - role: chief\n    replicas: 1\n"
        "    resources: {gpus: 0, cpus: 1}\n    process:\n"
        "      command: [/bin/sh, " +
        script + ", " + out + (with_bare ? ", bare" : "") +
        "]\nscheduling: {max_restarts: " + std::to_string(max_restarts) + "}\n";
    auto client = cluster_->Client();
    auto name = client.Submit(yaml);
    EXPECT_TRUE(name.ok()) << name.status().ToString();
    if (name.ok()) job_ = *name;
    std::vector<std::string> files = {"ns", "setsid.pid", "daemon.pid"};
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
    std::string ns = ct::ReadFile(out + "/ns");
    if (!ns.empty() && ns.back() == '\n') ns.pop_back();
    for (const auto& f : files) {
      if (f != "ns") pids_.push_back(HostPid(ns, std::atoi(ct::ReadFile(out + "/" + f).c_str())));
    }
    for (pid_t pid : pids_) EXPECT_TRUE(pid > 0 && Alive(pid)) << pid;
    return pids_;
  }

  bool AllGone(const std::vector<pid_t>& pids) {
    for (pid_t pid : pids) {
      if (Alive(pid)) return false;
    }
    return true;
  }

  // Lets the replica exit with `code`.
  void Finish(int code) { ct::WriteFile(out_ + "/go", std::to_string(code) + "\n"); }

  const std::string node_ = UniqueNodeId("leftover");
  std::vector<pid_t> pids_;
  std::string out_;
  std::string job_;
};

TEST_F(LeftoverTest, NextStartOfASigkilledAgentKillsWhatItsReplicasLeft) {
  const bool pidns = Mode() == "pidns";
  auto left = RunDaemonizingJob(/*with_bare=*/pidns);
  cluster_->agent(node_).Kill();
  if (pidns) {
    // The namespace's init dies with the agent (PR_SET_PDEATHSIG), and everything else with it.
    EXPECT_TRUE(ct::WaitUntil([&] { return AllGone(left); }, 20s));
  } else {
    // The replica's main process dies with its agent (PR_SET_PDEATHSIG); what it left does not.
    for (pid_t pid : left) EXPECT_TRUE(Alive(pid)) << pid;
  }
  ASSERT_EQ(StartAgent(), "");
  EXPECT_TRUE(ct::WaitUntil([&] { return AllGone(left); }, 20s));
  if (!pidns) {
    EXPECT_NE(AgentLog().find("left by an earlier run"), std::string::npos) << AgentLog();
  }
}

// A container replica outlives a SIGKILLed agent (its runtime's foreground process dies with the
// agent, the container does not) and would hold its GPUs while the coordinator hands them out
// again. The agent's next start removes it: the agent's tag in its id says it is this agent's.
TEST_F(LeftoverTest, NextStartOfASigkilledAgentRemovesTheContainersItLeft) {
  if (std::string why = ct::WhyNoContainers(); !why.empty()) GTEST_SKIP() << why;
  ct::TempDir dir("cohort-leftover-image");
  const std::string layout = dir.Join("sleeper");
  ASSERT_NO_FATAL_FAILURE(ct::MakeBusyboxImage(
      dir.path(), layout, {"sleep", "touch"},
      {"/bin/sh", "-c", "touch \"$AIP_MODEL_DIR/../up\"; exec sleep 1000"}, {}));
  const std::string output = cluster_->scratch("boxed-out");
  auto client = cluster_->Client();
  auto job = client.Submit(ct::OneContainerJob("boxed", output, layout));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(ct::WaitUntil([&] { return std::filesystem::exists(output + "/up"); }, 60s))
      << cluster_->Logs();
  // "containers run with runc, their ids cohort-<tag>-<job>-<replica>-<attempt>"
  std::smatch said;
  const std::string log = AgentLog();
  ASSERT_TRUE(std::regex_search(
      log, said, std::regex(R"(containers run with (\w+), their ids cohort-([0-9a-f]{8})-)")))
      << log;
  std::string runtime = "/usr/sbin/" + said[1].str();
  if (!std::filesystem::exists(runtime)) runtime = "/usr/bin/" + said[1].str();
  const std::string id = "cohort-" + said[2].str() + "-boxed-chief-0-0";
  auto state = [&] { return ct::RunProcess(runtime, {"state", id}); };
  ASSERT_EQ(state().exit_code, 0) << state().err;

  cluster_->agent(node_).Kill();
  // Still running with no agent: what this test is about.
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        const ct::RunResult now = state();
        return now.exit_code == 0 && now.out.find("\"running\"") != std::string::npos;
      },
      5s));
  // StartAgent returns once the agent said READY=1, its start's sweeps done.
  ASSERT_EQ(StartAgent(), "");
  EXPECT_NE(AgentLog().find("removed 1 container(s) left by an earlier run of this agent"),
            std::string::npos)
      << AgentLog();
  const ct::RunResult after = state();
  EXPECT_NE(after.exit_code, 0) << "container " << id << " is still there: " << after.out;
  // The job goes on (attempt 1, the node back): its end is the agent's to clean up, not the
  // teardown's, which could stop the agent while the runtime creates the next container.
  (void)client.Cancel("boxed");
  ct::WaitForReplicasEnded(client, "boxed", 30s);
}

TEST_F(LeftoverTest, AgentShutdownKillsEveryProcessItsReplicasLeft) {
  auto left = RunDaemonizingJob(/*with_bare=*/true);
  cluster_->agent(node_).Signal(SIGTERM);
  EXPECT_TRUE(cluster_->agent(node_).Wait(20s).has_value());
  EXPECT_TRUE(ct::WaitUntil([&] { return AllGone(left); }, 20s));
}

TEST_F(LeftoverTest, CancelKillsADaemonThatClearedItsEnvironment) {
  if (std::string why = NoNamespaces(); !why.empty()) GTEST_SKIP() << why;
  auto left = RunDaemonizingJob(/*with_bare=*/true);
  auto client = cluster_->Client();
  ASSERT_TRUE(client.Cancel(job_).ok());
  EXPECT_TRUE(ct::WaitUntil([&] { return AllGone(left); }, 30s)) << cluster_->Logs();
  // The agent is still running: it was the replica's end, not the agent's, that killed them.
  EXPECT_TRUE(cluster_->agent(node_).running());
}

TEST_F(LeftoverTest, SuccessKillsADaemonThatClearedItsEnvironment) {
  if (std::string why = NoNamespaces(); !why.empty()) GTEST_SKIP() << why;
  auto left = RunDaemonizingJob(/*with_bare=*/true);
  Finish(0);
  EXPECT_TRUE(ct::WaitUntil([&] { return AllGone(left); }, 30s)) << cluster_->Logs();
  auto client = cluster_->Client();
  EXPECT_TRUE(ct::WaitForJobState(client, job_, wire::JobState::SUCCEEDED, 30s));
  EXPECT_TRUE(cluster_->agent(node_).running());
}

TEST_F(LeftoverTest, ARestartedFailureLeavesNothingOfTheFailedAttempt) {
  if (std::string why = NoNamespaces(); !why.empty()) GTEST_SKIP() << why;
  auto left = RunDaemonizingJob(/*with_bare=*/true, /*max_restarts=*/1);
  // Attempt 0 exits 143 (retryable: as if terminated) and is restarted; attempt 1 finds `go`
  // and exits 143 too, which fails the job (max_restarts 1).
  Finish(143);
  EXPECT_TRUE(ct::WaitUntil([&] { return AllGone(left); }, 30s)) << cluster_->Logs();
  auto client = cluster_->Client();
  EXPECT_TRUE(ct::WaitForJobState(client, job_, wire::JobState::FAILED, 30s));
  auto job = client.GetJob(job_);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->restarts, 1);  // attempt 0 was restarted
}

}  // namespace
}  // namespace cohort
