// The agent loop never waits for a replica's exec (a child stuck before execve, on a hung NFS
// working directory or an NSS lookup, held the whole agent: no heartbeats, no other launches, and
// the coordinator declared the node lost). ProcessLauncher::Launch returns once the child is
// forked; ReplicaProcess::PollLaunch says later whether it executed the command. Nor for the
// output dirs it makes on the job's output storage (MakeOutputDirs, on the launch's thread).
// Real processes throughout; a child is held before its chdir by ProcessLauncher's test seam, and
// MakeOutputDirs by replica_env's (a byte to read from a pipe), standing in for the hung mount
// that is not available here.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "agent/attempt.h"
#include "agent/process_launcher.h"
#include "agent/replica_env.h"
#include "common/config.h"
#include "tests/agent/agent_loop_fixture.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitForLaunch;
using LaunchState = ReplicaProcess::LaunchState;

// The pipe held children read from: each Release() lets one of them go on to its exec.
class HeldChildren {
 public:
  HeldChildren() { EXPECT_EQ(::pipe2(fds_, O_CLOEXEC), 0); }
  ~HeldChildren() {
    ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }
  int fd() const { return fds_[0]; }
  void Release() { ASSERT_EQ(::write(fds_[1], "x", 1), 1); }
  // Lets every reader go, now and later (their read sees the end of the pipe).
  void ReleaseAll() {
    ::close(fds_[1]);
    fds_[1] = -1;
  }
  // Waits in the caller's thread until Release() or ReleaseAll(), a minute at most: an agent that
  // waits for the held thread on its loop then fails a test instead of hanging it.
  void Wait() const {
    pollfd ready{fds_[0], POLLIN, 0};
    while (::poll(&ready, 1, 60000) < 0 && errno == EINTR) {
    }
    char byte;
    if (ready.revents & (POLLIN | POLLHUP)) (void)!::read(fds_[0], &byte, 1);
  }

 private:
  int fds_[2] = {-1, -1};
};

// With and without a PID namespace (cohort-replica-init): the child is held in either mode.
class LaunchWaitTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      Status probe = ProcessLauncher::ProbePidNamespaces();
      if (!probe.ok()) GTEST_SKIP() << "cannot create PID namespaces here: " << probe.ToString();
    }
    launcher_ =
        std::make_unique<ProcessLauncher>(CgroupManager(), GetParam() ? COHORT_REPLICA_INIT : "");
    launcher_->HoldChildrenBeforeExecForTesting(held_.fd());
    // Nothing here waits for it: only a test that shortens it sees it pass.
    launcher_->set_launch_timeout(std::chrono::minutes(10));
  }

  LaunchRequest Request(const std::string& replica, const std::string& script) {
    LaunchRequest r;
    r.job = "job1";
    r.replica = replica;
    r.argv = {"/bin/sh", "-c", script};
    r.env = {{"PATH", "/usr/bin:/bin"}};
    r.working_dir = dir_.path();
    r.log_path = dir_.path() + "/" + replica + ".log";
    return r;
  }
  std::unique_ptr<ReplicaProcess> Launch(const LaunchRequest& r) {
    auto p = launcher_->Launch(r);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? std::move(*p) : nullptr;
  }
  bool Exists(const std::string& file) { return std::filesystem::exists(dir_.path() + "/" + file); }

  TempDir dir_;
  HeldChildren held_;
  std::unique_ptr<ProcessLauncher> launcher_;
};

INSTANTIATE_TEST_SUITE_P(Modes, LaunchWaitTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "PidNamespace" : "Plain"; });

TEST_P(LaunchWaitTest, LaunchReturnsBeforeTheExecAndAPollSeesTheCommandStart) {
  auto held = Launch(Request("held-0", "touch held-ran"));
  ASSERT_TRUE(held);
  EXPECT_EQ(held->PollLaunch(), LaunchState::kStarting);
  EXPECT_EQ(held->launch_error(), "");
  // Another replica launches, runs and ends while the first is still held before its exec.
  launcher_->HoldChildrenBeforeExecForTesting(-1);
  auto other = Launch(Request("other-0", "touch other-ran"));
  ASSERT_TRUE(other);
  EXPECT_EQ(WaitForLaunch(*other), LaunchState::kStarted);
  ASSERT_TRUE(testing::Reap(*other, seconds(20)));
  EXPECT_EQ(other->exit_info()->exit_code, 0);
  EXPECT_TRUE(Exists("other-ran"));
  EXPECT_EQ(held->PollLaunch(), LaunchState::kStarting);
  EXPECT_FALSE(Exists("held-ran"));
  // Let go, it executes the command, which the next polls see.
  held_.Release();
  EXPECT_EQ(WaitForLaunch(*held), LaunchState::kStarted);
  EXPECT_EQ(held->launch_error(), "");
  ASSERT_TRUE(testing::Reap(*held, seconds(20)));
  EXPECT_EQ(held->exit_info()->exit_code, 0);
  EXPECT_TRUE(Exists("held-ran"));
  EXPECT_EQ(ReadFile(dir_.path() + "/held-0.log"), "");  // no launch error written
}

