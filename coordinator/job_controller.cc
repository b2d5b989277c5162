#include "coordinator/job_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <string_view>

#include "common/storage_marker.h"
#include "common/text_join.h"
#include "coordinator/job_array.h"

namespace cohort::coordinator {
namespace {

constexpr size_t kMaxEventsPerJob = 1000;

}  // namespace

JobController::JobController(JobControllerOptions options, const NodeHealth* health)
    : options_(std::move(options)), health_(health) {}

bool JobController::NeedsSharedStorage(const std::string& output_dir) const {
  return !options_.checked_output_root.empty() &&
         PathIsUnder(output_dir, options_.checked_output_root);
}

// ---- recovery -------------------------------------------------------------------------------

void JobController::Restore(JobRecord job) {
  next_seq_ = std::max(next_seq_, job.seq + 1);
  std::string name = job.name;
  job.needs_shared_storage = NeedsSharedStorage(job.output_dir);
  job.elastic = job.spec.MinWorkers().has_value();
  job.wait_limited = job.spec.scheduling.max_wait.count() > 0;
  job.shape_id = shapes_.Intern(job.demands);
  job.may_hold = job.start_time_ms > 0 ||
                 std::any_of(job.replicas.begin(), job.replicas.end(),
                             [](const ReplicaRecord& r) { return r.launched || r.placed(); });
  JobRecord& restored = *(jobs_[name] = std::make_unique<JobRecord>(std::move(job)));
  if (restored.spec.IsArrayTask()) JoinArray(restored);
  for (const auto& r : restored.replicas) {
    if (r.placed() && !IsFinal(r.state)) NoteOnNode(r.node_id, name);
    if (r.fenced_until_ms > 0) fenced_jobs_.insert(name);
  }
}

void JobController::FinishRestore(int64_t now_ms) {
  for (auto& [name, job] : jobs_) {
    if (job->finished()) {
      if (AnyHolding(*job)) ended_holding_.insert(name);
      continue;
    }
    active_.emplace_back(job->seq, job.get());
    // A permanent-looking end of a job still running was a held verdict: hold it again, in the
    // order they ended (the first is the cause).
    std::vector<const ReplicaRecord*> failed;
    for (const auto& r : job->replicas) {
      if (r.state == ReplicaState::FAILED && !IsRetryable(r) && !r.stop_requested &&
          (job->state == JobState::PENDING || job->state == JobState::RUNNING)) {
        failed.push_back(&r);
      }
    }
    std::stable_sort(failed.begin(), failed.end(), [](const auto* a, const auto* b) {
      return a->state_time_ms < b->state_time_ms;
    });
    for (const auto* r : failed) held_[name].push_back(Held{r->name, r->attempt, now_ms});
  }
  std::sort(active_.begin(), active_.end());
  // Once every job is known: what each unfinished one waits for (a failure ends it, in turn).
  std::vector<JobRecord*> after;
  for (const auto& [seq, job] : active_) {
    if (!job->spec.scheduling.after.empty()) after.push_back(job);
  }
  for (JobRecord* job : after) {
    if (!job->finished()) WaitForAfter(*job, now_ms);
  }
  // See "Arrays": a task never placed waits for a slot, and the free ones go by index.
  for (const auto& [array, tasks] : arrays_) {
    for (const auto& [index, name] : tasks) {
      JobRecord& task = *jobs_.at(name);
      if (task.finished() || task.may_hold || task.spec.scheduling.array.parallelism == 0) continue;
      task.waits_for_array_slot = true;
      task.waits_for_jobs = true;
    }
    ReleaseArraySlots(array, /*announce=*/false, now_ms);
  }
}

// ---- events ---------------------------------------------------------------------------------

JobRecord JobController::Draft(JobSpec spec, const std::string& yaml, int64_t now_ms) const {
  JobRecord job;
  job.seq = next_seq_;
  job.name = spec.name;
  job.spec_yaml = yaml;
  job.output_dir =
      spec.output_dir.empty() ? options_.default_output_base + "/" + spec.name : spec.output_dir;
  job.needs_shared_storage = NeedsSharedStorage(job.output_dir);
  job.spec = std::move(spec);
  job.elastic = job.spec.MinWorkers().has_value();
  job.wait_limited = job.spec.scheduling.max_wait.count() > 0;
  job.state = JobState::QUEUED;
  job.message = "waiting for resources";
  job.create_time_ms = now_ms;
  job.queued_since_ms = now_ms;
  job.replicas = MakeReplicas(job.spec);
  FillDemands(job);
  return job;
}

std::string JobController::AfterWaitOf(const JobRecord& job) const {
  const std::vector<JobDependency> pending = PendingAfter(job);
  return pending.empty() ? std::string() : AfterWaitMessage(pending);
}

std::string JobController::HeldAtSubmitMessage(const std::string& name) {
  return "held at submit (scheduling.hold); `cohort resume " + name + "` queues it";
}

JobRecord& JobController::Submit(JobSpec spec, const std::string& yaml, int64_t now_ms) {
  auto job = std::make_unique<JobRecord>(Draft(std::move(spec), yaml, now_ms));
  ++next_seq_;
  job->shape_id = shapes_.Intern(job->demands);
  JobRecord* raw = job.get();
  jobs_[raw->name] = std::move(job);
  active_.emplace_back(raw->seq, raw);  // the largest seq yet: the order holds
  AddEvent(*raw,
           "submitted (" + Counted(static_cast<int64_t>(raw->replicas.size()), "replica") + ")",
           now_ms);
  WaitForAfter(*raw, now_ms);
  if (raw->spec.IsArrayTask()) {  // see "Arrays"
    JoinArray(*raw);
    if (raw->spec.scheduling.array.parallelism > 0 && !raw->finished()) {
      raw->waits_for_array_slot = true;
      raw->waits_for_jobs = true;
      raw->message = WaitForJobsMessage(*raw);
      ReleaseArraySlots(raw->spec.ArrayName(), /*announce=*/false, now_ms);
    }
  }
  if (raw->spec.scheduling.hold && !raw->finished()) {  // see "Suspension"
    raw->state = JobState::SUSPENDED;
    raw->message = HeldAtSubmitMessage(raw->name);
    AddEvent(*raw, raw->message, now_ms);
  }
  schedule_needed_ = true;
  return *raw;
}

// ---- dependencies ---------------------------------------------------------------------------

namespace {

// Whether `state`, a final state, is what `when` waits for.
bool Meets(AfterCondition when, JobState state) {
  switch (when) {
    case AfterCondition::kSucceeded:
      return state == JobState::SUCCEEDED;
    case AfterCondition::kFailed:
      return state == JobState::FAILED || state == JobState::CANCELLED;
    case AfterCondition::kEnded:
      return true;
  }
  return false;
}

// "succeed", "fail", "end": what a job waits for the one it runs after to do.
std::string_view Verb(AfterCondition when) {
  switch (when) {
    case AfterCondition::kSucceeded:
      return "succeed";
    case AfterCondition::kFailed:
      return "fail";
    case AfterCondition::kEnded:
      return "end";
  }
  return "";
}

}  // namespace

JobController::Dependency JobController::DependencyOfJob(const JobRecord& job) {
  Dependency dep;
  dep.name = job.name;
  dep.seq = job.seq;
  dep.finished = job.finished();
  dep.state = job.state;
  return dep;
}

std::optional<JobController::Dependency> JobController::FindDependency(
    const std::string& name) const {
  if (const JobRecord* job = FindJob(name)) return DependencyOfJob(*job);
  auto array = arrays_.find(name);
  if (array == arrays_.end() || array->second.empty()) return std::nullopt;
  Dependency dep;
  dep.name = name;
  dep.array = true;
  dep.seq = std::numeric_limits<uint64_t>::max();
  ArrayTally tally;
  for (const auto& [index, task_name] : array->second) {
    const JobRecord& task = *jobs_.at(task_name);
    dep.seq = std::min(dep.seq, task.seq);
    tally.Add(task);
    if (task.finished() && task.state != JobState::SUCCEEDED) {
      dep.unsuccessful += (dep.unsuccessful.empty() ? "" : ", ") + task.name + " " +
                          wire::EnumNameJobState(task.state);
    }
  }
  dep.finished = tally.finished();
  if (dep.finished) dep.state = tally.Outcome();
  return dep;
}

Status JobController::CheckAfter(const JobSpec& spec) const {
  for (const JobDependency& d : spec.scheduling.after) {
    const std::optional<Dependency> dep = FindDependency(d.job);
    if (!dep) return NotFound("scheduling.after: no job or array named '" + d.job + "'");
    // A cancelling job ends CANCELLED.
    const std::optional<JobState> end = dep->state == JobState::CANCELLING
                                            ? std::optional(JobState::CANCELLED)
                                        : dep->finished ? std::optional(dep->state)
                                                        : std::nullopt;
    if (end && !Meets(d.when, *end)) {
      return FailedPrecondition("scheduling.after: " + dep->Describe() + " is " +
                                wire::EnumNameJobState(dep->state) + ": a job to run after it " +
                                std::string(Verb(d.when)) + "s would never run");
    }
  }
  return Status::Ok();
}

std::optional<JobController::Dependency> JobController::DependencyOf(
    const JobRecord& job, const std::string& name) const {
  std::optional<Dependency> dep = FindDependency(name);
  if (dep && dep->seq < job.seq) return dep;
  return std::nullopt;
}

std::vector<JobDependency> JobController::PendingAfter(const JobRecord& job) const {
  std::vector<JobDependency> pending;
  for (const JobDependency& d : job.spec.scheduling.after) {
    const std::optional<Dependency> dep = DependencyOf(job, d.job);  // gone: it ended as asked
    if (dep && !dep->finished) pending.push_back(d);
  }
  return pending;
}

void JobController::EndAfter(JobRecord& job, const JobDependency& d, const Dependency& dep,
                             int64_t now_ms) {
  job.waits_for_jobs = false;
  const std::string ended = dep.Describe() + " ended " + wire::EnumNameJobState(dep.state);
  if (d.when == AfterCondition::kFailed) {  // a contingency not needed
    FinishJob(job, JobState::CANCELLED,
              ended + ", and it runs only should that one fail (scheduling.after: " +
                  FormatJobDependency(d) + ")",
              now_ms);
    return;
  }
  FinishJob(job, JobState::FAILED,
            dep.Describe() + ", which it runs after (scheduling.after), ended " +
                wire::EnumNameJobState(dep.state) +
                (dep.unsuccessful.empty() ? "" : " (" + dep.unsuccessful + ")"),
            now_ms);
}

void JobController::WaitForAfter(JobRecord& job, int64_t now_ms) {
  for (const JobDependency& d : job.spec.scheduling.after) {
    const std::optional<Dependency> dep = DependencyOf(job, d.job);
    if (dep && dep->finished && !Meets(d.when, dep->state)) {
      EndAfter(job, d, *dep, now_ms);
      return;
    }
  }
  const std::vector<JobDependency> pending = PendingAfter(job);
  if (pending.empty()) return;
  for (const JobDependency& d : pending) dependents_[d.job].push_back(job.name);
  job.waits_for_jobs = true;
  if (job.state == JobState::QUEUED) job.message = AfterWaitMessage(pending);
  MarkDirty(job);
}

std::string JobController::AfterWaitMessage(const std::vector<JobDependency>& pending) const {
  // The jobs grouped by condition, each group where its first job stands: "waiting for jobs a, b
  // to succeed and job c to end (scheduling.after)".
  std::string out = "waiting for ";
  std::vector<AfterCondition> groups;
  for (const JobDependency& d : pending) {
    if (std::find(groups.begin(), groups.end(), d.when) == groups.end()) groups.push_back(d.when);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    // Jobs alone: "jobs a, b"; with an array, each named with its kind: "job a, array b".
    std::vector<std::pair<bool, std::string>> entries;  // (an array, its name)
    bool arrays = false;
    for (const JobDependency& d : pending) {
      if (d.when != groups[g]) continue;
      const bool array = FindJob(d.job) == nullptr && arrays_.contains(d.job);
      arrays = arrays || array;
      entries.emplace_back(array, d.job);
    }
    std::string listed = arrays ? "" : entries.size() == 1 ? "job " : "jobs ";
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto& [array, name] = entries[i];
      listed += std::string(i == 0 ? "" : ", ") + (!arrays ? "" : array ? "array " : "job ") + name;
    }
    out += std::string(g == 0 ? "" : " and ") + listed + " to " + std::string(Verb(groups[g]));
  }
  return out + " (scheduling.after)";
}

