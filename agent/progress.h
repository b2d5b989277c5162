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
// Neither the metric file nor the flight recorder is read by the probe itself: the metric file
// lies on the job's output storage (typically NFS, which may hang), and the recorder wherever
// the job's pool env points COHORT_FLIGHT_RECORDER (by default the attempt's dir; NFS or a FUSE
// mount if the job says so). Each is read on a thread of the attempt's (agent/reading_thread.h):
// each reading takes what the newest finished reading of that thread found, as seen at this
// reading, and asks for a fresh one for the next. So their progress is seen up to one reading
// later than if the probe read them itself:
//  - the metric file's size, from its MetricFileReader (agent/metric_file_reader.h): growth is
//    exact to two reading intervals;
//  - the recorder's snapshot, from its FlightRecorderPoller (agent/flight_recorder_poller.h):
//    the operations entered and completed after the snapshot show at the next reading. The ages
//    (completed_idle_ms, current_ms) count to this reading, by the host's monotonic clock, from
//    what the newest snapshot showed, so they never claim progress that no snapshot saw.
// While a reading hangs, its file shows no progress (its storage makes none) and the readings go
// on: a replica with a recorder keeps has_recorder and its last known operation, whose ages grow.
// The log is in the agent's local work dir: the probe stats it itself.
//
// Thread safety: none; the agent loop owns it. Times are the agent's clock (milliseconds).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/schema/cohort_generated.h"

namespace cohort {
struct FlightRecorderSnapshot;
}

namespace cohort::agent {

class FlightRecorderPoller;
class MetricFileReader;

class ProgressProbe {
 public:
  // metric: null when the attempt has no metric file; recorder: null when it has no flight
  // recorder (COHORT_FLIGHT_RECORDER unset or empty).
  ProgressProbe(std::string log_path, std::shared_ptr<MetricFileReader> metric,
                std::shared_ptr<FlightRecorderPoller> recorder, int64_t start_ms);
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
  // What the newest snapshot of the recorder showed of the job's communicator.
  struct Recorder {
    bool seen = false;          // a snapshot was taken: the replica has a recorder
    int64_t newest_end_ns = 0;  // the newest end of an operation in it; 0: none
    int64_t completed_seq = -1;
    int64_t current_seq = -1;  // -1: in no operation
    std::string current_op;
    std::string current_algorithm;
    int64_t current_bytes = 0;
    int64_t current_start_ns = 0;  // when it entered the current one
  };
  void SampleRecorder(int64_t now_ms, wire::ReplicaProgressT* out);
  // A new snapshot: updates recorder_ and lists in `out` the operations entered since the last.
  void Absorb(const FlightRecorderSnapshot& snap, wire::ReplicaProgressT* out);

  std::string log_path_;
  Watch log_;
  std::shared_ptr<MetricFileReader> metric_reader_;
  uint64_t metric_seen_ = 0;  // the reader's newest reading taken
  Watch metric_;
  std::shared_ptr<FlightRecorderPoller> recorder_poller_;
  uint64_t recorder_seen_ = 0;  // the poller's newest reading taken
  Recorder recorder_;
  uint64_t next_entry_ = 0;  // entries before this one were reported (their starts)
  int64_t start_ms_;
};

}  // namespace cohort::agent
