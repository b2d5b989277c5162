// The coordinator's observability pieces without sockets: accounting (ComputeUsage), the
// /metrics rendering of a snapshot, training metrics in memory and in the state store.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>

#include "common/build_version.h"
#include "coordinator/http_service.h"
#include "coordinator/job_usage.h"
#include "coordinator/state_store.h"
#include "coordinator/training_metrics.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;

JobRecord Job(const std::string& name, uint64_t seq, JobState state, int gpus, int cpus,
              int64_t start_ms, int64_t end_ms) {
  JobRecord j;
  j.seq = seq;
  j.name = name;
  j.spec_yaml = "name: " + name +
                "\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {gpus: " +
                std::to_string(gpus) + ", cpus: " + std::to_string(cpus) +
                "}\n    process: {command: [/bin/train]}\n  - role: worker\n    replicas: 2\n"
                "    resources: {gpus: " +
                std::to_string(gpus) + ", cpus: " + std::to_string(cpus) +
                "}\n    process: {command: [/bin/train]}\n";
  auto spec = ParseJobSpec(j.spec_yaml);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  j.spec = *spec;
  j.replicas = MakeReplicas(j.spec);
  j.state = state;
  j.create_time_ms = start_ms > 0 ? start_ms - 1000 : 1;
  j.start_time_ms = start_ms;
  j.end_time_ms = end_ms;
  return j;
}

TEST(Usage, SumsRequestedResourcesOverHeldTime) {
  const int64_t hour = 3'600'000;
  std::vector<JobRecord> jobs = {
      Job("a", 1, JobState::SUCCEEDED, 1, 2, 10 * hour, 12 * hour),  // 3 replicas, 2 h
      Job("b", 2, JobState::FAILED, 2, 1, 11 * hour, 11 * hour + hour / 2),
      Job("c", 3, JobState::RUNNING, 0, 4, 13 * hour, 0),  // runs until now
      Job("d", 4, JobState::QUEUED, 1, 1, 0, 0),           // never placed
  };
  std::vector<const JobRecord*> all;
  for (const JobRecord& j : jobs) all.push_back(&j);
  auto rows = ComputeUsage(all, {}, 14 * hour);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].user, "unknown");
  EXPECT_EQ(rows[0].queue, "default");
  EXPECT_EQ(rows[0].jobs, 4u);
  EXPECT_EQ(rows[0].failed, 1u);
  EXPECT_DOUBLE_EQ(rows[0].gpu_hours, 3 * 1 * 2.0 + 3 * 2 * 0.5);
  EXPECT_DOUBLE_EQ(rows[0].cpu_hours, 3 * 2 * 2.0 + 3 * 1 * 0.5 + 3 * 4 * 1.0);

  // Since 11:30: a's last half hour, nothing of b (it ended then), c's hour; d still counts.
  UsageFilter since;
  since.since_ms = 11 * hour + hour / 2;
  rows = ComputeUsage(all, since, 14 * hour);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].jobs, 4u);
  EXPECT_DOUBLE_EQ(rows[0].gpu_hours, 3 * 1 * 0.5);
  EXPECT_DOUBLE_EQ(rows[0].cpu_hours, 3 * 2 * 0.5 + 3 * 4 * 1.0);
  since.since_ms = 12 * hour + 1;
  rows = ComputeUsage(all, since, 14 * hour);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].jobs, 2u);  // c and d

  UsageFilter other;
  other.user = "alice";
  EXPECT_TRUE(ComputeUsage(all, other, 14 * hour).empty());
  other = {};
  other.queue = "default";
  EXPECT_EQ(ComputeUsage(all, other, 14 * hour).size(), 1u);
}

// Time suspended holds nothing: a job suspended now counts until its suspension began, and the
// time of its earlier suspensions is taken off its span (pro rata where --since cuts the span).
TEST(Usage, TimeSuspendedIsNotCounted) {
  const int64_t hour = 3'600'000;
  JobRecord done = Job("done", 1, JobState::SUCCEEDED, 1, 1, 10 * hour, 14 * hour);
  done.suspended_ms = 2 * hour;  // ran 2 of its 4 hours
  JobRecord now = Job("now", 2, JobState::SUSPENDED, 1, 1, 10 * hour, 0);
  now.queued_since_ms = 11 * hour;  // suspended at 11:00, after an hour's run
  for (const JobRecord* job : {&done, &now}) {
    auto rows = ComputeUsage({job}, {}, 14 * hour);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_DOUBLE_EQ(rows[0].gpu_hours, job == &done ? 3 * 2.0 : 3 * 1.0) << job->name;
  }
  UsageFilter since;
  since.since_ms = 12 * hour;  // half of done's span: half of its suspended time
  auto rows = ComputeUsage({&done}, since, 14 * hour);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].gpu_hours, 3 * 1.0);
}