TEST_P(LaunchWaitTest, AChildStuckPastTheLaunchTimeoutIsKilledAndSaysSo) {
  launcher_->set_launch_timeout(milliseconds(300));
  LaunchRequest r = Request("stuck-0", "touch ran");
  auto p = Launch(r);
  ASSERT_TRUE(p);
  // The poll that finds the deadline past kills the child, with today's message.
  ASSERT_EQ(WaitForLaunch(*p), LaunchState::kFailed);
  const std::string who = GetParam() ? std::string(COHORT_REPLICA_INIT) : "the replica's process";
  const std::string expected = who + " (pid " + std::to_string(p->pid()) +
                               ") neither executed /bin/sh nor said why not within " +
                               FormatDuration(milliseconds(300)) + "; the agent killed it";
  EXPECT_EQ(p->launch_error(), expected);
  ASSERT_TRUE(testing::Reap(*p, seconds(20)));
  EXPECT_EQ(p->exit_info()->signal, SIGKILL);
  EXPECT_EQ(p->PollLaunch(), LaunchState::kFailed);  // settled for good
  EXPECT_FALSE(p->AnyAlive());
  EXPECT_FALSE(Exists("ran"));
  EXPECT_EQ(ReadFile(r.log_path), "cohort-agent: " + expected + "\n");
}

TEST_P(LaunchWaitTest, AChildThatCannotEnterItsWorkingDirectoryFailsWithTheReason) {
  launcher_->HoldChildrenBeforeExecForTesting(-1);
  LaunchRequest r = Request("nodir-0", "touch ran");
  r.working_dir = dir_.path() + "/not-there";
  auto p = Launch(r);
  ASSERT_TRUE(p);
  ASSERT_EQ(WaitForLaunch(*p), LaunchState::kFailed);
  const std::string expected =
      "cannot enter working directory " + r.working_dir + ": No such file or directory";
  EXPECT_EQ(p->launch_error(), expected);
  ASSERT_TRUE(testing::Reap(*p, seconds(20)));
  EXPECT_EQ(p->exit_info()->exit_code, 127);
  EXPECT_NE(ReadFile(r.log_path).find("cohort-agent: " + expected + "\n"), std::string::npos)
      << ReadFile(r.log_path);
}

TEST_P(LaunchWaitTest, AnExitBeforeAnyPollStillReportsTheExecError) {
  // The child reports and exits before anything polls: the exit settles the launch.
  launcher_->HoldChildrenBeforeExecForTesting(-1);
  LaunchRequest r = Request("noexec-0", "");
  r.argv = {"cohort-no-such-program"};
  auto p = Launch(r);
  ASSERT_TRUE(p);
  ASSERT_TRUE(testing::Reap(*p, seconds(20)));
  EXPECT_EQ(p->exit_info()->exit_code, 127);
  EXPECT_EQ(p->PollLaunch(), LaunchState::kFailed);
  EXPECT_EQ(p->launch_error(), "cannot execute cohort-no-such-program: No such file or directory");
}

TEST_P(LaunchWaitTest, KillAllEndsAChildHeldBeforeItsExec) {
  auto p = Launch(Request("held-0", "touch ran"));
  ASSERT_TRUE(p);
  p->KillAll();
  ASSERT_TRUE(testing::Reap(*p, seconds(20)));
  EXPECT_EQ(p->exit_info()->signal, SIGKILL);
  EXPECT_NE(p->PollLaunch(), LaunchState::kStarting);
  EXPECT_FALSE(p->AnyAlive());
  EXPECT_FALSE(Exists("ran"));
}

TEST_P(LaunchWaitTest, AStopRequestKillsAChildHeldBeforeItsExecAtOnce) {
  // An hour's grace: only a kill at once ends it within Reap's deadline. Under a PID namespace
  // the held child is the namespace's init, which a SIGTERM would not end.
  Attempt attempt;
  attempt.job = "job1";
  attempt.replica = "held-0";
  attempt.process = Launch(Request("held-0", "touch ran"));
  ASSERT_TRUE(attempt.process);
  attempt.RequestStop(StopCause::kCoordinator, "stopped by the test", std::chrono::hours(1),
                      milliseconds(0));
  ASSERT_TRUE(testing::Reap(*attempt.process, seconds(20)));
  EXPECT_EQ(attempt.process->exit_info()->signal, SIGKILL);
  EXPECT_FALSE(attempt.process->AnyAlive());
  EXPECT_FALSE(Exists("ran"));
  auto change = attempt.TakeExit();
  ASSERT_TRUE(change);
  EXPECT_EQ(change->state, wire::ReplicaState::STOPPED);
}

