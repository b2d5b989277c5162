// Hyperparameter-tuning metric reporting, the way cloudml-hypertune does it (DESIGN.md
// "Hyperparameter tuning"): a trial appends one JSON object per line to $CLOUD_ML_HP_METRIC_FILE,
// every value but the timestamp a string:
//
//   {"accuracy":"0.91","checkpoint_path":"","global_step":"100","timestamp":1.7e9,"trial":"3"}
//
// MetricReporter writes such lines (C++ trainers); python/cohort/hypertune.py is the same for
// Python with cloudml-hypertune's API. MetricFileTailer reads them back (the agent tails each
// trial's file and forwards TrialMeasurement messages).
//
// Difference from the stock library: it rewrites the whole file with its last 100 entries on each
// report; ours append one line with a single write(2) on an O_APPEND descriptor, so a reader never
// sees half a line from a finished write and lines are never lost. The stock library's file reads
// as appends until its 100th entry; the tailer restarts from the beginning when a file shrinks and
// then skips lines at or before the newest timestamp it delivered.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cohort {

// cloudml-hypertune's defaults.
inline constexpr char kDefaultMetricFile[] = "/tmp/hypertune/output.metrics";
inline constexpr char kDefaultMetricTag[] = "training/hptuning/metric";

// One line of a metric file. Keys other than timestamp, trial, global_step and checkpoint_path are
// metrics.
struct MetricRecord {
  std::map<std::string, double> metrics;
  int64_t step = 0;      // global_step
  double timestamp = 0;  // seconds since the epoch
  std::string trial;
  std::string checkpoint_path;

  bool operator==(const MetricRecord&) const = default;
};

// Parses one line (without its newline). Metric values may be strings holding numbers (the
// hypertune format) or JSON numbers; kInvalidArgument names what is wrong.
StatusOr<MetricRecord> ParseMetricLine(std::string_view line);
// The line for a record, without the newline, keys sorted as the stock library writes them.
std::string FormatMetricLine(const MetricRecord& record);

// Appends metric lines to a file. Thread safety: Report may be called from several threads (each
// line is one write). The file and its directory are created on first use.
class MetricReporter {
 public:
  // path: the metric file; trial_id: the "trial" field.
  MetricReporter(std::string path, std::string trial_id);
  // $CLOUD_ML_HP_METRIC_FILE (default kDefaultMetricFile) and $CLOUD_ML_TRIAL_ID (default "0").
  static MetricReporter FromEnvironment();

  // tag empty: kDefaultMetricTag. step < 0 is written as 0, as the stock library does for None.
  Status Report(std::string_view tag, double value, int64_t step = 0,
                std::string_view checkpoint_path = "");

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string trial_id_;
};

// One-call form for training code: MetricReporter::FromEnvironment().Report(tag, value, step).
Status ReportMetric(std::string_view tag, double value, int64_t step = 0);

// Reads a metric file as it grows. Poll() returns the records of the complete lines appended since
// the previous call; a line still being written (no newline yet) waits for the next Poll, so a line
// split across reads is never lost or parsed half. Malformed lines are skipped with a warning and
// counted. A file that does not exist yet reads as empty. A file that shrank (rewritten) is read
// again from the start, skipping records not newer than the last one delivered. The file is the
// job's: only a regular file is read, not through a symbolic link (common/file_util.h; an error
// names what it is instead), at most kMaxMetricReadBytes a call, and a line longer than
// kMaxMetricLineBytes is skipped as malformed without being kept.
//
// Thread safety: not thread-safe; one owner polls.
class MetricFileTailer {
 public:
  static constexpr uint64_t kMaxMetricReadBytes = 4 << 20;
  static constexpr size_t kMaxMetricLineBytes = 64 << 10;

  // offset: bytes already consumed (a previous tailer's offset()), 0 to read from the start.
  explicit MetricFileTailer(std::string path, uint64_t offset = 0);

  StatusOr<std::vector<MetricRecord>> Poll();

  // Bytes consumed as complete lines; persist it to resume without re-reading.
  uint64_t offset() const { return offset_; }
  uint64_t malformed_lines() const { return malformed_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint64_t offset_ = 0;  // start of the first unconsumed byte (partial_ begins here)
  std::string partial_;  // bytes after the last newline read so far
  uint64_t malformed_ = 0;
  double last_timestamp_ = 0;
  bool skip_not_newer_ = false;
  bool overlong_ = false;  // dropping the rest of a line longer than kMaxMetricLineBytes
};

}  // namespace cohort
