#include "coordinator/study_controller.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "common/study_spec.h"
#include "coordinator/tuning/study_info.h"

namespace cohort::coordinator {

using nlohmann::json;
using tuning::Study;
using tuning::StudyState;
using tuning::Trial;
using tuning::TrialState;

namespace {

bool Running(TrialState s) { return s == TrialState::kActive || s == TrialState::kStopping; }

}  // namespace

StatusOr<std::unique_ptr<StudyController::Entry>> StudyController::MakeEntry(
    const std::string& spec_yaml) const {
  COHORT_ASSIGN_OR_RETURN(StudySpec spec, ParseStudySpec(spec_yaml, "submitted study"));
  auto entry = std::make_unique<Entry>();
  entry->spec_yaml = spec_yaml;
  COHORT_ASSIGN_OR_RETURN(entry->study, Study::Create(std::move(spec)));
  return entry;
}

StatusOr<std::string> StudyController::Submit(const std::string& spec_yaml, int64_t now_ms,
                                              const std::string& owner) {
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<Entry> entry, MakeEntry(spec_yaml));
  const std::string name = entry->study->spec().name;
  if (studies_.count(name)) return AlreadyExists("a study named '" + name + "' already exists");
  entry->create_time_ms = now_ms;
  entry->owner = owner;
  spdlog::info("study {}: submitted ({} search, up to {} trials, {} at a time)", name,
               SearchAlgorithmName(entry->study->spec().algorithm), entry->study->spec().max_trials,
               entry->study->spec().parallel_trials);
  studies_[name] = std::move(entry);
  return name;
}

Status StudyController::Apply(Entry& entry, Event e, bool record) {
  Study& study = *entry.study;
  switch (e.kind) {
    case Event::Kind::kTrial: {
      // Trials are created by NextTrials during normal operation; only a replay restores them.
      if (study.FindTrial(e.trial) == nullptr) {
        COHORT_ASSIGN_OR_RETURN(Assignment a, ParseAssignment(study.spec(), e.parameters));
        COHORT_RETURN_IF_ERROR(study.RestoreTrial(e.trial, a));
      }
      job_to_trial_[TrialJobName(study.spec().name, e.trial)] = {study.spec().name, e.trial};
      break;
    }
    case Event::Kind::kMeasurement: {
      COHORT_ASSIGN_OR_RETURN(
          bool stop, study.AddMeasurement(e.trial, e.step, {{study.spec().metric_id, e.value}}));
      if (stop) entry.to_cancel.push_back(e.trial);
      break;
    }
    case Event::Kind::kEnded:
      COHORT_RETURN_IF_ERROR(study.TrialJobEnded(e.trial, e.succeeded, e.message));
      break;
    case Event::Kind::kCancelled:
      study.Cancel();
      break;
  }
  if (record) entry.events.push_back(std::move(e));
  return Status::Ok();
}

Status StudyController::AddMeasurement(const std::string& job, int64_t step,
                                       const std::map<std::string, double>& metrics) {
  auto it = job_to_trial_.find(job);
  if (it == job_to_trial_.end()) return NotFound("job '" + job + "' is not a trial of any study");
  Entry& entry = *studies_.at(it->second.first);
  const Trial* trial = entry.study->FindTrial(it->second.second);
  auto value = metrics.find(entry.study->spec().metric_id);
  // Other tags and lines after the trial ended change nothing, so they are not journaled.
  if (trial == nullptr || value == metrics.end() || !Running(trial->state)) return Status::Ok();
  Event e;
  e.kind = Event::Kind::kMeasurement;
  e.trial = trial->id;
  e.step = step;
  e.value = value->second;
  return Apply(entry, std::move(e), true);
}

void StudyController::JobEnded(const std::string& job, bool succeeded, const std::string& message,
                               int64_t now_ms) {
  auto it = job_to_trial_.find(job);
  if (it == job_to_trial_.end()) return;
  Entry& entry = *studies_.at(it->second.first);
  const Trial* trial = entry.study->FindTrial(it->second.second);
  if (trial == nullptr || !Running(trial->state)) return;
  Event e;
  e.kind = Event::Kind::kEnded;
  e.trial = trial->id;
  e.succeeded = succeeded;
  e.message = message;
  Status s = Apply(entry, std::move(e), true);
  if (!s.ok())
    spdlog::error("study {}: trial job {} ended: {}", it->second.first, job, s.ToString());
  NoteEnd(entry, now_ms);
}

