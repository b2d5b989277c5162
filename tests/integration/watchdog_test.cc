// The hang watchdog end to end (issue 18): a real coordinator and agent, real replica processes
// (tests/integration/watchdog_job.py), a rank that stops, and what the coordinator makes of it:
// the event naming the stuck replica (and operation), its stack dumps (`cohort logs --dump`),
// the restart from the checkpoint and the job's success; the same with the stock torch DDP script
// on the `cohort` backend. Then a straggler, named by `cohort status` and never restarted.
//
// Each test prints how long the watchdog took: from the moment the replica stopped (it prints
// "stalled at <unix ms>" just before it sleeps) to the hang event, and to the job running again
// ("running: all N replicas running" after the restart). hang_timeout is 3 s and agents heartbeat
// every second, so the event is due within about 4 s.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/client.h"
#include "common/flight_recorder.h"
#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
using namespace std::chrono_literals;
using ct::kPython;

class WatchdogTest : public ct::ClusterTest {
 protected:
  void SetUp() override {
    if (!NeedBinaries({COHORT_CLI_BIN, kPython})) return;
    ASSERT_NO_FATAL_FAILURE(StartCoordinator());
    node_ = UniqueNodeId("wd");
    ASSERT_EQ(cluster_->StartAgent({.node_id = node_, .gpus = 0, .cpus = 8}), "");
  }

