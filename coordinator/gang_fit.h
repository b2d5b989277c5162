// Why a gang does not fit, in words a user can act on. Two questions:
//  - at submit: could the job ever run here? Its replicas are placed, with the scheduler's own
//    search, on every node the coordinator knows (ready or not) as if nothing ran; a job that does
//    not fit even then is refused, naming the pool and the resource ("pool worker needs 64 GPUs
//    per replica; the largest node has 8");
//  - each scheduling round: why does a queued job still wait? Its replicas against what is free
//    after the round ("waiting for room for 2 replicas with 4 GPUs each; 1 fits now").
// Pure functions of their arguments: no sockets, no clock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/status.h"
#include "coordinator/job_controller.h"
#include "coordinator/node_registry.h"
#include "coordinator/scheduler.h"

namespace cohort::coordinator {

// `node`'s whole capacity, free as if nothing ran on it (GPUs ascending): what the submit check
// places on, and what a scheduling round takes the live replicas from.
NodeFree IdleCapacity(const std::string& node_id, const NodeRecord& node);

// The submit check over the cluster as if idle: every known node's IdleCapacity. That view is
// built again only when NodeRegistry::capacity_version() moved, so a submit costs one placement
// search, not a copy of every node (ten thousand of them, thousands of submits a second).
class IdleClusterCheck {
 public:
  // OK when `spec`'s replicas (an elastic job's chief and fewest workers) fit at once on `nodes`
  // were they idle, with a port of [port_min,
  // port_max] each on its host plus two for the job on the chief's; else FAILED_PRECONDITION
  // saying what does not fit. OK when no node is known: the job then waits for nodes.
  Status Check(const JobSpec& spec, const NodeRegistry& nodes, int port_min, int port_max);

 private:
  void Rebuild(const NodeRegistry& nodes, int port_min, int port_max);

  std::optional<uint64_t> version_;  // of the registry `idle_` was built from
  int port_min_ = 0, port_max_ = 0;  // and the port range
  ClusterView idle_{0, 0};
  int most_gpus_ = 0;
  int most_cpus_ = 0;
  int64_t most_memory_ = 0;
  bool memory_unlimited_ = false;
  ReplicaDemand cluster_{0, 0, 0};  // the sum of every node's capacity
};

// Why a gang of `demands` (not placed this round) waits, given `view`, what is free after the
// round: the first kind of replica with too little room, or that the replicas do not fit all
// together, or that ports ran out; with `shared_storage_only`, on the nodes that share the output
// root (or that none does).
std::string WaitingReason(const std::vector<ReplicaDemand>& demands, const ClusterView& view,
                          bool shared_storage_only = false);

// Sets waiting_reason on every queued job of a round that was not placed: `queued[i]` was asked
// as `requests[i]`; `result` is the round's outcome; `view` what is free after it.
void ExplainWaits(const std::vector<JobRecord*>& queued, const std::vector<JobRequest>& requests,
                  const ScheduleResult& result, const ClusterView& view);
// The waiting reason ExplainWaits gives `requests[request]` ("" when it was placed).
std::string ExplainWait(size_t request, const std::vector<JobRequest>& requests,
                        const ScheduleResult& result, const ClusterView& view);

}  // namespace cohort::coordinator
