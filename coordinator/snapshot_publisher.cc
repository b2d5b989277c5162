#include "coordinator/snapshot_publisher.h"

#include <utility>
#include <vector>

namespace cohort::coordinator {
namespace {

// A study as /api/studies serves it.
nlohmann::json StudyJson(const wire::StudyInfoT& study) {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : study.trials) {
    if (!t) continue;
    nlohmann::json parameters = nlohmann::json::array();
    for (const auto& kv : t->parameters) {
      if (kv) parameters.push_back({{"key", kv->key}, {"value", kv->value}});
    }
    trials.push_back({{"id", t->id},
                      {"state", t->state},
                      {"parameters", std::move(parameters)},
                      {"final_metric", t->final_metric},
                      {"has_final_metric", t->has_final_metric},
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
          {"message", study.message},
          {"create_time_ms", study.create_time_ms},
          {"end_time_ms", study.end_time_ms},
          {"trials", std::move(trials)}};
}

}  // namespace

std::shared_ptr<CoordinatorSnapshot> SnapshotPublisher::Build(const JobController& jobs,
                                                              const SnapshotSources& sources,
                                                              int64_t now_ms) {
  if (now_ms - last_ms_ < kSnapshotIntervalMs && published_) return nullptr;
  last_ms_ = now_ms;
  auto snapshot = std::make_shared<CoordinatorSnapshot>();
  snapshot->now_ms = now_ms;
  snapshot->started_ms = sources.started_ms;
  snapshot->state_dir = sources.state_dir;
  if (all_changed_ || !changed_.empty() || !published_) {
    if (all_changed_) {
      views_.clear();
      for (const auto& [name, job] : jobs.jobs()) changed_.insert(name);
    }
    for (const std::string& name : changed_) {
      const JobRecord* job = jobs.FindJob(name);
      if (job == nullptr) {
        views_.erase(name);
        continue;
      }
      auto view = std::make_shared<JobView>();
      view->job = *job;
      view->running_time_ms = RunningTimeMs(*job);
      views_[name] = std::move(view);
    }
    changed_.clear();
    all_changed_ = false;
    published_ = std::make_shared<const JobViewMap>(views_);
  }
  snapshot->jobs = published_;
  snapshot->nodes.reserve(sources.nodes.nodes().size());
  for (const auto& [id, node] : sources.nodes.nodes()) snapshot->nodes.push_back(node);
  for (const wire::StudyInfoT& study : sources.studies.List()) {
    snapshot->studies.push_back(StudyJson(study));
  }
  for (const auto& [job, series] : sources.training.all()) snapshot->training[job] = series;
  snapshot->counters = sources.counters;
  return snapshot;
}

}  // namespace cohort::coordinator
