// WorkDirLock on a real work dir: one holder at a time (flock locks belong to an open file, so a
// second Take in this same process stands for a second agent), the refusal names the holder's
// pid, the lock goes with its holder, and a child the holder started (a replica) never holds it.
#include "agent/work_dir_lock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "tests/testing/process.h"

namespace cohort::agent {
namespace {

TEST(WorkDirLockTest, OneHolderAtATimeAndTheRefusalNamesIt) {
  testing::TempDir dir;
  const std::string work = dir.Join("work");  // made by Take
  std::optional<StatusOr<WorkDirLock>> first(WorkDirLock::Take(work));
  ASSERT_TRUE(first->ok()) << first->status().ToString();
  EXPECT_EQ(testing::ReadFile(work + "/.agent.lock"), std::to_string(::getpid()) + "\n");

  StatusOr<WorkDirLock> second = WorkDirLock::Take(work);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.status().message(), "work dir " + work +
                                           " is in use by another cohort-agent (pid " +
                                           std::to_string(::getpid()) +
                                           "): each agent on a host needs a --work-dir of its own");

  // A child started while the lock is held (as a replica is) does not inherit it.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Once it runs sleep (past its exec), the holder ends.
  EXPECT_TRUE(
      testing::WaitUntil([&] { return testing::ProcessCommandLine(child).rfind("sleep", 0) == 0; },
                         std::chrono::seconds(10)));
  first.reset();
  StatusOr<WorkDirLock> next = WorkDirLock::Take(work);
  EXPECT_TRUE(next.ok()) << next.status().ToString();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST(WorkDirLockTest, AWorkDirThatCannotBeMadeIsAClearError) {
  testing::TempDir dir;
  testing::WriteFile(dir.Join("file"), "not a directory");
  StatusOr<WorkDirLock> lock = WorkDirLock::Take(dir.Join("file/work"));
  ASSERT_FALSE(lock.ok());
  EXPECT_NE(lock.status().message().find(dir.Join("file")), std::string::npos)
      << lock.status().ToString();
}

// An agent's tag is its work dir's, however the path is written, and only its.
TEST(AgentTagTest, TheTagIsTheWorkDirsHoweverThePathIsWritten) {
  const std::string tag = AgentTag("/var/lib/cohort-agent");
  EXPECT_EQ(tag.size(), 8u);
  EXPECT_EQ(tag.find_first_not_of("0123456789abcdef"), std::string::npos) << tag;
  EXPECT_EQ(AgentTag("/var/lib/cohort-agent/"), tag);
  EXPECT_EQ(AgentTag("/var/lib/./x/../cohort-agent"), tag);
  EXPECT_NE(AgentTag("/var/lib/cohort-agent2"), tag);
  EXPECT_EQ(AgentTag("relative"),
            AgentTag((std::filesystem::current_path() / "relative").string()));
}

}  // namespace
}  // namespace cohort::agent
