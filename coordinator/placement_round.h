// PlacementRound is one scheduling round of the coordinator: it builds the cluster view (what is
// free on every schedulable node (READY, not draining, not cordoned by an admin; its unfit GPUs
// left out) once every live replica is counted, and the ports in use in each port space) from the
// NodeRegistry and the JobController, places the replicas of running jobs that wait to restart
// (each on its previous node when it fits), then hands the queued jobs, in submit order, with each
// queue's quota and use and the running jobs that could be preempted, to the gang Scheduler, and
// applies its placements and preemptions through the JobController (which emits the launches and
// stops). No sockets, no clock: `now_ms` comes in, statistics come out. PreviewPlacement runs the
// same round for a job not submitted (a dry run) and applies nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/job_controller.h"
#include "coordinator/node_registry.h"
#include "coordinator/queue_config.h"
#include "coordinator/scheduler.h"

namespace cohort::coordinator {

struct PlacementRoundStats {
  int64_t wall_us = 0;
  int64_t cpu_us = 0;      // the round's own CPU time (wall time includes preemption by the OS)
  size_t queued = 0;       // queued jobs considered
  size_t nodes = 0;        // nodes that could take work
  size_t preemptions = 0;  // jobs that preempted others this round
  // Running jobs offered to the Scheduler as preemption victims: none when no queued job could
  // preempt (one queue, and no queued job of a higher priority than one running).
  size_t candidates = 0;
};

// Where a known node sits in a ClusterView: its index in `nodes` (-1: it takes no work now, so it
// is not there) and its port space.
struct NodePlace {
  int node = -1;
  int port_space = 0;
};
// Node id -> its place, for every node the NodeRegistry knows.
using NodeIndex = std::unordered_map<std::string, NodePlace>;

// Free resources over every schedulable node (NodeRecord::schedulable: draining and cordoned
// ones take nothing new) once every replica that holds resources is counted, and the ports in use
// in each port space (one per NodeRecord::port_domain): what READY nodes listen on, and what live
// replicas and jobs hold (in every space when held on a node not known now).
ClusterView BuildClusterView(const NodeRegistry& nodes, JobController& jobs,
                             const QueueConfig& queues, int port_min, int port_max,
                             NodeIndex* node_index);

// Elastic jobs (coordinator/job_controller.h, "Elastic jobs"). After the Scheduler's placements:
//  - a queued elastic job that was not placed, could have been (not waiting for its old replicas,
//    a fence, the jobs it preempted, or behind a reservation) and has waited `settle_ms` asks
//    for the most workers, at least its min_replicas, that fit what is free now (it is placed
//    by the next round, in its turn);
//  - when no queued job that could be placed waits for room, a running elastic job with idle
//    workers, its chief running for `settle_ms`, grows by as many as fit (restarting whole).
struct ElasticOptions {
  // False while agents may still be registering (a coordinator's first heartbeat timeout): an
  // empty cluster is not a small one.
  bool resize = true;
  int64_t settle_ms = 10'000;
};

PlacementRoundStats RunPlacementRound(JobController& jobs, const NodeRegistry& nodes,
                                      const Scheduler& scheduler, const QueueConfig& queues,
                                      int port_min, int port_max, int64_t now_ms,
                                      const ElasticOptions& elastic = {});

// What the next round would do with a job were it queued now (`cohort submit --dry-run`).
struct PlacementPreview {
  struct Replica {
    std::string name;
    std::string node_id;
    std::vector<int> gpus;
  };
  // START: placed at once, as `replicas` says; PREEMPT: it would stop `victims`, then start once
  // they stopped; WAIT: it waits in its queue for `reason`; WAIT_FOR_JOBS: for the jobs of its
  // scheduling.after (`reason`); HOLD: scheduling.hold (`reason`).
  wire::DryRunOutcome outcome = wire::DryRunOutcome::WAIT;
  std::vector<Replica> replicas;
  std::vector<std::string> victims;  // "NAME (priority P, queue Q)"
  std::string reason;
  std::string queue;        // the queue it would wait in,
  size_t queued_ahead = 0;  // and how many jobs queued there before it (and schedulable)
};

// The round RunPlacementRound would run now, with `drafts` (JobController::Draft of jobs not
// submitted: one job, or the tasks of an array that would be let in at once) queued behind every
// job, in their order, and nothing applied: no job, record or view of the coordinator changes
// (the drafts' queues and priorities are resolved). One preview a draft, in order. Its verdict is
// the round's: a job that waits for nodes, or for a restart to place its replicas first, waits
// here too, and a draft that the drafts before it leave no room for waits.
std::vector<PlacementPreview> PreviewPlacement(JobController& jobs, const NodeRegistry& nodes,
                                               const Scheduler& scheduler,
                                               const QueueConfig& queues, int port_min,
                                               int port_max, std::vector<JobRecord>& drafts,
                                               int64_t now_ms, const ElasticOptions& elastic = {});

// Sets job.queue_index and job.priority from its spec (a queue or class no longer configured:
// the default queue, the normal class).
void ResolveQueue(JobRecord& job, const QueueConfig& queues);

// Each queue's quota, weight and use (every replica holding resources, counted in its job's
// queue), in QueueConfig order. Resolves every active job's queue (ResolveQueue) on the way.
std::vector<QueueState> QueueUsage(JobController& jobs, const QueueConfig& queues);

}  // namespace cohort::coordinator
