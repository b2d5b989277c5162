#include "coordinator/job_usage.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace cohort::coordinator {

std::string UserNamed(const std::string& owner) { return owner.empty() ? "unknown" : owner; }
std::string JobUser(const JobRecord& job) { return UserNamed(job.owner); }
std::string JobQueue(const JobRecord& job) { return job.spec.scheduling.queue; }

int JobGpus(const JobRecord& job) {
  int n = 0;
  for (const ReplicaRecord& r : job.replicas) n += r.idle ? 0 : job.PoolOf(r).resources.gpus;
  return n;
}

int JobCpus(const JobRecord& job) {
  int n = 0;
  for (const ReplicaRecord& r : job.replicas) n += r.idle ? 0 : job.PoolOf(r).resources.cpus;
  return n;
}

std::vector<UsageRow> ComputeUsage(const std::vector<const JobRecord*>& jobs,
                                   const UsageFilter& filter, int64_t now_ms) {
  // By user and queue, or by (unlabelled, the label's value): the unlabelled row sorts last.
  std::map<std::tuple<bool, std::string, std::string>, UsageRow> rows;
  const bool by_label = !filter.by_label.empty();
  for (const JobRecord* job : jobs) {
    std::string user = JobUser(*job), queue = JobQueue(*job);
    if (!filter.user.empty() && user != filter.user) continue;
    if (!filter.queue.empty() && queue != filter.queue) continue;
    if (!filter.selector.Matches(job->spec.labels)) continue;
    bool finished = job->finished();
    // Replicas that held on after the job's end (finishing ranks, servers stopped after them)
    // hold until they ended, or until now while they run.
    auto held_until = [&](const ReplicaRecord& r) {
      return IsFinal(r.state) ? r.state_time_ms : now_ms;
    };
    int64_t last_held = job->end_time_ms;
    if (finished) {
      for (const auto& r : job->replicas) {
        if (r.placed()) last_held = std::max(last_held, held_until(r));
      }
    }
    if (filter.since_ms > 0 && finished && last_held < filter.since_ms) continue;
    UsageRow* row_of_job = nullptr;
    if (by_label) {
      auto label = job->spec.labels.find(filter.by_label);
      const bool unlabelled = label == job->spec.labels.end();
      const std::string value = unlabelled ? "" : label->second;
      row_of_job = &rows[{unlabelled, value, ""}];
      row_of_job->label = value;
      row_of_job->unlabelled = unlabelled;
    } else {
      row_of_job = &rows[{false, user, queue}];
      row_of_job->user = user;
      row_of_job->queue = queue;
    }
    UsageRow& row = *row_of_job;
    ++row.jobs;
    if (job->state == JobState::FAILED) ++row.failed;
    if (job->start_time_ms <= 0) continue;
    int64_t from = std::max(job->start_time_ms, filter.since_ms);
    int64_t to = finished                            ? job->end_time_ms
                 : job->state == JobState::SUSPENDED ? job->queued_since_ms
                                                     : now_ms;
    if (to > from) {
      // The earlier suspensions' part of [from, to): all of it when the span is whole.
      const double suspended = job->suspended_ms <= 0 || to <= job->start_time_ms
                                   ? 0.0
                                   : static_cast<double>(job->suspended_ms) *
                                         static_cast<double>(to - from) /
                                         static_cast<double>(to - job->start_time_ms);
      double hours = std::max(0.0, static_cast<double>(to - from) - suspended) / 3'600'000.0;
      row.gpu_hours += hours * JobGpus(*job);
      row.cpu_hours += hours * JobCpus(*job);
    }
    if (!finished) continue;
    const int64_t after = std::max(job->end_time_ms, filter.since_ms);
    for (const auto& r : job->replicas) {
      if (!r.placed()) continue;
      const int64_t until = held_until(r);
      if (until <= after) continue;
      const double hours = static_cast<double>(until - after) / 3'600'000.0;
      const Resources& res = job->PoolOf(r).resources;
      row.gpu_hours += hours * res.gpus;
      row.cpu_hours += hours * res.cpus;
    }
  }
  std::vector<UsageRow> out;
  out.reserve(rows.size());
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  return out;
}

}  // namespace cohort::coordinator
