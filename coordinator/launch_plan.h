// LaunchPlan turns the coordinator's records into what an agent is told: the launch of one
// replica's current attempt (command, resources, pinned GPUs, and the whole cluster environment:
// CLUSTER_SPEC, TF_CONFIG, torch's RANK/WORLD_SIZE/MASTER_ADDR/LOCAL_RANK, the AIP_* dirs, the
// reducers' addresses, ...) and the stop of one attempt. Pure functions: no sockets, no state.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/schema/cohort_generated.h"
#include "coordinator/state.h"

namespace cohort::coordinator {

// Whether node `node_id` offers MIG devices as its GPUs (its agent's GpuInfo UUIDs are "MIG-...":
// agent/inventory.h's OffersMigDevices). CUDA runs a process on one MIG device only, however many
// CUDA_VISIBLE_DEVICES names, so a replica there sees only its own GPUs and is a torchrun node of
// its own (LOCAL_RANK 0, LOCAL_WORLD_SIZE 1, a GROUP_RANK of its own), as each Kubernetes pod on
// a MIG slice is. Empty: no node does.
using MigNodes = std::function<bool(const std::string& node_id)>;

// The GPUs `r`'s process sees (CUDA_VISIBLE_DEVICES, in this order). Its own pinned GPUs, except
// for a training replica (chief, worker) of one GPU whose node runs other one-GPU training
// replicas of the same job: those see all of the job's GPUs on the node in local-rank order, as
// torchrun's workers on a node do, so a stock script's torch.cuda.set_device(LOCAL_RANK) picks the
// replica's own GPU (device LOCAL_RANK is r.gpus[0]). The scheduler still gives each GPU to one
// replica; only what each process can open widens. Never on a node of `mig_nodes`.
std::vector<int> VisibleGpus(const JobRecord& job, const ReplicaRecord& r,
                             const MigNodes& mig_nodes = {});

// The launch of `r`'s current attempt, placed on r.node_id. `address_of` maps a node id to the
// address replicas reach it at.
wire::LaunchReplicaT PlanLaunch(const JobRecord& job, const ReplicaRecord& r,
                                const std::function<std::string(const std::string&)>& address_of,
                                const MigNodes& mig_nodes = {});

// Stop `attempt` of `job`/`replica`: SIGTERM, then SIGKILL after `grace_ms`.
wire::StopReplicaT PlanStop(const std::string& job, const std::string& replica, int attempt,
                            const std::string& reason, int grace_ms);

}  // namespace cohort::coordinator