// Ranks that finish after the chief's success (scheduling.finish_grace) hold their resources on:
// each adds its own from the job's end until it ended, or until now while it runs.
TEST(Usage, ReplicasFinishingAfterTheJobsEndCountUntilTheyEnd) {
  const int64_t hour = 3'600'000;
  JobRecord job = Job("e", 1, JobState::SUCCEEDED, 2, 1, 10 * hour, 12 * hour);
  for (auto& r : job.replicas) {
    r.node_id = "node-" + r.name;
    r.state = ReplicaState::SUCCEEDED;
    r.state_time_ms = 12 * hour;  // the chief, at the end
  }
  job.replicas[1].state_time_ms = 12 * hour + hour / 4;  // worker-0 a quarter hour later
  job.replicas[2].state = ReplicaState::RUNNING;         // worker-1 still running at 12:30
  auto rows = ComputeUsage({&job}, {}, 12 * hour + hour / 2);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].gpu_hours, 3 * 2 * 2.0 + 2 * 0.25 + 2 * 0.5);
  EXPECT_DOUBLE_EQ(rows[0].cpu_hours, 3 * 1 * 2.0 + 1 * 0.25 + 1 * 0.5);
  // Since 12:20: worker-1's ten minutes only.
  UsageFilter since;
  since.since_ms = 12 * hour + hour / 3;
  rows = ComputeUsage({&job}, since, 12 * hour + hour / 2);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].gpu_hours, 2.0 / 6, 1e-9);
}

// By a label's value (`cohort usage --by-label team`): one row per value, the jobs without it in
// a row of their own, last; a selector keeps only the jobs it matches, either way.
TEST(Usage, ByALabelsValueAndOnlyTheSelectedJobs) {
  const int64_t hour = 3'600'000;
  std::vector<JobRecord> jobs = {
      Job("a", 1, JobState::SUCCEEDED, 1, 1, 10 * hour, 11 * hour),
      Job("b", 2, JobState::FAILED, 1, 1, 10 * hour, 12 * hour),
      Job("c", 3, JobState::SUCCEEDED, 2, 1, 10 * hour, 11 * hour),
      Job("d", 4, JobState::SUCCEEDED, 1, 1, 10 * hour, 11 * hour),
  };
  jobs[0].spec.labels = {{"team", "vision"}, {"sweep", "lr"}};
  jobs[1].spec.labels = {{"team", "vision"}};
  jobs[2].spec.labels = {{"team", "speech"}, {"sweep", "lr"}};
  jobs[3].owner = "alice";  // no labels
  std::vector<const JobRecord*> all;
  for (const JobRecord& j : jobs) all.push_back(&j);
  UsageFilter by_team;
  by_team.by_label = "team";
  auto rows = ComputeUsage(all, by_team, 14 * hour);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].label, "speech");
  EXPECT_EQ(rows[0].jobs, 1u);
  EXPECT_DOUBLE_EQ(rows[0].gpu_hours, 3 * 2 * 1.0);
  EXPECT_EQ(rows[1].label, "vision");
  EXPECT_EQ(rows[1].jobs, 2u);
  EXPECT_EQ(rows[1].failed, 1u);
  EXPECT_DOUBLE_EQ(rows[1].gpu_hours, 3 * 1 * 1.0 + 3 * 1 * 2.0);
  EXPECT_TRUE(rows[2].unlabelled);
  EXPECT_EQ(rows[2].jobs, 1u);  // alice's: the user does not split a label's row
  for (const UsageRow& row : rows) {
    EXPECT_EQ(row.user, "");
    EXPECT_EQ(row.queue, "");
    EXPECT_EQ(row.unlabelled, row.label.empty()) << row.label;
  }

  // A selector: the jobs of the lr sweep, by team and by user and queue.
  UsageFilter sweep = by_team;
  sweep.selector = *ParseNodeSelector("sweep=lr");
  rows = ComputeUsage(all, sweep, 14 * hour);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].label, "speech");
  EXPECT_EQ(rows[1].label, "vision");
  EXPECT_EQ(rows[1].jobs, 1u);
  sweep.by_label = "";
  rows = ComputeUsage(all, sweep, 14 * hour);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].user, "unknown");
  EXPECT_EQ(rows[0].jobs, 2u);
  EXPECT_DOUBLE_EQ(rows[0].gpu_hours, 3 * 1 * 1.0 + 3 * 2 * 1.0);
  sweep.selector = *ParseNodeSelector("!team");
  rows = ComputeUsage(all, sweep, 14 * hour);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].user, "alice");
}

