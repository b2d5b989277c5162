// Training metrics: what any job reports the way trials do (JSON lines in
// $CLOUD_ML_HP_METRIC_FILE, common/hypertune.h; the Python cohort.hypertune reporter), kept per
// job and step. The agent forwards every line as a TrialMeasurement; the coordinator stores one
// row per (job, step, time, tag, replica) in the state store (table job_metrics) in the same
// transaction as the pass that received it, so a measurement is acked only once it is durable, and
// a resent one is stored once. `cohort metrics JOB` and the dashboard's curves read them.
//
// TrainingMetrics is the coordinator's in-memory copy, per job in arrival order, shared with the
// HTTP snapshot: a series is copied on write while a snapshot still holds it.
//
// Thread safety: TrainingMetrics is the loop's; the series it hands to snapshots are immutable.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace cohort::coordinator {

struct TrainingMetric {
  std::string job;
  std::string replica;
  int64_t step = 0;
  int64_t time_ms = 0;  // the reporter's timestamp
  std::string tag;
  double value = 0;
};

using TrainingSeries = std::vector<TrainingMetric>;

class TrainingMetrics {
 public:
  // Adds `m` unless the same (step, time, tag, replica) of its job is held; true when added.
  bool Add(const TrainingMetric& m);
  // The series of `job` (null when it reported nothing). The pointer stays valid and unchanged.
  std::shared_ptr<const TrainingSeries> Series(const std::string& job) const;
  // Forgets every metric of `job` (a deleted job).
  void Remove(const std::string& job);
  const std::map<std::string, std::shared_ptr<TrainingSeries>>& all() const { return series_; }
  size_t size() const { return points_; }

 private:
  std::map<std::string, std::shared_ptr<TrainingSeries>> series_;
  std::map<std::string, std::set<std::tuple<int64_t, int64_t, std::string, std::string>>> keys_;
  size_t points_ = 0;
};

}  // namespace cohort::coordinator
