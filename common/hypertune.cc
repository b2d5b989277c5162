#include "common/hypertune.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/file_util.h"

namespace cohort {

namespace {

std::string GetEnv(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : std::string(fallback);
}

std::string FormatNumber(double v) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return std::to_string(v);
  return std::string(buf, ptr);
}

bool ParseNumber(std::string_view s, double* out) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  // Python writes float('nan') / float('inf') as "nan", "inf".
  if (s == "nan" || s == "NaN") {
    *out = std::nan("");
    return true;
  }
  if (s == "inf" || s == "Infinity") {
    *out = HUGE_VAL;
    return true;
  }
  if (s == "-inf" || s == "-Infinity") {
    *out = -HUGE_VAL;
    return true;
  }
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// mkdir -p of the parent directory of `path`.
Status MakeParentDirs(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return Status::Ok();
  std::string dir = path.substr(0, slash);
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos == dir.size() || dir[pos] == '/') {
      std::string prefix = dir.substr(0, pos);
      if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoStatus("mkdir " + prefix, errno);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<MetricRecord> ParseMetricLine(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded()) return InvalidArgument("not valid JSON");
  if (!j.is_object()) return InvalidArgument("not a JSON object");
  MetricRecord r;
  auto number = [](const nlohmann::json& v, double* out) {
    if (v.is_number()) {
      *out = v.get<double>();
      return true;
    }
    if (v.is_string()) return ParseNumber(v.get_ref<const std::string&>(), out);
    return false;
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    if (key == "timestamp") {
      if (!number(v, &r.timestamp)) return InvalidArgument("timestamp: not a number");
    } else if (key == "trial") {
      if (v.is_string()) {
        r.trial = v.get<std::string>();
      } else if (v.is_number_integer()) {
        r.trial = std::to_string(v.get<int64_t>());
      } else {
        return InvalidArgument("trial: not a string");
      }
    } else if (key == "global_step") {
      double step = 0;
      if (!number(v, &step) || !std::isfinite(step) || std::floor(step) != step) {
        return InvalidArgument("global_step: not an integer");
      }
      r.step = static_cast<int64_t>(step);
    } else if (key == "checkpoint_path") {
      if (!v.is_string()) return InvalidArgument("checkpoint_path: not a string");
      r.checkpoint_path = v.get<std::string>();
    } else {
      double value = 0;
      if (!number(v, &value)) return InvalidArgument(key + ": not a number");
      r.metrics[key] = value;
    }
  }
  if (r.metrics.empty()) return InvalidArgument("no metric in the line");
  return r;
}

std::string FormatMetricLine(const MetricRecord& record) {
  nlohmann::json j = nlohmann::json::object();  // std::map-backed: keys come out sorted
  for (const auto& [k, v] : record.metrics) j[k] = FormatNumber(v);
  j["checkpoint_path"] = record.checkpoint_path;
  j["global_step"] = std::to_string(record.step);
  j["timestamp"] = record.timestamp;
  j["trial"] = record.trial;
  return j.dump();
}

MetricReporter::MetricReporter(std::string path, std::string trial_id)
    : path_(std::move(path)), trial_id_(std::move(trial_id)) {}

MetricReporter MetricReporter::FromEnvironment() {
  return MetricReporter(GetEnv("CLOUD_ML_HP_METRIC_FILE", kDefaultMetricFile),
                        GetEnv("CLOUD_ML_TRIAL_ID", "0"));
}

Status MetricReporter::Report(std::string_view tag, double value, int64_t step,
                              std::string_view checkpoint_path) {
  MetricRecord r;
  r.metrics[tag.empty() ? std::string(kDefaultMetricTag) : std::string(tag)] = value;
  r.step = step < 0 ? 0 : step;
  r.timestamp =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  r.trial = trial_id_;
  r.checkpoint_path = std::string(checkpoint_path);
  std::string line = FormatMetricLine(r) + "\n";
  COHORT_RETURN_IF_ERROR(MakeParentDirs(path_));
  int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("open metric file " + path_, errno);
  // One write: O_APPEND makes it land at the end in one piece.
  ssize_t n;
  do {
    n = ::write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  int err = errno;
  ::close(fd);
  if (n < 0) return ErrnoStatus("write metric file " + path_, err);
  if (static_cast<size_t>(n) != line.size()) {
    return Internal("write metric file " + path_ + ": short write");
  }
  return Status::Ok();
}

Status ReportMetric(std::string_view tag, double value, int64_t step) {
  return MetricReporter::FromEnvironment().Report(tag, value, step);
}

MetricFileTailer::MetricFileTailer(std::string path, uint64_t offset)
    : path_(std::move(path)), offset_(offset) {}

StatusOr<std::vector<MetricRecord>> MetricFileTailer::Poll() {
  std::vector<MetricRecord> out;
  struct stat st {};
  StatusOr<int> opened = OpenRegularFile(path_, "metric file", &st);
  if (!opened.ok()) {
    if (opened.status().code() == StatusCode::kNotFound) return out;
    return opened.status();
  }
  const int fd = *opened;
  uint64_t read_pos = offset_ + partial_.size();
  if (static_cast<uint64_t>(st.st_size) < read_pos) {
    spdlog::warn("metric file {} shrank from {} to {} bytes; reading it again from the start",
                 path_, read_pos, static_cast<uint64_t>(st.st_size));
    offset_ = 0;
    partial_.clear();
    read_pos = 0;
    skip_not_newer_ = true;
    overlong_ = false;
  }
  Status read = ReadAt(fd, read_pos, kMaxMetricReadBytes, &partial_, "read metric file " + path_);
  ::close(fd);
  COHORT_RETURN_IF_ERROR(read);
  // Parse every complete line in what we have.
  size_t start = 0;
  size_t nl;
  while ((nl = partial_.find('\n', start)) != std::string::npos) {
    std::string_view line(partial_.data() + start, nl - start);
    bool blank = line.find_first_not_of(" \t\r") == std::string_view::npos;
    if (overlong_) {
      overlong_ = false;  // the end of a line too long to keep, counted when it was dropped
    } else if (!blank) {
      StatusOr<MetricRecord> rec = ParseMetricLine(line);
      if (!rec.ok()) {
        ++malformed_;
        spdlog::warn("metric file {}: skipping malformed line at byte {}: {}", path_,
                     offset_ + start, rec.status().message());
      } else if (!(skip_not_newer_ && rec->timestamp <= last_timestamp_)) {
        last_timestamp_ = std::max(last_timestamp_, rec->timestamp);
        out.push_back(std::move(*rec));
      }
    }
    start = nl + 1;
  }
  offset_ += start;
  partial_.erase(0, start);
  if (partial_.size() > kMaxMetricLineBytes) {
    if (!overlong_) {
      ++malformed_;
      spdlog::warn("metric file {}: skipping a line longer than {} bytes at byte {}", path_,
                   kMaxMetricLineBytes, offset_);
    }
    overlong_ = true;
    offset_ += partial_.size();
    partial_.clear();
  }
  if (!out.empty()) skip_not_newer_ = false;
  return out;
}

}  // namespace cohort