TEST(MetricsRendering, CountsJobsByStateAndNodes) {
  auto jobs = std::make_shared<JobViewMap>();
  auto add = [&](JobRecord j, int64_t running_ms) {
    j.first_running_ms = running_ms;
    const std::string name = j.name;
    (*jobs)[name] = std::make_shared<const JobRecord>(std::move(j));
  };
  add(Job("ok1", 1, JobState::SUCCEEDED, 0, 1, 2000, 5000), 2500);
  add(Job("ok2", 2, JobState::SUCCEEDED, 0, 1, 3000, 6000), 3500);
  JobRecord failed = Job("bad", 3, JobState::FAILED, 1, 1, 4000, 7000);
  failed.restarts = 2;
  add(std::move(failed), 0);
  JobRecord running = Job("run", 4, JobState::RUNNING, 1, 1, 5000, 0);
  for (size_t i = 0; i < running.replicas.size(); ++i) {
    running.replicas[i].node_id = "n1";
    running.replicas[i].state = ReplicaState::RUNNING;
    running.replicas[i].gpus = {static_cast<int>(i)};
  }
  add(std::move(running), 6000);
  CoordinatorSnapshot s;
  s.jobs = jobs;
  NodeRecord n1, n2, n3, n4;
  n1.node_id = "n1";
  n1.gpus.resize(4);
  n1.unhealthy_gpus[3] = "a row remapping is pending (it needs a reset)";
  n2.node_id = "n2";
  n2.ready = false;
  n2.gpus.resize(8);
  n2.unhealthy_gpus[0] = "lost with its node: not counted";
  n3.node_id = "n3";  // cordoned: up, but not ready for new replicas
  n3.admin = NodeAdmin::kCordoned;
  n4.node_id = "n4";  // its health check fails: up, takes no new replicas
  n4.unhealthy = "GPU 0: XID 79";
  n4.gpus.resize(2);
  n1.version = n2.version = n3.version = "0.1.0+g298bf5264a1c";  // n4's agent said none
  s.nodes = {n1, n2, n3, n4};
  s.counters.requests[{"client", "SubmitJob"}] = 4;
  s.counters.errors[{"client", "NOT_FOUND"}] = 1;
  s.counters.restarts_by_cause["node_loss"] = 2;
  s.counters.restarts_by_cause["node_health"] = 1;
  s.counters.restarts_by_cause["hang"] = 4;
  s.counters.hangs_by_outcome["restart"] = 4;
  s.counters.hangs_by_outcome["gpu_idle_limit"] = 1;
  s.counters.relaunches = 3;
  s.counters.elastic_shrinks = 2;
  s.counters.elastic_grows = 1;
  s.counters.fence_held = 2;
  s.gpus_held_idle = 2;
  std::string text = CoordinatorHttp::RenderMetrics(s);
  auto has = [&](const std::string& line) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n" << text;
  };
  has("# TYPE cohort_jobs gauge");
  has("cohort_jobs{state=\"SUCCEEDED\",queue=\"default\"} 2");
  has("cohort_jobs{state=\"FAILED\",queue=\"default\"} 1");
  has("cohort_jobs{state=\"QUEUED\",queue=\"default\"} 0");
  has("cohort_jobs_submitted_total{queue=\"default\"} 4");
  has("cohort_jobs_finished_total{state=\"FAILED\",queue=\"default\"} 1");
  has("cohort_job_restarts_total 2");
  has("cohort_restarts_total{cause=\"node_loss\"} 2");
  has("cohort_restarts_total{cause=\"node_health\"} 1");
  has("cohort_restarts_total{cause=\"preemption\"} 0");
  has("cohort_restarts_total{cause=\"hang\"} 4");
  has("# TYPE cohort_hangs_total counter");
  has("cohort_hangs_total{outcome=\"restart\"} 4");
  has("cohort_hangs_total{outcome=\"fail\"} 0");
  has("cohort_hangs_total{outcome=\"gpu_idle_limit\"} 1");
  has("cohort_relaunches_total 3");
  has("cohort_elastic_resizes_total{direction=\"shrink\"} 2");
  has("cohort_elastic_resizes_total{direction=\"grow\"} 1");
  has("# TYPE cohort_replicas_fence_held gauge");
  has("cohort_replicas_fence_held 2");
  has("cohort_queue_wait_seconds_count 4");
  has("cohort_queue_wait_seconds_bucket{le=\"1\"} 4");  // each waited 1 s
  has("cohort_submit_to_running_seconds_count 3");
  has("cohort_nodes{state=\"ready\"} 1");
  has("cohort_nodes{state=\"cordoned\"} 1");
  has("cohort_nodes{state=\"unhealthy\"} 1");
  has("cohort_nodes{state=\"lost\"} 1");
  has("cohort_gpus{state=\"total\"} 6");      // the lost node's GPUs are not counted
  has("cohort_gpus{state=\"allocated\"} 3");  // run's 3 replicas hold one each
  has("cohort_gpus{state=\"held_idle\"} 2");
  has("cohort_gpus{state=\"unhealthy\"} 1");  // n1's GPU 3; the lost node's are not counted
  has("cohort_requests_total{endpoint=\"client\",type=\"SubmitJob\"} 4");
  has("cohort_request_errors_total{endpoint=\"client\",code=\"NOT_FOUND\"} 1");
  // A rolling upgrade's progress: the nodes up by their agents' builds (the lost n2 not counted).
  has("# TYPE cohort_agent_builds gauge");
  has("cohort_agent_builds{version=\"0.1.0+g298bf5264a1c\"} 2");
  has("cohort_agent_builds{version=\"unknown\"} 1");
  has("cohort_coordinator_build_info{version=\"" + std::string(CohortBuildVersion()) + "\"} 1");
}

