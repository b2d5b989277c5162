// cohort-replica-init (agent/replica_init.cc) as PID 1 of a replica's PID namespace, launched by
// a real ProcessLauncher: signals forwarded to a script that traps them, exit statuses and deaths
// by signal passed through, one delivery of a stop signal to each process of the replica (with and
// without a cgroup), orphans reaped, the namespace's teardown killing a double-forked child that
// cleared its environment, the whole namespace dying with a SIGKILLed launcher, a child that never
// starts the command killed at the launch deadline, and the host's later mounts reaching the
// replica. Namespaces need root (CAP_SYS_ADMIN): elsewhere these tests skip, saying so.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include "agent/proc_scan.h"
#include "agent/process_launcher.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

using std::chrono::seconds;
using testing::ProcessAlive;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitUntil;

// Every child of `parent`, zombies included.
std::set<pid_t> ChildrenOf(pid_t parent) {
  std::set<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    std::string stat = ReadFile(entry.path().string() + "/stat");
    auto paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 1));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.insert(std::atoi(name.c_str()));
  }
  return out;
}

// The live descendants of `root` running `program` (argv[0]).
std::vector<pid_t> Running(pid_t root, const std::string& program) {
  std::vector<pid_t> out;
  for (pid_t pid : Descendants(root)) {
    std::string cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmdline.substr(0, cmdline.find('\0')) == program) out.push_back(pid);
  }
  return out;
}

class ReplicaInitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status probe = ProcessLauncher::ProbePidNamespaces();
    if (!probe.ok()) GTEST_SKIP() << "cannot create PID namespaces here: " << probe.ToString();
  }
  LaunchRequest Request(const std::string& script) {
    LaunchRequest r;
    r.job = "job1";
    r.replica = "chief-0";
    r.argv = {"/bin/sh", "-c", script};
    r.env = {{"PATH", "/usr/bin:/bin"}};
    r.working_dir = dir_.path();
    r.log_path = dir_.path() + "/attempt-0.log";
    return r;
  }
  std::unique_ptr<ReplicaProcess> Launch(const LaunchRequest& r) {
    auto p = launcher_.Launch(r);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? std::move(*p) : nullptr;
  }
  void Reap(ReplicaProcess& p) {
    ASSERT_TRUE(testing::Reap(p, seconds(20))) << "the replica did not exit";
  }
  bool Exists(const std::string& file) { return std::filesystem::exists(dir_.path() + "/" + file); }
  void Touch(const std::string& file) { testing::WriteFile(dir_.path() + "/" + file, ""); }

  TempDir dir_;
  ProcessLauncher launcher_{CgroupManager(), COHORT_REPLICA_INIT};
};

TEST_F(ReplicaInitTest, ForwardsSignalsToAScriptThatTrapsThemAndIsNotPid1) {
  auto p =
      Launch(Request("trap 'echo got-usr1' USR1; trap 'echo got-term; exit 7' TERM; "
                     "echo $$ > nspid; touch ready; while :; do sleep 0.05; done"));
  ASSERT_TRUE(p);
  ASSERT_TRUE(WaitUntil([&] { return Exists("ready"); }, seconds(20)));
  EXPECT_EQ(ReadFile(dir_.path() + "/nspid"), "2\n");  // init is 1
  pid_t command = p->command_pid();
  EXPECT_NE(command, p->pid());
  EXPECT_EQ(NamespacePid(command), 2);
  EXPECT_EQ(NamespacePid(p->pid()), 1);
  p->Signal(SIGUSR1);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return ReadFile(dir_.path() + "/attempt-0.log").find("got-usr1") != std::string::npos;
      },
      seconds(20)));
  p->Signal(SIGTERM);
  Reap(*p);
  EXPECT_EQ(p->exit_info()->exit_code, 7);
  EXPECT_EQ(p->exit_info()->signal, 0);
  EXPECT_NE(ReadFile(dir_.path() + "/attempt-0.log").find("got-term"), std::string::npos);
  EXPECT_FALSE(p->AnyAlive());
}

TEST_F(ReplicaInitTest, AStopSignalReachesEachProcessOnce) {
  // init forwards it to the command's group; the agent signals only the rest of the namespace.
  ASSERT_NO_FATAL_FAILURE(testing::ExpectOneSignalEach(launcher_, Request("")));
}

TEST_F(ReplicaInitTest, AStopSignalReachesEachProcessOnceWithACgroup) {
  // The same with the namespace's processes listed by its cgroup instead of by descent.
  ASSERT_NO_FATAL_FAILURE(testing::ExpectOneSignalEachInACgroup("sigterm-ns", COHORT_REPLICA_INIT));
}

