// ObservabilityService answers the clients' read-only questions about what jobs did: a job's
// training metrics (`cohort metrics JOB`: GetJobMetrics, from TrainingMetrics) and accounting
// (`cohort usage`: GetUsage, from every job the JobController holds: coordinator/job_usage.h).
// Answers go to the Outbox like every other reply; an unknown job gets NOT_FOUND naming it.
//
// Thread safety: none; the coordinator loop calls it. Lifetime: what it is given outlives it.
#pragma once

#include <cstdint>

#include "common/messaging.h"
#include "coordinator/job_controller.h"
#include "coordinator/outbox.h"
#include "coordinator/training_metrics.h"

namespace cohort::coordinator {

class ObservabilityService {
 public:
  ObservabilityService(const JobController& jobs, const TrainingMetrics& training, Outbox& outbox)
      : jobs_(jobs), training_(training), outbox_(outbox) {}

  // Answers `m` and returns true when it is one of this service's requests; false otherwise.
  bool Handle(const RoutedMessage& m, int64_t now_ms);

 private:
  void OnGetJobMetrics(const RoutedMessage& m, const wire::GetJobMetrics& req);
  void OnGetUsage(const RoutedMessage& m, const wire::GetUsage& req, int64_t now_ms);

  const JobController& jobs_;
  const TrainingMetrics& training_;
  Outbox& outbox_;
};

}  // namespace cohort::coordinator