// ---- arrays ---------------------------------------------------------------------------------

void JobController::JoinArray(JobRecord& job) {
  auto& tasks = arrays_[job.spec.ArrayName()];
  const int index = *job.spec.scheduling.array.index;
  auto at = std::lower_bound(tasks.begin(), tasks.end(), std::pair{index, std::string()});
  if (at != tasks.end() && at->first == index) {
    at->second = job.name;
  } else {
    tasks.insert(at, {index, job.name});
  }
}

const std::vector<std::pair<int, std::string>>& JobController::ArrayTasks(
    const std::string& array) const {
  static const std::vector<std::pair<int, std::string>> kNone;
  auto it = arrays_.find(array);
  return it == arrays_.end() ? kNone : it->second;
}

void JobController::ReleaseArraySlots(const std::string& array, bool announce, int64_t now_ms) {
  auto it = arrays_.find(array);
  if (it == arrays_.end()) return;
  std::vector<JobRecord*> waiting;
  int in_flight = 0;
  int parallelism = 0;
  for (const auto& [index, name] : it->second) {
    JobRecord* task = FindJob(name);
    if (task == nullptr || task->finished()) continue;
    parallelism = task->spec.scheduling.array.parallelism;
    if (task->waits_for_array_slot) {
      waiting.push_back(task);
    } else {
      ++in_flight;
    }
  }
  for (JobRecord* task : waiting) {
    if (in_flight >= parallelism) break;
    ++in_flight;
    task->waits_for_array_slot = false;
    const std::vector<JobDependency> pending = PendingAfter(*task);
    task->waits_for_jobs = !pending.empty();
    if (task->state == JobState::QUEUED) {
      task->queued_since_ms = now_ms;  // its wait for resources begins now
      task->message = pending.empty() ? "waiting for resources" : AfterWaitMessage(pending);
    }
    if (announce) {
      AddEvent(*task,
               "its turn in array " + array + " (at most " + std::to_string(parallelism) +
                   " tasks at once, scheduling.array)" +
                   (pending.empty() ? ": it may run now" : "; " + AfterWaitMessage(pending)),
               now_ms);
    }
    MarkDirty(*task);
    schedule_needed_ = true;
  }
}

