// The hang watchdog and the straggler report driven directly: progress reports in, verdicts out,
// the time moved by the test. Then the JobController's side of a verdict: a hang restarts the
// whole job as one incident, or fails it with hang_action: fail.
#include "coordinator/watchdog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/job_controller.h"

namespace cohort::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class NoHealth : public NodeHealth {
 public:
  std::optional<int64_t> LastHeardMs(const std::string&) const override { return now; }
  int64_t now = 0;
};

class WatchdogTest : public ::testing::Test {
 protected:
  // A RUNNING job of a chief and `workers` workers; `scheduling` is its scheduling block. With
  // `running_workers`, the worker pool is elastic and the job runs that many (the others idle).
  // The chief and the workers hold `gpus` GPUs each, the reducers none.
  JobRecord& Start(int workers, const std::string& scheduling, bool reducer = false,
                   std::optional<int> running_workers = std::nullopt, int gpus = 0) {
    const std::string resources = "    resources: {gpus: " + std::to_string(gpus) + "}\n";
    std::string yaml =
        "name: j\nworker_pools:\n"
        "  - role: chief\n    process: {command: [/bin/train]}\n" +
        resources + "  - role: worker\n    replicas: " + std::to_string(workers) +
        "\n    process: {command: [/bin/train]}\n" + resources;
    if (running_workers) yaml += "    min_replicas: 1\n";
    if (reducer) yaml += "  - role: reducer\n    builtin: reducer\n";
    yaml += "scheduling: " + scheduling + "\n";
    auto spec = ParseJobSpec(yaml, "test job");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    JobRecord& job = jobs_.Submit(std::move(*spec), yaml, now_);
    if (running_workers) jobs_.ShrinkElastic(job, *running_workers);
    std::vector<JobController::Slot> slots;
    for (size_t i = 0; i < job.demands.size(); ++i) {
      std::vector<int> held(static_cast<size_t>(job.demands[i].gpus));
      for (size_t g = 0; g < held.size(); ++g) held[g] = static_cast<int>(g);
      slots.push_back(JobController::Slot{"node-" + std::to_string(i), held, 0});
    }
    jobs_.PlaceJob(job, slots, 29000, 29001, now_);
    for (auto& r : job.replicas) {
      if (!r.idle) jobs_.ApplyReplicaStatus(job, r, ReplicaState::RUNNING, -1, 0, "", now_);
    }
    EXPECT_EQ(job.state, JobState::RUNNING);
    jobs_.TakeCommands();
    return job;
  }

  // A collective rank that completed `completed` `idle_ms` ago and is in `current` (-1: none)
  // for `in_op_ms`.
  ProgressReport Rank(const std::string& replica, int64_t completed, int64_t idle_ms,
                      int64_t current = -1, int64_t in_op_ms = 0) {
    ProgressReport p;
    p.replica = replica;
    p.attempt = jobs_.FindJob("j")->FindReplica(replica)->attempt;
    p.has_recorder = true;
    p.completed_seq = completed;
    p.completed_idle_ms = idle_ms;
    p.current_seq = current;
    if (current >= 0) {
      p.current_op = "allreduce";
      p.current_algorithm = "reduction-server";
      p.current_bytes = 64 << 20;
      p.current_ms = in_op_ms;
    }
    p.log_idle_ms = idle_ms;
    p.metric_idle_ms = idle_ms;
    return p;
  }
  void Send(const ProgressReport& p) { dog_.Report(*jobs_.FindJob("j"), p, now_); }
  Watchdog::Checked Check() {
    return dog_.Check([this](const std::string& name) { return jobs_.FindJob(name); }, now_);
  }

  int64_t now_ = 1'000'000;
  NoHealth health_;
  JobController jobs_{JobControllerOptions{.default_output_base = "/tmp/cohort-watchdog-test",
                                           .heartbeat_timeout_ms = 10'000,
                                           .heartbeat_interval_ms = 1'000,
                                           .checked_output_root = ""},
                      &health_};
  Watchdog dog_;
};

