// The node health check on real programs: a shell script stands in for an admin's check (it
// fails while a marker file exists, printing why), one that sleeps for a check that hangs.
#include "agent/health_check.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/testing/temp_dir_test.h"

namespace cohort::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using ::cohort::testing::WaitUntil;

class HealthCheckTest : public ::cohort::testing::TempDirTest {
 protected:
  // An executable script in the test's directory.
  std::string Script(const std::string& name, const std::string& body) {
    std::string path = dir_ + "/" + name;
    ::cohort::testing::WriteFile(path, "#!/bin/sh\n" + body, /*executable=*/true);
    return path;
  }
};

CapturedCommand Ended(int exit_code, std::string output, bool timed_out = false) {
  CapturedCommand run;
  run.exit_code = exit_code;
  run.output = std::move(output);
  run.timed_out = timed_out;
  return run;
}

TEST(HealthVerdictTest, ExitZeroPassesAndAnyOtherEndSaysWhyByItsFirstLine) {
  EXPECT_EQ(HealthVerdict(Ended(0, "WARNING: fan 3 slow\n"), 1s), "");
  EXPECT_EQ(
      HealthVerdict(Ended(1, "\n  \t\nGPU 0: 2 uncorrectable ECC errors  \nsecond line\n"), 1s),
      "GPU 0: 2 uncorrectable ECC errors (health check exited with code 1)");
  EXPECT_EQ(HealthVerdict(Ended(2, ""), 1s), "health check exited with code 2");
  EXPECT_EQ(HealthVerdict(Ended(137, ""), 1s), "health check was killed by signal 9");
  EXPECT_EQ(HealthVerdict(Ended(-1, "/no/such: No such file or directory"), 1s),
            "/no/such: No such file or directory (health check could not start)");
  // Killed at its deadline: failing, whatever its status, with what it printed so far.
  EXPECT_EQ(HealthVerdict(Ended(137, "checking /mnt/data\n", /*timed_out=*/true), 1500ms),
            "checking /mnt/data (health check did not finish within 1500 ms)");
  EXPECT_EQ(HealthVerdict(Ended(0, "", /*timed_out=*/true), 2s),
            "health check did not finish within 2000 ms");
  // Control characters and broken UTF-8 do not reach a terminal; a long line is cut.
  EXPECT_EQ(HealthVerdict(Ended(1, "bad\x1b[31m \xff red"), 1s),
            "bad [31m \xef\xbf\xbd red (health check exited with code 1)");
  std::string cut = HealthVerdict(Ended(1, std::string(5000, 'x')), 1s);
  EXPECT_LE(cut.size(), kMaxHealthReasonBytes);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
}

TEST_F(HealthCheckTest, TheCommandIsAnAbsolutePathToAnExecutableAndItsArguments) {
  auto none = ParseHealthCheckCommand("  ");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  std::string script = Script("check", "exit 0\n");
  auto argv = ParseHealthCheckCommand(script + "  --gpus all\t-v");
  ASSERT_TRUE(argv.ok()) << argv.status().ToString();
  EXPECT_EQ(*argv, (std::vector<std::string>{script, "--gpus", "all", "-v"}));
  auto relative = ParseHealthCheckCommand("nhc -t 30");
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("absolute path, got 'nhc'"), std::string::npos);
  auto missing = ParseHealthCheckCommand(dir_ + "/absent");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("is not an executable file"), std::string::npos);
  std::ofstream(dir_ + "/plain") << "exit 0\n";
  EXPECT_FALSE(ParseHealthCheckCommand(dir_ + "/plain").ok()) << "not executable";
  EXPECT_FALSE(ParseHealthCheckCommand(dir_).ok()) << "a directory";
}