// /api/queues: the configured queues in their order, each with its config and use as the loop
// listed them and its jobs by state; then a queue only a job names, marked not configured.
TEST(QueuesJson, ConfiguredQueuesFirstThenTheOnesOnlyJobsName) {
  auto jobs = std::make_shared<JobViewMap>();
  auto add = [&](JobRecord j) {
    const std::string name = j.name;
    (*jobs)[name] = std::make_shared<const JobRecord>(std::move(j));
  };
  JobRecord running = Job("nb", 1, JobState::RUNNING, 1, 1, 5000, 0);
  running.spec.scheduling.queue = "notebooks";
  running.replicas[0].node_id = "n1";
  running.replicas[0].state = ReplicaState::RUNNING;
  running.replicas[0].gpus = {0};
  add(std::move(running));
  JobRecord old = Job("old", 2, JobState::SUCCEEDED, 0, 1, 2000, 3000);
  old.spec.scheduling.queue = "retired";
  add(std::move(old));
  add(Job("plain", 3, JobState::QUEUED, 0, 1, 0, 0));
  CoordinatorSnapshot s;
  s.jobs = jobs;
  s.queues = nlohmann::json::array({{{"name", "notebooks"},
                                     {"gpu_quota", 2},
                                     {"weight", 2.0},
                                     {"gpu_idle_limit_ms", 7200000},
                                     {"gpus_used", 1},
                                     {"waiting_jobs", nlohmann::json::array()}},
                                    {{"name", "default"},
                                     {"gpu_quota", 0},
                                     {"weight", 1.0},
                                     {"gpu_idle_limit_ms", 0},
                                     {"gpus_used", 0},
                                     {"waiting_jobs", {"plain"}}}});
  nlohmann::json out = CoordinatorHttp::QueuesJson(s);
  ASSERT_EQ(out.size(), 3u) << out;
  EXPECT_EQ(out[0]["name"], "notebooks");
  EXPECT_EQ(out[0]["configured"], true);
  EXPECT_EQ(out[0]["gpu_idle_limit_ms"], 7200000);
  EXPECT_EQ(out[0]["jobs"]["RUNNING"], 1);
  EXPECT_EQ(out[0]["gpus_allocated"], 1);
  EXPECT_EQ(out[1]["name"], "default");
  EXPECT_EQ(out[1]["jobs"]["QUEUED"], 1);
  EXPECT_EQ(out[1]["waiting_jobs"], nlohmann::json({"plain"}));
  EXPECT_EQ(out[2]["name"], "retired");
  EXPECT_EQ(out[2]["configured"], false);
  EXPECT_EQ(out[2]["jobs"]["SUCCEEDED"], 1);
  EXPECT_FALSE(out[2].contains("gpu_quota")) << out[2];
}

