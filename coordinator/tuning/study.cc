#include "coordinator/tuning/study.h"

#include <algorithm>

#include "common/enum_names.h"

namespace cohort::coordinator::tuning {

namespace {

constexpr EnumName<TrialState> kTrialStateNames[] = {
    {TrialState::kActive, "ACTIVE"},       {TrialState::kStopping, "STOPPING"},
    {TrialState::kSucceeded, "SUCCEEDED"}, {TrialState::kInfeasible, "INFEASIBLE"},
    {TrialState::kFailed, "FAILED"},       {TrialState::kStopped, "STOPPED"}};
constexpr EnumName<StudyState> kStudyStateNames[] = {{StudyState::kActive, "ACTIVE"},
                                                     {StudyState::kSucceeded, "SUCCEEDED"},
                                                     {StudyState::kFailed, "FAILED"},
                                                     {StudyState::kCancelled, "CANCELLED"}};

bool Finished(TrialState s) { return s != TrialState::kActive && s != TrialState::kStopping; }

}  // namespace

std::string_view TrialStateName(TrialState state) { return NameIn(kTrialStateNames, state, "?"); }

std::string_view StudyStateName(StudyState state) { return NameIn(kStudyStateNames, state, "?"); }

StatusOr<std::unique_ptr<Study>> Study::Create(StudySpec spec) {
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<Suggester> suggester, MakeSuggester(spec));
  return std::unique_ptr<Study>(new Study(std::move(spec), std::move(suggester)));
}

const Trial* Study::FindTrial(const std::string& trial_id) const {
  for (const auto& t : trials_) {
    if (t.id == trial_id) return &t;
  }
  return nullptr;
}

Trial* Study::MutableTrial(const std::string& trial_id) {
  return const_cast<Trial*>(FindTrial(trial_id));
}

int Study::active_trials() const {
  return static_cast<int>(std::count_if(trials_.begin(), trials_.end(),
                                        [](const Trial& t) { return !Finished(t.state); }));
}

int Study::failed_trials() const {
  return static_cast<int>(std::count_if(trials_.begin(), trials_.end(), [](const Trial& t) {
    return t.state == TrialState::kFailed;
  }));
}

const Trial* Study::BestTrial() const {
  const Trial* best = nullptr;
  const bool maximize = spec_.goal == MetricGoal::kMaximize;
  for (const auto& t : trials_) {
    if (!Finished(t.state) || !t.final_metric) continue;
    if (best == nullptr || (maximize ? *t.final_metric > *best->final_metric
                                     : *t.final_metric < *best->final_metric)) {
      best = &t;
    }
  }
  return best;
}

StatusOr<std::vector<TrialLaunch>> Study::NextTrials() {
  std::vector<TrialLaunch> out;
  while (state_ == StudyState::kActive && !exhausted_ && active_trials() < spec_.parallel_trials &&
         static_cast<int>(trials_.size()) < spec_.max_trials) {
    std::vector<TrialObservation> completed;
    std::vector<Assignment> pending;
    for (const auto& t : trials_) {
      if (Finished(t.state)) {
        completed.push_back({t.parameters, t.final_metric});
      } else {
        pending.push_back(t.parameters);
      }
    }
    COHORT_ASSIGN_OR_RETURN(std::optional<Assignment> next,
                            suggester_->Suggest(completed, pending));
    if (!next) {
      exhausted_ = true;
      break;
    }
    Trial trial;
    trial.id = std::to_string(trials_.size() + 1);
    trial.parameters = std::move(*next);
    trial.job = TrialJobName(spec_.name, trial.id);
    COHORT_ASSIGN_OR_RETURN(JobSpec job, MakeTrialJob(spec_, trial.id, trial.parameters));
    out.push_back({trial.id, std::move(job)});
    trials_.push_back(std::move(trial));
  }
  UpdateState();
  return out;
}

Status Study::RestoreTrial(const std::string& trial_id, const Assignment& parameters) {
  if (FindTrial(trial_id) != nullptr) return AlreadyExists("trial " + trial_id + " exists");
  COHORT_RETURN_IF_ERROR(ValidateAssignment(spec_, parameters));
  Trial trial;
  trial.id = trial_id;
  trial.parameters = parameters;
  trial.job = TrialJobName(spec_.name, trial_id);
  trials_.push_back(std::move(trial));
  return Status::Ok();
}

StatusOr<bool> Study::AddMeasurement(const std::string& trial_id, int64_t step,
                                     const std::map<std::string, double>& metrics) {
  Trial* trial = MutableTrial(trial_id);
  if (trial == nullptr) return NotFound("study " + spec_.name + ": no trial " + trial_id);
  auto it = metrics.find(spec_.metric_id);
  if (it == metrics.end() || Finished(trial->state)) return false;
  trial->measurements.push_back({step, it->second});
  trial->final_metric = it->second;
  if (trial->state != TrialState::kActive || !spec_.early_stopping ||
      !spec_.early_stopping->median || state_ != StudyState::kActive) {
    return false;
  }
  std::vector<std::vector<Measurement>> completed;
  for (const auto& t : trials_) {
    if ((t.state == TrialState::kSucceeded || t.state == TrialState::kStopped) &&
        !t.measurements.empty()) {
      completed.push_back(t.measurements);
    }
  }
  MedianStoppingRule rule(spec_.goal, *spec_.early_stopping);
  StoppingDecision d = rule.Evaluate(completed, trial->measurements);
  if (!d.stop) return false;
  trial->state = TrialState::kStopping;
  trial->message = d.reason;
  return true;
}

Status Study::TrialJobEnded(const std::string& trial_id, bool succeeded,
                            const std::string& message) {
  Trial* trial = MutableTrial(trial_id);
  if (trial == nullptr) return NotFound("study " + spec_.name + ": no trial " + trial_id);
  if (Finished(trial->state)) return Status::Ok();  // repeated report
  if (trial->state == TrialState::kStopping) {
    trial->state = TrialState::kStopped;
  } else if (!succeeded) {
    trial->state = TrialState::kFailed;
    trial->message = message;
  } else if (trial->final_metric) {
    trial->state = TrialState::kSucceeded;
  } else {
    trial->state = TrialState::kInfeasible;
    trial->message = "the job succeeded without reporting metric '" + spec_.metric_id + "'";
  }
  UpdateState();
  return Status::Ok();
}

void Study::Cancel() {
  if (state_ != StudyState::kActive) return;
  state_ = StudyState::kCancelled;
  message_ = "cancelled";
}

void Study::UpdateState() {
  if (state_ != StudyState::kActive) return;
  const int failed = failed_trials();
  if (spec_.max_failed_trials > 0 && failed >= spec_.max_failed_trials) {
    state_ = StudyState::kFailed;
    message_ = std::to_string(failed) + " trials failed (max_failed_trials " +
               std::to_string(spec_.max_failed_trials) + ")";
    return;
  }
  if (active_trials() > 0) return;
  const int finished = static_cast<int>(trials_.size());
  if (finished >= spec_.max_trials || exhausted_) {
    state_ = StudyState::kSucceeded;
    message_ = std::to_string(finished) + " trials finished" +
               (exhausted_ && finished < spec_.max_trials ? " (search space exhausted)" : "");
  }
}

}  // namespace cohort::coordinator::tuning
