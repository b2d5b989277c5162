// SnapshotPublisher builds the CoordinatorSnapshot (coordinator/http_snapshot.h) the loop hands to
// its HTTP endpoint: at most one every kSnapshotIntervalMs, copying again only the jobs marked
// changed since the last one (every job at first and after MarkAllChanged, e.g. a rollback that
// replaced the JobController). Nodes, studies, training series, replicas' usage and counters are
// taken as they are at publication.
//
// Thread safety: none; the coordinator loop calls it. What Build reads is only read during the
// call.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "coordinator/http_snapshot.h"
#include "coordinator/job_controller.h"
#include "coordinator/node_registry.h"
#include "coordinator/replica_usage.h"
#include "coordinator/study_controller.h"
#include "coordinator/training_metrics.h"

namespace cohort::coordinator {

// What a snapshot is built from, besides the jobs.
struct SnapshotSources {
  const NodeRegistry& nodes;
  const StudyController& studies;
  const TrainingMetrics& training;
  const ReplicaUsageTracker& usage;
  CoordinatorCounters counters;  // as the loop counted them, completed by the caller
  int64_t started_ms = 0;
  std::string state_dir;
  nlohmann::json queues = nlohmann::json::array();  // CoordinatorSnapshot::queues
};

class SnapshotPublisher {
 public:
  void MarkChanged(const std::set<std::string>& jobs) { changed_.insert(jobs.begin(), jobs.end()); }
  void MarkAllChanged() { all_changed_ = true; }

  // Whether Build would build one now: the caller gathers its sources only then.
  bool Due(int64_t now_ms) const { return !published_ || now_ms - last_ms_ >= kSnapshotIntervalMs; }

  // The next snapshot, or null when the last one is younger than kSnapshotIntervalMs.
  std::shared_ptr<CoordinatorSnapshot> Build(const JobController& jobs,
                                             const SnapshotSources& sources, int64_t now_ms);

 private:
  JobViewMap views_;
  std::shared_ptr<const JobViewMap> published_;
  std::set<std::string> changed_;  // jobs changed since the last snapshot
  bool all_changed_ = true;        // every job (at start, after a rollback)
  int64_t last_ms_ = 0;
};

}  // namespace cohort::coordinator
