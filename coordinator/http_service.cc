#include "coordinator/http_service.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>

#include "common/build_version.h"
#include "common/job_spec.h"
#include "common/wire_json.h"
#include "coordinator/dashboard_assets.h"
#include "coordinator/job_array.h"
#include "coordinator/job_usage.h"
#include "coordinator/log_store.h"

namespace cohort::coordinator {
namespace {

using json = nlohmann::json;
using Type = PrometheusText::Type;

constexpr const char* kChartJsPath = "/usr/share/javascript/chart.js/chart.min.js";

const JobState kJobStates[] = {JobState::QUEUED,    JobState::PENDING,  JobState::RUNNING,
                               JobState::SUCCEEDED, JobState::FAILED,   JobState::CANCELLING,
                               JobState::CANCELLED, JobState::SUSPENDED};

HttpResponse Json(const json& j, int status = 200) {
  return {status, "application/json", j.dump(-1, ' ', false, json::error_handler_t::replace)};
}

HttpResponse NotFoundJson(const std::string& what) { return Json(json{{"error", what}}, 404); }

// A node's GPUs that its agent finds unfit: [{"index": 3, "reason": "..."}], by index.
json UnhealthyGpusJson(const NodeRecord& n) {
  json out = json::array();
  for (const auto& [index, why] : n.unhealthy_gpus)
    out.push_back({{"index", index}, {"reason", why}});
  return out;
}

json JobSummaryJson(const JobRecord& j) {
  return {{"name", j.name},
          {"state", wire::EnumNameJobState(j.state)},
          {"message", j.ShownMessage()},
          {"queue", JobQueue(j)},
          {"user", JobUser(j)},
          {"create_time_ms", j.create_time_ms},
          {"start_time_ms", j.start_time_ms},
          {"running_time_ms", j.first_running_ms},
          {"end_time_ms", j.end_time_ms},
          {"restarts", j.restarts},
          {"replicas", j.replicas.size()},
          {"gpus", JobGpus(j)},
          {"study", j.study},
          {"trial_id", j.trial_id},
          {"labels", j.spec.labels}};
}

// `usage`: what the job's running replicas use, by replica (CoordinatorSnapshot::usage); null:
// none.
json JobDetailJson(const JobRecord& j, const std::map<std::string, std::pair<int, json>>* usage) {
  json out = JobSummaryJson(j);
  auto usage_of = [&](const ReplicaRecord& r) {
    if (usage == nullptr || r.state != ReplicaState::RUNNING) return json(nullptr);
    auto it = usage->find(r.name);
    return it != usage->end() && it->second.first == r.attempt ? it->second.second : json(nullptr);
  };
  out["max_restarts"] = j.spec.scheduling.max_restarts;
  out["restart_rule"] = j.spec.RestartRule();
  out["output_dir"] = j.output_dir;
  out["spec_yaml"] = j.spec_yaml;
  json replicas = json::array();
  for (const ReplicaRecord& r : j.replicas) {
    replicas.push_back({{"name", r.name},
                        {"state", wire::EnumNameReplicaState(r.state)},
                        {"node", r.node_id.empty() ? r.last_node : r.node_id},
                        {"attempt", r.attempt},
                        {"gpus", r.gpus},
                        {"port", r.port},
                        {"exit_code", r.exit_code},
                        {"signal", r.signal},
                        {"cause_signal", r.cause_signal},
                        {"message", r.message},
                        {"state_time_ms", r.state_time_ms},
                        {"usage", usage_of(r)}});
  }
  out["replica_list"] = std::move(replicas);
  json events = json::array();
  for (const JobEventRecord& e : j.events) {
    events.push_back({{"time_ms", e.time_ms}, {"message", e.message}});
  }
  out["events"] = std::move(events);
  return out;
}

json SeriesJson(const TrainingSeries* series) {
  json points = json::array();
  if (series == nullptr) return points;
  for (const TrainingMetric& m : *series) {
    points.push_back({{"step", m.step},
                      {"time_ms", m.time_ms},
                      {"tag", m.tag},
                      {"value", m.value},
                      {"replica", m.replica}});
  }
  return points;
}

// The tasks of each job array among `jobs`; only those of the array `only` when it is given.
std::map<std::string, std::vector<const JobRecord*>> GroupArrays(
    const JobViewMap& jobs, const std::string* only = nullptr) {
  std::map<std::string, std::vector<const JobRecord*>> arrays;
  for (const auto& [name, v] : jobs) {
    if (!v->spec.IsArrayTask()) continue;
    std::string array = v->spec.ArrayName();
    if (only != nullptr && array != *only) continue;
    arrays[std::move(array)].push_back(v.get());
  }
  return arrays;
}

// An array as `cohort status` has it, with its user as the jobs' rows have theirs.
json ArrayRowJson(const wire::ArrayInfoT& array) {
  json out = ArrayToJson(array);
  out["user"] = UserNamed(array.owner);
  return out;
}

}  // namespace

json CoordinatorHttp::ArraysJson(const JobViewMap& jobs) {
  json out = json::array();
  for (const auto& array : ListArrays(GroupArrays(jobs)).arrays)
    out.push_back(ArrayRowJson(*array));
  return out;
}

std::optional<json> CoordinatorHttp::ArrayJson(const JobViewMap& jobs, const std::string& name) {
  auto arrays = GroupArrays(jobs, &name);
  auto it = arrays.find(name);
  if (it == arrays.end()) return std::nullopt;
  std::vector<const JobRecord*>& tasks = it->second;
  std::sort(tasks.begin(), tasks.end(), [](const JobRecord* a, const JobRecord* b) {
    return *a->spec.scheduling.array.index < *b->spec.scheduling.array.index;
  });
  json out = ArrayRowJson(ArrayInfoOf(name, tasks));
  json list = json::array();
  for (const JobRecord* task : tasks) {
    json row = JobSummaryJson(*task);
    row["index"] = *task->spec.scheduling.array.index;
    list.push_back(std::move(row));
  }
  out["task_list"] = std::move(list);
  return out;
}

StatusOr<std::unique_ptr<CoordinatorHttp>> CoordinatorHttp::Start(const HttpEndpoint& endpoint,
                                                                  const std::string& token) {
  std::unique_ptr<CoordinatorHttp> h(new CoordinatorHttp());
  CoordinatorHttp* self = h.get();
  auto bind = [self](HttpResponse (CoordinatorHttp::*fn)(const HttpRequest&) const) {
    return [self, fn](const HttpRequest& r) { return (self->*fn)(r); };
  };
  std::map<std::string, HttpHandler> routes = {
      {"/metrics", bind(&CoordinatorHttp::Metrics)},
      {"/api/jobs", bind(&CoordinatorHttp::Jobs)},
      {"/api/jobs/*", bind(&CoordinatorHttp::Job)},
      {"/api/nodes", bind(&CoordinatorHttp::Nodes)},
      {"/api/studies", bind(&CoordinatorHttp::Studies)},
      {"/api/studies/*", bind(&CoordinatorHttp::Studies)},
      {"/api/arrays", bind(&CoordinatorHttp::Arrays)},
      {"/api/arrays/*", bind(&CoordinatorHttp::Arrays)},
      {"/api/queues", bind(&CoordinatorHttp::Queues)},
      {"/api/usage", bind(&CoordinatorHttp::Usage)},
      {"/*", bind(&CoordinatorHttp::Static)},
  };
  HttpServerOptions options;
  options.endpoint = endpoint;
  options.token = token;
  options.threads = 8;
  // The dashboard's page, script, style and Chart.js hold no data: a browser loads them before
  // its script can add the token to its API calls.
  options.public_paths = {"/", "/index.html", "/app.js", "/style.css", "/static/chart.js"};
  COHORT_ASSIGN_OR_RETURN(h->server_, HttpServer::Start(options, std::move(routes)));
  return h;
}

void CoordinatorHttp::Publish(std::shared_ptr<const CoordinatorSnapshot> snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_ = std::move(snapshot);
}

std::shared_ptr<const CoordinatorSnapshot> CoordinatorHttp::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

CoordinatorHttp::JobAggregates CoordinatorHttp::AggregateJobs(const JobViewMap& jobs) {
  JobAggregates a;
  for (const auto& [name, v] : jobs) {
    const JobRecord& j = *v;
    ++a.by_queue[JobQueue(j)][j.state];
    a.restarts += j.restarts;
    if (j.start_time_ms > 0) a.queue_wait.Observe((j.start_time_ms - j.create_time_ms) / 1000.0);
    if (j.first_running_ms > 0) {
      a.to_running.Observe((j.first_running_ms - j.create_time_ms) / 1000.0);
    }
    for (const ReplicaRecord& r : j.replicas) {
      if (r.placed() && !IsFinal(r.state)) a.gpus_held += r.gpus.size();
    }
  }
  if (a.by_queue.empty()) a.by_queue["default"];
  return a;
}

std::shared_ptr<const CoordinatorHttp::JobAggregates> CoordinatorHttp::Aggregates(
    const std::shared_ptr<const JobViewMap>& jobs) const {
  {
    std::lock_guard<std::mutex> lock(aggregates_mu_);
    if (aggregated_jobs_ == jobs && aggregates_) return aggregates_;
  }
  auto fresh = std::make_shared<const JobAggregates>(AggregateJobs(*jobs));
  std::lock_guard<std::mutex> lock(aggregates_mu_);
  aggregated_jobs_ = jobs;
  aggregates_ = fresh;
  return fresh;
}

std::string CoordinatorHttp::RenderMetrics(const CoordinatorSnapshot& s,
                                           const JobAggregates& jobs) {
  PrometheusText t;
  // One sample of `family` per key, labelled `label`; 0 for a key `counts` does not have.
  auto by_key = [&t](const char* family, const char* label, std::initializer_list<const char*> keys,
                     const std::map<std::string, uint64_t>& counts) {
    for (const char* key : keys) {
      auto it = counts.find(key);
      t.Sample(family, {{label, key}}, it == counts.end() ? 0 : it->second);
    }
  };
  // ---- jobs, derived from the stored jobs
  const auto& by_queue = jobs.by_queue;
  t.Family("cohort_jobs", Type::kGauge, "Jobs held by the coordinator, by state and queue.");
  for (const auto& [queue, states] : by_queue) {
    for (JobState st : kJobStates) {
      auto it = states.find(st);
      t.Sample("cohort_jobs", {{"state", wire::EnumNameJobState(st)}, {"queue", queue}},
               it == states.end() ? 0 : it->second);
    }
  }
  t.Family("cohort_jobs_submitted_total", Type::kCounter,
           "Jobs submitted, by queue (derived from the state store: monotonic across restarts).");
  for (const auto& [queue, states] : by_queue) {
    uint64_t n = 0;
    for (const auto& [st, c] : states) n += c;
    t.Sample("cohort_jobs_submitted_total", {{"queue", queue}}, n);
  }
  t.Family("cohort_jobs_finished_total", Type::kCounter,
           "Jobs that reached a final state, by state and queue (derived from the state store: "
           "monotonic across restarts).");
  for (const auto& [queue, states] : by_queue) {
    for (JobState st : {JobState::SUCCEEDED, JobState::FAILED, JobState::CANCELLED}) {
      auto it = states.find(st);
      t.Sample("cohort_jobs_finished_total",
               {{"state", wire::EnumNameJobState(st)}, {"queue", queue}},
               it == states.end() ? 0 : it->second);
    }
  }
  t.Family("cohort_job_restarts_total", Type::kCounter,
           "Restarts spent by all jobs (derived from the state store: monotonic across restarts).");
  t.Sample("cohort_job_restarts_total", jobs.restarts);
  t.Family("cohort_restarts_total", Type::kCounter,
           "Restarts by the cause of their incident: preemption, node_loss, node_health (a failure "
           "on a node whose health check fails), exit_code, stopped, hang (the hang watchdog's "
           "verdict), counted since the coordinator started.");
  by_key("cohort_restarts_total", "cause",
         {"preemption", "node_loss", "node_health", "exit_code", "stopped", "hang"},
         s.counters.restarts_by_cause);
  t.Family("cohort_hangs_total", Type::kCounter,
           "Jobs the hang watchdog judged hung, by what became of them: restart (a restart "
           "spent), fail (scheduling.hang_action: fail, or no restart left), gpu_idle_limit "
           "(failed by its queue's gpu-idle-limit: its GPUs sat idle), counted since the "
           "coordinator started.");
  by_key("cohort_hangs_total", "outcome", {"restart", "fail", "gpu_idle_limit"},
         s.counters.hangs_by_outcome);
  t.Family("cohort_relaunches_total", Type::kCounter,
           "Launches sent to a node already silent, gone with it unanswered, and placed again "
           "without spending a restart (counted since the coordinator started).");
  t.Sample("cohort_relaunches_total", s.counters.relaunches);
  t.Family("cohort_elastic_resizes_total", Type::kCounter,
           "Elastic jobs placed with fewer workers than they ask for (shrink), and restarted to "
           "grow into room that came free (grow), counted since the coordinator started.");
  t.Sample("cohort_elastic_resizes_total", {{"direction", "shrink"}}, s.counters.elastic_shrinks);
  t.Sample("cohort_elastic_resizes_total", {{"direction", "grow"}}, s.counters.elastic_grows);
  t.Family("cohort_replicas_fence_held", Type::kGauge,
           "Replicas lost with their node and not placed again until its agent has surely stopped "
           "them (--fence-after).");
  t.Sample("cohort_replicas_fence_held", s.counters.fence_held);
  t.Family("cohort_notices_total", Type::kCounter,
           "Job notices POSTed to --notify-url by what became of each send: delivered, "
           "retried (no reply, 408, 429 or 5xx: sent again later), dropped (refused with another "
           "4xx, unanswered for an hour, or pushed out by 10,000 waiting), counted since the "
           "coordinator started; all 0 without --notify-url.");
  by_key("cohort_notices_total", "result", {"delivered", "retried", "dropped"},
         s.counters.notices_by_result);
  t.Family("cohort_notices_queued", Type::kGauge,
           "Job notices waiting to be delivered to --notify-url.");
  t.Sample("cohort_notices_queued", s.counters.notices_queued);
  t.Family("cohort_queue_wait_seconds", Type::kHistogram,
           "Time from submit to first placement of every job placed (derived from the state "
           "store).");
  t.WriteHistogram("cohort_queue_wait_seconds", {}, jobs.queue_wait);
  t.Family("cohort_submit_to_running_seconds", Type::kHistogram,
           "Time from submit until every replica first ran (derived from the state store).");
  t.WriteHistogram("cohort_submit_to_running_seconds", {}, jobs.to_running);

  // ---- nodes and GPUs
  uint64_t ready = 0, cordoned = 0, lost = 0, draining = 0, unhealthy = 0, gpus_total = 0,
           gpus_unhealthy = 0, gpus_cordoned = 0;
  for (const NodeRecord& n : s.nodes) {
    if (!n.ready) {
      ++lost;
    } else if (n.draining || n.admin == NodeAdmin::kDraining) {
      ++draining;
    } else if (n.admin == NodeAdmin::kCordoned) {
      ++cordoned;  // up, but takes no new replicas
    } else if (!n.unhealthy.empty()) {
      ++unhealthy;  // up, its health check failing: takes no new replicas
    } else {
      ++ready;
    }
    if (n.ready) gpus_total += n.gpus.size();
    if (n.ready) gpus_unhealthy += n.unhealthy_gpus.size();
    if (n.ready) gpus_cordoned += n.cordoned_gpus.size();
  }
  t.Family("cohort_nodes", Type::kGauge,
           "Registered nodes by state (ready, unhealthy: failing its health check, cordoned, "
           "draining, lost).");
  t.Sample("cohort_nodes", {{"state", "ready"}}, ready);
  t.Sample("cohort_nodes", {{"state", "unhealthy"}}, unhealthy);
  t.Sample("cohort_nodes", {{"state", "cordoned"}}, cordoned);
  t.Sample("cohort_nodes", {{"state", "draining"}}, draining);
  t.Sample("cohort_nodes", {{"state", "lost"}}, lost);
  t.Family("cohort_gpus", Type::kGauge,
           "GPUs of the nodes that are not lost (state=total), those held by replicas "
           "(state=allocated), and of those the ones held idle (state=held_idle: every GPU of "
           "the replica sampled below 1% utilization for a minute or more, as its agent's NVML "
           "says; 0 where nodes have no NVML), and those their agents find unfit for work "
           "(state=unhealthy: uncorrectable ECC errors, a row remapping pending or failed, lost "
           "from the bus, an Xid error; nothing new is placed on them), and those an admin "
           "cordoned alone (state=cordoned: cohort cordon NODE --gpu N).");
  t.Sample("cohort_gpus", {{"state", "total"}}, gpus_total);
  t.Sample("cohort_gpus", {{"state", "allocated"}}, jobs.gpus_held);
  t.Sample("cohort_gpus", {{"state", "held_idle"}}, s.gpus_held_idle);
  t.Sample("cohort_gpus", {{"state", "unhealthy"}}, gpus_unhealthy);
  t.Sample("cohort_gpus", {{"state", "cordoned"}}, gpus_cordoned);
  t.Family("cohort_agent_builds", Type::kGauge,
           "Nodes that are not lost by the build their agent runs, as it registered (its "
           "--version: the release and the commit; \"unknown\" for an agent that said none): a "
           "rolling upgrade's progress.");
  std::map<std::string, uint64_t> builds;
  for (const NodeRecord& n : s.nodes) {
    if (n.ready) ++builds[n.version.empty() ? "unknown" : n.version];
  }
  for (const auto& [version, nodes] : builds)
    t.Sample("cohort_agent_builds", {{"version", version}}, nodes);

  // ---- the loop
  t.Family("cohort_schedule_round_seconds", Type::kHistogram,
           "Wall time of each scheduling round (since the coordinator started).");
  t.WriteHistogram("cohort_schedule_round_seconds", {}, s.counters.round_seconds);
  t.Family("cohort_store_commit_seconds", Type::kHistogram,
           "Time of each state store commit that wrote something (since the coordinator "
           "started).");
  t.WriteHistogram("cohort_store_commit_seconds", {}, s.counters.commit_seconds);
  t.Family("cohort_requests_total", Type::kCounter,
           "Requests read, by endpoint (client, agent) and message type (since the coordinator "
           "started).");
  for (const auto& [key, n] : s.counters.requests) {
    t.Sample("cohort_requests_total", {{"endpoint", key.first}, {"type", key.second}}, n);
  }
  t.Family("cohort_request_errors_total", Type::kCounter,
           "Error replies sent, by endpoint and status code (since the coordinator started).");
  for (const auto& [key, n] : s.counters.errors) {
    t.Sample("cohort_request_errors_total", {{"endpoint", key.first}, {"code", key.second}}, n);
  }
  t.Family("cohort_bad_frames_total", Type::kCounter,
           "Frames that did not verify (since the coordinator started).");
  t.Sample("cohort_bad_frames_total", s.counters.bad_frames);
  t.Family("cohort_requests_refused_total", Type::kCounter,
           "Requests refused over --max-requests-per-peer (since the coordinator started).");
  t.Sample("cohort_requests_refused_total", s.counters.refused);
  t.Family("cohort_store_rollbacks_total", Type::kCounter,
           "Loop passes whose commit failed and were rolled back (since the coordinator "
           "started).");
  t.Sample("cohort_store_rollbacks_total", s.counters.rolled_back);
  if (s.counters.backups.enabled) {
    const StateBackupCounters& b = s.counters.backups;
    t.Family("cohort_state_backups_total", Type::kCounter,
             "State backups into --backup-dir by result, ok or failed (since the coordinator "
             "started).");
    t.Sample("cohort_state_backups_total", {{"result", "ok"}}, b.succeeded);
    t.Sample("cohort_state_backups_total", {{"result", "failed"}}, b.failed);
    t.Family("cohort_state_backup_last_success_timestamp_seconds", Type::kGauge,
             "When the newest good state backup began, seconds since the epoch (0: none yet); "
             "alert when it falls behind --backup-every.");
    t.Sample("cohort_state_backup_last_success_timestamp_seconds", b.last_success_ms / 1000.0);
    t.Family("cohort_state_backup_last_size_bytes", Type::kGauge,
             "Size of the newest state backup this coordinator wrote (0: none since it started).");
    t.Sample("cohort_state_backup_last_size_bytes", b.last_bytes);
    t.Family("cohort_state_backup_last_duration_seconds", Type::kGauge,
             "How long the newest state backup this coordinator wrote took, copy and checks.");
    t.Sample("cohort_state_backup_last_duration_seconds", b.last_duration_ms / 1000.0);
  }
  t.Family("cohort_coordinator_build_info", Type::kGauge,
           "Always 1, labelled with the build this coordinator runs (its --version: the release "
           "and the commit it was built from).");
  t.Sample("cohort_coordinator_build_info", {{"version", std::string(CohortBuildVersion())}}, 1);
  t.Family("cohort_coordinator_start_time_seconds", Type::kGauge,
           "When this coordinator process started, seconds since the epoch.");
  t.Sample("cohort_coordinator_start_time_seconds", s.started_ms / 1000.0);
  return t.Take();
}

HttpResponse CoordinatorHttp::Metrics(const HttpRequest&) const {
  auto s = snapshot();
  if (!s) return {503, "text/plain; charset=utf-8", "the coordinator is starting\n"};
  return {200, "text/plain; version=0.0.4; charset=utf-8", RenderMetrics(*s, *Aggregates(s->jobs))};
}

HttpResponse CoordinatorHttp::Jobs(const HttpRequest& r) const {
  auto s = snapshot();
  if (!s) return Json(json::array());
  std::string state = r.Param("state"), queue = r.Param("queue"), user = r.Param("user"),
              prefix = r.Param("name");
  size_t limit = 0;
  try {
    limit = std::stoul(r.Param("limit", "500"));
  } catch (const std::exception&) {
    return Json(json{{"error", "limit: not a number"}}, 400);
  }
  StatusOr<NodeSelector> selector = ParseNodeSelector(r.Param("selector"));
  if (!selector.ok()) return Json(json{{"error", selector.status().message()}}, 400);
  std::vector<const JobRecord*> views;
  views.reserve(s->jobs->size());
  for (const auto& [name, v] : *s->jobs) {
    const JobRecord& j = *v;
    if (!state.empty() && state != wire::EnumNameJobState(j.state)) continue;
    if (!queue.empty() && queue != JobQueue(j)) continue;
    if (!user.empty() && user != JobUser(j)) continue;
    if (!prefix.empty() && j.name.find(prefix) == std::string::npos) continue;
    if (!selector->Matches(j.spec.labels)) continue;
    views.push_back(v.get());
  }
  std::sort(views.begin(), views.end(),
            [](const JobRecord* a, const JobRecord* b) { return a->seq > b->seq; });
  json out = {{"total", views.size()}, {"jobs", json::array()}};
  for (size_t i = 0; i < views.size() && (limit == 0 || i < limit); ++i) {
    out["jobs"].push_back(JobSummaryJson(*views[i]));
  }
  return Json(out);
}

HttpResponse CoordinatorHttp::Job(const HttpRequest& r) const {
  auto s = snapshot();
  if (!s) return NotFoundJson("the coordinator is starting");
  std::string rest = r.path.substr(std::string("/api/jobs/").size());
  std::string name = rest, what;
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    name = rest.substr(0, slash);
    what = rest.substr(slash + 1);
  }
  auto it = s->jobs->find(name);
  if (it == s->jobs->end()) return NotFoundJson("no job named '" + name + "'");
  const JobRecord& job = *it->second;
  if (what.empty()) {
    auto usage = s->usage.find(name);
    return Json(JobDetailJson(job, usage == s->usage.end() ? nullptr : &usage->second));
  }
  if (what == "metrics") {
    auto t = s->training.find(name);
    return Json(json{{"job", name},
                     {"points", SeriesJson(t == s->training.end() ? nullptr : t->second.get())}});
  }
  if (what == "log") {
    std::string replica = r.Param("replica", "chief-0");
    const ReplicaRecord* rec = nullptr;
    for (const ReplicaRecord& x : job.replicas) {
      if (x.name == replica) rec = &x;
    }
    if (rec == nullptr) return NotFoundJson("job '" + name + "' has no replica '" + replica + "'");
    size_t bytes = 16384;
    try {
      bytes = std::min<size_t>(std::stoul(r.Param("bytes", "16384")), 1 << 20);
    } catch (const std::exception&) {
      return Json(json{{"error", "bytes: not a number"}}, 400);
    }
    json out = {{"job", name}, {"replica", replica}, {"attempt", rec->attempt}, {"text", ""}};
    if (!rec->launched) return Json(out);
    std::string path = LogStore(s->state_dir + "/logs").PathOf(name, replica, rec->attempt);
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (in) {
      std::streamoff size = in.tellg();
      std::streamoff from = size > static_cast<std::streamoff>(bytes) ? size - bytes : 0;
      in.seekg(from);
      std::string text(static_cast<size_t>(size - from), '\0');
      in.read(text.data(), static_cast<std::streamsize>(text.size()));
      if (from > 0) {
        size_t nl = text.find('\n');  // start at a whole line
        if (nl != std::string::npos) text.erase(0, nl + 1);
      }
      out["text"] = std::move(text);  // invalid UTF-8 is replaced when dumped
      out["size"] = size;
    }
    return Json(out);
  }
  return NotFoundJson("unknown job resource '" + what + "'");
}

