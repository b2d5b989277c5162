// The job state machine driven directly: events in, commands out, no sockets and no clock (the
// test moves `now_` and says which nodes were heard from when). Most of these are the failure-
// attribution cases of DESIGN.md: a failure that follows another replica's loss, preemption or
// retryable end is collateral, and one incident spends one restart.
#include "coordinator/job_controller.h"

#include <flatbuffers/flatbuffers.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/agent_service.h"

namespace cohort::coordinator {
namespace {

constexpr int64_t kTimeoutMs = 10'000;
constexpr int64_t kIntervalMs = 1'000;

class FakeNodeHealth : public NodeHealth {
 public:
  std::optional<int64_t> LastHeardMs(const std::string& node_id) const override {
    auto it = heard.find(node_id);
    if (it == heard.end()) return std::nullopt;
    return it->second;
  }
  std::string Unhealthy(const std::string& node_id) const override {
    auto it = unhealthy.find(node_id);
    return it == unhealthy.end() ? "" : it->second;
  }
  bool HealthRechecking(const std::string& node_id) const override {
    return rechecking.count(node_id) > 0;
  }
  std::map<std::string, int64_t> heard;  // absent: unknown or LOST
  std::map<std::string, std::string> unhealthy;
  std::set<std::string> rechecking;
};

JobControllerOptions Options() {
  JobControllerOptions o;
  o.default_output_base = "/tmp/cohort-job-controller-test";
  o.heartbeat_timeout_ms = kTimeoutMs;
  o.heartbeat_interval_ms = kIntervalMs;
  return o;
}

class JobControllerTest : public ::testing::Test {
 protected:
  // Submits a job of a chief, `workers` workers and the pools of more_pools_, places
  // replica i on nodes[i], and reports every replica RUNNING. `restart_whole_job` is its
  // restart_job_on_worker_restart (nullopt: left out); `more_scheduling` is added to the
  // scheduling block (", timeout: 1m").
  JobRecord& Start(const std::string& name, int workers, std::optional<bool> restart_whole_job,
                   int max_restarts, const std::vector<std::string>& nodes,
                   const std::string& more_scheduling = "") {
    std::string yaml = "name: " + name +
                       "\nworker_pools:\n"
                       "  - role: chief\n    replicas: 1\n    resources: {gpus: 1}\n"
                       "    process: {command: [/bin/train]}\n";
    if (workers > 0) {
      yaml += "  - role: worker\n    replicas: " + std::to_string(workers) +
              "\n    resources: {gpus: 1}\n    process: {command: [/bin/train]}\n";
    }
    for (const auto& [role, replicas] : more_pools_) {
      yaml += "  - role: " + role + "\n    replicas: " + std::to_string(replicas) +
              "\n    process: {command: [/bin/" + role + "]}\n";
    }
    yaml += "scheduling: {max_restarts: " + std::to_string(max_restarts) +
            (restart_whole_job ? std::string(", restart_job_on_worker_restart: ") +
                                     (*restart_whole_job ? "true" : "false")
                               : "") +
            more_scheduling + "}\n";
    auto spec = ParseJobSpec(yaml, "test job");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    JobRecord& job = jobs_.Submit(std::move(*spec), yaml, now_);
    std::vector<JobController::Slot> slots;
    for (size_t i = 0; i < job.replicas.size(); ++i) {
      slots.push_back(JobController::Slot{nodes.at(i), {0}, 30000 + static_cast<int>(i)});
      health_.heard[nodes.at(i)] = now_;
    }
    jobs_.PlaceJob(job, slots, 29000, 29001, now_);
    for (auto& r : job.replicas) Report(job, r.name, ReplicaState::RUNNING);
    EXPECT_EQ(job.state, JobState::RUNNING);
    jobs_.TakeCommands();
    return job;
  }
  // A one-GPU job `name` submitted to run after `after` (scheduling.after's YAML list), which
  // CheckAfter takes. `more_scheduling` is added to the scheduling block (", max_wait: 1m").
  JobRecord& SubmitAfter(const std::string& name, const std::string& after,
                         const std::string& more_scheduling = "") {
    const std::string yaml = "name: " + name +
                             "\nworker_pools:\n  - role: chief\n    resources: {gpus: 1}\n"
                             "    process: {command: [/bin/x]}\nscheduling: {after: " +
                             after + more_scheduling + "}\n";
    auto spec = ParseJobSpec(yaml, "test job");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_TRUE(jobs_.CheckAfter(*spec).ok()) << jobs_.CheckAfter(*spec).ToString();
    return jobs_.Submit(std::move(*spec), yaml, now_);
  }
  // Elastic job "e" (a chief and 3 workers of one GPU, min_replicas 1) placed with 2 workers on
  // n0..n2, every replica it runs RUNNING; its launches in launches_.
  JobRecord& StartElastic() {
    const std::string yaml =
        "name: e\nworker_pools:\n"
        "  - role: chief\n    resources: {gpus: 1}\n    process: {command: [/bin/train]}\n"
        "  - role: worker\n    replicas: 3\n    min_replicas: 1\n    resources: {gpus: 1}\n"
        "    process: {command: [/bin/train]}\n"
        "scheduling: {restart_job_on_worker_restart: true}\n";
    auto spec = ParseJobSpec(yaml, "test job");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    JobRecord& job = jobs_.Submit(std::move(*spec), yaml, now_);
    EXPECT_EQ(job.demands.size(), 4u);
    jobs_.ShrinkElastic(job, 0);  // never below min_replicas
    EXPECT_EQ(job.elastic_workers, 1);
    jobs_.ShrinkElastic(job, 2);
    EXPECT_EQ(job.demands.size(), 3u);
    std::vector<JobController::Slot> slots;
    for (int i = 0; i < 3; ++i) {
      slots.push_back(JobController::Slot{"n" + std::to_string(i), {0}, 30000 + i});
      health_.heard["n" + std::to_string(i)] = now_;
    }
    jobs_.PlaceJob(job, slots, 29000, 29001, now_);
    launches_ = jobs_.TakeCommands().launch;
    for (const auto& r : job.replicas) {
      if (!r.idle) Report(job, r.name, ReplicaState::RUNNING);
    }
    EXPECT_EQ(job.state, JobState::RUNNING);
    return job;
  }
  std::vector<LaunchCommand> launches_;
  // The running `job` is still RUNNING `running_ms` from now, and FAILED by its timeout
  // `more_ms` after that.
  void ExpectTimedOutBetween(JobRecord& job, int64_t running_ms, int64_t more_ms) {
    Advance(running_ms);
    jobs_.CheckTimeouts(now_, true);
    EXPECT_EQ(job.state, JobState::RUNNING);
    Advance(more_ms);
    jobs_.CheckTimeouts(now_, true);
    EXPECT_EQ(job.state, JobState::FAILED);
  }
  // A one-replica job `name`, submitted, never placed.
  JobRecord& SubmitQueued(const std::string& name) {
    const std::string yaml = "name: " + name +
                             "\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                             "    process: {command: [/bin/train]}\n";
    auto spec = ParseJobSpec(yaml, "test job");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    return jobs_.Submit(std::move(*spec), yaml, now_);
  }

  void Report(JobRecord& job, const std::string& replica, ReplicaState state, int exit_code = -1,
              int signal = 0, int cause_signal = 0) {
    ReplicaRecord* r = job.FindReplica(replica);
    ASSERT_NE(r, nullptr) << replica;
    jobs_.ApplyReplicaStatus(job, *r, state, exit_code, signal, "", now_, cause_signal);
  }
  void Advance(int64_t ms) { now_ += ms; }
  // Every node in `nodes` heartbeats now.
  void Hear(const std::vector<std::string>& nodes) {
    for (const auto& n : nodes) health_.heard[n] = now_;
  }
  // `node`, silent since it was last heard, is declared lost.
  void Lose(const std::string& node) {
    std::optional<int64_t> last_heard = health_.LastHeardMs(node);
    health_.heard.erase(node);
    jobs_.NodeLost(node, "no heartbeat for 10.5s (timeout 10s)", now_, last_heard);
  }
  // The job's latest event that starts with `prefix`.
  static std::string LastEventOpening(const JobRecord& job, const std::string& prefix) {
    for (auto it = job.events.rbegin(); it != job.events.rend(); ++it) {
      if (it->message.rfind(prefix, 0) == 0) return it->message;
    }
    return "<none>";
  }
  std::vector<std::string> StopsSent() {
    std::vector<std::string> out;
    for (const auto& s : jobs_.TakeCommands().stop) out.push_back(s.replica);
    std::sort(out.begin(), out.end());
    return out;
  }
  // A chief and one worker asked to stop end as DDP ranks do (the worker exits 1 as its peer goes,
  // the chief on SIGTERM): no failure, no restart, nothing held after.
  void EndAsStoppedRanksEnd(JobRecord& job) {
    Advance(300);
    Report(job, "worker-0", ReplicaState::FAILED, 1);
    Report(job, "chief-0", ReplicaState::STOPPED, 143, 15);
    EXPECT_EQ(job.restarts, 0);
    EXPECT_TRUE(jobs_.HeldVerdicts().empty());
    EXPECT_FALSE(JobController::AnyHolding(job));
  }
  // The event of the first of three restarts of the whole job (restart_job_on_worker_restart).
  static std::string WholeJobRestart(const std::string& cause) {
    return "restart 1/3: the whole job (restart_job_on_worker_restart) because " + cause;
  }
  // `job` has spent one restart, and its last restart event is `event`.
  static void ExpectRestartedOnce(const JobRecord& job, const std::string& event) {
    EXPECT_EQ(job.restarts, 1);
    EXPECT_EQ(LastRestartEvent(job), event);
  }
  static std::string LastRestartEvent(const JobRecord& job) {
    return LastEventOpening(job, "restart ");
  }