  // Every test's jobs have ended by its end: no replica process may be left (unless the test was
  // skipped or stopped at a fatal failure, when one may still run).
  void TearDown() override {
    if (!cluster_) return;
    if (!IsSkipped() && !HasFatalFailure()) {
      EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "");
    }
    if (HasFailure()) std::cerr << cluster_->Logs();
    for (pid_t pid : cluster_->ReplicaProcesses()) ::kill(pid, SIGKILL);  // safety net only
    cluster_.reset();
  }

  // A job of a chief and `workers` workers, each running `/usr/bin/python3 <command>` with
  // `args` (a YAML list's items) and `env` (a YAML map's items, after PYTHONPATH).
  std::string JobYaml(const std::string& name, int workers, const std::string& command,
                      const std::string& args, const std::string& env,
                      const std::string& scheduling) {
    std::string process = std::string("    resources: {cpus: 1}\n    process:\n      command: [") +
                          kPython + ", " + command + "]\n      args: [" + args +
                          "]\n      env: {PYTHONPATH: " + COHORT_PYTHON_DIR + ", " + env + "}\n";
    std::string yaml = "name: " + name + "\noutput_dir: " + cluster_->scratch(name) +
                       "\nworker_pools:\n  - role: chief\n    replicas: 1\n" + process;
    if (workers > 0) {
      yaml += "  - role: worker\n    replicas: " + std::to_string(workers) + "\n" + process;
    }
    return yaml + "scheduling: " + scheduling + "\n";
  }
  // The same running watchdog_job.py.
  std::string JobYaml(const std::string& name, int workers, const std::string& args,
                      const std::string& scheduling) {
    return JobYaml(name, workers, COHORT_WATCHDOG_JOB, args, "OMP_NUM_THREADS: \"1\"", scheduling);
  }

  // Submits `yaml` with `cohort submit`: the job's name; "" (and a failure) when it is refused.
  std::string Submit(const std::string& yaml) {
    std::string path = cluster_->scratch("job.yaml");
    ct::WriteFile(path, yaml);
    ct::RunResult r = RunCli({"submit", path});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::string name = r.out;
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    return r.exit_code == 0 ? name : "";
  }

  // Waits up to `timeout` for `job` to end: its last status.
  wire::JobInfoT WaitForEnd(const std::string& job, std::chrono::seconds timeout) {
    CoordinatorClient client = cluster_->Client();
    return ct::WaitForJobEnd(client, job, timeout);
  }

  std::string Log(const std::string& job, const std::string& replica) {
    return RunCli({"logs", job, "--replica", replica}).out;
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
  bool NeedRecorder(const std::string& job, const std::string& replica) {
    std::string file = AttemptDir(job, replica, 0) + "/flight-recorder";
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline &&
           Log(job, replica).find(replica + " step 10") == std::string::npos) {
      std::this_thread::sleep_for(200ms);
    }
    if (ct::FileExists(file)) return true;
    [] {
      GTEST_SKIP() << "the collective library does not write the flight recorder "
                      "(COHORT_FLIGHT_RECORDER) in this tree: no collective progress to watch";
    }();  // GTEST_SKIP returns (void) from the lambda only
    return false;
  }

  // `cohort logs --dump` of `replica`'s first attempt: its Python stacks (faulthandler), in
  // `script`, and its native ones.
  void ExpectStacksDumped(const std::string& job, const std::string& replica,
                          const std::string& script) {
    ct::RunResult dump = RunCli({"logs", job, "--replica", replica, "--dump"});
    EXPECT_EQ(dump.exit_code, 0) << dump.err;
    EXPECT_NE(dump.out.find("==== " + replica + " attempt 0 ===="), std::string::npos) << dump.out;
    const size_t python = dump.out.find("Python stacks (faulthandler)");
    ASSERT_NE(python, std::string::npos) << dump.out;
    // In a frame of the Python stacks, not only in the command line above them.
    EXPECT_NE(dump.out.find(script + "\", line ", python), std::string::npos) << dump.out;
    EXPECT_NE(dump.out.find("native stacks"), std::string::npos) << dump.out;
  }

  // The event that says where `replica`'s first attempt was when the watchdog had its stacks
  // taken (common/stack_where.h) matches `where` (a regex of what follows "(hang): "). The dump
  // may come after the job ended (hang_action: fail): waited for.
  void ExpectWhereEvent(const std::string& job, const std::string& replica,
                        const std::string& where) {
    const std::string prefix = "stacks of " + replica + " attempt 0 (hang): ";
    std::string message, events;
    ct::WaitUntil(
        [&] {
          auto info = cluster_->Client().GetJob(job);
          if (!info.ok()) return false;
          events = Events(*info);
          const wire::JobEventT* e = FindEvent(*info, prefix);
          if (e != nullptr) message = e->message;
          return e != nullptr;
        },
        30s, 200ms);
    ASSERT_FALSE(message.empty()) << events;
    EXPECT_TRUE(std::regex_match(
        message, std::regex(std::regex_replace(prefix, std::regex(R"([()])"), R"(\$&)") + where +
                            " \\(cohort logs " + job + " --replica " + replica + " --dump\\)")))
        << message;
    std::cout << "[watchdog] " << message << "\n";
  }

  // The agent's working directory of one attempt (kept after the attempt ends).
  std::string AttemptDir(const std::string& job, const std::string& replica, int attempt) {
    return cluster_->scratch() + "/../work/" + node_ + "/" + job + "/" + replica + "/attempt-" +
           std::to_string(attempt);
  }

  // What the first attempt of `replica` recorded in its flight recorder (the file outlives it).
  FlightRecorderSnapshot FirstAttemptRecord(const std::string& job, const std::string& replica) {
    auto reader = FlightRecorderFileReader::Open(AttemptDir(job, replica, 0) + "/flight-recorder");
    EXPECT_TRUE(reader.ok()) << replica << ": " << reader.status().ToString();
    if (!reader.ok()) return {};
    auto snap = (*reader)->Snapshot();
    EXPECT_TRUE(snap.ok()) << replica << ": " << snap.status().ToString();
    return snap.ok() ? *snap : FlightRecorderSnapshot{};
  }

  std::string node_;
};

