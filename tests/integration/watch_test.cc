// The CLI shows a job live (issue 17): `cohort watch`, `cohort submit --wait` and `cohort logs
// --all --tail` under a real job on a real cluster (coordinator and agent processes on loopback,
// the cohort binary run as a process). The job's chief prints an epoch line at a time and is
// killed (SIGKILL, a retryable end) on its first attempt, so the views must show a restart and
// its cause as it happens; on a terminal (a pseudo-terminal from script(1)) the status block is
// redrawn in place.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
namespace ct = ::cohort::testing;

// Chief: five epoch lines 0.3 s apart (SIGKILLed after the second on attempt 0); worker: a ready
// line, then it waits to be stopped.
std::string EpochJob(const std::string& name) {
  return "name: " + name +
         "\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n"
         "    process:\n      command: [/bin/sh, -c, 'for e in 1 2 3 4 5; do echo \"epoch $e "
         "loss 0.$((9 - e))\"; sleep 0.3; if [ $e = 2 ] && [ \"$COHORT_RESTART_COUNT\" = 0 ]; "
         "then kill -9 $$; fi; done; echo chief done']\n"
         "  - role: worker\n    replicas: 1\n    resources: {cpus: 1}\n"
         "    process: {command: [/bin/sh, -c, 'echo worker ready; exec sleep 600']}\n"
         "scheduling: {max_restarts: 2}\n";
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

class WatchTest : public ct::OneNodeCliTest {
 protected:
  WatchTest() : OneNodeCliTest("watch") {}
  std::string JobFile(const std::string& name) {
    std::string file = cluster_->scratch(name + ".yaml");
    ct::WriteFile(file, EpochJob(name));
    return file;
  }
};

TEST_F(WatchTest, SubmitWaitShowsStatesRestartsWithTheirCauseAndTheChiefsLinesAsLines) {
  auto run = RunCli({"submit", JobFile("lines"), "--wait"}, 60s);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err << cluster_->Logs();
  EXPECT_EQ(run.out, "lines\n");  // stdout: the name only
  const std::string& view = run.err;
  // Lines, each stamped with the time since submission; no terminal control sequences.
  EXPECT_EQ(view.find("\033["), std::string::npos) << view;
  EXPECT_TRUE(std::regex_search(view, std::regex(R"(\[00:0\d\] job lines: RUNNING)"))) << view;
  EXPECT_NE(view.find("chief-0: RUNNING on watch-"), std::string::npos) << view;
  // The restart and its cause, then attempt 1.
  EXPECT_TRUE(std::regex_search(view, std::regex(R"(event: .*chief-0.*signal 9)"))) << view;
  EXPECT_NE(view.find("chief-0: RUNNING on watch-" + std::to_string(::getpid()) + ", attempt 1"),
            std::string::npos)
      << view;
  // The chief's output, prefixed, in order, across both attempts; the worker's is not followed.
  EXPECT_NE(view.find("[chief-0] epoch 1 loss 0.8"), std::string::npos) << view;
  EXPECT_NE(view.find("[chief-0] ==== chief-0 attempt 1 ===="), std::string::npos) << view;
  EXPECT_NE(view.find("[chief-0] chief done"), std::string::npos) << view;
  EXPECT_LT(view.find("[chief-0] epoch 1"), view.find("[chief-0] chief done"));
  EXPECT_EQ(Count(view, "[chief-0] epoch 5"), 1u) << view;
  EXPECT_EQ(view.find("worker ready"), std::string::npos) << view;
  EXPECT_TRUE(std::regex_search(view, std::regex(R"(job lines: SUCCEEDED)"))) << view;

  // logs --all --tail 2: the last two lines of each replica, prefixed like kubectl --prefix.
  auto logs = RunCli({"logs", "lines", "--all", "--tail", "2"});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("[chief-0] epoch 5 loss 0.4\n[chief-0] chief done\n"), std::string::npos)
      << logs.out;
  EXPECT_EQ(Count(logs.out, "[chief-0] "), 2u) << logs.out;
  EXPECT_NE(logs.out.find("[worker-0] worker ready\n"), std::string::npos) << logs.out;
  EXPECT_EQ(Count(logs.out, "[worker-0] "), 2u) << logs.out;  // its attempt header and the line
  auto tail_one = RunCli({"logs", "lines", "--tail", "1"});
  EXPECT_EQ(tail_one.out, "chief done\n") << tail_one.out;
  auto bad = RunCli({"logs", "lines", "--replica", "worker-9"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("job lines has no replica 'worker-9' (it has chief-0, worker-0)"),
            std::string::npos)
      << bad.err;
}

TEST_F(WatchTest, WatchOnATerminalRedrawsItsStatusBlockInPlaceAndFollowsEveryReplica) {
  auto client = cluster_->Client();
  ASSERT_TRUE(client.Submit(EpochJob("on_tty")).ok());
  // script(1) gives the CLI a pseudo-terminal and copies what it writes.
  std::string command;
  for (const auto& arg : Cli({"watch", "on_tty", "--all"})) command += " '" + arg + "'";
  auto run = ct::RunProcess("/usr/bin/script",
                            {"-qefc", std::string(COHORT_CLI_BIN) + command, "/dev/null"}, {}, 60s);
  if (run.exit_code == 127 || run.err.find("script:") != std::string::npos) {
    GTEST_SKIP() << "script(1) cannot give the CLI a terminal here: " << run.err;
  }
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err << cluster_->Logs();
  const std::string& screen = run.out;
  // The block is erased (cursor up to its first line, clear to the end) and drawn again.
  EXPECT_GE(Count(screen, "\033[J"), 3u) << screen;
  EXPECT_TRUE(std::regex_search(screen, std::regex("\033\\[[0-9]+F\033\\[J"))) << screen;
  EXPECT_NE(screen.find("job on_tty  SUCCEEDED  elapsed "), std::string::npos) << screen;
  EXPECT_NE(screen.find("restarts 1 of 2"), std::string::npos) << screen;
  EXPECT_TRUE(std::regex_search(screen, std::regex(R"(event: .*chief-0.*signal 9)"))) << screen;
  // Every replica's output, prefixed.
  EXPECT_NE(screen.find("[chief-0] chief done"), std::string::npos) << screen;
  EXPECT_NE(screen.find("[worker-0] worker ready"), std::string::npos) << screen;
}

// A line of the status block wider than the terminal would take two rows, and the next redraw
// would go back too few: on a terminal 40 columns wide every line of the block fits in 39, while
// the job's output lines are printed whole.
TEST_F(WatchTest, OnANarrowTerminalTheStatusBlockIsCutToItsWidth) {
  const std::string said =
      "a line longer than the terminal is wide, which is output and stays whole";
  ASSERT_TRUE(cluster_->Client()
                  .Submit("name: narrow_tty\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                          "    resources: {cpus: 1}\n    process: {command: [/bin/sh, -c, 'echo " +
                          said + "; sleep 2']}\n")
                  .ok());
  std::string command = "stty cols 40; " + std::string(COHORT_CLI_BIN);
  for (const auto& arg : Cli({"watch", "narrow_tty"})) command += " '" + arg + "'";
  auto run = ct::RunProcess("/usr/bin/script", {"-qefc", command, "/dev/null"}, {}, 60s);
  if (run.exit_code == 127 || run.err.find("script:") != std::string::npos) {
    GTEST_SKIP() << "script(1) cannot give the CLI a terminal here: " << run.err;
  }
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err << cluster_->Logs();
  EXPECT_NE(run.out.find("[chief-0] " + said), std::string::npos) << run.out;
  const std::string screen =
      std::regex_replace(run.out, std::regex("\033\\[[0-9]+F\033\\[J"), "\n");
  size_t block_lines = 0;
  std::istringstream rows(screen);
  for (std::string line; std::getline(rows, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("job narrow_tty  ", 0) == 0 || line.rfind("  ", 0) == 0) {
      ++block_lines;
      EXPECT_LE(line.size(), 39u) << line;
    }
  }
  EXPECT_GE(block_lines, 3u) << screen;  // the job's line, the table's header and chief-0's row
}

TEST_F(WatchTest, AQueuedJobSaysWhatItWaitsFor) {
  // The node's 8 CPUs are taken; the next job waits for them.
  auto job = [](const std::string& name, const std::string& command) {
    return "name: " + name +
           "\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: 8}\n"
           "    process: {command: [" +
           command + "]}\n";
  };
  auto client = cluster_->Client();
  ASSERT_TRUE(client.Submit(job("blocker", "/bin/sleep, '60'")).ok());
  auto running = client.WaitForJob(
      "blocker", [](const wire::JobInfoT& j) { return j.state == wire::JobState::RUNNING; },
      std::chrono::steady_clock::now() + 20s, 100ms);
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  ASSERT_TRUE(client.Submit(job("waits", "/bin/true")).ok());
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto j = client.GetJob("waits");
        return j.ok() && j->message.find("waiting for") != std::string::npos;
      },
      10s, 100ms));
  auto logs = RunCli({"logs", "waits"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "");
  EXPECT_NE(logs.err.find("job waits is QUEUED (waiting for"), std::string::npos) << logs.err;
  EXPECT_NE(logs.err.find("no output yet"), std::string::npos) << logs.err;
  ASSERT_TRUE(client.Cancel("waits").ok());
  ASSERT_TRUE(client.Cancel("blocker").ok());
  auto watch = RunCli({"watch", "waits"}, 30s);
  EXPECT_EQ(watch.exit_code, 1) << watch.out << watch.err;
  EXPECT_NE(watch.out.find("job waits: CANCELLED"), std::string::npos) << watch.out;
}

// `cohort checkpoint --job` reads the job's checkpoint folder where the CLI runs: for a job that
// never ran (so no folder), it says so and where to run it, exit 1.
TEST_F(WatchTest, CheckpointOfAJobWithNoCheckpointFolderHereSaysWhereToLook) {
  const std::string output = cluster_->scratch("never-ran");
  auto client = cluster_->Client();
  ASSERT_TRUE(client
                  .Submit("name: unplaced\noutput_dir: " + output +
                          "\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                          "    resources: {gpus: 64}\n    process: {command: [/bin/true]}\n")
                  .ok());
  auto listed = RunCli({"checkpoint", "--job", "unplaced"});
  EXPECT_EQ(listed.exit_code, 1) << listed.out << listed.err;
  EXPECT_NE(listed.err.find("cannot list " + output + "/checkpoints"), std::string::npos)
      << listed.err;
  EXPECT_NE(listed.err.find("or its output dir is not mounted on this host"), std::string::npos)
      << listed.err;
  ASSERT_TRUE(client.Cancel("unplaced").ok());
}

}  // namespace
}  // namespace cohort