TEST(LaunchWaitPlainTest, ASignalReachesAChildHeldBeforeItsExec) {
  // Maybe before its setsid even: it is signalled by pid, and its group not taken for gone.
  TempDir dir;
  HeldChildren held;
  ProcessLauncher launcher{CgroupManager()};
  launcher.HoldChildrenBeforeExecForTesting(held.fd());
  LaunchRequest r;
  r.job = "job1";
  r.replica = "held-0";
  r.argv = {"/bin/sh", "-c", "touch ran"};
  r.env = {{"PATH", "/usr/bin:/bin"}};
  r.working_dir = dir.path();
  r.log_path = dir.path() + "/log";
  auto p = launcher.Launch(r);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  (*p)->Signal(SIGTERM);
  ASSERT_TRUE(testing::Reap(**p, seconds(20)));
  EXPECT_EQ((*p)->exit_info()->signal, SIGTERM);
  EXPECT_FALSE((*p)->AnyAlive());
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/ran"));
}

// The whole agent against a fake coordinator, its ProcessLauncher holding children before exec.
class AgentLaunchWaitTest : public AgentLoopTest {
 protected:
  std::unique_ptr<Launcher> MakeLauncher() override {
    auto launcher = std::make_unique<ProcessLauncher>(Cgroups());
    launcher->HoldChildrenBeforeExecForTesting(held_.fd());
    // Far beyond what these tests take (unless a test shortens it), and short enough that an
    // agent that waits for the exec on its loop fails them instead of hanging.
    launcher->set_launch_timeout(std::chrono::seconds(60));
    launcher_ = launcher.get();
    return launcher;
  }
  // Launches job/worker-0 (held) and pumps until the coordinator heard it is STARTING: the agent
  // forks a first attempt's process in the step that reports that.
  void LaunchHeld(const std::string& job, const std::string& script) {
    coordinator_->Launch("node-a", MakeLaunch(job, "worker-0", 0, script));
    const std::string key = LogKey(job, "worker-0", 0);
    ASSERT_TRUE(Pump([&] {
      auto latest = coordinator_->Latest(key);
      return latest && latest->state == wire::ReplicaState::STARTING;
    }));
  }

  HeldChildren held_;
  ProcessLauncher* launcher_ = nullptr;  // the agent's
};

TEST_F(AgentLaunchWaitTest, HeartbeatsAndOtherLaunchesGoOnWhileAChildIsHeldBeforeExec) {
  const std::string key = LogKey("held", "worker-0", 0);
  ASSERT_NO_FATAL_FAILURE(LaunchHeld("held", "echo held-ran"));
  // Heartbeats every 100 ms of the agent's clock here, which moves 10 ms a step.
  const int heartbeats = coordinator_->heartbeats;
  ASSERT_TRUE(Pump([&] { return coordinator_->heartbeats >= heartbeats + 5; }, milliseconds(10)));
  EXPECT_TRUE(agent_->registered());
  // Another replica launches, runs and is reported while the first is still held.
  launcher_->HoldChildrenBeforeExecForTesting(-1);
  ASSERT_NO_FATAL_FAILURE(ExpectAnotherReplicaRuns());
  EXPECT_EQ(coordinator_->Latest(key)->state, wire::ReplicaState::STARTING);
  EXPECT_FALSE(coordinator_->SawState(key, wire::ReplicaState::RUNNING));
  // Let go: it runs (RUNNING) and succeeds.
  held_.Release();
  ASSERT_TRUE(PumpUntilDone(key));
  EXPECT_TRUE(coordinator_->SawState(key, wire::ReplicaState::RUNNING));
  EXPECT_EQ(coordinator_->Final(key)->state, wire::ReplicaState::SUCCEEDED);
  EXPECT_TRUE(LogHas(key, "held-ran"));
}