std::string JobController::WaitForJobsMessage(const JobRecord& job) const {
  if (!job.waits_for_array_slot) return AfterWaitMessage(PendingAfter(job));
  const ArraySpec& array = job.spec.scheduling.array;
  return "waiting for its turn in array " + job.spec.ArrayName() + " (at most " +
         std::to_string(array.parallelism) + " of its " + std::to_string(array.indexes.size()) +
         " tasks at once, scheduling.array)";
}

void JobController::ReleaseAfter(const Dependency& dep, int64_t now_ms) {
  auto it = dependents_.find(dep.name);
  if (it == dependents_.end()) return;
  const std::vector<std::string> names = std::move(it->second);
  dependents_.erase(it);
  for (const std::string& name : names) {
    JobRecord* job = FindJob(name);
    if (job == nullptr || job->finished() || !job->waits_for_jobs || dep.seq > job->seq) continue;
    const auto& after = job->spec.scheduling.after;
    const auto d = std::find_if(after.begin(), after.end(),
                                [&](const JobDependency& e) { return e.job == dep.name; });
    if (d == after.end()) continue;
    if (!Meets(d->when, dep.state)) {
      EndAfter(*job, *d, dep, now_ms);
      continue;
    }
    const std::vector<JobDependency> pending = PendingAfter(*job);
    const std::string what = d->when == AfterCondition::kSucceeded
                                 ? dep.Describe() + " succeeded (scheduling.after)"
                                 : dep.Describe() + " ended " + wire::EnumNameJobState(dep.state) +
                                       " (scheduling.after: " + FormatJobDependency(*d) + ")";
    const std::string next = !pending.empty()            ? "; " + AfterWaitMessage(pending)
                             : job->waits_for_array_slot ? "; " + WaitForJobsMessage(*job)
                                                         : ": it may run now";
    AddEvent(*job, what + next, now_ms);
    if (pending.empty() && job->waits_for_array_slot) {
      if (job->state == JobState::QUEUED) job->message = WaitForJobsMessage(*job);
    } else if (pending.empty()) {
      job->waits_for_jobs = false;
      if (job->state == JobState::QUEUED) {
        // Its wait for resources (the starvation limit's, scheduling.max_wait's) begins now.
        job->queued_since_ms = now_ms;
        job->message = "waiting for resources";
      }
      schedule_needed_ = true;
    } else if (job->state == JobState::QUEUED) {
      job->message = AfterWaitMessage(pending);
    }
    MarkDirty(*job);
  }
}

void JobController::Cancel(JobRecord& job, const std::string& reason, int64_t now_ms) {
  if (job.state == JobState::SUCCEEDED) {
    if (StopReplicas(job, "the job ended (SUCCEEDED); " + reason, now_ms, AskedToStop) > 0) {
      AddEvent(job, reason + ": the replicas still running are stopped", now_ms);
    }
    return;
  }
  if (job.finished() || job.state == JobState::CANCELLING) return;
  job.state = JobState::CANCELLING;
  job.message = reason;
  held_.erase(job.name);
  AddEvent(job, reason, now_ms);
  StopReplicas(job, "job cancelled", now_ms);
  MaybeFinishCancel(job, now_ms);
}

void JobController::ApplyReplicaStatus(JobRecord& job, ReplicaRecord& r, ReplicaState state,
                                       int exit_code, int signal, const std::string& message,
                                       int64_t now_ms, int cause_signal) {
  if (state == r.state && !IsFinal(state)) return;
  if (!IsFinal(state)) {
    // PENDING -> STARTING -> RUNNING; never backwards.
    if (static_cast<int>(state) < static_cast<int>(r.state)) return;
    SetReplicaState(r, state, message, now_ms);
    MarkDirty(job);
    // What its agent did before the start (torn checkpoints set aside) goes into the events too.
    if (state == ReplicaState::RUNNING && !message.empty()) {
      AddEvent(job, r.name + " attempt " + std::to_string(r.attempt) + ": " + message, now_ms);
    }
    if (state == ReplicaState::RUNNING) MaybeRunning(job, now_ms);
    return;
  }
  // A replica stopped by a preemption ended PREEMPTED, whatever its agent calls a stop.
  if (state == ReplicaState::STOPPED && r.stop_requested && preempting_.count(job.name)) {
    state = ReplicaState::PREEMPTED;
  }
  SetReplicaState(r, state, message, now_ms);
  r.exit_code = exit_code;
  r.signal = signal;
  r.cause_signal = cause_signal;
  MarkDirty(job);
  OnReplicaEnded(job, r, now_ms);
}

// ---- where replicas are ----------------------------------------------------------------------

void JobController::NoteOnNode(const std::string& node_id, const std::string& job) {
  NodeJobs& entry = on_node_[node_id];
  entry.jobs.push_back(job);
  if (entry.jobs.size() > 2 * entry.kept + 16) PruneNode(node_id, entry);
}

void JobController::PruneNode(const std::string& node_id, NodeJobs& entry) {
  std::sort(entry.jobs.begin(), entry.jobs.end());
  entry.jobs.erase(std::unique(entry.jobs.begin(), entry.jobs.end()), entry.jobs.end());
  std::erase_if(entry.jobs, [&](const std::string& name) {
    const JobRecord* job = FindJob(name);
    return job == nullptr ||
           std::none_of(job->replicas.begin(), job->replicas.end(), [&](const ReplicaRecord& r) {
             return r.node_id == node_id && !IsFinal(r.state);
           });
  });
  entry.kept = entry.jobs.size();
}

std::vector<JobRecord*> JobController::JobsOnNode(const std::string& node_id) {
  std::vector<JobRecord*> out;
  auto it = on_node_.find(node_id);
  if (it == on_node_.end()) return out;
  PruneNode(node_id, it->second);
  for (const std::string& name : it->second.jobs) out.push_back(FindJob(name));
  std::sort(out.begin(), out.end(),
            [](const JobRecord* a, const JobRecord* b) { return a->seq < b->seq; });
  if (it->second.jobs.empty()) on_node_.erase(it);
  return out;
}

