// MetricForwarder follows the $CLOUD_ML_HP_METRIC_FILE of a tuning trial's chief (JSON lines as
// cloudml-hypertune writes them; common/hypertune.h reads them) and forwards each new line to
// the coordinator as a TrialMeasurement, in file order: one in flight (Outbox stream {kMetric,
// key}), resent after `resend_after`, the next once it is answered. An error that refuses it for
// now (Outbox::Transient, or FAILED_PRECONDITION while this node registers again) leaves it in
// flight to be resent; any other error is logged and the measurement dropped (the coordinator
// refused it for good).
//
// The file is read every `poll_interval`, and a last time once the attempt has ended (nothing
// writes it any more); the forwarder is done when that read's measurements are all answered.
// The reads run on a MetricFileReader's thread (agent/metric_file_reader.h), never on the agent
// loop: Forward asks for them and takes the lines that finished reads found. While a read hangs
// (a dead NFS server) no more lines come and the forwarder is not done, so the trial's final
// status waits; the loop, its heartbeats and every other attempt go on.
// The agent holds a trial's final status until then: the coordinator judges the trial by its
// measurements when it hears that the job ended.
//
// Only the chief's file is followed (Vertex reads the chief's metrics too). Every attempt reads
// its file from the start, so after a restart the lines of an earlier attempt are sent again;
// the coordinator treats measurements as idempotent by (trial, step, timestamp).
//
// Thread safety: none; the agent loop owns it. Lifetime: `outbox` and `clock` outlive it; the
// reader may be shared (the progress probe takes the file's size from it).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "agent/metric_file_reader.h"
#include "agent/outbox.h"
#include "common/clock.h"
#include "common/status.h"

namespace cohort::agent {

class MetricForwarder {
 public:
  // `key` names the attempt's streams in the outbox; job, replica and trial go into each
  // measurement (a line's own "trial" wins over `trial`). `reader` tails the file from its
  // start; `answered`: how many of its measurements the coordinator already has (a restarted
  // agent's, agent/handoff.h), which are read again and not sent.
  MetricForwarder(Outbox& outbox, Clock& clock, std::string key,
                  std::shared_ptr<MetricFileReader> reader, std::string job, std::string replica,
                  std::string trial, std::chrono::milliseconds poll_interval,
                  std::chrono::milliseconds resend_after, uint64_t answered = 0);

  // Asks for a read when the poll interval has passed (or for the last time once `ended`), takes
  // the lines the reads finished since found, then sends the oldest unanswered measurement if
  // the stream is ready.
  void Forward(bool ended);
  // The coordinator's Ack or error for one of our measurements.
  void OnAnswer(const Outbox::Answer& answer, const Status& error);

  // The file was read for the last time and every measurement of it answered.
  bool done() const { return final_read_ && queue_.empty(); }
  // Measurements the coordinator has answered, those before this forwarder's start included.
  uint64_t answered() const { return answered_; }

 private:
  Outbox::Stream stream() const { return {Outbox::Kind::kMetric, key_}; }
  void TakeLines();

  Outbox& outbox_;
  Clock& clock_;
  std::string key_, job_, replica_, trial_;
  std::chrono::milliseconds poll_interval_, resend_after_;
  std::shared_ptr<MetricFileReader> reader_;
  std::deque<wire::TrialMeasurementT> queue_;  // the front is in flight
  uint64_t answered_ = 0;                      // measurements answered so far
  uint64_t skip_ = 0;  // measurements read again that an earlier image of the agent delivered
  std::chrono::milliseconds next_read_{0};
  uint64_t final_reading_ = 0;  // the last read's number; 0: not asked for yet
  bool final_read_ = false;     // that read finished and its lines are queued
  bool warned_ = false;
};

}  // namespace cohort::agent