TEST_F(ReplicaInitTest, ExitStatusesAndDeathsBySignalPassThrough) {
  auto exits = Launch(Request("exit 3"));
  auto killed = Launch(Request("kill -9 $$"));
  // The default action of SIGTERM ends a script that is not PID 1.
  auto terminated = Launch(Request("touch started; exec sleep 1000"));
  ASSERT_TRUE(exits && killed && terminated);
  Reap(*exits);
  EXPECT_EQ(exits->exit_info()->exit_code, 3);
  EXPECT_EQ(exits->exit_info()->signal, 0);
  Reap(*killed);
  EXPECT_EQ(killed->exit_info()->signal, 9);
  EXPECT_EQ(killed->exit_info()->exit_code, 137);
  EXPECT_NE(killed->exit_info()->Describe().find("signal 9"), std::string::npos);
  ASSERT_TRUE(WaitUntil([&] { return Exists("started"); }, seconds(20)));
  terminated->Signal(SIGTERM);
  Reap(*terminated);
  EXPECT_EQ(terminated->exit_info()->signal, SIGTERM);
  EXPECT_EQ(terminated->exit_info()->exit_code, 128 + SIGTERM);
}

TEST_F(ReplicaInitTest, CommandNotFoundExits127WithReason) {
  LaunchRequest r = Request("");
  r.argv = {"cohort-no-such-program", "--flag"};
  auto p = Launch(r);
  ASSERT_TRUE(p);
  ASSERT_EQ(testing::WaitForLaunch(*p), ReplicaProcess::LaunchState::kFailed);
  EXPECT_NE(p->launch_error().find("cannot execute cohort-no-such-program"), std::string::npos)
      << p->launch_error();
  Reap(*p);
  EXPECT_EQ(p->exit_info()->exit_code, 127);
  EXPECT_NE(ReadFile(r.log_path).find("No such file or directory"), std::string::npos);
}

TEST_F(ReplicaInitTest, ReapsOrphans) {
  // The subshell exits at once: its child, waiting for `go`, is orphaned onto init.
  auto p =
      Launch(Request("(sh -c 'while [ ! -e go ]; do sleep 0.02; done' &); "
                     "while :; do sleep 0.05; done"));
  ASSERT_TRUE(p);
  ASSERT_TRUE(WaitUntil([&] { return ChildrenOf(p->pid()).size() == 2; }, seconds(20)));
  Touch("go");
  // Once the orphan exits, init reaps it: no zombie stays behind as its child.
  EXPECT_TRUE(WaitUntil([&] { return ChildrenOf(p->pid()).size() == 1; }, seconds(20)));
  EXPECT_EQ(ChildrenOf(p->pid()), std::set<pid_t>{p->command_pid()});
  p->KillAll();
  Reap(*p);
  EXPECT_EQ(p->exit_info()->signal, SIGKILL);
}

TEST_F(ReplicaInitTest, TeardownKillsADoubleForkedChildThatClearedItsEnvironment) {
  auto p =
      Launch(Request("(setsid env -i /bin/sh -c 'trap \"\" TERM; exec /bin/sleep 1000' &); "
                     "while [ ! -e go ]; do sleep 0.02; done; exit 0"));
  ASSERT_TRUE(p);
  std::vector<pid_t> daemon;
  ASSERT_TRUE(WaitUntil(
      [&] {
        daemon = Running(p->pid(), "/bin/sleep");
        return daemon.size() == 1;
      },
      seconds(20)));
  // Nothing marks it as the replica's any more: only the namespace holds it.
  EXPECT_EQ(ReadFile("/proc/" + std::to_string(daemon[0]) + "/environ").find(kAttemptDirVariable),
            std::string::npos);
  Touch("go");
  Reap(*p);
  EXPECT_EQ(p->exit_info()->exit_code, 0);
  EXPECT_FALSE(ProcessAlive(daemon[0]));
  EXPECT_FALSE(p->AnyAlive());
}