HttpResponse CoordinatorHttp::Nodes(const HttpRequest& r) const {
  StatusOr<NodeSelector> selector = ParseNodeSelector(r.Param("selector"));
  if (!selector.ok()) return Json(json{{"error", selector.status().message()}}, 400);
  const std::string events_of = r.Param("events_of");
  auto s = snapshot();
  json out = json::array();
  if (!s) return Json(out);
  std::map<std::string, std::vector<std::string>> replicas;
  std::map<std::string, std::set<int>> held;  // GPUs held by replicas placed and not final
  std::map<std::pair<std::string, int>, std::vector<std::string>> holders;  // (node, GPU) -> j/r
  for (const auto& [name, v] : *s->jobs) {
    for (const ReplicaRecord& r : v->replicas) {
      if (!r.placed() || IsFinal(r.state)) continue;
      replicas[r.node_id].push_back(name + "/" + r.name);
      held[r.node_id].insert(r.gpus.begin(), r.gpus.end());
      for (int gpu : r.gpus) holders[{r.node_id, gpu}].push_back(name + "/" + r.name);
    }
  }
  for (const NodeRecord& n : s->nodes) {
    if (!selector->Matches(n.labels)) continue;
    out.push_back({{"node_id", n.node_id},
                   {"address", n.address},
                   {"version", n.version},
                   {"agent_started_ms", n.agent_started_ms},
                   {"agent_up_ms", n.agent_started_ms > 0 ? s->now_ms - n.agent_started_ms : 0},
                   {"state", NodeStateName(n, !replicas[n.node_id].empty())},
                   {"admin", NodeAdminLabel(n, !replicas[n.node_id].empty())},
                   {"gpus", n.gpus.size()},
                   {"gpus_allocated", held[n.node_id].size()},
                   {"gpus_used", held[n.node_id]},
                   {"cpus", n.cpus},
                   {"memory_mb", n.memory_mb},
                   {"heartbeat_age_ms", s->now_ms - n.last_heartbeat_ms},
                   {"replicas", replicas[n.node_id]},
                   {"storage", n.storage.verdict},
                   {"labels", n.labels},
                   {"label_edits", FormatNodeLabelEdits(n.label_edits)},
                   {"unhealthy", n.unhealthy},
                   {"unhealthy_gpus", UnhealthyGpusJson(n)},
                   {"cordoned_gpus", n.cordoned_gpus},
                   {"admin_reason", n.cordon_note.reason},
                   {"admin_by", n.cordon_note.by},
                   {"admin_since_ms", n.cordon_note.since_ms}});
    if (n.node_id == events_of) {
      json events = json::array();
      auto it = s->node_events.find(n.node_id);
      if (it != s->node_events.end()) {
        for (const NodeEvent& e : *it->second) {
          events.push_back({{"seq", e.seq}, {"time_ms", e.time_ms}, {"text", e.text}});
        }
      }
      out.back()["events"] = std::move(events);
    }
    // Each GPU as `cohort nodes NODE` shows it: what it is, where it sits, who holds it.
    json gpus = json::array();
    for (const wire::GpuInfoT& g : n.gpus) {
      auto who = holders.find({n.node_id, g.index});
      gpus.push_back({{"index", g.index},
                      {"model", g.model},
                      {"memory_mb", g.memory_mb},
                      {"uuid", g.uuid},
                      {"numa_node", g.numa_node},
                      {"holders", who == holders.end() ? json::array() : json(who->second)}});
    }
    out.back()["gpu_list"] = std::move(gpus);
    auto usage = s->node_usage.find(n.node_id);
    out.back()["usage"] = usage == s->node_usage.end() ? json(nullptr) : usage->second;
  }
  return Json(out);
}

