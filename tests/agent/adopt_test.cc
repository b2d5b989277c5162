// ReplicaManager::Adopt, the new image's side of a live restart (agent/handoff.h), on children of
// this test process as a re-executed agent finds its replicas: one taken over runs on as RUNNING
// and its exit is reaped and reported as a launched one's; one that cannot be taken over is
// killed, never left running beside the restart its coordinator will start.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "agent/agent.h"
#include "agent/process_launcher.h"
#include "agent/replica_manager.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

// A child in a process group of its own running `sh -c script`, as a launched replica's is.
pid_t StartChild(const char* script) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sh", "sh", "-c", script, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  return pid;
}

class AdoptTest : public ::testing::Test {
 protected:
  AdoptTest() {
    config_.node_id = "node-a";
    config_.work_dir = dir_.path();
  }

  HandedOverAttempt Handed(pid_t pid) {
    HandedOverAttempt h;
    h.job = "train";
    h.replica = "chief-0";
    h.pid = pid;
    h.working_dir = dir_.path() + "/train/chief-0/attempt-0";
    h.log_path = dir_.path() + "/train/chief-0/attempt-0.log";
    h.env = {{"PATH", "/usr/bin:/bin"}};
    h.log_acked = 0;
    return h;
  }

  testing::TempDir dir_;
  AgentConfig config_;
  ManualClock clock_;
  testing::SentMessages sent_;
  Outbox outbox_{clock_, sent_.Transmit()};
  std::vector<wire::ReplicaState> reported_;
  ReplicaManager replicas_{config_, clock_, outbox_,
                           std::make_unique<ProcessLauncher>(CgroupManager()),
                           [this](Attempt& a) { reported_.push_back(a.state); }};
};

TEST_F(AdoptTest, ATakenOverChildRunsOnAndItsExitIsReportedAsALaunchedOnes) {
  const pid_t pid = StartChild("sleep 0.3; exit 3");
  ASSERT_TRUE(replicas_.Adopt(Handed(pid)).ok());
  Attempt* a = replicas_.Find(AttemptKey("train", "chief-0", 0));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->state, wire::ReplicaState::RUNNING);
  EXPECT_EQ(a->process->pid(), pid);
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        replicas_.Reap();
        return a->final;
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(a->state, wire::ReplicaState::FAILED);
  EXPECT_EQ(a->exit.exit_code, 3);
  EXPECT_EQ(reported_, (std::vector<wire::ReplicaState>{wire::ReplicaState::RUNNING,
                                                        wire::ReplicaState::FAILED}));
}

TEST_F(AdoptTest, AChildThatCannotBeTakenOverIsKilled) {
  const pid_t pid = StartChild("sleep 100");
  HandedOverAttempt h = Handed(pid);
  const int not_a_pipe = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  h.status_fd = not_a_pipe;  // what init's status pipe was is gone
  Status s = replicas_.Adopt(h);
  ::close(not_a_pipe);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("is not the status pipe of its init"), std::string::npos)
      << s.message();
  EXPECT_EQ(replicas_.Find(AttemptKey("train", "chief-0", 0)), nullptr);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

TEST_F(AdoptTest, APidThatIsNotAChildIsRefusedAndLeftAlone) {
  // This test's parent is alive and not this process's child.
  const pid_t parent = ::getppid();
  Status s = replicas_.Adopt(Handed(parent));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("is not a child of this agent"), std::string::npos) << s.message();
  EXPECT_EQ(::kill(parent, 0), 0);
}

}  // namespace
}  // namespace cohort::agent
