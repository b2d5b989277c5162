// A stand-in for NVML (libnvidia-ml.so.1) for machines without an NVIDIA driver: the functions
// agent/nvml.cc looks up, answering from a text file the test writes, read again at every
// nvmlInit_v2 (the agent opens NVML for each sample), so that a test can break a GPU while the
// agent runs. Built as libnvidia-ml.so.1 in a directory of its own: a test loads it by path
// (Nvml::Open) or runs an agent with LD_LIBRARY_PATH naming that directory.
//
// The file, named by $COHORT_FAKE_NVML: one GPU per line, its fields KEY=VALUE separated by
// blanks, every one optional:
//   uuid=GPU-1 model=NVIDIA_H100_80GB_HBM3 memory_mib=81559 util=37 used_mib=1024
//   ecc=2 (uncorrectable ECC errors since the driver loaded; -1: not supported)
//   remap=none|pending|failed|unsupported  retired_pending=0|1  lost=0|1
//   mig=0|1|unsupported (its current MIG mode; unsupported: a GPU before A100)
//   mig_devices=1g.10gb:9984,1g.10gb:9984 (with mig=1: its MIG devices' profiles and memory in
//     MiB, in slots 0, 1, ...; each named "<model> MIG <profile>", UUID "MIG-fake-<gpu>-<slot>",
//     GPU instance 1 + slot, compute instance 0; NVML gives no utilization of one)
//   xid_events=0 (it reports no Xid events)
//   numa=1 (its NUMA node; absent: NVML does not say, NVML_ERROR_NOT_SUPPORTED)
//   cpus=0-3,8 (the CPUs near it, a kernel cpulist; absent: not supported)
// '_' in a model stands for a blank. No file, or no variable: nvmlInit_v2 fails with
// NVML_ERROR_DRIVER_NOT_LOADED (9).
//
// Xid events: the file $COHORT_FAKE_NVML.xids, one event a line, "GPU XID" (GPU -1: an event
// that names no GPU), which a test (or a replica playing a GPU's failure) appends to. Each event
// set delivers every line once, however old, for the GPUs registered with it, as
// nvmlEventSetWait_v2 polls the file.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kNotFound = 6,
              kDriverNotLoaded = 9, kTimeout = 10, kGpuIsLost = 15;
constexpr unsigned kMaxMigDevices = 7;

struct FakeMig {
  std::string profile;
  unsigned long long memory_mib = 0;
};

struct FakeGpu {
  std::string uuid;
  std::string model = "Fake GPU";
  unsigned long long memory_mib = 16384;
  unsigned long long used_mib = 0;
  unsigned util = 0;
  long long ecc = 0;
  std::string remap = "none";
  bool retired_pending = false;
  bool lost = false;
  bool xid_events = true;
  std::string mig = "0";
  int numa = -1;               // -1: not supported
  std::vector<unsigned> cpus;  // empty: not supported
  std::vector<FakeMig> migs;   // by slot
};

// The CPUs of a cpulist ("0-3,8").
std::vector<unsigned> ParseCpuList(const std::string& list) {
  std::vector<unsigned> cpus;
  std::istringstream ranges(list);
  std::string range;
  while (std::getline(ranges, range, ',')) {
    const size_t dash = range.find('-');
    const unsigned first = static_cast<unsigned>(std::stoul(range.substr(0, dash)));
    const unsigned last = dash == std::string::npos
                              ? first
                              : static_cast<unsigned>(std::stoul(range.substr(dash + 1)));
    for (unsigned c = first; c <= last; ++c) cpus.push_back(c);
  }
  return cpus;
}

// Sets `bits` in the mask of `words` words; kInvalidArgument where one does not fit.
int FillMask(const std::vector<unsigned>& bits, unsigned words, unsigned long* mask) {
  constexpr unsigned kBits = 8 * sizeof(unsigned long);
  for (unsigned w = 0; w < words; ++w) mask[w] = 0;
  for (unsigned b : bits) {
    if (b / kBits >= words) return kInvalidArgument;
    mask[b / kBits] |= 1UL << (b % kBits);
  }
  return kSuccess;
}

std::mutex mu;
std::vector<FakeGpu> gpus;  // guarded by mu

constexpr unsigned long long kXidCriticalError = 0x8;

struct EventSet {
  std::vector<bool> registered;  // by GPU index
  size_t delivered = 0;          // lines of the .xids file
};

struct EventData {
  void* device;
  unsigned long long event_type, event_data;
  unsigned gpu_instance, compute_instance;
};

