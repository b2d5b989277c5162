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

StatusOr<QueueDef> ParseQueue(const std::string& text) {
  std::istringstream in(text);
  QueueDef q;
  if (!(in >> q.name)) {
    return InvalidArgument("expected NAME [gpus=N] [cpus=N] [weight=W] [gpu-idle-limit=D]");
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
    } else {
      return InvalidArgument("unknown setting '" + word +
                             "' (gpus=N, cpus=N, weight=W, gpu-idle-limit=D)");
    }
  }
  return q;
}

}  // namespace

QueueConfig::QueueConfig() {
  queues_.push_back(QueueDef{"default", 0, -1, 1.0, 0});
  priorities_ = {{"low", 100}, {"normal", 500}, {"high", 1000}};
}

StatusOr<QueueConfig> QueueConfig::Parse(const std::vector<std::string>& queues,
                                         const std::vector<std::string>& priority_classes) {
  QueueConfig config;
  bool default_configured = false;
  for (const std::string& text : queues) {
    auto q = ParseQueue(text);
    if (!q.ok()) return InvalidArgument("--queue '" + text + "': " + q.status().message());
    if (q->name == "default") {
      if (default_configured) return InvalidArgument("--queue: queue 'default' is given twice");
      default_configured = true;
      config.queues_[0] = *q;
      continue;
    }
    if (config.FindQueue(q->name) >= 0) {
      return InvalidArgument("--queue: queue '" + q->name + "' is given twice");
    }
    config.queues_.push_back(*q);
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

}  // namespace cohort::coordinator
