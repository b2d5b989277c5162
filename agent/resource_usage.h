// What a replica's processes use, read where the kernel and the driver keep it: its cgroup's CPU
// time, memory and block I/O (ReadCgroupUsage), and each GPU's utilization and memory through
// NVML, loaded at run time (ReadGpuSamples: the agent builds and runs without it).
//
// GpuSampler takes the GPU samples on a thread of its own, every `every`, so that neither the
// agent's loop (heartbeats carry each replica's GPUs: Heartbeat.progress) nor its HTTP threads
// (/metrics) ever wait on NVML, which can block for seconds on a GPU that is failing. Latest() is
// the newest sample, or why there is none ("NVML (libnvidia-ml.so.1) is not installed on this
// node"); before the first one ends it says it is not taken yet.
//
// GPU health (agent/nvml.h, Nvml::Problem) comes with each sample; UnhealthyGpus() is what the
// agent reports to the coordinator, which places nothing new on those GPUs and judges a failure
// of a replica pinned to one as the GPU's fault, not the job's. A failure is judged by a sample
// taken after it: SampleNow() asks for one at once, and Resampling() is true until it has ended
// (at most kResampleWait: a sample that hangs does not hold the verdict forever). A sample under
// way for longer than `hung_after` is itself the symptom (NVML blocks on a GPU that fell off the
// bus): every GPU of the last sample then counts as unhealthy, saying so, until one returns. So
// does every GPU once NVML, having read them, fails (a driver upgraded under the running one).
// Beside the samples a second thread waits for the driver's Xid events (XidWatch): a GPU that
// reports one that takes it out of service (agent/nvml.h, XidTakesGpuOutOfService) is unfit from
// that moment, in every sample, until ForgetXids() (the agent's reload, SIGHUP) or the agent's
// restart: no counter says that a GSP timeout or an NVLink error has been cleared by a reset, so
// the admin who reset the GPU says so, as NVIDIA's device plugin asks a restart of itself.
//
// Thread safety: the functions read files and NVML, from any thread. GpuSampler's methods may be
// called from any thread; its destructor stops its threads and joins them once a call under way
// has returned, or leaves them behind (detached, holding their own state) when that takes longer
// than kStopWait: an agent that exits is not held up by a hung NVML call.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/inventory.h"
#include "common/status.h"

namespace cohort::agent {

// Per-cgroup usage; a field is -1 when its file is absent or unreadable.
struct CgroupUsage {
  double cpu_seconds = -1;     // cpu.stat usage_usec
  double memory_bytes = -1;    // memory.current
  double io_read_bytes = -1;   // io.stat rbytes, summed over devices
  double io_write_bytes = -1;  // io.stat wbytes, summed over devices
};
CgroupUsage ReadCgroupUsage(const std::string& path);

struct GpuSample {
  int index = 0;  // the GPU's, or MIG device's, index as the agent offers it (GpuDevice::index)
  // The NVML index of the GPU it is a slice of (a MIG device), which Xid events name; -1: it is
  // a whole GPU, of NVML index `index`.
  int gpu = -1;
  std::string uuid;
  double utilization = 0;  // percent, over NVML's last sample period
  double memory_used_bytes = 0;
  double memory_total_bytes = 0;
  // Why NVML finds it unfit for work (agent/nvml.h); "" when it is fit.
  std::string problem;
  // False: NVML could not read its use (the fields above are zero; `problem` says why, unless
  // it is a MIG device, whose utilization NVML does not measure).
  bool read = true;
};
using GpuSamples = StatusOr<std::vector<GpuSample>>;

// Every GPU's sample through NVML; kUnavailable saying why when NVML is absent or fails.
// `mig_devices`: the MIG devices the agent offers (its inventory, where OffersMigDevices held at
// its start); each is then sampled with its GPU's problems and no use read (NVML measures no
// utilization of a MIG device), and one its GPU no longer has (partitioned anew) is unfit until
// the agent restarts. Empty: whole GPUs.
GpuSamples ReadGpuSamples(const std::vector<GpuDevice>& mig_devices = {});
// The same through another NVML library (a path, for tests).
GpuSamples ReadGpuSamplesFrom(const std::string& library,
                              const std::vector<GpuDevice>& mig_devices = {});

// Whose Xid events a GpuSampler watches: NVML `library` ("": none), leaving a GPU in service on
// the application's Xids and those in `ignored`.
struct XidWatch {
  std::string library;
  std::set<uint64_t> ignored;
};

class GpuSampler {
 public:
  // `sample` is ReadGpuSamples (of the agent's MIG devices) but in tests (where, if it may
  // outlive the sampler, it holds only what it owns). Without NVML the Xid watch tries again
  // every `every`.
  explicit GpuSampler(
      std::chrono::milliseconds every = std::chrono::seconds(5),
      std::function<GpuSamples()> sample = [] { return ReadGpuSamples(); },
      std::chrono::milliseconds hung_after = std::chrono::seconds(30), XidWatch xids = {});
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  std::shared_ptr<const GpuSamples> Latest() const;

  // Takes a sample at once (after a replica failed). False, asking nothing, when the latest
  // sample is not a reading (no NVML here): there is no verdict to wait for.
  bool SampleNow();
  // A sample SampleNow() asked for has not ended yet, or the Xid watch has not yet seen every
  // event the driver had queued then (a GPU's Xid comes a moment before its process dies of it),
  // and it was asked for under kResampleWait ago.
  bool Resampling() const;
  // GPU index -> why it is unfit for work, from the latest sample (or a hung one, see above).
  std::map<int, std::string> UnhealthyGpus() const;
  // Puts the GPUs that Xids took out of service back (their admin reset them); how many were.
  int ForgetXids();

  // A GPU that reported an Xid after which nothing runs on it (XidStopsTheGpu): what runs there
  // is to be stopped. gpu -1: NVML did not say which (every GPU).
  struct GpuFault {
    int gpu = -1;
    std::string xid;  // "Xid 79 (GPU has fallen off the bus) at 2026-12-02 10:40:01 UTC"
  };
  // The faults since the last call, oldest first.
  std::vector<GpuFault> TakeGpuFaults();
  // How many of each critical Xid each GPU (-1: one NVML did not name) reported since the start,
  // whether or not it took the GPU out of service: (gpu, xid) -> count.
  std::map<std::pair<int, uint64_t>, uint64_t> XidCounts() const;

  static constexpr std::chrono::milliseconds kStopWait{2000};
  static constexpr std::chrono::milliseconds kResampleWait{15000};
  // The longest wait for an Xid event in one NVML call (the watch's stop waits for it).
  static constexpr std::chrono::milliseconds kXidWait{500};

 private:
  struct Shared;
  static void Loop(std::shared_ptr<Shared> s);
  static void WatchXids(std::shared_ptr<Shared> s);
  std::shared_ptr<Shared> shared_;
  std::vector<std::thread> threads_;
};

}  // namespace cohort::agent
