#include "coordinator/training_metrics.h"

namespace cohort::coordinator {

bool TrainingMetrics::Add(const TrainingMetric& m) {
  if (!keys_[m.job].emplace(m.step, m.time_ms, m.tag, m.replica).second) return false;
  std::shared_ptr<TrainingSeries>& s = series_[m.job];
  if (!s) {
    s = std::make_shared<TrainingSeries>();
  } else if (s.use_count() > 1) {
    s = std::make_shared<TrainingSeries>(*s);  // a snapshot holds the old one
  }
  s->push_back(m);
  ++points_;
  return true;
}

std::shared_ptr<const TrainingSeries> TrainingMetrics::Series(const std::string& job) const {
  auto it = series_.find(job);
  return it == series_.end() ? nullptr : it->second;
}

void TrainingMetrics::Remove(const std::string& job) {
  auto it = series_.find(job);
  if (it == series_.end()) return;
  points_ -= it->second->size();
  series_.erase(it);
  keys_.erase(job);
}

}  // namespace cohort::coordinator