TEST_F(AgentLaunchWaitTest, AChildHeldPastTheLaunchTimeoutFailsTheAttemptAsBefore) {
  launcher_->set_launch_timeout(milliseconds(300));
  const std::string key = LogKey("stuck", "worker-0", 0);
  coordinator_->Launch("node-a", MakeLaunch("stuck", "worker-0", 0, "echo ran"));
  ASSERT_TRUE(PumpUntilDone(key));
  auto final = *coordinator_->Final(key);
  EXPECT_EQ(final.state, wire::ReplicaState::FAILED);
  EXPECT_EQ(final.exit_code, 128 + SIGKILL);
  EXPECT_EQ(final.signal, SIGKILL);
  const std::string error = "the replica's process (pid " + std::to_string(final.pid) +
                            ") neither executed /bin/sh nor said why not within " +
                            FormatDuration(milliseconds(300)) + "; the agent killed it";
  EXPECT_EQ(final.message, error);  // the signal is in the status; the log has only the note
  EXPECT_TRUE(LogHas(key, "cohort-agent: " + error + "\n")) << coordinator_->logs[key];
  EXPECT_FALSE(LogHas(key, "ran"));
  EXPECT_FALSE(coordinator_->SawState(key, wire::ReplicaState::RUNNING));
}

TEST_F(AgentLaunchWaitTest, AStopOfAChildHeldBeforeExecKillsItAtOnceAndEndsItStopped) {
  // No user code runs there yet to checkpoint; as a PID namespace's init the child would ignore
  // a SIGTERM and hold the stop for the whole grace.
  const std::string key = LogKey("held", "worker-0", 0);
  ASSERT_NO_FATAL_FAILURE(LaunchHeld("held", "echo held-ran"));
  coordinator_->Stop("node-a", "held", "worker-0", 0, 5000);
  ASSERT_TRUE(PumpUntilDone(key));
  EXPECT_EQ(coordinator_->Final(key)->state, wire::ReplicaState::STOPPED);
  // The SIGKILL at once, not a SIGTERM (the grace's clock does not move here).
  EXPECT_EQ(coordinator_->Final(key)->signal, SIGKILL);
  EXPECT_FALSE(LogHas(key, "held-ran"));
  EXPECT_TRUE(Pump([&] { return agent_->attempt_count() == 0; }));
}

// The whole agent, its MakeOutputDirs held (replica_env.h's seam) for the attempts of job "held".
class AgentOutputDirsWaitTest : public AgentLoopTest {
 protected:
  void SetUp() override {
    SetMakeOutputDirsHookForTesting([this](const std::map<std::string, std::string>& env) {
      auto model = env.find("AIP_MODEL_DIR");
      if (model == env.end() || model->second.rfind(Output("held"), 0) != 0) return;
      ++entered_;
      held_.Wait();
    });
    AgentLoopTest::SetUp();
  }
  void TearDown() override {
    held_.ReleaseAll();  // else the agent's destruction waits for a held thread
    AgentLoopTest::TearDown();
    SetMakeOutputDirsHookForTesting(nullptr);
  }

  std::string Output(const std::string& job) const { return output_.path() + "/" + job; }
  // job/replica attempt 0 running `script`, its output dirs under `output`.
  wire::LaunchReplicaT LaunchWithOutput(const std::string& job, const std::string& replica,
                                        const std::string& output, const std::string& script) {
    wire::LaunchReplicaT launch = MakeLaunch(job, replica, 0, script);
    for (const auto& [key, value] :
         std::map<std::string, std::string>{{"AIP_MODEL_DIR", output + "/model"},
                                            {"AIP_CHECKPOINT_DIR", output + "/checkpoints"},
                                            {"AIP_TENSORBOARD_LOG_DIR", output + "/logs"}}) {
      auto kv = std::make_unique<wire::KeyValueT>();
      kv->key = key;
      kv->value = value;
      launch.env.push_back(std::move(kv));
    }
    return launch;
  }
  bool OutputDirsExist(const std::string& output) const {
    return std::filesystem::is_directory(output + "/model") &&
           std::filesystem::is_directory(output + "/checkpoints") &&
           std::filesystem::is_directory(output + "/logs");
  }
  // Launches held/worker-0 and pumps until its MakeOutputDirs is held and the coordinator heard
  // it is STARTING.
  void LaunchHeld() {
    coordinator_->Launch(
        "node-a", LaunchWithOutput("held", "worker-0", Output("held"),
                                   "test -d \"$AIP_MODEL_DIR\" && test -d \"$AIP_CHECKPOINT_DIR\" "
                                   "&& test -d \"$AIP_TENSORBOARD_LOG_DIR\" && echo held-ran"));
    const std::string key = LogKey("held", "worker-0", 0);
    ASSERT_TRUE(Pump([&] {
      auto latest = coordinator_->Latest(key);
      return entered_ == 1 && latest && latest->state == wire::ReplicaState::STARTING;
    }));
  }