TEST_F(WatchdogTest, NamesTheRankThatNeverEnteredTheOperation) {
  Start(3, "{hang_timeout: 120s}");
  // Everyone completed #49 130 s ago; worker-2 never entered #50, the others wait in it.
  Send(Rank("chief-0", 49, 130'000, 50, 129'000));
  Send(Rank("worker-0", 49, 130'000, 50, 129'500));
  Send(Rank("worker-1", 49, 130'000, 50, 128'000));
  Send(Rank("worker-2", 49, 130'000));
  Watchdog::Checked c = Check();
  ASSERT_EQ(c.hangs.size(), 1u);
  EXPECT_EQ(c.hangs[0].job, "j");
  EXPECT_EQ(c.hangs[0].message,
            "hang: worker-2 has not entered allreduce #50 (64 MiB, reduction-server) for 130 s; "
            "chief-0, worker-0, worker-1 are waiting in it");
  EXPECT_THAT(c.hangs[0].stuck, ElementsAre("worker-2"));
  EXPECT_THAT(c.hangs[0].dump, ElementsAre("worker-2"));
  // Once per set of attempts.
  EXPECT_TRUE(Check().hangs.empty());
}

// An elastic job running without worker-2 (idle: no room for it) is judged on the ranks that run.
TEST_F(WatchdogTest, AnElasticJobIsJudgedOnTheRanksItRuns) {
  JobRecord& job = Start(3, "{hang_timeout: 120s, restart_job_on_worker_restart: true}", false, 2);
  ASSERT_TRUE(job.FindReplica("worker-2")->idle);
  Send(Rank("chief-0", 49, 130'000, 50, 129'000));
  Send(Rank("worker-0", 49, 130'000, 50, 129'500));
  Send(Rank("worker-1", 49, 130'000));
  Watchdog::Checked c = Check();
  ASSERT_EQ(c.hangs.size(), 1u);
  EXPECT_EQ(c.hangs[0].message,
            "hang: worker-1 has not entered allreduce #50 (64 MiB, reduction-server) for 130 s; "
            "chief-0, worker-0 are waiting in it");
}

TEST_F(WatchdogTest, NoVerdictBeforeTheTimeout) {
  Start(1, "{hang_timeout: 120s}");
  Send(Rank("chief-0", 49, 100'000, 50, 99'000));
  Send(Rank("worker-0", 49, 100'000));
  EXPECT_TRUE(Check().hangs.empty());
  // No new report: the old one ages with the coordinator's time, but only up to
  // max_report_age_ms; then the job is not judged on stale reports.
  now_ += 4'000;
  EXPECT_TRUE(Check().hangs.empty());
  now_ += 17'000;
  EXPECT_TRUE(Check().hangs.empty());
  Send(Rank("chief-0", 49, 121'000, 50, 120'000));
  Send(Rank("worker-0", 49, 121'000));
  EXPECT_EQ(Check().hangs.size(), 1u);
}

TEST_F(WatchdogTest, ProgressOfAnyRankKeepsTheJobAlive) {
  Start(1, "{hang_timeout: 20s}");
  // worker-0 completes operations; chief-0 has been in #7 for a while but the job moves.
  Send(Rank("chief-0", 6, 30'000, 7, 29'000));
  Send(Rank("worker-0", 9, 100));
  EXPECT_TRUE(Check().hangs.empty());
}

// A slow start (torch imports, data loading, the rendezvous) is not a hang: the time counts from
// when a rank enters its first operation.
TEST_F(WatchdogTest, RanksThatHaveNotEnteredAnOperationYetAreStarting) {
  Start(1, "{hang_timeout: 3s}");
  Send(Rank("chief-0", -1, 40'000));
  Send(Rank("worker-0", -1, 40'000));
  EXPECT_TRUE(Check().hangs.empty());
  // chief-0 waits in #0 for 2 s while worker-0 still loads: not yet.
  Send(Rank("chief-0", -1, 42'000, 0, 2'000));
  Send(Rank("worker-0", -1, 42'000));
  EXPECT_TRUE(Check().hangs.empty());
  now_ += 1'500;
  Send(Rank("chief-0", -1, 43'500, 0, 3'500));
  Send(Rank("worker-0", -1, 43'500));
  Watchdog::Checked c = Check();
  ASSERT_EQ(c.hangs.size(), 1u);
  EXPECT_THAT(c.hangs[0].message, HasSubstr("hang: worker-0 has not entered allreduce #0"));
  EXPECT_THAT(c.hangs[0].stuck, ElementsAre("worker-0"));
}

TEST_F(WatchdogTest, NamesTheRankStuckInAnOperationItsPeersCompleted) {
  Start(2, "{hang_timeout: 60s}");
  Send(Rank("chief-0", 12, 61'000, 13, 60'000));
  Send(Rank("worker-0", 12, 61'000, 13, 60'000));
  Send(Rank("worker-1", 11, 70'000, 12, 70'000));
  Watchdog::Checked c = Check();
  ASSERT_EQ(c.hangs.size(), 1u);
  EXPECT_EQ(c.hangs[0].message,
            "hang: worker-1 is stuck in allreduce #12 for 70 s, which its peers completed; "
            "allreduce #13 (64 MiB, reduction-server): chief-0, worker-0 are waiting in it");
  EXPECT_THAT(c.hangs[0].stuck, ElementsAre("worker-1"));
}

TEST_F(WatchdogTest, EveryRankWaitingPointsOutsideTheRanks) {
  Start(1, "{hang_timeout: 30s}", /*reducer=*/true);
  Send(Rank("chief-0", 3, 31'000, 4, 30'500));
  Send(Rank("worker-0", 3, 31'000, 4, 30'600));
  Watchdog::Checked c = Check();
  ASSERT_EQ(c.hangs.size(), 1u);
  EXPECT_THAT(c.hangs[0].message, HasSubstr("every rank is waiting in allreduce #4"));
  EXPECT_THAT(c.hangs[0].message, HasSubstr("outside the ranks"));
  // The reducer's stacks too: it may be what holds them.
  EXPECT_THAT(c.hangs[0].dump, ElementsAre("chief-0", "worker-0", "reducer-0"));
}

TEST_F(WatchdogTest, EveryRankOutsideTheCollectives) {
  Start(1, "{hang_timeout: 30s}");
  Send(Rank("chief-0", 3, 31'000));
  Send(Rank("worker-0", 3, 32'000));
  Watchdog::Checked c = Check();
  ASSERT_EQ(c.hangs.size(), 1u);
  EXPECT_THAT(c.hangs[0].message,
              HasSubstr("no rank has completed a collective operation for 31 s and none is in one "
                        "(the last completed: #3)"));
  EXPECT_THAT(c.hangs[0].stuck, ElementsAre("chief-0", "worker-0"));
}

// A replica whose ranks have all exited (torchrun not yet noticing, a script exporting the model)
// is finishing: it is left out, so the others are judged alone, and a job all of whose ranks have
// exited is neither judged nor noted as unwatchable, however long its replicas take to end.
TEST_F(WatchdogTest, ReplicasWhoseRanksHaveAllExitedAreFinishingNotStuck) {
  JobRecord& job = Start(1, "{hang_timeout: 30s}");
  job.start_time_ms = now_ - 600'000;
  ProgressReport chief = Rank("chief-0", 84, 300'000);
  chief.ranks_exited = true;
  ProgressReport worker = Rank("worker-0", 84, 300'000);
  worker.ranks_exited = true;
  Send(chief);
  Send(worker);
  Watchdog::Checked c = Check();
  EXPECT_TRUE(c.hangs.empty()) << c.hangs[0].message;
  EXPECT_TRUE(c.notes.empty()) << c.notes[0].second;
  // One replica's ranks exited, the other's are stuck outside the collectives: that one is named.
  worker.ranks_exited = false;
  Send(worker);
  c = Check();
  ASSERT_EQ(c.hangs.size(), 1u);
  EXPECT_THAT(c.hangs[0].stuck, ElementsAre("worker-0"));
}

// A replica of several ranks (torchrun inside it) reports its slowest rank: the verdict names it.
TEST_F(WatchdogTest, AReplicaOfSeveralRanksIsNamedWithItsSlowestRank) {
  Start(2, "{hang_timeout: 60s}");
  ProgressReport chief = Rank("chief-0", 60, 61'000, 61, 61'000);
  chief.rank = 1;  // its two ranks wait in #61
  ProgressReport stuck = Rank("worker-0", 60, 61'000);
  stuck.rank = 3;  // of its two ranks, rank 3 never entered #61
  ProgressReport behind = Rank("worker-1", 59, 62'000, 60, 62'000);
  behind.rank = 4;
  Send(chief);
  Send(stuck);
  Send(behind);
  Watchdog::Checked c = Check();
  ASSERT_EQ(c.hangs.size(), 1u);
  EXPECT_EQ(c.hangs[0].message,
            "hang: worker-0 (rank 3) has not entered allreduce #61 (64 MiB, reduction-server) "
            "for 61 s, worker-1 (rank 4) is stuck in allreduce #60 for 62 s, which its peers "
            "completed; chief-0 is waiting in it");
  EXPECT_THAT(c.hangs[0].stuck, ElementsAre("worker-0", "worker-1"));
}

TEST_F(WatchdogTest, LogsProgress) {
  Start(1, "{hang_timeout: 20s, progress: logs}");
  ProgressReport chief = Rank("chief-0", -1, 0);
  chief.has_recorder = false;
  ProgressReport worker = chief;
  worker.replica = "worker-0";
  chief.log_idle_ms = 5'000;
  worker.log_idle_ms = 25'000;
  Send(chief);
  Send(worker);
  EXPECT_TRUE(Check().hangs.empty());  // the chief wrote 5 s ago
  now_ += 15'000;
  chief.log_idle_ms = 20'000;
  worker.log_idle_ms = 40'000;
  Send(chief);
  Send(worker);
  Watchdog::Checked c = Check();
  ASSERT_EQ(c.hangs.size(), 1u);
  EXPECT_EQ(c.hangs[0].message,
            "hang: no replica has written to its log for 20 s (progress: logs): chief-0, "
            "worker-0");
}

TEST_F(WatchdogTest, MetricsProgress) {
  Start(1, "{hang_timeout: 20s, progress: metrics}");
  ProgressReport chief = Rank("chief-0", -1, 0);
  chief.has_recorder = false;
  chief.log_idle_ms = 0;  // it prints, but reports no metric
  chief.metric_idle_ms = 21'000;
  ProgressReport worker = chief;
  worker.replica = "worker-0";
  Send(chief);
  Send(worker);
  Watchdog::Checked c = Check();
  ASSERT_EQ(c.hangs.size(), 1u);
  EXPECT_THAT(c.hangs[0].message, HasSubstr("no replica has written a metric line"));
}

// progress: gpus: a heartbeat with one of a replica's GPUs in use is progress; the clock of an
// attempt starts at its first report; the reducer (no GPU) counts for nothing.
TEST_F(WatchdogTest, GpusProgress) {
  Start(1, "{hang_timeout: 20s, progress: gpus}", /*reducer=*/true, std::nullopt, /*gpus=*/2);
  auto gpus = [&](const std::string& replica, bool busy) {
    ProgressReport p = Rank(replica, -1, 0);  // it writes to its log all the time
    p.has_recorder = false;
    p.gpus_sampled = replica.rfind("reducer", 0) == 0 ? 0 : 2;
    p.gpus_busy = busy;
    Send(p);
  };
  auto all = [&](bool chief_busy, bool worker_busy) {
    gpus("chief-0", chief_busy);
    gpus("worker-0", worker_busy);
    gpus("reducer-0", false);
  };
  all(false, false);
  now_ += 15'000;
  all(false, true);  // the worker's GPUs are in use: the job makes progress
  now_ += 15'000;
  all(false, false);
  EXPECT_TRUE(Check().hangs.empty());  // in use 15 s ago
  now_ += 5'000;
  all(false, false);
  Watchdog::Checked c = Check();
  ASSERT_EQ(c.hangs.size(), 1u);
  EXPECT_EQ(c.hangs[0].message,
            "hang: no replica has used its GPUs for 20 s (progress: gpus; every GPU below 1%): "
            "chief-0, worker-0");
}

// A job none of whose replicas reports a sample of its GPUs (no NVML on the nodes) is noted once,
// and never judged.
TEST_F(WatchdogTest, AGpuJobWithoutSamplesIsNotedOnce) {
  JobRecord& job = Start(1, "{hang_timeout: 10s, progress: gpus}", false, std::nullopt, 1);
  job.start_time_ms = now_ - 11'000;
  now_ += 60'000;
  for (const char* replica : {"chief-0", "worker-0"}) Send(Rank(replica, -1, 0));
  Watchdog::Checked c = Check();
  EXPECT_TRUE(c.hangs.empty());
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(c.notes[0].second,
            "watchdog: no replica of this job reports its GPUs' utilization (no NVML on their "
            "nodes, or MIG devices, which NVML measures none of), so scheduling.progress: gpus "
            "cannot be watched; use progress: logs or metrics");
  EXPECT_TRUE(Check().notes.empty());
}

// A queue's gpu-idle-limit watches every job of the queue holding GPUs, whatever its own
// scheduling: here its log keeps its own watch (progress: logs) quiet, its GPUs sit idle, and the
// verdict fails it rather than restarting it. A job of the queue without GPUs is not watched so.
TEST_F(WatchdogTest, AQueuesGpuIdleLimitFailsAJobWhoseGpusSitIdle) {
  dog_ = Watchdog(WatchdogOptions{.gpu_idle_limit_ms = {{"notebooks", 20'000}}});
  JobRecord& job = Start(1, "{queue: notebooks, hang_timeout: 60s, progress: logs}", false,
                         std::nullopt, /*gpus=*/1);
  auto idle = [&] {
    for (const char* replica : {"chief-0", "worker-0"}) {
      ProgressReport p = Rank(replica, -1, 0);  // it has just written to its log
      p.has_recorder = false;
      p.gpus_sampled = 1;
      Send(p);
    }
  };
  idle();
  now_ += 19'000;
  idle();
  EXPECT_TRUE(Check().hangs.empty());
  now_ += 1'000;
  idle();
  Watchdog::Checked c = Check();
  ASSERT_EQ(c.hangs.size(), 1u);
  EXPECT_EQ(c.hangs[0].message,
            "hang: no replica has used its GPUs for 20 s (queue notebooks: gpu-idle-limit=20s; "
            "every GPU below 1%): chief-0, worker-0");
  EXPECT_EQ(c.hangs[0].fail_reason,
            "its GPUs sat idle for 20s (queue notebooks: gpu-idle-limit=20s)");
  EXPECT_TRUE(Check().hangs.empty()) << "judged twice for the same attempts";
  jobs_.Hang(job, c.hangs[0].stuck, c.hangs[0].message, now_, c.hangs[0].fail_reason);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_EQ(job.message, "its GPUs sat idle for 20s (queue notebooks: gpu-idle-limit=20s)");
  EXPECT_EQ(job.restarts, 0);
  EXPECT_EQ(jobs_.hangs_by_outcome(), (std::map<std::string, uint64_t>{{"gpu_idle_limit", 1}}));
  EXPECT_TRUE(jobs_.restarts_by_cause().empty());
}

TEST_F(WatchdogTest, AQueuesGpuIdleLimitLeavesJobsWithoutGpusAndOtherQueuesAlone) {
  dog_ = Watchdog(WatchdogOptions{.gpu_idle_limit_ms = {{"notebooks", 20'000}}});
  Start(1, "{queue: notebooks}");
  for (const char* replica : {"chief-0", "worker-0"}) Send(Rank(replica, -1, 0));
  now_ += 60'000;
  for (const char* replica : {"chief-0", "worker-0"}) Send(Rank(replica, -1, 0));
  EXPECT_TRUE(Check().hangs.empty());
}

TEST_F(WatchdogTest, WithoutHangTimeoutNothingIsJudged) {
  Start(1, "{max_restarts: 1}");
  Send(Rank("chief-0", 49, 1'000'000, 50, 1'000'000));
  Send(Rank("worker-0", 49, 1'000'000));
  EXPECT_TRUE(Check().hangs.empty());
}

TEST_F(WatchdogTest, JobWithoutRecordersIsNotedOnce) {
  JobRecord& job = Start(1, "{hang_timeout: 10s}");
  job.start_time_ms = now_ - 11'000;
  ProgressReport chief = Rank("chief-0", -1, 11'000);
  chief.has_recorder = false;
  ProgressReport worker = chief;
  worker.replica = "worker-0";
  Send(chief);
  Send(worker);
  Watchdog::Checked c = Check();
  EXPECT_TRUE(c.hangs.empty());
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_THAT(c.notes[0].second, HasSubstr("cannot be watched"));
  EXPECT_TRUE(Check().notes.empty());
}

TEST_F(WatchdogTest, StragglerIsNamedWithItsMedianLateness) {
  Start(2, "{hang_timeout: 60s}");
  const int64_t base_us = 1'700'000'000'000'000;
  for (int64_t seq = 0; seq < 40; ++seq) {
    int64_t t = base_us + seq * 1'000'000;
    for (const auto& [name, late_us] : std::vector<std::pair<std::string, int64_t>>{
             {"chief-0", 1'000 * (seq % 3)}, {"worker-0", 0}, {"worker-1", 410'000}}) {
      ProgressReport p = Rank(name, seq - 1, 10);
      p.starts = {{seq, t + late_us}};
      Send(p);
    }
  }
  EXPECT_THAT(dog_.StragglerLines("j"),
              ElementsAre("worker-1 enters collectives 410 ms after the first rank (median of "
                          "the last 40)"));
  std::vector<Lateness> all = dog_.LatenessOf("j");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_LT(all[0].median_ms, 5);  // chief-0
  EXPECT_NEAR(all[2].median_ms, 410, 5);
}

TEST_F(WatchdogTest, FewLateOperationsAreNoStraggler) {
  Start(1, "{hang_timeout: 60s}");
  const int64_t base_us = 1'700'000'000'000'000;
  for (int64_t seq = 0; seq < 50; ++seq) {
    int64_t t = base_us + seq * 1'000'000;
    ProgressReport chief = Rank("chief-0", seq - 1, 10);
    chief.starts = {{seq, t}};
    ProgressReport worker = Rank("worker-0", seq - 1, 10);
    worker.starts = {{seq, t + (seq % 10 == 0 ? 900'000 : 3'000)}};  // late one time in ten
    Send(chief);
    Send(worker);
  }
  EXPECT_TRUE(dog_.StragglerLines("j").empty());
}

TEST_F(WatchdogTest, HangRestartsTheWholeJobAsOneIncident) {
  JobRecord& job = Start(3, "{hang_timeout: 120s, max_restarts: 2}");
  jobs_.Hang(job, {"worker-2"}, "hang: worker-2 has not entered allreduce #50", now_);
  EXPECT_EQ(job.restarts, 1);
  EXPECT_EQ(job.state, JobState::QUEUED);
  ControllerCommands commands = jobs_.TakeCommands();
  EXPECT_EQ(commands.stop.size(), 4u);
  ASSERT_GE(job.events.size(), 2u);
  EXPECT_EQ(job.events[job.events.size() - 2].message,
            "hang: worker-2 has not entered allreduce #50");
  EXPECT_EQ(job.events.back().message,
            "restart 1/2: the whole job because of a hang (worker-2 stuck)");
  EXPECT_EQ(jobs_.restarts_by_cause(), (std::map<std::string, uint64_t>{{"hang", 1}}));
  EXPECT_EQ(jobs_.hangs_by_outcome(), (std::map<std::string, uint64_t>{{"restart", 1}}));
  // The stopped replicas are no failure and spend nothing more.
  for (auto& r : job.replicas) {
    jobs_.ApplyReplicaStatus(job, r, ReplicaState::STOPPED, 143, 0, "", now_);
  }
  EXPECT_EQ(job.restarts, 1);
  EXPECT_EQ(job.state, JobState::QUEUED);
}

TEST_F(WatchdogTest, HangFailsTheJobWhenTheSpecSaysSo) {
  JobRecord& job = Start(1, "{hang_timeout: 120s, hang_action: fail}");
  jobs_.Hang(job, {"worker-0"}, "hang: worker-0 has not entered allreduce #3", now_);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_THAT(job.message, HasSubstr("hang_action: fail"));
  EXPECT_EQ(job.restarts, 0);
  EXPECT_EQ(jobs_.hangs_by_outcome(), (std::map<std::string, uint64_t>{{"fail", 1}}));
}

TEST_F(WatchdogTest, HangWithTheBudgetSpentFailsTheJob) {
  JobRecord& job = Start(1, "{hang_timeout: 120s, max_restarts: 0}");
  jobs_.Hang(job, {"worker-0"}, "hang: worker-0 has not entered allreduce #3", now_);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_THAT(job.message, HasSubstr("restart budget (max_restarts=0) is spent"));
  EXPECT_EQ(jobs_.hangs_by_outcome(), (std::map<std::string, uint64_t>{{"fail", 1}}));
}

// The dumps a verdict asked for give one event each, saying where the replica was; others (a
// `cohort stacks`, another attempt, a dump too late) give none.
TEST_F(WatchdogTest, AVerdictsDumpSaysWhereTheStuckReplicaWas) {
  const std::string dump =
      "==== stacks taken 2026-12-01T18:20:00Z: hang: ...\n\n---- pid 42: python3 train.py\n"
      "-- Python stacks (faulthandler):\n"
      "Current thread 0x00007f42b884a040 (most recent call first):\n"
      "  File \"/usr/lib/python3/dist-packages/torch/_tensor.py\", line 488 in backward\n"
      "  File \"/srv/train.py\", line 88 in train\n"
      "  File \"/srv/train.py\", line 99 in <module>\n"
      "-- native stacks (eu-stack):\n";
  dog_.StacksAsked("j", "worker-2", 0, now_);
  dog_.StacksAsked("j", "chief-0", 0, now_);
  EXPECT_EQ(dog_.StacksTaken("j", "worker-1", 0, dump, now_), std::nullopt);  // not asked
  EXPECT_EQ(dog_.StacksTaken("j", "worker-2", 1, dump, now_), std::nullopt);  // not that attempt
  EXPECT_EQ(dog_.StacksTaken("j", "worker-2", 0, dump, now_ + 3'000),
            "stacks of worker-2 attempt 0 (hang): in backward (torch/_tensor.py:488), from train "
            "(train.py:88) (cohort logs j --replica worker-2 --dump)");
  EXPECT_EQ(dog_.StacksTaken("j", "worker-2", 0, dump, now_ + 4'000), std::nullopt);  // once
  // A dump that reads as nothing still says it came; one past the wait says nothing.
  EXPECT_EQ(dog_.StacksTaken("j", "chief-0", 0, "==== stacks taken\n", now_),
            "stacks of chief-0 attempt 0 (hang): no stack could be read from them (cohort logs j "
            "--replica chief-0 --dump)");
  dog_.StacksAsked("j", "worker-0", 0, now_);
  EXPECT_EQ(dog_.StacksTaken("j", "worker-0", 0, dump, now_ + Watchdog::kStacksWaitMs + 1),
            std::nullopt);
  // A name that is no UTF-8, with a terminal escape: stored as safe text.
  dog_.StacksAsked("j", "worker-1", 0, now_);
  EXPECT_EQ(dog_.StacksTaken("j", "worker-1", 0,
                             "---- pid 1: x\n-- Python stacks (faulthandler):\nThread 0x1 (most "
                             "recent call first):\n  File \"/w/a\xff\x1b[2J.py\", line 1 in f\n",
                             now_),
            "stacks of worker-1 attempt 0 (hang): in f (a\xEF\xBF\xBD [2J.py:1) (cohort logs j "
            "--replica worker-1 --dump)");
}

TEST(FormatBytesTest, Units) {
  EXPECT_EQ(FormatBytes(100), "100 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(64 << 20), "64 MiB");
}

}  // namespace
}  // namespace cohort::coordinator
