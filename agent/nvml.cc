#include "agent/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <utility>

namespace cohort::agent {
namespace {

// The few NVML declarations the agent needs (nvml.h is not required to build it).
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlUtilization {
  unsigned int gpu, memory;
};
using NvmlEventSet = struct NvmlEventSetOpaque*;
struct NvmlEventData {  // nvmlEventData_t as nvmlEventSetWait_v2 fills it
  NvmlDevice device;
  unsigned long long event_type;
  unsigned long long event_data;  // the Xid, for an Xid event
  unsigned int gpu_instance, compute_instance;
};
constexpr NvmlReturn kSuccess = 0;
constexpr NvmlReturn kTimeout = 10;
constexpr NvmlReturn kGpuIsLost = 15;
constexpr unsigned long long kXidCriticalError = 0x8;  // nvmlEventTypeXidCriticalError
constexpr int kUncorrectedErrors = 1;                  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileCount = 0;                      // NVML_VOLATILE_ECC: since the driver loaded
constexpr int kEnabled = 1;                            // NVML_FEATURE_ENABLED
constexpr unsigned kMigEnabled = 1;                    // NVML_DEVICE_MIG_ENABLE
constexpr int kAffinityScopeNode = 0;                  // NVML_AFFINITY_SCOPE_NODE
// CPUs and NUMA nodes the affinity masks are read for: 64 words of 64 bits.
constexpr unsigned kAffinityWords = 64;
constexpr unsigned kBitsPerWord = 8 * sizeof(unsigned long);

// The bits set in a mask of `words`, ascending.
std::vector<int> MaskBits(const std::vector<unsigned long>& words) {
  std::vector<int> bits;
  for (size_t w = 0; w < words.size(); ++w) {
    for (unsigned b = 0; b < kBitsPerWord; ++b) {
      if ((words[w] >> b) & 1UL) bits.push_back(static_cast<int>(w * kBitsPerWord + b));
    }
  }
  return bits;
}

template <typename Fn>
Fn Symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(library, name));
}

}  // namespace

struct Nvml::Functions {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*count)(unsigned*) = nullptr;
  NvmlReturn (*handle)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  // Optional: an older driver may lack them.
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*ecc_errors)(NvmlDevice, int, int, unsigned long long*) = nullptr;
  NvmlReturn (*remapped_rows)(NvmlDevice, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  NvmlReturn (*retired_pending)(NvmlDevice, int*) = nullptr;
  NvmlReturn (*mig_mode)(NvmlDevice, unsigned*, unsigned*) = nullptr;
  NvmlReturn (*max_mig_devices)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*mig_handle)(NvmlDevice, unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*gpu_instance_id)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*compute_instance_id)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*cpu_affinity)(NvmlDevice, unsigned, unsigned long*) = nullptr;
  NvmlReturn (*memory_affinity)(NvmlDevice, unsigned, unsigned long*, int) = nullptr;
  NvmlReturn (*event_set_create)(NvmlEventSet*) = nullptr;
  NvmlReturn (*event_set_free)(NvmlEventSet) = nullptr;
  NvmlReturn (*supported_events)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*register_events)(NvmlDevice, unsigned long long, NvmlEventSet) = nullptr;
  NvmlReturn (*event_wait)(NvmlEventSet, NvmlEventData*, unsigned) = nullptr;
};

const std::set<uint64_t>& ApplicationXids() {
  static const std::set<uint64_t> xids = {13, 31, 43, 45, 68, 109};
  return xids;
}

bool XidTakesGpuOutOfService(uint64_t xid, const std::set<uint64_t>& ignored) {
  return ApplicationXids().count(xid) == 0 && ignored.count(xid) == 0;
}

bool XidStopsTheGpu(uint64_t xid) {
  return xid == 62 || xid == 79 || xid == 95 || xid == 119 || xid == 120;
}

std::string XidName(uint64_t xid) {
  static const std::map<uint64_t, std::string> names = {
      {13, "graphics engine exception"},
      {31, "GPU memory page fault"},
      {43, "GPU stopped processing"},
      {45, "preemptive cleanup, due to previous errors"},
      {48, "double-bit ECC error"},
      {61, "internal micro-controller breakpoint/warning"},
      {62, "internal micro-controller halt"},
      {63, "ECC page retirement or row remapping recording event"},
      {64, "ECC page retirement or row remapper recording failure"},
      {68, "video processor exception"},
      {74, "NVLink error"},
      {79, "GPU has fallen off the bus"},
      {92, "high single-bit ECC error rate"},
      {94, "contained ECC error"},
      {95, "uncontained ECC error"},
      {109, "context switch timeout"},
      {119, "GSP RPC timeout"},
      {120, "GSP error"},
      {999, "an Xid the driver does not know"},
  };
  const auto it = names.find(xid);
  return it == names.end() ? "" : it->second;
}

