#include "coordinator/queue_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "common/job_spec.h"

namespace cohort::coordinator {
namespace {

StatusOr<int64_t> Count(const std::string& what, const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0 || v > 1'000'000) {
    return InvalidArgument(what + ": expected a count (0-1000000), got '" + text + "'");
  }
  return v;
}

constexpr char kQueueSettings[] =
    "gpus=N, cpus=N, weight=W, gpu-idle-limit=D, cpus-per-gpu=N, memory-mb-per-gpu=N";
// The most a default per GPU may be: a replica's cpus are at most Resources::kMaxCpus anyway; 16
// TiB of memory per GPU is beyond any machine.
constexpr int64_t kMaxMemoryMbPerGpu = int64_t{16} << 20;

// A whole number of `unit` in 0..`most`.
StatusOr<int64_t> PerGpu(const std::string& what, const std::string& unit, int64_t most,
                         const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0 || v > most) {
    return InvalidArgument(what + ": expected " + unit + " (0-" + std::to_string(most) +
                           "), got '" + text + "'");
  }
  return v;
}

// A queue as configured: its own defaults per GPU, where it gives them.
struct ParsedQueue {
  QueueDef def;
  bool own_cpus_per_gpu = false;
  bool own_memory_per_gpu = false;
};

StatusOr<ParsedQueue> ParseQueue(const std::string& text) {
  std::istringstream in(text);
  ParsedQueue parsed;
  QueueDef& q = parsed.def;
  if (!(in >> q.name)) {
    return InvalidArgument(
        "expected NAME [gpus=N] [cpus=N] [weight=W] [gpu-idle-limit=D] [cpus-per-gpu=N] "
        "[memory-mb-per-gpu=N]");
  }
  if (!IsValidSchedulingName(q.name)) {
    return InvalidArgument("'" + q.name + "' is not a queue name ([A-Za-z][A-Za-z0-9_-]{0,63})");
  }
  for (std::string word; in >> word;) {
    auto eq = word.find('=');
    std::string key = word.substr(0, eq),
                value = eq == std::string::npos ? "" : word.substr(eq + 1);
    if (key == "gpus") {
      COHORT_ASSIGN_OR_RETURN(q.gpu_quota, Count("gpus", value));
    } else if (key == "cpus") {
      COHORT_ASSIGN_OR_RETURN(q.cpu_quota, Count("cpus", value));
    } else if (key == "weight") {
      char* end = nullptr;
      double w = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(w) || w <= 0 || w > 1e6) {
        return InvalidArgument("weight: expected a positive number, got '" + value + "'");
      }
      q.weight = w;
    } else if (key == "gpu-idle-limit") {
      auto limit = ParseDuration(value);
      if (!limit.ok() || limit->count() < 1000) {
        return InvalidArgument(
            "gpu-idle-limit: expected a duration of at least 1s (30m, 2h), got '" + value + "'");
      }
      q.gpu_idle_limit_ms = limit->count();
    } else if (key == "cpus-per-gpu") {
      COHORT_ASSIGN_OR_RETURN(int64_t cpus,
                              PerGpu("cpus-per-gpu", "CPUs", Resources::kMaxCpus, value));
      q.cpus_per_gpu = static_cast<int>(cpus);
      parsed.own_cpus_per_gpu = true;
    } else if (key == "memory-mb-per-gpu") {
      COHORT_ASSIGN_OR_RETURN(q.memory_mb_per_gpu,
                              PerGpu("memory-mb-per-gpu", "megabytes", kMaxMemoryMbPerGpu, value));
      parsed.own_memory_per_gpu = true;
    } else {
      return InvalidArgument("unknown setting '" + word + "' (" + kQueueSettings + ")");
    }
  }
  return parsed;
}

}  // namespace

QueueConfig::QueueConfig() {
  queues_.push_back(QueueDef{"default", 0, -1, 1.0, 0});
  priorities_ = {{"low", 100}, {"normal", 500}, {"high", 1000}};
}

