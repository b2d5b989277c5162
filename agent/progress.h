// ProgressProbe measures the progress of one running replica attempt for the coordinator's hang
// watchdog (coordinator/watchdog.h), which compares it across the job's replicas; the agent takes
// one reading per heartbeat and sends it as wire::ReplicaProgress.
//
// What it watches:
//  - the attempt's log file (its stdout and stderr) and the replica's $CLOUD_ML_HP_METRIC_FILE:
//    when a reading finds a file's size changed, the file made progress at that reading;
//  - the replica's flight recorder (common/flight_recorder.h, the file COHORT_FLIGHT_RECORDER
//    names; agent/replica_env.h sets it), when the replica uses Cohort collectives.
// Every idle time counts from the newest progress of its kind, or from the attempt's start (the
// probe's creation) when there was none yet. File growth is seen at readings, so it is exact to one
// reading interval (a heartbeat) for the log.
//
// The metric file lies on the job's output storage (typically NFS, which may hang): the probe
// never stats it itself. Each reading takes the size that the newest finished stat of the
// attempt's MetricFileReader (agent/metric_file_reader.h) found, as growth seen at this reading,
// and asks it for a fresh stat on its thread for the next one; so metric growth is seen one
// reading later than before, exact to two reading intervals. While a stat hangs the file shows
// no growth (the output storage makes none) and the readings go on. The log is in the agent's
// local work dir and the flight recorder in the attempt's dir (unless the job names another
// path): those the probe reads itself.
//
// Thread safety: none; the agent loop owns it. Times are the agent's clock (milliseconds).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/schema/cohort_generated.h"

namespace cohort {
class FlightRecorderReader;
}

namespace cohort::agent {

class MetricFileReader;

class ProgressProbe {
 public:
  // metric: null when the attempt has no metric file.
  ProgressProbe(std::string log_path, std::shared_ptr<MetricFileReader> metric,
                std::string recorder_path, int64_t start_ms);
  ~ProgressProbe();
  ProgressProbe(const ProgressProbe&) = delete;
  ProgressProbe& operator=(const ProgressProbe&) = delete;

  // One reading at `now_ms`: fills the progress fields of `out` (not job, replica, attempt).
  void Sample(int64_t now_ms, wire::ReplicaProgressT* out);

 private:
  // A file whose growth counts as progress.
  struct Watch {
    int64_t size = -1;  // at the last reading; -1: absent
    int64_t changed_ms = 0;
    // The file had `now_size` bytes (-1: absent) at `at_ms`.
    void Saw(int64_t now_size, int64_t at_ms);
  };
  void SampleRecorder(int64_t now_ms, wire::ReplicaProgressT* out);

  std::string log_path_;
  Watch log_;
  std::shared_ptr<MetricFileReader> metric_reader_;
  uint64_t metric_seen_ = 0;  // the reader's newest reading taken
  Watch metric_;
  std::string recorder_path_;
  std::unique_ptr<FlightRecorderReader> recorder_;  // null until the replica created its file
  uint64_t next_entry_ = 0;  // entries before this one were reported (their starts)
  int64_t start_ms_;
};

}  // namespace cohort::agent
