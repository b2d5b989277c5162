// PlacementRound is one scheduling round of the coordinator: it builds the cluster view (what is
// free on every READY, non-draining node once every live replica is counted, and the ports in use
// anywhere) from the NodeRegistry and the JobController, places the replicas of running jobs that
// wait to restart (each on its previous node when it fits), then hands the queued jobs, in submit
// order, to the gang Scheduler and applies its placements through the JobController (which emits
// the launches). No sockets, no clock: `now_ms` comes in, statistics come out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "coordinator/job_controller.h"
#include "coordinator/node_registry.h"
#include "coordinator/scheduler.h"

namespace cohort::coordinator {

struct PlacementRoundStats {
  int64_t wall_us = 0;
  int64_t cpu_us = 0;  // the round's own CPU time (wall time includes preemption by the OS)
  size_t queued = 0;   // queued jobs considered
  size_t nodes = 0;    // nodes that could take work
};

// Free resources and ports in use, over every READY node (draining ones take nothing new).
// `node_index` maps node ids to indices of view.nodes.
ClusterView BuildClusterView(const NodeRegistry& nodes, JobController& jobs, int port_min,
                             int port_max, std::map<std::string, int>* node_index);

PlacementRoundStats RunPlacementRound(JobController& jobs, const NodeRegistry& nodes,
                                      const Scheduler& scheduler, int port_min, int port_max,
                                      int64_t now_ms);

}  // namespace cohort::coordinator
