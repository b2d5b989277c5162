// The hang watchdog end to end (issue 18): a real coordinator and agent, real replica processes
// (tests/integration/watchdog_job.py), a rank that stops, and what the coordinator makes of it:
// the event naming the stuck replica (and operation), its stack dumps (`cohort logs --dump`),
// the restart from the checkpoint and the job's success. Then a straggler, named by `cohort
// status` and never restarted.
//
// Each test prints how long the watchdog took: from the moment the replica stopped (it prints
// "stalled at <unix ms>" just before it sleeps) to the hang event, and to the job running again
// ("running: all N replicas running" after the restart). hang_timeout is 3 s and agents heartbeat
// every second, so the event is due within about 4 s.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/client.h"
#include "tests/testing/cluster_test.h"

#ifndef COHORT_WATCHDOG_JOB
#define COHORT_WATCHDOG_JOB ""
#endif
#ifndef COHORT_PYTHON_DIR
#define COHORT_PYTHON_DIR ""
#endif

namespace cohort {
namespace {

namespace ct = cohort::testing;
using namespace std::chrono_literals;

constexpr const char* kPython = "/usr/bin/python3";

class WatchdogTest : public ct::ClusterTest {
 protected:
  void SetUp() override {
    if (!NeedBinaries({COHORT_CLI_BIN, kPython})) return;
    ASSERT_NO_FATAL_FAILURE(StartCoordinator());
    node_ = UniqueNodeId("wd");
    ASSERT_EQ(cluster_->StartAgent({node_, 0, 8}), "");
  }

  void TearDown() override {
    if (!cluster_) return;
    if (HasFailure()) std::cerr << cluster_->Logs();
    for (pid_t pid : cluster_->ReplicaProcesses()) ::kill(pid, SIGKILL);  // safety net only
    cluster_.reset();
  }

  // A job of a chief and `workers` workers running watchdog_job.py with `args`.
  std::string JobYaml(const std::string& name, int workers, const std::string& args,
                      const std::string& scheduling) {
    std::string process = std::string("    resources: {cpus: 1}\n    process:\n      command: [") +
                          kPython + ", " + COHORT_WATCHDOG_JOB + "]\n      args: [" + args +
                          "]\n      env: {PYTHONPATH: " + COHORT_PYTHON_DIR +
                          ", OMP_NUM_THREADS: \"1\"}\n";
    std::string yaml = "name: " + name + "\noutput_dir: " + cluster_->scratch(name) +
                       "\nworker_pools:\n  - role: chief\n    replicas: 1\n" + process;
    if (workers > 0) {
      yaml += "  - role: worker\n    replicas: " + std::to_string(workers) + "\n" + process;
    }
    return yaml + "scheduling: " + scheduling + "\n";
  }

  std::string Submit(const std::string& yaml) {
    std::string path = cluster_->scratch("job.yaml");
    ct::WriteFile(path, yaml);
    ct::RunResult r = Cli({"submit", path});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::string name = r.out;
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    return r.exit_code == 0 ? name : "";
  }

