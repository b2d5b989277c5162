#include "coordinator/study_runner.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace cohort::coordinator {

void StudyRunner::Run(int64_t now_ms) {
  StudyActions actions = studies_.TakeActions(now_ms);
  for (size_t i = 0; i < actions.cancel.size(); ++i) {
    if (JobRecord* job = jobs_.FindJob(actions.cancel[i])) {
      jobs_.Cancel(*job, actions.cancel_reasons[i], now_ms);
    }
  }
  for (TrialJobLaunch& launch : actions.submit) Submit(std::move(launch), now_ms);
}

void StudyRunner::JobEnded(const JobRecord& job, int64_t now_ms) {
  if (job.study.empty()) return;
  studies_.JobEnded(job.name, job.state == JobState::SUCCEEDED, job.message, now_ms);
  Run(now_ms);
}

void StudyRunner::Recover(int64_t now_ms) {
  // A torn tail may have kept a trial but lost its job (submitted again) or its job's end.
  for (TrialJobLaunch& launch : studies_.ActiveTrialJobs()) {
    const JobRecord* job = jobs_.FindJob(launch.job.name);
    if (job == nullptr) {
      spdlog::warn("study {}: trial {} has no job after recovery; submitting it again",
                   launch.study, launch.trial_id);
      Submit(std::move(launch), now_ms);
    } else if (job->finished()) {
      studies_.JobEnded(job->name, job->state == JobState::SUCCEEDED, job->message, now_ms);
    }
  }
  Run(now_ms);
}

void StudyRunner::Submit(TrialJobLaunch launch, int64_t now_ms) {
  if (jobs_.FindJob(launch.job.name)) {
    spdlog::error("study {}: trial {}: a job named {} exists already; not submitted", launch.study,
                  launch.trial_id, launch.job.name);
    return;
  }
  // A trial job is a job: what its file leaves out its queue's defaults give, now.
  const std::vector<std::string> defaulted = ApplyResourceDefaults(queues_, &launch.job);
  if (!defaulted.empty()) launch.spec_yaml = JobSpecToYaml(launch.job);
  JobRecord& job = jobs_.Submit(std::move(launch.job), launch.spec_yaml, now_ms);
  job.study = launch.study;
  job.trial_id = launch.trial_id;
  job.owner = launch.owner;
  for (const std::string& note : defaulted) jobs_.Note(job, note, now_ms);
}

}  // namespace cohort::coordinator
