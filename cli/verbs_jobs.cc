// The job verbs of the `cohort` CLI: submit, status, top, list, logs, watch, cancel (a job, else a
// study), suspend, resume, exec, stacks, delete, checkpoint, metrics.
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli.h"
#include "cli/exec_session.h"
#include "cli/job_view.h"
#include "cli/output.h"
#include "cli/verb_util.h"
#include "cli/verbs.h"
#include "common/checkpoint.h"
#include "common/cluster_env.h"
#include "common/config.h"
#include "common/job_spec.h"
#include "common/script_checkpoints.h"
#include "common/stack_where.h"
#include "common/vertex_job.h"

namespace cohort::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The live view's options from --replica/--all (default: the chief's output); `terminal_fd`: the
// descriptor of the terminal it draws on, -1 when it draws on none.
WatchOptions WatchOptionsFrom(const ParsedArgs& args, const Context& ctx, int terminal_fd) {
  WatchOptions options;
  options.all = args.Has("--all");
  if (args.Has("--replica")) options.replicas = {args.Get("--replica")};
  options.redraw = terminal_fd >= 0;
  if (winsize size{}; options.redraw && ::ioctl(terminal_fd, TIOCGWINSZ, &size) == 0) {
    options.columns = size.ws_col;
  }
  options.unreachable_limit =
      std::max<std::chrono::milliseconds>(ctx.options.timeout * 6, std::chrono::seconds(30));
  return options;
}

// A metric value as reported: shortest round-trip.
std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// One replica's stack dumps (attempt -1: every attempt, each after a header line) from `offset`
// to their end, past 1 MiB, appended to `text` (null: only their end is wanted); returns where
// they end.
StatusOr<uint64_t> ReadStackDumps(CoordinatorClient& client, const std::string& job,
                                  const std::string& replica, int attempt, uint64_t offset,
                                  std::string* text) {
  while (true) {
    auto data = client.ReadLogs(job, replica, offset, attempt, 1u << 20, /*with_times=*/false,
                                /*dump=*/true);
    if (!data.ok()) return data.status();
    if (text != nullptr) text->append(data->data.begin(), data->data.end());
    offset = std::max<uint64_t>(data->next_offset, offset + data->data.size());
    if (data->data.empty() || data->complete) return offset;
  }
}

// `cohort logs JOB --dump`: the stack dumps the agents took of one replica (every attempt, each
// after a header line, or one), read whole; nothing to follow.
int ShowStackDumps(CoordinatorClient& client, const std::string& job, const std::string& replica,
                   int attempt, std::ostream& out, std::ostream& err) {
  std::string text;
  auto end = ReadStackDumps(client, job, replica, attempt, 0, &text);
  if (!end.ok()) return Fail(err, end.status());
  out << text;
  out.flush();
  if (*end == 0) {
    err << "cohort: no stack dumps of " << job << " " << replica
        << " (the agents take them when the watchdog finds the job hung, and on `cohort stacks "
        << job << "`)\n";
  }
  return kExitOk;
}

// `cohort exec --all`: how many replicas' commands it has run at once.
constexpr size_t kExecAllAtOnce = 16;

// How long `cohort stacks` waits for the dumps: an agent takes each process's native stacks
// within 10 s, at most 8 processes a replica.
constexpr std::chrono::seconds kStacksWait(120);

// The tasks of array `array`, by index, as the coordinator has them now; none when no array has
// that name (every task deleted).
StatusOr<std::vector<wire::JobInfoT>> ListArrayTasks(CoordinatorClient& client,
                                                     const std::string& array) {
  auto found = client.GetArray(array);
  if (!found.ok() && found.status().code() == StatusCode::kNotFound) {
    return std::vector<wire::JobInfoT>{};
  }
  if (!found.ok()) return found.status();
  return std::move(found->tasks);
}

