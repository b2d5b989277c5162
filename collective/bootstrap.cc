#include "collective/bootstrap.h"

#include <cstdio>

namespace cohort::collective {

StatusOr<std::optional<std::string>> Bootstrap::Lookup(const std::string& key, Deadline deadline) {
  (void)deadline;
  auto value = Get(key, SteadyClock::now());
  if (value.ok()) return std::optional<std::string>(std::move(*value));
  if (value.status().code() == StatusCode::kDeadlineExceeded) return std::optional<std::string>();
  return value.status();
}

Status InMemoryBootstrap::Put(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[key] = value;
  cv_.notify_all();
  return Status::Ok();
}

StatusOr<std::string> InMemoryBootstrap::Get(const std::string& key, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return values_.count(key) > 0; })) {
    return DeadlineExceeded("bootstrap key '" + key + "' was never published");
  }
  return values_[key];
}

StatusOr<std::optional<std::string>> InMemoryBootstrap::Lookup(const std::string& key,
                                                               Deadline deadline) {
  (void)deadline;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

std::string FormatDuration(std::chrono::milliseconds d) {
  const long long ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  if (ms < 1000) return std::to_string(ms) + "ms";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(ms) / 1000.0);
  return buf;
}

}  // namespace cohort::collective