StatusOr<std::unique_ptr<Nvml>> Nvml::Open(const std::string& library) {
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return NotFound("cannot load " + library + ": " + (why ? why : "?"));
  }
  auto fn = std::make_unique<Functions>();
  fn->init = Symbol<decltype(fn->init)>(handle, "nvmlInit_v2");
  fn->shutdown = Symbol<decltype(fn->shutdown)>(handle, "nvmlShutdown");
  fn->count = Symbol<decltype(fn->count)>(handle, "nvmlDeviceGetCount_v2");
  fn->handle = Symbol<decltype(fn->handle)>(handle, "nvmlDeviceGetHandleByIndex_v2");
  fn->name = Symbol<decltype(fn->name)>(handle, "nvmlDeviceGetName");
  fn->memory = Symbol<decltype(fn->memory)>(handle, "nvmlDeviceGetMemoryInfo");
  fn->uuid = Symbol<decltype(fn->uuid)>(handle, "nvmlDeviceGetUUID");
  fn->utilization = Symbol<decltype(fn->utilization)>(handle, "nvmlDeviceGetUtilizationRates");
  fn->error_string = Symbol<decltype(fn->error_string)>(handle, "nvmlErrorString");
  fn->ecc_errors = Symbol<decltype(fn->ecc_errors)>(handle, "nvmlDeviceGetTotalEccErrors");
  fn->remapped_rows = Symbol<decltype(fn->remapped_rows)>(handle, "nvmlDeviceGetRemappedRows");
  fn->retired_pending =
      Symbol<decltype(fn->retired_pending)>(handle, "nvmlDeviceGetRetiredPagesPendingStatus");
  fn->mig_mode = Symbol<decltype(fn->mig_mode)>(handle, "nvmlDeviceGetMigMode");
  fn->max_mig_devices =
      Symbol<decltype(fn->max_mig_devices)>(handle, "nvmlDeviceGetMaxMigDeviceCount");
  fn->mig_handle = Symbol<decltype(fn->mig_handle)>(handle, "nvmlDeviceGetMigDeviceHandleByIndex");
  fn->gpu_instance_id = Symbol<decltype(fn->gpu_instance_id)>(handle, "nvmlDeviceGetGpuInstanceId");
  fn->compute_instance_id =
      Symbol<decltype(fn->compute_instance_id)>(handle, "nvmlDeviceGetComputeInstanceId");
  fn->cpu_affinity = Symbol<decltype(fn->cpu_affinity)>(handle, "nvmlDeviceGetCpuAffinity");
  fn->memory_affinity =
      Symbol<decltype(fn->memory_affinity)>(handle, "nvmlDeviceGetMemoryAffinity");
  fn->event_set_create = Symbol<decltype(fn->event_set_create)>(handle, "nvmlEventSetCreate");
  fn->event_set_free = Symbol<decltype(fn->event_set_free)>(handle, "nvmlEventSetFree");
  fn->supported_events =
      Symbol<decltype(fn->supported_events)>(handle, "nvmlDeviceGetSupportedEventTypes");
  fn->register_events = Symbol<decltype(fn->register_events)>(handle, "nvmlDeviceRegisterEvents");
  fn->event_wait = Symbol<decltype(fn->event_wait)>(handle, "nvmlEventSetWait_v2");
  if (!fn->init || !fn->shutdown || !fn->count || !fn->handle || !fn->name || !fn->memory ||
      !fn->uuid || !fn->utilization) {
    ::dlclose(handle);
    return Unavailable(library + " lacks a function every NVML has (nvmlInit_v2, ...)");
  }
  if (NvmlReturn rc = fn->init(); rc != kSuccess) {
    const char* text = fn->error_string ? fn->error_string(rc) : nullptr;
    ::dlclose(handle);
    return Unavailable("nvmlInit_v2 failed: " + std::string(text ? text : "NVML error") + " (" +
                       std::to_string(rc) + ")");
  }
  return std::unique_ptr<Nvml>(new Nvml(handle, std::move(fn)));
}

Nvml::Nvml(void* library, std::unique_ptr<Functions> fn) : library_(library), fn_(std::move(fn)) {}

Nvml::~Nvml() {
  if (event_set_ != nullptr) fn_->event_set_free(static_cast<NvmlEventSet>(event_set_));
  fn_->shutdown();
  ::dlclose(library_);
}

std::string Nvml::ErrorText(int rc) const {
  const char* text = fn_->error_string ? fn_->error_string(rc) : nullptr;
  return std::string(text ? text : "NVML error") + " (NVML error " + std::to_string(rc) + ")";
}

