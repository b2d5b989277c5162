// JobController's failure attribution (coordinator/job_controller.h, "Failure attribution"): what a
// replica's end means for its job (success, a retryable end that opens an incident, collateral of
// an open incident, or a permanent failure whose verdict may be held while a node is silent), and
// the incidents themselves. Split from job_controller.cc along that seam; one class.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "coordinator/job_controller.h"

namespace cohort::coordinator {
namespace {

// The node a replica runs on, or last ran on.
const std::string& NodeOf(const ReplicaRecord& r) {
  return r.node_id.empty() ? r.last_node : r.node_id;
}

}  // namespace

void JobController::OnReplicaEnded(JobRecord& job, ReplicaRecord& r, int64_t now_ms,
                                   bool never_ran) {
  schedule_needed_ = true;  // resources came free
  if (job.finished()) {
    // A replica the chief's success left running ended on its own (see SettleSucceeded).
    if (job.state == JobState::SUCCEEDED && !r.stop_requested) {
      AddEvent(job,
               r.name + " attempt " + std::to_string(r.attempt) + " " + DescribeEnd(r) +
                   " after the job ended",
               now_ms);
      SettleSucceeded(job, now_ms);
    }
    return;
  }
  if (job.state == JobState::CANCELLING) {
    MaybeFinishCancel(job, now_ms);
    return;
  }
  if (r.stop_requested) {
    // We asked for it (a restart in progress). A replica that crashed before the stop reached
    // it, or went down with the incident's lost node, is still named in the incident's event.
    if (IsCollateral(job, r, now_ms) &&
        (r.state == ReplicaState::FAILED || incidents_[job.name].WentWithCauseNode(r))) {
      NoteConsequence(job, r, /*restarts=*/false, now_ms);
    }
    return;
  }
  if (job.state == JobState::QUEUED) return;
  if (r.state == ReplicaState::SUCCEEDED) {
    if (r.role == Role::kChief) {
      FinishJob(job, JobState::SUCCEEDED, "the chief exited 0", now_ms);
    } else {
      AddEvent(job, r.name + " attempt " + std::to_string(r.attempt) + " exited 0", now_ms);
    }
    return;
  }
  if (IsCollateral(job, r, now_ms)) {
    AddCollateral(job, r, now_ms);
  } else if (IsRetryable(r)) {
    OpenIncident(job, r, now_ms, /*spend=*/!never_ran);
  } else if (std::string fault = NodeFault(r); !fault.empty()) {
    OpenIncident(job, r, now_ms, /*spend=*/true, fault);
  } else {
    JudgeFailure(job, r, now_ms);
  }
}

std::string JobController::NodeFault(const ReplicaRecord& r) const {
  const std::string& node = NodeOf(r);
  if (std::string why = health_->Unhealthy(node); !why.empty()) {
    return "node " + node + ", which fails its health check: " + why;
  }
  const std::map<int, std::string> gpus = health_->UnhealthyGpus(node);
  for (int gpu : r.gpus) {
    if (auto it = gpus.find(gpu); it != gpus.end()) {
      return "GPU " + std::to_string(gpu) + " of node " + node +
             ", which NVML finds unfit: " + it->second;
    }
  }
  return "";
}

bool JobController::AwaitsHealthVerdict(const JobRecord& job, const std::vector<Held>& held) const {
  for (const Held& h : held) {
    const ReplicaRecord* r = job.FindReplica(h.replica);
    if (r != nullptr && health_->HealthRechecking(NodeOf(*r))) return true;
  }
  return false;
}

bool JobController::IsCollateral(const JobRecord& job, const ReplicaRecord& r,
                                 int64_t now_ms) const {
  auto it = incidents_.find(job.name);
  return it != incidents_.end() && it->second.OpenAt(now_ms, options_.heartbeat_timeout_ms) &&
         it->second.SameAttempt(r.name, r.attempt);
}

void JobController::JudgeFailure(JobRecord& job, ReplicaRecord& r, int64_t now_ms) {
  bool others_live = false;
  for (const auto& other : job.replicas) {
    if (&other != &r && HoldsResources(other)) others_live = true;
  }
  held_[job.name].push_back(Held{r.name, r.attempt, now_ms});
  // A node still taking the health verdict on one of them may yet say it was its fault.
  if (!others_live && !AwaitsHealthVerdict(job, held_[job.name])) {
    // Every replica has ended, so nothing more can be heard that would explain a held failure:
    // the first of them is the cause (a DDP rank's bug takes the others down with exit 1 too,
    // and theirs reach the coordinator after it), not this last one.
    const std::vector<Held> held = held_[job.name];  // FinishJob drops held_'s entry
    const ReplicaRecord* cause = &r;
    for (const Held& h : held) {
      const ReplicaRecord* first = job.FindReplica(h.replica);
      if (first != nullptr && first->attempt == h.attempt && IsFinal(first->state)) {
        cause = first;
        break;
      }
    }
    FailPermanently(job, *cause, held, now_ms);
    return;
  }
  spdlog::info(
      "job {}: {} {}; the verdict waits until every node of the job is heard from and has its "
      "health verdict",
      job.name, r.name, Incident::HowItEnded(r));
}

void JobController::FailPermanently(JobRecord& job, const ReplicaRecord& cause,
                                    const std::vector<Held>& held, int64_t now_ms) {
  // The other failures held with it came after it: named after it, by how they ended.
  std::vector<std::pair<std::string, std::string>> then;
  for (const Held& h : held) {
    const ReplicaRecord* r = job.FindReplica(h.replica);
    if (r != nullptr && r != &cause && r->attempt == h.attempt && IsFinal(r->state)) {
      then.emplace_back(r->name, Incident::HowItEnded(*r));
    }
  }
  FinishJob(job, JobState::FAILED,
            cause.name + " attempt " + std::to_string(cause.attempt) + " " + DescribeEnd(cause) +
                " (permanent failure)" +
                (then.empty() ? "" : "; then " + Incident::NameByHowTheyEnded(then)),
            now_ms);
}

void JobController::ReleaseHeld(JobRecord& job, int64_t now_ms) {
  auto it = held_.find(job.name);
  if (it == held_.end()) return;
  std::vector<Held> held = std::move(it->second);
  held_.erase(it);
  auto ended = [&](const Held& h) -> ReplicaRecord* {
    ReplicaRecord* r = job.FindReplica(h.replica);
    return r == nullptr || r->attempt != h.attempt || !IsFinal(r->state) ? nullptr : r;
  };
  // It failed while an incident was open, before the incident was known: collateral.
  auto inc = incidents_.find(job.name);
  std::vector<Held> rest;
  for (const Held& h : held) {
    ReplicaRecord* r = ended(h);
    if (r == nullptr) continue;
    if (inc != incidents_.end() && inc->second.OpenAt(h.since_ms, options_.heartbeat_timeout_ms) &&
        inc->second.SameAttempt(r->name, h.attempt)) {
      AddCollateral(job, *r, now_ms);
      if (job.finished()) return;
      continue;
    }
    rest.push_back(h);
  }
  // One on a node whose health check now fails was that node's fault: it opens an incident, of
  // which the others held are collateral (OpenIncident releases them again).
  for (auto h = rest.begin(); h != rest.end(); ++h) {
    ReplicaRecord* r = ended(*h);
    std::string fault = r == nullptr ? "" : NodeFault(*r);
    if (fault.empty()) continue;
    rest.erase(h);
    if (!rest.empty()) held_[job.name] = std::move(rest);
    OpenIncident(job, *r, now_ms, /*spend=*/true, fault);
    return;
  }
  const bool awaiting_health = AwaitsHealthVerdict(job, rest);
  std::vector<Held> keep;
  for (const Held& h : rest) {
    ReplicaRecord* r = ended(h);
    bool heard = !awaiting_health &&
                 HeardFromAllNodesSince(job, h.since_ms + options_.heartbeat_interval_ms);
    // A node silent that long is lost (an incident) unless its registry forgot it, and a health
    // check that long has not saved it: judge anyway.
    bool too_long = now_ms - h.since_ms > 2 * options_.heartbeat_timeout_ms;
    if (heard || too_long) {
      FailPermanently(job, *r, rest, now_ms);
      return;
    }
    keep.push_back(h);
  }
  if (!keep.empty() && !job.finished()) {
    auto& slot = held_[job.name];
    slot.insert(slot.end(), keep.begin(), keep.end());
  }
}

bool JobController::HeardFromAllNodesSince(const JobRecord& job, int64_t since_ms) const {
  for (const auto& r : job.replicas) {
    if (!HoldsResources(r)) continue;
    std::optional<int64_t> heard = health_->LastHeardMs(r.node_id);
    if (!heard || *heard < since_ms) return false;
  }
  return true;
}

void JobController::OpenIncident(JobRecord& job, ReplicaRecord& cause, int64_t now_ms, bool spend,
                                 const std::string& node_fault) {
  int budget = job.spec.scheduling.max_restarts;
  if (spend) {
    if (job.restarts >= budget) {
      FinishJob(job, JobState::FAILED,
                cause.name + " attempt " + std::to_string(cause.attempt) + " " +
                    DescribeEnd(cause) + (node_fault.empty() ? "" : " on " + node_fault) +
                    "; the restart budget (max_restarts=" + std::to_string(budget) + ") is spent",
                now_ms);
      return;
    }
    ++job.restarts;
    ++restarts_by_cause_[!node_fault.empty()                      ? "node_health"
                         : cause.state == ReplicaState::PREEMPTED ? "preemption"
                         : cause.state == ReplicaState::LOST      ? "node_loss"
                         : cause.state == ReplicaState::STOPPED   ? "stopped"
                                                                  : "exit_code"];
  } else {
    ++relaunches_;
  }
  Incident& inc = incidents_[job.name] =
      Incident(job, cause, spend ? job.restarts : Incident::kNoneSpent, budget, now_ms, node_fault);
  AddEvent(job, inc.Event(), now_ms);
  if (spend) commands_.restarted.emplace_back(job.name, inc.Event());
  if (inc.whole_job()) {
    RestartJob(job, now_ms);
  } else {
    RestartReplica(job, cause, now_ms);
  }
  ReleaseHeld(job, now_ms);
}

void JobController::AddCollateral(JobRecord& job, ReplicaRecord& r, int64_t now_ms) {
  Incident& inc = incidents_[job.name];
  if (inc.TakesTheWholeJob(job, r)) {
    // An evaluator's incident took a rank of the group down: the rank cannot rejoin the others.
    inc.TakeTheWholeJob();
    NoteConsequence(job, r, /*restarts=*/false, now_ms);
    RestartJob(job, now_ms);
    return;
  }
  bool alone = !inc.whole_job();
  NoteConsequence(job, r, alone, now_ms);
  if (alone) RestartReplica(job, r, now_ms);
}

void JobController::NoteConsequence(JobRecord& job, const ReplicaRecord& r, bool restarts,
                                    int64_t now_ms) {
  Incident& inc = incidents_[job.name];
  inc.AddConsequence(r, restarts, now_ms);
  spdlog::info("job {}: {} {}, as a consequence of what opened its {}", job.name, r.name,
               Incident::HowItEnded(r),
               inc.event_prefix().substr(0, inc.event_prefix().size() - 2));
  ReplaceEvent(job, inc.event_time_ms(), inc.event_prefix(), inc.Event());
}

}  // namespace cohort::coordinator