HttpResponse CoordinatorHttp::Studies(const HttpRequest& r) const {
  auto s = snapshot();
  if (!s) return Json(json::array());
  if (r.path == "/api/studies") return Json(s->studies);
  std::string name = r.path.substr(std::string("/api/studies/").size());
  for (const json& study : s->studies) {
    if (study.value("name", "") != name) continue;
    json out = study;
    // Each trial's curves, from its job's training metrics.
    for (json& trial : out["trials"]) {
      auto t = s->training.find(trial.value("job", ""));
      trial["points"] = SeriesJson(t == s->training.end() ? nullptr : t->second.get());
    }
    return Json(out);
  }
  return NotFoundJson("no study named '" + name + "'");
}

HttpResponse CoordinatorHttp::Arrays(const HttpRequest& r) const {
  auto s = snapshot();
  if (r.path == "/api/arrays") {
    if (!s) return Json(json::array());
    const std::string state = r.Param("state"), user = r.Param("user"), queue = r.Param("queue"),
                      contains = r.Param("name");
    json out = json::array();
    for (json& row : ArraysJson(*s->jobs)) {
      if (!state.empty() && row["state"] != state) continue;
      if (!user.empty() && row["user"] != user) continue;
      if (!queue.empty() && row["queue"] != queue) continue;
      if (!contains.empty() && row["name"].get<std::string>().find(contains) == std::string::npos)
        continue;
      out.push_back(std::move(row));
    }
    return Json(out);
  }
  if (!s) return NotFoundJson("the coordinator is starting");
  const std::string name = r.path.substr(std::string("/api/arrays/").size());
  std::optional<json> array = ArrayJson(*s->jobs, name);
  if (!array) return NotFoundJson("no array named '" + name + "'");
  return Json(*array);
}

