// Accounting (`cohort usage`, like Slurm's sacct): GPU-hours, CPU-hours, jobs and failures per
// user and queue (or per value of one job label: `--by-label team`, as Vertex AI's billing
// breakdown by label), computed from the jobs the coordinator holds (every stored job: the state
// store loads them all at start, so they equal the store).
//
// A job's usage is what it requested while it held resources: the sum over its replicas of the
// pool's GPUs (CPUs) times the time from its first placement (start_time_ms) to its end
// (end_time_ms, or `now` while it runs). Time queued, or restarting after an incident, counts as
// held: the state store keeps no per-attempt times, so this is an upper bound of the time
// replicas ran. Time suspended is not (JobRecord::suspended_ms; coordinator/job_controller.h,
// "Suspension"): a suspended job counts until its suspension began, and the time of its earlier
// suspensions is taken off its span, pro rata for the part of the span `since_ms` keeps (the
// store keeps their total, not when they were). A replica that held on after the job's end (a rank
// finishing within scheduling.finish_grace, a server stopped after the workers) adds its own
// resources from the end until it ended (its final state's time), or until `now` while it still
// runs; with `since_ms`, a job so held at or after it counts. With `since_ms`, only the part of
// that span at or after it counts, and only jobs that ran or ended then are counted (a job still
// queued counts in `jobs`, with no hours). A job's user is its owner and its queue its queue
// (JobUser/JobQueue: "unknown" and "default" where the job records none).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/schema/cohort_generated.h"
#include "coordinator/state.h"

namespace cohort::coordinator {

std::string JobUser(const JobRecord& job);
// The user of a job (an array) whose owner is `owner`: JobUser's rule.
std::string UserNamed(const std::string& owner);
std::string JobQueue(const JobRecord& job);

struct UsageFilter {
  std::string user;       // empty: every user
  std::string queue;      // empty: every queue
  int64_t since_ms = 0;   // 0: all time
  NodeSelector selector;  // the jobs whose labels it matches (empty: every job)
  // A label key: rows by each job's value of it (user and queue ""; the jobs without it in one
  // row, `unlabelled`, last) instead of by user and queue. Empty: by user and queue.
  std::string by_label;
};

// A row is the wire's UsageRow (user, queue, jobs, failed: the FAILED jobs, gpu_hours,
// cpu_hours; label and unlabelled with by_label): GetUsage's reply carries the rows as they are.
using UsageRow = wire::UsageRowT;

// GPUs and CPUs a job's replicas request, all pools together (an elastic job's idle workers
// not counted: what its latest placement asked for).
int JobGpus(const JobRecord& job);
int JobCpus(const JobRecord& job);

// Rows sorted by user, then queue (by the label's value with by_label, unlabelled last); jobs
// outside the filter are left out.
std::vector<UsageRow> ComputeUsage(const std::vector<const JobRecord*>& jobs,
                                   const UsageFilter& filter, int64_t now_ms);

}  // namespace cohort::coordinator
