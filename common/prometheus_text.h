// PrometheusText writes metrics in the Prometheus text exposition format (version 0.0.4), the
// format /metrics of the coordinator and of each agent serve. Each family is opened with Family()
// (its # HELP and # TYPE lines) and followed by its samples; the writer escapes what the format
// asks: in HELP text backslash and newline, in label values backslash, double quote and newline.
// Metric and label names are the caller's constants and are checked: an invalid one is a
// programming error: the writer prints it and aborts.
// Values are written shortest round-trip; NaN and infinities as NaN, +Inf, -Inf.
//
// Histogram holds cumulative-ready bucket counts for fixed upper bounds; Write() renders
// <name>_bucket{le="..."} for every bound and +Inf, then <name>_sum and <name>_count.
//
// Thread safety: a PrometheusText is used by one thread; Histogram is a value type (callers
// guard it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort {

using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

// Observations into fixed buckets (upper bounds, increasing); values above the last bound count
// only in +Inf.
struct Histogram {
  explicit Histogram(std::vector<double> upper_bounds = {});
  void Observe(double value);

  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // per bucket, not cumulative; counts.size() == bounds.size() + 1
  double sum = 0;
  uint64_t count = 0;
};

// Bounds for durations in seconds from 1 ms to about an hour.
std::vector<double> DurationBucketsSeconds();

class PrometheusText {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // Starts a family: "# HELP name help" and "# TYPE name type".
  void Family(std::string_view name, Type type, std::string_view help);
  // One sample of the current family (name may carry a suffix such as _total, as the caller
  // writes it).
  void Sample(std::string_view name, const PrometheusLabels& labels, double value);
  void Sample(std::string_view name, double value) { Sample(name, {}, value); }
  // The samples of a histogram of the current family.
  void WriteHistogram(std::string_view name, const PrometheusLabels& labels, const Histogram& h);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

  static std::string EscapeLabelValue(std::string_view value);
  static std::string EscapeHelp(std::string_view help);
  static std::string FormatValue(double value);
  static bool ValidMetricName(std::string_view name);
  static bool ValidLabelName(std::string_view name);

 private:
  std::string out_;
};

}  // namespace cohort
