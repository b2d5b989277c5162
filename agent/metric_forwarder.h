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
// The agent holds a trial's final status until then: the coordinator judges the trial by its
// measurements when it hears that the job ended.
//
// Only the chief's file is followed (Vertex reads the chief's metrics too). Every attempt reads
// its file from the start, so after a restart the lines of an earlier attempt are sent again;
// the coordinator treats measurements as idempotent by (trial, step, timestamp).
//
// Thread safety: none; the agent loop owns it. Lifetime: `outbox` and `clock` outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>

#include "agent/outbox.h"
#include "common/clock.h"
#include "common/hypertune.h"
#include "common/status.h"

namespace cohort::agent {

class MetricForwarder {
 public:
  // `key` names the attempt's streams in the outbox; job, replica and trial go into each
  // measurement (a line's own "trial" wins over `trial`).
  MetricForwarder(Outbox& outbox, Clock& clock, std::string key, std::string path, std::string job,
                  std::string replica, std::string trial, std::chrono::milliseconds poll_interval,
                  std::chrono::milliseconds resend_after);

  // Reads new lines when the poll interval has passed (or for the last time once `ended`), then
  // sends the oldest unanswered measurement if the stream is ready.
  void Forward(bool ended);
  // The coordinator's Ack or error for one of our measurements.
  void OnAnswer(const Outbox::Answer& answer, const Status& error);

  // The file was read for the last time and every measurement of it answered.
  bool done() const { return final_read_ && queue_.empty(); }

 private:
  Outbox::Stream stream() const { return {Outbox::Kind::kMetric, key_}; }
  void Read();

  Outbox& outbox_;
  Clock& clock_;
  std::string key_, job_, replica_, trial_;
  std::chrono::milliseconds poll_interval_, resend_after_;
  MetricFileTailer tailer_;
  std::deque<wire::TrialMeasurementT> queue_;  // the front is in flight
  uint64_t answered_ = 0;                      // measurements answered so far
  std::chrono::milliseconds next_read_{0};
  bool final_read_ = false;
  bool warned_ = false;
};

}  // namespace cohort::agent