// `cohort submit --array --wait` and `cohort cancel ARRAY --wait`: waits until each of the
// array's `expected` tasks has ended, a line on `out` as each does; exit 0 only when every one
// SUCCEEDED.
int WaitForArray(CoordinatorClient& client, const std::string& array, size_t expected,
                 std::ostream& out, std::ostream& err) {
  std::set<std::string> reported;
  std::vector<std::string> failed;
  while (true) {
    auto tasks = ListArrayTasks(client, array);
    if (!tasks.ok()) return Fail(err, tasks.status());
    size_t ended = 0;
    for (const wire::JobInfoT& task : *tasks) {
      if (!IsTerminal(task.state)) continue;
      ++ended;
      if (!reported.insert(task.name).second) continue;
      out << StateLine(task) << std::endl;
      if (task.state != wire::JobState::SUCCEEDED) failed.push_back(task.name);
    }
    if (ended >= expected || (tasks->empty() && expected == 0)) break;
    if (tasks->size() < expected && ended == tasks->size()) {
      // Tasks deleted while it waited: they never end.
      err << "cohort: array " << array << ": " << expected - tasks->size()
          << " task(s) deleted while waiting\n";
      return kExitJobFailed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (failed.empty()) {
    out << "array " << array << ": all " << expected << " tasks SUCCEEDED" << std::endl;
    return kExitOk;
  }
  std::string names;
  for (const std::string& name : failed) names += (names.empty() ? "" : ", ") + name;
  out << "array " << array << ": " << failed.size() << " of " << expected
      << " tasks did not succeed: " << names << std::endl;
  return kExitJobFailed;
}

}  // namespace

int Submit(const ParsedArgs& args, const Context& ctx) {
  wire::SubmitJobReplyT submitted;
  std::function<StatusOr<std::string>(const std::string&)> rename;
  SubmitEdits edits;
  edits.name = args.Get("--name");
  if (args.Has("--name") && edits.name.empty()) {
    return UsageError(ctx.err, "submit", "--name: an empty name");
  }
  if (args.Has("--after")) {
    std::istringstream list(args.Get("--after"));
    for (std::string entry; std::getline(list, entry, ',');) {
      StatusOr<JobDependency> dependency = ParseJobDependency(entry);
      if (!dependency.ok())
        return UsageError(ctx.err, "submit", "--after: " + dependency.status().message());
      edits.after.push_back(*std::move(dependency));
    }
  }
  edits.hold = args.Has("--hold");
  if (args.Has("--array")) {
    edits.array = args.Get("--array");
    if (StatusOr<ArraySpec> array = ParseArraySpec(edits.array); !array.ok()) {
      return UsageError(ctx.err, "submit", "--array: " + array.status().message());
    }
  }
  ParsedArgs file_args;
  if (Status read = ReadEnvLabelsAndArgs(args, &edits, &file_args); !read.ok()) {
    return UsageError(ctx.err, "submit", read.message());
  }
  const bool dry_run = args.Has("--dry-run");
  if (dry_run && args.Has("--wait")) {
    return UsageError(ctx.err, "submit", "--dry-run submits nothing to wait for: not with --wait");
  }
  if (args.Has("--json") && !dry_run) {
    return UsageError(ctx.err, "submit", "--json goes with --dry-run (a submit prints the name)");
  }
  // A Vertex CustomJob file goes as the Cohort job file it makes.
  rename = [&](const std::string& text) -> StatusOr<std::string> {
    COHORT_ASSIGN_OR_RETURN(std::string job,
                            AsCohortFile(text, args.positionals[0], AsCohortJobFile, ctx.err));
    return edits.empty() ? StatusOr<std::string>(std::move(job)) : ApplySubmitEdits(job, edits);
  };
  if (dry_run) {
    return SubmitSpecFile<JobSpec, wire::SubmitJobReplyT>(
        file_args, ctx, "submit", "job", ParseJobSpec,
        [&](CoordinatorClient& client, const std::string& text) { return client.DryRun(text); },
        [&](CoordinatorClient&, const JobSpec& spec, const wire::SubmitJobReplyT& reply) {
          if (args.Has("--json")) {
            ctx.out << SubmitReplyToJson(reply).dump(2, ' ', false,
                                                     nlohmann::json::error_handler_t::replace)
                    << "\n";
            return kExitOk;
          }
          for (const std::string& w : reply.warnings) ctx.err << "cohort: warning: " << w << "\n";
          if (reply.task_dry_runs.empty()) {
            PrintDryRun(reply, ctx.out);
          } else {
            PrintArrayDryRun(reply, spec.scheduling.array.indexes.size(), ctx.out);
          }
          return kExitOk;
        },
        rename);
  }
  return SubmitSpecFile<JobSpec, std::string>(
      file_args, ctx, "submit", "job", ParseJobSpec,
      [&](CoordinatorClient& client, const std::string& text) {
        return client.Submit(text, &submitted);
      },
      [&](CoordinatorClient& client, const JobSpec& spec, const std::string& name) {
        for (const std::string& w : submitted.warnings) ctx.err << "cohort: warning: " << w << "\n";
        for (const std::string& d : submitted.defaults) ctx.err << "cohort: " << d << "\n";
        ctx.out << name << std::endl;
        const std::vector<std::string>& tasks = submitted.tasks;
        if (!tasks.empty()) {
          const int parallelism = spec.scheduling.array.parallelism;
          ctx.err << "array " << name << ": " << tasks.size() << " tasks (" << tasks.front()
                  << (tasks.size() > 1 ? " .. " + tasks.back() : "") << ")"
                  << (parallelism > 0 ? ", at most " + std::to_string(parallelism) + " at once"
                                      : "")
                  << "; `cohort list -l " << kArrayLabel << "=" << name
                  << "` lists them, `cohort cancel " << name << "` cancels them\n";
          if (!args.Has("--wait")) return kExitOk;
          return WaitForArray(client, name, tasks.size(), ctx.err, ctx.err);
        }
        if (!args.Has("--wait")) return kExitOk;
        // The job's name alone goes to stdout; the live view to stderr.
        return WatchJob(client, name,
                        WatchOptionsFrom(args, ctx, ctx.err_is_terminal ? STDERR_FILENO : -1),
                        ctx.err, ctx.err);
      },
      rename);
}

int ShowJob(const ParsedArgs& args, const Context& ctx) {
  if (args.Has("--spec")) {
    return ShowOne(args, ctx, "status", "JOB", &CoordinatorClient::GetJob, JobToJson, PrintJob,
                   &CoordinatorClient::GetJobSpec);
  }
  // A job, else the array of that name: its summary and its tasks (`tasks` set, `job` empty).
  struct JobOrArray {
    wire::JobInfoT job;
    wire::ArrayInfoT array;
    std::vector<wire::JobInfoT> tasks;
  };
  const std::string name = args.positionals.empty() ? "" : args.positionals[0];
  return ShowVerb<JobOrArray>(
      args, ctx, "status", "JOB",
      [&](CoordinatorClient& client) -> StatusOr<JobOrArray> {
        JobOrArray out;
        auto job = client.GetJob(name);
        if (job.ok() || job.status().code() != StatusCode::kNotFound) {
          COHORT_ASSIGN_OR_RETURN(out.job, std::move(job));
          return out;
        }
        auto array = client.GetArray(name);
        if (!array.ok() && array.status().code() == StatusCode::kNotFound) {
          return NoJobOrArray(name);
        }
        if (!array.ok()) return array.status();
        out.array = std::move(array->summary);
        out.tasks = std::move(array->tasks);
        return out;
      },
      [&](const JobOrArray& found) {
        if (found.array.name.empty()) return JobToJson(found.job);
        nlohmann::json tasks = nlohmann::json::array();
        for (const wire::JobInfoT& task : found.tasks) tasks.push_back(JobToJson(task));
        return nlohmann::json{
            {"array", name}, {"summary", ArrayToJson(found.array)}, {"tasks", std::move(tasks)}};
      },
      [&](const JobOrArray& found, std::ostream& out) {
        if (found.array.name.empty()) return PrintJob(found.job, out);
        PrintArrayHeader(found.array, out);
        PrintJobList(found.tasks, out);
      });
}

int Arrays(const ParsedArgs& args, const Context& ctx) {
  return ShowAll(args, ctx, "arrays", &CoordinatorClient::ListArrays, ArrayToJson, PrintArrays);
}

int Top(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() > 1) return UsageError(ctx.err, "top", "top takes at most one JOB");
  if (args.Has("--nodes") && !args.positionals.empty()) {
    return UsageError(ctx.err, "top", "give either JOB or --nodes, not both");
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  if (args.Has("--nodes")) {
    auto nodes = client->ListNodes(args.Get("--selector"));
    if (!nodes.ok()) return Fail(ctx.err, nodes.status());
    if (!args.Has("--json")) {
      PrintNodeTop(*nodes, ctx.out);
      return kExitOk;
    }
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& n : *nodes) rows.push_back(NodeToJson(n));
    ctx.out << rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return kExitOk;
  }
  std::vector<wire::JobInfoT> jobs;
  if (args.positionals.empty()) {
    wire::ListJobsT running;
    running.states.push_back(wire::JobState::RUNNING);
    auto listed = client->ListJobs(running);
    if (!listed.ok()) return Fail(ctx.err, listed.status());
    jobs = std::move(*listed);
  } else {
    auto job = client->GetJob(args.positionals[0]);
    if (!job.ok()) return Fail(ctx.err, job.status());
    jobs.push_back(std::move(*job));
  }
  if (!args.Has("--json")) {
    PrintTop(jobs, ctx.out);
    return kExitOk;
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& job : jobs) {
    for (const auto& r : job.replicas) {
      if (!r || r->state != wire::ReplicaState::RUNNING) continue;
      rows.push_back({{"job", job.name},
                      {"replica", r->replica},
                      {"node_id", r->node_id},
                      {"usage", ReplicaUsageToJson(r->usage.get())}});
    }
  }
  ctx.out << rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return kExitOk;
}