StatusOr<unsigned> Nvml::DeviceCount() {
  unsigned count = 0;
  if (NvmlReturn rc = fn_->count(&count); rc != kSuccess) {
    return Unavailable("nvmlDeviceGetCount_v2 failed: " + ErrorText(rc));
  }
  return count;
}

StatusOr<Nvml::Identity> Nvml::Identify(unsigned index) {
  NvmlDevice device = nullptr;
  if (NvmlReturn rc = fn_->handle(index, &device); rc != kSuccess) {
    return Unavailable("NVML cannot read GPU " + std::to_string(index) + ": " + ErrorText(rc));
  }
  Identity id;
  char text[256] = {0};
  if (fn_->name(device, text, sizeof text - 1) == kSuccess) id.model = text;
  NvmlMemory memory{};
  if (fn_->memory(device, &memory) == kSuccess) {
    id.memory_mb = static_cast<int64_t>(memory.total >> 20);
  }
  char uuid[96] = {0};
  if (fn_->uuid(device, uuid, sizeof uuid - 1) == kSuccess) id.uuid = uuid;
  std::vector<unsigned long> mask(kAffinityWords, 0);
  if (fn_->memory_affinity != nullptr &&
      fn_->memory_affinity(device, kAffinityWords, mask.data(), kAffinityScopeNode) == kSuccess) {
    const std::vector<int> nodes = MaskBits(mask);
    if (!nodes.empty()) id.numa_node = nodes.front();
  }
  std::fill(mask.begin(), mask.end(), 0);
  if (fn_->cpu_affinity != nullptr &&
      fn_->cpu_affinity(device, kAffinityWords, mask.data()) == kSuccess) {
    id.near_cpus = MaskBits(mask);
  }
  return id;
}

Nvml::Mig Nvml::ReadMig(unsigned index) {
  Mig mig;
  NvmlDevice device = nullptr;
  unsigned current = 0, pending = 0;
  if (fn_->mig_mode == nullptr || fn_->handle(index, &device) != kSuccess ||
      fn_->mig_mode(device, &current, &pending) != kSuccess || current != kMigEnabled) {
    return mig;
  }
  mig.on = true;
  unsigned slots = 0;
  if (fn_->max_mig_devices == nullptr || fn_->mig_handle == nullptr ||
      fn_->max_mig_devices(device, &slots) != kSuccess) {
    return mig;
  }
  for (unsigned slot = 0; slot < slots; ++slot) {
    NvmlDevice handle = nullptr;
    if (fn_->mig_handle(device, slot, &handle) != kSuccess) continue;  // an empty slot
    MigDevice d;
    d.slot = slot;
    char text[256] = {0};
    if (fn_->name(handle, text, sizeof text - 1) == kSuccess) d.name = text;
    char uuid[96] = {0};
    if (fn_->uuid(handle, uuid, sizeof uuid - 1) == kSuccess) d.uuid = uuid;
    NvmlMemory memory{};
    if (fn_->memory(handle, &memory) == kSuccess) {
      d.memory_mb = static_cast<int64_t>(memory.total >> 20);
    }
    unsigned id = 0;
    if (fn_->gpu_instance_id != nullptr && fn_->gpu_instance_id(handle, &id) == kSuccess) {
      d.gpu_instance = static_cast<int>(id);
    }
    if (fn_->compute_instance_id != nullptr && fn_->compute_instance_id(handle, &id) == kSuccess) {
      d.compute_instance = static_cast<int>(id);
    }
    mig.devices.push_back(std::move(d));
  }
  return mig;
}

StatusOr<Nvml::Use> Nvml::ReadUse(unsigned index) {
  NvmlDevice device = nullptr;
  NvmlReturn rc = fn_->handle(index, &device);
  NvmlMemory memory{};
  NvmlUtilization util{};
  if (rc == kSuccess) rc = fn_->memory(device, &memory);
  if (rc == kSuccess) rc = fn_->utilization(device, &util);
  if (rc != kSuccess) {
    return Unavailable("NVML cannot read GPU " + std::to_string(index) + ": " + ErrorText(rc));
  }
  Use use;
  use.utilization = util.gpu;
  use.memory_used_bytes = static_cast<double>(memory.used);
  use.memory_total_bytes = static_cast<double>(memory.total);
  char uuid[96] = {0};
  if (fn_->uuid(device, uuid, sizeof uuid - 1) == kSuccess) use.uuid = uuid;
  return use;
}