Status StudyController::Cancel(const std::string& name, int64_t now_ms) {
  auto it = studies_.find(name);
  if (it == studies_.end()) return NotFound("no study named '" + name + "'");
  Entry& entry = *it->second;
  if (entry.study->state() != StudyState::kActive) return Status::Ok();
  Event e;
  e.kind = Event::Kind::kCancelled;
  COHORT_RETURN_IF_ERROR(Apply(entry, std::move(e), true));
  NoteEnd(entry, now_ms);
  return Status::Ok();
}

void StudyController::NoteEnd(Entry& entry, int64_t now_ms) {
  if (entry.study->state() == StudyState::kActive || entry.end_time_ms != 0) return;
  entry.end_time_ms = now_ms;
  entry.new_study = true;  // end_time_ms is in the record header: journal it
  ended_.push_back(entry.study->spec().name);
  spdlog::info("study {}: {}: {}", entry.study->spec().name,
               tuning::StudyStateName(entry.study->state()), entry.study->message());
}

StatusOr<TrialJobLaunch> StudyController::LaunchOf(const Entry& entry, const Trial& trial) const {
  const StudySpec& spec = entry.study->spec();
  TrialJobLaunch launch;
  launch.study = spec.name;
  launch.trial_id = trial.id;
  launch.owner = entry.owner;
  COHORT_ASSIGN_OR_RETURN(launch.job, MakeTrialJob(spec, trial.id, trial.parameters));
  if (launch.job.output_dir.empty()) {
    launch.job.output_dir = default_output_base_ + "/" + spec.name;
  }
  launch.spec_yaml = JobSpecToYaml(launch.job);
  return launch;
}

StudyActions StudyController::TakeActions(int64_t now_ms) {
  StudyActions actions;
  for (auto& [name, entry] : studies_) {
    Study& study = *entry->study;
    for (const std::string& id : entry->to_cancel) {
      actions.cancel.push_back(TrialJobName(name, id));
      actions.cancel_reasons.push_back("study " + name + ": trial " + id +
                                       " stopped early: " + study.FindTrial(id)->message);
    }
    entry->to_cancel.clear();
    if (study.state() == StudyState::kActive) {
      auto next = study.NextTrials();
      if (!next.ok()) {
        spdlog::error("study {}: no next trial: {}", name, next.status().ToString());
        continue;
      }
      for (auto& t : *next) {
        const Trial* trial = study.FindTrial(t.trial_id);
        Event e;
        e.kind = Event::Kind::kTrial;
        e.trial = t.trial_id;
        for (const auto& [k, v] : AssignmentToStrings(study.spec(), trial->parameters)) {
          e.parameters[k] = v;
        }
        Status s = Apply(*entry, std::move(e), true);
        auto launch = LaunchOf(*entry, *trial);
        if (!s.ok() || !launch.ok()) {
          spdlog::error("study {}: trial {}: {}", name, t.trial_id,
                        (s.ok() ? launch.status() : s).ToString());
          continue;
        }
        spdlog::info("study {}: trial {} starts as job {}", name, t.trial_id, trial->job);
        actions.submit.push_back(std::move(*launch));
      }
      NoteEnd(*entry, now_ms);  // an exhausted search with nothing running ends here
    } else if (!entry->cancelled_rest) {
      // A failed (or cancelled) study stops the trials it still runs.
      entry->cancelled_rest = true;
      for (const Trial& t : study.trials()) {
        if (!Running(t.state)) continue;
        actions.cancel.push_back(t.job);
        actions.cancel_reasons.push_back("study " + name + " ended " +
                                         std::string(tuning::StudyStateName(study.state())) + ": " +
                                         study.message());
      }
    }
  }
  return actions;
}

std::string StudyController::Record(const std::string& name, const Entry& entry,
                                    size_t first) const {
  json events = json::array();
  for (size_t i = first; i < entry.events.size(); ++i) {
    const Event& e = entry.events[i];
    switch (e.kind) {
      case Event::Kind::kTrial:
        events.push_back({{"trial", e.trial}, {"parameters", e.parameters}});
        break;
      case Event::Kind::kMeasurement:
        events.push_back({{"measurement", e.trial}, {"step", e.step}, {"value", e.value}});
        break;
      case Event::Kind::kEnded:
        events.push_back({{"ended", e.trial}, {"succeeded", e.succeeded}, {"message", e.message}});
        break;
      case Event::Kind::kCancelled:
        events.push_back({{"cancelled", true}});
        break;
    }
  }
  json j = {{"kind", "study"},
            {"name", name},
            {"spec_yaml", entry.spec_yaml},
            {"create_time_ms", entry.create_time_ms},
            {"end_time_ms", entry.end_time_ms},
            {"owner", entry.owner},
            {"first", first},
            {"events", std::move(events)}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<std::string> StudyController::TakeJournalRecords() {
  std::vector<std::string> out;
  for (auto& [name, entry] : studies_) {
    if (!entry->new_study && entry->journaled == entry->events.size()) continue;
    out.push_back(Record(name, *entry, entry->new_study ? 0 : entry->journaled));
    entry->new_study = false;
    entry->journaled = entry->events.size();
  }
  return out;
}

std::vector<std::string> StudyController::SnapshotRecords() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : studies_) out.push_back(Record(name, *entry, 0));
  return out;
}

