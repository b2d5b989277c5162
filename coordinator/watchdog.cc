#include "coordinator/watchdog.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>

#include "common/stack_where.h"
#include "common/text_join.h"
#include "common/utf8.h"

namespace cohort::coordinator {
namespace {

constexpr size_t kMaxDumps = 16;

// "120 s" (whole seconds, rounded), "0.5 s" below one.
std::string Seconds(int64_t ms) {
  if (ms < 1000) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ms) / 1000.0);
    return buf;
  }
  return std::to_string((ms + 500) / 1000) + " s";
}

// A chief or worker that runs in this placement (an elastic job's idle workers do not).
bool IsRank(const ReplicaRecord& r) {
  return (r.role == Role::kChief || r.role == Role::kWorker) && !r.idle;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

// "chief-0:1,worker-0:1": the attempts a verdict was given for.
std::string Signature(const std::vector<const ReplicaRecord*>& set) {
  std::string out;
  for (const ReplicaRecord* r : set) out += r->name + ":" + std::to_string(r->attempt) + ",";
  return out;
}

}  // namespace

std::string FormatBytes(int64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  if (value == std::floor(value)) {
    std::snprintf(buf, sizeof(buf), "%.0f %s", value, kUnits[unit]);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  }
  return buf;
}

void Watchdog::Report(const JobRecord& record, const ProgressReport& report, int64_t now_ms) {
  Job& job = jobs_[record.name];
  auto [it, fresh] = job.replicas.try_emplace(report.replica);
  Replica& r = it->second;
  if (!fresh && r.last.attempt != report.attempt) {
    // A new attempt counts its operations from the start again.
    r.lateness_ms.clear();
    job.pending.clear();
  }
  if (fresh || r.last.attempt != report.attempt || report.gpus_busy) r.gpus_busy_ms = now_ms;
  r.last = report;
  r.last.starts.clear();
  r.received_ms = now_ms;
  if (report.has_recorder && !report.starts.empty()) AddStarts(job, record, report);
}

void Watchdog::AddStarts(Job& job, const JobRecord& record, const ProgressReport& report) {
  // The ranks whose starts an operation waits for: chief and workers, except those whose
  // report of their current attempt says they have no recorder (a rank not heard from yet is
  // waited for: its first report may carry the start).
  std::vector<std::string> ranks;
  for (const ReplicaRecord& r : record.replicas) {
    if (!IsRank(r)) continue;
    auto it = job.replicas.find(r.name);
    if (it != job.replicas.end() && it->second.last.attempt == r.attempt &&
        !it->second.last.has_recorder) {
      continue;
    }
    ranks.push_back(r.name);
  }
  for (const auto& [seq, unix_us] : report.starts) {
    auto& starts = job.pending[seq];
    starts[report.replica] = unix_us;
    if (ranks.size() < 2) continue;
    bool complete = std::all_of(ranks.begin(), ranks.end(),
                                [&](const std::string& name) { return starts.count(name) > 0; });
    if (!complete) continue;
    int64_t first = starts.begin()->second;
    for (const auto& [name, us] : starts) first = std::min(first, us);
    for (const std::string& name : ranks) {
      auto& window = job.replicas[name].lateness_ms;
      window.push_back(static_cast<double>(starts[name] - first) / 1000.0);
      while (window.size() > options_.straggler_window) window.pop_front();
    }
    job.pending.erase(seq);
  }
  while (job.pending.size() > options_.max_pending_ops) job.pending.erase(job.pending.begin());
}

void Watchdog::StacksAsked(const std::string& job, const std::string& replica, int attempt,
                           int64_t now_ms) {
  std::erase_if(stacks_asked_,
                [&](const auto& asked) { return now_ms - asked.second > kStacksWaitMs; });
  stacks_asked_[{job, replica, attempt}] = now_ms;
}

std::optional<std::string> Watchdog::StacksTaken(const std::string& job, const std::string& replica,
                                                 int attempt, const std::string& text,
                                                 int64_t now_ms) {
  auto it = stacks_asked_.find({job, replica, attempt});
  if (it == stacks_asked_.end()) return std::nullopt;
  const bool late = now_ms - it->second > kStacksWaitMs;
  stacks_asked_.erase(it);
  if (late) return std::nullopt;
  // Paths and names from the replica: made safe to store and show.
  std::string where = ValidUtf8(StackWhere(text), /*printable=*/true);
  return "stacks of " + replica + " attempt " + std::to_string(attempt) +
         " (hang): " + (where.empty() ? "no stack could be read from them" : where) +
         " (cohort logs " + job + " --replica " + replica + " --dump)";
}

