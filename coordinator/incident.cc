#include "coordinator/incident.h"

#include <algorithm>

#include "common/text_join.h"

namespace cohort::coordinator {
namespace {

std::string AsAttempt(const ReplicaRecord& r) {
  return r.name + " as attempt " + std::to_string(r.attempt + 1);
}

// Whether `r`'s fall restarts the whole job: JobSpec::RestartsWholeJob, save that by the job's
// shape (the policy unset) an evaluator, no rank of the group, falls alone.
bool FallRestartsWholeJob(const JobRecord& job, const ReplicaRecord& r) {
  return job.spec.RestartsWholeJob() &&
         (job.spec.scheduling.restart_job_on_worker_restart.has_value() ||
          r.role != Role::kEvaluator);
}

std::string EventPrefix(int restart, int budget) {
  if (restart == Incident::kNoneSpent) return "relaunch (no restart spent): ";
  return "restart " + std::to_string(restart) + "/" + std::to_string(budget) + ": ";
}

}  // namespace

Incident::Incident(const JobRecord& job, const ReplicaRecord& cause, int restart, int budget,
                   int64_t now_ms, const std::string& node_fault)
    : last_ms_(now_ms),
      whole_job_(FallRestartsWholeJob(job, cause)),
      restart_reason_(job.spec.RestartReason()),
      event_prefix_(EventPrefix(restart, budget)),
      event_time_ms_(now_ms) {
  for (const auto& r : job.replicas) attempts_[r.name] = r.attempt;
  if (cause.state == ReplicaState::LOST) {
    cause_node_ = cause.node_id;
    lost_with_cause_.push_back(cause.name);
    cause_ = cause.message;
  } else {
    cause_ = cause.name + " attempt " + std::to_string(cause.attempt) + " " + DescribeEnd(cause);
    if (!node_fault.empty()) cause_ += " on " + node_fault;
  }
  if (!whole_job_) restarted_.push_back(AsAttempt(cause));
}

Incident::Incident(const JobRecord& job, std::string cause, int restart, int budget, int64_t now_ms)
    : last_ms_(now_ms),
      cause_(std::move(cause)),
      whole_job_(true),
      event_prefix_(EventPrefix(restart, budget)),
      event_time_ms_(now_ms) {
  for (const auto& r : job.replicas) attempts_[r.name] = r.attempt;
}

bool Incident::SameAttempt(const std::string& replica, int attempt) const {
  auto it = attempts_.find(replica);
  return it != attempts_.end() && it->second == attempt;
}

bool Incident::TakesTheWholeJob(const JobRecord& job, const ReplicaRecord& r) const {
  return !whole_job_ && FallRestartsWholeJob(job, r);
}

bool Incident::WentWithCauseNode(const ReplicaRecord& r) const {
  return (r.state == ReplicaState::LOST || r.state == ReplicaState::STOPPED) &&
         !cause_node_.empty() && r.node_id == cause_node_;
}

void Incident::AddConsequence(const ReplicaRecord& r, bool restarts, int64_t now_ms) {
  last_ms_ = now_ms;
  if (WentWithCauseNode(r)) {
    lost_with_cause_.push_back(r.name);
  } else {
    consequences_.emplace_back(r.name, HowItEnded(r));
  }
  if (restarts && !whole_job_) restarted_.push_back(AsAttempt(r));
}

std::string Incident::Event() const {
  std::string cause = cause_node_.empty()
                          ? cause_
                          : "node " + cause_node_ + " lost (" + JoinWithCommas(lost_with_cause_) +
                                ")" + (cause_.empty() ? "" : ": " + cause_);
  std::string text = event_prefix_;
  if (whole_job_) {
    text += restart_reason_.empty() ? "the whole job" : "the whole job (" + restart_reason_ + ")";
  } else {
    text += JoinWithCommas(restarted_);
  }
  text += " because " + cause;
  if (!consequences_.empty()) {
    text += "; " + NameByHowTheyEnded(consequences_) + " as a consequence";
  }
  return text;
}

std::string Incident::NameByHowTheyEnded(
    const std::vector<std::pair<std::string, std::string>>& ends) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const auto& [name, how] : ends) {
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&how = how](const auto& group) { return group.first == how; });
    if (g == groups.end()) {
      groups.push_back({how, {name}});
    } else {
      g->second.push_back(name);
    }
  }
  std::string text;
  for (size_t i = 0; i < groups.size(); ++i) {
    text += (i == 0 ? "" : ", ") + JoinWithCommas(groups[i].second) + " " + groups[i].first;
  }
  return text;
}

std::string Incident::HowItEnded(const ReplicaRecord& r) {
  switch (r.state) {
    case ReplicaState::FAILED:
      return DescribeFailedExit(r);
    case ReplicaState::PREEMPTED:
      return "was preempted";
    case ReplicaState::LOST:
      return "was lost with node " + r.node_id;
    case ReplicaState::STOPPED:
      return "was stopped";
    default:
      return std::string("is ") + wire::EnumNameReplicaState(r.state);
  }
}

}  // namespace cohort::coordinator
