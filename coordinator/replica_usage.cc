#include "coordinator/replica_usage.h"

#include <algorithm>
#include <cmath>

namespace cohort::coordinator {

ReplicaUsageTracker::Sample ReplicaUsageTracker::FromProgress(const wire::ReplicaProgress& progress,
                                                              const std::vector<int>& pinned) {
  Sample sample;
  if (const double cpu = progress.cpu_seconds(); std::isfinite(cpu) && cpu >= 0) {
    sample.cpu_seconds = cpu;
  }
  sample.memory_bytes = std::max<int64_t>(progress.memory_bytes(), -1);
  if (progress.gpus() == nullptr) return sample;
  for (const wire::GpuUsage* g : *progress.gpus()) {
    const bool own = std::find(pinned.begin(), pinned.end(), g->index()) != pinned.end();
    const bool again =
        std::any_of(sample.gpus.begin(), sample.gpus.end(),
                    [&](const wire::GpuUsageT& seen) { return seen.index == g->index(); });
    if (!own || again) continue;
    wire::GpuUsageT gpu;
    gpu.index = g->index();
    gpu.utilization =
        std::isfinite(g->utilization()) ? std::clamp(g->utilization(), 0.0, 100.0) : 0;
    gpu.memory_used_bytes = std::max<int64_t>(g->memory_used_bytes(), 0);
    gpu.memory_total_bytes = std::max<int64_t>(g->memory_total_bytes(), 0);
    sample.gpus.push_back(gpu);
  }
  return sample;
}

void ReplicaUsageTracker::Observe(const std::string& job, const std::string& replica, int attempt,
                                  Sample sample, int64_t now_ms) {
  Entry& e = entries_[{job, replica}];
  if (e.attempt != attempt) {
    e = Entry();
    e.attempt = attempt;
  }
  e.last_ms = now_ms;
  e.memory_bytes = sample.memory_bytes;
  const bool idle = !sample.gpus.empty() &&
                    std::all_of(sample.gpus.begin(), sample.gpus.end(),
                                [](const auto& g) { return g.utilization < kIdleUtilization; });
  if (!idle) {
    e.gpus_idle_since_ms = -1;
  } else if (e.gpus_idle_since_ms < 0) {
    e.gpus_idle_since_ms = now_ms;
  }
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
  usage->gpus_idle_ms = e.gpus_idle_since_ms < 0 ? 0 : e.last_ms - e.gpus_idle_since_ms;
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

ReplicaUsageTracker::NodeSums ReplicaUsageTracker::ByNode(int64_t now_ms,
                                                          const NodeOf& node_of) const {
  NodeSums sums;
  ForEachShown(now_ms, [&](const std::string& job, const std::string& replica, int attempt,
                           const wire::ReplicaUsageT& usage) {
    const std::string node = node_of(job, replica, attempt);
    if (node.empty()) return;
    wire::NodeUsageT& n = sums.nodes[node];
    ++n.replicas;
    if (usage.cpu_cores >= 0) n.cpu_cores = std::max(n.cpu_cores, 0.0) + usage.cpu_cores;
    if (usage.memory_bytes >= 0) {
      n.memory_bytes = std::max<int64_t>(n.memory_bytes, 0) + usage.memory_bytes;
    }
    for (const auto& gpu : usage.gpus) {
      if (gpu) n.gpus.push_back(std::make_unique<wire::GpuUsageT>(*gpu));
    }
    if (usage.gpus_idle_ms >= kHeldIdleMs) {
      sums.gpus_held_idle += static_cast<int64_t>(usage.gpus.size());
    }
  });
  for (auto& [node, n] : sums.nodes) {
    std::sort(n.gpus.begin(), n.gpus.end(),
              [](const auto& a, const auto& b) { return a->index < b->index; });
  }
  return sums;
}

ReplicaUsageTracker::NodeOf ReplicaUsageTracker::PlacedIn(
    std::function<const JobRecord*(const std::string&)> find_job) {
  return [find_job = std::move(find_job)](const std::string& job, const std::string& replica,
                                          int attempt) -> std::string {
    const JobRecord* record = find_job(job);
    const ReplicaRecord* r = record == nullptr ? nullptr : record->FindReplica(replica);
    if (r == nullptr || r->attempt != attempt || !r->placed() || IsFinal(r->state)) return "";
    return r->node_id;
  };
}

void ReplicaUsageTracker::Sweep(int64_t now_ms) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = now_ms - it->second.last_ms > kStaleMs ? entries_.erase(it) : std::next(it);
  }
}

}  // namespace cohort::coordinator
