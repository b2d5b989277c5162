#include "coordinator/job_usage.h"

#include <algorithm>
#include <map>
#include <utility>

namespace cohort::coordinator {

std::string JobUser(const JobRecord& job) { return job.owner.empty() ? "unknown" : job.owner; }
std::string JobQueue(const JobRecord& job) { return job.spec.scheduling.queue; }

int JobGpus(const JobRecord& job) {
  int n = 0;
  for (const ReplicaRecord& r : job.replicas) n += job.PoolOf(r).resources.gpus;
  return n;
}

int JobCpus(const JobRecord& job) {
  int n = 0;
  for (const ReplicaRecord& r : job.replicas) n += job.PoolOf(r).resources.cpus;
  return n;
}

std::vector<UsageRow> ComputeUsage(const std::vector<const JobRecord*>& jobs,
                                   const UsageFilter& filter, int64_t now_ms) {
  std::map<std::pair<std::string, std::string>, UsageRow> rows;
  for (const JobRecord* job : jobs) {
    std::string user = JobUser(*job), queue = JobQueue(*job);
    if (!filter.user.empty() && user != filter.user) continue;
    if (!filter.queue.empty() && queue != filter.queue) continue;
    bool finished = job->finished();
    if (filter.since_ms > 0 && finished && job->end_time_ms < filter.since_ms) continue;
    UsageRow& row = rows[{user, queue}];
    row.user = user;
    row.queue = queue;
    ++row.jobs;
    if (job->state == JobState::FAILED) ++row.failed;
    if (job->start_time_ms <= 0) continue;
    int64_t from = std::max(job->start_time_ms, filter.since_ms);
    int64_t to = finished ? job->end_time_ms : now_ms;
    if (to <= from) continue;
    double hours = static_cast<double>(to - from) / 3'600'000.0;
    row.gpu_hours += hours * JobGpus(*job);
    row.cpu_hours += hours * JobCpus(*job);
  }
  std::vector<UsageRow> out;
  out.reserve(rows.size());
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  return out;
}

}  // namespace cohort::coordinator