std::string Nvml::Problem(unsigned index, bool mig_offered) {
  NvmlDevice device = nullptr;
  if (NvmlReturn rc = fn_->handle(index, &device); rc != kSuccess) {
    return "NVML cannot reach it: " + ErrorText(rc);
  }
  std::vector<std::string> problems;
  if (fn_->mig_mode != nullptr && !mig_offered) {
    unsigned current = 0, pending = 0;
    if (fn_->mig_mode(device, &current, &pending) == kSuccess && current == kMigEnabled) {
      problems.push_back(
          "MIG mode is on, and this node's GPUs are not all partitioned alike, so Cohort pins "
          "whole GPUs, not MIG devices (turn MIG off: nvidia-smi -i " +
          std::to_string(index) +
          " -mig 0; or give every GPU of the node MIG devices of one profile)");
    }
  }
  if (fn_->ecc_errors != nullptr) {
    unsigned long long errors = 0;
    const NvmlReturn rc = fn_->ecc_errors(device, kUncorrectedErrors, kVolatileCount, &errors);
    if (rc == kSuccess && errors > 0) {
      problems.push_back(std::to_string(errors) + " uncorrectable ECC error" +
                         (errors == 1 ? "" : "s") + " since the driver loaded (it needs a reset)");
    } else if (rc == kGpuIsLost) {
      return "NVML cannot reach it: " + ErrorText(rc);
    }
  }
  bool remaps_rows = false;
  if (fn_->remapped_rows != nullptr) {
    unsigned corrected = 0, uncorrected = 0, pending = 0, failed = 0;
    const NvmlReturn rc = fn_->remapped_rows(device, &corrected, &uncorrected, &pending, &failed);
    remaps_rows = rc == kSuccess;
    if (remaps_rows && failed != 0) {
      problems.push_back("a row remapping failed (it needs replacing)");
    } else if (remaps_rows && pending != 0) {
      problems.push_back("a row remapping is pending (it needs a reset)");
    }
  }
  if (!remaps_rows && fn_->retired_pending != nullptr) {
    int pending = 0;
    if (fn_->retired_pending(device, &pending) == kSuccess && pending == kEnabled) {
      problems.push_back("retired pages are pending (it needs a reset)");
    }
  }
  std::string text;
  for (const std::string& p : problems) text += (text.empty() ? "" : "; ") + p;
  return text;
}

Status Nvml::WatchXids() {
  if (!fn_->event_set_create || !fn_->event_set_free || !fn_->supported_events ||
      !fn_->register_events || !fn_->event_wait) {
    return Unavailable("this driver's NVML has no events (nvmlEventSetWait_v2, ...)");
  }
  if (event_set_ != nullptr) return Status::Ok();
  COHORT_ASSIGN_OR_RETURN(const unsigned count, DeviceCount());
  NvmlEventSet set = nullptr;
  if (NvmlReturn rc = fn_->event_set_create(&set); rc != kSuccess) {
    return Unavailable("nvmlEventSetCreate failed: " + ErrorText(rc));
  }
  watched_.assign(count, nullptr);
  std::string why = "no GPU";
  for (unsigned i = 0; i < count; ++i) {
    NvmlDevice device = nullptr;
    unsigned long long supported = 0;
    NvmlReturn rc = fn_->handle(i, &device);
    if (rc == kSuccess) rc = fn_->supported_events(device, &supported);
    if (rc == kSuccess && (supported & kXidCriticalError) == 0) {
      why = "GPU " + std::to_string(i) + " reports no Xid events";
      continue;
    }
    if (rc == kSuccess) rc = fn_->register_events(device, kXidCriticalError, set);
    if (rc != kSuccess) {  // a lost GPU, say: it is unfit anyway (Problem says why)
      why = "GPU " + std::to_string(i) + ": " + ErrorText(rc);
      continue;
    }
    watched_[i] = device;
  }
  for (void* device : watched_) {
    if (device == nullptr) continue;
    event_set_ = set;
    return Status::Ok();
  }
  fn_->event_set_free(set);
  return Unavailable("no GPU's Xid events can be watched (" + why + ")");
}

StatusOr<std::optional<Nvml::XidEvent>> Nvml::NextXid(std::chrono::milliseconds timeout) {
  if (event_set_ == nullptr) return FailedPrecondition("NextXid before WatchXids");
  NvmlEventData data{};
  const NvmlReturn rc = fn_->event_wait(static_cast<NvmlEventSet>(event_set_), &data,
                                        static_cast<unsigned>(timeout.count()));
  if (rc == kTimeout) return std::optional<XidEvent>();
  if (rc != kSuccess) return Unavailable("nvmlEventSetWait_v2 failed: " + ErrorText(rc));
  if ((data.event_type & kXidCriticalError) == 0) return std::optional<XidEvent>();
  XidEvent event;
  event.xid = data.event_data;
  for (size_t i = 0; i < watched_.size(); ++i) {
    if (data.device != nullptr && watched_[i] == data.device) event.gpu = static_cast<int>(i);
  }
  return std::optional<XidEvent>(event);
}

}  // namespace cohort::agent
