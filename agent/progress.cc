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
// Operations some ranks entered and others not yet, at most (the oldest are dropped: a rank that
// stays that far behind is stuck, which the positions say).
constexpr size_t kMaxPendingStarts = 1024;

}  // namespace

void ProgressProbe::SampleRecorder(int64_t now_ms, wire::ReplicaProgressT* out) {
  out->has_recorder = false;
  out->completed_idle_ms = now_ms - start_ms_;
  if (!recorder_poller_) return;
  // The newest snapshots finished (if they are new) are seen now; fresh ones for the next reading.
  FlightRecorderPoller::Reading reading = recorder_poller_->Take();
  if (reading.done > recorder_seen_) {
    recorder_seen_ = reading.done;
    for (const auto& [file, snapshot] : reading.snapshots) Absorb(file, snapshot);
    ReportStarts(out);
  }
  recorder_poller_->Request();
  if (ranks_.empty()) return;  // not created yet, or no recorder at all
  out->has_recorder = true;
  // The replica is where its slowest rank is; of ranks equally far, the one waiting longest. Ranks
  // that exited are done: only when all have does one of them say where the replica ended.
  out->ranks_exited = std::all_of(ranks_.begin(), ranks_.end(),
                                  [](const auto& file_rank) { return file_rank.second.exited; });
  const Rank* slowest = nullptr;
  for (const auto& [file, rank] : ranks_) {
    if (rank.exited && !out->ranks_exited) continue;
    if (slowest == nullptr || std::pair(rank.Position(), rank.WaitingSinceNs()) <
                                  std::pair(slowest->Position(), slowest->WaitingSinceNs())) {
      slowest = &rank;
    }
  }
  // Ages to now: what no snapshot saw did not happen yet, as far as the watchdog knows.
  const int64_t now_ns = FlightClockNs();
  if (slowest->newest_end_ns > 0) {
    out->completed_idle_ms = (now_ns - slowest->newest_end_ns) / 1'000'000;
  }
  if (ranks_.size() > 1) out->rank = slowest->rank;
  if (slowest->completed_seq >= 0) out->completed_seq = slowest->completed_seq;
  if (slowest->current_seq >= 0) {
    out->current_seq = slowest->current_seq;
    out->current_op = slowest->current_op;
    out->current_algorithm = slowest->current_algorithm;
    out->current_bytes = slowest->current_bytes;
    out->current_ms = (now_ns - slowest->current_start_ns) / 1'000'000;
  }
}

void ProgressProbe::Absorb(int file, const FlightRecorderSnapshot& snap) {
  Rank& rank = ranks_[file];
  if (rank.pid != snap.pid || rank.anchor_ns != snap.anchor_monotonic_ns) {
    // A new writer (the first snapshot, or a rank restarted inside the replica): its entries and
    // its operations' numbers start anew. Where ranks restart, they all do (torchrun restarts
    // every rank): the replica's numbers start anew too, and what the old writer entered is void.
    if (rank.pid != 0) {
      reported_through_ = -1;
      for (auto& [seq, starts] : pending_starts_) starts.erase(file);
    }
    rank = Rank();
    rank.pid = snap.pid;
    rank.anchor_ns = snap.anchor_monotonic_ns;
  }
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
    const int64_t seq = r.op_seq;
    if (e.index >= rank.next_entry && seq > reported_through_) {
      // Entering an operation is the caller's call (enqueue), not when a queue ran it.
      pending_starts_[seq][file] = (r.enqueue_ns + wall_offset_ns) / 1000;
    }
  }
  while (pending_starts_.size() > kMaxPendingStarts) pending_starts_.erase(pending_starts_.begin());
  rank.next_entry = snap.entries;
  rank.exited = snap.exited;
  rank.rank = snap.rank;
  rank.newest_end_ns = newest_end_ns;
  rank.completed_seq = -1;
  rank.current_seq = -1;
  if (comm == nullptr) return;
  if (comm->last_completed_seq) rank.completed_seq = *comm->last_completed_seq;
  if (comm->current) {
    const FlightRecord& r = comm->current->record;
    rank.current_seq = r.op_seq;
    rank.current_op = std::string(FlightOpName(r.op));
    rank.current_algorithm = std::string(FlightAlgorithmName(r.algorithm));
    rank.current_bytes = static_cast<int64_t>(r.bytes);
    rank.current_start_ns = snap.taken_ns - comm->current_elapsed_ns;
  }
}

void ProgressProbe::ReportStarts(wire::ReplicaProgressT* out) {
  // An operation is reported once every rank still running has entered it.
  const auto entered_by_all = [this](const PendingStart& starts) {
    return std::all_of(ranks_.begin(), ranks_.end(), [&](const auto& file_rank) {
      return file_rank.second.exited || starts.count(file_rank.first) > 0;
    });
  };
  for (auto it = pending_starts_.begin(); it != pending_starts_.end();) {
    if (it->second.empty() || !entered_by_all(it->second)) {
      ++it;
      continue;
    }
    int64_t latest_us = it->second.begin()->second;
    for (const auto& [file, start_us] : it->second) latest_us = std::max(latest_us, start_us);
    out->starts.emplace_back(it->first, latest_us);
    reported_through_ = std::max(reported_through_, it->first);
    it = pending_starts_.erase(it);
  }
  if (out->starts.size() > kMaxStartsPerReading) {
    out->starts.erase(out->starts.begin(), out->starts.end() - kMaxStartsPerReading);
  }
}

}  // namespace cohort::agent