json CoordinatorHttp::QueuesJson(const CoordinatorSnapshot& s) {
  json out = json::array();
  std::map<std::string, json> queues;
  auto row = [&queues](const std::string& name) -> json& {
    json& q = queues[name];
    if (q.is_null()) {
      q = {{"name", name}, {"configured", false}, {"jobs", json::object()}, {"gpus_allocated", 0}};
      for (JobState st : kJobStates) q["jobs"][wire::EnumNameJobState(st)] = 0;
    }
    return q;
  };
  for (const json& configured : s.queues) {
    json& q = row(configured.value("name", ""));
    q.update(configured);
    q["configured"] = true;
  }
  for (const auto& [name, v] : *s.jobs) {
    json& q = row(JobQueue(*v));
    q["jobs"][wire::EnumNameJobState(v->state)] =
        q["jobs"][wire::EnumNameJobState(v->state)].get<int>() + 1;
    int held = 0;
    for (const ReplicaRecord& r : v->replicas) {
      if (r.placed() && !IsFinal(r.state)) held += static_cast<int>(r.gpus.size());
    }
    q["gpus_allocated"] = q["gpus_allocated"].get<int>() + held;
  }
  // The configured ones in their order, then those only jobs name.
  for (const json& configured : s.queues) {
    auto it = queues.find(configured.value("name", ""));
    out.push_back(std::move(it->second));
    queues.erase(it);
  }
  for (auto& [name, q] : queues) out.push_back(std::move(q));
  return out;
}