  std::vector<std::pair<std::string, int>> more_pools_;  // (role, replicas) for Start
  int64_t now_ = 1'700'000'000'000;
  FakeNodeHealth health_;
  JobController jobs_{Options(), &health_};
};

// An elastic job placed with fewer workers launches those alone and marks the others idle; its
// growth stops every replica and asks for the larger size, spending no restart; its next
// restart asks for every worker again. The controller counts both resizes.
// What a script asks for again and again (`cohort exec --all` every minute) folds into one event
// per distinct request, moved to the end with its count, so that the job's history stays.
TEST_F(JobControllerTest, RepeatedRequestsFoldIntoOneEventAndKeepTheJobsHistory) {
  JobRecord& job = Start("j", 2, false, 3, {"n0", "n1", "n2"});
  const std::vector<JobEventRecord> history = job.events;
  for (int minute = 0; minute < 2000; ++minute) {
    for (const char* replica : {"chief-0", "worker-0", "worker-1"}) {
      jobs_.NoteRepeatable(job, std::string("cohort exec by alice in ") + replica + ": nvidia-smi",
                           now_ + minute * 60'000);
    }
  }
  ASSERT_EQ(job.events.size(), history.size() + 3);
  for (size_t i = 0; i < history.size(); ++i) EXPECT_EQ(job.events[i].message, history[i].message);
  EXPECT_EQ(job.events[history.size()].message,
            "cohort exec by alice in chief-0: nvidia-smi (2000 times)");
  EXPECT_EQ(job.events.back().message, "cohort exec by alice in worker-1: nvidia-smi (2000 times)");
  EXPECT_EQ(job.events.back().time_ms, now_ + 1999 * 60'000);
  // Another request is an event of its own; one that only starts like a folded one is too.
  jobs_.NoteRepeatable(job, "cohort exec by alice in chief-0: nvidia-smi -L", now_);
  jobs_.NoteRepeatable(job, "cohort exec by alice in chief-0: nvidia-smi (x", now_);
  EXPECT_EQ(job.events.size(), history.size() + 5);
  EXPECT_EQ(job.events.back().message, "cohort exec by alice in chief-0: nvidia-smi (x");
  // Past the window a request is new again: a job's history is never rewritten far back.
  for (size_t k = 0; k < JobController::kRepeatWindow; ++k) {
    jobs_.Note(job, "note " + std::to_string(k), now_);
  }
  jobs_.NoteRepeatable(job, "cohort exec by alice in chief-0: nvidia-smi", now_);
  EXPECT_EQ(job.events.back().message, "cohort exec by alice in chief-0: nvidia-smi");
}

TEST_F(JobControllerTest, AnElasticJobRunsIdleWorkersOutAndGrowsWithoutSpendingARestart) {
  JobRecord& job = StartElastic();
  std::vector<std::string> launched;
  for (const auto& l : launches_) launched.push_back(l.replica);
  EXPECT_EQ(launched, (std::vector<std::string>{"chief-0", "worker-0", "worker-1"}));
  const ReplicaRecord& idle = *job.FindReplica("worker-2");
  EXPECT_TRUE(idle.idle);
  EXPECT_EQ(idle.state, ReplicaState::STOPPED);
  EXPECT_FALSE(JobController::HoldsResources(idle));
  EXPECT_EQ(jobs_.elastic_shrinks(), 1u);
  EXPECT_EQ(LastEventOpening(job, "running"), "running: all 3 replicas running");

  jobs_.GrowElastic(job, 2, "room for nothing more", now_);  // runs two already
  EXPECT_EQ(job.state, JobState::RUNNING);
  jobs_.GrowElastic(job, 3, "room for 1 more worker on n3", now_);
  EXPECT_EQ(job.state, JobState::QUEUED);
  EXPECT_EQ(job.elastic_workers, 3);
  EXPECT_EQ(job.demands.size(), 4u);
  EXPECT_EQ(job.restarts, 0);
  EXPECT_EQ(jobs_.elastic_grows(), 1u);
  EXPECT_EQ(StopsSent(), (std::vector<std::string>{"chief-0", "worker-0", "worker-1"}));
  EXPECT_EQ(LastEventOpening(job, "elastic"),
            "elastic: room for 1 more worker on n3: the job grows to 3 of 3 workers and restarts "
            "from its checkpoint (no restart spent)");

  // Placed at full size; a node loss restarts it, asking for every worker again.
  for (const char* r : {"chief-0", "worker-0", "worker-1"}) {
    Report(job, r, ReplicaState::STOPPED, 143, 15);
  }
  std::vector<JobController::Slot> slots;
  for (int i = 0; i < 4; ++i) {
    slots.push_back(JobController::Slot{"n" + std::to_string(i), {0}, 30000 + i});
  }
  jobs_.PlaceJob(job, slots, 29000, 29001, now_);
  for (const auto& r : job.replicas) {
    EXPECT_FALSE(r.idle) << r.name;
    // One attempt number for the whole job (torchrun's restart count): worker-2, idle during
    // attempt 0, starts at attempt 1 with the others.
    EXPECT_EQ(r.attempt, 1) << r.name;
    health_.heard[r.node_id] = now_;
  }
  for (const char* r : {"chief-0", "worker-0", "worker-1", "worker-2"}) {
    Report(job, r, ReplicaState::RUNNING);
  }
  ASSERT_EQ(job.state, JobState::RUNNING);
  jobs_.ShrinkElastic(job, 1);  // not queued: nothing
  EXPECT_EQ(job.elastic_workers, 3);
  Lose("n1");
  EXPECT_EQ(job.state, JobState::QUEUED);
  EXPECT_EQ(job.restarts, 1);
  EXPECT_EQ(job.elastic_workers, -1);
  EXPECT_EQ(job.demands.size(), 4u);
}

// A rank's exit 1 waits for its verdict: the job does not grow meanwhile, so the verdict is kept.
TEST_F(JobControllerTest, AnElasticJobDoesNotGrowOverAHeldVerdict) {
  JobRecord& job = StartElastic();
  Report(job, "worker-1", ReplicaState::FAILED, 1);
  jobs_.GrowElastic(job, 3, "room for 1 more worker on n3", now_);
  EXPECT_EQ(job.state, JobState::RUNNING);
  EXPECT_EQ(jobs_.HeldVerdicts(), (std::vector<std::string>{"e/worker-1"}));
  EXPECT_EQ(jobs_.elastic_grows(), 0u);
}

// A node's loss or registration reads the jobs placed on that node (JobController's index of
// them): replicas elsewhere are untouched, a replica restarted on another node is no longer
// its old node's, and a node that registers again without a replica loses just that one. Many
// placements on one node over time (each restart adds its job to that node's list) stay found.
TEST_F(JobControllerTest, ANodesLossOrRegistrationTouchesTheReplicasPlacedThereOnly) {
  JobRecord& a = Start("on-a", 0, false, 50, {"a"});
  JobRecord& ab = Start("on-a-and-b", 1, false, 50, {"a", "b"});
  JobRecord& b = Start("on-b", 0, false, 50, {"b"});
  // "on-a" restarts many times on a, then moves to c.
  for (int i = 0; i < 40; ++i) {
    Report(a, "chief-0", ReplicaState::FAILED, 137, 9);
    ASSERT_EQ(a.replicas[0].state, ReplicaState::PENDING) << i;
    jobs_.PlaceReplica(a, a.replicas[0], i < 39 ? "a" : "c", {0}, 30100, now_);
    Report(a, "chief-0", ReplicaState::RUNNING);
  }
  ASSERT_EQ(a.replicas[0].node_id, "c");
  Hear({"c"});
  Lose("a");
  EXPECT_EQ(a.replicas[0].state, ReplicaState::RUNNING) << "it runs on c now";
  EXPECT_EQ(ab.replicas[0].state, ReplicaState::PENDING) << "chief-0 of on-a-and-b was on a";
  EXPECT_EQ(b.replicas[0].state, ReplicaState::RUNNING);

  // b registers again reporting on-b's replica only: also-on-b's replica there is gone.
  JobRecord& b2 = Start("also-on-b", 0, false, 50, {"b"});
  jobs_.Reconcile("b", {{"on-b", "chief-0"}}, now_, health_.LastHeardMs("b"));
  EXPECT_EQ(b.replicas[0].state, ReplicaState::RUNNING);
  EXPECT_EQ(b2.replicas[0].state, ReplicaState::PENDING) << "lost, then waiting to restart";
  EXPECT_NE(LastRestartEvent(b2).find("node b re-registered without it"), std::string::npos)
      << LastRestartEvent(b2);
  // c registers again with on-a's replica: nothing changes.
  jobs_.Reconcile("c", {{"on-a", "chief-0"}}, now_, health_.LastHeardMs("c"));
  EXPECT_EQ(a.replicas[0].state, ReplicaState::RUNNING);
  EXPECT_EQ(a.replicas[0].node_id, "c");
  // ... and c's loss finds it there.
  Lose("c");
  EXPECT_EQ(a.replicas[0].state, ReplicaState::PENDING);
  EXPECT_EQ(a.replicas[0].last_node, "c");
}

// The active list stays in submit order while jobs end (their entries are dropped when it is next
// read), and a job that was never placed is known to hold nothing without reading its replicas.
TEST_F(JobControllerTest, TheActiveListKeepsSubmitOrderAsJobsEnd) {
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) {
    const std::string yaml = "name: q" + std::to_string(i) +
                             "\nworker_pools: [{role: chief, replicas: 1, process: {command: "
                             "[/bin/x]}}]\n";
    auto spec = ParseJobSpec(yaml);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    JobRecord& job = jobs_.Submit(*spec, yaml, now_);
    EXPECT_FALSE(job.may_hold);
    EXPECT_NE(job.shape_id, 0u);
    names.push_back(job.name);
  }
  JobRecord& placed = Start("running", 1, false, 3, {"n1", "n2"});
  EXPECT_TRUE(placed.may_hold);
  EXPECT_EQ(jobs_.FindJob("q0")->shape_id, jobs_.FindJob("q5")->shape_id);
  EXPECT_NE(jobs_.FindJob("q0")->shape_id, placed.shape_id);
  jobs_.Cancel(*jobs_.FindJob("q1"), "cancelled by test", now_);  // never placed: ends at once
  jobs_.Cancel(*jobs_.FindJob("q4"), "cancelled by test", now_);
  std::vector<std::string> active;
  uint64_t last_seq = 0;
  for (const auto& [seq, job] : jobs_.active()) {
    ASSERT_NE(job, nullptr);
    EXPECT_GT(seq, last_seq);
    EXPECT_EQ(seq, job->seq);
    last_seq = seq;
    active.push_back(job->name);
  }
  EXPECT_EQ(active, (std::vector<std::string>{"q0", "q2", "q3", "q5", "running"}));
}

TEST_F(JobControllerTest, APermanentFailureWithEveryNodeHealthyFailsTheJobAfterOneInterval) {
  JobRecord& job = Start("p", 2, true, 3, {"a", "b", "c"});
  Report(job, "worker-0", ReplicaState::FAILED, 1);
  EXPECT_EQ(job.state, JobState::RUNNING);
  EXPECT_EQ(jobs_.HeldVerdicts(), std::vector<std::string>{"p/worker-0"});
  // Heard from, but not yet a whole interval after the exit: still held.
  Advance(500);
  Hear({"a", "b", "c"});
  jobs_.ReleaseVerdicts(now_);
  EXPECT_EQ(job.state, JobState::RUNNING);
  Advance(600);
  Hear({"a", "b", "c"});
  jobs_.ReleaseVerdicts(now_);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_NE(job.message.find("worker-0 attempt 0 exited with code 1"), std::string::npos)
      << job.message;
  EXPECT_NE(job.message.find("permanent failure"), std::string::npos) << job.message;
  EXPECT_EQ(job.restarts, 0);
  EXPECT_EQ(StopsSent(), (std::vector<std::string>{"chief-0", "worker-1"}));
  EXPECT_TRUE(jobs_.HeldVerdicts().empty());
}

TEST_F(JobControllerTest, AOneReplicaJobsEventsSayReplicaInTheSingular) {
  JobRecord& job = Start("solo", 0, true, 3, {"a"});
  EXPECT_EQ(LastEventOpening(job, "submitted"), "submitted (1 replica)");
  EXPECT_EQ(LastEventOpening(job, "running"), "running: its one replica running");
}

// The coordinator's notices (--notify-on start,restart) hear of a job's first run and of each
// restart it spends, once each: running again after a restart is no new start.
TEST_F(JobControllerTest, AJobsFirstRunAndEachRestartItSpendsAreToldOnce) {
  const std::string yaml =
      "name: told\nworker_pools:\n  - role: chief\n    resources: {gpus: 1}\n"
      "    process: {command: [/bin/train]}\nscheduling: {max_restarts: 2}\n";
  auto spec = ParseJobSpec(yaml, "test job");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRecord& job = jobs_.Submit(std::move(*spec), yaml, now_);
  Hear({"a"});
  auto place_and_run = [&] {
    jobs_.PlaceJob(job, {JobController::Slot{"a", {0}, 30000}}, 29000, 29001, now_);
    Report(job, "chief-0", ReplicaState::RUNNING);
    EXPECT_EQ(job.state, JobState::RUNNING);
    return jobs_.TakeCommands();
  };
  ControllerCommands first = place_and_run();
  EXPECT_EQ(first.started, std::vector<std::string>{"told"});
  EXPECT_TRUE(first.restarted.empty());
  EXPECT_EQ(job.first_running_ms, now_);
  const int64_t first_run = now_;

  Advance(1000);
  Report(job, "chief-0", ReplicaState::FAILED, 137, 9);
  EXPECT_EQ(job.restarts, 1);
  ControllerCommands restart = jobs_.TakeCommands();
  ASSERT_EQ(restart.restarted.size(), 1u);
  EXPECT_EQ(restart.restarted[0].first, "told");
  EXPECT_EQ(restart.restarted[0].second, LastRestartEvent(job));
  EXPECT_TRUE(restart.started.empty());

  // A job of more events than it keeps (1000) has lost its first "running" event by now.
  std::erase_if(job.events,
                [](const JobEventRecord& e) { return e.message.rfind("running:", 0) == 0; });
  Advance(1000);
  ControllerCommands again = place_and_run();
  EXPECT_TRUE(again.started.empty()) << "running again after a restart is no new start";
  EXPECT_TRUE(again.restarted.empty());
  EXPECT_EQ(job.first_running_ms, first_run);
}

TEST_F(JobControllerTest, ALoneReplicaFailsAtOnce) {
  JobRecord& job = Start("solo", 0, true, 3, {"a"});
  Report(job, "chief-0", ReplicaState::FAILED, 2);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_EQ(job.restarts, 0);
}

// A DDP rank's own bug: it exits 1, and the other ranks fall with exit 1 too, reported after it.
// Once the last of them has ended there is nothing more to hear: the job fails at once, naming
// the first failure, not the last.
TEST_F(JobControllerTest, WhenEveryReplicaHasFailedTheFirstFailureIsTheCause) {
  JobRecord& job = Start("bug", 2, true, 3, {"a", "b", "c"});
  Report(job, "worker-0", ReplicaState::FAILED, 1);
  Advance(100);
  Report(job, "chief-0", ReplicaState::FAILED, 1);
  EXPECT_EQ(job.state, JobState::RUNNING);
  EXPECT_EQ(jobs_.HeldVerdicts(), (std::vector<std::string>{"bug/worker-0", "bug/chief-0"}));
  Advance(100);
  Report(job, "worker-1", ReplicaState::FAILED, 1);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_EQ(job.message,
            "worker-0 attempt 0 exited with code 1 (permanent failure); then chief-0, worker-1 "
            "exited with code 1");
  EXPECT_EQ(job.restarts, 0);
  EXPECT_TRUE(jobs_.HeldVerdicts().empty());
}

// After a coordinator restart the held failures are held again in the order they ended, whatever
// the order of the replicas: the first to end is still the one the job's message names.
TEST_F(JobControllerTest, HeldAgainAfterARestartTheFirstToEndStaysTheCause) {
  JobRecord& job = Start("reorder", 2, true, 3, {"a", "b", "c"});
  Report(job, "worker-1", ReplicaState::FAILED, 1);
  Advance(100);
  Report(job, "chief-0", ReplicaState::FAILED, 1);
  JobRecord copy = job;
  JobController restarted(Options(), &health_);
  restarted.Restore(std::move(copy));
  restarted.FinishRestore(now_);
  EXPECT_EQ(restarted.HeldVerdicts(),
            (std::vector<std::string>{"reorder/worker-1", "reorder/chief-0"}));
  Advance(kIntervalMs + 1);
  Hear({"a", "b", "c"});
  restarted.ReleaseVerdicts(now_);
  const JobRecord* after = restarted.FindJob("reorder");
  EXPECT_EQ(after->state, JobState::FAILED);
  EXPECT_EQ(after->message,
            "worker-1 attempt 0 exited with code 1 (permanent failure); then chief-0 exited with "
            "code 1");
}

TEST_F(JobControllerTest, RanksThatDieBeforeTheirNodeIsDeclaredLostAreCollateral) {
  // chief on a, worker-0 on b, worker-1 on c; node b dies. The other ranks exit 1 at once
  // (their peer's connection reset); the node is declared lost only after the timeout.
  JobRecord& job = Start("ddp", 2, true, 3, {"a", "b", "c"});
  Advance(200);
  Report(job, "chief-0", ReplicaState::FAILED, 1);
  Report(job, "worker-1", ReplicaState::FAILED, 1);
  EXPECT_EQ(job.state, JobState::RUNNING);
  for (int i = 0; i < 9; ++i) {  // a and c keep heartbeating; b is silent
    Advance(1000);
    Hear({"a", "c"});
    jobs_.ReleaseVerdicts(now_);
    ASSERT_EQ(job.state, JobState::RUNNING) << "judged before node b was heard from or lost";
  }
  Lose("b");
  EXPECT_EQ(job.state, JobState::QUEUED);  // the whole job restarts
  ExpectRestartedOnce(
      job, WholeJobRestart("node b lost (worker-0): no heartbeat for 10.5s (timeout 10s); chief-0, "
                           "worker-1 exited with code 1 as a consequence"));
  EXPECT_TRUE(jobs_.HeldVerdicts().empty());
}

// Node faults: a node whose health check fails (its GPU fell off the bus). A rank there exits 1
// on the CUDA error; that is the node's fault, not the job's: the job restarts (on other nodes,
// the scheduler's part), and the ranks that fall with it are collateral.
TEST_F(JobControllerTest, AFailureOnANodeWhoseHealthCheckFailsRestartsTheJob) {
  JobRecord& job = Start("gpu", 2, true, 3, {"a", "b", "c"});
  health_.unhealthy["b"] = "GPU 0: XID 79 (health check exited with code 1)";
  Report(job, "worker-0", ReplicaState::FAILED, 1);
  EXPECT_EQ(job.state, JobState::QUEUED);
  Advance(100);
  Report(job, "chief-0", ReplicaState::FAILED, 1);
  Report(job, "worker-1", ReplicaState::FAILED, 1);
  ExpectRestartedOnce(
      job,
      WholeJobRestart("worker-0 attempt 0 exited with code 1 on node b, which fails its health "
                      "check: GPU 0: XID 79 (health check exited with code 1); chief-0, "
                      "worker-1 exited with code 1 as a consequence"));
  EXPECT_EQ(jobs_.restarts_by_cause().at("node_health"), 1u);
  EXPECT_TRUE(jobs_.HeldVerdicts().empty());
}

// The agent runs its check again after the failure; until that run ends no failure held on that
// node is judged, even once every replica of the job has ended. Its verdict then decides.
TEST_F(JobControllerTest, AFailureWaitsForTheHealthVerdictItsNodeTakesAfterIt) {
  JobRecord& job = Start("recheck", 2, true, 3, {"a", "b", "c"});
  // The peers fall first (their connections reset), then the rank on the bad GPU.
  Report(job, "chief-0", ReplicaState::FAILED, 1);
  Report(job, "worker-1", ReplicaState::FAILED, 1);
  health_.rechecking = {"a", "b", "c"};
  Report(job, "worker-0", ReplicaState::FAILED, 1);
  for (int i = 0; i < 5; ++i) {
    Advance(1000);
    Hear({"a", "b", "c"});
    if (i == 1) health_.rechecking = {"b"};  // a's and c's checks pass quickly
    jobs_.ReleaseVerdicts(now_);
    ASSERT_EQ(job.state, JobState::RUNNING) << "judged before node b's health verdict";
  }
  health_.rechecking.clear();
  health_.unhealthy["b"] = "GPU 0: XID 79";
  Advance(1000);
  Hear({"a", "b", "c"});
  jobs_.ReleaseVerdicts(now_);
  EXPECT_EQ(job.state, JobState::QUEUED);
  EXPECT_EQ(job.restarts, 1);
  std::string event = LastRestartEvent(job);
  EXPECT_NE(
      event.find("because worker-0 attempt 0 exited with code 1 on node b, which fails its health "
                 "check: GPU 0: XID 79"),
      std::string::npos)
      << event;
  EXPECT_NE(event.find("chief-0, worker-1 exited with code 1 as a consequence"), std::string::npos)
      << event;
}

TEST_F(JobControllerTest, AFailureWhoseNodePassesItsRecheckIsTheJobsOwn) {
  JobRecord& job = Start("bug", 1, true, 3, {"a", "b"});
  health_.rechecking = {"a"};
  Report(job, "chief-0", ReplicaState::FAILED, 1);
  Report(job, "worker-0", ReplicaState::FAILED, 1);
  Advance(3000);
  Hear({"a", "b"});
  jobs_.ReleaseVerdicts(now_);
  EXPECT_EQ(job.state, JobState::RUNNING);
  health_.rechecking.clear();  // passed: no node fault
  jobs_.ReleaseVerdicts(now_);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_EQ(job.message,
            "chief-0 attempt 0 exited with code 1 (permanent failure); then worker-0 exited with "
            "code 1");
  EXPECT_EQ(job.restarts, 0);
}

// A recheck that never ends holds a verdict no longer than twice the heartbeat timeout.
TEST_F(JobControllerTest, AHealthRecheckHoldsAVerdictAtMostTwoHeartbeatTimeouts) {
  JobRecord& job = Start("slow", 0, true, 3, {"a"});
  health_.rechecking = {"a"};
  Report(job, "chief-0", ReplicaState::FAILED, 1);
  Advance(2 * kTimeoutMs);
  Hear({"a"});
  jobs_.ReleaseVerdicts(now_);
  EXPECT_EQ(job.state, JobState::RUNNING);
  Advance(1);
  jobs_.ReleaseVerdicts(now_);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_EQ(job.message, "chief-0 attempt 0 exited with code 1 (permanent failure)");
}

// A node fault spends a restart like any incident: with the budget spent the job fails, naming it.
TEST_F(JobControllerTest, ANodeFaultWithTheBudgetSpentFailsTheJobNamingTheNode) {
  JobRecord& job = Start("spent", 0, true, 0, {"a"});
  health_.unhealthy["a"] = "disk /scratch read-only";
  Report(job, "chief-0", ReplicaState::FAILED, 1);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_EQ(job.message,
            "chief-0 attempt 0 exited with code 1 on node a, which fails its health check: disk "
            "/scratch read-only; the restart budget (max_restarts=0) is spent");
}

TEST_F(JobControllerTest, ACollateralFailureReportedBeforeItsCauseWaitsForIt) {
  // worker-0 is SIGKILLed on b; chief-0 on a crashes with exit 1 and a's agent reports first.
  JobRecord& job = Start("race", 1, true, 3, {"a", "b"});
  Report(job, "chief-0", ReplicaState::FAILED, 1);
  EXPECT_EQ(job.state, JobState::RUNNING);
  Advance(100);
  Report(job, "worker-0", ReplicaState::FAILED, 137, 9);
  EXPECT_EQ(job.state, JobState::QUEUED);
  ExpectRestartedOnce(
      job, WholeJobRestart(
               "worker-0 attempt 0 was killed by signal 9 (SIGKILL); chief-0 exited with code 1 "
               "as a consequence"));
}

// torchrun inside a replica exits 1 when one of its workers is killed (by the OOM killer, say):
// its report's signal (the agent's cause_signal) makes that end retryable, like the signal itself
// in a replica of its own, and the job restarts once. An exit 1 with a worker's own exit code
// (cause_signal 0) stays a permanent failure, and a cause signal such as SIGSEGV too.
TEST_F(JobControllerTest, TorchrunsExitAfterItsWorkerWasKilledIsJudgedByThatSignal) {
  JobRecord& job = Start("torchrun", 1, true, 3, {"a", "b"});
  Report(job, "worker-0", ReplicaState::FAILED, 1, 0, /*cause_signal=*/9);
  Advance(100);
  Report(job, "chief-0", ReplicaState::FAILED, 1);
  EXPECT_EQ(job.state, JobState::QUEUED);
  ExpectRestartedOnce(job, WholeJobRestart("worker-0 attempt 0 exited with code 1 after signal 9 "
                                           "(SIGKILL) killed a process inside it; chief-0 "
                                           "exited with code 1 as a consequence"));

  JobRecord& segv = Start("torchrun-segv", 0, true, 3, {"c"});
  Report(segv, "chief-0", ReplicaState::FAILED, 1, 0, /*cause_signal=*/11);
  EXPECT_EQ(segv.state, JobState::FAILED);
  EXPECT_NE(segv.message.find("after signal 11 (SIGSEGV) killed a process inside it"),
            std::string::npos)
      << segv.message;
}

TEST_F(JobControllerTest, WithoutWholeJobRestartTheFallenReplicasRestartAndSpendOne) {
  JobRecord& job = Start("each", 2, false, 3, {"a", "b", "c"});
  Report(job, "worker-0", ReplicaState::FAILED, 137, 9);
  Advance(50);
  Report(job, "chief-0", ReplicaState::FAILED, 1);
  Report(job, "worker-1", ReplicaState::FAILED, 1);
  for (const char* name : {"chief-0", "worker-0", "worker-1"}) {
    const ReplicaRecord* r = job.FindReplica(name);
    EXPECT_EQ(r->state, ReplicaState::PENDING) << name;
    EXPECT_FALSE(r->placed()) << name << " waits to be placed again";
  }
  ExpectRestartedOnce(
      job,
      "restart 1/3: worker-0 as attempt 1, chief-0 as attempt 1, worker-1 as attempt 1 "
      "because worker-0 attempt 0 was killed by signal 9 (SIGKILL); chief-0, worker-1 exited with "
      "code 1 as a consequence");
}

TEST_F(JobControllerTest, ANodeHoldingSeveralReplicasIsLostOnceAndSpendsOneRestart) {
  for (bool whole : {false, true}) {
    SCOPED_TRACE(whole ? "restart_job_on_worker_restart: true" : "false");
    std::string name = whole ? "packed_whole" : "packed";
    JobRecord& job = Start(name, 3, whole, 3, {"n1", "n1", "n1", "n1"});
    Lose("n1");
    EXPECT_EQ(job.restarts, 1);
    EXPECT_NE(job.state, JobState::FAILED) << job.message;
    EXPECT_NE(LastRestartEvent(job).find("node n1 lost (chief-0, worker-0, worker-1, worker-2)"),
              std::string::npos)
        << LastRestartEvent(job);
    health_.heard["n1"] = now_;
  }
}

// A job that leaves restart_job_on_worker_restart out restarts as its shape says. Its ranks one
// all-reduce group, a lost node restarts every replica: a worker started anew could not rejoin
// the others, which a cut link leaves hanging. A parameter-server job restarts what fell alone,
// and so does an evaluator, until a rank falls in the same incident.
TEST_F(JobControllerTest, AJobWithoutARestartPolicyRestartsWholeWhereItsRanksAreOneGroup) {
  JobRecord& ddp = Start("ddp", 2, std::nullopt, 3, {"a", "b", "c"});
  Lose("b");
  EXPECT_EQ(StopsSent(), (std::vector<std::string>{"chief-0", "worker-1"}));
  ExpectRestartedOnce(ddp,
                      "restart 1/3: the whole job (its ranks are one group: "
                      "restart_job_on_worker_restart unset) because node b lost (worker-0): no "
                      "heartbeat for 10.5s (timeout 10s)");
  EXPECT_EQ(ddp.state, JobState::QUEUED) << "waiting for its replicas to stop, then placed whole";

  more_pools_ = {{"parameter_server", 1}};
  JobRecord& ps = Start("ps", 2, std::nullopt, 3, {"d", "e", "f", "g"});
  Lose("e");
  EXPECT_TRUE(StopsSent().empty()) << "the chief, worker-1 and the parameter server run on";
  ExpectRestartedOnce(ps,
                      "restart 1/3: worker-0 as attempt 1 because node e lost (worker-0): no "
                      "heartbeat for 10.5s (timeout 10s)");
  EXPECT_EQ(ps.FindReplica("chief-0")->state, ReplicaState::RUNNING);

  // An evaluator is no rank of the group: it falls alone, unless a rank falls with it.
  more_pools_ = {{"evaluator", 1}};
  JobRecord& eval = Start("eval", 1, std::nullopt, 3, {"h", "i", "j"});
  Report(eval, "evaluator-0", ReplicaState::FAILED, 137, 9);
  EXPECT_TRUE(StopsSent().empty());
  ExpectRestartedOnce(eval,
                      "restart 1/3: evaluator-0 as attempt 1 because evaluator-0 attempt 0 was "
                      "killed by signal 9 (SIGKILL)");
  JobRecord& both = Start("both", 1, std::nullopt, 3, {"k", "l", "m"});
  Report(both, "evaluator-0", ReplicaState::FAILED, 137, 9);
  Advance(100);
  Report(both, "worker-0", ReplicaState::FAILED, 1);
  EXPECT_EQ(StopsSent(), (std::vector<std::string>{"chief-0"}));
  ExpectRestartedOnce(both,
                      "restart 1/3: the whole job (its ranks are one group: "
                      "restart_job_on_worker_restart unset) because evaluator-0 attempt 0 was "
                      "killed by signal 9 (SIGKILL); worker-0 exited with code 1 as a consequence");
  EXPECT_EQ(both.state, JobState::QUEUED);
}

// An agent reports its replica's end and dies a moment later. Until the heartbeat timeout its node
// is taken for a live one, and the whole job's restart places worker-0 there again (its last
// node); that launch is lost with the node, unanswered. It never ran: the job is placed again
// having spent one restart, the crash's, not two. Had the node started the attempt (it reported
// STARTING) before it fell silent, the loss would be an incident of its own, and it is.
TEST_F(JobControllerTest, ALaunchIntoASilentNodeSpendsNoRestartWhenTheNodeIsLost) {
  for (bool acknowledged : {false, true}) {
    SCOPED_TRACE(acknowledged ? "b started attempt 1, then fell silent" : "b never answered");
    JobRecord& job = Start(acknowledged ? "acked" : "unreached", 2, true, 3, {"a", "b", "c"});
    Report(job, "worker-0", ReplicaState::FAILED, 137, 9);  // b's last word
    ExpectRestartedOnce(job,
                        WholeJobRestart("worker-0 attempt 0 was killed by signal 9 (SIGKILL)"));
    Advance(100);
    Report(job, "chief-0", ReplicaState::STOPPED, 143, 15);
    Report(job, "worker-1", ReplicaState::STOPPED, 143, 15);
    Hear({"a", "c"});
    jobs_.PlaceJob(job, {{"a", {0}, 30000}, {"b", {0}, 30001}, {"c", {0}, 30002}}, 29000, 29001,
                   now_);
    Report(job, "chief-0", ReplicaState::RUNNING);
    Report(job, "worker-1", ReplicaState::RUNNING);
    if (acknowledged) {
      Advance(200);
      Report(job, "worker-0", ReplicaState::STARTING);
      Hear({"b"});
    }
    for (int i = 0; i < 10; ++i) {
      Advance(1000);
      Hear({"a", "c"});
    }
    jobs_.TakeCommands();
    Lose("b");
    EXPECT_EQ(job.state, JobState::QUEUED);
    EXPECT_EQ(StopsSent(), (std::vector<std::string>{"chief-0", "worker-1"}));
    if (acknowledged) {
      EXPECT_EQ(job.restarts, 2);
      EXPECT_EQ(LastRestartEvent(job),
                "restart 2/3: the whole job (restart_job_on_worker_restart) because node b lost "
                "(worker-0): no heartbeat for 10.5s (timeout 10s)");
      continue;
    }
    EXPECT_EQ(job.restarts, 1);
    EXPECT_EQ(jobs_.relaunches(), 1u);
    // A rank that gave up waiting for worker-0 falls with it, spending nothing either.
    Report(job, "chief-0", ReplicaState::FAILED, 1);
    Report(job, "worker-1", ReplicaState::STOPPED, 143, 15);
    EXPECT_EQ(LastEventOpening(job, "relaunch"),
              "relaunch (no restart spent): the whole job (restart_job_on_worker_restart) because "
              "node b lost (worker-0): no heartbeat for 10.5s (timeout 10s); attempt 1 was "
              "launched 100ms after the node was last heard from, and never started; chief-0 "
              "exited with code 1 as a consequence");
    EXPECT_EQ(job.FindReplica("worker-0")->state, ReplicaState::LOST);
    EXPECT_TRUE(jobs_.HeldVerdicts().empty());
    // Placed again off b, it runs with two of its three restarts left.
    jobs_.PlaceJob(job, {{"a", {0}, 30000}, {"d", {0}, 30001}, {"c", {0}, 30002}}, 29000, 29001,
                   now_);
    for (auto& r : job.replicas) {
      EXPECT_EQ(r.attempt, 2) << r.name;
      Report(job, r.name, ReplicaState::RUNNING);
    }
    EXPECT_EQ(job.state, JobState::RUNNING);
    EXPECT_EQ(job.restarts, 1);
  }
}

// Without whole-job restarts the replica whose launch never arrived is placed again alone, for
// nothing. A node that also held an attempt it ran is an incident (a restart spent), and the
// launch that never arrived falls with it: one restart for the node, not two.
TEST_F(JobControllerTest, OnANodeLostWithALaunchItNeverAnsweredAnAttemptItRanIsTheCause) {
  JobRecord& job = Start("each", 2, false, 3, {"a", "b", "c"});
  Report(job, "worker-1", ReplicaState::FAILED, 137, 9);  // on c
  ASSERT_EQ(job.restarts, 1);
  Advance(100);
  jobs_.PlaceReplica(job, *job.FindReplica("worker-1"), "b", {1}, 30009, now_);  // b: silent
  for (int i = 0; i < 10; ++i) {
    Advance(1000);
    Hear({"a", "c"});
  }
  Lose("b");
  EXPECT_EQ(job.restarts, 2);
  EXPECT_EQ(LastRestartEvent(job),
            "restart 2/3: worker-0 as attempt 1, worker-1 as attempt 2 because node b lost "
            "(worker-0, worker-1): no heartbeat for 10.5s (timeout 10s)");
  EXPECT_EQ(job.FindReplica("chief-0")->state, ReplicaState::RUNNING);

  // worker-1 alone, placed on silent c this time: placed again, nothing spent.
  jobs_.PlaceReplica(job, *job.FindReplica("worker-0"), "a", {1}, 30010, now_);
  Report(job, "worker-0", ReplicaState::RUNNING);
  Advance(500);
  jobs_.PlaceReplica(job, *job.FindReplica("worker-1"), "c", {1}, 30011, now_);
  Lose("c");
  EXPECT_EQ(job.restarts, 2);
  EXPECT_EQ(jobs_.relaunches(), 1u);
  ReplicaRecord& w1 = *job.FindReplica("worker-1");
  EXPECT_EQ(w1.state, ReplicaState::PENDING);
  EXPECT_FALSE(w1.placed());
  EXPECT_EQ(LastEventOpening(job, "relaunch"),
            "relaunch (no restart spent): worker-1 as attempt 3 because node c lost (worker-1): "
            "no heartbeat for 10.5s (timeout 10s); attempt 2 was launched 500ms after the node "
            "was last heard from, and never started");
  EXPECT_EQ(job.FindReplica("worker-0")->state, ReplicaState::RUNNING);
  EXPECT_EQ(job.state, JobState::RUNNING);
}

// An agent restarted (it crashed, systemd started it again) before the heartbeat timeout: it
// registers again knowing nothing of what its old self ran. A launch sent after its old self's
// last word never ran, and is placed again for nothing; an attempt its old self had started is
// gone with it, and spends a restart.
// A registration's report that a job's chief succeeded in an attempt the coordinator's state never
// placed (a state restored from an older backup) ends the job SUCCEEDED; only for the same job
// (its create time: a name may be used again after `cohort delete`), only a chief's success, only
// an attempt past every one the state knows, and never twice.
TEST_F(JobControllerTest, AChiefsSuccessTheStateNeverPlacedEndsTheJobItWasOf) {
  JobRecord queued = [] {
    JobRecord job;
    job.create_time_ms = 1'764'964'800'123;
    return job;
  }();
  ReplicaRecord chief;
  chief.role = Role::kChief;
  ReplicaRecord worker;
  worker.role = Role::kWorker;
  std::vector<std::unique_ptr<flatbuffers::FlatBufferBuilder>> kept;
  auto report = [&](int attempt, ReplicaState state, int64_t created) {
    wire::ReplicaStatusT s;
    s.job = "j";
    s.replica = "chief-0";
    s.attempt = attempt;
    s.state = state;
    s.job_created_ms = created;
    kept.push_back(std::make_unique<flatbuffers::FlatBufferBuilder>());
    kept.back()->Finish(wire::ReplicaStatus::Pack(*kept.back(), &s));
    return flatbuffers::GetRoot<wire::ReplicaStatus>(kept.back()->GetBufferPointer());
  };
  const int64_t created = queued.create_time_ms;
  EXPECT_TRUE(
      AgentService::RanUnrecorded(queued, chief, *report(0, ReplicaState::SUCCEEDED, created)));
  EXPECT_FALSE(
      AgentService::RanUnrecorded(queued, chief, *report(0, ReplicaState::SUCCEEDED, created - 1)));
  EXPECT_FALSE(AgentService::RanUnrecorded(queued, chief, *report(0, ReplicaState::SUCCEEDED, 0)));
  EXPECT_FALSE(
      AgentService::RanUnrecorded(queued, chief, *report(0, ReplicaState::FAILED, created)));
  EXPECT_FALSE(
      AgentService::RanUnrecorded(queued, worker, *report(0, ReplicaState::SUCCEEDED, created)));
  // Attempt 2 launched: its own end, or an earlier one, is known; attempt 3 is not.
  chief.attempt = 2;
  chief.launched = true;
  EXPECT_FALSE(
      AgentService::RanUnrecorded(queued, chief, *report(2, ReplicaState::SUCCEEDED, created)));
  EXPECT_FALSE(
      AgentService::RanUnrecorded(queued, chief, *report(1, ReplicaState::SUCCEEDED, created)));
  EXPECT_TRUE(
      AgentService::RanUnrecorded(queued, chief, *report(3, ReplicaState::SUCCEEDED, created)));

  // The job it names ends SUCCEEDED, saying so; once ended, it is left alone.
  JobRecord& job = Start("restored", 1, true, 3, {"a", "b"});
  jobs_.ChiefSucceededUnrecorded(job, "c", 1, now_);
  EXPECT_EQ(job.state, JobState::SUCCEEDED);
  EXPECT_EQ(job.message,
            "the chief exited 0 (attempt 1 on node c, a run this coordinator's state had not "
            "recorded: it was restored from an older backup)");
  jobs_.ChiefSucceededUnrecorded(job, "d", 2, now_);
  EXPECT_NE(job.message.find("node c"), std::string::npos) << job.message;
}

TEST_F(JobControllerTest, ALaunchAnAgentNeverSawBeforeItRestartedSpendsNoRestart) {
  JobRecord& job = Start("reborn", 1, false, 3, {"a", "b"});
  Report(job, "worker-0", ReplicaState::FAILED, 137, 9);  // b's old agent, its last word
  ASSERT_EQ(job.restarts, 1);
  Advance(300);
  jobs_.PlaceReplica(job, *job.FindReplica("worker-0"), "b", {0}, 30005, now_);
  Advance(700);
  jobs_.Reconcile("b", {}, now_, health_.LastHeardMs("b"));
  Hear({"b"});
  EXPECT_EQ(job.restarts, 1);
  EXPECT_EQ(LastEventOpening(job, "relaunch"),
            "relaunch (no restart spent): worker-0 as attempt 2 because node b lost (worker-0): "
            "node b re-registered without it; attempt 1 was launched 300ms after the node was "
            "last heard from, and never started");
  // Attempt 2 runs on b; its agent restarts again and forgets it: that one ran.
  jobs_.PlaceReplica(job, *job.FindReplica("worker-0"), "b", {0}, 30005, now_);
  Report(job, "worker-0", ReplicaState::RUNNING);
  Hear({"b"});
  Advance(1000);
  jobs_.Reconcile("b", {}, now_, health_.LastHeardMs("b"));
  EXPECT_EQ(job.restarts, 2);
  EXPECT_EQ(LastRestartEvent(job),
            "restart 2/3: worker-0 as attempt 3 because node b lost (worker-0): node b "
            "re-registered without it");
}

TEST_F(JobControllerTest, APreemptionAndTheCrashesItCausesSpendOneRestart) {
  JobRecord& job = Start("pre", 2, true, 3, {"a", "b", "c"});
  Report(job, "worker-1", ReplicaState::FAILED, 1);
  Advance(300);
  Report(job, "worker-0", ReplicaState::PREEMPTED, 143, 15);
  Report(job, "chief-0", ReplicaState::FAILED, 1);  // before the restart's stop reached it
  ExpectRestartedOnce(
      job,
      WholeJobRestart("worker-0 attempt 0 was preempted; worker-1, chief-0 exited with code 1 as "
                      "a consequence"));
}

TEST_F(JobControllerTest, AFailureLongAfterAnIncidentIsJudgedOnItsOwn) {
  JobRecord& job = Start("later", 2, false, 3, {"a", "b", "c"});
  Report(job, "worker-0", ReplicaState::FAILED, 137, 9);
  EXPECT_EQ(job.restarts, 1);
  Advance(kTimeoutMs + 1);
  Report(job, "worker-1", ReplicaState::FAILED, 1);  // attempt 0, but the incident is over
  EXPECT_EQ(jobs_.HeldVerdicts(), std::vector<std::string>{"later/worker-1"});
  Advance(kIntervalMs + 1);
  Hear({"a", "b", "c"});
  jobs_.ReleaseVerdicts(now_);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_EQ(job.restarts, 1);
}

TEST_F(JobControllerTest, ARestartedReplicaThatFailsAgainIsANewIncident) {
  JobRecord& job = Start("again", 1, false, 1, {"a", "b"});
  Report(job, "worker-0", ReplicaState::FAILED, 137, 9);
  ReplicaRecord& w = *job.FindReplica("worker-0");
  jobs_.PlaceReplica(job, w, "b", {0}, 30005, now_);
  Report(job, "worker-0", ReplicaState::RUNNING);
  Report(job, "worker-0", ReplicaState::FAILED, 137, 9);  // attempt 1: not collateral
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_NE(job.message.find("the restart budget (max_restarts=1) is spent"), std::string::npos)
      << job.message;
}

TEST_F(JobControllerTest, AHeldVerdictIsHeldAgainAfterACoordinatorRestart) {
  JobRecord& job = Start("recover", 1, true, 3, {"a", "b"});
  Report(job, "worker-0", ReplicaState::FAILED, 1);
  JobRecord copy = job;
  JobController restarted(Options(), &health_);
  restarted.Restore(std::move(copy));
  restarted.FinishRestore(now_);
  EXPECT_EQ(restarted.HeldVerdicts(), std::vector<std::string>{"recover/worker-0"});
  Advance(kIntervalMs + 1);
  Hear({"a", "b"});
  restarted.ReleaseVerdicts(now_);
  EXPECT_EQ(restarted.FindJob("recover")->state, JobState::FAILED);
}

TEST_F(JobControllerTest, CancelDropsHeldVerdicts) {
  JobRecord& job = Start("cx", 1, true, 3, {"a", "b"});
  Report(job, "worker-0", ReplicaState::FAILED, 1);
  jobs_.Cancel(job, "cancel requested", now_);
  EXPECT_TRUE(jobs_.HeldVerdicts().empty());
  EXPECT_EQ(job.state, JobState::CANCELLING);
  Report(job, "chief-0", ReplicaState::STOPPED);
  EXPECT_EQ(job.state, JobState::CANCELLED);
  EXPECT_EQ(jobs_.TakeCommands().ended, std::vector<std::string>{"cx"});
}

TEST_F(JobControllerTest, RetryableFailuresRestartTheReplicaUntilTheBudgetIsSpent) {
  JobRecord& job = Start("flaky", 1, false, 1, {"a", "a"});
  Report(job, "worker-0", ReplicaState::FAILED, 137, 9);
  EXPECT_EQ(job.state, JobState::RUNNING);
  EXPECT_EQ(job.restarts, 1);
  EXPECT_NE(LastRestartEvent(job).find("worker-0 as attempt 1"), std::string::npos);
  EXPECT_NE(LastRestartEvent(job).find("signal 9"), std::string::npos);
  ReplicaRecord& w = *job.FindReplica("worker-0");
  EXPECT_FALSE(w.placed());
  jobs_.PlaceReplica(job, w, "a", {1}, 30010, now_);
  ControllerCommands placed = jobs_.TakeCommands();
  ASSERT_EQ(placed.launch.size(), 1u);
  EXPECT_EQ(placed.launch[0].replica, "worker-0");
  // The chief still runs (and may be writing a checkpoint): not a whole-job placement.
  EXPECT_FALSE(placed.launch[0].others_stopped);
  EXPECT_EQ(w.attempt, 1);
  Report(job, "worker-0", ReplicaState::RUNNING);
  Report(job, "worker-0", ReplicaState::PREEMPTED);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_NE(job.message.find("the restart budget (max_restarts=1) is spent"), std::string::npos)
      << job.message;
  EXPECT_EQ(StopsSent(), std::vector<std::string>{"chief-0"});
}

// A job of one replica, restarted alone: nothing else of it runs, so its launch says so (the
// agent may set aside torn checkpoints); so do the launches of an incident's fallen replicas,
// placed again one by one, while none of the job's replicas has started; not a replica placed
// again beside one that runs.
TEST_F(JobControllerTest, AReplicaPlacedAgainWhileNoOtherHoldsResourcesIsToldSo) {
  JobRecord& solo = Start("solo", 0, false, 3, {"a"});
  Report(solo, "chief-0", ReplicaState::FAILED, 137, 9);
  ASSERT_FALSE(solo.FindReplica("chief-0")->placed());
  jobs_.PlaceReplica(solo, *solo.FindReplica("chief-0"), "b", {0}, 30020, now_);
  ControllerCommands placed = jobs_.TakeCommands();
  ASSERT_EQ(placed.launch.size(), 1u);
  EXPECT_TRUE(placed.launch[0].others_stopped);
  // Its agent says in the RUNNING report what it set aside: an event.
  ReplicaRecord& chief = *solo.FindReplica("chief-0");
  jobs_.ApplyReplicaStatus(solo, chief, ReplicaState::RUNNING, -1, 0,
                           "set aside torn checkpoint epoch_2.pt (cohort logs says why)", now_);
  EXPECT_EQ(LastEventOpening(solo, "chief-0 attempt 1: "),
            "chief-0 attempt 1: set aside torn checkpoint epoch_2.pt (cohort logs says why)");
  EXPECT_EQ(chief.message, "set aside torn checkpoint epoch_2.pt (cohort logs says why)");

  JobRecord& pair = Start("pair", 1, false, 3, {"a", "b"});
  Report(pair, "worker-0", ReplicaState::FAILED, 137, 9);
  Report(pair, "chief-0", ReplicaState::FAILED, 1);  // collateral
  jobs_.PlaceReplica(pair, *pair.FindReplica("worker-0"), "c", {0}, 30021, now_);
  jobs_.PlaceReplica(pair, *pair.FindReplica("chief-0"), "a", {0}, 30022, now_);
  placed = jobs_.TakeCommands();
  ASSERT_EQ(placed.launch.size(), 2u);
  EXPECT_TRUE(placed.launch[0].others_stopped);
  EXPECT_TRUE(placed.launch[1].others_stopped);  // worker-0 is placed, not started

  // One of the two starts (STARTING: its agent prepares; then RUNNING), and the other falls again
  // on its own: placed again beside a replica whose process may be writing, it is not told so.
  Report(pair, "worker-0", ReplicaState::STARTING);
  Report(pair, "chief-0", ReplicaState::FAILED, 137, 9);
  ASSERT_EQ(pair.state, JobState::RUNNING) << pair.message;
  jobs_.PlaceReplica(pair, *pair.FindReplica("chief-0"), "a", {0}, 30023, now_);
  placed = jobs_.TakeCommands();
  ASSERT_EQ(placed.launch.size(), 1u);
  EXPECT_TRUE(placed.launch[0].others_stopped);  // worker-0 is still starting
  Report(pair, "chief-0", ReplicaState::FAILED, 137, 9);
  Report(pair, "worker-0", ReplicaState::RUNNING);
  jobs_.PlaceReplica(pair, *pair.FindReplica("chief-0"), "a", {0}, 30024, now_);
  placed = jobs_.TakeCommands();
  ASSERT_EQ(placed.launch.size(), 1u);
  EXPECT_FALSE(placed.launch[0].others_stopped);
}

TEST_F(JobControllerTest, RestartJobOnWorkerRestartStopsEveryReplicaAndQueuesTheJob) {
  JobRecord& job = Start("whole", 1, true, 2, {"a", "a"});
  Report(job, "worker-0", ReplicaState::FAILED, 143, 15);
  EXPECT_EQ(StopsSent(), std::vector<std::string>{"chief-0"});
  EXPECT_EQ(job.state, JobState::QUEUED);
  EXPECT_TRUE(JobController::AnyHolding(job));  // the old chief still holds its GPU
  Report(job, "chief-0", ReplicaState::STOPPED, 143, 15);
  EXPECT_FALSE(JobController::AnyHolding(job));
  EXPECT_TRUE(jobs_.TakeScheduleNeeded());
  jobs_.PlaceJob(job, {{"a", {0}, 30000}, {"a", {1}, 30001}}, 29000, 29001, now_);
  ControllerCommands placed = jobs_.TakeCommands();
  ASSERT_EQ(placed.launch.size(), 2u);
  // Nothing of the job runs any more: its agents may set aside torn checkpoints.
  EXPECT_TRUE(placed.launch[0].others_stopped && placed.launch[1].others_stopped);
  EXPECT_EQ(job.FindReplica("chief-0")->attempt, 1);
  EXPECT_EQ(job.FindReplica("worker-0")->attempt, 1);
  EXPECT_EQ(job.state, JobState::PENDING);
  EXPECT_EQ(job.restarts, 1);
}

TEST_F(JobControllerTest, CancelStopsEverythingThenCancels) {
  JobRecord& job = Start("c", 1, false, 3, {"a", "a"});
  jobs_.Cancel(job, "cancel requested", now_);
  EXPECT_EQ(job.state, JobState::CANCELLING);
  EXPECT_EQ(StopsSent(), (std::vector<std::string>{"chief-0", "worker-0"}));
  Report(job, "chief-0", ReplicaState::STOPPED, 143, 15);
  EXPECT_EQ(job.state, JobState::CANCELLING);
  Report(job, "worker-0", ReplicaState::STOPPED, 143, 15);
  EXPECT_EQ(job.state, JobState::CANCELLED);
  EXPECT_EQ(job.restarts, 0);  // requested stops are not failures
}

TEST_F(JobControllerTest, CancelOfAQueuedJobIsImmediate) {
  JobRecord& job = SubmitQueued("q");
  EXPECT_EQ(job.state, JobState::QUEUED);
  jobs_.Cancel(job, "cancel requested", now_);
  EXPECT_EQ(job.state, JobState::CANCELLED);
  EXPECT_TRUE(StopsSent().empty());
}

TEST_F(JobControllerTest, TheSchedulingTimeoutFailsTheJob) {
  JobRecord& job = Start("slow", 0, false, 3, {"a"}, ", timeout: 1m");
  ExpectTimedOutBetween(job, 59'000, 2'000);
  EXPECT_EQ(job.message, "timed out after 1m");
  EXPECT_EQ(StopsSent(), std::vector<std::string>{"chief-0"});
}

// The chief's exit 0 ends the job SUCCEEDED at once; the workers still running (DDP ranks in their
// last barrier, or writing their own outputs) get scheduling.finish_grace to end on their own, and
// only those still running then are stopped.
TEST_F(JobControllerTest, TheChiefsSuccessLeavesRunningWorkersTheFinishGrace) {
  JobRecord& job = Start("done", 2, false, 3, {"a", "b", "c"});
  Report(job, "chief-0", ReplicaState::SUCCEEDED, 0);
  EXPECT_EQ(job.state, JobState::SUCCEEDED);
  EXPECT_EQ(job.end_time_ms, now_);
  ControllerCommands at_end = jobs_.TakeCommands();
  EXPECT_TRUE(at_end.stop.empty());
  EXPECT_EQ(at_end.ended, std::vector<std::string>{"done"});
  EXPECT_EQ(LastEventOpening(job, "worker-"), "<none>");

  Advance(2'000);
  Report(job, "worker-0", ReplicaState::SUCCEEDED, 0);
  EXPECT_EQ(job.state, JobState::SUCCEEDED);
  EXPECT_EQ(LastEventOpening(job, "worker-0"), "worker-0 attempt 0 exited 0 after the job ended");
  EXPECT_TRUE(StopsSent().empty());
  Advance(27'999);  // 29.999 s after the chief
  jobs_.TakeDirty();
  jobs_.CheckTimeouts(now_, true);
  EXPECT_TRUE(StopsSent().empty());
  EXPECT_TRUE(jobs_.TakeDirty().empty()) << "waiting changes nothing to store";

  Advance(1);
  jobs_.CheckTimeouts(now_, true);
  std::vector<StopCommand> stops = jobs_.TakeCommands().stop;
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].replica, "worker-1");
  EXPECT_EQ(stops[0].node_id, "c");
  EXPECT_EQ(stops[0].reason, "the job ended (SUCCEEDED); still running 30s after it");
  EXPECT_EQ(LastEventOpening(job, "worker-1"),
            "worker-1 still running 30s after the job ended: stopped");
  Advance(1'000);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_TRUE(StopsSent().empty()) << "asked once";
  Report(job, "worker-1", ReplicaState::STOPPED, 143, 15);
  EXPECT_FALSE(JobController::AnyHolding(job));
  EXPECT_EQ(job.state, JobState::SUCCEEDED);
  EXPECT_EQ(job.message, "the chief exited 0");
  EXPECT_TRUE(jobs_.EndedHolding().empty());
}

TEST_F(JobControllerTest, ACancelStopsTheRanksStillFinishingAndTheJobStaysSucceeded) {
  JobRecord& job = Start("hurry", 2, false, 3, {"a", "b", "c"});
  Report(job, "worker-0", ReplicaState::SUCCEEDED, 0);
  Report(job, "chief-0", ReplicaState::SUCCEEDED, 0);
  EXPECT_TRUE(StopsSent().empty());
  jobs_.Cancel(job, "cancel requested by alice", now_);
  std::vector<StopCommand> stops = jobs_.TakeCommands().stop;
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].replica, "worker-1");
  EXPECT_EQ(stops[0].reason, "the job ended (SUCCEEDED); cancel requested by alice");
  EXPECT_EQ(job.state, JobState::SUCCEEDED);
  EXPECT_EQ(job.message, "the chief exited 0");
  EXPECT_EQ(LastEventOpening(job, "cancel"),
            "cancel requested by alice: the replicas still running are stopped");
  jobs_.Cancel(job, "cancel requested by alice", now_);
  EXPECT_TRUE(StopsSent().empty()) << "asked once";
  Report(job, "worker-1", ReplicaState::STOPPED, 143, 15);
  EXPECT_FALSE(JobController::AnyHolding(job));
}

TEST_F(JobControllerTest, WithNoFinishGraceTheChiefsSuccessStopsEveryOtherReplicaAtOnce) {
  JobRecord& job = Start("prompt", 2, false, 3, {"a", "b", "c"}, ", finish_grace: 0s");
  Report(job, "chief-0", ReplicaState::SUCCEEDED, 0);
  EXPECT_EQ(job.state, JobState::SUCCEEDED);
  EXPECT_EQ(StopsSent(), (std::vector<std::string>{"worker-0", "worker-1"}));
  EXPECT_EQ(LastEventOpening(job, "worker-"), "<none>");
  Report(job, "worker-0", ReplicaState::STOPPED, 143, 15);
  EXPECT_EQ(LastEventOpening(job, "worker-0"), "<none>") << "a stop asked for is no news";
}

// Parameter servers (and reducers, evaluators) serve the workers: they stay while a worker may
// still need them and are stopped once none runs. A worker not running yet (a restart placed,
// not started) has nothing to finish: stopped at once.
TEST_F(JobControllerTest, AfterTheChiefsSuccessServersWaitForTheWorkersAndALaunchIsStopped) {
  const std::string yaml =
      "name: ps\nworker_pools:\n"
      "  - role: chief\n    replicas: 1\n    process: {command: [/bin/train]}\n"
      "  - role: worker\n    replicas: 2\n    process: {command: [/bin/train]}\n"
      "  - role: parameter_server\n    replicas: 1\n    process: {command: [/bin/serve]}\n"
      "scheduling: {max_restarts: 3}\n";
  auto spec = ParseJobSpec(yaml, "test job");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRecord& job = jobs_.Submit(std::move(*spec), yaml, now_);
  std::vector<JobController::Slot> slots;
  for (size_t i = 0; i < job.replicas.size(); ++i) {
    slots.push_back(JobController::Slot{"a", {}, 30000 + static_cast<int>(i)});
  }
  health_.heard["a"] = now_;
  jobs_.PlaceJob(job, slots, 29000, 29001, now_);
  for (auto& r : job.replicas) Report(job, r.name, ReplicaState::RUNNING);
  ASSERT_EQ(job.state, JobState::RUNNING);
  // worker-1 is killed and placed again; its attempt 1 has not started when the chief ends.
  Report(job, "worker-1", ReplicaState::FAILED, 137, 9);
  jobs_.PlaceReplica(job, *job.FindReplica("worker-1"), "a", {}, 30010, now_);
  jobs_.TakeCommands();

  Report(job, "chief-0", ReplicaState::SUCCEEDED, 0);
  EXPECT_EQ(job.state, JobState::SUCCEEDED);
  EXPECT_EQ(StopsSent(), std::vector<std::string>{"worker-1"});
  Advance(500);
  Report(job, "worker-1", ReplicaState::STOPPED, 143, 15);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_TRUE(StopsSent().empty()) << "parameter_server-0 waits for worker-0";

  Advance(500);
  Report(job, "worker-0", ReplicaState::SUCCEEDED, 0);
  EXPECT_EQ(StopsSent(), std::vector<std::string>{"parameter_server-0"});
  Report(job, "parameter_server-0", ReplicaState::STOPPED, 143, 15);
  EXPECT_FALSE(JobController::AnyHolding(job));
}

// The grace is counted from the job's recorded end, so a coordinator restart keeps it: a worker
// still running after the restart is neither stopped early nor forgotten.
TEST_F(JobControllerTest, TheFinishGraceOutlivesACoordinatorRestart) {
  JobRecord& job = Start("kept", 1, false, 3, {"a", "b"}, ", finish_grace: 10s");
  Report(job, "chief-0", ReplicaState::SUCCEEDED, 0);
  EXPECT_TRUE(StopsSent().empty());
  JobRecord copy = job;
  JobController restarted(Options(), &health_);
  restarted.Restore(std::move(copy));
  restarted.FinishRestore(now_);
  Advance(5'000);
  restarted.CheckTimeouts(now_, false);
  EXPECT_TRUE(restarted.TakeCommands().stop.empty());
  Advance(5'000);
  restarted.CheckTimeouts(now_, false);
  std::vector<StopCommand> stops = restarted.TakeCommands().stop;
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].replica, "worker-0");
  EXPECT_TRUE(restarted.FindJob("kept")->FindReplica("worker-0")->stop_requested);
}

TEST_F(JobControllerTest, ReplicasOnANodeThatNeverRegisteredAreLostOnceTheGraceIsOver) {
  JobRecord& job = Start("orphan", 1, false, 3, {"a", "b"});
  health_.heard.erase("b");  // after a coordinator restart, b has not registered
  jobs_.CheckTimeouts(now_, false);
  EXPECT_EQ(job.FindReplica("worker-0")->state, ReplicaState::RUNNING);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_EQ(job.restarts, 1);
  EXPECT_NE(LastRestartEvent(job).find("did not re-register"), std::string::npos)
      << LastRestartEvent(job);
}

TEST_F(JobControllerTest, PreemptionRequeuesTheJobWithoutSpendingARestartOrOpeningAnIncident) {
  JobRecord& job = Start("victim", 1, true, 1, {"a", "b"});
  jobs_.PreemptJob(job, "preempted by job boss (priority high, queue default)", now_);
  EXPECT_EQ(job.state, JobState::QUEUED);
  EXPECT_EQ(StopsSent(), (std::vector<std::string>{"chief-0", "worker-0"}));
  EXPECT_TRUE(JobController::AnyHolding(job)) << "its replicas hold their room until they stop";
  // The replicas end as a stop makes them end (the trainer checkpoints and exits; a DDP peer may
  // exit 1 first): none of it is a failure.
  EndAsStoppedRanksEnd(job);
  EXPECT_EQ(job.state, JobState::QUEUED);
  EXPECT_EQ(job.FindReplica("chief-0")->state, ReplicaState::PREEMPTED);
  bool said = false;
  for (const auto& e : job.events) {
    said |= e.message.find("preempted by job boss (priority high") != std::string::npos &&
            e.message.find("no restart spent") != std::string::npos;
  }
  EXPECT_TRUE(said);
  // Placed again: a new attempt of every replica, and the budget (1) is still whole: one real
  // failure later is a restart, not the end.
  std::vector<JobController::Slot> slots = {{"b", {0}, 30010}, {"a", {0}, 30011}};
  jobs_.PlaceJob(job, slots, 29010, 29011, now_);
  for (auto& r : job.replicas) {
    EXPECT_EQ(r.attempt, 1) << r.name;
    Report(job, r.name, ReplicaState::RUNNING);
  }
  EXPECT_EQ(job.state, JobState::RUNNING);
  Report(job, "worker-0", ReplicaState::LOST);
  EXPECT_EQ(job.restarts, 1);
  EXPECT_NE(job.state, JobState::FAILED);
}

// scheduling.after: a job waits, saying for what, until each job it runs after has succeeded
// (an event each), then is placed as any; when one fails instead it fails too, naming it, and so
// does the job after it. A job that ended otherwise than SUCCEEDED cannot be waited for.
TEST_F(JobControllerTest, AJobRunsAfterTheJobsItNamesSucceedAndFailsWhenOneFails) {
  JobRecord& prep = Start("prep", 0, false, 0, {"a"});
  JobRecord& train = Start("train", 0, false, 0, {"b"});
  JobRecord& eval = SubmitAfter("eval", "[prep, train]");
  EXPECT_TRUE(eval.waits_for_jobs);
  EXPECT_EQ(eval.message, "waiting for jobs prep, train to succeed (scheduling.after)");
  JobRecord& report = SubmitAfter("report", "[eval]");
  EXPECT_EQ(report.message, "waiting for job eval to succeed (scheduling.after)");
  jobs_.TakeScheduleNeeded();

  Report(prep, "chief-0", ReplicaState::SUCCEEDED, 0);
  EXPECT_TRUE(eval.waits_for_jobs);
  EXPECT_EQ(eval.events.back().message,
            "job prep succeeded (scheduling.after); waiting for job train to succeed "
            "(scheduling.after)");
  EXPECT_EQ(eval.message, "waiting for job train to succeed (scheduling.after)");
  Report(train, "chief-0", ReplicaState::SUCCEEDED, 0);
  EXPECT_FALSE(eval.waits_for_jobs);
  EXPECT_EQ(eval.events.back().message, "job train succeeded (scheduling.after): it may run now");
  EXPECT_EQ(eval.message, "waiting for resources");
  EXPECT_TRUE(jobs_.TakeScheduleNeeded());
  EXPECT_TRUE(report.waits_for_jobs);

  // eval runs and fails for good: report, after it, fails as well.
  jobs_.PlaceJob(eval, {{"a", {0}, 30100}}, 29100, 29101, now_);
  Report(eval, "chief-0", ReplicaState::RUNNING);
  Report(eval, "chief-0", ReplicaState::FAILED, 2);
  EXPECT_EQ(eval.state, JobState::FAILED);
  EXPECT_EQ(report.state, JobState::FAILED);
  EXPECT_EQ(report.message, "job eval, which it runs after (scheduling.after), ended FAILED");

  auto refused = ParseJobSpec(
      "name: late\nworker_pools:\n  - role: chief\n    process: {command: [/bin/x]}\n"
      "scheduling: {after: [eval]}\n",
      "test job");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(jobs_.CheckAfter(*refused).code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(jobs_.CheckAfter(*refused).message().find("job eval is FAILED"), std::string::npos);
  refused->scheduling.after = {{"nobody"}};
  EXPECT_EQ(jobs_.CheckAfter(*refused).code(), StatusCode::kNotFound);
}

// scheduling.after's conditions: `JOB:ended` runs after any end, `JOB:failed` after a failure or
// a cancellation, and a job waiting for a failure that did not come ends CANCELLED (not needed),
// while one waiting for a success that did not come FAILS. What a job waits for is said by
// condition.
TEST_F(JobControllerTest, AJobRunsAfterTheJobsItNamesEndAsItsConditionsAsk) {
  JobRecord& train = Start("train", 0, false, 0, {"a"});
  JobRecord& prep = Start("prep", 0, false, 0, {"b"});
  JobRecord& cleanup = SubmitAfter("cleanup", "[train:ended, prep:ended]");
  JobRecord& fallback = SubmitAfter("fallback", "[train:failed]");
  JobRecord& mixed = SubmitAfter("mixed", "[train:failed, prep]");
  JobRecord& unneeded = SubmitAfter("unneeded", "[prep:failed]");
  JobRecord& after_unneeded = SubmitAfter("after_unneeded", "[unneeded]");
  JobRecord& after_unneeded_any = SubmitAfter("after_unneeded_any", "[unneeded:ended]");
  EXPECT_EQ(cleanup.message, "waiting for jobs train, prep to end (scheduling.after)");
  EXPECT_EQ(fallback.message, "waiting for job train to fail (scheduling.after)");
  EXPECT_EQ(mixed.message,
            "waiting for job train to fail and job prep to succeed (scheduling.after)");

  // prep succeeds: the job waiting for its failure is not needed, and neither is the job after
  // that one's success; the job after its end runs.
  Report(prep, "chief-0", ReplicaState::SUCCEEDED, 0);
  EXPECT_EQ(unneeded.state, JobState::CANCELLED);
  EXPECT_EQ(unneeded.message,
            "job prep ended SUCCEEDED, and it runs only should that one fail (scheduling.after: "
            "prep:failed)");
  EXPECT_EQ(after_unneeded.state, JobState::FAILED);
  EXPECT_EQ(after_unneeded.message,
            "job unneeded, which it runs after (scheduling.after), ended CANCELLED");
  EXPECT_EQ(after_unneeded_any.state, JobState::QUEUED);
  EXPECT_FALSE(after_unneeded_any.waits_for_jobs);
  EXPECT_EQ(cleanup.message, "waiting for job train to end (scheduling.after)");
  EXPECT_EQ(cleanup.events.back().message,
            "job prep ended SUCCEEDED (scheduling.after: prep:ended); waiting for job train to "
            "end (scheduling.after)");
  EXPECT_EQ(mixed.message, "waiting for job train to fail (scheduling.after)");

  // train fails for good: the fallback and the cleanup run.
  jobs_.TakeScheduleNeeded();
  Report(train, "chief-0", ReplicaState::FAILED, 1);
  ASSERT_EQ(train.state, JobState::FAILED);
  for (JobRecord* job : {&cleanup, &fallback, &mixed}) {
    EXPECT_EQ(job->state, JobState::QUEUED) << job->name;
    EXPECT_FALSE(job->waits_for_jobs) << job->name;
    EXPECT_EQ(job->message, "waiting for resources") << job->name;
  }
  EXPECT_EQ(fallback.events.back().message,
            "job train ended FAILED (scheduling.after: train:failed): it may run now");
  EXPECT_TRUE(jobs_.TakeScheduleNeeded());

  // At submit: after a job that SUCCEEDED, `:failed` is refused, `:ended` is not; after a failed
  // one, `:failed` and `:ended` are taken and need not wait.
  auto spec_after = [](const std::string& after) {
    auto spec = ParseJobSpec(
        "name: late\nworker_pools:\n  - role: chief\n    process: {command: [/bin/x]}\n"
        "scheduling: {after: " +
            after + "}\n",
        "test job");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    return *spec;
  };
  EXPECT_EQ(jobs_.CheckAfter(spec_after("[prep:failed]")).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(jobs_.CheckAfter(spec_after("[prep:failed]")).message(),
            "scheduling.after: job prep is SUCCEEDED: a job to run after it fails would never "
            "run");
  EXPECT_TRUE(jobs_.CheckAfter(spec_after("[prep:ended, train:failed]")).ok());
  const std::string yaml =
      "name: late\nworker_pools:\n  - role: chief\n    process: {command: [/bin/x]}\n"
      "scheduling: {after: [prep:ended, train:failed]}\n";
  JobRecord& late = jobs_.Submit(spec_after("[prep:ended, train:failed]"), yaml, now_);
  EXPECT_FALSE(late.waits_for_jobs);
  EXPECT_EQ(late.state, JobState::QUEUED);
  EXPECT_EQ(late.message, "waiting for resources");
}

// scheduling.hold: the job is SUSPENDED from its submission, in no round, until resumed; its time
// held before any start counts toward nothing.
TEST_F(JobControllerTest, AHeldJobIsSuspendedFromItsSubmissionUntilResumed) {
  const std::string yaml =
      "name: held\nworker_pools:\n  - role: chief\n    resources: {gpus: 1}\n"
      "    process: {command: [/bin/x]}\nscheduling: {hold: true}\n";
  auto spec = ParseJobSpec(yaml, "test job");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRecord& held = jobs_.Submit(std::move(*spec), yaml, now_);
  EXPECT_EQ(held.state, JobState::SUSPENDED);
  EXPECT_EQ(held.message, "held at submit (scheduling.hold); `cohort resume held` queues it");
  EXPECT_EQ(held.events.back().message, held.message);
  Advance(60'000);
  ASSERT_TRUE(jobs_.Resume(held, "resumed by alice", now_).ok());
  EXPECT_EQ(held.state, JobState::QUEUED);
  EXPECT_EQ(held.suspended_ms, 0);  // it had not started
  EXPECT_TRUE(jobs_.TakeScheduleNeeded());
  jobs_.PlaceJob(held, {{"a", {0}, 30100}}, 29100, 29101, now_);
  EXPECT_EQ(held.replicas[0].attempt, 0);
}

// After a coordinator restart what a job waits for is read from the jobs again; a job it waits
// for that is gone, or whose name a later job took, was deleted after its success.
TEST_F(JobControllerTest, WhatAJobWaitsForIsFoundAgainAfterARestart) {
  JobRecord& first = Start("first", 0, false, 0, {"a"});
  const std::string yaml =
      "name: second\nworker_pools:\n  - role: chief\n    process: {command: [/bin/x]}\n"
      "scheduling: {after: [first, gone]}\n";
  auto spec = ParseJobSpec(yaml, "test job");
  ASSERT_TRUE(spec.ok());
  JobRecord second_before = jobs_.Submit(std::move(*spec), yaml, now_);
  // A job of the name `gone` submitted since, running at the restart, is another: not waited for.
  JobRecord reused_before = Start("gone", 0, false, 0, {"b"});
  JobRecord first_before = first;
  JobController again(Options(), &health_);
  again.Restore(first_before);
  again.Restore(second_before);
  again.Restore(reused_before);
  again.FinishRestore(now_);
  JobRecord& second = *again.FindJob("second");
  EXPECT_TRUE(second.waits_for_jobs);
  EXPECT_EQ(second.message, "waiting for job first to succeed (scheduling.after)");
  JobRecord& first_again = *again.FindJob("first");
  again.ApplyReplicaStatus(first_again, first_again.replicas[0], ReplicaState::SUCCEEDED, 0, 0, "",
                           now_);
  EXPECT_FALSE(second.waits_for_jobs);
  EXPECT_EQ(second.state, JobState::QUEUED);
}

// scheduling.max_wait: a job queued that long at a stretch fails, naming what it waited for; not
// before the agents had time to register after a coordinator start.
TEST_F(JobControllerTest, AJobQueuedPastItsMaxWaitFailsNamingWhatItWaitedFor) {
  const std::string yaml =
      "name: big\nworker_pools:\n  - role: chief\n    resources: {gpus: 8}\n"
      "    process: {command: [/bin/train]}\nscheduling: {max_wait: 1m}\n";
  JobRecord& job = jobs_.Submit(*ParseJobSpec(yaml, "test job"), yaml, now_);
  EXPECT_TRUE(job.wait_limited);
  const std::string reason = "needs 8 GPUs on one node; the largest has 4";
  job.SetWaitingReason(reason, WaitingReasonHash(reason));
  Advance(59'000);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_EQ(job.state, JobState::QUEUED);
  Advance(1'000);
  jobs_.CheckTimeouts(now_, false);
  EXPECT_EQ(job.state, JobState::QUEUED) << "the agents may not have registered yet";
  jobs_.CheckTimeouts(now_, true);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_EQ(job.message, "waited 1m to be placed (scheduling.max_wait: 1m): " + reason);

  // Without max_wait a job waits for as long as it takes.
  JobRecord& patient = SubmitQueued("patient");
  EXPECT_FALSE(patient.wait_limited);
  Advance(30LL * 86'400'000);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_EQ(patient.state, JobState::QUEUED);
}

// Each wait is bounded alone: a job that ran for an hour and restarts may wait max_wait again, and
// then fails, its old replicas stopped.
TEST_F(JobControllerTest, EveryWaitToBePlacedIsBoundedAloneByMaxWait) {
  JobRecord& job = Start("r", 1, true, 3, {"a", "b"}, ", max_wait: 1m");
  Advance(3'600'000);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_EQ(job.state, JobState::RUNNING) << "a running job is not waiting";
  Report(job, "worker-0", ReplicaState::FAILED, 137);
  EXPECT_EQ(job.state, JobState::QUEUED);
  EXPECT_EQ(job.restarts, 1);
  EXPECT_EQ(job.queued_since_ms, now_);
  StopsSent();
  Advance(59'999);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_EQ(job.state, JobState::QUEUED);
  Advance(1);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_EQ(job.state, JobState::FAILED);
  EXPECT_EQ(job.message.rfind("waited 1m to be placed (scheduling.max_wait: 1m): restarting", 0),
            0u)
      << job.message;
}

// The wait of a job that runs after others begins once they have succeeded; time suspended is no
// wait.
TEST_F(JobControllerTest, MaxWaitCountsNeitherTheWaitForDependenciesNorASuspension) {
  JobRecord& prep = Start("prep", 0, false, 0, {"a"});
  JobRecord& train = SubmitAfter("train", "[prep]", ", max_wait: 1m");
  ASSERT_TRUE(train.wait_limited);
  Advance(10 * 60'000);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_EQ(train.state, JobState::QUEUED) << "waiting for prep is no wait for resources";
  Report(prep, "chief-0", ReplicaState::SUCCEEDED, 0);
  EXPECT_FALSE(train.waits_for_jobs);
  EXPECT_EQ(train.queued_since_ms, now_);
  Advance(30'000);
  ASSERT_TRUE(jobs_.Suspend(train, "suspended by alice", now_).ok());
  Advance(10 * 60'000);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_EQ(train.state, JobState::SUSPENDED);
  ASSERT_TRUE(jobs_.Resume(train, "resumed by alice", now_).ok());
  Advance(59'000);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_EQ(train.state, JobState::QUEUED);
  Advance(1'000);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_EQ(train.state, JobState::FAILED);
}

// `cohort suspend`: the replicas stop as a preemption stops them, and whatever they do then is no
// failure; the job stays SUSPENDED, outside the timeout, until resumed; then it is queued and
// placed as a new attempt of every replica, having spent nothing. Asking twice changes nothing.
TEST_F(JobControllerTest, ASuspendedJobStopsItsReplicasAndRunsAgainOnlyOnceResumed) {
  JobRecord& job = Start("s", 1, true, 1, {"a", "b"}, ", timeout: 1m");
  Advance(10'000);
  ASSERT_TRUE(jobs_.Suspend(job, "suspended by alice", now_).ok());
  EXPECT_EQ(job.state, JobState::SUSPENDED);
  EXPECT_EQ(job.message, "suspended by alice; `cohort resume s` queues it again");
  EXPECT_EQ(job.events.back().message,
            "suspended by alice; its replicas stop, to resume from the newest checkpoint (no "
            "restart spent)");
  EXPECT_EQ(StopsSent(), (std::vector<std::string>{"chief-0", "worker-0"}));
  EXPECT_TRUE(JobController::AnyHolding(job)) << "its replicas hold their room until they stop";
  const size_t events = job.events.size();
  ASSERT_TRUE(jobs_.Suspend(job, "suspended by alice", now_).ok());
  EXPECT_EQ(job.events.size(), events);
  EXPECT_TRUE(StopsSent().empty());
  EndAsStoppedRanksEnd(job);
  EXPECT_EQ(job.state, JobState::SUSPENDED);
  EXPECT_EQ(job.FindReplica("chief-0")->state, ReplicaState::STOPPED);
  // Five minutes suspended: the one-minute timeout does not run meanwhile.
  Advance(5 * 60'000 - 300);
  jobs_.CheckTimeouts(now_, true);
  EXPECT_EQ(job.state, JobState::SUSPENDED);
  ASSERT_TRUE(jobs_.Resume(job, "resumed by alice", now_).ok());
  EXPECT_EQ(job.state, JobState::QUEUED);
  EXPECT_EQ(job.suspended_ms, 5 * 60'000);
  EXPECT_EQ(job.queued_since_ms, now_);
  EXPECT_EQ(job.message, "resumed by alice: waiting for resources");
  EXPECT_EQ(job.events.back().message, "resumed by alice: back in the queue after 5m suspended");
  ASSERT_TRUE(jobs_.Resume(job, "resumed by alice", now_).ok());
  EXPECT_EQ(job.events.back().message, "resumed by alice: back in the queue after 5m suspended");
  EXPECT_TRUE(jobs_.TakeScheduleNeeded());
  jobs_.PlaceJob(job, {{"b", {0}, 30010}, {"a", {0}, 30011}}, 29010, 29011, now_);
  for (auto& r : job.replicas) {
    EXPECT_EQ(r.attempt, 1) << r.name;
    Report(job, r.name, ReplicaState::RUNNING);
  }
  EXPECT_EQ(job.state, JobState::RUNNING);
  // It ran 10 s before the suspension: the timeout comes 50 s after the resume, not at once.
  ExpectTimedOutBetween(job, 45'000, 10'000);
  EXPECT_EQ(job.restarts, 0);
}

// A queued job is suspended at once (nothing of it runs), and cancelled as any job is; a job that
// ended can be neither suspended nor resumed, and the refusal names its state.
TEST_F(JobControllerTest, AQueuedJobIsSuspendedAtOnceAndAnEndedOneIsRefused) {
  JobRecord& job = SubmitQueued("q");
  ASSERT_TRUE(jobs_.Suspend(job, "suspended", now_).ok());
  EXPECT_EQ(job.state, JobState::SUSPENDED);
  EXPECT_EQ(job.events.back().message, "suspended (no restart spent)");
  EXPECT_TRUE(StopsSent().empty());
  EXPECT_FALSE(JobController::AnyHolding(job));
  // Time suspended before its first placement is no part of its run.
  Advance(60'000);
  ASSERT_TRUE(jobs_.Resume(job, "resumed", now_).ok());
  EXPECT_EQ(job.suspended_ms, 0);
  ASSERT_TRUE(jobs_.Suspend(job, "suspended", now_).ok());
  jobs_.Cancel(job, "cancel requested", now_);
  EXPECT_EQ(job.state, JobState::CANCELLED);
  for (bool resume : {false, true}) {
    Status refused =
        resume ? jobs_.Resume(job, "resumed", now_) : jobs_.Suspend(job, "suspended", now_);
    EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(refused.message().find("job q is CANCELLED"), std::string::npos) << refused.message();
  }
}

// An elastic job running short of workers asks for every one again once resumed, as after any
// restart.
TEST_F(JobControllerTest, ASuspendedElasticJobAsksForEveryWorkerAgain) {
  JobRecord& job = StartElastic();
  ASSERT_EQ(job.elastic_workers, 2);
  ASSERT_TRUE(jobs_.Suspend(job, "suspended", now_).ok());
  EXPECT_EQ(job.elastic_workers, -1);
  EXPECT_EQ(job.demands.size(), 4u);
}

TEST_F(JobControllerTest, APreemptorWaitsForItsVictimsAndForgetsThemOncePlaced) {
  JobRecord& victim = Start("low", 0, true, 3, {"a"});
  std::string yaml =
      "name: high\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {gpus: 1}\n"
      "    process: {command: [/bin/train]}\nscheduling: {priority: high}\n";
  auto spec = ParseJobSpec(yaml, "test job");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRecord& boss = jobs_.Submit(std::move(*spec), yaml, now_);
  jobs_.PreemptJob(victim, "preempted by job high (priority high, queue default)", now_);
  jobs_.NotePreemption(boss, {"low"}, "preempted job low (priority normal, queue default) to run",
                       now_);
  EXPECT_EQ(jobs_.PreemptedFor(boss), std::vector<std::string>{"low"});
  EXPECT_EQ(boss.events.back().message,
            "preempted job low (priority normal, queue default) to run");
  jobs_.PlaceJob(boss, {{"a", {0}, 30020}}, 29020, 29021, now_);
  EXPECT_TRUE(jobs_.PreemptedFor(boss).empty());
  // A job that is not running is not preempted.
  jobs_.PreemptJob(victim, "again", now_);
  EXPECT_EQ(victim.events.back().message.find("again"), std::string::npos);
}

TEST(JobControllerStorageTest, JobsUnderTheCheckedOutputRootNeedSharedStorage) {
  FakeNodeHealth health;
  JobControllerOptions options = Options();
  options.default_output_base = "/shared/jobs";
  options.checked_output_root = "/shared/jobs";
  JobController jobs(options, &health);
  auto submit = [&](const std::string& name, const std::string& output_dir) -> JobRecord& {
    std::string yaml = "name: " + name + "\n" +
                       (output_dir.empty() ? "" : "output_dir: " + output_dir + "\n") +
                       "worker_pools:\n  - role: chief\n    replicas: 1\n"
                       "    process: {command: [/bin/train]}\n";
    auto spec = ParseJobSpec(yaml, "test job");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    return jobs.Submit(std::move(*spec), yaml, 0);
  };
  JobRecord& by_default = submit("d", "");
  EXPECT_EQ(by_default.output_dir, "/shared/jobs/d");
  EXPECT_TRUE(by_default.needs_shared_storage);
  EXPECT_TRUE(submit("under", "/shared/jobs/team/x").needs_shared_storage);
  JobRecord& outside = submit("outside", "/scratch/x");
  EXPECT_FALSE(outside.needs_shared_storage);
  // Derived again on a restore (not stored).
  JobRecord copy = by_default;
  copy.needs_shared_storage = false;
  JobController restored(options, &health);
  restored.Restore(copy);
  EXPECT_TRUE(restored.FindJob("d")->needs_shared_storage);

  // No checked root: nothing needs it.
  JobController unchecked(Options(), &health);
  std::string yaml =
      "name: plain\nworker_pools:\n  - role: chief\n    replicas: 1\n"
      "    process: {command: [/bin/train]}\n";
  EXPECT_FALSE(
      unchecked.Submit(ParseJobSpec(yaml, "test job").value(), yaml, 0).needs_shared_storage);
}

// With fencing, a lost replica is held from the last message either way: the coordinator's own
// launch or stop may have reached the agent after the agent's last word reached the coordinator
// (a one-way partition), and the agent's fence counts from what it last heard. Without fencing
// nothing is held.
TEST_F(JobControllerTest, AFenceCountsFromTheLastMessageEitherWay) {
  JobControllerOptions options = Options();
  options.fence_after_ms = 20'000;
  options.fence_grace_ms = 30'000;
  JobController fencing(options, &health_);
  for (JobController* jobs : {&fencing, &jobs_}) {
    SCOPED_TRACE(jobs == &fencing ? "fencing" : "no fencing");
    std::string yaml =
        "name: held\nworker_pools:\n  - role: chief\n    replicas: 1\n"
        "    process: {command: [/bin/train]}\nscheduling: {max_restarts: 3}\n";
    JobRecord& job = jobs->Submit(ParseJobSpec(yaml, "test job").value(), yaml, now_);
    jobs->PlaceJob(job, {JobController::Slot{"node-a", {}, 30000}}, 29000, 29001, now_);
    jobs->ApplyReplicaStatus(job, job.replicas[0], ReplicaState::RUNNING, -1, 0, "", now_);
    const int64_t last_word = now_;
    const int64_t last_sent = now_ + 4'000;  // a stop, say, after the agent's last heartbeat
    Advance(11'000);
    jobs->NodeLost("node-a", "no heartbeat for 11s (timeout 10s)", now_, last_word, last_sent);
    const ReplicaRecord& r = job.replicas[0];
    EXPECT_EQ(r.state, ReplicaState::PENDING);  // restarting, not yet placed
    if (jobs == &fencing) {
      EXPECT_EQ(r.fenced_until_ms, last_sent + 20'000 + 30'000 + 2 * kIntervalMs);
      EXPECT_EQ(jobs->FenceHeldReplicas(now_), 1u);
      EXPECT_EQ(jobs->FenceHeldReplicas(r.fenced_until_ms), 0u);
      EXPECT_EQ(LastEventOpening(job, "what ran on node-a"),
                "what ran on node-a is placed again in 45s, once that node's agent has surely "
                "stopped it (fencing: an agent stops its replicas after 20s without word from the "
                "coordinator, and waits at most 30s for them to end)");
    } else {
      EXPECT_EQ(r.fenced_until_ms, 0);
      EXPECT_EQ(jobs->FenceHeldReplicas(now_), 0u);
      EXPECT_EQ(LastEventOpening(job, "what ran on"), "<none>");
    }
  }
}

}  // namespace
}  // namespace cohort::coordinator
