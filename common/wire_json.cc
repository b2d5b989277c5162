#include "common/wire_json.h"

#include <utility>

namespace cohort {

nlohmann::json JobToJson(const wire::JobInfoT& job) {
  nlohmann::json replicas = nlohmann::json::array();
  for (const auto& r : job.replicas) {
    if (!r) continue;
    replicas.push_back({{"replica", r->replica},
                        {"role", r->role},
                        {"index", r->index},
                        {"pool", r->pool},
                        {"node_id", r->node_id},
                        {"gpus", r->gpus},
                        {"state", wire::EnumNameReplicaState(r->state)},
                        {"attempt", r->attempt},
                        {"exit_code", r->exit_code},
                        {"message", r->message}});
  }
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : job.events) {
    if (e) events.push_back({{"time_ms", e->time_ms}, {"message", e->message}});
  }
  return {{"name", job.name},
          {"state", wire::EnumNameJobState(job.state)},
          {"message", job.message},
          {"create_time_ms", job.create_time_ms},
          {"start_time_ms", job.start_time_ms},
          {"end_time_ms", job.end_time_ms},
          {"restarts", job.restarts},
          {"max_restarts", job.max_restarts},
          {"output_dir", job.output_dir},
          {"trial_id", job.trial_id},
          {"study", job.study},
          {"queue", job.queue},
          {"priority", job.priority},
          {"owner", job.owner},
          {"replicas", std::move(replicas)},
          {"events", std::move(events)},
          {"stragglers", job.stragglers}};
}

nlohmann::json NodeToJson(const wire::NodeInfoT& node) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : node.gpus) {
    if (g) {
      gpus.push_back({{"index", g->index},
                      {"model", g->model},
                      {"memory_mb", g->memory_mb},
                      {"uuid", g->uuid}});
    }
  }
  return {{"node_id", node.node_id},
          {"address", node.address},
          {"state", node.state},
          {"gpus", std::move(gpus)},
          {"gpus_used", node.gpus_used},
          {"cpus", node.cpus},
          {"cpus_used", node.cpus_used},
          {"memory_mb", node.memory_mb},
          {"memory_used_mb", node.memory_used_mb},
          {"replicas", node.replicas},
          {"last_heartbeat_ms", node.last_heartbeat_ms},
          {"storage", node.storage},
          {"admin", node.admin}};
}

nlohmann::json QueueToJson(const wire::QueueInfoT& queue) {
  return {{"name", queue.name},
          {"gpu_quota", queue.gpu_quota},
          {"cpu_quota", queue.cpu_quota},
          {"weight", queue.weight},
          {"gpus_used", queue.gpus_used},
          {"cpus_used", queue.cpus_used},
          {"running", queue.running},
          {"waiting", queue.waiting},
          {"waiting_jobs", queue.waiting_jobs}};
}

nlohmann::json StudyToJson(const wire::StudyInfoT& study) {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : study.trials) {
    if (!t) continue;
    nlohmann::json parameters = nlohmann::json::object();
    for (const auto& kv : t->parameters) {
      if (kv) parameters[kv->key] = kv->value;
    }
    trials.push_back({{"id", t->id},
                      {"parameters", std::move(parameters)},
                      {"state", t->state},
                      {"final_metric", t->has_final_metric ? nlohmann::json(t->final_metric)
                                                           : nlohmann::json(nullptr)},
                      {"job", t->job},
                      {"steps", t->steps},
                      {"message", t->message}});
  }
  return {{"name", study.name},
          {"state", study.state},
          {"metric", study.metric},
          {"goal", study.goal},
          {"algorithm", study.algorithm},
          {"max_trials", study.max_trials},
          {"parallel_trials", study.parallel_trials},
          {"best_trial", study.best_trial},
          {"owner", study.owner},
          {"message", study.message},
          {"create_time_ms", study.create_time_ms},
          {"end_time_ms", study.end_time_ms},
          {"trials", std::move(trials)}};
}

nlohmann::json JobMetricsToJson(const wire::JobMetricsT& metrics) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : metrics.points) {
    if (!p) continue;
    points.push_back({{"step", p->step},
                      {"time_ms", p->time_ms},
                      {"tag", p->tag},
                      {"value", p->value},
                      {"replica", p->replica}});
  }
  return {{"job", metrics.job}, {"points", std::move(points)}};
}

nlohmann::json UsageRowToJson(const wire::UsageRowT& row) {
  return {{"user", row.user},     {"queue", row.queue},         {"jobs", row.jobs},
          {"failed", row.failed}, {"gpu_hours", row.gpu_hours}, {"cpu_hours", row.cpu_hours}};
}

}  // namespace cohort
