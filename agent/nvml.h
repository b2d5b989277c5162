// Nvml is one session of NVML, the NVIDIA driver's management library (libnvidia-ml.so.1), loaded
// at run time so that the agent builds and runs on nodes without the driver; and the few of its
// calls the agent makes: each GPU's identity (the inventory), its utilization and memory (the
// resource samples) and its health.
//
// Health (Nvml::Problem) is what takes a GPU out of service until it is reset or replaced, as
// DCGM's health checks and NVIDIA's Kubernetes device plugin judge it:
//  - NVML cannot read it: lost from the bus (NVML_ERROR_GPU_IS_LOST, Xid 79), or another error;
//  - uncorrectable ECC errors since the driver loaded (the volatile count), which also end the
//    processes that met them;
//  - a row remapping that failed (the GPU must be replaced) or is pending (it must be reset), on
//    GPUs that remap rows (A100 and later); retired pages pending a reset, on those before.
// A check the GPU does not support (NVML_ERROR_NOT_SUPPORTED: ECC off, a GPU without row
// remapping) says nothing; nor does a function an older driver lacks.
//
// Thread safety: one Nvml is used by one thread at a time; several may exist at once (NVML counts
// its initialisations). A call may block for seconds on a failing GPU: callers keep it off any
// loop that must answer (agent/resource_usage.h's GpuSampler).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace cohort::agent {

inline constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";

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
  };
  StatusOr<Identity> Identify(unsigned index);

  struct Use {
    double utilization = 0;  // percent, over NVML's last sample period
    double memory_used_bytes = 0;
    double memory_total_bytes = 0;
    std::string uuid;
  };
  StatusOr<Use> ReadUse(unsigned index);

  // Why GPU `index` is unfit for work ("2 uncorrectable ECC errors since the driver loaded (it
  // needs a reset)"); "" when it is fit, as far as NVML tells.
  std::string Problem(unsigned index);

 private:
  Nvml(void* library, std::unique_ptr<Functions> fn);
  // "GPU is lost (NVML error 15)": NVML's own words for `rc` where the library has them.
  std::string ErrorText(int rc) const;

  void* library_;
  std::unique_ptr<Functions> fn_;
};

}  // namespace cohort::agent