  ct::RunResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), {"--coordinator", cluster_->client_endpoint(), "--insecure"});
    return ct::RunProcess(COHORT_CLI_BIN, args, {}, 30s);
  }

  std::string Log(const std::string& job, const std::string& replica) {
    return Cli({"logs", job, "--replica", replica}).out;
  }

  // "stalled at <ms>" in the replica's log, -1 when absent.
  int64_t StalledAt(const std::string& job, const std::string& replica) {
    std::smatch m;
    std::string log = Log(job, replica);
    if (!std::regex_search(log, m, std::regex("stalled at ([0-9]+)"))) return -1;
    return std::stoll(m[1]);
  }

  // The first event whose message contains `text` after `after_ms`, nullptr when none.
  static const wire::JobEventT* FindEvent(const wire::JobInfoT& job, const std::string& text,
                                          int64_t after_ms = 0) {
    for (const auto& e : job.events) {
      if (e && e->time_ms >= after_ms && e->message.find(text) != std::string::npos) {
        return e.get();
      }
    }
    return nullptr;
  }

  static std::string Events(const wire::JobInfoT& job) {
    std::string out;
    for (const auto& e : job.events) {
      if (e) out += std::to_string(e->time_ms) + " " + e->message + "\n";
    }
    return out;
  }

  // Times from the replica's stop to the hang event and to the job running again, printed.
  void ReportTimes(const wire::JobInfoT& info, int64_t stalled_ms, const std::string& what) {
    const wire::JobEventT* hang = FindEvent(info, "hang: ");
    const wire::JobEventT* again = hang ? FindEvent(info, "running: all", hang->time_ms) : nullptr;
    ASSERT_NE(hang, nullptr) << Events(info);
    ASSERT_NE(again, nullptr) << Events(info);
    std::cout << "[watchdog] " << what << ": replica stopped -> hang event "
              << hang->time_ms - stalled_ms << " ms; -> job running again "
              << again->time_ms - stalled_ms << " ms (hang_timeout 3 s, heartbeat 1 s)\n";
    // The event comes after hang_timeout of silence, and within it plus a heartbeat and the
    // agent's and coordinator's loop passes (a generous bound: this machine is shared).
    EXPECT_GE(hang->time_ms - stalled_ms, 3000 - 200);
  }

  // Skips the test (returns false) when the collective library does not write the flight
  // recorder the agent names: the watchdog then has no collective progress to judge. Checked once
  // `replica` has logged "step 10" (its communicator has run operations by then).
  bool RecorderWritten(const std::string& job, const std::string& replica) {
    std::string file = cluster_->scratch() + "/../work/" + node_ + "/" + job + "/" + replica +
                       "/attempt-0/flight-recorder";
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline &&
           Log(job, replica).find(replica + " step 10") == std::string::npos) {
      std::this_thread::sleep_for(200ms);
    }
    return ct::FileExists(file);
  }

  std::string node_;
};

TEST_F(WatchdogTest, LogsProgressStallIsDetectedDumpedAndRestarted) {
  std::string job = Submit(JobYaml("wd_logs", 1, "--mode=logs, --steps=30, --stall-at=10",
                                   "{hang_timeout: 3s, progress: logs, max_restarts: 2}"));
  ASSERT_FALSE(job.empty());
  CoordinatorClient client = cluster_->Client();
  wire::JobInfoT info = ct::WaitForJobEnd(client, job, 90s);
  ASSERT_EQ(info.state, wire::JobState::SUCCEEDED) << Events(info) << Log(job, "chief-0");
  EXPECT_EQ(info.restarts, 1);
  const wire::JobEventT* hang = FindEvent(info, "hang: no replica has written to its log");
  ASSERT_NE(hang, nullptr) << Events(info);
  EXPECT_NE(hang->message.find("chief-0"), std::string::npos) << hang->message;
  EXPECT_NE(hang->message.find("worker-0"), std::string::npos) << hang->message;
  EXPECT_NE(FindEvent(info, "restart 1/2: the whole job because of a hang"), nullptr)
      << Events(info);

  // The stacks of the stalled replica: its Python stack (in time.sleep) and the native one.
  ct::RunResult dump = Cli({"logs", job, "--replica", "chief-0", "--dump"});
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.out.find("==== chief-0 attempt 0 ===="), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find("Python stacks (faulthandler)"), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find("watchdog_job.py"), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find("native stacks"), std::string::npos) << dump.out;
  ReportTimes(info, StalledAt(job, "chief-0"), "progress: logs");
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "");
}

TEST_F(WatchdogTest, LogsProgressStallFailsTheJobWithHangActionFail) {
  std::string job =
      Submit(JobYaml("wd_fail", 0, "--mode=logs, --steps=30, --stall-at=5",
                     "{hang_timeout: 2s, progress: logs, hang_action: fail, max_restarts: 2}"));
  ASSERT_FALSE(job.empty());
  CoordinatorClient client = cluster_->Client();
  wire::JobInfoT info = ct::WaitForJobEnd(client, job, 60s);
  ASSERT_EQ(info.state, wire::JobState::FAILED) << Events(info);
  EXPECT_NE(info.message.find("hang_action: fail"), std::string::npos) << info.message;
  EXPECT_EQ(info.restarts, 0);
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "");
}

