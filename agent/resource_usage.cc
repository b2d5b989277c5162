#include "agent/resource_usage.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "agent/nvml.h"
#include "common/clock.h"
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

GpuSamples ReadGpuSamples(const std::vector<GpuDevice>& mig_devices) {
  return ReadGpuSamplesFrom(kNvmlLibrary, mig_devices);
}

GpuSamples ReadGpuSamplesFrom(const std::string& library,
                              const std::vector<GpuDevice>& mig_devices) {
  StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Open(library);
  if (!nvml.ok() && nvml.status().code() == StatusCode::kNotFound) {
    return Unavailable("NVML (" + library + ") is not installed on this node");
  }
  if (!nvml.ok()) return Unavailable(nvml.status().message());
  std::vector<GpuSample> out;
  if (!mig_devices.empty()) {
    std::map<int, std::pair<std::string, Nvml::Mig>> gpus;  // problem, MIG devices now
    for (const GpuDevice& d : mig_devices) {
      auto [it, added] = gpus.try_emplace(d.gpu());
      if (added) {
        it->second = {(*nvml)->Problem(static_cast<unsigned>(d.gpu()), /*mig_offered=*/true),
                      (*nvml)->ReadMig(static_cast<unsigned>(d.gpu()))};
      }
      const auto& [problem, now] = it->second;
      GpuSample sample;
      sample.index = d.index;
      sample.gpu = d.gpu();
      sample.uuid = d.uuid;
      sample.problem = problem;
      const bool there = std::any_of(now.devices.begin(), now.devices.end(),
                                     [&](const Nvml::MigDevice& m) { return m.uuid == d.uuid; });
      if (problem.empty() && !there) {
        sample.problem = "its GPU " + std::to_string(d.gpu()) +
                         " no longer has this MIG device (partitioned anew: restart the agent)";
      }
      sample.read = false;
      out.push_back(std::move(sample));
    }
    return out;
  }
  COHORT_ASSIGN_OR_RETURN(const unsigned count, (*nvml)->DeviceCount());
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
  XidWatch xids;
  mutable Mutex mu;
  CondVar cv;
  bool stop GUARDED_BY(mu) = false;
  int running GUARDED_BY(mu) = 0;  // threads that have not returned
  // The latest sample as taken, and with the Xid verdicts added (what Latest() gives).
  std::shared_ptr<const GpuSamples> taken GUARDED_BY(mu);
  std::shared_ptr<const GpuSamples> latest GUARDED_BY(mu) =
      std::make_shared<const GpuSamples>(Unavailable("the first GPU sample is not taken yet"));
  // The newest sample that was a reading (NVML answered); null before the first.
  std::shared_ptr<const GpuSamples> last_reading GUARDED_BY(mu);
  // GPU index (-1: every GPU, NVML did not say which) -> the Xid that took it out of service.
  std::map<int, std::string> xid_problems GUARDED_BY(mu);
  // Whether Xid events are watched now, and how many SampleNow() calls the last wait for one
  // that ended empty (no event queued) had seen when it started.
  bool xids_watched GUARDED_BY(mu) = false;
  uint64_t xids_answered GUARDED_BY(mu) = 0;
  std::vector<GpuFault> faults GUARDED_BY(mu);  // TakeGpuFaults() has not taken them yet
  std::map<std::pair<int, uint64_t>, uint64_t> xid_counts GUARDED_BY(mu);
  // When the sample under way started; nullopt between samples.
  std::optional<std::chrono::steady_clock::time_point> under_way_since GUARDED_BY(mu);
  // SampleNow() calls, and how many of them the latest sample to end had seen when it started.
  uint64_t asked GUARDED_BY(mu) = 0;
  uint64_t answered GUARDED_BY(mu) = 0;
  std::chrono::steady_clock::time_point asked_at GUARDED_BY(mu);

  // `taken` with each GPU's Xid verdict after its own problem.
  void Publish() REQUIRES(mu) {
    if (taken == nullptr) return;
    if (!taken->ok() || xid_problems.empty()) {
      latest = taken;
      return;
    }
    std::vector<GpuSample> gpus = **taken;
    for (GpuSample& g : gpus) {
      auto it = xid_problems.find(g.gpu >= 0 ? g.gpu : g.index);
      if (it == xid_problems.end()) it = xid_problems.find(-1);
      if (it == xid_problems.end()) continue;
      g.problem += (g.problem.empty() ? "" : "; ") + it->second;
    }
    latest = std::make_shared<const GpuSamples>(std::move(gpus));
  }

  // Waits until `deadline` or stop; true when stopped (then this thread is done: it says so).
  bool StopBefore(std::chrono::steady_clock::time_point deadline) REQUIRES(mu) {
    while (!stop && std::chrono::steady_clock::now() < deadline) cv.WaitUntil(&mu, deadline);
    if (!stop) return false;
    --running;
    cv.NotifyAll();
    return true;
  }
};

GpuSampler::GpuSampler(std::chrono::milliseconds every, std::function<GpuSamples()> sample,
                       std::chrono::milliseconds hung_after, XidWatch xids)
    : shared_(std::make_shared<Shared>()) {
  shared_->every = every;
  shared_->hung_after = hung_after;
  shared_->sample = std::move(sample);
  shared_->xids = std::move(xids);
  MutexLock lock(&shared_->mu);
  shared_->running = shared_->xids.library.empty() ? 1 : 2;
  threads_.emplace_back(Loop, shared_);
  if (!shared_->xids.library.empty()) threads_.emplace_back(WatchXids, shared_);
}

