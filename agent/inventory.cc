#include "agent/inventory.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string_view>

#include "agent/nvml.h"

namespace cohort::agent {

std::vector<GpuDevice> DeclaredGpus(int count) {
  std::vector<GpuDevice> gpus;
  for (int i = 0; i < count; ++i)
    gpus.push_back(GpuDevice{i, kDeclaredGpuModel, 0, "", -1, {}, {}});
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
  // MIG devices: GPU feature discovery's single-strategy labels. No GKE kind: a Vertex job's
  // acceleratorType asks for whole GPUs.
  if (gpus.front().is_mig()) {
    add("nvidia.com/mig.strategy", "single");
    return;
  }
  const std::string kind = GkeAcceleratorKind(model, gpus.front().memory_mb);
  if (!kind.empty()) add(kAcceleratorLabel, kind);
}

std::vector<std::string> RdmaDevices(const std::string& dev_dir) {
  std::vector<std::string> devices;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dev_dir + "/infiniband", ec)) {
    const std::string name = entry.path().filename().string();
    const bool wanted =
        name == "rdma_cm" || name.rfind("uverbs", 0) == 0 || name.rfind("umad", 0) == 0;
    std::error_code type_ec;
    if (wanted && entry.is_character_file(type_ec)) devices.push_back("infiniband/" + name);
  }
  std::sort(devices.begin(), devices.end());
  return devices;
}

void AddRdmaLabels(const std::vector<std::string>& rdma_devices, NodeLabels* labels) {
  const auto has = [&](const std::string& prefix) {
    return std::any_of(rdma_devices.begin(), rdma_devices.end(),
                       [&](const std::string& d) { return d.rfind(prefix, 0) == 0; });
  };
  if (!has("infiniband/uverbs")) return;
  auto add = [&](const char* key) {
    if (labels->size() < kMaxNodeLabels) labels->emplace(key, "true");
  };
  add("feature.node.kubernetes.io/rdma.capable");
  if (has("infiniband/rdma_cm")) add("feature.node.kubernetes.io/rdma.available");
}

std::string GkeAcceleratorKind(const std::string& model, int64_t memory_mb) {
  std::set<std::string> words;
  std::string word;
  for (char c : model + " ") {
    if (c == ' ' || c == '-') {
      if (!word.empty()) words.insert(word);
      word.clear();
    } else {
      word += c;
    }
  }
  const auto has = [&](const char* w) { return words.count(w) > 0; };
  const int64_t gb = memory_mb / 1024;  // NVML's total: a little under the marketed size
  if (has("GB200")) return "nvidia-gb200";
  if (has("B200")) return "nvidia-b200";
  if (has("H200")) return "nvidia-h200-141gb";
  if (has("H100")) return gb >= 76 && gb <= 80 ? "nvidia-h100-80gb" : "";
  if (has("A100")) return gb >= 76 && gb <= 80 ? "nvidia-a100-80gb" : "nvidia-tesla-a100";
  if (has("L4")) return "nvidia-l4";
  if (has("T4")) return "nvidia-tesla-t4";
  if (has("V100")) return "nvidia-tesla-v100";
  if (has("P100")) return "nvidia-tesla-p100";
  if (has("P4")) return "nvidia-tesla-p4";
  if (has("K80")) return "nvidia-tesla-k80";
  return "";
}

bool OffersMigDevices(const std::vector<Nvml::Mig>& migs) {
  if (migs.empty()) return false;
  const std::vector<Nvml::MigDevice>& first = migs.front().devices;
  for (const Nvml::Mig& mig : migs) {
    if (!mig.on || mig.devices.empty()) return false;
    for (const Nvml::MigDevice& d : mig.devices) {
      if (d.name.empty() || d.name != first.front().name) return false;
    }
  }
  return true;
}

std::vector<GpuDevice> MigDevicesOffered(const std::vector<GpuDevice>& offered) {
  return !offered.empty() && offered.front().is_mig() ? offered : std::vector<GpuDevice>{};
}

StatusOr<std::vector<GpuDevice>> ProbeNvmlGpus() {
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<Nvml> nvml, Nvml::Open());
  COHORT_ASSIGN_OR_RETURN(const unsigned count, nvml->DeviceCount());
  std::vector<GpuDevice> gpus;
  std::vector<Nvml::Mig> migs;
  const std::vector<int> own = OwnCpus();
  for (unsigned i = 0; i < count; ++i) {
    COHORT_ASSIGN_OR_RETURN(Nvml::Identity id, nvml->Identify(i));
    std::vector<int> near;
    std::set_intersection(id.near_cpus.begin(), id.near_cpus.end(), own.begin(), own.end(),
                          std::back_inserter(near));
    gpus.push_back(GpuDevice{static_cast<int>(i),
                             std::move(id.model),
                             id.memory_mb,
                             std::move(id.uuid),
                             id.numa_node,
                             std::move(near),
                             {}});
    migs.push_back(nvml->ReadMig(i));
  }
  if (!OffersMigDevices(migs)) return gpus;
  std::vector<GpuDevice> slices;
  for (unsigned i = 0; i < count; ++i) {
    for (const Nvml::MigDevice& d : migs[i].devices) {
      GpuDevice slice{static_cast<int>(slices.size()),
                      d.name,
                      d.memory_mb,
                      d.uuid,
                      gpus[i].numa_node,
                      gpus[i].near_cpus,
                      GpuDevice::Mig{static_cast<int>(i), static_cast<int>(d.slot), d.gpu_instance,
                                     d.compute_instance}};
      slices.push_back(std::move(slice));
    }
  }
  return slices;
}

