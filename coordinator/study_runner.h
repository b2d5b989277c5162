// StudyRunner carries out what the studies (StudyController) ask of the jobs (JobController): it
// submits their trial jobs and cancels those they stop, tells a study when one of its trial jobs
// ended, and after a recovery or a rollback puts trials and jobs back in step (a trial whose job
// is missing is submitted again; one whose job ended meanwhile is told so).
//
// Thread safety: none; the coordinator loop calls it. Lifetime: both controllers outlive it (they
// may be assigned anew, as a rollback does, but not destroyed).
#pragma once

#include <cstdint>

#include "coordinator/job_controller.h"
#include "coordinator/queue_config.h"
#include "coordinator/study_controller.h"

namespace cohort::coordinator {

class StudyRunner {
 public:
  // `queues` (outliving it) give each trial job the defaults of its queue (ApplyResourceDefaults).
  StudyRunner(StudyController& studies, JobController& jobs, const QueueConfig& queues)
      : studies_(studies), jobs_(jobs), queues_(queues) {}

  // Cancels and submits the trial jobs the studies ask for now.
  void Run(int64_t now_ms);
  // `job` ended: its study (if it is a trial job) is told, and asked what next.
  void JobEnded(const JobRecord& job, int64_t now_ms);
  // After the state was loaded: every active trial has its job, and knows if it ended.
  void Recover(int64_t now_ms);

 private:
  void Submit(TrialJobLaunch launch, int64_t now_ms);

  StudyController& studies_;
  JobController& jobs_;
  const QueueConfig& queues_;
};

}  // namespace cohort::coordinator