TEST_F(WatchdogTest, LogsProgressStallIsDetectedDumpedAndRestarted) {
  const std::string job = Submit(JobYaml("wd_logs", 1, "--mode=logs, --steps=30, --stall-at=10",
                                         "{hang_timeout: 3s, progress: logs, max_restarts: 2}"));
  ASSERT_FALSE(job.empty());
  wire::JobInfoT info = WaitForEnd(job, 90s);
  ASSERT_EQ(info.state, wire::JobState::SUCCEEDED) << Events(info) << Log(job, "chief-0");
  EXPECT_EQ(info.restarts, 1);
  const wire::JobEventT* hang = FindEvent(info, "hang: no replica has written to its log");
  ASSERT_NE(hang, nullptr) << Events(info);
  EXPECT_NE(hang->message.find("chief-0"), std::string::npos) << hang->message;
  EXPECT_NE(hang->message.find("worker-0"), std::string::npos) << hang->message;
  EXPECT_NE(FindEvent(info, "restart 1/2: the whole job because of a hang"), nullptr)
      << Events(info);

  // The stacks of the stalled replica: its Python stack (in time.sleep) and the native one.
  ExpectStacksDumped(job, "chief-0", "watchdog_job.py");
  ExpectWhereEvent(job, "chief-0", R"(in main \(watchdog_job\.py:[0-9]+\))");
  ReportTimes(info, StalledAt(job, "chief-0"), "progress: logs");
}

TEST_F(WatchdogTest, LogsProgressStallFailsTheJobWithHangActionFail) {
  const std::string job =
      Submit(JobYaml("wd_fail", 0, "--mode=logs, --steps=30, --stall-at=5",
                     "{hang_timeout: 2s, progress: logs, hang_action: fail, max_restarts: 2}"));
  ASSERT_FALSE(job.empty());
  wire::JobInfoT info = WaitForEnd(job, 60s);
  ASSERT_EQ(info.state, wire::JobState::FAILED) << Events(info);
  EXPECT_NE(info.message.find("hang_action: fail"), std::string::npos) << info.message;
  EXPECT_EQ(info.restarts, 0);
  // The stacks come after the job failed; their event is still the job's.
  ExpectWhereEvent(job, "chief-0", R"(in main \(watchdog_job\.py:[0-9]+\))");
}

// Four ranks (chief-0, worker-0..2) all-reduce through cohort.collective; worker-2 sleeps before
// step 50 on the first attempt. The event names it and the operation the others wait in; its
// stacks are dumped; the job restarts from the chief's checkpoint of step 50 and succeeds.
TEST_F(WatchdogTest, RankThatNeverEntersAnAllreduceIsNamedDumpedAndRestarted) {
  const std::string job = Submit(JobYaml(
      "wd_allreduce", 3,
      "--mode=allreduce, --steps=70, --stall-at=50, --stuck=worker-2, --checkpoint-every=10",
      "{hang_timeout: 3s, max_restarts: 2, restart_job_on_worker_restart: true}"));
  ASSERT_FALSE(job.empty());
  if (!NeedRecorder(job, "worker-0")) return;
  wire::JobInfoT info = WaitForEnd(job, 120s);
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

  ExpectStacksDumped(job, "worker-2", "watchdog_job.py");
  ExpectWhereEvent(job, "worker-2", R"(in main \(watchdog_job\.py:[0-9]+\))");

  // The second attempt resumed from the checkpoint of step 50.
  EXPECT_NE(Log(job, "worker-2").find("worker-2: starting at step 50 (attempt 1)"),
            std::string::npos);
  ReportTimes(info, StalledAt(job, "worker-2"), "allreduce, 4 ranks");
}