int List(const ParsedArgs& args, const Context& ctx) {
  wire::ListJobsT query;
  if (args.Has("--state")) {
    std::stringstream names(args.Get("--state"));
    std::string name;
    while (std::getline(names, name, ',')) {
      auto state = ParseJobState(name);
      if (!state.ok()) return UsageError(ctx.err, "list", "--state: " + state.status().message());
      query.states.push_back(*state);
    }
    if (query.states.empty()) return UsageError(ctx.err, "list", "--state: no state given");
  }
  if (args.Has("--since")) {
    auto since = ParseSince(args.Get("--since"), NowMs());
    if (!since.ok()) return UsageError(ctx.err, "list", "--since: " + since.status().message());
    query.created_since_ms = std::max<int64_t>(*since, 1);
  }
  if (args.Has("--limit")) {
    const std::string text = args.Get("--limit");
    size_t used = 0;
    long long limit = -1;
    try {
      limit = std::stoll(text, &used);
    } catch (const std::exception&) {
    }
    if (used != text.size() || limit < 1 || limit > 1'000'000) {
      return UsageError(ctx.err, "list",
                        "--limit: expected a number from 1 to 1000000, got '" + text + "'");
    }
    query.limit = static_cast<uint32_t>(limit);
  }
  query.selector = args.Get("--selector");  // the coordinator parses it
  return ShowVerb<std::vector<wire::JobInfoT>>(
      args, ctx, "list", "", [&](CoordinatorClient& client) { return client.ListJobs(query); },
      [](const std::vector<wire::JobInfoT>& jobs) {
        nlohmann::json array = nlohmann::json::array();
        for (const auto& job : jobs) array.push_back(JobToJson(job));
        return array;
      },
      PrintJobList);
}

