// ProcScan and ProcessLauncher::SweepLeftovers against real processes that left their session
// (setsid), as a replica's daemon does, found by an entry of their environment.
#include "agent/proc_scan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "agent/process_launcher.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::vector<pid_t>& pids, pid_t pid) {
  return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

// Starts `sleep 1000` in a session of its own, with `env_entry` in its environment, from a shell
// that exits at once (so the sleeper is nobody's child here); returns its pid.
pid_t StartDaemon(const std::string& env_entry) {
  auto run = testing::RunProcess(
      "/bin/sh", {"-c", "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!"}, {env_entry});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  pid_t pid = std::atoi(run.out.c_str());
  EXPECT_GT(pid, 0);
  // That child becomes `sleep` by exec (setsid execs it); a process in the middle of an exec can
  // show no environment for a moment, so the scans below start once it is sleep.
  EXPECT_TRUE(testing::WaitUntil(
      [&] { return testing::ReadFile("/proc/" + std::to_string(pid) + "/comm") == "sleep\n"; },
      std::chrono::seconds(10)));
  return pid;
}

TEST(ProcScanTest, FindsProcessesByAnEntryOfTheirEnvironment) {
  std::string mark = "COHORT_PROC_SCAN_TEST=" + std::to_string(::getpid());
  pid_t daemon = StartDaemon(mark + "/a");
  EXPECT_TRUE(testing::WaitUntil(
      [&] { return Contains(ProcessesWithEnvEntry(mark + "/a"), daemon); }, 10s));
  EXPECT_FALSE(Contains(ProcessesWithEnvEntry(mark), daemon));  // whole entries only
  EXPECT_TRUE(Contains(ProcessesWithEnvEntry(mark + "/", /*prefix=*/true), daemon));
  EXPECT_FALSE(Contains(ProcessesWithEnvEntry(mark + "/b", /*prefix=*/true), daemon));
  EXPECT_EQ(KillUntilNoneLeft([&] { return ProcessesWithEnvEntry(mark + "/a"); }), 1);
  EXPECT_TRUE(testing::WaitUntil([&] { return !testing::ProcessAlive(daemon); }, 10s));
}

TEST(ProcScanTest, DescendantsAndGroupMembersAreLiveProcessesOnly) {
  testing::TempDir dir;
  testing::DaemonProcess child("/bin/sleep", {"1000"}, dir.Join("log"));
  ASSERT_TRUE(child.Start());
  EXPECT_TRUE(Contains(Descendants(::getpid()), child.pid()));
  EXPECT_TRUE(GroupHasLiveMembers(::getpgid(child.pid())));
  child.Kill();  // killed and reaped
  EXPECT_FALSE(Contains(Descendants(::getpid()), child.pid()));
}

TEST(ProcScanTest, SweepLeftoversKillsWhatAnEarlierAgentWithThisWorkDirLeft) {
  testing::TempDir dir;
  const std::string work = dir.Join("work");
  pid_t left =
      StartDaemon(std::string(kAttemptDirVariable) + "=" + work + "/job/chief-0/attempt-0");
  pid_t other =
      StartDaemon(std::string(kAttemptDirVariable) + "=" + work + "2/job/chief-0/attempt-0");
  ASSERT_TRUE(testing::ProcessAlive(left));
  EXPECT_EQ(ProcessLauncher::SweepLeftovers(work), 1);
  EXPECT_TRUE(testing::WaitUntil([&] { return !testing::ProcessAlive(left); }, 10s));
  EXPECT_TRUE(testing::ProcessAlive(other));  // another agent's work dir
  EXPECT_EQ(ProcessLauncher::SweepLeftovers(work + "2/"), 1);
  EXPECT_TRUE(testing::WaitUntil([&] { return !testing::ProcessAlive(other); }, 10s));
}

}  // namespace
}  // namespace cohort::agent