// The stock DDP script (examples/torch/ddp_digits.py) on the `cohort` torch backend, 3 ranks,
// run unchanged by tests/integration/ddp_stall.py, which makes worker-1's 38th step stall on the
// first attempt (steps sleep 50 ms; an epoch is 15 steps, so the stall comes in epoch 3, after
// rank 0 committed epoch 2's checkpoint). The hang event names worker-1 and the all-reduce the
// others wait in, which the recorders confirm: worker-1 completed the one before it and never
// began it, chief-0 began it. worker-1's Python stacks come from the faulthandler that `import
// cohort.torch` registers; the job restarts from the checkpoint of epoch 2 and succeeds.
// Each torch all-reduce is one call of the communicator (with COHORT_TORCH_CHECK_CALLS=1 the ranks
// would first all-gather the call's shape, and the event would name that all-gather).
TEST_F(WatchdogTest, StockDdpScriptOnTheCohortBackendWithAStalledRankIsNamedDumpedAndRestarted) {
  if (!COHORT_TORCH_BACKEND) {
    GTEST_SKIP() << "the cohort torch backend was not built: " << COHORT_TORCH_BACKEND_WHY;
  }
  const std::string command = std::string(COHORT_DDP_STALL) + ", " + COHORT_TORCH_DDP_SCRIPT;
  const std::string job = Submit(
      JobYaml("wd_ddp", 2, command,
              "--backend=cohort, --epochs=4, --hidden=32, --batch-size=32, --lr=0.1, --seed=3, "
              "--step-delay=0.05, --timeout=120",
              "OMP_NUM_THREADS: \"1\", DDP_STALL_REPLICA: worker-1, "
              "DDP_STALL_AT_STEP: \"38\"",
              "{hang_timeout: 3s, max_restarts: 2, restart_job_on_worker_restart: true}"));
  ASSERT_FALSE(job.empty());
  wire::JobInfoT info = WaitForEnd(job, 150s);
  ASSERT_EQ(info.state, wire::JobState::SUCCEEDED)
      << Events(info) << Log(job, "worker-1") << Log(job, "chief-0");
  EXPECT_EQ(info.restarts, 1);
  const wire::JobEventT* hang = FindEvent(info, "hang: ");
  ASSERT_NE(hang, nullptr) << Events(info);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      hang->message, m,
      std::regex("^hang: worker-1 has not entered allreduce #([0-9]+) \\([^)]*\\) for [0-9.]+ s; "
                 "chief-0, worker-0 are waiting in it$")))
      << hang->message;
  std::cout << "[watchdog] " << hang->message << "\n";
  const uint32_t seq = static_cast<uint32_t>(std::stoul(m[1]));
  ASSERT_GT(seq, 0u);
  EXPECT_NE(FindEvent(info, "restart 1/2: the whole job because of a hang (worker-1 stuck)"),
            nullptr)
      << Events(info);

  // The recorders agree: worker-1 completed #seq-1 and never began #seq; chief-0 began it.
  // worker-1 stopped making progress when #seq-1 ended (Unix ms, by its recorder's anchor).
  const FlightRecorderSnapshot stuck = FirstAttemptRecord(job, "worker-1");
  int64_t stopped_ms = -1;
  for (const FlightEntry& e : stuck.recent) {
    if (e.record.op == FlightOp::kSend || e.record.op == FlightOp::kRecv) continue;
    EXPECT_LT(e.record.op_seq, seq) << DescribeFlightEntry(e, e.record.end_ns);
    if (e.record.op_seq == seq - 1 && e.record.outcome == FlightOutcome::kOk) {
      stopped_ms = (stuck.anchor_wall_ns + e.record.end_ns - stuck.anchor_monotonic_ns) / 1'000'000;
    }
  }
  EXPECT_GT(stopped_ms, 0) << "worker-1's recorder lacks #" << seq - 1;
  bool chief_began = false;
  for (const FlightEntry& e : FirstAttemptRecord(job, "chief-0").recent) {
    chief_began |= e.record.op == FlightOp::kAllreduce && e.record.op_seq == seq;
  }
  EXPECT_TRUE(chief_began) << "chief-0's recorder lacks allreduce #" << seq;

  ExpectStacksDumped(job, "worker-1", "ddp_digits.py");
  ExpectWhereEvent(job, "worker-1", R"(in stalling_forward \(ddp_stall\.py:[0-9]+\))");

  const std::string chief_log = Log(job, "chief-0");
  EXPECT_NE(chief_log.find("resumed from epoch 2"), std::string::npos) << chief_log;
  EXPECT_NE(chief_log.find("epoch 4/4"), std::string::npos) << chief_log;
  // From the end of worker-1's last all-reduce: its stall message comes a step's work later.
  ReportTimes(info, stopped_ms, "stock DDP on the cohort backend, 3 ranks");
}

