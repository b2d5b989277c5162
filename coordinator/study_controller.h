// StudyController is the coordinator's side of hyperparameter tuning (DESIGN.md "Hyperparameter
// tuning"): it owns every study (a tuning::Study each), turns the study's decisions into jobs to
// submit and jobs to cancel, feeds it the trials' measurements and job ends, and keeps it durable.
// It has no sockets and no job table: the Coordinator asks it for work (TakeActions) after each
// event, submits and cancels the jobs itself, and commits TakeJournalRecords() to its StateStore.
//
// Durability is event sourced. A Study is deterministic in (spec, ordered events), so a study is
// journaled as its spec plus the ordered list of what happened to it: a trial was created (id and
// parameters), a measurement of the study metric arrived, a trial's job ended. A journal record
// is {"kind":"study", "name", "spec_yaml", "create_time_ms", "end_time_ms", "owner", "first": k,
// "events": [...]}, carrying events k, k+1, ... (a trial, a measurement, a trial's end, the
// study's cancel); replay applies the events it has not applied yet,
// so records are idempotent (a full snapshot has first = 0). Replaying rebuilds the same trials,
// states and future suggestions. The Coordinator appends these records before the job records of
// the same pass, so after a torn tail a trial may exist without its job (Recover resubmits it)
// but never a trial job without its trial.
//
// Thread safety: none; the coordinator loop calls it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/job_spec.h"
#include "common/schema/cohort_generated.h"
#include "common/status.h"
#include "coordinator/tuning/study.h"

namespace cohort::coordinator {

// A trial job to submit on behalf of a study.
struct TrialJobLaunch {
  std::string study;
  std::string trial_id;
  std::string owner;  // the study's owner: its trial jobs are the owner's
  JobSpec job;
  std::string spec_yaml;  // the job as YAML (what `cohort status` shows and the journal keeps)
};

struct StudyActions {
  std::vector<TrialJobLaunch> submit;
  std::vector<std::string> cancel;  // job names, with why in cancel_reasons
  std::vector<std::string> cancel_reasons;
};

class StudyController {
 public:
  // `default_output_base`: trial jobs of a template without output_dir write under
  // <default_output_base>/<study>/<trial_id>/.
  explicit StudyController(std::string default_output_base)
      : default_output_base_(std::move(default_output_base)) {}

  // Parses and validates a study file's YAML and returns the study's name; kAlreadyExists when
  // the name is taken. `owner`: who submitted it (JobRecord::owner says how it is known).
  StatusOr<std::string> Submit(const std::string& spec_yaml, int64_t now_ms,
                               const std::string& owner = "");
  // A trial job's measurement line (tag -> value). Unknown jobs: kNotFound.
  Status AddMeasurement(const std::string& job, int64_t step,
                        const std::map<std::string, double>& metrics);
  // A job reached a final state; ignored unless it is a trial job.
  void JobEnded(const std::string& job, bool succeeded, const std::string& message, int64_t now_ms);
  // `cohort cancel STUDY`: the study ends CANCELLED (journaled, so it stays so after a restart)
  // and the next TakeActions cancels its running trials' jobs. kNotFound for an unknown study;
  // a study that has ended is left as it is.
  Status Cancel(const std::string& name, int64_t now_ms);
  // Jobs to submit and cancel now: new trials while a study is active, the jobs of trials the
  // median rule stopped, and the running trials of a study that failed.
  StudyActions TakeActions(int64_t now_ms);

  // Replays one journal record (kind "study"); `false` when `record` is not a study record.
  StatusOr<bool> Replay(const std::string& record);
  // Records for the studies changed since the last call (only their new events).
  std::vector<std::string> TakeJournalRecords();
  // Every study in full (for a journal snapshot).
  std::vector<std::string> SnapshotRecords() const;

  // Trials that must have a job (active ones) by job name, for recovery.
  std::vector<TrialJobLaunch> ActiveTrialJobs() const;
  // The studies that ended since the last call, in the order they did (not those replayed ended).
  std::vector<std::string> TakeEnded() { return std::exchange(ended_, {}); }

  StatusOr<wire::StudyInfoT> Info(const std::string& name) const;
  // The study's owner ("" when none was recorded), or nullptr when there is no such study.
  const std::string* OwnerOf(const std::string& name) const;
  // The study file stored for it (what `cohort trials --spec` prints), or nullptr when there is
  // no such study.
  const std::string* SpecYamlOf(const std::string& name) const;
  std::vector<wire::StudyInfoT> List() const;
  size_t size() const { return studies_.size(); }

 private:
  struct Event {
    enum class Kind { kTrial, kMeasurement, kEnded, kCancelled };
    Kind kind = Kind::kTrial;
    std::string trial;
    std::map<std::string, std::string> parameters;  // kTrial
    int64_t step = 0;                               // kMeasurement
    double value = 0;                               // kMeasurement
    bool succeeded = false;                         // kEnded
    std::string message;                            // kEnded
  };
  struct Entry {
    std::string spec_yaml;
    std::string owner;
    std::unique_ptr<tuning::Study> study;
    int64_t create_time_ms = 0;
    int64_t end_time_ms = 0;
    std::vector<Event> events;
    size_t journaled = 0;  // events already handed out by TakeJournalRecords
    bool new_study = true;
    std::vector<std::string> to_cancel;  // trial ids whose jobs must be cancelled
    bool cancelled_rest = false;         // a failed study's running trials were cancelled
  };

  StatusOr<std::unique_ptr<Entry>> MakeEntry(const std::string& spec_yaml) const;
  // Applies `e` to the study (and records it when `record`).
  Status Apply(Entry& entry, Event e, bool record);
  StatusOr<TrialJobLaunch> LaunchOf(const Entry& entry, const tuning::Trial& trial) const;
  std::string Record(const std::string& name, const Entry& entry, size_t first) const;
  void NoteEnd(Entry& entry, int64_t now_ms);

  std::string default_output_base_;
  std::map<std::string, std::unique_ptr<Entry>> studies_;
  std::map<std::string, std::pair<std::string, std::string>> job_to_trial_;  // job -> (study, id)
  std::vector<std::string> ended_;
};

}  // namespace cohort::coordinator
