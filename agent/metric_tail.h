// MetricTail follows one trial replica's $CLOUD_ML_HP_METRIC_FILE (common/hypertune.h: JSON lines
// as cloudml-hypertune writes them) and turns each new line into a TrialMeasurement for the
// coordinator, in file order. The agent sends the front one, pops it when acked, and polls again.
//
// The agent tails the chief's file only (Vertex reads the chief's metrics too). Every attempt
// reads its file from the start, so after a restart the lines of an earlier attempt are sent
// again; the coordinator treats measurements as idempotent by (trial, step, timestamp).
//
// Built only where common/hypertune.h exists; Create() returns nullptr otherwise.
// Thread safety: none; the agent loop owns it.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "common/schema/cohort_generated.h"

namespace cohort::agent {

class MetricTail {
 public:
  virtual ~MetricTail() = default;
  static std::unique_ptr<MetricTail> Create(const std::string& path, const std::string& job,
                                            const std::string& replica, const std::string& trial);

  // Reads the lines appended since the last call and queues their measurements.
  virtual void Poll() = 0;
  std::deque<wire::TrialMeasurementT>& queue() { return queue_; }

 protected:
  std::deque<wire::TrialMeasurementT> queue_;
};

}  // namespace cohort::agent