bool JobController::EndGoneReplicas(JobRecord& job, const std::string& node_id,
                                    const std::function<bool(const ReplicaRecord&)>& gone,
                                    const std::string& lost_why, const std::string& stopped_why,
                                    std::optional<int64_t> silent_since_ms, int64_t now_ms,
                                    int64_t fenced_until_ms) {
  // A launch sent once the node had fallen silent, and never answered (see "Launches into
  // silence"). Placement sends the launch in the pass that sets PENDING's time.
  auto never_reached = [&](const ReplicaRecord& r) {
    return silent_since_ms && !r.stop_requested && r.state == ReplicaState::PENDING &&
           r.state_time_ms >= *silent_since_ms;
  };
  std::vector<ReplicaRecord*> ran;
  std::vector<ReplicaRecord*> unreached;
  for (auto& r : job.replicas) {
    if (r.node_id != node_id || IsFinal(r.state) || !gone(r)) continue;
    (never_reached(r) ? unreached : ran).push_back(&r);
  }
  bool ended = false;
  auto end = [&](ReplicaRecord& r, const std::string& message, bool never_ran) {
    if (IsFinal(r.state)) return;
    HoldForFence(job, r, fenced_until_ms);
    ended = true;
    if (r.stop_requested) {
      SetReplicaState(r, ReplicaState::STOPPED, stopped_why, now_ms);
    } else {
      SetReplicaState(r, ReplicaState::LOST, message, now_ms);
    }
    MarkDirty(job);
    OnReplicaEnded(job, r, now_ms, never_ran);
  };
  for (ReplicaRecord* r : ran) end(*r, lost_why, false);
  for (ReplicaRecord* r : unreached) {
    end(*r,
        lost_why + "; attempt " + std::to_string(r->attempt) + " was launched " +
            FormatDuration(r->state_time_ms - *silent_since_ms) +
            " after the node was last heard from, and never started",
        true);
  }
  return ended;
}

void JobController::NodeLost(const std::string& node_id, const std::string& why, int64_t now_ms,
                             std::optional<int64_t> silent_since_ms,
                             std::optional<int64_t> last_contact_ms) {
  // A node whose session was ended while it answered is silent from now on.
  const int64_t until = FencedUntil(last_contact_ms.value_or(silent_since_ms.value_or(now_ms)));
  for (JobRecord* job : JobsOnNode(node_id)) {
    if (EndGoneReplicas(
            *job, node_id, [](const ReplicaRecord&) { return true; }, why,
            "its node was lost while stopping: " + why, silent_since_ms, now_ms, until)) {
      NoteFenceWait(*job, node_id, until, now_ms);
    }
  }
  schedule_needed_ = true;
}

void JobController::HoldForFence(JobRecord& job, ReplicaRecord& r, int64_t until) {
  r.fenced_until_ms = until;
  if (until > 0) fenced_jobs_.insert(job.name);
}

int64_t JobController::FencedUntil(int64_t last_contact_ms) const {
  if (options_.fence_after_ms <= 0) return 0;
  return last_contact_ms + options_.fence_after_ms + options_.fence_grace_ms +
         2 * options_.heartbeat_interval_ms;
}

void JobController::NoteFenceWait(JobRecord& job, const std::string& node_id, int64_t until,
                                  int64_t now_ms) {
  if (until <= now_ms || job.finished()) return;
  AddEvent(job,
           "what ran on " + node_id + " is placed again in " +
               FormatDuration((until - now_ms + 999) / 1000 * 1000) +
               ", once that node's agent has surely stopped it (fencing: an agent stops its "
               "replicas after " +
               FormatDuration(options_.fence_after_ms) +
               " without word from the coordinator, and waits at most " +
               FormatDuration(options_.fence_grace_ms) + " for them to end)",
           now_ms);
}

void JobController::FencedNodeReturned(const std::string& node_id,
                                       const std::set<std::string>& live, int64_t now_ms) {
  for (auto it = fenced_jobs_.begin(); it != fenced_jobs_.end();) {
    JobRecord* job = FindJob(*it);
    if (job == nullptr) {
      it = fenced_jobs_.erase(it);
      continue;
    }
    bool held = false;
    for (auto& r : job->replicas) {
      if (r.fenced_until_ms <= now_ms) continue;
      const std::string& lost_on = r.placed() ? r.node_id : r.last_node;
      if (lost_on == node_id && !live.count(AttemptId(job->name, r.name, r.attempt))) {
        EndFence(*job, r, node_id + " registered again without it", now_ms);
        continue;
      }
      held = true;
    }
    it = held ? std::next(it) : fenced_jobs_.erase(it);
  }
}

size_t JobController::FenceHeldReplicas(int64_t now_ms) const {
  size_t held = 0;
  for (const std::string& name : fenced_jobs_) {
    const JobRecord* job = FindJob(name);
    if (job == nullptr) continue;
    for (const auto& r : job->replicas) held += r.fenced_until_ms > now_ms ? 1 : 0;
  }
  return held;
}

void JobController::FencedAttemptEnded(const std::string& node_id, const std::string& job_name,
                                       const std::string& replica, int attempt, int64_t now_ms) {
  if (!fenced_jobs_.count(job_name)) return;
  JobRecord* job = FindJob(job_name);
  ReplicaRecord* r = job == nullptr ? nullptr : job->FindReplica(replica);
  if (r == nullptr || r->fenced_until_ms <= now_ms || r->attempt != attempt) return;
  if ((r->placed() ? r->node_id : r->last_node) != node_id) return;
  EndFence(*job, *r, node_id + " reports that it ended", now_ms);
}

void JobController::EndFence(JobRecord& job, ReplicaRecord& r, const std::string& why,
                             int64_t now_ms) {
  r.fenced_until_ms = 0;
  MarkDirty(job);
  schedule_needed_ = true;
  AddEvent(job,
           r.name + " attempt " + std::to_string(r.attempt) + " no longer runs (" + why +
               "): placed again without waiting for the fence",
           now_ms);
}

void JobController::Reconcile(const std::string& node_id,
                              const std::set<std::pair<std::string, std::string>>& reported,
                              int64_t now_ms, std::optional<int64_t> last_heard_ms) {
  for (JobRecord* job : JobsOnNode(node_id)) {
    if (job->finished()) continue;  // below, with the other ended jobs that hold replicas
    EndGoneReplicas(
        *job, node_id,
        [&](const ReplicaRecord& r) {
          return !reported.count({job->name, r.name});
        },
        "node " + node_id + " re-registered without it", "gone when its node re-registered",
        last_heard_ms, now_ms);
  }
  // Finished jobs may still wait for replicas to stop.
  for (const auto& name : ended_holding_) {
    auto jit = jobs_.find(name);
    if (jit == jobs_.end()) continue;
    JobRecord* job = jit->second.get();
    for (auto& r : job->replicas) {
      if (r.node_id == node_id && !IsFinal(r.state) && !reported.count({name, r.name})) {
        SetReplicaState(r, ReplicaState::STOPPED, "gone when its node re-registered", now_ms);
        MarkDirty(*job);
      }
    }
  }
  schedule_needed_ = true;
}

void JobController::ChiefSucceededUnrecorded(JobRecord& job, const std::string& node_id,
                                             int attempt, int64_t now_ms) {
  if (job.finished()) return;
  FinishJob(job, JobState::SUCCEEDED,
            "the chief exited 0 (attempt " + std::to_string(attempt) + " on node " + node_id +
                ", a run this coordinator's state had not recorded: it was restored from an "
                "older backup)",
            now_ms);
}

