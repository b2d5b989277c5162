#include "coordinator/snapshot_publisher.h"

#include <utility>
#include <vector>

#include "common/wire_json.h"

namespace cohort::coordinator {

std::shared_ptr<CoordinatorSnapshot> SnapshotPublisher::Build(const JobController& jobs,
                                                              const SnapshotSources& sources,
                                                              int64_t now_ms) {
  if (!Due(now_ms)) return nullptr;
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
      views_[name] = std::make_shared<const JobRecord>(*job);
    }
    changed_.clear();
    all_changed_ = false;
    published_ = std::make_shared<const JobViewMap>(views_);
  }
  snapshot->jobs = published_;
  snapshot->nodes.reserve(sources.nodes.nodes().size());
  for (const auto& [id, node] : sources.nodes.nodes()) snapshot->nodes.push_back(node);
  snapshot->node_events = sources.nodes.events();
  for (const wire::StudyInfoT& study : sources.studies.List()) {
    snapshot->studies.push_back(StudyToJson(study));
  }
  for (const auto& [job, series] : sources.training.all()) snapshot->training[job] = series;
  sources.usage.ForEachShown(now_ms, [&](const std::string& job, const std::string& replica,
                                         int attempt, const wire::ReplicaUsageT& usage) {
    snapshot->usage[job][replica] = {attempt, ReplicaUsageToJson(&usage)};
  });
  ReplicaUsageTracker::NodeSums sums =
      sources.usage.ByNode(now_ms, ReplicaUsageTracker::PlacedIn([&jobs](const std::string& name) {
                             return jobs.FindJob(name);
                           }));
  for (const auto& [node, usage] : sums.nodes) {
    snapshot->node_usage[node] = NodeUsageToJson(&usage);
  }
  snapshot->gpus_held_idle = sums.gpus_held_idle;
  snapshot->counters = sources.counters;
  snapshot->queues = sources.queues;
  return snapshot;
}

}  // namespace cohort::coordinator