int Logs(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() != 1) return UsageError(ctx.err, "logs", "logs needs one JOB");
  if (args.Has("--all") && args.Has("--replica")) {
    return UsageError(ctx.err, "logs", "give either --replica or --all, not both");
  }
  // A whole number from `flag`, at least 0.
  auto count = [&](const std::string& flag, int* value) {
    const std::string text = args.Get(flag);
    try {
      size_t used = 0;
      *value = std::stoi(text, &used);
      return used == text.size() && *value >= 0;
    } catch (const std::exception&) {
      return false;
    }
  };
  LogsOptions options;
  options.all = args.Has("--all");
  options.replicas = {args.Get("--replica", "chief-0")};
  if (args.Has("--attempt") && !count("--attempt", &options.attempt)) {
    return UsageError(ctx.err, "logs", "--attempt: expected a non-negative integer");
  }
  if (args.Has("--tail") && !count("--tail", &options.tail)) {
    return UsageError(ctx.err, "logs", "--tail: expected a non-negative number of lines");
  }
  if (args.Has("--since")) {
    auto since = ParseSince(args.Get("--since"), NowMs());
    if (!since.ok()) return UsageError(ctx.err, "logs", "--since: " + since.status().message());
    options.since_ms = std::max<int64_t>(*since, 0);
  }
  options.timestamps = args.Has("--timestamps");
  options.follow = args.Has("--follow");
  if (args.Has("--dump")) {
    if (options.follow || options.all || options.tail >= 0 || options.timestamps ||
        args.Has("--since")) {
      return UsageError(ctx.err, "logs", "--dump goes with --replica and --attempt only");
    }
    auto client = ConnectClient(ctx);
    if (!client.ok()) return Fail(ctx.err, client.status());
    return ShowStackDumps(*client, args.positionals[0], options.replicas[0], options.attempt,
                          ctx.out, ctx.err);
  }
  options.unreachable_limit =
      std::max<std::chrono::milliseconds>(ctx.options.timeout * 6, std::chrono::seconds(30));
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  return ShowLogs(*client, args.positionals[0], options, ctx.out, ctx.err);
}

int Watch(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() != 1) return UsageError(ctx.err, "watch", "watch needs one JOB");
  if (args.Has("--all") && args.Has("--replica")) {
    return UsageError(ctx.err, "watch", "give either --replica or --all, not both");
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  const std::string& name = args.positionals[0];
  if (auto job = client->GetJob(name); !job.ok() && job.status().code() == StatusCode::kNotFound) {
    // Not a job: the array of that name, a line as each task ends.
    auto tasks = ListArrayTasks(*client, name);
    if (!tasks.ok()) return Fail(ctx.err, tasks.status());
    if (tasks->empty()) return Fail(ctx.err, NoJobOrArray(name));
    return WaitForArray(*client, name, tasks->size(), ctx.out, ctx.err);
  }
  return WatchJob(*client, name,
                  WatchOptionsFrom(args, ctx, ctx.out_is_terminal ? STDOUT_FILENO : -1), ctx.out,
                  ctx.err);
}

int Cancel(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() != 1) {
    return UsageError(ctx.err, "cancel", "cancel needs one JOB or STUDY");
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  const std::string& name = args.positionals[0];
  auto job = client->Cancel(name);
  if (!job.ok() && job.status().code() == StatusCode::kNotFound) {
    // Not a job: an array of that name, else a study.
    auto tasks = client->CancelArray(name);
    if (tasks.ok()) {
      if (args.Has("--wait")) {
        // As for a job, a cancel that ended every task went as asked, however they ended.
        const int waited = WaitForArray(*client, name, tasks->size(), ctx.out, ctx.err);
        return waited == kExitJobFailed ? kExitOk : waited;
      }
      for (const wire::JobInfoT& task : *tasks) ctx.out << StateLine(task) << "\n";
      return kExitOk;
    }
    if (tasks.status().code() != StatusCode::kNotFound) return Fail(ctx.err, tasks.status());
    auto study = client->CancelStudy(name);
    if (study.ok()) {
      ctx.out << "study " << study->name << ": " << study->state
              << (study->message.empty() ? "" : " (" + study->message + ")") << "\n";
      return kExitOk;
    }
    if (study.status().code() == StatusCode::kNotFound) {
      return Fail(ctx.err, NotFound("no job, array or study named '" + name + "'"));
    }
    return Fail(ctx.err, study.status());
  }
  if (!job.ok()) return Fail(ctx.err, job.status());
  if (!args.Has("--wait") || IsTerminal(job->state)) {
    ctx.out << StateLine(*job) << "\n";
    return kExitOk;
  }
  auto final_job = client->WaitForJob(
      job->name, [](const wire::JobInfoT& j) { return IsTerminal(j.state); },
      Clock::time_point::max(), std::chrono::milliseconds(250));
  if (!final_job.ok()) return Fail(ctx.err, final_job.status());
  ctx.out << StateLine(*final_job) << "\n";
  return kExitOk;
}

