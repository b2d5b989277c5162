// `cohort logs --timestamps` and `--since` (issue 17) under a real job on a real cluster
// (coordinator and agent processes on loopback, the cohort binary run as a process): the chief
// prints a line, waits 2.5 s, prints another; each line is shown after the UTC time it reached
// the coordinator, and --since (a local time, a duration) leaves out what came before.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <regex>
#include <string>

#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
namespace ct = ::cohort::testing;

// "2026-11-25T03:20:01.123Z" as ms since the epoch.
int64_t ParseUtc(const std::string& stamp) {
  std::tm tm{};
  int ms = 0;
  EXPECT_EQ(std::sscanf(stamp.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon,
                        &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms),
            7)
      << stamp;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
}

// `seconds` since the epoch as the local time `cohort --since` reads ("2026-11-25 14:30:00").
std::string LocalTime(int64_t seconds) {
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S", &tm);
  return buffer;
}

class LogsTimeTest : public ct::OneNodeCliTest {
 protected:
  LogsTimeTest() : OneNodeCliTest("logs-time") {}
};

TEST_F(LogsTimeTest, TimestampsShowArrivalAndSinceLeavesOutOlderLines) {
  std::string file = cluster_->scratch("timed.yaml");
  ct::WriteFile(file,
                "name: timed\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                "    resources: {cpus: 1}\n"
                "    process: {command: [/bin/sh, -c, 'echo early; sleep 2.5; echo late']}\n");
  auto run = RunCli({"submit", file, "--wait"}, 60s);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err << cluster_->Logs();

  auto stamped = RunCli({"logs", "timed", "--timestamps"});
  ASSERT_EQ(stamped.exit_code, 0) << stamped.err;
  const std::string stamp = R"((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z))";
  std::smatch m;
  ASSERT_TRUE(std::regex_match(stamped.out, m,
                               std::regex(stamp + " ==== chief-0 attempt 0 ====\n" + stamp +
                                          " early\n" + stamp + " late\n")))
      << stamped.out;
  const int64_t header = ParseUtc(m[1]), early = ParseUtc(m[2]), late = ParseUtc(m[3]);
  EXPECT_EQ(header, early);  // the header carries its attempt's first arrival
  // The lines left the chief 2.5 s apart; the agent ships output as it comes.
  EXPECT_GE(late - early, 1000) << stamped.out;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  EXPECT_LE(late, now);
  EXPECT_GT(early, now - 120'000);

  // --since a local time between the two lines: only the late one.
  auto since = RunCli({"logs", "timed", "--since", LocalTime(early / 1000 + 1)});
  ASSERT_EQ(since.exit_code, 0) << since.err;
  EXPECT_EQ(since.out, "late\n");
  // --since a duration: everything in the last hour; with --all, prefixed and stamped.
  auto hour = RunCli({"logs", "timed", "--all", "--since", "1h", "--timestamps"});
  ASSERT_EQ(hour.exit_code, 0) << hour.err;
  EXPECT_TRUE(std::regex_match(
      hour.out, std::regex("\\[chief-0\\] " + stamp + " ====.*\n" + "\\[chief-0\\] " + stamp +
                           " early\n" + "\\[chief-0\\] " + stamp + " late\n")))
      << hour.out;
  // --since with --tail: the tail of what is left.
  auto tail = RunCli({"logs", "timed", "--since", "1h", "--tail", "1"});
  EXPECT_EQ(tail.out, "late\n");
  // A bad --since names the forms it takes.
  auto bad = RunCli({"logs", "timed", "--since", "yesterday"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--since"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace cohort
