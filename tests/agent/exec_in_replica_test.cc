// `cohort exec` on the agent, on real programs: shell commands run as a replica's environment,
// working directory, account and cgroup say, a stand-in container runtime (a script that prints
// what it was asked to exec), commands that are not found, hang or write too much, and the
// runner's bound on commands at once.
#include "agent/exec_in_replica.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>

#include "tests/agent/test_util.h"
#include "tests/testing/temp_dir_test.h"

namespace cohort::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class ExecInReplicaTest : public ::cohort::testing::TempDirTest {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ + "/attempt-0");
    fs::create_directories(dir_ + "/bin");
    target_.env = {{"PATH", dir_ + "/bin:/usr/bin:/bin"},
                   {"RANK", "3"},
                   {"CUDA_VISIBLE_DEVICES", "2"},
                   {"COHORT_REPLICA_PID", "stale"}};
    target_.working_dir = dir_ + "/attempt-0";
  }
  std::string Script(const std::string& path, const std::string& body) {
    ::cohort::testing::WriteFile(path, "#!/bin/sh\n" + body, /*executable=*/true);
    return path;
  }
  ExecResult Run(std::vector<std::string> argv, std::chrono::milliseconds timeout = 10s) {
    return RunInReplica(target_, 4242, argv, timeout);
  }

  ExecTarget target_;
};

TEST_F(ExecInReplicaTest, ACommandRunsWithTheReplicasEnvironmentInItsWorkingDirectory) {
  ExecResult r = Run({"sh", "-c",
                      "echo rank=$RANK gpus=$CUDA_VISIBLE_DEVICES pid=$COHORT_REPLICA_PID; pwd; "
                      "echo oops >&2; exit 7"});
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.output, "rank=3 gpus=2 pid=4242\n" + dir_ + "/attempt-0\noops\n");
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.truncated);
  // Nothing of the agent's own environment: only what the replica has.
  ::setenv("COHORT_EXEC_TEST_AGENT_ONLY", "1", 1);
  r = Run({"sh", "-c", "echo ${COHORT_EXEC_TEST_AGENT_ONLY:-unset}"});
  ::unsetenv("COHORT_EXEC_TEST_AGENT_ONLY");
  EXPECT_EQ(r.output, "unset\n");
  // stdin is empty: a command that reads it ends at once.
  r = Run({"cat"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "");
}

