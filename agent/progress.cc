#include "agent/progress.h"

#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "agent/flight_recorder_poller.h"
#include "agent/metric_file_reader.h"
#include "common/flight_recorder.h"

namespace cohort::agent {

ProgressProbe::ProgressProbe(std::string log_path, std::shared_ptr<MetricFileReader> metric,
                             std::shared_ptr<FlightRecorderPoller> recorder, int64_t start_ms)
    : log_path_(std::move(log_path)),
      metric_reader_(std::move(metric)),
      recorder_poller_(std::move(recorder)),
      start_ms_(start_ms) {
  log_.changed_ms = start_ms;
  metric_.changed_ms = start_ms;
}

ProgressProbe::~ProgressProbe() = default;

void ProgressProbe::Watch::Saw(int64_t now_size, int64_t at_ms) {
  if (now_size == size) return;
  // The first reading of a file that exists already counts as growth only if it has content.
  if (size != -1 || now_size > 0) changed_ms = at_ms;
  size = now_size;
}

void ProgressProbe::Sample(int64_t now_ms, wire::ReplicaProgressT* out) {
  struct stat st;
  log_.Saw(!log_path_.empty() && ::stat(log_path_.c_str(), &st) == 0 ? st.st_size : -1, now_ms);
  out->log_idle_ms = now_ms - log_.changed_ms;
  if (metric_reader_) {
    // The newest stat finished (if it is new) is seen now; a fresh one for the next reading.
    MetricFileReader::Reading metric = metric_reader_->Latest();
    if (metric.done > metric_seen_) {
      metric_seen_ = metric.done;
      metric_.Saw(metric.size, now_ms);
    }
    metric_reader_->Request();
  }
  out->metric_idle_ms = now_ms - metric_.changed_ms;
  SampleRecorder(now_ms, out);
}

namespace {

// Operations numbered alike on every rank of a communicator (not point-to-point, whose number is
// the user's tag, nor the parameter server's requests).
bool IsCollective(FlightOp op) {
  return op != FlightOp::kNone && op != FlightOp::kSend && op != FlightOp::kRecv &&
         op != FlightOp::kPsPush && op != FlightOp::kPsPull;
}

constexpr size_t kMaxStartsPerReading = 256;

}  // namespace

void ProgressProbe::SampleRecorder(int64_t now_ms, wire::ReplicaProgressT* out) {
  out->has_recorder = false;
  out->completed_idle_ms = now_ms - start_ms_;
  if (!recorder_poller_) return;
  // The newest snapshot finished (if it is new) is seen now; a fresh one for the next reading.
  FlightRecorderPoller::Reading reading = recorder_poller_->Take();
  if (reading.done > recorder_seen_) {
    recorder_seen_ = reading.done;
    if (reading.snapshot) Absorb(*reading.snapshot, out);
  }
  recorder_poller_->Request();
  if (!recorder_.seen) return;  // not created yet, or no recorder at all
  out->has_recorder = true;
  // Ages to now: what no snapshot saw did not happen yet, as far as the watchdog knows.
  const int64_t now_ns = FlightClockNs();
  if (recorder_.newest_end_ns > 0) {
    out->completed_idle_ms = (now_ns - recorder_.newest_end_ns) / 1'000'000;
  }
  if (recorder_.completed_seq >= 0) out->completed_seq = recorder_.completed_seq;
  if (recorder_.current_seq >= 0) {
    out->current_seq = recorder_.current_seq;
    out->current_op = recorder_.current_op;
    out->current_algorithm = recorder_.current_algorithm;
    out->current_bytes = recorder_.current_bytes;
    out->current_ms = (now_ns - recorder_.current_start_ns) / 1'000'000;
  }
}

void ProgressProbe::Absorb(const FlightRecorderSnapshot& snap, wire::ReplicaProgressT* out) {
  // The job's communicator is the first the process built (ranks build theirs in the same order).
  const FlightRecorderSnapshot::Communicator* comm = nullptr;
  for (const auto& c : snap.communicators) {
    if (comm == nullptr || c.comm_id < comm->comm_id) comm = &c;
  }
  const int64_t wall_offset_ns = snap.anchor_wall_ns - snap.anchor_monotonic_ns;
  int64_t newest_end_ns = 0;
  for (const FlightEntry& e : snap.recent) {
    const FlightRecord& r = e.record;
    if (comm == nullptr || r.comm_id != comm->comm_id || !IsCollective(r.op)) continue;
    if (r.outcome == FlightOutcome::kOk || r.outcome == FlightOutcome::kFailed) {
      newest_end_ns = std::max(newest_end_ns, r.end_ns);
    }
    if (e.index >= next_entry_) {
      // Entering an operation is the caller's call (enqueue), not when a queue ran it.
      out->starts.emplace_back(static_cast<int64_t>(r.op_seq),
                               (r.enqueue_ns + wall_offset_ns) / 1000);
    }
  }
  if (out->starts.size() > kMaxStartsPerReading) {
    out->starts.erase(out->starts.begin(), out->starts.end() - kMaxStartsPerReading);
  }
  next_entry_ = snap.entries;
  recorder_ = Recorder();
  recorder_.seen = true;
  recorder_.newest_end_ns = newest_end_ns;
  if (comm == nullptr) return;
  if (comm->last_completed_seq) recorder_.completed_seq = *comm->last_completed_seq;
  if (comm->current) {
    const FlightRecord& r = comm->current->record;
    recorder_.current_seq = r.op_seq;
    recorder_.current_op = std::string(FlightOpName(r.op));
    recorder_.current_algorithm = std::string(FlightAlgorithmName(r.algorithm));
    recorder_.current_bytes = static_cast<int64_t>(r.bytes);
    recorder_.current_start_ns = snap.taken_ns - comm->current_elapsed_ns;
  }
}

}  // namespace cohort::agent