namespace {

// Whether no replica of `job` may still run: each is in a final state (STOPPED, PREEMPTED, ...).
bool NothingRuns(const wire::JobInfoT& job) {
  return std::all_of(job.replicas.begin(), job.replicas.end(), [](const auto& r) {
    return r == nullptr ||
           (r->state != wire::ReplicaState::PENDING && r->state != wire::ReplicaState::STARTING &&
            r->state != wire::ReplicaState::RUNNING);
  });
}

// `cohort suspend|resume ARRAY`: every task not ended; a line a task after (NOT_FOUND naming a
// job or an array). Suspend --wait first waits until no replica of a suspended task runs.
int SuspendOrResumeArray(CoordinatorClient& client, const std::string& name, bool resume, bool wait,
                         const Context& ctx) {
  auto tasks = client.SuspendArray(name, resume);
  if (!tasks.ok() && tasks.status().code() == StatusCode::kNotFound) {
    return Fail(ctx.err, NoJobOrArray(name));
  }
  if (!tasks.ok()) return Fail(ctx.err, tasks.status());
  const auto stopping = [](const std::vector<wire::JobInfoT>& all) {
    return std::any_of(all.begin(), all.end(), [](const wire::JobInfoT& j) {
      return j.state == wire::JobState::SUSPENDED && !NothingRuns(j);
    });
  };
  while (!resume && wait && stopping(*tasks)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    tasks = ListArrayTasks(client, name);
    if (!tasks.ok()) return Fail(ctx.err, tasks.status());
  }
  for (const wire::JobInfoT& task : *tasks) ctx.out << StateLine(task) << "\n";
  return kExitOk;
}

// `cohort suspend` (`resume` false) and `cohort resume`: one job, its state line after, else the
// array of that name; suspend --wait first waits until none of its replicas runs.
int SuspendOrResume(const ParsedArgs& args, const Context& ctx, bool resume) {
  const std::string verb = resume ? "resume" : "suspend";
  if (args.positionals.size() != 1) return UsageError(ctx.err, verb, verb + " needs one JOB");
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  const std::string& name = args.positionals[0];
  auto job = client->Suspend(name, resume);
  if (!job.ok() && job.status().code() == StatusCode::kNotFound) {
    return SuspendOrResumeArray(*client, name, resume, args.Has("--wait"), ctx);
  }
  if (!job.ok()) return Fail(ctx.err, job.status());
  if (!resume && args.Has("--wait") && !NothingRuns(*job)) {
    // Until every replica has stopped (or the job left SUSPENDED: resumed or cancelled meanwhile).
    job = client->WaitForJob(
        job->name,
        [](const wire::JobInfoT& j) {
          return j.state != wire::JobState::SUSPENDED || NothingRuns(j);
        },
        Clock::time_point::max(), std::chrono::milliseconds(250));
    if (!job.ok()) return Fail(ctx.err, job.status());
  }
  ctx.out << StateLine(*job) << "\n";
  return kExitOk;
}

}  // namespace

int Suspend(const ParsedArgs& args, const Context& ctx) {
  return SuspendOrResume(args, ctx, false);
}

int Resume(const ParsedArgs& args, const Context& ctx) { return SuspendOrResume(args, ctx, true); }

int Update(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() != 1) return UsageError(ctx.err, "update", "update needs one JOB");
  const std::string priority = args.Get("--priority"), queue = args.Get("--queue");
  if (priority.empty() && queue.empty()) {
    return UsageError(ctx.err, "update", "give --priority CLASS or --queue QUEUE");
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  const std::string& name = args.positionals[0];
  std::vector<wire::JobInfoT> updated;
  if (auto job = client->Update(name, priority, queue); job.ok()) {
    updated.push_back(*std::move(job));
  } else if (job.status().code() != StatusCode::kNotFound) {
    return Fail(ctx.err, job.status());
  } else {
    // Not a job: the array of that name, each task not ended.
    auto tasks = client->UpdateArray(name, priority, queue);
    if (!tasks.ok() && tasks.status().code() == StatusCode::kNotFound) {
      return Fail(ctx.err, NoJobOrArray(name));
    }
    if (!tasks.ok()) return Fail(ctx.err, tasks.status());
    updated = *std::move(tasks);
  }
  for (const wire::JobInfoT& job : updated) {
    ctx.out << "job " << job.name << ": " << wire::EnumNameJobState(job.state) << ", priority "
            << job.priority << ", queue " << job.queue << "\n";
  }
  return kExitOk;
}