// /api/arrays: each array from the jobs carrying its label, newest first, ACTIVE until every task
// has ended, then its end as the JobController judges it; /api/arrays/NAME adds its tasks by
// index.
TEST(ArraysJson, EachArrayFromItsTasksNewestFirst) {
  JobViewMap jobs;
  auto add_task = [&](const std::string& array, int index, uint64_t seq, JobState state,
                      bool waits_for_slot = false) {
    JobRecord j = Job("x", seq, state, 0, 1, state == JobState::QUEUED ? 0 : 5000 + index,
                      IsFinal(state) ? 9000 + index : 0);
    j.spec.name = array;
    j.spec.scheduling.array.indexes = {0, 1, 2, 3, 5};
    j.spec.scheduling.array.parallelism = 2;
    j.spec.scheduling.queue = "batch";
    j.spec = ArrayTask(j.spec, index);
    j.name = j.spec.name;
    j.waits_for_array_slot = waits_for_slot;
    const std::string name = j.name;
    jobs[name] = std::make_shared<const JobRecord>(std::move(j));
  };
  add_task("sweep", 0, 1, JobState::SUCCEEDED);
  add_task("sweep", 1, 2, JobState::FAILED);
  add_task("sweep", 2, 3, JobState::RUNNING);
  add_task("sweep", 3, 4, JobState::QUEUED);  // placed next
  add_task("sweep", 5, 5, JobState::QUEUED, /*waits_for_slot=*/true);
  add_task("seeds", 0, 6, JobState::SUCCEEDED);
  add_task("seeds", 1, 7, JobState::CANCELLED);
  JobRecord plain = Job("plain", 8, JobState::RUNNING, 0, 1, 5000, 0);
  jobs["plain"] = std::make_shared<const JobRecord>(std::move(plain));

  nlohmann::json all = CoordinatorHttp::ArraysJson(jobs);
  ASSERT_EQ(all.size(), 2u) << all;
  EXPECT_EQ(all[0]["name"], "seeds");  // submitted last
  EXPECT_EQ(all[0]["state"], "CANCELLED");
  EXPECT_EQ(all[0]["end_time_ms"], 9001);
  const nlohmann::json& sweep = all[1];
  EXPECT_EQ(sweep["name"], "sweep");
  EXPECT_EQ(sweep["state"], "ACTIVE");  // a task failed, but two have not ended
  EXPECT_EQ(sweep["tasks"], 5);
  EXPECT_EQ(sweep["ended"], 2);
  EXPECT_EQ(sweep["array"], "0-3,5%2");
  EXPECT_EQ(sweep["parallelism"], 2);
  EXPECT_EQ(sweep["in_flight"], 2);
  EXPECT_EQ(sweep["by_state"],
            nlohmann::json({{"SUCCEEDED", 1}, {"FAILED", 1}, {"RUNNING", 1}, {"QUEUED", 2}}));
  EXPECT_EQ(sweep["queue"], "batch");
  EXPECT_EQ(sweep["owner"], "");
  EXPECT_EQ(sweep["user"], "unknown");  // as the jobs' rows have an owner-less job's
  EXPECT_EQ(sweep["start_time_ms"], 5000);
  EXPECT_EQ(sweep["end_time_ms"], 0);
  EXPECT_FALSE(sweep.contains("task_list")) << sweep;

  std::optional<nlohmann::json> one = CoordinatorHttp::ArrayJson(jobs, "sweep");
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ((*one)["tasks"], 5);
  ASSERT_EQ((*one)["task_list"].size(), 5u) << *one;
  EXPECT_EQ((*one)["task_list"][4]["index"], 5);
  EXPECT_EQ((*one)["task_list"][4]["name"], "sweep-5");
  EXPECT_EQ((*one)["task_list"][1]["state"], "FAILED");
  jobs.erase("sweep-1");  // deleted alone
  one = CoordinatorHttp::ArrayJson(jobs, "sweep");
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ((*one)["array"], "0,2-3,5%2");
  EXPECT_EQ((*one)["tasks"], 4);
  EXPECT_FALSE(CoordinatorHttp::ArrayJson(jobs, "plain").has_value());
  EXPECT_FALSE(CoordinatorHttp::ArrayJson(jobs, "swee").has_value());
}

