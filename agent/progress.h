// ProgressProbe measures the progress of one running replica attempt for the coordinator's hang
// watchdog (coordinator/watchdog.h), which compares it across the job's replicas; the agent takes
// one reading per heartbeat and sends it as wire::ReplicaProgress.
//
// What it watches:
//  - the attempt's log file (its stdout and stderr) and the replica's $CLOUD_ML_HP_METRIC_FILE:
//    when a reading finds a file's size changed, the file made progress at that reading;
//  - the replica's flight recorders (common/flight_recorder.h, the file COHORT_FLIGHT_RECORDER
//    names, agent/replica_env.h sets it; one file per rank where the replica runs several, as
//    torchrun inside it does: agent/flight_recorder_poller.h), when it uses Cohort collectives.
//    The replica is where its slowest rank is. Its ranks run the same sequence of operations on
//    one communicator, so a rank is behind another when it completed fewer, or completed as many
//    but has not entered the next one; the replica's completed and current operation and their
//    ages are that rank's (of ranks equally far, the one that waited longest), and so is `rank`
//    where there are several. So a rank stuck
//    outside the collectives while its siblings wait in the next one shows as the replica not
//    having entered it, and the watchdog names the replica stuck rather than its peers. Its
//    operation starts (for the stragglers) are each operation's latest start among its ranks,
//    reported once every rank seen has entered it. A rank whose process exited normally is done
//    (FlightRecorderSnapshot::exited) and counts for none of this; once every rank has exited,
//    the replica says so (ranks_exited), and the watchdog leaves it alone while it finishes.
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
//  - the recorders' snapshots, from its FlightRecorderPoller (agent/flight_recorder_poller.h):
//    the operations entered and completed after the snapshot show at the next reading. The ages
//    (completed_idle_ms, current_ms) count to this reading, by the host's monotonic clock, from
//    what the newest snapshot showed, so they never claim progress that no snapshot saw.
// While a reading hangs, its file shows no progress (its storage makes none) and the readings go
// on: a replica with a recorder keeps has_recorder and its last known operation, whose ages grow;
// so does a rank whose file a reading could not snapshot.
// The log is in the agent's local work dir: the probe stats it itself.
//
// Thread safety: none; the agent loop owns it. Times are the agent's clock (milliseconds).
#pragma once

#include <cstdint>
#include <map>
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
  // recorder (COHORT_FLIGHT_RECORDER unset, empty or "off").
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
  // What the newest snapshot of one rank's recorder file showed of the job's communicator.
  struct Rank {
    int32_t pid = 0;            // its writer: another one (a restarted rank) starts entries anew
    int64_t anchor_ns = 0;      // when its writer set it up
    uint64_t next_entry = 0;    // its entries before this one were taken (their starts)
    int64_t newest_end_ns = 0;  // the newest end of an operation in it; 0: none
    int64_t completed_seq = -1;
    int64_t current_seq = -1;  // -1: in no operation
    std::string current_op;
    std::string current_algorithm;
    int64_t current_bytes = 0;
    int64_t current_start_ns = 0;  // when it entered the current one
    bool exited = false;           // its process exited normally: done, not behind
    int32_t rank = -1;             // the RANK its process was given (-1: unknown)
    // How far along the job's operations it is: 2s + 1 while in operation s; 2c + 2 once it has
    // completed c and entered nothing since; 0 before it entered any.
    int64_t Position() const {
      return current_seq >= 0 ? 2 * current_seq + 1 : 2 * completed_seq + 2;
    }
    // Since when it has waited where it is: in its current operation, else since its last ended.
    int64_t WaitingSinceNs() const { return current_seq >= 0 ? current_start_ns : newest_end_ns; }
  };
  // An operation some ranks entered and others not yet: each one's start (Unix microseconds), by
  // file.
  using PendingStart = std::map<int, int64_t>;
  void SampleRecorder(int64_t now_ms, wire::ReplicaProgressT* out);
  // A new snapshot of file `file`: updates its rank and notes the operations it entered since.
  void Absorb(int file, const FlightRecorderSnapshot& snap);
  // Moves the operations every rank has entered from pending_starts_ to `out`, in order.
  void ReportStarts(wire::ReplicaProgressT* out);

  std::string log_path_;
  Watch log_;
  std::shared_ptr<MetricFileReader> metric_reader_;
  uint64_t metric_seen_ = 0;  // the reader's newest reading taken
  Watch metric_;
  std::shared_ptr<FlightRecorderPoller> recorder_poller_;
  uint64_t recorder_seen_ = 0;  // the poller's newest reading taken
  std::map<int, Rank> ranks_;   // by file (FlightRecorderPoller::FileSnapshot::file)
  std::map<int64_t, PendingStart> pending_starts_;  // by operation
  int64_t reported_through_ = -1;  // the starts of operations up to this one were reported
  int64_t start_ms_;
};

}  // namespace cohort::agent