bool ReadState() {
  const char* path = std::getenv("COHORT_FAKE_NVML");
  if (path == nullptr) return false;
  std::ifstream in(path);
  if (!in) return false;
  std::vector<FakeGpu> read;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    FakeGpu gpu;
    gpu.uuid = "GPU-fake-" + std::to_string(read.size());
    std::istringstream fields(line);
    std::string field;
    while (fields >> field) {
      const size_t eq = field.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
      if (key == "uuid") gpu.uuid = value;
      if (key == "model") {
        gpu.model = value;
        for (char& c : gpu.model) c = c == '_' ? ' ' : c;
      }
      if (key == "memory_mib") gpu.memory_mib = std::stoull(value);
      if (key == "used_mib") gpu.used_mib = std::stoull(value);
      if (key == "util") gpu.util = static_cast<unsigned>(std::stoul(value));
      if (key == "ecc") gpu.ecc = std::stoll(value);
      if (key == "remap") gpu.remap = value;
      if (key == "retired_pending") gpu.retired_pending = value == "1";
      if (key == "lost") gpu.lost = value == "1";
      if (key == "xid_events") gpu.xid_events = value != "0";
      if (key == "mig") gpu.mig = value;
      if (key == "numa") gpu.numa = std::stoi(value);
      if (key == "cpus") gpu.cpus = ParseCpuList(value);
      if (key == "mig_devices") {
        std::istringstream list(value);
        std::string device;
        while (std::getline(list, device, ',')) {
          const size_t colon = device.find(':');
          gpu.migs.push_back(
              FakeMig{device.substr(0, colon),
                      colon == std::string::npos ? 0 : std::stoull(device.substr(colon + 1))});
        }
      }
    }
    read.push_back(std::move(gpu));
  }
  gpus = std::move(read);
  return true;
}

// A handle is the GPU's index + 1, and for one of its MIG devices also (slot + 1) << 16.
// The GPU a handle names, or whose MIG device it names, under mu; nullptr for a bad one.
const FakeGpu* Gpu(void* device) {
  const auto index = reinterpret_cast<uintptr_t>(device) & 0xFFFF;
  return index == 0 || index > gpus.size() ? nullptr : &gpus[index - 1];
}
// The MIG device a handle names, under mu; nullptr for a GPU's handle or a bad one.
const FakeMig* Mig(void* device) {
  const FakeGpu* gpu = Gpu(device);
  const auto slot = reinterpret_cast<uintptr_t>(device) >> 16;
  return gpu == nullptr || slot == 0 || slot > gpu->migs.size() ? nullptr : &gpu->migs[slot - 1];
}
unsigned MigSlot(void* device) {
  return static_cast<unsigned>((reinterpret_cast<uintptr_t>(device) >> 16) - 1);
}

int CopyText(const std::string& text, char* out, unsigned length) {
  if (length <= text.size()) return kInvalidArgument;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return kSuccess;
}

struct Memory {
  unsigned long long total, free, used;
};
struct Utilization {
  unsigned gpu, memory;
};

}  // namespace

extern "C" {

int nvmlInit_v2() {
  std::lock_guard<std::mutex> lock(mu);
  return ReadState() ? kSuccess : kDriverNotLoaded;
}

int nvmlShutdown() { return kSuccess; }

const char* nvmlErrorString(int rc) {
  switch (rc) {
    case kSuccess:
      return "Success";
    case kInvalidArgument:
      return "Invalid Argument";
    case kNotSupported:
      return "Not Supported";
    case kNotFound:
      return "Not Found";
    case kDriverNotLoaded:
      return "Driver Not Loaded";
    case kGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  std::lock_guard<std::mutex> lock(mu);
  *count = static_cast<unsigned>(gpus.size());
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  std::lock_guard<std::mutex> lock(mu);
  if (index >= gpus.size()) return kInvalidArgument;
  if (gpus[index].lost) return kGpuIsLost;
  *device = reinterpret_cast<void*>(static_cast<uintptr_t>(index) + 1);
  return kSuccess;
}

int nvmlDeviceGetName(void* device, char* name, unsigned length) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr) return kInvalidArgument;
  const FakeMig* mig = Mig(device);
  return CopyText(mig ? gpu->model + " MIG " + mig->profile : gpu->model, name, length);
}

int nvmlDeviceGetUUID(void* device, char* uuid, unsigned length) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr) return kInvalidArgument;
  if (Mig(device) == nullptr) return CopyText(gpu->uuid, uuid, length);
  const auto index = (reinterpret_cast<uintptr_t>(device) & 0xFFFF) - 1;
  return CopyText("MIG-fake-" + std::to_string(index) + "-" + std::to_string(MigSlot(device)), uuid,
                  length);
}

int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr) return kInvalidArgument;
  const FakeMig* mig = Mig(device);
  memory->total = (mig ? mig->memory_mib : gpu->memory_mib) << 20;
  memory->used = mig ? 0 : gpu->used_mib << 20;
  memory->free = memory->total - memory->used;
  return kSuccess;
}

int nvmlDeviceGetUtilizationRates(void* device, Utilization* util) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr) return kInvalidArgument;
  if (Mig(device) != nullptr) return kNotSupported;
  util->gpu = gpu->util;
  util->memory = 0;
  return kSuccess;
}

int nvmlDeviceGetMemoryAffinity(void* device, unsigned words, unsigned long* nodes, int scope) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr || scope != 0) return kInvalidArgument;
  if (gpu->numa < 0) return kNotSupported;
  return FillMask({static_cast<unsigned>(gpu->numa)}, words, nodes);
}

