#include "coordinator/job_notice.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/config.h"
#include "common/wire_json.h"
#include "coordinator/job_array.h"
#include "coordinator/job_usage.h"

namespace cohort::coordinator {

using nlohmann::json;

namespace {

// Bytes that are not UTF-8 (a replica's output quoted in a message) become U+FFFD, not an error.
std::string Dump(const json& notice) {
  return notice.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The job's time placed, less its time suspended: what `cohort status` calls its run time.
std::string RanFor(const JobRecord& job) {
  if (job.start_time_ms <= 0) return "before it started";
  const int64_t ran = std::max<int64_t>(0, job.end_time_ms - job.start_time_ms - job.suspended_ms);
  return "after " + FormatElapsed(ran);
}

// What every notice of a job says of it: kind, job, user, queue, labels, and its array's or
// study's part.
json JobFields(const char* kind, const JobRecord& job) {
  json labels = json::object();
  for (const auto& [key, value] : job.spec.labels) labels[key] = value;
  json out = {{"kind", kind},
              {"job", job.name},
              {"user", JobUser(job)},
              {"queue", JobQueue(job)},
              {"labels", std::move(labels)}};
  if (job.spec.IsArrayTask()) {
    out["array"] = job.spec.ArrayName();
    out["array_index"] = *job.spec.scheduling.array.index;
  }
  if (!job.study.empty()) {
    out["study"] = job.study;
    out["trial_id"] = job.trial_id;
  }
  return out;
}

// What every notice of an array says of it: kind, `cohort arrays --json`'s fields, user.
json ArrayFields(const char* kind, const wire::ArrayInfoT& info) {
  json out = {{"kind", kind}};
  out.update(ArrayToJson(info));
  out["user"] = UserNamed(info.owner);
  return out;
}

}  // namespace

std::string JobEndedNotice(const JobRecord& job) {
  const std::string state = wire::EnumNameJobState(job.state);
  json out = JobFields("job_ended", job);
  out.update({{"state", state},
              {"message", job.message},
              {"restarts", job.restarts},
              {"create_time_ms", job.create_time_ms},
              {"start_time_ms", job.start_time_ms},
              {"end_time_ms", job.end_time_ms},
              {"output_dir", job.output_dir}});
  std::string text = "job " + job.name + " " + state + " " + RanFor(job);
  if (job.restarts > 0) {
    text += ", " + std::to_string(job.restarts) + (job.restarts == 1 ? " restart" : " restarts");
  }
  if (!job.message.empty()) text += ": " + job.message;
  out["text"] = std::move(text);
  return Dump(out);
}

std::string JobStartedNotice(const JobRecord& job, int64_t now_ms) {
  json out = JobFields("job_started", job);
  const int64_t waited = std::max<int64_t>(0, now_ms - job.create_time_ms);
  out.update({{"create_time_ms", job.create_time_ms},
              {"start_time_ms", job.start_time_ms},
              {"waited_ms", waited}});
  // "running: all 4 replicas running": the first run is the one told.
  const JobEventRecord* running = FirstRunningEvent(job);
  out["text"] = "job " + job.name + " " + (running ? running->message : "running") + ", " +
                FormatElapsed(waited) + " after submit (queue " + JobQueue(job) + ")";
  return Dump(out);
}

std::string JobRestartedNotice(const JobRecord& job, const std::string& event) {
  json out = JobFields("job_restarted", job);
  out.update({{"restarts", job.restarts},
              {"max_restarts", job.spec.scheduling.max_restarts},
              {"event", event}});
  out["text"] = "job " + job.name + " " + event;
  return Dump(out);
}

std::string ArrayStartedNotice(const std::string& name, const std::vector<const JobRecord*>& tasks,
                               const JobRecord& first, int64_t now_ms) {
  const wire::ArrayInfoT info = ArrayInfoOf(name, tasks);
  json out = ArrayFields("array_started", info);
  const int64_t waited = std::max<int64_t>(0, now_ms - first.create_time_ms);
  out["waited_ms"] = waited;
  out["text"] = "array " + name + " started: task " +
                std::to_string(*first.spec.scheduling.array.index) + " runs, " +
                FormatElapsed(waited) + " after submit (" + std::to_string(info.tasks) +
                (info.tasks == 1 ? " task, queue " : " tasks, queue ") + JobQueue(first) + ")";
  return Dump(out);
}

std::string ArrayEndedNotice(const std::string& name, const std::vector<const JobRecord*>& tasks) {
  const wire::ArrayInfoT info = ArrayInfoOf(name, tasks);
  json out = ArrayFields("array_ended", info);
  std::string counts;
  for (const auto& entry : info.by_state) {
    counts += (counts.empty() ? "" : ", ") + std::to_string(entry.count()) + " " +
              wire::EnumNameJobState(entry.state());
  }
  out["text"] = "array " + name + " " + info.state + ": " + counts + " (" +
                std::to_string(info.tasks) + (info.tasks == 1 ? " task)" : " tasks)");
  return Dump(out);
}

std::string NodeEventNotice(const std::string& node_id, const NodeEvent& event) {
  json out = {{"kind", "node_event"}, {"node", node_id},
              {"seq", event.seq},     {"time_ms", event.time_ms},
              {"event", event.text},  {"text", "node " + node_id + " " + event.text}};
  return Dump(out);
}

std::string StudyEndedNotice(const wire::StudyInfoT& study) {
  json out = {{"kind", "study_ended"}};
  out.update(StudyToJson(study));
  for (const char* key : {"trials", "warnings", "spec_yaml"}) out.erase(key);
  out["trials_total"] = study.trials.size();
  out["user"] = UserNamed(study.owner);
  out["best"] = nullptr;
  std::string text = "study " + study.name + " " + study.state + ": " +
                     std::to_string(study.trials.size()) +
                     (study.trials.size() == 1 ? " trial" : " trials");
  for (const auto& trial : study.trials) {
    if (!trial || trial->id != study.best_trial || !trial->has_final_metric) continue;
    json parameters = json::object();
    std::string shown;
    for (const auto& kv : trial->parameters) {
      if (!kv) continue;
      parameters[kv->key] = kv->value;
      shown += (shown.empty() ? "" : ", ") + kv->key + "=" + kv->value;
    }
    out["best"] = {{"id", trial->id},
                   {"parameters", std::move(parameters)},
                   {"final_metric", trial->final_metric}};
    char metric[32];
    std::snprintf(metric, sizeof(metric), "%g", trial->final_metric);
    text += ", best trial " + trial->id + " (" + study.metric + " " + metric +
            (shown.empty() ? "" : " with " + shown) + ")";
  }
  if (study.state != "SUCCEEDED" && !study.message.empty()) text += ": " + study.message;
  out["text"] = std::move(text);
  return Dump(out);
}

}  // namespace cohort::coordinator
