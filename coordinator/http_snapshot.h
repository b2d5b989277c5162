// CoordinatorSnapshot is what the coordinator's loop publishes for its HTTP endpoint
// (coordinator/http_service.h): an immutable copy of the jobs, nodes, studies, training metrics
// and counters, so that /metrics, /api/ and the dashboard are served from the HTTP threads
// without touching the loop's state. The loop builds a new snapshot at most every
// kSnapshotIntervalMs (sooner never), sharing what did not change with the previous one: each
// job is one shared immutable copy of its JobRecord, made again only when the job changed; training
// series are shared until they grow.
//
// Counters come in two kinds, as their HELP texts say: those derived from the stored jobs (jobs
// by state, restarts, queue wait and submit-to-running histograms) are monotonic across
// coordinator restarts (unless jobs are deleted); those the loop counts (requests, errors,
// scheduling rounds, commits, restarts by cause) start from zero at each start, which Prometheus'
// rate() and increase() take as a counter reset.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/prometheus_text.h"
#include "coordinator/state.h"
#include "coordinator/state_backups.h"
#include "coordinator/training_metrics.h"

namespace cohort::coordinator {

inline constexpr int64_t kSnapshotIntervalMs = 500;

// What the loop counts itself (see the header comment).
struct CoordinatorCounters {
  std::map<std::pair<std::string, std::string>, uint64_t> requests;  // (endpoint, type)
  std::map<std::pair<std::string, std::string>, uint64_t> errors;    // (endpoint, code)
  // By cause: preemption, node_loss, node_health, exit_code, stopped, hang.
  std::map<std::string, uint64_t> restarts_by_cause;
  // Hang verdicts by outcome: restart, fail, gpu_idle_limit (JobController::hangs_by_outcome).
  std::map<std::string, uint64_t> hangs_by_outcome;
  uint64_t relaunches = 0;  // launches into silence placed again, spending nothing
  // Elastic jobs placed with fewer workers than they ask for, and grown (JobController).
  uint64_t elastic_shrinks = 0;
  uint64_t elastic_grows = 0;
  uint64_t fence_held = 0;  // replicas held for a fence now (a gauge)
  // Job notices (coordinator/notifier.h) by what became of them: delivered, retried (sends
  // that failed, tried again), dropped; and those waiting now (a gauge).
  std::map<std::string, uint64_t> notices_by_result;
  uint64_t notices_queued = 0;
  Histogram round_seconds{DurationBucketsSeconds()};
  Histogram commit_seconds{DurationBucketsSeconds()};
  uint64_t bad_frames = 0;
  uint64_t refused = 0;
  uint64_t rolled_back = 0;
  StateBackupCounters backups;  // --backup-dir (coordinator/state_backups.h)
};

// Every job by name, as one immutable map shared between snapshots until a job changes.
using JobViewMap = std::map<std::string, std::shared_ptr<const JobRecord>>;

struct CoordinatorSnapshot {
  int64_t now_ms = 0;
  int64_t started_ms = 0;
  std::string state_dir;  // logs are read from <state_dir>/logs (LogStore's layout)
  std::shared_ptr<const JobViewMap> jobs;
  std::vector<NodeRecord> nodes;
  // Each node's events (NodeRegistry::events: each list shared with the registry).
  std::map<std::string, NodeEventList> node_events;
  nlohmann::json studies = nlohmann::json::array();  // StudyToJson (common/wire_json.h) each
  // The configured queues as `cohort queues --json` has them (QueueToJson each, in config order):
  // quotas, weight, gpu-idle-limit, use and the jobs waiting.
  nlohmann::json queues = nlohmann::json::array();
  std::map<std::string, std::shared_ptr<const TrainingSeries>> training;
  // What running replicas use (coordinator/replica_usage.h), by job and replica: the attempt it is
  // of, and ReplicaUsageToJson (common/wire_json.h).
  std::map<std::string, std::map<std::string, std::pair<int, nlohmann::json>>> usage;
  // What each node's running replicas use (ReplicaUsageTracker::ByNode), as JSON; nodes none of
  // whose replicas reported are absent.
  std::map<std::string, nlohmann::json> node_usage;
  int64_t gpus_held_idle = 0;  // ReplicaUsageTracker::NodeSums::gpus_held_idle
  CoordinatorCounters counters;
};

}  // namespace cohort::coordinator
