#include "agent/inventory.h"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cohort::agent {
namespace {

// The few NVML declarations we need (nvml.h is not required to build the agent).
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr NvmlReturn kNvmlSuccess = 0;

template <typename Fn>
Fn Symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(library, name));
}

}  // namespace

std::vector<GpuDevice> DeclaredGpus(int count) {
  std::vector<GpuDevice> gpus;
  for (int i = 0; i < count; ++i) gpus.push_back(GpuDevice{i, kDeclaredGpuModel, 0, ""});
  return gpus;
}

void AddGpuLabels(const std::vector<GpuDevice>& gpus, NodeLabels* labels) {
  if (gpus.empty() || labels->size() >= kMaxNodeLabels) return;
  const std::string& model = gpus.front().model;
  if (model.empty() || model == kDeclaredGpuModel) return;
  for (const GpuDevice& g : gpus) {
    if (g.model != model) return;  // several models: none names the node
  }
  auto add = [&](const char* key, const std::string& value) {
    if (labels->size() < kMaxNodeLabels) labels->emplace(key, value);
  };
  add("nvidia.com/gpu.product", ToNodeLabelValue(model));
  add("nvidia.com/gpu.count", std::to_string(gpus.size()));
  if (gpus.front().memory_mb > 0) {
    add("nvidia.com/gpu.memory", std::to_string(gpus.front().memory_mb));
  }
}

StatusOr<std::vector<GpuDevice>> ProbeNvmlGpus() {
  void* library = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = ::dlerror();
    return NotFound(std::string("cannot load libnvidia-ml.so.1: ") + (why ? why : "?"));
  }
  auto init = Symbol<NvmlReturn (*)()>(library, "nvmlInit_v2");
  auto shutdown = Symbol<NvmlReturn (*)()>(library, "nvmlShutdown");
  auto count_fn = Symbol<NvmlReturn (*)(unsigned*)>(library, "nvmlDeviceGetCount_v2");
  auto handle_fn =
      Symbol<NvmlReturn (*)(unsigned, NvmlDevice*)>(library, "nvmlDeviceGetHandleByIndex_v2");
  auto name_fn = Symbol<NvmlReturn (*)(NvmlDevice, char*, unsigned)>(library, "nvmlDeviceGetName");
  auto memory_fn =
      Symbol<NvmlReturn (*)(NvmlDevice, NvmlMemory*)>(library, "nvmlDeviceGetMemoryInfo");
  auto uuid_fn = Symbol<NvmlReturn (*)(NvmlDevice, char*, unsigned)>(library, "nvmlDeviceGetUUID");
  if (!init || !shutdown || !count_fn || !handle_fn || !name_fn || !memory_fn || !uuid_fn) {
    ::dlclose(library);
    return Internal("libnvidia-ml.so.1 lacks an expected NVML function");
  }
  if (NvmlReturn rc = init(); rc != kNvmlSuccess) {
    ::dlclose(library);
    return Unavailable("nvmlInit_v2 failed with NVML error " + std::to_string(rc));
  }
  std::vector<GpuDevice> gpus;
  unsigned count = 0;
  Status status;
  if (NvmlReturn rc = count_fn(&count); rc != kNvmlSuccess) {
    status = Unavailable("nvmlDeviceGetCount_v2 failed with NVML error " + std::to_string(rc));
  }
  for (unsigned i = 0; status.ok() && i < count; ++i) {
    NvmlDevice device = nullptr;
    if (NvmlReturn rc = handle_fn(i, &device); rc != kNvmlSuccess) {
      status = Unavailable("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) +
                           ") failed with NVML error " + std::to_string(rc));
      break;
    }
    GpuDevice gpu;
    gpu.index = static_cast<int>(i);
    char text[256] = {0};
    if (name_fn(device, text, sizeof(text)) == kNvmlSuccess) gpu.model = text;
    NvmlMemory memory{};
    if (memory_fn(device, &memory) == kNvmlSuccess) {
      gpu.memory_mb = static_cast<int64_t>(memory.total >> 20);
    }
    char uuid[256] = {0};
    if (uuid_fn(device, uuid, sizeof(uuid)) == kNvmlSuccess) gpu.uuid = uuid;
    gpus.push_back(std::move(gpu));
  }
  shutdown();
  ::dlclose(library);
  if (!status.ok()) return status;
  return gpus;
}

int DetectCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int64_t DetectMemoryMb() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::istringstream fields(line.substr(9));
    int64_t kib = 0;
    fields >> kib;
    return kib / 1024;
  }
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) return static_cast<int64_t>(pages) * page_size / (1 << 20);
  return 0;
}

std::vector<int> ParseListeningPorts(const std::string& proc_net_tcp) {
  constexpr int kListen = 0x0A;
  std::vector<int> ports;
  std::istringstream lines(proc_net_tcp);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    // "  0: 0100007F:1F90 00000000:0000 0A ..." : slot, local address:port, remote, state.
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    if (!(fields >> slot >> local >> remote >> state)) continue;
    size_t colon = local.rfind(':');
    if (colon == std::string::npos) continue;
    char* end = nullptr;
    long st = std::strtol(state.c_str(), &end, 16);
    if (*end != '\0' || st != kListen) continue;
    long port = std::strtol(local.c_str() + colon + 1, &end, 16);
    if (*end != '\0' || port <= 0 || port > 65535) continue;
    ports.push_back(static_cast<int>(port));
  }
  return ports;
}

std::vector<int> ListeningTcpPorts() {
  std::vector<int> ports;
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(path);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    std::vector<int> more = ParseListeningPorts(text.str());
    ports.insert(ports.end(), more.begin(), more.end());
  }
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  return ports;
}

std::string PortDomain() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  if (!std::getline(in, boot) || boot.empty()) return "";
  std::error_code ec;
  std::string net = std::filesystem::read_symlink("/proc/self/ns/net", ec).string();
  if (ec || net.empty()) return "";
  return boot + " " + net;
}

}  // namespace cohort::agent