Watchdog::Checked Watchdog::Check(
    const std::function<const JobRecord*(const std::string&)>& find_job, int64_t now_ms) {
  Checked out;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const JobRecord* record = find_job(it->first);
    if (record == nullptr || record->finished()) {
      it = jobs_.erase(it);
      continue;
    }
    Job& job = it->second;
    ++it;
    if (record->state != JobState::RUNNING) continue;
    std::optional<HangVerdict> verdict = JudgeBySpec(*record, job, now_ms, out.notes);
    if (!verdict) verdict = JudgeByQueue(*record, job, now_ms);
    if (!verdict) continue;
    verdict->job = record->name;
    if (verdict->dump.size() > kMaxDumps) verdict->dump.resize(kMaxDumps);
    out.hangs.push_back(std::move(*verdict));
  }
  return out;
}

bool Watchdog::WatchSet(const JobRecord& record, const Job& job, ProgressSource source,
                        int64_t now_ms, std::vector<const ReplicaRecord*>* set,
                        bool* finishing) const {
  const bool collective = source == ProgressSource::kCollective;
  const bool gpus = source == ProgressSource::kGpus;
  for (const ReplicaRecord& r : record.replicas) {
    if (r.idle || (collective && !IsRank(r)) || (gpus && r.gpus.empty())) continue;
    if (r.state != ReplicaState::RUNNING) return false;
    auto rep = job.replicas.find(r.name);
    if (rep == job.replicas.end() || rep->second.last.attempt != r.attempt ||
        now_ms - rep->second.received_ms > options_.max_report_age_ms) {
      return false;
    }
    if (collective && !rep->second.last.has_recorder) continue;
    if (gpus && rep->second.last.gpus_sampled == 0) continue;
    if (collective && rep->second.last.ranks_exited) {
      *finishing = true;
      continue;
    }
    set->push_back(&r);
  }
  return true;
}

std::optional<HangVerdict> Watchdog::JudgeBySpec(
    const JobRecord& record, Job& job, int64_t now_ms,
    std::vector<std::pair<std::string, std::string>>& notes) {
  const SchedulingSpec& sched = record.spec.scheduling;
  const int64_t timeout = sched.hang_timeout.count();
  if (timeout <= 0) return std::nullopt;
  const bool collective = sched.progress == ProgressSource::kCollective;
  const bool gpus = sched.progress == ProgressSource::kGpus;
  std::vector<const ReplicaRecord*> set;
  bool finishing = false;  // some rank's replica has seen all its ranks exit
  if (!WatchSet(record, job, sched.progress, now_ms, &set, &finishing)) return std::nullopt;
  if (set.empty() && finishing) return std::nullopt;  // its ranks are done; its replicas are ending
  if (set.empty()) {
    // No rank has a recorder (no replica a GPU sample): after hang_timeout of running, say once
    // that it is not watched.
    bool long_enough = now_ms - record.start_time_ms >= timeout;
    if ((collective || gpus) && long_enough && !job.noted_unwatchable) {
      job.noted_unwatchable = true;
      notes.emplace_back(
          record.name,
          collective
              ? "watchdog: no rank of this job has a Cohort flight recorder (it uses no Cohort "
                "collective), so scheduling.progress: collective cannot be watched; use "
                "progress: logs or metrics"
              : "watchdog: no replica of this job reports its GPUs' utilization (no NVML on "
                "their nodes, or MIG devices, which NVML measures none of), so "
                "scheduling.progress: gpus cannot be watched; use progress: logs or metrics");
    }
    return std::nullopt;
  }
  std::string signature = Signature(set);
  if (signature == job.judged) return std::nullopt;
  std::optional<HangVerdict> verdict =
      collective ? JudgeCollective(record, job, set, now_ms, timeout)
                 : JudgeOutput(record, job, set, now_ms, timeout,
                               "progress: " + std::string(ProgressSourceName(sched.progress)));
  if (verdict) job.judged = signature;
  return verdict;
}