// `cohort stacks` on the stock DDP script with the gloo backend, which imports nothing of
// Cohort: worker-1 stalls in its 5th forward pass (ddp_stall.py), chief-0 and worker-0 wait for
// it in the backward pass's all-reduce. Each rank's Python stack says where it is, registered for
// the dump by the agent's sitecustomize (agent/python_site.h). No hang_timeout: asked for while
// the job hangs; then the job is cancelled.
TEST_F(WatchdogTest, StacksOfAStockGlooDdpJobShowWhereEachRankWaits) {
  if (const std::string why = ct::TorchMissing(); !why.empty()) GTEST_SKIP() << why;
  const std::string command = std::string(COHORT_DDP_STALL) + ", " + COHORT_TORCH_DDP_SCRIPT;
  const std::string job = Submit(
      JobYaml("wd_stacks", 2, command,
              "--backend=gloo, --epochs=4, --hidden=32, --batch-size=32, --lr=0.1, --seed=3, "
              "--timeout=300",
              "OMP_NUM_THREADS: \"1\", DDP_STALL_REPLICA: worker-1, DDP_STALL_AT_STEP: \"5\"",
              "{max_restarts: 0}"));
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(ct::WaitUntil([&] { return StalledAt(job, "worker-1") > 0; }, 90s))
      << Log(job, "worker-1") << Log(job, "chief-0");
  std::this_thread::sleep_for(1s);  // the others reach the all-reduce worker-1 never joins
  ct::RunResult stacks = RunCli({"stacks", job}, 150s);
  ASSERT_EQ(stacks.exit_code, 0) << stacks.out << stacks.err;
  // One replica's part: from its header line to the next replica's.
  auto part = [&](const std::string& replica) {
    const size_t from = stacks.out.find("==== " + replica + " attempt 0 ====\n");
    if (from == std::string::npos) return std::string();
    size_t to = std::string::npos;
    for (const std::string other : {"chief-0", "worker-0", "worker-1"}) {
      const size_t at = stacks.out.find("==== " + other + " attempt 0 ====\n");
      if (at != std::string::npos && at > from) to = std::min(to, at);
    }
    return stacks.out.substr(from, to == std::string::npos ? std::string::npos : to - from);
  };
  for (const std::string replica : {"chief-0", "worker-0"}) {
    const std::string waiting = part(replica);
    EXPECT_NE(waiting.find("-- Python stacks (faulthandler):"), std::string::npos) << waiting;
    EXPECT_NE(waiting.find("ddp_digits.py"), std::string::npos) << waiting;
    EXPECT_NE(waiting.find("in backward"), std::string::npos) << waiting;
  }
  const std::string stalled = part("worker-1");
  EXPECT_NE(stalled.find("in stalling_forward"), std::string::npos) << stalled;
  // The last block, one line a replica: the waiting ranks in DDP's backward, called from the
  // script's own code; the stalled one in the stall.
  const size_t where = stacks.out.rfind("\n==== where each replica is ====\n");
  ASSERT_NE(where, std::string::npos) << stacks.out.substr(stacks.out.size() - 2000);
  const std::string lines = stacks.out.substr(where);
  for (const std::string replica : {"chief-0", "worker-0"}) {
    EXPECT_TRUE(std::regex_search(
        lines, std::regex("\n" + replica +
                          " attempt 0 +in [A-Za-z_]+ \\(torch/[^ ]+\\.py:[0-9]+\\), from "
                          "[A-Za-z_]+ \\(ddp_digits\\.py:[0-9]+\\)\n")))
        << lines;
  }
  EXPECT_TRUE(std::regex_search(
      lines, std::regex("\nworker-1 attempt 0 +in stalling_forward \\(ddp_stall\\.py:[0-9]+\\)\n")))
      << lines;
  std::cout << "[stacks]" << lines;
  std::cout << "[stacks] " << stacks.out.size() << " bytes for 3 ranks; worker-1:\n"
            << stalled.substr(0, 1500) << "\n";
  // `cohort top` of the same unchanged script: each rank's CPU, from its cgroup, once two
  // heartbeats have come (where this cluster's agents have cgroups).
  if (!cluster_->cgroup_root().empty()) {
    std::string seen;
    EXPECT_TRUE(ct::WaitUntil(
        [&] {
          auto info = cluster_->Client().GetJob(job);
          if (!info.ok()) return false;
          seen.clear();
          size_t known = 0;
          for (const auto& r : info->replicas) {
            seen += r->replica + ": " +
                    (r->usage ? std::to_string(r->usage->cpu_cores) + " cores" : "none") + "; ";
            if (r->usage && r->usage->cpu_cores >= 0) ++known;
          }
          return known == 3;
        },
        20s, 300ms))
        << seen;
    const ct::RunResult top = RunCli({"top", job});
    EXPECT_EQ(top.exit_code, 0) << top.err;
    for (const std::string replica : {"chief-0", "worker-0", "worker-1"}) {
      EXPECT_NE(top.out.find(job + "  " + replica + "  "), std::string::npos) << top.out;
    }
  }
  EXPECT_EQ(RunCli({"cancel", job}).exit_code, 0);
  EXPECT_EQ(WaitForEnd(job, 60s).state, wire::JobState::CANCELLED);
}

