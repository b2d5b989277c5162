#include "coordinator/replica_usage.h"

namespace cohort::coordinator {

void ReplicaUsageTracker::Observe(const std::string& job, const std::string& replica, int attempt,
                                  Sample sample, int64_t now_ms) {
  Entry& e = entries_[{job, replica}];
  if (e.attempt != attempt) {
    e = Entry();
    e.attempt = attempt;
  }
  e.last_ms = now_ms;
  e.memory_bytes = sample.memory_bytes;
  e.gpus = std::move(sample.gpus);
  if (sample.cpu_seconds < 0 || (!e.cpu.empty() && sample.cpu_seconds < e.cpu.back().second)) {
    e.cpu.clear();
  }
  if (sample.cpu_seconds >= 0) e.cpu.emplace_back(now_ms, sample.cpu_seconds);
  // Older samples go but the newest of them, from which the span covers the whole window.
  while (e.cpu.size() > 2 && e.cpu[1].first <= now_ms - kCpuWindowMs) e.cpu.pop_front();
}

std::unique_ptr<wire::ReplicaUsageT> ReplicaUsageTracker::Of(const std::string& job,
                                                             const std::string& replica,
                                                             int attempt, int64_t now_ms) const {
  auto it = entries_.find({job, replica});
  if (it == entries_.end() || it->second.attempt != attempt ||
      now_ms - it->second.last_ms > kStaleMs) {
    return nullptr;
  }
  const Entry& e = it->second;
  auto usage = std::make_unique<wire::ReplicaUsageT>();
  if (e.cpu.size() >= 2) {
    const int64_t span_ms = e.cpu.back().first - e.cpu.front().first;
    if (span_ms >= kMinCpuSpanMs) {
      usage->cpu_cores = (e.cpu.back().second - e.cpu.front().second) * 1000.0 / span_ms;
    }
  }
  usage->memory_bytes = e.memory_bytes;
  for (const wire::GpuUsageT& g : e.gpus)
    usage->gpus.push_back(std::make_unique<wire::GpuUsageT>(g));
  usage->age_ms = now_ms - e.last_ms;
  return usage;
}

void ReplicaUsageTracker::ForEachShown(
    int64_t now_ms, const std::function<void(const std::string&, const std::string&, int,
                                             const wire::ReplicaUsageT&)>& fn) const {
  for (const auto& [key, e] : entries_) {
    if (auto usage = Of(key.first, key.second, e.attempt, now_ms)) {
      fn(key.first, key.second, e.attempt, *usage);
    }
  }
}

void ReplicaUsageTracker::Sweep(int64_t now_ms) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = now_ms - it->second.last_ms > kStaleMs ? entries_.erase(it) : std::next(it);
  }
}

}  // namespace cohort::coordinator