HttpResponse CoordinatorHttp::Queues(const HttpRequest&) const {
  auto s = snapshot();
  return Json(s ? QueuesJson(*s) : json::array());
}

HttpResponse CoordinatorHttp::Usage(const HttpRequest& r) const {
  auto s = snapshot();
  if (!s) return Json(json{{"since_ms", 0}, {"rows", json::array()}});
  UsageFilter filter;
  filter.user = r.Param("user");
  filter.queue = r.Param("queue");
  if (const std::string since = r.Param("since"); !since.empty()) {
    StatusOr<std::chrono::milliseconds> ago = ParseDuration(since);
    if (!ago.ok() || ago->count() <= 0) {
      return Json(json{{"error", "since: '" + since + "' is not a duration ago (24h, 7d, 30d)"}},
                  400);
    }
    filter.since_ms = s->now_ms - ago->count();
  }
  StatusOr<NodeSelector> selector = ParseNodeSelector(r.Param("selector"));
  if (!selector.ok()) return Json(json{{"error", "selector: " + selector.status().message()}}, 400);
  filter.selector = *std::move(selector);
  filter.by_label = r.Param("by_label");
  if (!filter.by_label.empty()) {
    if (Status bad = CheckNodeLabel(filter.by_label, ""); !bad.ok()) {
      return Json(json{{"error", "by_label: " + bad.message()}}, 400);
    }
  }
  std::vector<const JobRecord*> jobs;
  jobs.reserve(s->jobs->size());
  for (const auto& [name, v] : *s->jobs) jobs.push_back(v.get());
  json rows = json::array();
  for (const UsageRow& row : ComputeUsage(jobs, filter, s->now_ms)) {
    rows.push_back(UsageRowToJson(row, !filter.by_label.empty()));
  }
  return Json(json{{"since_ms", filter.since_ms}, {"rows", std::move(rows)}});
}

HttpResponse CoordinatorHttp::Static(const HttpRequest& r) const {
  if (r.path == "/" || r.path == "/index.html") {
    return {200, "text/html; charset=utf-8", std::string(kDashboardHtml)};
  }
  if (r.path == "/app.js")
    return {200, "text/javascript; charset=utf-8", std::string(kDashboardJs)};
  if (r.path == "/style.css") return {200, "text/css; charset=utf-8", std::string(kDashboardCss)};
  if (r.path == "/static/chart.js") {
    std::ifstream in(kChartJsPath, std::ios::binary);
    if (!in) {
      return {404, "text/plain; charset=utf-8",
              std::string(kChartJsPath) +
                  " is missing: install Debian's libjs-chart.js for the "
                  "dashboard's charts\n"};
    }
    std::ostringstream body;
    body << in.rdbuf();
    return {200, "text/javascript; charset=utf-8", body.str()};
  }
  return {404, "text/plain; charset=utf-8", "not found: " + r.path + "\n"};
}

}  // namespace cohort::coordinator
