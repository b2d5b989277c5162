#include "agent/resource_usage.h"

#include <dlfcn.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "common/logging.h"
#include "common/mutex.h"

namespace cohort::agent {
namespace {

double ReadNumber(const std::string& path) {
  std::ifstream in(path);
  double v = -1;
  if (!(in >> v)) return -1;
  return v;
}

// The few NVML declarations the samples need (nvml.h is not required to build the agent).
using NvmlReturn = int;
using NvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlUtilization {
  unsigned int gpu, memory;
};

template <typename Fn>
Fn Symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(library, name));
}

}  // namespace

CgroupUsage ReadCgroupUsage(const std::string& path) {
  CgroupUsage u;
  {
    std::ifstream in(path + "/cpu.stat");
    std::string key;
    double value = 0;
    while (in >> key >> value) {
      if (key == "usage_usec") u.cpu_seconds = value / 1e6;
    }
  }
  u.memory_bytes = ReadNumber(path + "/memory.current");
  std::ifstream io(path + "/io.stat");
  if (io) {
    u.io_read_bytes = 0;
    u.io_write_bytes = 0;
    std::string line;
    while (std::getline(io, line)) {  // "8:0 rbytes=1 wbytes=2 rios=3 ..."
      std::istringstream fields(line);
      std::string field;
      while (fields >> field) {
        size_t eq = field.find('=');
        if (eq == std::string::npos) continue;
        std::string key = field.substr(0, eq);
        double value = std::strtod(field.c_str() + eq + 1, nullptr);
        if (key == "rbytes") u.io_read_bytes += value;
        if (key == "wbytes") u.io_write_bytes += value;
      }
    }
  }
  return u;
}

StatusOr<std::vector<GpuSample>> ReadGpuSamples() {
  void* library = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return Unavailable("NVML (libnvidia-ml.so.1) is not installed on this node");
  }
  auto init = Symbol<NvmlReturn (*)()>(library, "nvmlInit_v2");
  auto shutdown = Symbol<NvmlReturn (*)()>(library, "nvmlShutdown");
  auto count_fn = Symbol<NvmlReturn (*)(unsigned*)>(library, "nvmlDeviceGetCount_v2");
  auto handle_fn =
      Symbol<NvmlReturn (*)(unsigned, NvmlDevice*)>(library, "nvmlDeviceGetHandleByIndex_v2");
  auto memory_fn =
      Symbol<NvmlReturn (*)(NvmlDevice, NvmlMemory*)>(library, "nvmlDeviceGetMemoryInfo");
  auto util_fn = Symbol<NvmlReturn (*)(NvmlDevice, NvmlUtilization*)>(
      library, "nvmlDeviceGetUtilizationRates");
  auto uuid_fn = Symbol<NvmlReturn (*)(NvmlDevice, char*, unsigned)>(library, "nvmlDeviceGetUUID");
  if (!init || !shutdown || !count_fn || !handle_fn || !memory_fn || !util_fn || !uuid_fn) {
    ::dlclose(library);
    return Unavailable("libnvidia-ml.so.1 lacks the functions needed");
  }
  if (NvmlReturn rc = init(); rc != 0) {
    ::dlclose(library);
    return Unavailable("nvmlInit_v2 failed with NVML error " + std::to_string(rc));
  }
  std::vector<GpuSample> out;
  Status status = Status::Ok();
  unsigned count = 0;
  if (NvmlReturn rc = count_fn(&count); rc != 0) {
    status = Unavailable("nvmlDeviceGetCount_v2 failed with NVML error " + std::to_string(rc));
  }
  for (unsigned i = 0; status.ok() && i < count; ++i) {
    NvmlDevice device = nullptr;
    NvmlMemory memory{};
    NvmlUtilization util{};
    char uuid[96] = {0};
    if (handle_fn(i, &device) != 0 || memory_fn(device, &memory) != 0 ||
        util_fn(device, &util) != 0) {
      status = Unavailable("NVML could not read GPU " + std::to_string(i));
      break;
    }
    uuid_fn(device, uuid, sizeof uuid - 1);
    out.push_back(GpuSample{static_cast<int>(i), uuid, static_cast<double>(util.gpu),
                            static_cast<double>(memory.used), static_cast<double>(memory.total)});
  }
  shutdown();
  ::dlclose(library);
  if (!status.ok()) return status;
  return out;
}

struct GpuSampler::Shared {
  std::chrono::milliseconds every;
  std::function<GpuSamples()> sample;
  mutable Mutex mu;
  CondVar cv;
  bool stop GUARDED_BY(mu) = false;
  bool running GUARDED_BY(mu) = true;  // the thread has not returned
  std::shared_ptr<const GpuSamples> latest GUARDED_BY(mu) =
      std::make_shared<const GpuSamples>(Unavailable("the first GPU sample is not taken yet"));
};

GpuSampler::GpuSampler(std::chrono::milliseconds every, std::function<GpuSamples()> sample)
    : shared_(std::make_shared<Shared>()) {
  shared_->every = every;
  shared_->sample = std::move(sample);
  thread_ = std::thread(Loop, shared_);
}

GpuSampler::~GpuSampler() {
  bool ended = false;
  {
    MutexLock lock(&shared_->mu);
    shared_->stop = true;
    shared_->cv.NotifyAll();
    const auto give_up = std::chrono::steady_clock::now() + kStopWait;
    while (shared_->running && std::chrono::steady_clock::now() < give_up) {
      shared_->cv.WaitUntil(&shared_->mu, give_up);
    }
    ended = !shared_->running;
  }
  if (ended) {
    thread_.join();
    return;
  }
  // A sample that never returns (NVML on a GPU that fell off the bus) keeps its thread, which
  // holds what it uses; the agent's exit does not wait for it.
  spdlog::warn("a GPU sample (NVML) has not returned; the agent goes on without waiting for it");
  thread_.detach();
}

std::shared_ptr<const GpuSamples> GpuSampler::Latest() const {
  MutexLock lock(&shared_->mu);
  return shared_->latest;
}

void GpuSampler::Loop(std::shared_ptr<Shared> s) {
  for (;;) {
    auto taken = std::make_shared<const GpuSamples>(s->sample());
    MutexLock lock(&s->mu);
    s->latest = std::move(taken);
    const auto next = std::chrono::steady_clock::now() + s->every;
    while (!s->stop && std::chrono::steady_clock::now() < next) s->cv.WaitUntil(&s->mu, next);
    if (s->stop) {
      s->running = false;
      s->cv.NotifyAll();
      return;
    }
  }
}

}  // namespace cohort::agent