std::optional<HangVerdict> Watchdog::JudgeByQueue(const JobRecord& record, Job& job,
                                                  int64_t now_ms) {
  auto limit = options_.gpu_idle_limit_ms.find(record.spec.scheduling.queue);
  if (limit == options_.gpu_idle_limit_ms.end() || limit->second <= 0) return std::nullopt;
  std::vector<const ReplicaRecord*> set;
  bool finishing = false;
  if (!WatchSet(record, job, ProgressSource::kGpus, now_ms, &set, &finishing) || set.empty()) {
    return std::nullopt;
  }
  std::string signature = Signature(set);
  if (signature == job.judged_idle) return std::nullopt;
  const std::string rule =
      "queue " + record.spec.scheduling.queue + ": gpu-idle-limit=" + FormatDuration(limit->second);
  std::optional<HangVerdict> verdict =
      JudgeOutput(record, job, set, now_ms, limit->second, rule, ProgressSource::kGpus);
  if (!verdict) return std::nullopt;
  job.judged_idle = signature;
  verdict->fail_reason =
      "its GPUs sat idle for " + FormatDuration(limit->second) + " (" + rule + ")";
  return verdict;
}

std::optional<HangVerdict> Watchdog::JudgeCollective(const JobRecord& record, Job& job,
                                                     const std::vector<const ReplicaRecord*>& ranks,
                                                     int64_t now_ms, int64_t timeout_ms) {
  int64_t last_progress = INT64_MIN;
  int64_t frontier = -1;
  for (const ReplicaRecord* r : ranks) {
    const Replica& rep = job.replicas[r->name];
    const ProgressReport& p = rep.last;
    if (p.completed_seq >= 0) {
      last_progress = std::max(last_progress, rep.received_ms - p.completed_idle_ms);
    } else if (p.current_seq >= 0) {
      // In its first operation: it has waited since it entered it.
      last_progress = std::max(last_progress, rep.received_ms - p.current_ms);
    }
    // In none and none completed: still starting (imports, data, rendezvous), no time to count.
    frontier = std::max(frontier, p.current_seq);
  }
  // No rank has entered an operation yet: the job is starting, however long that takes.
  if (last_progress == INT64_MIN) return std::nullopt;
  int64_t stalled_ms = now_ms - last_progress;
  if (stalled_ms < timeout_ms) return std::nullopt;

  HangVerdict v;
  if (frontier < 0) {
    int64_t newest = -1;
    std::vector<std::string> names;
    for (const ReplicaRecord* r : ranks) {
      newest = std::max(newest, job.replicas[r->name].last.completed_seq);
      names.push_back(r->name);
    }
    v.message = "hang: no rank has completed a collective operation for " + Seconds(stalled_ms) +
                " and none is in one" +
                (newest >= 0 ? " (the last completed: #" + std::to_string(newest) + ")" : "") +
                "; " + JoinWithCommas(names) + (names.size() == 1 ? " is" : " are") +
                " outside the collectives";
    v.stuck = names;
    v.dump = names;
    return v;
  }

  // The operation some rank waits in, described by the rank that has waited longest.
  const ProgressReport* op = nullptr;
  std::vector<std::string> waiting, not_entered, older;
  std::vector<std::string> not_entered_text, older_text;
  for (const ReplicaRecord* r : ranks) {
    const ProgressReport& p = job.replicas[r->name].last;
    // A replica of several ranks is named with its slowest, the one behind.
    const std::string shown =
        r->name + (p.rank >= 0 ? " (rank " + std::to_string(p.rank) + ")" : "");
    if (p.current_seq == frontier) {
      waiting.push_back(r->name);
      if (op == nullptr || p.current_ms > op->current_ms) op = &p;
    } else if (p.current_seq >= 0) {
      older.push_back(r->name);
      older_text.push_back(shown + " is stuck in " + p.current_op + " #" +
                           std::to_string(p.current_seq) + " for " + Seconds(p.current_ms) +
                           ", which its peers completed");
    } else if (p.completed_seq < frontier) {
      not_entered.push_back(r->name);
      not_entered_text.push_back(shown);
    }
  }
  std::string what = op->current_op + " #" + std::to_string(frontier);
  std::string detail;
  if (op->current_bytes > 0) detail = FormatBytes(op->current_bytes);
  if (!op->current_algorithm.empty()) {
    detail += (detail.empty() ? "" : ", ") + op->current_algorithm;
  }
  std::string described = what + (detail.empty() ? "" : " (" + detail + ")");
  std::string wait = Seconds(op->current_ms);
  std::string waiters =
      JoinWithCommas(waiting) + (waiting.size() == 1 ? " is" : " are") + " waiting in it";

  if (not_entered.empty() && older.empty()) {
    // Every rank is in the operation: the cause is outside the ranks.
    v.message = "hang: every rank is waiting in " + described + " for " + wait + " (" +
                JoinWithCommas(waiting) +
                "); none is behind, so what holds them is outside the ranks (a reducer, a "
                "parameter server, the network)";
    v.stuck = waiting;
    v.dump = waiting;
    for (const ReplicaRecord& r : record.replicas) {
      if (r.pool() == 2 && r.state == ReplicaState::RUNNING) v.dump.push_back(r.name);
    }
    return v;
  }
  std::vector<std::string> parts;
  if (!not_entered.empty()) {
    parts.push_back(JoinWithCommas(not_entered_text) +
                    (not_entered.size() == 1 ? " has" : " have") + " not entered " + described +
                    " for " + wait);
  }
  parts.insert(parts.end(), older_text.begin(), older_text.end());
  v.message = "hang: " + JoinWithCommas(parts) + "; " +
              (not_entered.empty() ? described + ": " : "") + waiters;
  v.stuck = not_entered;
  v.stuck.insert(v.stuck.end(), older.begin(), older.end());
  v.dump = v.stuck;
  return v;
}