int Exec(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() < 2) {
    return UsageError(ctx.err, "exec", "exec needs a JOB and a COMMAND (after --)");
  }
  std::chrono::milliseconds kill_after(kDefaultExecTimeoutMs);
  if (args.Has("--kill-after")) {
    auto parsed = ParseDuration(args.Get("--kill-after"));
    if (!parsed.ok()) {
      return UsageError(ctx.err, "exec", "--kill-after: " + parsed.status().message());
    }
    if (parsed->count() <= 0 || parsed->count() > kMaxExecTimeoutMs) {
      return UsageError(ctx.err, "exec", "--kill-after: must be above 0 and at most 1h");
    }
    kill_after = *parsed;
  }
  if (args.Has("--all") && args.Has("--replica")) {
    return UsageError(ctx.err, "exec", "give --replica or --all, not both");
  }
  const bool interactive = args.Has("--stdin") || args.Has("--tty");
  if (interactive && (args.Has("--all") || args.Has("--kill-after"))) {
    return UsageError(ctx.err, "exec",
                      std::string("-i and -t run one session: not with ") +
                          (args.Has("--all") ? "--all" : "--kill-after"));
  }
  const std::string& job = args.positionals[0];
  const std::vector<std::string> command(args.positionals.begin() + 1, args.positionals.end());
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  if (interactive) {
    ctx.out.flush();
    return RunExecSession(*client, job, args.Get("--replica"), command, args.Has("--tty"), ctx.err);
  }
  std::vector<std::string> replicas = {args.Get("--replica")};
  if (args.Has("--all")) {
    auto info = client->GetJob(job);
    if (!info.ok()) return Fail(ctx.err, info.status());
    replicas.clear();
    for (const auto& r : info->replicas) {
      if (r && r->state == wire::ReplicaState::RUNNING) replicas.push_back(r->replica);
    }
    if (replicas.empty()) {
      return Fail(ctx.err, FailedPrecondition("no replica of job " + job + " is running (job " +
                                              wire::EnumNameJobState(info->state) + ")"));
    }
  }
  // One call a replica, at most kExecAllAtOnce at once, each over a client of its own (a client
  // is one socket).
  std::vector<std::optional<StatusOr<wire::ExecOutputT>>> ran(replicas.size());
  if (replicas.size() == 1) {
    ran[0] = client->Exec(job, replicas[0], command, kill_after);
  } else {
    std::atomic<size_t> next{0};
    std::vector<std::thread> threads;
    for (size_t t = 0; t < std::min(replicas.size(), kExecAllAtOnce); ++t) {
      threads.emplace_back([&] {
        for (size_t i = next++; i < replicas.size(); i = next++) {
          auto own = ConnectClient(ctx);
          ran[i] = own.ok() ? own->Exec(job, replicas[i], command, kill_after)
                            : StatusOr<wire::ExecOutputT>(own.status());
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  }
  // The command's exit status, or with --all the largest (pdsh's rule), 124 for a kill.
  int exit_code = kExitOk;
  for (size_t i = 0; i < replicas.size(); ++i) {
    const StatusOr<wire::ExecOutputT>& one = *ran[i];
    const std::string who = args.Has("--all") ? replicas[i] + ": " : "";
    if (!one.ok()) {
      ctx.err << "cohort: " << who << one.status().ToString() << "\n";
      exit_code = std::max(exit_code, ExitCodeFor(one.status()));
      continue;
    }
    const std::string output(one->output.begin(), one->output.end());
    if (args.Has("--all")) {
      // Each line after "[worker-1] ", as `cohort logs --all` prints them.
      std::istringstream lines(output);
      for (std::string line; std::getline(lines, line);) {
        ctx.out << "[" << replicas[i] << "] " << line << "\n";
      }
    } else {
      ctx.out << output;
    }
    if (one->truncated) {
      ctx.err << "cohort: " << who << "the output was cut after " << (kMaxExecOutputBytes >> 20)
              << " MiB\n";
    }
    if (one->timed_out) {
      ctx.err << "cohort: " << command.front() << " in " << one->replica << " was killed after "
              << cohort::FormatDuration(kill_after) << " (--kill-after)\n";
    } else if (!one->killed_because.empty()) {
      ctx.err << "cohort: " << command.front() << " in " << one->replica
              << " was killed: " << one->killed_because << "\n";
    }
    exit_code = std::max(exit_code, one->timed_out       ? 124
                                    : one->exit_code < 0 ? kExitJobFailed
                                                         : one->exit_code);
  }
  ctx.out.flush();
  return exit_code;
}

int Stacks(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() != 1) return UsageError(ctx.err, "stacks", "stacks needs one JOB");
  const std::string& name = args.positionals[0];
  const std::string only = args.Get("--replica");
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto job = client->GetJob(name);
  if (!job.ok()) return Fail(ctx.err, job.status());
  // What each running replica's attempt has of dumps before this one.
  struct Waiting {
    std::string replica;
    int attempt = 0;
    uint64_t offset = 0;
  };
  std::vector<Waiting> waiting;
  for (const auto& r : job->replicas) {
    if (!r || r->state != wire::ReplicaState::RUNNING || (!only.empty() && r->replica != only)) {
      continue;
    }
    auto end = ReadStackDumps(*client, name, r->replica, r->attempt, 0, nullptr);
    if (!end.ok()) return Fail(ctx.err, end.status());
    waiting.push_back({r->replica, r->attempt, *end});
  }
  auto asked = client->DumpStacks(name, only);
  if (!asked.ok()) return Fail(ctx.err, asked.status());
  // After the dumps, one line each: where it is (common/stack_where.h), the part read first.
  std::vector<std::pair<std::string, std::string>> where;
  auto print_where = [&] {
    if (where.empty()) return;
    size_t width = 0;
    for (const auto& [who, at] : where) width = std::max(width, who.size());
    ctx.out << "\n==== where each replica is ====\n";
    for (const auto& [who, at] : where) {
      ctx.out << who << std::string(width - who.size() + 2, ' ')
              << (at.empty() ? "(no stack could be read)" : at) << "\n";
    }
    ctx.out.flush();
  };
  const auto deadline = std::chrono::steady_clock::now() + kStacksWait;
  while (!waiting.empty()) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      // A dump is stored whole: what follows the old end is this one.
      std::string dump;
      auto end = ReadStackDumps(*client, name, it->replica, it->attempt, it->offset, &dump);
      if (!end.ok()) return Fail(ctx.err, end.status());
      if (dump.empty()) {
        ++it;
        continue;
      }
      ctx.out << "==== " << it->replica << " attempt " << it->attempt << " ====\n" << dump;
      ctx.out.flush();
      where.push_back({it->replica + " attempt " + std::to_string(it->attempt), StackWhere(dump)});
      it = waiting.erase(it);
    }
    if (waiting.empty()) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string names;
      for (const Waiting& w : waiting) names += (names.empty() ? "" : ", ") + w.replica;
      ctx.err << "cohort: no stacks came from " << names << " within "
              << cohort::FormatDuration(
                     std::chrono::duration_cast<std::chrono::milliseconds>(kStacksWait))
              << " (its agent may be gone, or the replica ended meanwhile)\n";
      print_where();
      return kExitJobFailed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  print_where();
  return kExitOk;
}

int Delete(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() != 1) {
    return UsageError(ctx.err, "delete", "delete needs one JOB or ARRAY");
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  const std::string& name = args.positionals[0];
  Status deleted = client->DeleteJob(name);
  if (deleted.ok()) {
    ctx.out << "job " << name << " deleted\n";
    return kExitOk;
  }
  if (deleted.code() != StatusCode::kNotFound) return Fail(ctx.err, deleted);
  // Not a job: the array of that name, each of its tasks once every one has ended.
  auto tasks = ListArrayTasks(*client, name);
  if (!tasks.ok()) return Fail(ctx.err, tasks.status());
  if (tasks->empty()) return Fail(ctx.err, NoJobOrArray(name));
  std::string running;
  for (const wire::JobInfoT& task : *tasks) {
    if (IsTerminal(task.state)) continue;
    running +=
        (running.empty() ? "" : ", ") + task.name + " (" + wire::EnumNameJobState(task.state) + ")";
  }
  if (!running.empty()) {
    return Fail(ctx.err, FailedPrecondition("array " + name + ": " + running +
                                            " not finished: cancel it first (`cohort cancel " +
                                            name + "`)"));
  }
  size_t done = 0;
  for (const wire::JobInfoT& task : *tasks) {
    if (Status one = client->DeleteJob(task.name); !one.ok()) {
      return Fail(ctx.err, one.WithContext("array " + name + ": " + std::to_string(done) + " of " +
                                           std::to_string(tasks->size()) + " tasks deleted, then " +
                                           task.name));
    }
    ++done;
  }
  ctx.out << "array " << name << " deleted (" << done << " tasks)\n";
  return kExitOk;
}

int Checkpoint(const ParsedArgs& args, const Context& ctx) {
  std::string dir;
  if (args.Has("--job")) {
    if (!args.positionals.empty()) {
      return UsageError(ctx.err, "checkpoint", "give either DIR or --job JOB, not both");
    }
    auto client = ConnectClient(ctx);
    if (!client.ok()) return Fail(ctx.err, client.status());
    auto job = client->GetJob(args.Get("--job"));
    if (!job.ok()) return Fail(ctx.err, job.status());
    if (job->output_dir.empty()) {
      ctx.err << "cohort: job " << job->name << " has no output directory\n";
      return kExitJobFailed;
    }
    dir = CheckpointDir(job->output_dir, job->trial_id);
  } else if (args.positionals.size() == 1) {
    dir = args.positionals[0];
  } else {
    return UsageError(ctx.err, "checkpoint", "checkpoint needs DIR or --job JOB");
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();

  auto inventory = InspectCheckpoints(dir);
  if (!inventory.ok()) {
    ctx.err << "cohort: " << inventory.status().message() << "\n";
    if (args.Has("--job") && inventory.status().code() == StatusCode::kNotFound) {
      ctx.err << "cohort: the job has saved nothing there yet, or its output dir is not mounted on "
                 "this host (checkpoint reads the files where it runs: run it on a node)\n";
    }
    return inventory.status().code() == StatusCode::kNotFound ? kExitJobFailed : kExitUsage;
  }
  const std::vector<CheckpointEntry>& entries = inventory->checkpoints;
  const std::string& restore = inventory->restore;
  // A stock script's own checkpoints (epoch_2.pt, checkpoint-500/): it resumes from them by its
  // own rule, Cohort restores none; and those the agent set aside as torn before a restart.
  const ScriptCheckpointInventory script = InspectScriptCheckpoints(dir);
  std::string script_newest;  // the newest not torn
  for (const ScriptCheckpoint& c : script.checkpoints) {
    if (c.torn.empty()) script_newest = c.path;
  }

  if (args.Has("--json")) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : entries) {
      list.push_back({{"name", e.name},
                      {"step", e.step},
                      {"files", e.files},
                      {"bytes", e.bytes},
                      {"valid", e.valid},
                      {"error", e.error}});
    }
    auto script_list = [](const std::vector<ScriptCheckpoint>& checkpoints) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& c : checkpoints) {
        out.push_back({{"path", c.path},
                       {"folder", c.folder},
                       {"bytes", c.bytes},
                       {"modified_ms", c.modified_ms},
                       {"torn", c.torn}});
      }
      return out;
    };
    ctx.out << nlohmann::json{{"dir", dir},
                              {"checkpoints", std::move(list)},
                              {"restore", restore},
                              {"script_checkpoints", script_list(script.checkpoints)},
                              {"script_newest", script_newest},
                              {"set_aside", script_list(script.set_aside)},
                              {"script_walk_complete", !script.stopped}}
                   .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
            << "\n";
  } else {
    const bool script_only = entries.empty() && !script.checkpoints.empty();
    if (script_only) {
      ctx.out << "Checkpoints in " << dir << ": none of Cohort's (ckpt-<step>/)\n";
    } else {
      ctx.out << "Checkpoints in " << dir << ":\n";
      Table table({"CHECKPOINT", "STEP", "FILES", "BYTES", "STATE"});
      for (const auto& e : entries) {
        table.AddRow({e.name, e.step < 0 ? "-" : std::to_string(e.step), std::to_string(e.files),
                      std::to_string(e.bytes), e.valid ? "valid" : "INVALID: " + e.error});
      }
      if (entries.empty()) {
        ctx.out << "  (none)\n";
      } else {
        table.Print(ctx.out);
      }
      ctx.out << "\nRestore would use: " << (restore.empty() ? "nothing (start fresh)" : restore)
              << "\n";
    }
    auto print_script = [&](const std::vector<ScriptCheckpoint>& checkpoints) {
      Table table({"PATH", "BYTES", "MODIFIED", "STATE"});
      for (const auto& c : checkpoints) {
        table.AddRow({c.path + (c.folder ? "/" : ""), std::to_string(c.bytes),
                      FormatTime(c.modified_ms), c.torn.empty() ? "ok" : "TORN: " + c.torn});
      }
      table.Print(ctx.out);
    };
    if (!script.checkpoints.empty()) {
      ctx.out << "\nThe script's own checkpoints (it resumes from them by its own rule; Cohort "
                 "restores none):\n";
      print_script(script.checkpoints);
      ctx.out << "Newest not torn: " << (script_newest.empty() ? "none" : script_newest) << "\n";
    }
    if (!script.set_aside.empty()) {
      ctx.out << "\nSet aside as torn before a restart, in " << dir << "/" << kTornCheckpointsDir
              << "/:\n";
      print_script(script.set_aside);
    }
    if (script.stopped) {
      ctx.out << "\n(looked at the first " << kScriptCheckpointMaxEntries
              << " entries only; the rest is not listed)\n";
    }
  }
  return restore.empty() && script_newest.empty() ? kExitJobFailed : kExitOk;
}

