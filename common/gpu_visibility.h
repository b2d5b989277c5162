// SetGpuVisibility decides which GPUs a replica's process sees. Every path that starts a replica
// (the coordinator's rendering of the cluster environment, the agent's replica environment, the
// OCI bundle and the docker/podman command line) takes the variables from here, so they agree.
//
//  - CUDA_VISIBLE_DEVICES = the pinned node-local indices, "0,2" ("" without GPUs: CUDA sees none),
//    or the agent's names of them (MIG devices' UUIDs);
//  - NVIDIA_VISIBLE_DEVICES = the same ("void" without GPUs: the NVIDIA container runtime mounts
//    none);
//  - CUDA_DEVICE_ORDER = PCI_BUS_ID with GPUs, so CUDA numbers devices as NVML (the agent's
//    inventory) does; without GPUs it is left as the caller has it.
//
// Other variables in `env` are kept. Thread safety: a pure function.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace cohort {

void SetGpuVisibility(const std::vector<int>& gpus, std::map<std::string, std::string>* env);
// The same with each GPU named as CUDA and the NVIDIA container runtime take it: an index ("2"),
// or a MIG device's UUID ("MIG-..."), which the agent knows and the coordinator does not.
void SetGpuVisibility(const std::vector<std::string>& gpus,
                      std::map<std::string, std::string>* env);

}  // namespace cohort