StatusOr<bool> StudyController::Replay(const std::string& record) {
  json j = json::parse(record, nullptr, /*allow_exceptions=*/false);
  const auto kind = j.find("kind");
  if (!j.is_object() || kind == j.end() || *kind != "study") return false;
  try {
    const std::string name = j.at("name").get<std::string>();
    auto it = studies_.find(name);
    if (it == studies_.end()) {
      COHORT_ASSIGN_OR_RETURN(std::unique_ptr<Entry> entry,
                              MakeEntry(j.at("spec_yaml").get<std::string>()));
      it = studies_.emplace(name, std::move(entry)).first;
    }
    Entry& entry = *it->second;
    entry.create_time_ms = j.value("create_time_ms", int64_t{0});
    entry.end_time_ms = std::max(entry.end_time_ms, j.value("end_time_ms", int64_t{0}));
    entry.owner = j.value("owner", entry.owner);
    entry.new_study = false;
    const size_t first = j.at("first").get<size_t>();
    const json& events = j.at("events");
    if (first > entry.events.size()) {
      return DataLoss("study " + name + ": journal record starts at event " +
                      std::to_string(first) + " but only " + std::to_string(entry.events.size()) +
                      " are known");
    }
    for (size_t i = entry.events.size() - first; i < events.size(); ++i) {
      const json& ej = events[i];
      Event e;
      if (ej.contains("trial")) {
        e.kind = Event::Kind::kTrial;
        e.trial = ej.at("trial").get<std::string>();
        e.parameters = ej.at("parameters").get<std::map<std::string, std::string>>();
      } else if (ej.contains("measurement")) {
        e.kind = Event::Kind::kMeasurement;
        e.trial = ej.at("measurement").get<std::string>();
        e.step = ej.at("step").get<int64_t>();
        e.value = ej.at("value").get<double>();
      } else if (ej.contains("cancelled")) {
        e.kind = Event::Kind::kCancelled;
      } else {
        e.kind = Event::Kind::kEnded;
        e.trial = ej.at("ended").get<std::string>();
        e.succeeded = ej.at("succeeded").get<bool>();
        e.message = ej.at("message").get<std::string>();
      }
      COHORT_RETURN_IF_ERROR(Apply(entry, std::move(e), true).WithContext("study " + name));
    }
    entry.journaled = entry.events.size();
    // The cancels the replayed events asked for are asked again (a torn tail may have lost the
    // job records that carried them); cancelling a job that has ended is a no-op.
  } catch (const json::exception& e) {
    return DataLoss(std::string("study journal record: ") + e.what());
  }
  return true;
}

std::vector<TrialJobLaunch> StudyController::ActiveTrialJobs() const {
  std::vector<TrialJobLaunch> out;
  for (const auto& [name, entry] : studies_) {
    for (const Trial& t : entry->study->trials()) {
      if (!Running(t.state)) continue;
      auto launch = LaunchOf(*entry, t);
      if (launch.ok()) out.push_back(std::move(*launch));
    }
  }
  return out;
}

StatusOr<wire::StudyInfoT> StudyController::Info(const std::string& name) const {
  auto it = studies_.find(name);
  if (it == studies_.end()) return NotFound("no study named '" + name + "'");
  wire::StudyInfoT info =
      tuning::ToStudyInfo(*it->second->study, it->second->create_time_ms, it->second->end_time_ms);
  info.owner = it->second->owner;
  return info;
}

const std::string* StudyController::OwnerOf(const std::string& name) const {
  auto it = studies_.find(name);
  return it == studies_.end() ? nullptr : &it->second->owner;
}

const std::string* StudyController::SpecYamlOf(const std::string& name) const {
  auto it = studies_.find(name);
  return it == studies_.end() ? nullptr : &it->second->spec_yaml;
}

std::vector<wire::StudyInfoT> StudyController::List() const {
  std::vector<wire::StudyInfoT> out;
  for (const auto& [name, entry] : studies_) {
    out.push_back(tuning::ToStudyInfo(*entry->study, entry->create_time_ms, entry->end_time_ms));
    out.back().owner = entry->owner;
  }
  return out;
}

}  // namespace cohort::coordinator