TEST_F(ReplicaInitTest, TheNamespaceDiesWithItsLauncher) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t agent = ::fork();
  if (agent == 0) {
    // A stand-in agent: launches, says init's pid, then waits to be killed.
    ::close(fds[0]);
    ProcessLauncher launcher(CgroupManager(), COHORT_REPLICA_INIT);
    auto p =
        launcher.Launch(Request("(setsid env -i /bin/sh -c 'exec /bin/sleep 1000' &); "
                                "while :; do sleep 0.05; done"));
    pid_t init = p.ok() ? (*p)->pid() : 0;
    (void)!::write(fds[1], &init, sizeof(init));
    while (true) ::pause();
  }
  ::close(fds[1]);
  pid_t init = 0;
  ASSERT_EQ(::read(fds[0], &init, sizeof(init)), static_cast<ssize_t>(sizeof(init)));
  ::close(fds[0]);
  ASSERT_GT(init, 0);
  std::vector<pid_t> daemon;
  ASSERT_TRUE(WaitUntil(
      [&] {
        daemon = Running(init, "/bin/sleep");
        return daemon.size() == 1;
      },
      seconds(20)));
  ::kill(agent, SIGKILL);
  ::waitpid(agent, nullptr, 0);
  EXPECT_TRUE(
      WaitUntil([&] { return !ProcessAlive(init) && !ProcessAlive(daemon[0]); }, seconds(20)));
}

TEST_F(ReplicaInitTest, AChildThatNeverStartsTheCommandIsKilledAtTheLaunchDeadline) {
  // An init that holds the report pipe open and never runs the command: the launch must not
  // wait for it forever (the agent's loop would hang), but kill it and say so.
  const std::string stuck = dir_.path() + "/stuck-init";
  testing::WriteFile(stuck, "#!/bin/sh\nexec /bin/sleep 1000\n", /*executable=*/true);
  ProcessLauncher launcher(CgroupManager(), stuck);
  launcher.set_launch_timeout(std::chrono::seconds(1));
  LaunchRequest r = Request("touch ran");
  auto launched = launcher.Launch(r);
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  ReplicaProcess& p = **launched;
  ASSERT_EQ(testing::WaitForLaunch(p), ReplicaProcess::LaunchState::kFailed);
  EXPECT_NE(p.launch_error().find(stuck + " (pid " + std::to_string(p.pid()) +
                                  ") neither executed /bin/sh nor said why not within 1s"),
            std::string::npos)
      << p.launch_error();
  Reap(p);
  EXPECT_EQ(p.exit_info()->signal, SIGKILL);
  EXPECT_FALSE(p.AnyAlive());
  EXPECT_FALSE(Exists("ran"));
  EXPECT_NE(ReadFile(r.log_path).find("the agent killed it"), std::string::npos);
}

TEST_F(ReplicaInitTest, AMountTheHostMakesAfterTheStartReachesTheReplica) {
  // As an automounter or an admin's NFS mount would, after the replica started. All of it in a
  // mount namespace of a child of the test's own (the machine's mounts are left alone), with a
  // shared mount standing in for the host's shared root.
  const std::string shared = dir_.path() + "/shared";
  std::filesystem::create_directories(shared + "/data");
  pid_t child = ::fork();
  if (child == 0) {
    if (::unshare(CLONE_NEWNS) != 0) ::_exit(10);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(11);
    if (::mount(shared.c_str(), shared.c_str(), nullptr, MS_BIND, nullptr) != 0) ::_exit(12);
    if (::mount(nullptr, shared.c_str(), nullptr, MS_SHARED, nullptr) != 0) ::_exit(13);
    ProcessLauncher launcher(CgroupManager(), COHORT_REPLICA_INIT);
    auto p = launcher.Launch(
        Request("touch started; while [ ! -e shared/data/mounted ]; do sleep 0.02; done"));
    if (!p.ok()) ::_exit(14);
    if (!WaitUntil([&] { return Exists("started"); }, seconds(20))) ::_exit(15);
    if (::mount("tmpfs", (shared + "/data").c_str(), "tmpfs", 0, "size=64k") != 0) ::_exit(16);
    testing::WriteFile(shared + "/data/mounted", "");
    int status = 0;
    bool ended =
        WaitUntil([&] { return ::waitpid((*p)->pid(), &status, WNOHANG) > 0; }, seconds(20));
    if (!ended) {
      (*p)->KillAll();  // it never saw the mount
      ::_exit(17);
    }
    (*p)->OnExited(status);
    ::_exit(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 18);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  // 10-13: the stand-in host's mounts; 14-16: the launch, its start, the new mount; 17: the
  // replica never saw the mount; 18: it failed.
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ReplicaInitUsageTest, RefusesAMissingCommandWithExitCode125) {
  std::string command = std::string(COHORT_REPLICA_INIT) + " --status-fd 1 2>/dev/null";
  int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 125);
  command = std::string(COHORT_REPLICA_INIT) + " -- /bin/sh -c 'exit 4'";
  status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 4);
}

}  // namespace
}  // namespace cohort::agent