int nvmlDeviceGetCpuAffinity(void* device, unsigned words, unsigned long* cpus) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr) return kInvalidArgument;
  if (gpu->cpus.empty()) return kNotSupported;
  return FillMask(gpu->cpus, words, cpus);
}

int nvmlDeviceGetTotalEccErrors(void* device, int error_type, int counter_type,
                                unsigned long long* count) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr || error_type != 1 || counter_type != 0) return kInvalidArgument;
  if (gpu->ecc < 0) return kNotSupported;
  *count = static_cast<unsigned long long>(gpu->ecc);
  return kSuccess;
}

int nvmlDeviceGetRemappedRows(void* device, unsigned* corrected, unsigned* uncorrected,
                              unsigned* pending, unsigned* failed) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr) return kInvalidArgument;
  if (gpu->remap == "unsupported") return kNotSupported;
  *corrected = 0;
  *uncorrected = gpu->remap == "none" ? 0 : 1;
  *pending = gpu->remap == "pending" ? 1 : 0;
  *failed = gpu->remap == "failed" ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetMigMode(void* device, unsigned* current, unsigned* pending) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr) return kInvalidArgument;
  if (gpu->mig == "unsupported") return kNotSupported;
  *current = *pending = gpu->mig == "1" ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetMaxMigDeviceCount(void* device, unsigned* count) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr || Mig(device) != nullptr) return kInvalidArgument;
  if (gpu->mig == "unsupported") return kNotSupported;
  *count = gpu->mig == "1" ? kMaxMigDevices : 0;
  return kSuccess;
}

int nvmlDeviceGetMigDeviceHandleByIndex(void* device, unsigned slot, void** mig) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr || Mig(device) != nullptr || slot >= kMaxMigDevices) return kInvalidArgument;
  if (gpu->mig != "1" || slot >= gpu->migs.size()) return kNotFound;
  *mig = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(device) |
                                 (static_cast<uintptr_t>(slot) + 1) << 16);
  return kSuccess;
}

int nvmlDeviceGetGpuInstanceId(void* device, unsigned* id) {
  std::lock_guard<std::mutex> lock(mu);
  if (Mig(device) == nullptr) return kInvalidArgument;
  *id = MigSlot(device) + 1;
  return kSuccess;
}

int nvmlDeviceGetComputeInstanceId(void* device, unsigned* id) {
  std::lock_guard<std::mutex> lock(mu);
  if (Mig(device) == nullptr) return kInvalidArgument;
  *id = 0;
  return kSuccess;
}

int nvmlDeviceGetRetiredPagesPendingStatus(void* device, int* pending) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr) return kInvalidArgument;
  *pending = gpu->retired_pending ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetSupportedEventTypes(void* device, unsigned long long* types) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr) return kInvalidArgument;
  *types = gpu->xid_events ? kXidCriticalError : 0;
  return kSuccess;
}

int nvmlEventSetCreate(EventSet** set) {
  *set = new EventSet;
  return kSuccess;
}

int nvmlEventSetFree(EventSet* set) {
  delete set;
  return kSuccess;
}

int nvmlDeviceRegisterEvents(void* device, unsigned long long types, EventSet* set) {
  std::lock_guard<std::mutex> lock(mu);
  const FakeGpu* gpu = Gpu(device);
  if (gpu == nullptr || set == nullptr) return kInvalidArgument;
  if (!gpu->xid_events || types != kXidCriticalError) return kNotSupported;
  const size_t index = reinterpret_cast<uintptr_t>(device) - 1;
  if (set->registered.size() <= index) set->registered.resize(index + 1);
  set->registered[index] = true;
  return kSuccess;
}

int nvmlEventSetWait_v2(EventSet* set, EventData* data, unsigned timeout_ms) {
  const char* path = std::getenv("COHORT_FAKE_NVML");
  if (set == nullptr || path == nullptr) return kInvalidArgument;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    std::ifstream in(std::string(path) + ".xids");
    std::string line;
    for (size_t n = 0; std::getline(in, line); ++n) {
      if (n < set->delivered) continue;
      ++set->delivered;
      long long gpu = -1;
      unsigned long long xid = 0;
      if (!(std::istringstream(line) >> gpu >> xid)) continue;
      const bool watched = gpu >= 0 && static_cast<size_t>(gpu) < set->registered.size() &&
                           set->registered[static_cast<size_t>(gpu)];
      if (gpu >= 0 && !watched) continue;
      data->device = gpu < 0 ? nullptr : reinterpret_cast<void*>(static_cast<uintptr_t>(gpu) + 1);
      data->event_type = kXidCriticalError;
      data->event_data = xid;
      data->gpu_instance = data->compute_instance = 0xFFFFFFFF;
      return kSuccess;
    }
    if (std::chrono::steady_clock::now() >= deadline) return kTimeout;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // extern "C"