void JobController::CheckTimeouts(int64_t now_ms, bool registration_grace_over) {
  // A job never placed has no replica to lose and no start to time out from: of 100,000 queued
  // jobs, only those that ran before, or whose wait is bounded (scheduling.max_wait), are read.
  std::vector<JobRecord*> jobs;
  for (const auto& [seq, job] : active()) {
    if (job->may_hold || job->wait_limited) jobs.push_back(job);
  }
  // No agent heard this coordinator before it started.
  const int64_t fenced_until = FencedUntil(options_.started_ms);
  for (JobRecord* job : jobs) {
    if (job->finished()) continue;
    if (registration_grace_over) {
      std::set<std::string> fenced_nodes;
      for (auto& r : job->replicas) {
        if (!r.placed() || IsFinal(r.state) || health_->LastHeardMs(r.node_id)) continue;
        HoldForFence(*job, r, fenced_until);
        fenced_nodes.insert(r.node_id);
        SetReplicaState(
            r, r.stop_requested ? ReplicaState::STOPPED : ReplicaState::LOST,
            "node " + r.node_id + " did not re-register after the coordinator restarted", now_ms);
        MarkDirty(*job);
        OnReplicaEnded(*job, r, now_ms);
        if (job->finished()) break;
      }
      for (const auto& node : fenced_nodes) NoteFenceWait(*job, node, fenced_until, now_ms);
    }
    if (job->finished()) continue;
    // Until the agents had time to register after a restart, a job does not fit for want of them.
    if (registration_grace_over && WaitedTooLong(*job, now_ms)) {
      const std::string limit = FormatDuration(job->spec.scheduling.max_wait.count());
      FinishJob(*job, JobState::FAILED,
                "waited " + limit + " to be placed (scheduling.max_wait: " + limit +
                    "): " + job->WaitingFor(),
                now_ms);
      continue;
    }
    int64_t timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(job->spec.scheduling.timeout).count();
    if (job->start_time_ms > 0 && job->state != JobState::CANCELLING &&
        job->state != JobState::SUSPENDED &&
        now_ms - job->start_time_ms - job->suspended_ms > timeout) {
      FinishJob(*job, JobState::FAILED, "timed out after " + FormatDuration(timeout), now_ms);
    }
  }
  // A job the chief's success ended stops the replicas it left running once its grace is over.
  for (const auto& name : ended_holding_) {
    auto jit = jobs_.find(name);
    if (jit != jobs_.end()) SettleSucceeded(*jit->second, now_ms);
  }
  if (registration_grace_over) {
    for (const auto& name : ended_holding_) {
      auto jit = jobs_.find(name);
      if (jit == jobs_.end()) continue;
      JobRecord* job = jit->second.get();
      for (auto& r : job->replicas) {
        if (r.placed() && !IsFinal(r.state) && !health_->LastHeardMs(r.node_id)) {
          SetReplicaState(r, ReplicaState::STOPPED, "its node did not re-register", now_ms);
          MarkDirty(*job);
        }
      }
    }
  }
}

bool JobController::WaitedTooLong(const JobRecord& job, int64_t now_ms) {
  return job.wait_limited && job.state == JobState::QUEUED && !job.waits_for_jobs &&
         now_ms - job.queued_since_ms >= job.spec.scheduling.max_wait.count();
}

void JobController::ReleaseVerdicts(int64_t now_ms) {
  if (held_.empty()) return;
  std::vector<std::string> names;
  for (const auto& [name, held] : held_) names.push_back(name);
  for (const auto& name : names) {
    JobRecord* job = FindJob(name);
    if (job == nullptr || job->finished()) {
      held_.erase(name);
      continue;
    }
    ReleaseHeld(*job, now_ms);
  }
}

void JobController::Hang(JobRecord& job, const std::vector<std::string>& stuck,
                         const std::string& message, int64_t now_ms,
                         const std::string& fail_reason) {
  if (job.state != JobState::RUNNING) return;
  AddEvent(job, message, now_ms);
  if (!fail_reason.empty()) {
    ++hangs_by_outcome_["gpu_idle_limit"];
    FinishJob(job, JobState::FAILED, fail_reason, now_ms);
    return;
  }
  std::string who;
  for (const auto& name : stuck) who += (who.empty() ? "" : ", ") + name;
  if (job.spec.scheduling.hang_action == HangAction::kFail) {
    ++hangs_by_outcome_["fail"];
    FinishJob(job, JobState::FAILED, "hung (" + who + " stuck; scheduling.hang_action: fail)",
              now_ms);
    return;
  }
  int budget = job.spec.scheduling.max_restarts;
  if (job.restarts >= budget) {
    ++hangs_by_outcome_["fail"];
    FinishJob(job, JobState::FAILED,
              "hung (" + who + " stuck); the restart budget (max_restarts=" +
                  std::to_string(budget) + ") is spent",
              now_ms);
    return;
  }
  ++job.restarts;
  ++restarts_by_cause_["hang"];
  ++hangs_by_outcome_["restart"];
  Incident& inc = incidents_[job.name] =
      Incident(job, "of a hang (" + who + " stuck)", job.restarts, budget, now_ms);
  AddEvent(job, inc.Event(), now_ms);
  commands_.restarted.emplace_back(job.name, inc.Event());
  RestartJob(job, now_ms);
  ReleaseHeld(job, now_ms);
}

// ---- the state machine (failure attribution: job_controller_failures.cc) -------------------

void JobController::RestartReplica(JobRecord& job, ReplicaRecord& r, int64_t now_ms) {
  r.last_node = r.node_id;
  r.node_id.clear();
  r.gpus.clear();
  r.port = 0;
  r.stop_requested = false;
  SetReplicaState(r, ReplicaState::PENDING, "waiting to be placed again", now_ms);
  r.exit_code = -1;
  r.signal = 0;
  r.cause_signal = 0;
  MarkDirty(job);
  schedule_needed_ = true;
}

void JobController::RestartJob(JobRecord& job, int64_t now_ms) {
  Requeue(job, "the job restarts",
          "restarting: waiting for the old replicas to stop and for resources", -1, now_ms);
}

void JobController::Requeue(JobRecord& job, const std::string& stop_reason, std::string message,
                            int elastic_workers, int64_t now_ms) {
  StopReplicas(job, stop_reason, now_ms);
  job.state = JobState::QUEUED;
  job.message = std::move(message);
  job.queued_since_ms = now_ms;
  SetElasticWorkers(job, elastic_workers);
  MarkDirty(job);
  schedule_needed_ = true;
}

void JobController::SetElasticWorkers(JobRecord& job, int workers) {
  if (job.elastic_workers == workers) return;
  job.elastic_workers = workers;
  FillDemands(job);
  job.shape_id = shapes_.Intern(job.demands);
  schedule_needed_ = true;
}

void JobController::ShrinkElastic(JobRecord& job, int workers) {
  if (job.state != JobState::QUEUED || !job.elastic) return;
  SetElasticWorkers(job, std::clamp(workers, *job.spec.MinWorkers(), ElasticMaxWorkers(job)));
}

void JobController::GrowElastic(JobRecord& job, int workers, const std::string& why,
                                int64_t now_ms) {
  if (job.state != JobState::RUNNING || !job.elastic) return;
  // A replica that ended (a failure whose verdict is held, a rank done early) is judged first.
  for (const auto& r : job.replicas) {
    if (!r.idle && r.state != ReplicaState::RUNNING) return;
  }
  const int now_workers = ElasticWorkersRunning(job);
  workers = std::min(workers, ElasticMaxWorkers(job));
  if (workers <= now_workers) return;
  held_.erase(job.name);
  incidents_.erase(job.name);
  const std::string grow = "grows to " + std::to_string(workers) + " of " +
                           std::to_string(ElasticMaxWorkers(job)) + " workers";
  AddEvent(job,
           "elastic: " + why + ": the job " + grow +
               " and restarts from its checkpoint (no restart spent)",
           now_ms);
  ++elastic_grows_;
  Requeue(job, "the job " + grow, "elastic: the job " + grow + ": waiting for its replicas to stop",
          workers, now_ms);
}

