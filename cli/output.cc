#include "cli/output.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <sstream>

#include "common/config.h"
#include "common/job_spec.h"
#include "common/signal_name.h"
#include "common/text_join.h"

namespace cohort::cli {
namespace {

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

std::string JoinInts(const std::vector<int32_t>& values) {
  if (values.empty()) return "-";
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(values[i]);
  }
  return out;
}

bool IsTerminalState(wire::JobState state) {
  return state == wire::JobState::SUCCEEDED || state == wire::JobState::FAILED ||
         state == wire::JobState::CANCELLED;
}

// A job's labels as a selector would name them: "sweep=lr,team=vision" (FormatNodeLabels').
std::string FormatLabels(const std::vector<std::unique_ptr<wire::KeyValueT>>& labels) {
  NodeLabels map;
  for (const auto& kv : labels) {
    if (kv) map[kv->key] = kv->value;
  }
  return FormatNodeLabels(map);
}

std::string FormatMemory(int64_t mb) {
  if (mb >= 10 * 1024) return std::to_string(mb / 1024) + "G";
  return std::to_string(mb) + "M";
}

// CPU cores in use, "6.50"; "-" where unknown (negative).
std::string FormatCores(double cores) {
  if (cores < 0) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", cores);
  return text;
}

// A GPU's utilization, "97%".
std::string FormatUtilization(const wire::GpuUsageT& gpu) {
  char text[16];
  std::snprintf(text, sizeof(text), "%.0f%%", gpu.utilization);
  return text;
}

// A GPU's utilization and memory in use of its total, "97% 31G/80G".
std::string FormatGpuUse(const wire::GpuUsageT& gpu) {
  return FormatUtilization(gpu) + " " + FormatMemory(gpu.memory_used_bytes >> 20) + "/" +
         FormatMemory(gpu.memory_total_bytes >> 20);
}

// The latest sample of GPU `index` among a node's usage; null when none.
const wire::GpuUsageT* GpuSample(const wire::NodeUsageT* usage, int index) {
  if (usage == nullptr) return nullptr;
  for (const auto& sample : usage->gpus) {
    if (sample && sample->index == index) return sample.get();
  }
  return nullptr;
}

// A node's state as its listings show it: a LOST node keeps its admin's setting,
// "LOST (cordoned)".
std::string NodeState(const wire::NodeInfoT& n) {
  return n.state == "LOST" && !n.admin.empty() ? n.state + " (" + n.admin + ")" : n.state;
}

// The note kept with a node's cordon, "draining by alice since 2026-12-05 20:01:07 (2h ago): GPU 3
// ECC errors" (what is cordoned: the node's admin setting, else "GPUs cordoned"); "" when it has
// none (nothing of it cordoned, or a coordinator that keeps no notes).
std::string CordonNoteText(const wire::NodeInfoT& n) {
  if (n.admin_since_ms <= 0 && n.admin_by.empty() && n.admin_reason.empty()) return "";
  std::string text = n.admin.empty() ? "GPUs cordoned" : n.admin;
  if (!n.admin_by.empty()) text += " by " + n.admin_by;
  if (n.admin_since_ms > 0) {
    text += " since " + FormatTime(n.admin_since_ms) + " (" +
            FormatElapsed(std::max<int64_t>(0, NowMs() - n.admin_since_ms)) + " ago)";
  }
  if (!n.admin_reason.empty()) text += ": " + n.admin_reason;
  return text;
}

// "agents run 2 builds: 0.1.0+g1a2b on 4 nodes (gpu-1, gpu-2, gpu-3 and 1 more), 0.1.0+g3c4d on
// 1 node (gpu-7)" where the nodes that are not lost run more than one, most nodes first (a rolling
// upgrade under way, or a node it missed); "" where they run one.
std::string AgentBuildsNote(const std::vector<wire::NodeInfoT>& nodes) {
  std::map<std::string, std::vector<std::string>> by_build;
  for (const auto& n : nodes) {
    if (n.state != "LOST") by_build[n.version.empty() ? "unknown" : n.version].push_back(n.node_id);
  }
  if (by_build.size() < 2) return "";
  std::vector<std::pair<std::string, std::vector<std::string>>> builds(by_build.begin(),
                                                                       by_build.end());
  std::stable_sort(builds.begin(), builds.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::vector<std::string> parts;
  for (const auto& [build, names] : builds) {
    parts.push_back(build + " on " + Counted(static_cast<int64_t>(names.size()), "node") + " (" +
                    JoinFirst(names, 3) + ")");
  }
  return "agents run " + std::to_string(builds.size()) + " builds: " + JoinWithCommas(parts);
}

// A node's free GPUs by NUMA node, "0:1 1:4" (free: not held, unfit or cordoned), where its GPUs
// sit on more than one: a replica of several GPUs gets them from one where one has enough, so this
// says what would fit on one socket. "" for a node whose GPUs sit on one NUMA node or are not
// known to (a declared GPU, a node NVML does not tell).
std::string FreeGpusByNuma(const wire::NodeInfoT& n) {
  std::map<int, int> free;  // NUMA node -> free GPUs
  for (const auto& gpu : n.gpus) {
    if (!gpu || gpu->numa_node < 0) return "";
    int& count = free[gpu->numa_node];
    const auto has = [&](const std::vector<int>& list) {
      return std::find(list.begin(), list.end(), gpu->index) != list.end();
    };
    const bool unfit = std::any_of(n.unhealthy_gpus.begin(), n.unhealthy_gpus.end(),
                                   [&](const auto& u) { return u && u->index == gpu->index; });
    if (!has(n.gpus_used) && !has(n.cordoned_gpus) && !unfit) ++count;
  }
  if (free.size() < 2) return "";
  std::string text;
  for (const auto& [numa, count] : free) {
    text += (text.empty() ? "" : " ") + std::to_string(numa) + ":" + std::to_string(count);
  }
  return text;
}

// "Key:" padded to 12 columns, then the value: the rows of a job's, study's or node's page.
void Row(std::ostream& out, const std::string& key, const std::string& value) {
  out << key << std::string(key.size() < 12 ? 12 - key.size() : 1, ' ') << value << "\n";
}

}  // namespace

std::vector<std::string> UsageCells(const wire::ReplicaUsageT* usage, bool compact) {
  if (usage == nullptr) return {"-", "-", "-"};
  const wire::ReplicaUsageT& u = *usage;
  std::string gpus;
  for (const auto& g : u.gpus) {
    if (!g) continue;
    if (compact) {
      gpus += (gpus.empty() ? "" : " ") + FormatUtilization(*g);
      continue;
    }
    gpus += (gpus.empty() ? "" : ", ") + std::to_string(g->index) + ": " + FormatGpuUse(*g);
  }
  if (u.gpus_idle_ms >= kIdleShownMs) gpus += " (idle " + FormatElapsed(u.gpus_idle_ms) + ")";
  return {FormatCores(u.cpu_cores), u.memory_bytes < 0 ? "-" : FormatMemory(u.memory_bytes >> 20),
          OrDash(gpus)};
}

std::string ExitCode(const wire::ReplicaInfoT& r) {
  if (r.exit_code < 0) return "-";
  const std::string name = SignalName(r.signal);
  return std::to_string(r.exit_code) + (name.empty() ? "" : " (" + name + ")");
}

void Table::Print(std::ostream& out) const {
  std::vector<size_t> widths(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      line += cell;
      if (i + 1 < widths.size()) line += std::string(widths[i] - cell.size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  };
  print(header_);
  for (const auto& row : rows_) print(row);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string FormatTime(int64_t ms_since_epoch) {
  if (ms_since_epoch <= 0) return "-";
  std::time_t seconds = static_cast<std::time_t>(ms_since_epoch / 1000);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S", &tm);
  return buffer;
}

StatusOr<int64_t> ParseSince(const std::string& text, int64_t now_ms) {
  if (!text.empty() && text.find('-') == std::string::npos) {
    auto ago = ParseDuration(text);
    if (ago.ok() && ago->count() >= 0) return now_ms - ago->count();
  }
  for (const char* format :
       {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"}) {
    std::tm tm{};
    const char* end = strptime(text.c_str(), format, &tm);
    if (end == nullptr || *end != '\0') continue;
    tm.tm_isdst = -1;
    std::time_t seconds = std::mktime(&tm);
    if (seconds == static_cast<std::time_t>(-1)) break;
    return static_cast<int64_t>(seconds) * 1000;
  }
  return InvalidArgument("'" + text +
                         "' is neither a duration ago (30m, 2h, 7d) nor a local time "
                         "(2026-11-25, 2026-11-25T14:30, 2026-11-25 14:30:00)");
}

StatusOr<wire::JobState> ParseJobState(const std::string& name) {
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (auto state : wire::EnumValuesJobState()) {
    if (upper == wire::EnumNameJobState(state)) return state;
  }
  std::string known;
  for (auto state : wire::EnumValuesJobState()) {
    known += (known.empty() ? "" : ", ") + std::string(wire::EnumNameJobState(state));
  }
  return InvalidArgument("no job state '" + name + "' (one of " + known + ")");
}

std::string JobRunTime(const wire::JobInfoT& job, int64_t now_ms) {
  if (job.start_time_ms <= 0) return "-";
  int64_t end = job.end_time_ms > 0 ? job.end_time_ms : now_ms;
  return FormatElapsed(end - job.start_time_ms);
}

void PrintJob(const wire::JobInfoT& job, std::ostream& out) {
  auto row = [&](const std::string& key, const std::string& value) { Row(out, key, value); };
  row("Job:", job.name);
  row("Owner:", OrDash(job.owner));
  row("State:", wire::EnumNameJobState(job.state));
  row("Message:", OrDash(job.message));
  row("Created:", FormatTime(job.create_time_ms));
  row("Started:", FormatTime(job.start_time_ms));
  row("Ended:", FormatTime(job.end_time_ms));
  row("Run time:", JobRunTime(job, NowMs()));
  std::string restarts = std::to_string(job.restarts) + " of " + std::to_string(job.max_restarts);
  if (job.max_restarts > 0 && !job.restart_rule.empty()) {
    restarts += ", each of " + job.restart_rule;
  }
  row("Restarts:", restarts);
  row("Output dir:", OrDash(job.output_dir));
  if (!job.study.empty()) row("Study:", job.study);
  if (!job.trial_id.empty()) row("Trial:", job.trial_id);
  if (!job.labels.empty()) row("Labels:", FormatLabels(job.labels));

  out << "\nReplicas:\n";
  Table replicas({"REPLICA", "NODE", "GPUS", "STATE", "ATTEMPT", "EXIT", "MESSAGE"});
  for (const auto& r : job.replicas) {
    if (!r) continue;
    replicas.AddRow({r->replica, OrDash(r->node_id), JoinInts(r->gpus),
                     wire::EnumNameReplicaState(r->state), std::to_string(r->attempt), ExitCode(*r),
                     r->message});
  }
  if (replicas.size() == 0) {
    out << "  (none)\n";
  } else {
    replicas.Print(out);
  }

  Table usage({"REPLICA", "NODE", "CPU", "MEMORY", "GPUS"});
  for (const auto& r : job.replicas) {
    if (!r || !r->usage) continue;
    std::vector<std::string> row = {r->replica, r->node_id};
    for (auto& cell : UsageCells(r->usage.get())) row.push_back(std::move(cell));
    usage.AddRow(std::move(row));
  }
  if (usage.size() > 0) {
    out << "\nUsage (CPU: cores over the last 10 s; memory and GPUs: now):\n";
    usage.Print(out);
  }

  if (!job.stragglers.empty()) {
    out << "\nStragglers:\n";
    for (const auto& line : job.stragglers) out << "  " << line << "\n";
  }

  out << "\nEvents:\n";
  Table events({"TIME", "EVENT"});
  for (const auto& e : job.events) {
    if (e) events.AddRow({FormatTime(e->time_ms), e->message});
  }
  if (events.size() == 0) {
    out << "  (none)\n";
  } else {
    events.Print(out);
  }
}

void PrintTop(const std::vector<wire::JobInfoT>& jobs, std::ostream& out) {
  Table table({"JOB", "REPLICA", "NODE", "CPU", "MEMORY", "GPUS"});
  size_t unknown = 0;
  for (const auto& job : jobs) {
    for (const auto& r : job.replicas) {
      if (!r || r->state != wire::ReplicaState::RUNNING) continue;
      if (!r->usage) {
        ++unknown;
        continue;
      }
      std::vector<std::string> row = {job.name, r->replica, r->node_id};
      for (auto& cell : UsageCells(r->usage.get())) row.push_back(std::move(cell));
      table.AddRow(std::move(row));
    }
  }
  if (table.size() == 0 && unknown == 0) {
    out << "No replica is running.\n";
    return;
  }
  if (table.size() > 0) table.Print(out);
  if (unknown > 0) {
    out << unknown << " running replica(s) not reported yet (their agents' next heartbeats say)\n";
  }
}

std::string NodeGpuCells(const wire::NodeInfoT& node) {
  std::string cells;
  for (const auto& gpu : node.gpus) {
    if (!gpu) continue;
    const bool held =
        std::find(node.gpus_used.begin(), node.gpus_used.end(), gpu->index) != node.gpus_used.end();
    const bool unfit = std::any_of(node.unhealthy_gpus.begin(), node.unhealthy_gpus.end(),
                                   [&](const auto& u) { return u && u->index == gpu->index; });
    const bool cordoned = std::find(node.cordoned_gpus.begin(), node.cordoned_gpus.end(),
                                    gpu->index) != node.cordoned_gpus.end();
    // Held and not sampled: no NVML on its node, or no sample yet.
    std::string cell = held ? "-" : unfit ? "unfit" : cordoned ? "cordoned" : "free";
    const wire::GpuUsageT* sample = held ? GpuSample(node.usage.get(), gpu->index) : nullptr;
    if (sample != nullptr) cell = FormatUtilization(*sample);
    cells += (cells.empty() ? "" : " ") + std::to_string(gpu->index) + ":" + cell;
  }
  return OrDash(cells);
}

void PrintNodeTop(const std::vector<wire::NodeInfoT>& nodes, std::ostream& out) {
  if (nodes.empty()) {
    out << "No nodes registered.\n";
    return;
  }
  Table table({"NODE", "STATE", "REPLICAS", "CPU", "CPUS", "MEMORY", "GPUS"});
  for (const auto& n : nodes) {
    const wire::NodeUsageT* u = n.usage.get();
    std::string replicas = std::to_string(n.replicas);
    if (n.replicas > 0 && (u == nullptr || u->replicas < n.replicas)) {
      replicas += " (" + std::to_string(u == nullptr ? 0 : u->replicas) + " reported)";
    }
    table.AddRow({n.node_id, OrDash(n.state), replicas,
                  FormatCores(u == nullptr ? -1 : u->cpu_cores),
                  std::to_string(n.cpus_used) + "/" + std::to_string(n.cpus),
                  u == nullptr || u->memory_bytes < 0
                      ? "-"
                      : FormatMemory(u->memory_bytes >> 20) + "/" + FormatMemory(n.memory_mb),
                  NodeGpuCells(n)});
  }
  table.Print(out);
}

void PrintStudy(const wire::StudyInfoT& study, std::ostream& out) {
  auto row = [&](const std::string& key, const std::string& value) { Row(out, key, value); };
  row("Study:", study.name);
  row("Owner:", OrDash(study.owner));
  row("State:", OrDash(study.state));
  row("Message:", OrDash(study.message));
  row("Metric:", study.metric + " (" + study.goal + ")");
  row("Algorithm:", study.algorithm);
  row("Trials:", std::to_string(study.trials.size()) + " of " + std::to_string(study.max_trials) +
                     ", " + std::to_string(study.parallel_trials) + " in parallel");
  row("Created:", FormatTime(study.create_time_ms));
  row("Ended:", FormatTime(study.end_time_ms));

  // Parameter columns in the order the first trial lists them.
  std::vector<std::string> parameter_ids;
  for (const auto& t : study.trials) {
    if (!t) continue;
    for (const auto& kv : t->parameters) {
      if (kv &&
          std::find(parameter_ids.begin(), parameter_ids.end(), kv->key) == parameter_ids.end()) {
        parameter_ids.push_back(kv->key);
      }
    }
  }
  std::vector<std::string> header = {"TRIAL", "STATE"};
  for (const auto& id : parameter_ids) header.push_back(id);
  header.insert(header.end(),
                {study.metric.empty() ? "METRIC" : study.metric, "STEPS", "JOB", "MESSAGE"});
  Table table(header);
  for (const auto& t : study.trials) {
    if (!t) continue;
    std::vector<std::string> cells = {t->id + (t->id == study.best_trial ? " *" : ""), t->state};
    for (const auto& id : parameter_ids) {
      std::string value = "-";
      for (const auto& kv : t->parameters) {
        if (kv && kv->key == id) value = kv->value;
      }
      cells.push_back(value);
    }
    char metric[64] = "-";
    if (t->has_final_metric) std::snprintf(metric, sizeof(metric), "%.6g", t->final_metric);
    cells.insert(cells.end(), {metric, std::to_string(t->steps), t->job, t->message});
    table.AddRow(std::move(cells));
  }
  out << "\nTrials:\n";
  if (table.size() == 0) {
    out << "  (none yet)\n";
  } else {
    table.Print(out);
  }
  out << "\nBest trial: ";
  const wire::TrialInfoT* best = nullptr;
  for (const auto& t : study.trials) {
    if (t && !study.best_trial.empty() && t->id == study.best_trial) best = t.get();
  }
  if (best == nullptr) {
    out << "none yet\n";
    return;
  }
  char metric[64] = "-";
  if (best->has_final_metric) std::snprintf(metric, sizeof(metric), "%.6g", best->final_metric);
  out << best->id << " (" << study.metric << " = " << metric << ")";
  for (const auto& kv : best->parameters) {
    if (kv) out << " --" << kv->key << "=" << kv->value;
  }
  out << "\n";
}

namespace {

// What `plan` says a job would do, after "would ": "start now", "wait in queue ...". `own_ahead`:
// how many of the jobs queued before it are tasks of its own array.
std::string DryRunVerdict(const wire::DryRunPlanT& plan, size_t own_ahead = 0) {
  switch (plan.outcome) {
    case wire::DryRunOutcome::START:
      return "start now";
    case wire::DryRunOutcome::PREEMPT: {
      std::string victims;
      for (const std::string& v : plan.preempts) victims += (victims.empty() ? "" : ", ") + v;
      return "preempt job" + std::string(plan.preempts.size() == 1 ? " " : "s ") + victims +
             ", and start once " + (plan.preempts.size() == 1 ? "it" : "they") + " stopped";
    }
    case wire::DryRunOutcome::WAIT: {
      std::string text = "wait in queue " + plan.queue;
      if (plan.queued_ahead > 0) {
        text += " (" + std::to_string(plan.queued_ahead) +
                (plan.queued_ahead == 1 ? " job" : " jobs") + " queued before it";
        if (own_ahead == plan.queued_ahead) {
          text += own_ahead == 1 ? ": a task of this array" : ": tasks of this array";
        } else if (own_ahead > 0) {
          text += ", " + std::to_string(own_ahead) + " of them this array's";
        }
        text += ")";
      }
      return text + ": " + plan.reason;
    }
    case wire::DryRunOutcome::WAIT_FOR_JOBS:
    case wire::DryRunOutcome::HOLD:
      return "be " + plan.reason;
  }
  return "?";
}

}  // namespace

void PrintDryRun(const wire::SubmitJobReplyT& reply, std::ostream& out) {
  const wire::DryRunPlanT& plan = *reply.dry_run;
  out << "dry run, nothing was submitted: job " << reply.name << " would " << DryRunVerdict(plan)
      << "\n";
  for (const std::string& line : reply.defaults) out << line << "\n";
  if (plan.outcome != wire::DryRunOutcome::START) return;
  Table replicas({"REPLICA", "NODE", "GPUS"});
  for (const auto& r : plan.replicas) {
    if (r) replicas.AddRow({r->replica, r->node_id, JoinInts(r->gpus)});
  }
  replicas.Print(out);
}

void PrintArrayDryRun(const wire::SubmitJobReplyT& reply, size_t tasks, std::ostream& out) {
  const size_t at_once = std::min(reply.tasks.size(), reply.task_dry_runs.size());
  out << "dry run, nothing was submitted: array " << reply.name << " (" << tasks
      << (tasks == 1 ? " task" : " tasks") << "): of the " << at_once << " task"
      << (at_once == 1 ? "" : "s") << " it would let in at once,\n";
  for (size_t i = 0; i < at_once; ++i) {
    if (!reply.task_dry_runs[i]) continue;
    const wire::DryRunPlanT& plan = *reply.task_dry_runs[i];
    // The tasks are drafted in one queue, in order, and alike in what holds them back: a task that
    // would wait is queued behind each task before it.
    out << "  " << reply.tasks[i] << " would " << DryRunVerdict(plan, i);
    std::string where;
    for (const auto& r : plan.replicas) {
      if (!r) continue;
      where += (where.empty() ? ": " : ", ") + r->replica + " on " + r->node_id;
      if (!r->gpus.empty()) where += " (GPUs " + JoinInts(r->gpus) + ")";
    }
    out << where << "\n";
  }
  if (tasks > at_once) {
    out << "the other " << tasks - at_once << " would wait for their turn (scheduling.array)\n";
  }
  for (const std::string& line : reply.defaults) out << "each task's " << line << "\n";
}

void PrintJobList(const std::vector<wire::JobInfoT>& jobs, std::ostream& out) {
  // A LABELS column where any job has labels.
  const bool labelled = std::any_of(jobs.begin(), jobs.end(),
                                    [](const wire::JobInfoT& job) { return !job.labels.empty(); });
  std::vector<std::string> columns = {"NAME",     "OWNER",    "STATE",   "CREATED",
                                      "RUN TIME", "REPLICAS", "RESTARTS"};
  if (labelled) columns.push_back("LABELS");
  columns.push_back("MESSAGE");
  Table table(columns);
  int64_t now = NowMs();
  for (const auto& job : jobs) {
    int running = 0;
    for (const auto& r : job.replicas) {
      if (r && r->state == wire::ReplicaState::RUNNING) ++running;
    }
    std::string replicas = std::to_string(job.replicas.size());
    if (!IsTerminalState(job.state))
      replicas = std::to_string(running) + "/" + replicas + " running";
    std::vector<std::string> row = {job.name,
                                    OrDash(job.owner),
                                    wire::EnumNameJobState(job.state),
                                    FormatTime(job.create_time_ms),
                                    JobRunTime(job, now),
                                    replicas,
                                    std::to_string(job.restarts)};
    if (labelled) row.push_back(OrDash(FormatLabels(job.labels)));
    row.push_back(job.message);
    table.AddRow(std::move(row));
  }
  if (jobs.empty()) {
    out << "No jobs.\n";
    return;
  }
  table.Print(out);
}

void PrintNodes(const std::vector<wire::NodeInfoT>& nodes, std::ostream& out) {
  if (nodes.empty()) {
    out << "No nodes registered.\n";
    return;
  }
  // A FREE-BY-NUMA column where some node's GPUs sit on several NUMA nodes (two sockets).
  std::vector<std::string> free_by_numa;
  for (const auto& n : nodes) free_by_numa.push_back(FreeGpusByNuma(n));
  const bool numa = std::any_of(free_by_numa.begin(), free_by_numa.end(),
                                [](const std::string& text) { return !text.empty(); });
  std::vector<std::string> columns = {"NODE", "ADDRESS", "STATE", "GPUS"};
  if (numa) columns.push_back("FREE-BY-NUMA");
  columns.insert(columns.end(),
                 {"CPUS", "MEMORY", "REPLICAS", "HEARTBEAT", "VERSION", "STORAGE", "LABELS"});
  Table table(columns);
  int64_t now = NowMs();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const wire::NodeInfoT& n = nodes[i];
    std::string gpus = std::to_string(n.gpus_used.size()) + "/" + std::to_string(n.gpus.size());
    if (!n.gpus.empty() && n.gpus.front() && !n.gpus.front()->model.empty()) {
      gpus += " " + n.gpus.front()->model;
    }
    std::vector<std::string> out_of_service;
    if (!n.unhealthy_gpus.empty()) {
      out_of_service.push_back(std::to_string(n.unhealthy_gpus.size()) + " unfit");
    }
    if (!n.cordoned_gpus.empty()) {
      out_of_service.push_back(std::to_string(n.cordoned_gpus.size()) + " cordoned");
    }
    if (!out_of_service.empty()) gpus += " (" + JoinWithCommas(out_of_service) + ")";
    std::string heartbeat =
        n.last_heartbeat_ms > 0 ? FormatElapsed(now - n.last_heartbeat_ms) + " ago" : "-";
    std::vector<std::string> row = {n.node_id, OrDash(n.address), OrDash(NodeState(n)), gpus};
    if (numa) row.push_back(OrDash(free_by_numa[i]));
    row.insert(row.end(), {std::to_string(n.cpus_used) + "/" + std::to_string(n.cpus),
                           FormatMemory(n.memory_used_mb) + "/" + FormatMemory(n.memory_mb),
                           std::to_string(n.replicas), heartbeat, OrDash(n.version),
                           OrDash(n.storage), OrDash(n.labels)});
    table.AddRow(std::move(row));
  }
  table.Print(out);
  if (const std::string builds = AgentBuildsNote(nodes); !builds.empty()) out << builds << "\n";
  // Why a node, or a GPU of it, takes no new work (too long for a column).
  for (const auto& n : nodes) {
    if (const std::string note = CordonNoteText(n); !note.empty()) {
      out << n.node_id << " " << note << "\n";
    }
    if (!n.unhealthy.empty())
      out << n.node_id << " fails its health check: " << n.unhealthy << "\n";
    for (const auto& gpu : n.unhealthy_gpus) {
      if (gpu) out << n.node_id << " GPU " << gpu->index << " is unfit: " << gpu->reason << "\n";
    }
    // A cordoned GPU still held is draining, as a node is: free once what runs there ends.
    for (int gpu : n.cordoned_gpus) {
      const bool held = std::find(n.gpus_used.begin(), n.gpus_used.end(), gpu) != n.gpus_used.end();
      out << n.node_id << " GPU " << gpu << " is cordoned"
          << (held ? " and in use until what runs there ends" : " and free") << " (cohort uncordon "
          << n.node_id << " --gpu " << gpu << ")\n";
    }
  }
}

namespace {

// The STATE cell of GPU `index` of `node` in PrintNode: "job/replica" holding it, then why
// nothing new goes there ("unfit: <reason>", "cordoned"); "free" when none applies.
std::string GpuHolderCell(const wire::NodeInfoT& node, int index) {
  std::vector<std::string> parts;
  for (const auto& h : node.holders) {
    if (h && std::find(h->gpus.begin(), h->gpus.end(), index) != h->gpus.end()) {
      parts.push_back(h->job + "/" + h->replica);
    }
  }
  // Held, but by no replica the coordinator named (one that predates NodeInfo.holders).
  if (parts.empty() &&
      std::find(node.gpus_used.begin(), node.gpus_used.end(), index) != node.gpus_used.end()) {
    parts.push_back("held");
  }
  for (const auto& gpu : node.unhealthy_gpus) {
    if (gpu && gpu->index == index) parts.push_back("unfit: " + gpu->reason);
  }
  if (std::find(node.cordoned_gpus.begin(), node.cordoned_gpus.end(), index) !=
      node.cordoned_gpus.end()) {
    parts.push_back("cordoned");
  }
  return parts.empty() ? "free" : JoinWithCommas(parts);
}

}  // namespace

void PrintNode(const wire::NodeInfoT& n, std::ostream& out) {
  auto row = [&](const std::string& key, const std::string& value) { Row(out, key, value); };
  row("Node:", n.node_id);
  row("Address:", OrDash(n.address));
  row("State:", NodeState(n));
  if (const std::string note = CordonNoteText(n); !note.empty()) row("Cordon:", note);
  if (!n.unhealthy.empty()) row("Health:", "fails its check: " + n.unhealthy);
  row("Heartbeat:",
      n.last_heartbeat_ms > 0 ? FormatElapsed(NowMs() - n.last_heartbeat_ms) + " ago" : "-");
  std::string agent = n.version.empty() ? "" : "cohort-agent " + n.version;
  if (n.agent_started_ms > 0) {
    agent += std::string(agent.empty() ? "" : ", ") + "started " +
             FormatElapsed(NowMs() - n.agent_started_ms) + " ago";
  }
  row("Agent:", OrDash(agent));
  row("CPUs:", std::to_string(n.cpus_used) + "/" + std::to_string(n.cpus) + " held");
  row("Memory:", FormatMemory(n.memory_used_mb) + "/" + FormatMemory(n.memory_mb) + " held");
  if (n.usage != nullptr) {
    const wire::NodeUsageT& u = *n.usage;
    row("In use:", FormatCores(u.cpu_cores) + " cores, memory " +
                       (u.memory_bytes < 0 ? "-" : FormatMemory(u.memory_bytes >> 20)) + " (" +
                       std::to_string(u.replicas) + " of " + std::to_string(n.replicas) +
                       " replicas reported)");
  }
  row("Storage:", OrDash(n.storage));
  row("Labels:", OrDash(n.labels));
  if (!n.label_edits.empty()) row("Label edits:", n.label_edits);

  out << "\nGPUs:\n";
  Table gpus({"GPU", "MODEL", "MEMORY", "NUMA", "UUID", "USE", "STATE"});
  for (const auto& gpu : n.gpus) {
    if (!gpu) continue;
    const wire::GpuUsageT* sample = GpuSample(n.usage.get(), gpu->index);
    const std::string use = sample != nullptr ? FormatGpuUse(*sample) : "-";
    gpus.AddRow({std::to_string(gpu->index), OrDash(gpu->model),
                 gpu->memory_mb > 0 ? FormatMemory(gpu->memory_mb) : "-",
                 gpu->numa_node >= 0 ? std::to_string(gpu->numa_node) : "-", OrDash(gpu->uuid), use,
                 GpuHolderCell(n, gpu->index)});
  }
  if (gpus.size() == 0) {
    out << "  (none)\n";
  } else {
    gpus.Print(out);
  }

  out << "\nReplicas:\n";
  Table replicas({"JOB", "REPLICA", "STATE", "GPUS", "CPUS", "MEMORY"});
  for (const auto& h : n.holders) {
    if (!h) continue;
    replicas.AddRow({h->job, h->replica, wire::EnumNameReplicaState(h->state), JoinInts(h->gpus),
                     std::to_string(h->cpus), h->memory_mb > 0 ? FormatMemory(h->memory_mb) : "-"});
  }
  if (replicas.size() == 0) {
    out << (n.replicas > 0 ? "  " + std::to_string(n.replicas) + " (the coordinator names none)\n"
                           : "  (none)\n");
  } else {
    replicas.Print(out);
  }

  out << "\nEvents:\n";
  for (const auto& e : n.events) {
    if (e) out << "  " << FormatTime(e->time_ms) << "  " << e->text << "\n";
  }
  if (n.events.empty()) out << "  (none)\n";
}

namespace {

// An array's tasks by state: "12 SUCCEEDED, 8 RUNNING, 80 QUEUED".
std::string ArrayTasksByState(const wire::ArrayInfoT& array) {
  std::string text;
  for (const wire::JobStateCount& c : array.by_state) {
    text += (text.empty() ? "" : ", ") + std::to_string(c.count()) + " " +
            wire::EnumNameJobState(c.state());
  }
  return text;
}

}  // namespace

void PrintArrayHeader(const wire::ArrayInfoT& array, std::ostream& out) {
  out << "array " << array.name << ": " << array.state << ", " << array.tasks << " tasks ("
      << array.array << "): " << ArrayTasksByState(array) << "; " << array.in_flight
      << " in flight";
  if (array.parallelism > 0) out << " of at most " << array.parallelism;
  out << "\n";
}

void PrintArrays(const std::vector<wire::ArrayInfoT>& arrays, std::ostream& out) {
  if (arrays.empty()) {
    out << "No job arrays.\n";
    return;
  }
  Table table({"ARRAY", "STATE", "INDEXES", "ENDED", "IN FLIGHT", "TASKS", "QUEUE", "CREATED"});
  for (const auto& a : arrays) {
    table.AddRow({a.name, a.state, a.array, std::to_string(a.ended) + "/" + std::to_string(a.tasks),
                  std::to_string(a.in_flight) +
                      (a.parallelism > 0 ? "/" + std::to_string(a.parallelism) : ""),
                  ArrayTasksByState(a), OrDash(a.queue), FormatTime(a.create_time_ms)});
  }
  table.Print(out);
}

void PrintStudies(const std::vector<wire::StudyInfoT>& studies, std::ostream& out) {
  if (studies.empty()) {
    out << "No studies.\n";
    return;
  }
  Table table({"STUDY", "STATE", "TRIALS", "RUNNING", "BEST", "METRIC", "CREATED"});
  for (const auto& s : studies) {
    int done = 0, running = 0;
    std::string best = "-", metric = "-";
    for (const auto& t : s.trials) {
      if (!t) continue;
      if (t->state == "ACTIVE" || t->state == "REQUESTED" || t->state == "STOPPING") {
        ++running;
      } else {
        ++done;
      }
      if (t->id == s.best_trial && !s.best_trial.empty()) {
        best = "trial " + t->id;
        if (t->has_final_metric) {
          std::ostringstream v;
          v << t->final_metric;
          best += " (" + s.metric + " " + v.str() + ")";
        }
      }
    }
    if (!s.metric.empty()) metric = s.metric + " (" + s.goal + ")";
    table.AddRow({s.name, OrDash(s.state),
                  std::to_string(done) + "/" + std::to_string(s.max_trials),
                  std::to_string(running), best, metric, FormatTime(s.create_time_ms)});
  }
  table.Print(out);
}

void PrintQueues(const std::vector<wire::QueueInfoT>& queues, std::ostream& out) {
  // Use against quota: "6/4" borrows 2 beyond its quota; "-" for a resource not in the quota.
  Table table({"QUEUE", "WEIGHT", "GPUS", "CPUS", "RUNNING", "WAITING", "SUSPENDED", "NEXT"});
  for (const auto& q : queues) {
    std::ostringstream weight;
    weight << q.weight;
    std::string cpus = std::to_string(q.cpus_used) + "/" +
                       (q.cpu_quota < 0 ? std::string("-") : std::to_string(q.cpu_quota));
    std::string next;
    for (size_t k = 0; k < q.waiting_jobs.size() && k < 3; ++k) {
      next += (k ? ", " : "") + q.waiting_jobs[k];
    }
    if (q.waiting_jobs.size() > 3) next += ", ...";
    table.AddRow({q.name, weight.str(),
                  std::to_string(q.gpus_used) + "/" + std::to_string(q.gpu_quota), cpus,
                  std::to_string(q.running), std::to_string(q.waiting), std::to_string(q.suspended),
                  OrDash(next)});
  }
  table.Print(out);
  out << "GPUS and CPUS: used/quota (a queue may borrow idle capacity beyond its quota)\n";
  for (const auto& q : queues) {
    if (q.cpus_per_gpu > 0 || q.memory_mb_per_gpu > 0) {
      std::string per_gpu;
      if (q.cpus_per_gpu > 0) per_gpu = std::to_string(q.cpus_per_gpu) + " CPUs";
      if (q.memory_mb_per_gpu > 0) {
        per_gpu += (per_gpu.empty() ? "" : " and ") + std::to_string(q.memory_mb_per_gpu) + " MB";
      }
      out << q.name << ": " << per_gpu
          << " per GPU where a job file gives no cpus or memory_mb (cpus-per-gpu, "
             "memory-mb-per-gpu)\n";
    }
    if (q.gpu_idle_limit_ms > 0) {
      out << q.name << ": a job whose GPUs all sit idle for "
          << cohort::FormatDuration(std::chrono::milliseconds(q.gpu_idle_limit_ms))
          << " fails (gpu-idle-limit)\n";
    }
  }
}

}  // namespace cohort::cli