int Metrics(const ParsedArgs& args, const Context& ctx) {
  return ShowOne<wire::JobMetricsT>(
      args, ctx, "metrics", "JOB", &CoordinatorClient::GetJobMetrics, JobMetricsToJson,
      [](const wire::JobMetricsT& m, std::ostream& out) {
        if (m.points.empty()) {
          out << "job " << m.job << " has reported no metrics\n";
          return;
        }
        // One row per step (in the order steps first arrived), one column per tag.
        std::vector<std::string> tags;
        std::vector<int64_t> steps;
        std::map<int64_t, std::map<std::string, double>> rows;
        for (const auto& p : m.points) {
          if (!p) continue;
          if (std::find(tags.begin(), tags.end(), p->tag) == tags.end()) tags.push_back(p->tag);
          if (!rows.count(p->step)) steps.push_back(p->step);
          rows[p->step][p->tag] = p->value;
        }
        std::vector<std::string> header = {"STEP"};
        header.insert(header.end(), tags.begin(), tags.end());
        Table table(header);
        for (int64_t step : steps) {
          std::vector<std::string> row = {std::to_string(step)};
          for (const std::string& tag : tags) {
            auto it = rows[step].find(tag);
            row.push_back(it == rows[step].end() ? "-" : FormatNumber(it->second));
          }
          table.AddRow(std::move(row));
        }
        table.Print(out);
      });
}

}  // namespace cohort::cli