// Four ranks (chief-0, worker-0..2) all-reduce through cohort.collective; worker-2 sleeps before
// step 50 on the first attempt. The event names it and the operation the others wait in; its
// stacks are dumped; the job restarts from the chief's checkpoint of step 50 and succeeds.
TEST_F(WatchdogTest, RankThatNeverEntersAnAllreduceIsNamedDumpedAndRestarted) {
  std::string job = Submit(JobYaml(
      "wd_allreduce", 3,
      "--mode=allreduce, --steps=70, --stall-at=50, --stuck=worker-2, --checkpoint-every=10",
      "{hang_timeout: 3s, max_restarts: 2, restart_job_on_worker_restart: true}"));
  ASSERT_FALSE(job.empty());
  if (!RecorderWritten(job, "worker-0")) {
    GTEST_SKIP() << "the collective library does not write the flight recorder "
                    "(COHORT_FLIGHT_RECORDER) in this tree: no collective progress to watch";
  }
  CoordinatorClient client = cluster_->Client();
  wire::JobInfoT info = ct::WaitForJobEnd(client, job, 120s);
  ASSERT_EQ(info.state, wire::JobState::SUCCEEDED) << Events(info) << Log(job, "worker-2");
  EXPECT_EQ(info.restarts, 1);
  const wire::JobEventT* hang = FindEvent(info, "hang: ");
  ASSERT_NE(hang, nullptr) << Events(info);
  EXPECT_NE(hang->message.find("hang: worker-2 has not entered allreduce #50 ("), std::string::npos)
      << hang->message;
  EXPECT_NE(hang->message.find("chief-0, worker-0, worker-1 are waiting in it"), std::string::npos)
      << hang->message;
  EXPECT_NE(FindEvent(info, "restart 1/2: the whole job because of a hang (worker-2 stuck)"),
            nullptr)
      << Events(info);

  ct::RunResult dump = Cli({"logs", job, "--replica", "worker-2", "--dump"});
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.out.find("==== worker-2 attempt 0 ===="), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find("Python stacks (faulthandler)"), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find("watchdog_job.py"), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find("native stacks"), std::string::npos) << dump.out;

  // The second attempt resumed from the checkpoint of step 50.
  EXPECT_NE(Log(job, "worker-2").find("worker-2: starting at step 50 (attempt 1)"),
            std::string::npos);
  ReportTimes(info, StalledAt(job, "worker-2"), "allreduce, 4 ranks");
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "");
}

// worker-1 sleeps 200 ms before every all-reduce: `cohort status` names it while the job runs,
// and the job is never restarted for it.
TEST_F(WatchdogTest, StragglerIsNamedAndNotRestarted) {
  std::string job =
      Submit(JobYaml("wd_straggler", 3, "--mode=straggler, --steps=60, --stuck=worker-1",
                     "{hang_timeout: 10s, max_restarts: 2}"));
  ASSERT_FALSE(job.empty());
  if (!RecorderWritten(job, "worker-0")) {
    GTEST_SKIP() << "the collective library does not write the flight recorder "
                    "(COHORT_FLIGHT_RECORDER) in this tree: no collective progress to watch";
  }
  std::string status;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    status = Cli({"status", job}).out;
    if (status.find("worker-1 enters collectives") != std::string::npos) break;
    std::this_thread::sleep_for(500ms);
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      status, m,
      std::regex("worker-1 enters collectives ([0-9]+) ms after the first rank \\(median of the "
                 "last [0-9]+\\)")))
      << status;
  int late_ms = std::stoi(m[1]);
  EXPECT_GE(late_ms, 150) << status;
  EXPECT_LE(late_ms, 400) << status;
  for (const char* other : {"chief-0 enters", "worker-0 enters", "worker-2 enters"}) {
    EXPECT_EQ(status.find(other), std::string::npos) << status;
  }
  CoordinatorClient client = cluster_->Client();
  wire::JobInfoT info = ct::WaitForJobEnd(client, job, 90s);
  ASSERT_EQ(info.state, wire::JobState::SUCCEEDED) << Events(info);
  EXPECT_EQ(info.restarts, 0);
  EXPECT_EQ(FindEvent(info, "hang: "), nullptr) << Events(info);
}

}  // namespace
}  // namespace cohort
