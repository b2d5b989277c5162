// Nvml is one session of NVML, the NVIDIA driver's management library (libnvidia-ml.so.1), loaded
// at run time so that the agent builds and runs on nodes without the driver; and the few of its
// calls the agent makes: each GPU's identity (the inventory), its utilization and memory (the
// resource samples), where it sits (its NUMA node and the CPUs near it) and its health.
//
// Health (Nvml::Problem) is what takes a GPU out of service until it is reset or replaced, as
// DCGM's health checks and NVIDIA's Kubernetes device plugin judge it:
//  - NVML cannot read it: lost from the bus (NVML_ERROR_GPU_IS_LOST, Xid 79), or another error;
//  - uncorrectable ECC errors since the driver loaded (the volatile count), which also end the
//    processes that met them;
//  - a row remapping that failed (the GPU must be replaced) or is pending (it must be reset), on
//    GPUs that remap rows (A100 and later); retired pages pending a reset, on those before;
//  - MIG mode on (A100 and later) where the agent offers whole GPUs (agent/inventory.h's
//    OffersMigDevices: not every GPU of the node is partitioned alike): CUDA runs a process on one
//    MIG device, named by its own UUID (given the GPU's index, the first of that GPU), so the
//    replicas pinned there by index would share one slice and leave the rest idle. Where the
//    agent offers the MIG devices instead, MIG mode is no problem (Problem's `mig_offered`).
// A check the GPU does not support (NVML_ERROR_NOT_SUPPORTED: ECC off, a GPU without row
// remapping) says nothing; nor does a function an older driver lacks.
//
// Xid events (WatchXids, NextXid) are the driver's error reports as they happen (NVIDIA's "Xid
// Errors" catalogue: 48 a double-bit ECC error, 79 fallen off the bus, 119 a GSP timeout, ...),
// also those no counter keeps (an NVLink error, a GSP that stopped answering). Which of them take
// a GPU out of service is the caller's policy (XidTakesGpuOutOfService).
//
// Thread safety: one Nvml is used by one thread at a time; several may exist at once (NVML counts
// its initialisations). A call may block for seconds on a failing GPU: callers keep it off any
// loop that must answer (agent/resource_usage.h's GpuSampler).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace cohort::agent {

inline constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";

// The Xids that report an application's own fault, not the GPU's (an illegal address, a page
// fault, a kernel that stopped, the cleanup after them, a video engine exception, a context
// switch timeout), which NVIDIA's Kubernetes device plugin also leaves in service: 13, 31, 43, 45,
// 68, 109.
const std::set<uint64_t>& ApplicationXids();
// Whether Xid `xid` takes its GPU out of service: every critical Xid but the application's own
// and those in `ignored` (the agent's --ignore-xids).
bool XidTakesGpuOutOfService(uint64_t xid, const std::set<uint64_t>& ignored);
// Whether nothing can run on the GPU after Xid `xid` until it is reset, so that what runs there
// is stopped rather than left hanging in the driver: 62 (its micro-controller halted), 79 (fallen
// off the bus), 95 (an uncontained ECC error), 119 and 120 (its GSP stopped answering).
bool XidStopsTheGpu(uint64_t xid);
// What NVIDIA's catalogue calls Xid `xid` ("GPU has fallen off the bus"); "" for one not named
// here.
std::string XidName(uint64_t xid);

class Nvml {
 public:
  struct Functions;

  // Loads `library` (a name the dynamic loader looks up, or a path) and initialises NVML.
  // kNotFound when the library cannot be loaded (no driver); kUnavailable when it lacks a
  // function every NVML has, or nvmlInit_v2 fails (both saying so).
  static StatusOr<std::unique_ptr<Nvml>> Open(const std::string& library = kNvmlLibrary);
  ~Nvml();  // nvmlShutdown, then the library is unloaded
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  StatusOr<unsigned> DeviceCount();

  struct Identity {
    std::string model;  // "NVIDIA H100 80GB HBM3"; "" when NVML does not say
    int64_t memory_mb = 0;
    std::string uuid;
    // Where it sits: the NUMA node nearest its PCI slot (nvmlDeviceGetMemoryAffinity, the lowest
    // node where it names several) and the CPUs of that node (nvmlDeviceGetCpuAffinity: NVML's
    // "ideal CPU affinity"), ascending. -1 and none where NVML does not say (one NUMA node
    // without NUMA in the kernel, a driver without these functions).
    int numa_node = -1;
    std::vector<int> near_cpus;
  };
  StatusOr<Identity> Identify(unsigned index);

  // A MIG device: a slice of a GPU in MIG mode (a GPU instance and a compute instance of it),
  // which CUDA runs a process on when CUDA_VISIBLE_DEVICES names its UUID.
  struct MigDevice {
    unsigned slot = 0;  // its index on its GPU (nvmlDeviceGetMigDeviceHandleByIndex)
    std::string uuid;   // "MIG-..."
    std::string name;   // "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
    int64_t memory_mb = 0;
    int gpu_instance = -1;  // -1: NVML does not say
    int compute_instance = -1;
  };
  struct Mig {
    bool on = false;  // its current MIG mode
    std::vector<MigDevice> devices;
  };
  // GPU `index`'s MIG mode and MIG devices, by slot: off and none where MIG is unsupported or
  // the driver lacks the MIG functions; on and none where no GPU instance is made yet.
  Mig ReadMig(unsigned index);

  struct Use {
    double utilization = 0;  // percent, over NVML's last sample period
    double memory_used_bytes = 0;
    double memory_total_bytes = 0;
    std::string uuid;
  };
  StatusOr<Use> ReadUse(unsigned index);

  // Why GPU `index` is unfit for work ("2 uncorrectable ECC errors since the driver loaded (it
  // needs a reset)"); "" when it is fit, as far as NVML tells. `mig_offered`: the agent offers
  // MIG devices, so MIG mode on is no problem (the GPU's other problems are its MIG devices').
  std::string Problem(unsigned index, bool mig_offered = false);

  struct XidEvent {
    int gpu = -1;      // its index; -1 when NVML did not say which GPU
    uint64_t xid = 0;  // 999: one the driver does not know
  };
  // Asks for the critical Xid events of every GPU NVML can reach that reports them. kUnavailable
  // saying why when none can be watched (a driver without events, no such GPU).
  Status WatchXids();
  // The next critical Xid, waiting up to `timeout`; nullopt when none came. kUnavailable when NVML
  // fails (the watch is then over: open NVML again). Only after WatchXids succeeded.
  StatusOr<std::optional<XidEvent>> NextXid(std::chrono::milliseconds timeout);

 private:
  Nvml(void* library, std::unique_ptr<Functions> fn);
  // "GPU is lost (NVML error 15)": NVML's own words for `rc` where the library has them.
  std::string ErrorText(int rc) const;

  void* library_;
  std::unique_ptr<Functions> fn_;
  void* event_set_ = nullptr;   // WatchXids' nvmlEventSet_t
  std::vector<void*> watched_;  // device handles by GPU index (null: not watched)
};

}  // namespace cohort::agent