StatusOr<QueueConfig> QueueConfig::Parse(const std::vector<std::string>& queues,
                                         const std::vector<std::string>& priority_classes,
                                         PerGpuDefaults per_gpu) {
  if (per_gpu.cpus < 0 || per_gpu.cpus > Resources::kMaxCpus) {
    return InvalidArgument("--cpus-per-gpu: expected 0-" + std::to_string(Resources::kMaxCpus) +
                           ", got " + std::to_string(per_gpu.cpus));
  }
  if (per_gpu.memory_mb < 0 || per_gpu.memory_mb > kMaxMemoryMbPerGpu) {
    return InvalidArgument("--memory-mb-per-gpu: expected 0-" + std::to_string(kMaxMemoryMbPerGpu) +
                           ", got " + std::to_string(per_gpu.memory_mb));
  }
  QueueConfig config;
  config.queues_[0].cpus_per_gpu = per_gpu.cpus;
  config.queues_[0].memory_mb_per_gpu = per_gpu.memory_mb;
  bool default_configured = false;
  for (const std::string& text : queues) {
    auto parsed = ParseQueue(text);
    if (!parsed.ok()) {
      return InvalidArgument("--queue '" + text + "': " + parsed.status().message());
    }
    QueueDef& q = parsed->def;
    if (!parsed->own_cpus_per_gpu) q.cpus_per_gpu = per_gpu.cpus;
    if (!parsed->own_memory_per_gpu) q.memory_mb_per_gpu = per_gpu.memory_mb;
    if (q.name == "default") {
      if (default_configured) return InvalidArgument("--queue: queue 'default' is given twice");
      default_configured = true;
      config.queues_[0] = q;
      continue;
    }
    if (config.FindQueue(q.name) >= 0) {
      return InvalidArgument("--queue: queue '" + q.name + "' is given twice");
    }
    config.queues_.push_back(q);
  }
  for (const std::string& text : priority_classes) {
    auto eq = text.find('=');
    std::string name = text.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : text.substr(eq + 1);
    if (!IsValidSchedulingName(name)) {
      return InvalidArgument("--priority-class '" + text +
                             "': expected NAME=VALUE with NAME [A-Za-z][A-Za-z0-9_-]{0,63}");
    }
    int v = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() ||
        v < -1'000'000'000 || v > 1'000'000'000) {
      return InvalidArgument("--priority-class '" + text + "': VALUE must be an integer, got '" +
                             value + "'");
    }
    config.priorities_[name] = v;
  }
  return config;
}

int QueueConfig::FindQueue(const std::string& name) const {
  for (size_t i = 0; i < queues_.size(); ++i) {
    if (queues_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::optional<int> QueueConfig::FindPriority(const std::string& name) const {
  auto it = priorities_.find(name);
  if (it == priorities_.end()) return std::nullopt;
  return it->second;
}

std::string QueueConfig::QueueNames() const {
  std::string out;
  for (const auto& q : queues_) out += (out.empty() ? "" : ", ") + q.name;
  return out;
}

std::string QueueConfig::PriorityNames() const {
  std::vector<std::pair<int, std::string>> by_value;
  for (const auto& [name, value] : priorities_) by_value.emplace_back(value, name);
  std::sort(by_value.begin(), by_value.end());
  std::string out;
  for (const auto& [value, name] : by_value) {
    out += (out.empty() ? "" : ", ") + name + " (" + std::to_string(value) + ")";
  }
  return out;
}

std::string QueueConfig::PriorityName(int value) const {
  for (const auto& [name, v] : priorities_) {
    if (v == value) return name;
  }
  return std::to_string(value);
}

std::vector<std::string> ApplyResourceDefaults(const QueueConfig& queues, JobSpec* spec) {
  std::vector<std::string> notes;
  const int index = queues.FindQueue(spec->scheduling.queue);
  if (index < 0) return notes;
  const QueueDef& queue = queues.queues()[index];
  for (WorkerPoolSpec& pool : spec->pools) {
    Resources& res = pool.resources;
    if (res.gpus == 0) continue;
    std::string filled, per_gpu;
    if (!res.cpus_given && queue.cpus_per_gpu > 0) {
      res.cpus = static_cast<int>(
          std::min<int64_t>(int64_t{res.gpus} * queue.cpus_per_gpu, Resources::kMaxCpus));
      res.cpus_given = true;
      filled = "cpus " + std::to_string(res.cpus);
      per_gpu = std::to_string(queue.cpus_per_gpu) + " CPUs";
    }
    if (!res.memory_given && queue.memory_mb_per_gpu > 0) {
      res.memory_mb = res.gpus * queue.memory_mb_per_gpu;
      res.memory_given = true;
      filled += (filled.empty() ? "" : " and ") + std::string("memory_mb ") +
                std::to_string(res.memory_mb);
      per_gpu += (per_gpu.empty() ? "" : " and ") + std::to_string(queue.memory_mb_per_gpu) + " MB";
    }
    if (filled.empty()) continue;
    notes.push_back("pool " + std::string(RoleName(pool.role)) + ": " + filled +
                    " per replica, for its " + std::to_string(res.gpus) +
                    (res.gpus == 1 ? " GPU" : " GPUs") + " (queue " + queue.name +
                    "'s defaults: " + per_gpu + " per GPU)");
  }
  return notes;
}

}  // namespace cohort::coordinator
