#include "common/wire_json.h"

#include <memory>

// nlohmann-json 3.11.3 defines this macro; Debian 12 ships 3.11.2, whose NON_INTRUSIVE macro also
// defines from_json (these views are written, never read back). This is 3.11.3's to_json, for
// nlohmann::json alone.
#ifndef NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE
#define NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(Type, ...)                  \
  inline void to_json(nlohmann::json& nlohmann_json_j, const Type& nlohmann_json_t) { \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(NLOHMANN_JSON_TO, __VA_ARGS__))          \
  }
#endif

namespace nlohmann {

// A table inside another is a unique_ptr in the object API (never null where flatbuffers made
// it: Pack and UnPack both need every element); its JSON is the table's.
template <typename T>
struct adl_serializer<std::unique_ptr<T>> {
  static void to_json(json& j, const std::unique_ptr<T>& table) {
    j = table ? json(*table) : json(nullptr);
  }
};

}  // namespace nlohmann

namespace cohort::wire {

// The JSON of each wire type: each key is the field's name and each value the field's own, but for
// states (their names) and a trial's parameters and final_metric (below). These live in wire's
// own namespace, where argument-dependent lookup finds them (an unnamed one would hide them).
inline void to_json(nlohmann::json& j, JobState state) { j = EnumNameJobState(state); }
inline void to_json(nlohmann::json& j, ReplicaState state) { j = EnumNameReplicaState(state); }
inline void to_json(nlohmann::json& j, DryRunOutcome outcome) {
  j = EnumNameDryRunOutcome(outcome);
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(GpuUsageT, index, utilization, memory_used_bytes,
                                                  memory_total_bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(ReplicaUsageT, cpu_cores, memory_bytes, gpus,
                                                  age_ms, gpus_idle_ms)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(ReplicaInfoT, replica, role, index, pool, node_id,
                                                  gpus, state, attempt, exit_code, signal,
                                                  cause_signal, message, usage)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(JobEventT, time_ms, message)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(JobInfoT, name, state, message, create_time_ms,
                                                  start_time_ms, end_time_ms, restarts,
                                                  max_restarts, restart_rule, output_dir, trial_id,
                                                  study, queue, priority, owner, replicas, events,
                                                  stragglers)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(GpuInfoT, index, model, memory_mb, uuid,
                                                  numa_node)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(UnhealthyGpuT, index, reason)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(NodeUsageT, cpu_cores, memory_bytes, gpus,
                                                  replicas)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(NodeReplicaT, job, replica, state, gpus, cpus,
                                                  memory_mb)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(NodeEventT, seq, time_ms, text)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(NodeInfoT, node_id, address, state, gpus,
                                                  gpus_used, cpus, cpus_used, memory_mb,
                                                  memory_used_mb, replicas, last_heartbeat_ms,
                                                  storage, admin, labels, label_edits, unhealthy,
                                                  usage, unhealthy_gpus, cordoned_gpus, holders,
                                                  version, admin_reason, admin_by, admin_since_ms,
                                                  events, agent_started_ms)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(QueueInfoT, name, gpu_quota, cpu_quota, weight,
                                                  gpus_used, cpus_used, running, waiting,
                                                  waiting_jobs, suspended, gpu_idle_limit_ms,
                                                  cpus_per_gpu, memory_mb_per_gpu)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(MetricPointT, step, time_ms, tag, value, replica)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(JobMetricsT, job, points)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(UsageRowT, user, queue, jobs, failed, gpu_hours,
                                                  cpu_hours)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(PlannedReplicaT, replica, node_id, gpus)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(DryRunPlanT, outcome, replicas, preempts, reason,
                                                  queue, queued_ahead)
// An array's dry run adds its tasks let in at once, and each one's plan.
inline void to_json(nlohmann::json& j, const SubmitJobReplyT& reply) {
  j = {{"name", reply.name},
       {"warnings", reply.warnings},
       {"defaults", reply.defaults},
       {"dry_run", reply.dry_run}};
  if (reply.task_dry_runs.empty()) return;
  nlohmann::json tasks = nlohmann::json::array();
  for (size_t i = 0; i < reply.task_dry_runs.size() && i < reply.tasks.size(); ++i) {
    nlohmann::json task =
        reply.task_dry_runs[i] ? nlohmann::json(*reply.task_dry_runs[i]) : nlohmann::json::object();
    task["name"] = reply.tasks[i];
    tasks.push_back(std::move(task));
  }
  j["tasks"] = std::move(tasks);
}

// parameters: an object {id: value}; final_metric: null until the trial has one.
inline void to_json(nlohmann::json& j, const TrialInfoT& trial) {
  nlohmann::json parameters = nlohmann::json::object();
  for (const auto& kv : trial.parameters) {
    if (kv) parameters[kv->key] = kv->value;
  }
  j = {{"id", trial.id},
       {"parameters", std::move(parameters)},
       {"state", trial.state},
       {"final_metric",
        trial.has_final_metric ? nlohmann::json(trial.final_metric) : nlohmann::json(nullptr)},
       {"job", trial.job},
       {"steps", trial.steps},
       {"message", trial.message}};
}

// by_state: an object {"RUNNING": 2, ...}.
inline void to_json(nlohmann::json& j, const ArrayInfoT& array) {
  nlohmann::json by_state = nlohmann::json::object();
  for (const JobStateCount& c : array.by_state) by_state[EnumNameJobState(c.state())] = c.count();
  j = {{"name", array.name},
       {"state", array.state},
       {"tasks", array.tasks},
       {"ended", array.ended},
       {"array", array.array},
       {"parallelism", array.parallelism},
       {"in_flight", array.in_flight},
       {"by_state", std::move(by_state)},
       {"owner", array.owner},
       {"queue", array.queue},
       {"create_time_ms", array.create_time_ms},
       {"start_time_ms", array.start_time_ms},
       {"end_time_ms", array.end_time_ms}};
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_ONLY_SERIALIZE(StudyInfoT, name, state, metric, goal, algorithm,
                                                  max_trials, parallel_trials, best_trial, owner,
                                                  message, create_time_ms, end_time_ms, trials)

}  // namespace cohort::wire

namespace cohort {

nlohmann::json JobToJson(const wire::JobInfoT& job) {
  nlohmann::json j = job;
  nlohmann::json labels = nlohmann::json::object();  // {key: value}, as a trial's parameters
  for (const auto& kv : job.labels) {
    if (kv) labels[kv->key] = kv->value;
  }
  j["labels"] = std::move(labels);
  return j;
}
nlohmann::json NodeToJson(const wire::NodeInfoT& node) { return node; }
nlohmann::json QueueToJson(const wire::QueueInfoT& queue) { return queue; }
nlohmann::json StudyToJson(const wire::StudyInfoT& study) { return study; }
nlohmann::json ArrayToJson(const wire::ArrayInfoT& array) { return array; }
nlohmann::json JobMetricsToJson(const wire::JobMetricsT& metrics) { return metrics; }
nlohmann::json UsageRowToJson(const wire::UsageRowT& row, bool by_label) {
  nlohmann::json out = row;
  if (by_label) {
    out.erase("user");
    out.erase("queue");
    out["label"] = row.unlabelled ? nlohmann::json(nullptr) : nlohmann::json(row.label);
  }
  return out;
}
nlohmann::json SubmitReplyToJson(const wire::SubmitJobReplyT& reply) { return reply; }
nlohmann::json ReplicaUsageToJson(const wire::ReplicaUsageT* usage) {
  return usage ? nlohmann::json(*usage) : nlohmann::json(nullptr);
}
nlohmann::json NodeUsageToJson(const wire::NodeUsageT* usage) {
  return usage ? nlohmann::json(*usage) : nlohmann::json(nullptr);
}

}  // namespace cohort
