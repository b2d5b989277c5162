// LaunchPlan turns the coordinator's records into what an agent is told: the launch of one
// replica's current attempt (command, resources, pinned GPUs, and the whole cluster environment:
// CLUSTER_SPEC, TF_CONFIG, torch's RANK/WORLD_SIZE/MASTER_ADDR/LOCAL_RANK, the AIP_* dirs, the
// reducers' addresses, ...) and the stop of one attempt. Pure functions: no sockets, no state.
#pragma once

#include <functional>
#include <string>

#include "common/schema/cohort_generated.h"
#include "coordinator/state.h"

namespace cohort::coordinator {

// The launch of `r`'s current attempt, placed on r.node_id. `address_of` maps a node id to the
// address replicas reach it at.
wire::LaunchReplicaT PlanLaunch(const JobRecord& job, const ReplicaRecord& r,
                                const std::function<std::string(const std::string&)>& address_of);

// Stop `attempt` of `job`/`replica`: SIGTERM, then SIGKILL after `grace_ms`.
wire::StopReplicaT PlanStop(const std::string& job, const std::string& replica, int attempt,
                            const std::string& reason, int grace_ms);

}  // namespace cohort::coordinator