// worker-1 sleeps 200 ms before every all-reduce: `cohort status` names it while the job runs,
// and the job is never restarted for it.
TEST_F(WatchdogTest, StragglerIsNamedAndNotRestarted) {
  const std::string job =
      Submit(JobYaml("wd_straggler", 3, "--mode=straggler, --steps=60, --stuck=worker-1",
                     "{hang_timeout: 10s, max_restarts: 2}"));
  ASSERT_FALSE(job.empty());
  if (!NeedRecorder(job, "worker-0")) return;
  std::string status;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    status = RunCli({"status", job}).out;
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

  // The agent exports each replica's lateness on its /metrics.
  const std::regex sample_of("\ncohort_replica_collective_lateness_seconds\\{node=\"" + node_ +
                             "\",job=\"" + job +
                             "\",replica=\"(worker-[0-9]|chief-0)\"\\} ([0-9.e+-]+)");
  std::map<std::string, double> late_s;
  std::string metrics;
  deadline = std::chrono::steady_clock::now() + 30s;
  while (late_s.size() < 4 && std::chrono::steady_clock::now() < deadline) {
    httplib::Client http("127.0.0.1", cluster_->agent_http_port(node_));
    http.set_connection_timeout(2, 0);
    http.set_read_timeout(5, 0);
    auto got = http.Get("/metrics");
    metrics = got && got->status == 200 ? got->body : "";
    late_s.clear();
    for (auto it = std::sregex_iterator(metrics.begin(), metrics.end(), sample_of);
         it != std::sregex_iterator(); ++it) {
      late_s[(*it)[1].str()] = std::stod((*it)[2].str());
    }
    if (late_s.size() < 4) std::this_thread::sleep_for(500ms);
  }
  ASSERT_EQ(late_s.size(), 4u) << metrics;
  EXPECT_NE(metrics.find("# TYPE cohort_replica_collective_lateness_seconds gauge\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("# HELP cohort_replica_collective_lateness_seconds How late"),
            std::string::npos);
  EXPECT_GE(late_s["worker-1"], 0.15) << metrics;
  EXPECT_LE(late_s["worker-1"], 0.4) << metrics;
  for (const char* other : {"chief-0", "worker-0", "worker-2"}) {
    EXPECT_LT(late_s[other], 0.1) << other << "\n" << metrics;
  }
  wire::JobInfoT info = WaitForEnd(job, 90s);
  ASSERT_EQ(info.state, wire::JobState::SUCCEEDED) << Events(info);
  EXPECT_EQ(info.restarts, 0);
  EXPECT_EQ(FindEvent(info, "hang: "), nullptr) << Events(info);
}

}  // namespace
}  // namespace cohort