int JobController::ElasticMaxWorkers(const JobRecord& job) {
  const WorkerPoolSpec* workers = job.spec.FindPool(Role::kWorker);
  return workers == nullptr ? 0 : workers->replicas;
}

int JobController::ElasticWorkersRunning(const JobRecord& job) {
  int n = 0;
  for (const auto& r : job.replicas) n += r.role == Role::kWorker && !r.idle ? 1 : 0;
  return n;
}

void JobController::PreemptJob(JobRecord& job, const std::string& reason, int64_t now_ms) {
  if (job.state != JobState::PENDING && job.state != JobState::RUNNING) return;
  held_.erase(job.name);
  incidents_.erase(job.name);
  preempting_.insert(job.name);
  AddEvent(job,
           reason + "; back in the queue, to resume from its newest checkpoint (no restart spent)",
           now_ms);
  Requeue(job, reason, reason + ": waiting for its replicas to stop, then for resources", -1,
          now_ms);
}

Status JobController::UpdateScheduling(JobRecord& job, const std::string& priority,
                                       const std::string& queue, const std::string& by,
                                       int64_t now_ms) {
  if (job.finished() || job.state == JobState::CANCELLING) {
    return FailedPrecondition("job " + job.name + " is " + wire::EnumNameJobState(job.state) +
                              ": only a job that has not ended can be updated");
  }
  SchedulingSpec& scheduling = job.spec.scheduling;
  std::string changes;
  auto note = [&](const char* what, const std::string& to, const std::string& was) {
    if (to.empty() || to == was) return;
    changes += (changes.empty() ? "" : ", ") + std::string(what) + " " + to + " (was " + was + ")";
  };
  note("priority", priority, scheduling.priority);
  note("queue", queue, scheduling.queue);
  if (changes.empty()) return Status::Ok();
  COHORT_ASSIGN_OR_RETURN(std::string yaml, WithSchedulingClass(job.spec_yaml, priority, queue));
  job.spec_yaml = std::move(yaml);
  if (!priority.empty()) scheduling.priority = priority;
  if (!queue.empty()) scheduling.queue = queue;
  job.queue_index = -1;  // resolved again by the next round
  AddEvent(job, "updated" + (by.empty() ? std::string() : " by " + by) + ": " + changes, now_ms);
  MarkDirty(job);
  schedule_needed_ = true;
  return Status::Ok();
}

Status JobController::Suspend(JobRecord& job, const std::string& reason, int64_t now_ms) {
  if (job.finished() || job.state == JobState::CANCELLING) {
    return FailedPrecondition("job " + job.name + " is " + wire::EnumNameJobState(job.state) +
                              ": only a job queued or running can be suspended");
  }
  if (job.state == JobState::SUSPENDED) return Status::Ok();
  held_.erase(job.name);
  incidents_.erase(job.name);
  preempting_.erase(job.name);
  preempted_for_.erase(job.name);  // its victims run again without waiting for it
  AddEvent(
      job,
      reason +
          (AnyHolding(job) ? "; its replicas stop, to resume from the newest checkpoint" : "") +
          " (no restart spent)",
      now_ms);
  StopReplicas(job, reason, now_ms, AskedToStop);
  job.state = JobState::SUSPENDED;
  job.message = reason + "; `cohort resume " + job.name + "` queues it again";
  job.queued_since_ms = now_ms;  // the suspension's start (JobRecord::suspended_ms)
  SetElasticWorkers(job, -1);
  MarkDirty(job);
  schedule_needed_ = true;  // what it held comes free, and others may be placed in its room
  return Status::Ok();
}

Status JobController::Resume(JobRecord& job, const std::string& reason, int64_t now_ms) {
  if (job.finished() || job.state == JobState::CANCELLING) {
    return FailedPrecondition("job " + job.name + " is " + wire::EnumNameJobState(job.state) +
                              ": only a suspended job can be resumed");
  }
  if (job.state != JobState::SUSPENDED) return Status::Ok();
  const int64_t suspended = std::max<int64_t>(0, now_ms - job.queued_since_ms);
  if (job.start_time_ms > 0) job.suspended_ms += suspended;  // before its start nothing counts
  job.state = JobState::QUEUED;
  job.message = job.waits_for_jobs ? WaitForJobsMessage(job) : reason + ": waiting for resources";
  job.queued_since_ms = now_ms;
  AddEvent(job, reason + ": back in the queue after " + FormatDuration(suspended) + " suspended",
           now_ms);
  MarkDirty(job);
  schedule_needed_ = true;
  return Status::Ok();
}

void JobController::NotePreemption(JobRecord& preemptor, const std::vector<std::string>& victims,
                                   const std::string& event, int64_t now_ms) {
  AddEvent(preemptor, event, now_ms);
  auto& slot = preempted_for_[preemptor.name];
  slot.insert(slot.end(), victims.begin(), victims.end());
}

const std::vector<std::string>& JobController::PreemptedFor(const JobRecord& job) const {
  static const std::vector<std::string> kNone;
  auto it = preempted_for_.find(job.name);
  return it == preempted_for_.end() ? kNone : it->second;
}

int JobController::StopReplicas(JobRecord& job, const std::string& reason, int64_t now_ms,
                                const std::function<bool(const ReplicaRecord&)>& spare) {
  int stopped = 0;
  for (auto& r : job.replicas) {
    if (IsFinal(r.state) || (spare && spare(r))) continue;
    if (HoldsResources(r)) {
      SendStop(job, r, reason);
    } else {
      // Never placed: nothing runs.
      SetReplicaState(r, ReplicaState::STOPPED, "not started: " + reason, now_ms);
      r.stop_requested = true;
    }
    ++stopped;
  }
  if (stopped > 0) MarkDirty(job);  // nothing changed otherwise (SettleSucceeded: every second)
  return stopped;
}

void JobController::SendStop(JobRecord& job, ReplicaRecord& r, const std::string& reason) {
  r.stop_requested = true;
  MarkDirty(job);
  commands_.stop.push_back(StopCommand{r.node_id, job.name, r.name, r.attempt, reason});
}

void JobController::FinishJob(JobRecord& job, JobState state, const std::string& message,
                              int64_t now_ms) {
  job.state = state;
  job.message = message;
  job.end_time_ms = now_ms;
  held_.erase(job.name);
  incidents_.erase(job.name);
  preempted_for_.erase(job.name);
  preempting_.erase(job.name);
  AddEvent(job, std::string(wire::EnumNameJobState(state)) + ": " + message, now_ms);
  if (state == JobState::SUCCEEDED) {
    SettleSucceeded(job, now_ms);
  } else {
    StopReplicas(job, std::string("the job ended (") + wire::EnumNameJobState(state) + ")", now_ms);
  }
  EraseActive(job.seq);
  if (AnyHolding(job)) ended_holding_.insert(job.name);
  MarkDirty(job);
  Ended(job, now_ms);
}