// A scrape reuses the last one's walk over the jobs while the published jobs map is the same
// object, and walks again as soon as the loop publishes a new one (a job changed); series that do
// not come from the jobs are rendered from each snapshot.
TEST(MetricsRendering, AScrapeWalksTheJobsAgainOnlyWhenTheLoopPublishedNewOnes) {
  auto endpoint = ParseHttpEndpoint("127.0.0.1:0");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  auto http = CoordinatorHttp::Start(*endpoint, "");
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  httplib::Client client((*http)->url());
  auto scrape = [&] {
    auto r = client.Get("/metrics");
    EXPECT_TRUE(r && r->status == 200);
    return r ? r->body : std::string();
  };
  auto publish = [&](std::shared_ptr<const JobViewMap> jobs, uint64_t bad_frames) {
    auto s = std::make_shared<CoordinatorSnapshot>();
    s->jobs = std::move(jobs);
    s->counters.bad_frames = bad_frames;
    (*http)->Publish(std::move(s));
  };
  auto map_of = [](std::vector<JobRecord> records) {
    auto jobs = std::make_shared<JobViewMap>();
    for (JobRecord& j : records) {
      const std::string name = j.name;
      (*jobs)[name] = std::make_shared<const JobRecord>(std::move(j));
    }
    return std::shared_ptr<const JobViewMap>(jobs);
  };
  auto first = map_of({Job("a", 1, JobState::SUCCEEDED, 0, 1, 1000, 2000)});
  publish(first, 1);
  std::string text = scrape();
  EXPECT_NE(text.find("cohort_jobs{state=\"SUCCEEDED\",queue=\"default\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("cohort_bad_frames_total 1\n"), std::string::npos) << text;
  // The same jobs map, newer counters: the counters move, the jobs' series stay.
  publish(first, 5);
  text = scrape();
  EXPECT_NE(text.find("cohort_bad_frames_total 5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("cohort_jobs{state=\"SUCCEEDED\",queue=\"default\"} 1\n"), std::string::npos)
      << text;
  // A new map (a job changed): walked again.
  publish(map_of({Job("a", 1, JobState::SUCCEEDED, 0, 1, 1000, 2000),
                  Job("b", 2, JobState::FAILED, 0, 1, 1000, 2000)}),
          5);
  text = scrape();
  EXPECT_NE(text.find("cohort_jobs{state=\"FAILED\",queue=\"default\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("cohort_jobs_submitted_total{queue=\"default\"} 2\n"), std::string::npos)
      << text;
}

TEST(TrainingMetrics, DeduplicatesAndCopiesOnWrite) {
  TrainingMetrics m;
  TrainingMetric a{"j", "chief-0", 1, 1000, "loss", 0.5};
  EXPECT_TRUE(m.Add(a));
  EXPECT_FALSE(m.Add(a));  // resent
  auto held = m.Series("j");
  ASSERT_TRUE(held);
  TrainingMetric b = a;
  b.step = 2;
  EXPECT_TRUE(m.Add(b));
  EXPECT_EQ(held->size(), 1u);  // a snapshot's series never changes
  EXPECT_EQ(m.Series("j")->size(), 2u);
  EXPECT_EQ(m.Series("other"), nullptr);
}

TEST(TrainingMetrics, StoredOnceAndLoadedBack) {
  fs::path dir =
      fs::temp_directory_path() / ("cohort-training-metrics-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  {
    auto store = OpenStateStore(dir.string(), {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Load().ok());
    StateChanges c;
    c.training_metrics = {{"j", "chief-0", 1, 1000, "loss", 0.25},
                          {"j", "chief-0", 1, 1000, "acc", 0.1},
                          {"j", "chief-0", 2, 2000, "loss", 0.125}};
    ASSERT_TRUE((*store)->Commit(c).ok());
    StateChanges again;
    again.training_metrics = {c.training_metrics[0]};  // resent after a reconnect
    ASSERT_TRUE((*store)->Commit(again).ok());
  }
  auto store = OpenStateStore(dir.string(), {});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto state = (*store)->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->training_metrics.size(), 3u);
  EXPECT_EQ(state->training_metrics[0].tag, "acc");
  EXPECT_EQ(state->training_metrics[1].tag, "loss");
  EXPECT_DOUBLE_EQ(state->training_metrics[1].value, 0.25);
  EXPECT_EQ(state->training_metrics[2].step, 2);
  EXPECT_EQ(state->training_metrics[2].time_ms, 2000);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cohort::coordinator
