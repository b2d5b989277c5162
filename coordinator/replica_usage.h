// ReplicaUsageTracker keeps what each running replica attempt uses, from what its agent's
// heartbeats carry (wire::ReplicaProgress: its cgroup's CPU time and memory, its GPUs' NVML
// samples: agent/resource_usage.h), for `cohort status` and the API (wire::ReplicaInfo.usage).
//
// CPU cores: the CPU time the attempt's cgroup gained between the oldest and the newest of the
// samples that arrived within the last kCpuWindowMs, per second of the coordinator's time between
// their arrivals (heartbeats come every second, so about ten seconds' average); unknown (-1) until
// two samples kMinCpuSpanMs apart have arrived. A counter that goes back (another cgroup) starts
// the window again. Memory and GPUs: the newest sample's. GPUs idle: since when every sample of
// every one of the attempt's GPUs has said below kIdleUtilization, without a break. A new attempt
// of the replica starts from nothing.
//
// A node's usage (`cohort top --nodes`, `cohort nodes --json`, /api/nodes) is the sum of its
// attempts' (ByNode): what Cohort's replicas there use, not what anything else on the node does.
//
// Usage no heartbeat has renewed for kStaleMs is not shown (its node went silent, the replica
// ended) and Sweep drops it. Nothing is stored: after a coordinator restart it comes back with the
// next heartbeats.
//
// Thread safety: none; the coordinator loop calls it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/schema/cohort_generated.h"
#include "coordinator/state.h"

namespace cohort::coordinator {

class ReplicaUsageTracker {
 public:
  static constexpr int64_t kCpuWindowMs = 10'000;
  static constexpr int64_t kMinCpuSpanMs = 900;
  static constexpr int64_t kStaleMs = 15'000;
  static constexpr double kIdleUtilization = 1.0;  // percent

  // One heartbeat's report of an attempt; -1: not known (no cgroup, no such controller).
  struct Sample {
    double cpu_seconds = -1;
    int64_t memory_bytes = -1;
    std::vector<wire::GpuUsageT> gpus;
  };

  // What a heartbeat's progress of an attempt pinned to GPUs `pinned` says, made sane: a CPU time
  // that is not a finite non-negative number, or a negative memory, is unknown (-1); only the
  // attempt's own GPUs are kept, once each, utilization within [0, 100] (not finite: 0), memory
  // not negative. An agent's report, garbled or hostile, changes no more than that attempt's view.
  static Sample FromProgress(const wire::ReplicaProgress& progress, const std::vector<int>& pinned);
  void Observe(const std::string& job, const std::string& replica, int attempt, Sample sample,
               int64_t now_ms);
  // What the attempt uses now; null when nothing recent is known of it.
  std::unique_ptr<wire::ReplicaUsageT> Of(const std::string& job, const std::string& replica,
                                          int attempt, int64_t now_ms) const;
  // Calls fn(job, replica, attempt, usage) for every attempt Of shows something of now.
  void ForEachShown(
      int64_t now_ms,
      const std::function<void(const std::string& job, const std::string& replica, int attempt,
                               const wire::ReplicaUsageT& usage)>& fn) const;
  // What the attempts shown now use, summed by node (wire::NodeInfo.usage): `node_of(job,
  // replica, attempt)` names the node each runs on, "" when that is not the replica's current
  // placed attempt (left out). CPU and memory: the sums of the known ones (-1: none known); GPUs:
  // every sample, by index. In the same pass, the GPUs held idle (Prometheus'
  // cohort_gpus{state="held_idle"}): those of the attempts whose every GPU has sampled below
  // kIdleUtilization for kHeldIdleMs or more without a break (a minute, as `cohort top` shows
  // "(idle 1m00s)").
  using NodeOf =
      std::function<std::string(const std::string& job, const std::string& replica, int attempt)>;
  static constexpr int64_t kHeldIdleMs = 60'000;
  struct NodeSums {
    std::map<std::string, wire::NodeUsageT> nodes;
    int64_t gpus_held_idle = 0;
  };
  NodeSums ByNode(int64_t now_ms, const NodeOf& node_of) const;
  // The NodeOf of the jobs `find_job` finds (nullptr: gone): a replica's node while `attempt` is
  // its current attempt and it is placed and not final.
  static NodeOf PlacedIn(std::function<const JobRecord*(const std::string&)> find_job);
  // Drops what is stale.
  void Sweep(int64_t now_ms);
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    int attempt = 0;
    std::deque<std::pair<int64_t, double>> cpu;  // (arrival ms, CPU seconds), oldest first
    int64_t memory_bytes = -1;
    std::vector<wire::GpuUsageT> gpus;
    int64_t gpus_idle_since_ms = -1;  // -1: a GPU is busy, or none is sampled
    int64_t last_ms = 0;
  };
  std::map<std::pair<std::string, std::string>, Entry> entries_;  // by (job, replica)
};

}  // namespace cohort::coordinator
