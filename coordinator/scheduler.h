// Scheduler is the coordinator's placement logic: pure data in, placements out, no sockets, no
// clock of its own, so it is unit-tested directly.
//
// Policy (gang scheduling, FIFO with backfill and a starvation limit):
//  - A job is placed only when ALL its replicas fit at once (GPUs, CPUs, memory per node). No
//    partial holds: a job that does not fit takes nothing, so nothing can deadlock.
//  - Jobs are tried in the order given (the coordinator passes them in submit order). A job that
//    does not fit is skipped and later jobs may start (backfill) ...
//  - ... unless the oldest waiting job has waited longer than `starvation_limit_ms`: then no later
//    job starts until that one fits (it is not overtaken forever by small jobs).
//  - Placement prefers packing: all replicas on one node when any node can hold them (best fit:
//    the node with the fewest free GPUs, then CPUs, that fits); otherwise first-fit-decreasing over
//    nodes ordered by free GPUs (largest first), which keeps a job on few nodes. Replicas of one
//    job may share a node. The search is greedy: it may miss a placement an exhaustive search
//    would find, never produces an invalid one.
//  - GPUs are pinned per replica (node-local indices, lowest free first); a GPU is never given to
//    two live replicas.
//  - Ports: each replica gets one port from [port_min, port_max], unique among live replicas on
//    all nodes (all nodes may be one host in a demo); each job also gets a master_port and a
//    bootstrap_port (on the chief's node; also unique cluster-wide).
//  - Within one round, a job whose demand equals one that already failed is skipped without a
//    search (10,000 queued jobs of a few shapes cost a few searches, not 10,000).
//
// Thread safety: none needed; a Scheduler has no mutable state besides its port cursor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cohort::coordinator {

struct ReplicaDemand {
  int gpus = 0;
  int cpus = 1;
  int64_t memory_mb = 0;  // 0: not limited
};

// What is still free on one node this round. The coordinator builds it from node capacity minus
// every live replica.
struct NodeFree {
  std::string node_id;
  std::vector<int> free_gpus;  // node-local indices, ascending
  int free_cpus = 0;
  int64_t free_memory_mb = 0;
  bool memory_unlimited = false;  // the node did not report its memory
};

// Free resources of the whole cluster plus the ports in use; Schedule() consumes from it.
class ClusterView {
 public:
  ClusterView(int port_min, int port_max);
  std::vector<NodeFree> nodes;
  void MarkPortUsed(int port);
  // The next free port at or after the cursor (wrapping), marked used; 0 when none is left.
  int TakePort();
  int ports_free() const { return ports_free_; }

 private:
  int port_min_, port_max_;
  std::vector<bool> used_;
  int ports_free_;
  int cursor_ = 0;
};

struct ReplicaSlot {
  int node = -1;  // index into ClusterView::nodes
  std::vector<int> gpus;
  int port = 0;
};

struct JobRequest {
  std::string name;
  int64_t waiting_since_ms = 0;         // when it (last) entered the queue
  std::vector<ReplicaDemand> replicas;  // in the job's replica order; [0] is the chief
  // When set, used instead of `replicas` (lets the caller keep one demand list per job instead of
  // copying it every round). Must outlive the Schedule() call.
  const std::vector<ReplicaDemand>* shared_replicas = nullptr;
  const std::vector<ReplicaDemand>& demands() const {
    return shared_replicas ? *shared_replicas : replicas;
  }
  bool schedulable = true;  // false: waiting on something else (old attempts ending);
                            // it still counts for the starvation limit
};

struct JobPlacement {
  size_t request = 0;  // index into the request list
  std::vector<ReplicaSlot> replicas;
  int master_port = 0;
  int bootstrap_port = 0;
};

struct ScheduleResult {
  std::vector<JobPlacement> placed;
  // Set when the starvation limit held later jobs back: the name of the job they wait for.
  std::string starving_job;
  size_t searches = 0;  // placement searches actually run (the rest were shape-cache hits)
};

struct SchedulerOptions {
  int64_t starvation_limit_ms = 5 * 60 * 1000;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options) : options_(options) {}

  // One scheduling round over `queue` (in priority order). Placed jobs' resources and ports are
  // taken from `view`.
  ScheduleResult Schedule(const std::vector<JobRequest>& queue, ClusterView& view,
                          int64_t now_ms) const;

  // Places all of `replicas` at once (the gang rule) or nothing; takes from `view` on success.
  // No ports are assigned (callers add them). Used by Schedule() and for replica restarts.
  static std::optional<std::vector<ReplicaSlot>> PlaceGang(
      const std::vector<ReplicaDemand>& replicas, ClusterView& view);
  // Places one replica, on `preferred_node` (an index, or -1) when it fits there; takes from
  // `view` and assigns a port. nullopt when it fits nowhere (or no port is left).
  static std::optional<ReplicaSlot> PlaceOne(const ReplicaDemand& demand, int preferred_node,
                                             ClusterView& view);

 private:
  SchedulerOptions options_;
};

}  // namespace cohort::coordinator