GpuSampler::~GpuSampler() {
  bool ended = false;
  {
    MutexLock lock(&shared_->mu);
    shared_->stop = true;
    shared_->cv.NotifyAll();
    const auto give_up = std::chrono::steady_clock::now() + kStopWait;
    while (shared_->running > 0 && std::chrono::steady_clock::now() < give_up) {
      shared_->cv.WaitUntil(&shared_->mu, give_up);
    }
    ended = shared_->running == 0;
  }
  for (std::thread& thread : threads_) {
    // A call that never returns (NVML on a GPU that fell off the bus) keeps its thread, which
    // holds what it uses; the agent's exit does not wait for it.
    if (ended) {
      thread.join();
    } else {
      thread.detach();
    }
  }
  if (!ended) {
    spdlog::warn("an NVML call has not returned; the agent goes on without waiting for it");
  }
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
  const bool waiting = shared_->answered < shared_->asked ||
                       (shared_->xids_watched && shared_->xids_answered < shared_->asked);
  return waiting && std::chrono::steady_clock::now() - shared_->asked_at < kResampleWait;
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

int GpuSampler::ForgetXids() {
  MutexLock lock(&shared_->mu);
  const int forgotten = static_cast<int>(shared_->xid_problems.size());
  shared_->xid_problems.clear();
  shared_->Publish();
  return forgotten;
}

std::vector<GpuSampler::GpuFault> GpuSampler::TakeGpuFaults() {
  MutexLock lock(&shared_->mu);
  return std::exchange(shared_->faults, {});
}

std::map<std::pair<int, uint64_t>, uint64_t> GpuSampler::XidCounts() const {
  MutexLock lock(&shared_->mu);
  return shared_->xid_counts;
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
    s->taken = std::move(taken);
    s->Publish();
    s->under_way_since.reset();
    s->answered = asked;
    const auto next = std::chrono::steady_clock::now() + s->every;
    while (!s->stop && s->asked == asked && std::chrono::steady_clock::now() < next) {
      s->cv.WaitUntil(&s->mu, next);
    }
    if (s->StopBefore(std::chrono::steady_clock::now())) return;
  }
}

void GpuSampler::WatchXids(std::shared_ptr<Shared> s) {
  std::string unwatched;  // why the watch is off, as last logged
  for (;;) {
    StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Open(s->xids.library);
    Status watching = nvml.ok() ? (*nvml)->WatchXids() : nvml.status();
    if (!watching.ok() && watching.message() != unwatched) {
      unwatched = watching.message();
      spdlog::info("GPU Xid events are not watched: {}", unwatched);
    } else if (watching.ok() && !unwatched.empty()) {
      unwatched.clear();
      spdlog::info("GPU Xid events are watched again");
    }
    while (watching.ok()) {
      uint64_t asked = 0;
      {
        MutexLock lock(&s->mu);
        if (s->StopBefore(std::chrono::steady_clock::now())) return;
        s->xids_watched = true;
        asked = s->asked;
      }
      StatusOr<std::optional<Nvml::XidEvent>> next = (*nvml)->NextXid(kXidWait);
      if (!next.ok()) {
        spdlog::warn("GPU Xid events: {}; NVML is opened again", next.status().message());
        break;
      }
      if (!next->has_value()) {  // every event queued before `asked` has been seen
        MutexLock lock(&s->mu);
        s->xids_answered = std::max(s->xids_answered, asked);
        continue;
      }
      const Nvml::XidEvent event = **next;
      const std::string name = XidName(event.xid);
      const std::string xid = "Xid " + std::to_string(event.xid) +
                              (name.empty() ? "" : " (" + name + ")") + " at " +
                              FormatUtcNow("%Y-%m-%d %H:%M:%S UTC");
      const std::string gpu = event.gpu < 0 ? "every GPU (NVML does not name the one)"
                                            : "GPU " + std::to_string(event.gpu);
      {
        MutexLock lock(&s->mu);
        ++s->xid_counts[{event.gpu, event.xid}];
      }
      if (!XidTakesGpuOutOfService(event.xid, s->xids.ignored)) {
        spdlog::warn("{}: {}: {}; the GPU stays in service", gpu, xid,
                     ApplicationXids().count(event.xid) ? "an application's error"
                                                        : "ignored (--ignore-xids)");
        continue;
      }
      spdlog::error("{}: {}: out of service until reset and the agent reloaded", gpu, xid);
      MutexLock lock(&s->mu);
      // The first one's words stay while it lasts: each change of a reason is logged by the
      // coordinator.
      s->xid_problems.emplace(event.gpu, xid + " (it needs a reset, then a reload of the agent)");
      s->Publish();
      if (XidStopsTheGpu(event.xid)) s->faults.push_back(GpuFault{event.gpu, xid});
    }
    if (nvml.ok()) nvml->reset();  // NVML is shut down before the wait
    MutexLock lock(&s->mu);
    s->xids_watched = false;
    if (s->StopBefore(std::chrono::steady_clock::now() + s->every)) return;
  }
}

}  // namespace cohort::agent