std::vector<std::string> VisibleGpuNames(const std::vector<GpuDevice>& gpus,
                                         const std::vector<int>& pinned) {
  std::vector<std::string> names;
  for (int index : pinned) {
    const auto it = std::find_if(gpus.begin(), gpus.end(),
                                 [&](const GpuDevice& g) { return g.index == index; });
    names.push_back(it != gpus.end() && it->is_mig() ? it->uuid : std::to_string(index));
  }
  return names;
}

namespace {

// The DeviceFileMinor of a capability's `access` file; -1 where it cannot be read.
int CapabilityMinor(const std::string& access_file) {
  std::ifstream in(access_file);
  std::string line;
  while (std::getline(in, line)) {
    constexpr std::string_view kKey = "DeviceFileMinor:";
    if (line.rfind(kKey, 0) != 0) continue;
    char* end = nullptr;
    const long minor = std::strtol(line.c_str() + kKey.size(), &end, 10);
    return end != line.c_str() + kKey.size() && minor >= 0 && minor < (1 << 20)
               ? static_cast<int>(minor)
               : -1;
  }
  return -1;
}

}  // namespace

std::vector<std::string> GpuDeviceNodes(const std::vector<GpuDevice>& gpus,
                                        const std::vector<int>& pinned,
                                        const std::string& caps_dir) {
  std::vector<std::string> nodes;
  auto add = [&](const std::string& node) {
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
  };
  for (int index : pinned) {
    const auto it = std::find_if(gpus.begin(), gpus.end(),
                                 [&](const GpuDevice& g) { return g.index == index; });
    if (it == gpus.end() || !it->is_mig()) {
      add("nvidia" + std::to_string(index));
      continue;
    }
    add("nvidia" + std::to_string(it->mig.gpu));
    const std::string gi = caps_dir + "/gpu" + std::to_string(it->mig.gpu) + "/mig/gi" +
                           std::to_string(it->mig.gpu_instance);
    for (const std::string& access :
         {gi + "/access", gi + "/ci" + std::to_string(it->mig.compute_instance) + "/access"}) {
      const int minor = CapabilityMinor(access);
      if (minor >= 0) add("nvidia-caps/nvidia-cap" + std::to_string(minor));
    }
  }
  return nodes;
}

std::vector<int> OwnCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::vector<int> GpuLocalCpus(const std::vector<GpuDevice>& gpus, const std::vector<int>& pinned,
                              int cpus) {
  std::set<int> near;
  for (int index : pinned) {
    auto gpu = std::find_if(gpus.begin(), gpus.end(),
                            [&](const GpuDevice& g) { return g.index == index; });
    if (gpu == gpus.end() || gpu->near_cpus.empty()) return {};
    near.insert(gpu->near_cpus.begin(), gpu->near_cpus.end());
  }
  if (near.empty() || static_cast<int64_t>(near.size()) < cpus) return {};
  return std::vector<int>(near.begin(), near.end());
}

std::string CpuListText(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += std::to_string(cpus[i]);
    if (j > i) text += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

int DetectCpus() {
  if (const std::vector<int> own = OwnCpus(); !own.empty()) return static_cast<int>(own.size());
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

std::string InterfaceOfAddress(const std::string& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  if (address.empty() || ::getaddrinfo(address.c_str(), nullptr, &hints, &resolved) != 0) return "";
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) {
    ::freeaddrinfo(resolved);
    return "";
  }
  std::string name;
  for (addrinfo* a = resolved; a != nullptr && name.empty(); a = a->ai_next) {
    for (ifaddrs* i = interfaces; i != nullptr && name.empty(); i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != a->ai_family) continue;
      bool same = false;
      if (a->ai_family == AF_INET) {
        same = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr;
      } else if (a->ai_family == AF_INET6) {
        same = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                           &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr,
                           sizeof(in6_addr)) == 0;
      }
      if (same) name = i->ifa_name;
    }
  }
  ::freeifaddrs(interfaces);
  ::freeaddrinfo(resolved);
  return name;
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
