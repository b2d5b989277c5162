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
// reading interval (a heartbeat).
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

class ProgressProbe {
 public:
  ProgressProbe(std::string log_path, std::string metric_path, std::string recorder_path,
                int64_t start_ms);
  ~ProgressProbe();
  ProgressProbe(const ProgressProbe&) = delete;
  ProgressProbe& operator=(const ProgressProbe&) = delete;

  // One reading at `now_ms`: fills the progress fields of `out` (not job, replica, attempt).
  void Sample(int64_t now_ms, wire::ReplicaProgressT* out);

 private:
  // A file whose growth counts as progress.
  struct Watch {
    std::string path;
    int64_t size = -1;  // at the last reading; -1: absent
    int64_t changed_ms = 0;
    int64_t IdleMs(int64_t now_ms);
  };
  void SampleRecorder(int64_t now_ms, wire::ReplicaProgressT* out);

  Watch log_;
  Watch metric_;
  std::string recorder_path_;
  std::unique_ptr<FlightRecorderReader> recorder_;  // null until the replica created its file
  uint64_t next_entry_ = 0;  // entries before this one were reported (their starts)
  int64_t start_ms_;
};

}  // namespace cohort::agent