std::optional<HangVerdict> Watchdog::JudgeOutput(const JobRecord& record, Job& job,
                                                 const std::vector<const ReplicaRecord*>& set,
                                                 int64_t now_ms, int64_t timeout_ms,
                                                 const std::string& rule,
                                                 std::optional<ProgressSource> watched) {
  const ProgressSource source = watched.value_or(record.spec.scheduling.progress);
  int64_t last_progress = INT64_MIN;
  for (const ReplicaRecord* r : set) {
    const Replica& rep = job.replicas[r->name];
    last_progress =
        std::max(last_progress, source == ProgressSource::kGpus
                                    ? rep.gpus_busy_ms
                                    : rep.received_ms - (source == ProgressSource::kLogs
                                                             ? rep.last.log_idle_ms
                                                             : rep.last.metric_idle_ms));
  }
  int64_t stalled_ms = now_ms - last_progress;
  if (stalled_ms < timeout_ms) return std::nullopt;
  HangVerdict v;
  for (const ReplicaRecord* r : set) v.stuck.push_back(r->name);
  v.dump = v.stuck;
  const std::string what = source == ProgressSource::kGpus   ? "used its GPUs"
                           : source == ProgressSource::kLogs ? "written to its log"
                                                             : "written a metric line "
                                                               "($CLOUD_ML_HP_METRIC_FILE)";
  v.message = "hang: no replica has " + what + " for " + Seconds(stalled_ms) + " (" + rule +
              (source == ProgressSource::kGpus ? "; every GPU below 1%" : "") +
              "): " + JoinWithCommas(v.stuck);
  return v;
}

std::vector<Lateness> Watchdog::LatenessOf(const std::string& job) const {
  std::vector<Lateness> out;
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return out;
  for (const auto& [name, r] : it->second.replicas) {
    if (r.lateness_ms.empty()) continue;
    out.push_back(
        Lateness{name, Median({r.lateness_ms.begin(), r.lateness_ms.end()}), r.lateness_ms.size()});
  }
  return out;
}

std::vector<std::string> Watchdog::StragglerLines(const std::string& job) const {
  std::vector<Lateness> late;
  for (const Lateness& l : LatenessOf(job)) {
    if (l.samples >= options_.straggler_min_samples && l.median_ms >= options_.straggler_min_ms) {
      late.push_back(l);
    }
  }
  std::sort(late.begin(), late.end(),
            [](const Lateness& a, const Lateness& b) { return a.median_ms > b.median_ms; });
  std::vector<std::string> lines;
  for (const Lateness& l : late) {
    lines.push_back(l.replica + " enters collectives " +
                    std::to_string(static_cast<int64_t>(std::lround(l.median_ms))) +
                    " ms after the first rank (median of the last " + std::to_string(l.samples) +
                    ")");
  }
  return lines;
}

}  // namespace cohort::coordinator