  testing::TempDir output_;  // the job's output storage
  HeldChildren held_;
  std::atomic<int> entered_{0};  // MakeOutputDirs calls held
};

TEST_F(AgentOutputDirsWaitTest, HeartbeatsAndOtherLaunchesGoOnWhileTheOutputDirsHang) {
  const std::string key = LogKey("held", "worker-0", 0);
  ASSERT_NO_FATAL_FAILURE(LaunchHeld());
  // Heartbeats every 100 ms of the agent's clock here, which moves 10 ms a step.
  const int heartbeats = coordinator_->heartbeats;
  ASSERT_TRUE(Pump([&] { return coordinator_->heartbeats >= heartbeats + 5; }, milliseconds(10)));
  EXPECT_TRUE(agent_->registered());
  // Another replica, with output dirs of its own, launches, runs and is reported meanwhile.
  coordinator_->Launch("node-a", LaunchWithOutput("other", "chief-0", Output("other"),
                                                  "test -d \"$AIP_MODEL_DIR\" && echo other-ran"));
  const std::string other = LogKey("other", "chief-0", 0);
  ASSERT_TRUE(PumpUntilDone(other));
  EXPECT_EQ(coordinator_->Final(other)->state, wire::ReplicaState::SUCCEEDED);
  EXPECT_TRUE(LogHas(other, "other-ran"));
  EXPECT_TRUE(OutputDirsExist(Output("other")));
  EXPECT_EQ(coordinator_->Latest(key)->state, wire::ReplicaState::STARTING);
  EXPECT_FALSE(std::filesystem::exists(Output("held")));
  // Let go: its output dirs are made, then it runs (RUNNING) and succeeds, finding them there.
  held_.Release();
  ASSERT_TRUE(PumpUntilDone(key));
  EXPECT_TRUE(coordinator_->SawState(key, wire::ReplicaState::RUNNING));
  EXPECT_EQ(coordinator_->Final(key)->state, wire::ReplicaState::SUCCEEDED);
  EXPECT_TRUE(LogHas(key, "held-ran")) << coordinator_->logs[key];
  EXPECT_TRUE(OutputDirsExist(Output("held")));
  EXPECT_EQ(entered_, 1);
}

TEST_F(AgentOutputDirsWaitTest, AStopWhileTheOutputDirsHangEndsTheAttemptWhichNeverRuns) {
  const std::string key = LogKey("held", "worker-0", 0);
  ASSERT_NO_FATAL_FAILURE(LaunchHeld());
  coordinator_->Stop("node-a", "held", "worker-0", 0, 5000);
  ASSERT_TRUE(PumpUntilDone(key));
  EXPECT_EQ(coordinator_->Final(key)->state, wire::ReplicaState::STOPPED);
  EXPECT_NE(coordinator_->Final(key)->message.find("stopped before it started"), std::string::npos)
      << coordinator_->Final(key)->message;
  ASSERT_TRUE(Pump([&] { return agent_->attempt_count() == 0; }));
  // Let go: the dirs are made in the background; the command never runs.
  held_.Release();
  ASSERT_TRUE(testing::WaitUntil([&] { return OutputDirsExist(Output("held")); }, seconds(30)));
  Elapse(milliseconds(500));
  EXPECT_FALSE(coordinator_->SawState(key, wire::ReplicaState::RUNNING));
  EXPECT_FALSE(LogHas(key, "held-ran"));
}

TEST_F(AgentOutputDirsWaitTest, AnOutputDirThatCannotBeMadeFailsTheAttemptNamingIt) {
  // The job's output dir lies under a regular file: mkdir says ENOTDIR.
  testing::WriteFile(output_.path() + "/file", "");
  const std::string output = output_.path() + "/file/job";
  coordinator_->Launch("node-a", LaunchWithOutput("bad", "worker-0", output, "echo ran"));
  const std::string key = LogKey("bad", "worker-0", 0);
  ASSERT_TRUE(PumpUntilDone(key));
  auto final = *coordinator_->Final(key);
  EXPECT_EQ(final.state, wire::ReplicaState::FAILED);
  EXPECT_EQ(final.exit_code, -1);
  const std::string expected =
      "AIP_MODEL_DIR: mkdir " + output_.path() + "/file/job: Not a directory";
  EXPECT_EQ(final.message, expected);
  EXPECT_TRUE(LogHas(key, "cohort-agent: " + final.message + "\n")) << coordinator_->logs[key];
  EXPECT_FALSE(LogHas(key, "ran\n"));
  EXPECT_FALSE(coordinator_->SawState(key, wire::ReplicaState::RUNNING));
}

}  // namespace
}  // namespace cohort::agent