TEST_F(HealthCheckTest, FollowsTheProgramsVerdictRunByRun) {
  std::string marker = dir_ + "/broken";
  std::string script = Script(
      "check", "if [ -e " + marker + " ]; then cat " + marker + "; exit 1; fi\necho all good\n");
  HealthCheck check({{script}, /*every=*/50ms, /*timeout=*/5s});
  ASSERT_TRUE(WaitUntil([&] { return check.runs() >= 1; }, 10s));
  EXPECT_EQ(check.Problem(), "");
  std::ofstream(marker) << "GPU 1: fell off the bus\n";
  EXPECT_TRUE(WaitUntil([&] { return !check.Problem().empty(); }, 10s));
  EXPECT_EQ(check.Problem(), "GPU 1: fell off the bus (health check exited with code 1)");
  fs::remove(marker);
  EXPECT_TRUE(WaitUntil([&] { return check.Problem().empty(); }, 10s));
}

TEST_F(HealthCheckTest, FailsUntilTheFirstRunHasEnded) {
  std::string script = Script("slow", "sleep 0.3\nexit 0\n");
  HealthCheck check({{script}, 1h, 5s});
  EXPECT_EQ(check.Problem(), "health check has not finished yet");
  ASSERT_TRUE(WaitUntil([&] { return check.runs() == 1; }, 10s));
  EXPECT_EQ(check.Problem(), "");
}

TEST_F(HealthCheckTest, ACheckThatHangsIsKilledAtItsTimeoutAndFails) {
  std::string script = Script("hangs", "echo probing nvidia-smi\nexec sleep 60\n");
  auto start = std::chrono::steady_clock::now();
  HealthCheck check({{script}, 1h, 200ms});
  ASSERT_TRUE(WaitUntil([&] { return check.runs() == 1; }, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "the hung run was not killed";
  EXPECT_EQ(check.Problem(), "probing nvidia-smi (health check did not finish within 200 ms)");
}

// After a replica failed, RunNow() has a run that starts after the call, and Rechecking() holds
// until that run has ended, also when another run was under way at the call.
TEST_F(HealthCheckTest, RunNowRunsAgainAndRecheckingLastsUntilARunStartedAfterItEnds) {
  std::string gate = dir_ + "/gate";
  std::string started = dir_ + "/started";
  // Each run says it started, then waits for the gate file, which it consumes.
  std::string script = Script("gated", "touch " + started + "\nwhile [ ! -e " + gate +
                                           " ]; do sleep 0.01; done\nrm -f " + gate + "\n");
  HealthCheck check({{script}, 1h, 20s});
  EXPECT_FALSE(check.Rechecking());
  ASSERT_TRUE(WaitUntil([&] { return fs::exists(started); }, 10s));  // run 1 is under way
  fs::remove(started);
  EXPECT_TRUE(check.RunNow());
  EXPECT_TRUE(check.Rechecking());
  std::ofstream(gate).close();  // run 1 ends: it began before RunNow, so still rechecking
  ASSERT_TRUE(WaitUntil([&] { return check.runs() == 1; }, 10s));
  EXPECT_TRUE(check.Rechecking());
  ASSERT_TRUE(WaitUntil([&] { return fs::exists(started); }, 10s));  // run 2, at once (not in 1h)
  EXPECT_TRUE(check.Rechecking());
  std::ofstream(gate).close();
  ASSERT_TRUE(WaitUntil([&] { return check.runs() == 2; }, 10s));
  EXPECT_FALSE(check.Rechecking());
  EXPECT_EQ(check.Problem(), "");
}

TEST_F(HealthCheckTest, WithoutAProgramItPassesAndNeverRechecks) {
  HealthCheck check({{}, 10ms, 1s});
  EXPECT_EQ(check.Problem(), "");
  EXPECT_FALSE(check.RunNow()) << "no program to run";
  EXPECT_FALSE(check.Rechecking());
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(check.runs(), 0u);
}

// The destructor kills a run under way rather than waiting for it.
TEST_F(HealthCheckTest, StoppingKillsARunUnderWay) {
  std::string script = Script("long", "exec sleep 60\n");
  auto start = std::chrono::steady_clock::now();
  {
    HealthCheck check({{script}, 1h, 120s});
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
}

}  // namespace
}  // namespace cohort::agent
