#include "agent/resource_usage.h"

#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "agent/nvml.h"
#include "common/config.h"
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

GpuSamples ReadGpuSamples() { return ReadGpuSamplesFrom(kNvmlLibrary); }

GpuSamples ReadGpuSamplesFrom(const std::string& library) {
  StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Open(library);
  if (!nvml.ok() && nvml.status().code() == StatusCode::kNotFound) {
    return Unavailable("NVML (" + library + ") is not installed on this node");
  }
  if (!nvml.ok()) return Unavailable(nvml.status().message());
  COHORT_ASSIGN_OR_RETURN(const unsigned count, (*nvml)->DeviceCount());
  std::vector<GpuSample> out;
  for (unsigned i = 0; i < count; ++i) {
    GpuSample sample;
    sample.index = static_cast<int>(i);
    sample.problem = (*nvml)->Problem(i);
    StatusOr<Nvml::Use> use = (*nvml)->ReadUse(i);
    if (use.ok()) {
      sample.uuid = std::move(use->uuid);
      sample.utilization = use->utilization;
      sample.memory_used_bytes = use->memory_used_bytes;
      sample.memory_total_bytes = use->memory_total_bytes;
    } else {
      sample.read = false;
      if (sample.problem.empty()) sample.problem = use.status().message();
    }
    out.push_back(std::move(sample));
  }
  return out;
}

struct GpuSampler::Shared {
  std::chrono::milliseconds every;
  std::chrono::milliseconds hung_after;
  std::function<GpuSamples()> sample;
  mutable Mutex mu;
  CondVar cv;
  bool stop GUARDED_BY(mu) = false;
  bool running GUARDED_BY(mu) = true;  // the thread has not returned
  std::shared_ptr<const GpuSamples> latest GUARDED_BY(mu) =
      std::make_shared<const GpuSamples>(Unavailable("the first GPU sample is not taken yet"));
  // The newest sample that was a reading (NVML answered); null before the first.
  std::shared_ptr<const GpuSamples> last_reading GUARDED_BY(mu);
  // When the sample under way started; nullopt between samples.
  std::optional<std::chrono::steady_clock::time_point> under_way_since GUARDED_BY(mu);
  // SampleNow() calls, and how many of them the latest sample to end had seen when it started.
  uint64_t asked GUARDED_BY(mu) = 0;
  uint64_t answered GUARDED_BY(mu) = 0;
  std::chrono::steady_clock::time_point asked_at GUARDED_BY(mu);
};

GpuSampler::GpuSampler(std::chrono::milliseconds every, std::function<GpuSamples()> sample,
                       std::chrono::milliseconds hung_after)
    : shared_(std::make_shared<Shared>()) {
  shared_->every = every;
  shared_->hung_after = hung_after;
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

bool GpuSampler::SampleNow() {
  MutexLock lock(&shared_->mu);
  if (!shared_->latest->ok()) return false;
  ++shared_->asked;
  shared_->asked_at = std::chrono::steady_clock::now();
  shared_->cv.NotifyAll();
  return true;
}

bool GpuSampler::Resampling() const {
  MutexLock lock(&shared_->mu);
  return shared_->answered < shared_->asked &&
         std::chrono::steady_clock::now() - shared_->asked_at < kResampleWait;
}

std::map<int, std::string> GpuSampler::UnhealthyGpus() const {
  MutexLock lock(&shared_->mu);
  std::map<int, std::string> out;
  if (!shared_->latest->ok()) {
    // NVML read the GPUs before and fails now (a driver upgraded under the running one:
    // "Driver/library version mismatch"): no new CUDA process would start on any of them.
    if (shared_->last_reading == nullptr) return out;
    for (const GpuSample& g : **shared_->last_reading) {
      out[g.index] = "NVML fails now: " + shared_->latest->status().message();
    }
    return out;
  }
  std::string hung;
  if (shared_->under_way_since) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - *shared_->under_way_since);
    // The same words while it lasts: each change of a reason is logged by the coordinator.
    if (waited >= shared_->hung_after) {
      hung = "NVML has not answered a sample for " + FormatDuration(shared_->hung_after) +
             " or more (a GPU may have fallen off the bus)";
    }
  }
  for (const GpuSample& g : **shared_->latest) {
    if (!g.problem.empty()) {
      out[g.index] = g.problem;
    } else if (!hung.empty()) {
      out[g.index] = hung;
    }
  }
  return out;
}

void GpuSampler::Loop(std::shared_ptr<Shared> s) {
  for (;;) {
    uint64_t asked = 0;
    {
      MutexLock lock(&s->mu);
      asked = s->asked;
      s->under_way_since = std::chrono::steady_clock::now();
    }
    auto taken = std::make_shared<const GpuSamples>(s->sample());
    MutexLock lock(&s->mu);
    if (taken->ok()) s->last_reading = taken;
    s->latest = std::move(taken);
    s->under_way_since.reset();
    s->answered = asked;
    const auto next = std::chrono::steady_clock::now() + s->every;
    while (!s->stop && s->asked == asked && std::chrono::steady_clock::now() < next) {
      s->cv.WaitUntil(&s->mu, next);
    }
    if (s->stop) {
      s->running = false;
      s->cv.NotifyAll();
      return;
    }
  }
}

}  // namespace cohort::agent