bool JobController::Finishing(const ReplicaRecord& r) {
  return (r.role == Role::kChief || r.role == Role::kWorker) && r.state == ReplicaState::RUNNING &&
         !r.stop_requested;
}

void JobController::SettleSucceeded(JobRecord& job, int64_t now_ms) {
  if (job.state != JobState::SUCCEEDED) return;
  const std::string ended = "the job ended (SUCCEEDED)";
  const int64_t grace = job.spec.scheduling.finish_grace.count();
  if (std::any_of(job.replicas.begin(), job.replicas.end(), Finishing) &&
      now_ms - job.end_time_ms < grace) {
    // The workers finish their last steps, and the servers (parameter servers, reducers,
    // evaluators) stay while the workers may still need them: only what does not run yet stops.
    StopReplicas(job, ended, now_ms, [](const ReplicaRecord& r) {
      return AskedToStop(r) || Finishing(r) || (r.role != Role::kChief && r.role != Role::kWorker);
    });
    return;
  }
  for (auto& r : job.replicas) {
    if (!Finishing(r) || grace == 0) continue;
    AddEvent(job,
             r.name + " still running " + FormatDuration(grace) + " after the job ended: stopped",
             now_ms);
    SendStop(job, r, ended + "; still running " + FormatDuration(grace) + " after it");
  }
  StopReplicas(job, ended, now_ms, AskedToStop);
}

void JobController::MaybeFinishCancel(JobRecord& job, int64_t now_ms) {
  if (job.state != JobState::CANCELLING || AnyHolding(job)) return;
  job.state = JobState::CANCELLED;
  job.message = "cancelled";
  job.end_time_ms = now_ms;
  incidents_.erase(job.name);
  preempted_for_.erase(job.name);
  preempting_.erase(job.name);
  AddEvent(job, "CANCELLED: every replica stopped", now_ms);
  EraseActive(job.seq);
  MarkDirty(job);
  Ended(job, now_ms);
}

void JobController::MaybeRunning(JobRecord& job, int64_t now_ms) {
  if (job.state != JobState::PENDING) return;
  size_t running = 0;
  for (const auto& r : job.replicas) {
    if (r.idle) continue;
    if (r.state != ReplicaState::RUNNING && r.state != ReplicaState::SUCCEEDED) return;
    ++running;
  }
  if (job.first_running_ms == 0) {
    job.first_running_ms = now_ms;
    commands_.started.push_back(job.name);
  }
  job.state = JobState::RUNNING;
  job.message = "all replicas running";
  AddEvent(job,
           running == 1 ? std::string("running: its one replica running")
                        : "running: all " + std::to_string(running) + " replicas running",
           now_ms);
}

void JobController::Ended(JobRecord& job, int64_t now_ms) {
  commands_.ended.push_back(job.name);
  job.waits_for_array_slot = false;
  ReleaseAfter(DependencyOfJob(job), now_ms);
  if (!job.spec.IsArrayTask()) return;
  const std::string array = job.spec.ArrayName();
  ReleaseArraySlots(array, /*announce=*/true, now_ms);
  // Its last task to end ends the array: the jobs after the array go on or fail. Only where a
  // job waits for it is the array tallied, not at every task's end.
  if (!dependents_.contains(array)) return;
  if (std::optional<Dependency> whole = FindDependency(array);
      whole && whole->array && whole->finished) {
    ReleaseAfter(*whole, now_ms);
  }
}

// ---- placement ------------------------------------------------------------------------------

void JobController::PlaceReplica(JobRecord& job, ReplicaRecord& r, const std::string& node_id,
                                 std::vector<int> gpus, int port, int64_t now_ms) {
  r.node_id = node_id;
  r.gpus = std::move(gpus);
  r.port = port;
  r.fenced_until_ms = 0;
  ++r.attempt;
  SetReplicaState(r, ReplicaState::PENDING, "launch sent", now_ms);
  NoteOnNode(node_id, job.name);
  AddEvent(job, r.name + " attempt " + std::to_string(r.attempt) + " placed on " + r.node_id,
           now_ms);
  // No process of the job runs: every other replica holds nothing, or is itself being launched
  // (placed, not yet started: the replicas an incident took, placed again one by one).
  const bool others_stopped =
      std::none_of(job.replicas.begin(), job.replicas.end(), [&](const ReplicaRecord& o) {
        return &o != &r && HoldsResources(o) && o.state != ReplicaState::PENDING &&
               o.state != ReplicaState::STARTING;
      });
  commands_.launch.push_back(LaunchCommand{job.name, r.name, others_stopped});
}

void JobController::SetJobPorts(JobRecord& job, int master_port, int bootstrap_port,
                                int64_t now_ms) {
  job.master_port = master_port;
  job.bootstrap_port = bootstrap_port;
  AddEvent(job,
           "its chief moved to a host where its ports were taken: master port " +
               std::to_string(master_port) + ", bootstrap port " + std::to_string(bootstrap_port),
           now_ms);
  MarkDirty(job);
}

void JobController::PlaceJob(JobRecord& job, const std::vector<Slot>& slots, int master_port,
                             int bootstrap_port, int64_t now_ms) {
  job.master_port = master_port;
  job.bootstrap_port = bootstrap_port;
  job.may_hold = true;
  preempted_for_.erase(job.name);
  preempting_.erase(job.name);
  std::set<std::string> used_nodes;
  size_t placed = 0;
  std::string idle;  // the workers an elastic job runs without
  // A job that restarts whole runs one attempt number on every replica, as torchrun's restart
  // count is one for all its workers: a worker an elastic job ran without takes the others' next
  // attempt (its own skip the attempts it sat out). -1: each replica its own next one.
  int whole_attempt = -1;
  if (job.spec.RestartsWholeJob()) {
    for (const ReplicaRecord& r : job.replicas) {
      whole_attempt = std::max(whole_attempt, r.launched ? r.attempt + 1 : r.attempt);
    }
  }
  for (ReplicaRecord& r : job.replicas) {
    if (!InNextPlacement(job, r)) {
      if (!r.idle || r.state != ReplicaState::STOPPED) {
        r.idle = true;
        r.node_id.clear();
        r.gpus.clear();
        r.port = 0;
        r.stop_requested = true;
        r.fenced_until_ms = 0;
        SetReplicaState(r, ReplicaState::STOPPED,
                        "idle: the job runs without it (elastic: no room for every worker)",
                        now_ms);
      }
      idle += (idle.empty() ? "" : ", ") + r.name;
      continue;
    }
    const Slot& s = slots[placed++];
    r.idle = false;
    if (whole_attempt >= 0) {
      r.attempt = whole_attempt;
    } else if (r.launched) {
      ++r.attempt;
    }
    r.launched = true;
    r.node_id = s.node_id;
    r.last_node = r.node_id;
    r.gpus = s.gpus;
    r.port = s.port;
    r.exit_code = -1;
    r.signal = 0;
    r.cause_signal = 0;
    r.fenced_until_ms = 0;
    r.stop_requested = false;
    SetReplicaState(r, ReplicaState::PENDING, "launch sent", now_ms);
    used_nodes.insert(r.node_id);
  }
  for (const auto& node : used_nodes) NoteOnNode(node, job.name);
  job.state = JobState::PENDING;
  job.message = "launching " + Counted(static_cast<int64_t>(placed), "replica");
  if (job.start_time_ms == 0) job.start_time_ms = now_ms;
  std::string where;
  for (const auto& n : used_nodes) where += (where.empty() ? "" : ", ") + n;
  std::string elastic;
  if (!idle.empty()) {
    ++elastic_shrinks_;
    elastic = "; elastic: " + std::to_string(job.elastic_workers) + " of " +
              std::to_string(ElasticMaxWorkers(job)) + " workers (min_replicas " +
              std::to_string(*job.spec.MinWorkers()) + "), no room for " + idle;
  }
  AddEvent(job,
           "placed on " + where + "; waited " + FormatDuration(now_ms - job.queued_since_ms) +
               " in the queue" + elastic,
           now_ms);
  for (auto& r : job.replicas) {
    if (!r.idle) commands_.launch.push_back(LaunchCommand{job.name, r.name, true});
  }
}