TEST_F(ExecInReplicaTest, TheCommandIsLookedUpOnTheReplicasPathAsItsOwnCommandIs) {
  Script(dir_ + "/bin/probe", "echo probe \"$@\"\n");
  ExecResult r = Run({"probe", "a b", "c"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "probe a b c\n");
  // A relative path with a slash is the working directory's.
  Script(dir_ + "/attempt-0/local.sh", "echo local\n");
  EXPECT_EQ(Run({"./local.sh"}).output, "local\n");
  r = Run({"no-such-tool", "--x"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.output, "cohort: no-such-tool: not found on the replica's PATH\n");
  r = Run({"/nowhere/tool"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.output, "cohort: /nowhere/tool: not found\n");
  ::cohort::testing::WriteFile(dir_ + "/bin/plain", "data", /*executable=*/false);
  r = Run({"plain"});
  EXPECT_EQ(r.exit_code, 126);
  EXPECT_EQ(r.output, "cohort: " + dir_ + "/bin/plain: not executable\n");
  // A working directory that went away: said so, nothing run.
  target_.working_dir = dir_ + "/gone";
  r = Run({"/bin/echo", "hi"});
  EXPECT_EQ(r.exit_code, 126);
  EXPECT_EQ(r.output, "cohort: cannot enter the replica's working directory\n");
}

TEST_F(ExecInReplicaTest, ACommandPastItsTimeoutIsKilledAndTooMuchOutputIsCut) {
  const auto start = std::chrono::steady_clock::now();
  ExecResult r = Run({"sh", "-c", "echo started; exec sleep 30"}, 300ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.output, "started\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  r = Run({"head", "-c", std::to_string(3 * kMaxExecOutputBytes), "/dev/zero"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.output.size(), kMaxExecOutputBytes);
}

TEST_F(ExecInReplicaTest, AContainerReplicasCommandGoesThroughItsRuntimesExec) {
  // The runtime's exec gets the command as given: the container has its own environment, PATH
  // and working directory, so nothing of the replica's is applied here.
  const std::string runtime = Script(dir_ + "/runtime", "printf '[%s]' \"$@\"; echo; exit 3\n");
  target_.container_exec = {runtime, "--root", "/run/x", "exec", "cohort-job.chief-0.0"};
  ExecResult r = Run({"nvidia-smi", "-L"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.output, "[--root][/run/x][exec][cohort-job.chief-0.0][nvidia-smi][-L]\n");
}

TEST_F(ExecInReplicaTest, ACommandRunsAsTheReplicasAccount) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root can run a command as another account";
  struct passwd* nobody = ::getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no account 'nobody' here";
  RunAs as;
  as.account = "nobody";
  as.uid = nobody->pw_uid;
  as.gid = nobody->pw_gid;
  as.groups = {nobody->pw_gid};
  target_.run_as = as;
  fs::permissions(dir_, fs::perms::all);
  fs::permissions(dir_ + "/attempt-0", fs::perms::all);
  ExecResult r = Run({"sh", "-c", "id -u; id -G"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output,
            std::to_string(nobody->pw_uid) + "\n" + std::to_string(nobody->pw_gid) + "\n");
}

TEST_F(ExecInReplicaTest, ACommandJoinsTheReplicasCgroup) {
  CgroupManager cgroups = ::cohort::testing::OwnCgroups("exec-node");
  if (!cgroups.available()) GTEST_SKIP() << "no writable cgroup v2 here: " << cgroups.reason();
  auto cgroup = cgroups.Create("exec" + std::to_string(::getpid()), 0, false, 0);
  ASSERT_TRUE(cgroup.ok()) << cgroup.status().ToString();
  target_.cgroup = *cgroup;
  ExecResult r = Run({"cat", "/proc/self/cgroup"});
  EXPECT_EQ(r.exit_code, 0);
  // "0::<the cgroup, from the cgroup2 mount's root>": its last two levels are the node's and
  // the replica's.
  const fs::path path(*cgroup);
  const std::string tail =
      "/" + path.parent_path().filename().string() + "/" + path.filename().string() + "\n";
  const size_t line = r.output.find("0::");
  ASSERT_NE(line, std::string::npos) << r.output;
  EXPECT_EQ(r.output.substr(line).size() >= tail.size() &&
                r.output.compare(r.output.size() - tail.size(), tail.size(), tail) == 0,
            true)
      << r.output << " does not end with " << tail;
  // A cgroup that is gone (the attempt ended): said so, nothing run.
  ASSERT_TRUE(CgroupManager::Remove(*cgroup).ok());
  r = Run({"/bin/echo", "hi"});
  EXPECT_EQ(r.exit_code, 126);
  EXPECT_EQ(r.output, "cohort: cannot join the replica's cgroup\n");
  ::cohort::testing::RemoveOwnCgroups(cgroups);
}

TEST(ExecRunnerTest, RunsCommandsOnThreadsOfTheirOwnAtMostSoManyAtOnce) {
  ExecTarget target;
  target.env = {{"PATH", "/usr/bin:/bin"}};
  target.working_dir = "/";
  auto runner = std::make_unique<ExecRunner>(2);
  auto header = [](uint64_t id) {
    wire::ExecOutputT h;
    h.exec_id = id;
    h.job = "train";
    h.replica = "chief-0";
    return h;
  };
  ASSERT_TRUE(runner->Start(header(1), target, 1, {"sleep", "30"}, 60s).ok());
  ASSERT_TRUE(runner->Start(header(2), target, 1, {"sh", "-c", "echo two; exit 2"}, 60s).ok());
  Status third = runner->Start(header(3), target, 1, {"true"}, 60s);
  EXPECT_EQ(third.code(), StatusCode::kResourceExhausted) << third.ToString();
  std::vector<wire::ExecOutputT> done;
  ASSERT_TRUE(::cohort::testing::WaitUntil(
      [&] {
        for (auto& d : runner->TakeFinished()) done.push_back(std::move(d));
        return !done.empty();
      },
      10s));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].exec_id, 2u);
  EXPECT_EQ(done[0].job, "train");
  EXPECT_EQ(done[0].exit_code, 2);
  EXPECT_EQ(std::string(done[0].output.begin(), done[0].output.end()), "two\n");
  EXPECT_EQ(runner->running(), 1u);
  EXPECT_EQ(runner->Start(header(4), target, 1, {}, 60s).code(), StatusCode::kInvalidArgument);
  // Destroyed with `sleep 30` running: it is killed, not waited for.
  const auto start = std::chrono::steady_clock::now();
  runner.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

// KillAll (an agent's live restart): the commands running then end killed, each saying why; one
// started after it runs as any other.
TEST(ExecRunnerTest, KillAllEndsTheCommandsRunningThenSayingWhy) {
  ExecTarget target;
  target.env = {{"PATH", "/usr/bin:/bin"}};
  target.working_dir = "/";
  ExecRunner runner(4);
  wire::ExecOutputT header;
  header.exec_id = 1;
  ASSERT_TRUE(
      runner.Start(header, target, 1, {"sh", "-c", "echo started; exec sleep 30"}, 60s).ok());
  ASSERT_TRUE(::cohort::testing::WaitUntil([&] { return runner.running() == 1; }, 5s));
  runner.KillAll("the agent restarts");
  header.exec_id = 2;
  ASSERT_TRUE(runner.Start(header, target, 1, {"sh", "-c", "sleep 0.3; echo later"}, 60s).ok());
  std::map<uint64_t, wire::ExecOutputT> done;
  ASSERT_TRUE(::cohort::testing::WaitUntil(
      [&] {
        for (auto& d : runner.TakeFinished()) done[d.exec_id] = std::move(d);
        return done.size() == 2;
      },
      10s));
  EXPECT_EQ(done[1].killed_because, "the agent restarts");
  EXPECT_EQ(done[1].exit_code, 128 + SIGKILL);
  EXPECT_FALSE(done[1].timed_out);
  EXPECT_EQ(done[2].killed_because, "");
  EXPECT_EQ(done[2].exit_code, 0);
  EXPECT_EQ(std::string(done[2].output.begin(), done[2].output.end()), "later\n");
}

}  // namespace
}  // namespace cohort::agent
