// Study is the state of one hyperparameter-tuning study, without sockets or clocks: the
// coordinator's study controller owns one per study, feeds it events (measurements, trial jobs
// ending) and launches the jobs it asks for. It decides which trials to start (through the
// spec's Suggester), when one is stopped early (MedianStoppingRule), each trial's final metric,
// the best trial, and when the study is over.
//
// Lifecycle of a trial: ACTIVE (its job was created) -> SUCCEEDED (job succeeded and the metric
// was reported), INFEASIBLE (job succeeded without reporting the metric), FAILED (job failed),
// STOPPING (the median rule asked for its job to be cancelled) -> STOPPED. A trial's final metric
// is the last reported value of the study metric (Vertex's final measurement); SUCCEEDED and
// STOPPED trials with a metric are what the search learns from and what the median rule compares.
//
// The study ends SUCCEEDED when max_trials trials have finished or the search is exhausted and no
// trial is running; FAILED when max_failed_trials trials failed (0: no limit); CANCELLED on
// Cancel(). Trial ids are "1", "2", ... in creation order. The caller calls NextTrials() after
// every event; when the study ends FAILED or CANCELLED with trials still running, the caller
// cancels their jobs (TrialJobEnded still records how they ended).
//
// Restart: the suggesters are deterministic in (seed, history), so a coordinator that journals
// each trial's creation (id, parameters) and end can rebuild a Study with RestoreTrial() and get
// the same future suggestions.
//
// Thread safety: none; call from the coordinator loop.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/status.h"
#include "common/study_spec.h"
#include "coordinator/tuning/median_stopping.h"
#include "coordinator/tuning/suggester.h"

namespace cohort::coordinator::tuning {

enum class TrialState { kActive, kStopping, kSucceeded, kInfeasible, kFailed, kStopped };
enum class StudyState { kActive, kSucceeded, kFailed, kCancelled };

std::string_view TrialStateName(TrialState state);  // "ACTIVE", "STOPPING", "SUCCEEDED", ...
std::string_view StudyStateName(StudyState state);  // "ACTIVE", "SUCCEEDED", "FAILED", ...

struct Trial {
  std::string id;
  Assignment parameters;
  TrialState state = TrialState::kActive;
  std::string job;                        // TrialJobName(study, id)
  std::vector<Measurement> measurements;  // of the study metric, in arrival order
  std::optional<double> final_metric;
  std::string message;
};

// A trial to launch: its id and the job to submit.
struct TrialLaunch {
  std::string trial_id;
  JobSpec job;
};

class Study {
 public:
  static StatusOr<std::unique_ptr<Study>> Create(StudySpec spec);

  // Trials to start now: as many as keep parallel_trials running without passing max_trials,
  // fewer when the search is exhausted. Empty when the study is over.
  StatusOr<std::vector<TrialLaunch>> NextTrials();

  // A measurement line from a trial's metric file (tag -> value). Values of other tags are
  // ignored. Returns true when the trial should now be stopped: the caller cancels its job and
  // later reports the end with TrialJobEnded (any outcome then counts as STOPPED).
  StatusOr<bool> AddMeasurement(const std::string& trial_id, int64_t step,
                                const std::map<std::string, double>& metrics);

  // The trial's job reached a final state. `message`: why, for a failure.
  Status TrialJobEnded(const std::string& trial_id, bool succeeded, const std::string& message);

  // Re-creates a trial from the journal (id, parameters), active until TrialJobEnded.
  Status RestoreTrial(const std::string& trial_id, const Assignment& parameters);

  void Cancel();

  StudyState state() const { return state_; }
  const std::string& message() const { return message_; }
  const StudySpec& spec() const { return spec_; }
  const std::vector<Trial>& trials() const { return trials_; }
  const Trial* FindTrial(const std::string& trial_id) const;
  // The finished trial with the best final metric (ties: the earlier), or null.
  const Trial* BestTrial() const;
  int active_trials() const;
  int failed_trials() const;

 private:
  explicit Study(StudySpec spec, std::unique_ptr<Suggester> suggester)
      : spec_(std::move(spec)), suggester_(std::move(suggester)) {}
  Trial* MutableTrial(const std::string& trial_id);
  void UpdateState();

  StudySpec spec_;
  std::unique_ptr<Suggester> suggester_;
  std::vector<Trial> trials_;
  StudyState state_ = StudyState::kActive;
  std::string message_;
  bool exhausted_ = false;
};

}  // namespace cohort::coordinator::tuning