void JobController::SetWaitingMessage(JobRecord& job, const std::string& message) {
  if (job.message == message) return;
  job.message = message;
  MarkDirty(job);
}

void JobController::SetWaitingMessage(JobRecord& job, ReplicaRecord& r,
                                      const std::string& message) {
  if (r.message == message) return;
  r.message = message;
  MarkDirty(job);
}

// ---- queries and outputs --------------------------------------------------------------------

JobRecord* JobController::FindJob(const std::string& name) {
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : it->second.get();
}

const JobRecord* JobController::FindJob(const std::string& name) const {
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : it->second.get();
}

std::vector<const JobRecord*> JobController::EndedHolding() {
  std::vector<const JobRecord*> out;
  for (auto it = ended_holding_.begin(); it != ended_holding_.end();) {
    const JobRecord* job = FindJob(*it);
    if (job == nullptr || !AnyHolding(*job)) {
      it = ended_holding_.erase(it);
      continue;
    }
    out.push_back(job);
    ++it;
  }
  return out;
}

const std::vector<std::pair<uint64_t, JobRecord*>>& JobController::active() const {
  if (active_tombstones_ > 0) {
    std::erase_if(active_, [](const auto& entry) { return entry.second == nullptr; });
    active_tombstones_ = 0;
  }
  return active_;
}

void JobController::EraseActive(uint64_t seq) {
  auto it = std::lower_bound(active_.begin(), active_.end(), seq,
                             [](const auto& entry, uint64_t s) { return entry.first < s; });
  if (it == active_.end() || it->first != seq || it->second == nullptr) return;
  it->second = nullptr;
  ++active_tombstones_;
}

bool JobController::AnyHolding(const JobRecord& job) {
  for (const auto& r : job.replicas) {
    if (HoldsResources(r)) return true;
  }
  return false;
}

std::vector<std::string> JobController::HeldVerdicts() const {
  std::vector<std::string> out;
  for (const auto& [job, held] : held_) {
    for (const Held& h : held) out.push_back(job + "/" + h.replica);
  }
  return out;
}

ControllerCommands JobController::TakeCommands() {
  ControllerCommands out;
  std::swap(out, commands_);
  return out;
}

std::set<std::string> JobController::TakeDirty() {
  std::set<std::string> out;
  out.swap(dirty_);
  return out;
}

std::vector<std::string> JobController::TakeDeleted() {
  std::vector<std::string> out;
  out.swap(deleted_);
  return out;
}

Status JobController::Delete(const std::string& name) {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return NotFound("no job named '" + name + "'");
  JobRecord& job = *it->second;
  if (!job.finished()) {
    return FailedPrecondition("job " + name + " is " + wire::EnumNameJobState(job.state) +
                              ": only a finished job can be deleted (cancel it first)");
  }
  if (AnyHolding(job)) {
    return FailedPrecondition("job " + name +
                              " has replicas still stopping: try again when they have stopped");
  }
  EraseActive(job.seq);
  ended_holding_.erase(name);
  held_.erase(name);
  incidents_.erase(name);
  preempted_for_.erase(name);
  preempting_.erase(name);
  if (job.spec.IsArrayTask()) {
    auto array = arrays_.find(job.spec.ArrayName());
    if (array != arrays_.end()) {
      std::erase_if(array->second, [&](const auto& task) { return task.second == name; });
      if (array->second.empty()) arrays_.erase(array);
    }
  }
  dirty_.insert(name);
  deleted_.push_back(name);
  jobs_.erase(it);
  return Status::Ok();
}

bool JobController::TakeScheduleNeeded() {
  bool needed = schedule_needed_;
  schedule_needed_ = false;
  return needed;
}

// ---- small helpers --------------------------------------------------------------------------

void JobController::SetReplicaState(ReplicaRecord& r, ReplicaState s, const std::string& message,
                                    int64_t now_ms) {
  r.state = s;
  r.message = message;
  r.state_time_ms = now_ms;
}

void JobController::AddEvent(JobRecord& job, const std::string& message, int64_t now_ms) {
  spdlog::info("job {}: {}", job.name, message);
  job.events.push_back({now_ms, message});
  if (job.events.size() > kMaxEventsPerJob) {
    job.events.erase(job.events.begin(),
                     job.events.begin() + (job.events.size() - kMaxEventsPerJob));
  }
  MarkDirty(job);
}

void JobController::NoteRepeatable(JobRecord& job, const std::string& message, int64_t now_ms) {
  // How many times `text` says `message` happened: 1 for itself, N for "MESSAGE (N times)".
  auto times = [&message](const std::string& text) -> int64_t {
    if (text == message) return 1;
    constexpr std::string_view kSuffix = " times)";
    if (text.size() <= message.size() + 2 + kSuffix.size() || text.rfind(message + " (", 0) != 0 ||
        text.compare(text.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
      return 0;
    }
    const std::string count =
        text.substr(message.size() + 2, text.size() - message.size() - 2 - kSuffix.size());
    if (count.empty() || count.size() > 12 ||
        count.find_first_not_of("0123456789") != std::string::npos) {
      return 0;
    }
    return std::stoll(count);
  };
  const size_t window = std::min(job.events.size(), kRepeatWindow);
  for (size_t k = job.events.size(); k > job.events.size() - window; --k) {
    if (int64_t before = times(job.events[k - 1].message); before > 0) {
      job.events.erase(job.events.begin() + static_cast<std::ptrdiff_t>(k - 1));
      AddEvent(job, message + " (" + std::to_string(before + 1) + " times)", now_ms);
      return;
    }
  }
  AddEvent(job, message, now_ms);
}

void JobController::ReplaceEvent(JobRecord& job, int64_t time_ms, const std::string& prefix,
                                 const std::string& message) {
  for (auto it = job.events.rbegin(); it != job.events.rend(); ++it) {
    if (it->time_ms == time_ms && it->message.rfind(prefix, 0) == 0) {
      it->message = message;
      spdlog::info("job {}: {}", job.name, message);
      MarkDirty(job);
      return;
    }
  }
}

}  // namespace cohort::coordinator
