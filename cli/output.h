// Human-readable output of the `cohort` CLI: aligned tables and key/value blocks for jobs and
// nodes. Machine-readable output is JSON (JobToJson / NodeToJson in common/client.h); the tables
// here are for people and may change, the JSON keys may not.
//
// Times are shown in the local time zone as "YYYY-MM-DD HH:MM:SS"; a zero time is "-".
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/schema/cohort_generated.h"
#include "common/status.h"

namespace cohort::cli {

// Columns padded to their widest cell, separated by two spaces; the last column is not padded.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const;
  size_t size() const { return rows_.size(); }

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

std::string FormatTime(int64_t ms_since_epoch);
// What `--since T` reads, as ms since the epoch: a duration before `now_ms` ("30m", "2h", "7d",
// the forms of ParseDuration) or a local time ("2026-11-25", "2026-11-25T14:30",
// "2026-11-25 14:30:00"). An error names the forms it takes.
StatusOr<int64_t> ParseSince(const std::string& text, int64_t now_ms);
// A job state by its name, in any case ("running").
StatusOr<wire::JobState> ParseJobState(const std::string& name);
// A replica's exit code for tables: "1", "139 (SIGSEGV)" for a death by signal, "-" for none yet.
std::string ExitCode(const wire::ReplicaInfoT& r);
// What a replica uses, as table cells: CPU cores ("1.97"), memory ("812M"), and each GPU's
// "INDEX: UTIL% USED/TOTAL" (`compact`: its "UTIL%" alone), then "(idle 12m00s)" once all of them
// have sampled 0% for kIdleShownMs; "-" for what is not known (all three without `usage`).
inline constexpr int64_t kIdleShownMs = 60'000;
std::vector<std::string> UsageCells(const wire::ReplicaUsageT* usage, bool compact = false);
// The job's run time: start to end, or start to `now_ms` while it runs; "-" before it starts.
std::string JobRunTime(const wire::JobInfoT& job, int64_t now_ms);
int64_t NowMs();

// `cohort status JOB`: state, message, times, restarts, output dir, replica table, events.
void PrintJob(const wire::JobInfoT& job, std::ostream& out);
// `cohort submit --dry-run`: what the next scheduling round would do with the job (the reply's
// dry_run), what its queue would fill in (defaults), and where its replicas would go when it would
// start now.
void PrintDryRun(const wire::SubmitJobReplyT& reply, std::ostream& out);
// The same for an array of `tasks` tasks (the reply's task_dry_runs): a line for each task it
// would let in at once, saying what it would do and where.
void PrintArrayDryRun(const wire::SubmitJobReplyT& reply, size_t tasks, std::ostream& out);
// `cohort list`: one line per job.
void PrintJobList(const std::vector<wire::JobInfoT>& jobs, std::ostream& out);
// What each running replica of `jobs` uses (`cohort top`).
void PrintTop(const std::vector<wire::JobInfoT>& jobs, std::ostream& out);
// `cohort top --nodes`: per node, what its running replicas use (NodeInfo.usage) beside what they
// hold: CPU cores used, CPUs held/total, memory used/total, and each GPU ("0:97%", "1:-" held but
// not sampled, "2:free").
void PrintNodeTop(const std::vector<wire::NodeInfoT>& nodes, std::ostream& out);
// The GPUS cell of PrintNodeTop.
std::string NodeGpuCells(const wire::NodeInfoT& node);
// `cohort nodes`: one line per node with used/total GPUs, CPUs and memory.
void PrintNodes(const std::vector<wire::NodeInfoT>& nodes, std::ostream& out);
// One node at length (`cohort nodes NODE`): its fields, each GPU (model, memory, NUMA node, UUID,
// what uses it now, and who holds it or why nothing may), the replicas that hold part of it, and
// its events (oldest first, each at its local time).
void PrintNode(const wire::NodeInfoT& node, std::ostream& out);
void PrintQueues(const std::vector<wire::QueueInfoT>& queues, std::ostream& out);

// `cohort trials STUDY` and the end of `cohort tune --wait`: the study's header, one line per
// trial (its parameters as columns), and the best trial.
void PrintStudy(const wire::StudyInfoT& study, std::ostream& out);
// `cohort status ARRAY`'s first line: "array sweep: ACTIVE, 100 tasks (0-99%8): 12 SUCCEEDED,
// 8 RUNNING, 80 QUEUED; 8 in flight of at most 8".
void PrintArrayHeader(const wire::ArrayInfoT& array, std::ostream& out);
// `cohort arrays`: one line per job array: state, indexes, tasks ended of all, in flight of its
// parallelism, its tasks by state.
void PrintArrays(const std::vector<wire::ArrayInfoT>& arrays, std::ostream& out);
// `cohort studies`: one line per study: state, trials done of the most, running, the best trial.
void PrintStudies(const std::vector<wire::StudyInfoT>& studies, std::ostream& out);

}  // namespace cohort::cli
