#include "cli/verbs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli.h"
#include "cli/job_view.h"
#include "cli/output.h"
#include "common/checkpoint.h"
#include "common/cluster_env.h"
#include "common/curve_keys.h"
#include "common/job_spec.h"
#include "common/spec_limit.h"
#include "common/study_spec.h"

namespace cohort::cli {
namespace {

using Clock = std::chrono::steady_clock;

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kUnavailable:
      return kExitUnreachable;
    case StatusCode::kUnauthenticated:
      return kExitRefused;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return kExitUsage;
    default:
      return kExitJobFailed;
  }
}

int Fail(std::ostream& err, const Status& status) {
  err << "cohort: " << status.ToString() << "\n";
  return ExitCodeFor(status);
}

StatusOr<CoordinatorClient> ConnectClient(const Context& ctx) {
  return CoordinatorClient::Connect(ctx.options);
}

StatusOr<std::string> ReadSpecText(const std::string& file) {
  std::stringstream buffer;
  if (file == "-") {
    buffer << std::cin.rdbuf();
    return buffer.str();
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) return ErrnoStatus("cannot read job file " + file, errno);
  buffer << in.rdbuf();
  if (in.bad()) return ErrnoStatus("cannot read job file " + file, errno);
  return buffer.str();
}

// The spec size the CLI checks before sending: COHORT_MAX_SPEC_SIZE, else the coordinator's
// default limit.
StatusOr<uint64_t> SpecSizeLimit() {
  const char* env = std::getenv("COHORT_MAX_SPEC_SIZE");
  if (env == nullptr || *env == '\0') return kDefaultMaxSpecBytes;
  auto limit = ParseByteSize(env);
  if (!limit.ok()) return limit.status().WithContext("COHORT_MAX_SPEC_SIZE");
  return limit;
}

std::string StateLine(const wire::JobInfoT& job) {
  std::string line = "job " + job.name + ": " + wire::EnumNameJobState(job.state);
  if (!job.message.empty()) line += " (" + job.message + ")";
  return line;
}

int ExitForFinalState(const wire::JobInfoT& job) {
  return job.state == wire::JobState::SUCCEEDED ? kExitOk : kExitJobFailed;
}

// The live view's options from --replica/--all (default: the chief's output).
WatchOptions WatchOptionsFrom(const ParsedArgs& args, const Context& ctx, bool terminal) {
  WatchOptions options;
  options.all = args.Has("--all");
  if (args.Has("--replica")) options.replicas = {args.Get("--replica")};
  options.redraw = terminal;
  options.unreachable_limit =
      std::max<std::chrono::milliseconds>(ctx.options.timeout * 6, std::chrono::seconds(30));
  return options;
}

// Prints the study's name; with --wait follows it until it ends.
int FollowStudy(CoordinatorClient& client, const std::string& name, const ParsedArgs& args,
                const Context& ctx) {
  ctx.out << name << std::endl;
  if (!args.Has("--wait")) return kExitOk;

  // Follow: a progress line whenever the state or the number of finished trials changes.
  std::string last_progress;
  auto last_reply = Clock::now();
  auto unreachable_limit =
      std::max<std::chrono::milliseconds>(ctx.options.timeout * 6, std::chrono::seconds(30));
  while (true) {
    auto current = client.GetStudy(name);
    if (!current.ok()) {
      if (current.status().code() == StatusCode::kUnavailable &&
          Clock::now() - last_reply < unreachable_limit) {
        continue;
      }
      return Fail(ctx.err, current.status());
    }
    last_reply = Clock::now();
    int finished = 0;
    int active = 0;
    for (const auto& t : current->trials) {
      if (!t) continue;
      if (t->state == "ACTIVE" || t->state == "REQUESTED" || t->state == "STOPPING") {
        ++active;
      } else {
        ++finished;
      }
    }
    std::string progress = "study " + name + ": " + current->state + ", " +
                           std::to_string(finished) + " of " + std::to_string(current->max_trials) +
                           " trials done, " + std::to_string(active) + " running" +
                           (current->best_trial.empty() ? "" : ", best " + current->best_trial);
    if (progress != last_progress) {
      ctx.err << progress << std::endl;
      last_progress = progress;
    }
    if (IsStudyTerminal(current->state)) {
      PrintStudy(*current, ctx.out);
      return current->state == "SUCCEEDED" ? kExitOk : kExitJobFailed;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// What submit and tune share: the one FILE argument ("-": standard input) is read and checked with
// `parse` before anything is sent, then sent with `send`; on success `then` runs with the client,
// the parsed spec and the coordinator's reply. `kind` ("job", "study") names the spec in errors.
template <typename Spec, typename Reply>
int SubmitSpecFile(
    const ParsedArgs& args, const Context& ctx, const std::string& verb, const std::string& kind,
    StatusOr<Spec> (*parse)(std::string_view, std::string_view),
    const std::function<StatusOr<Reply>(CoordinatorClient&, const std::string&)>& send,
    const std::function<int(CoordinatorClient&, const Spec&, const Reply&)>& then) {
  if (args.positionals.size() != 1) return UsageError(ctx.err, verb, verb + " needs one FILE");
  const std::string& file = args.positionals[0];
  auto text = ReadSpecText(file);
  if (!text.ok()) return UsageError(ctx.err, verb, text.status().message());
  auto limit = SpecSizeLimit();
  if (!limit.ok()) return UsageError(ctx.err, verb, limit.status().message());
  Status fits = CheckSpecSize(kind + " spec " + file, text->size(), *limit,
                              "the default --max-spec-size of the coordinator; "
                              "COHORT_MAX_SPEC_SIZE raises it here");
  if (!fits.ok()) {
    ctx.err << "cohort: " << fits.message() << "\n";
    return kExitUsage;
  }
  auto spec = parse(*text, file == "-" ? "<stdin>" : file);
  if (!spec.ok()) {
    ctx.err << "cohort: invalid " << kind << " spec: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto reply = send(*client, *text);
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kInvalidArgument) {
      ctx.err << "cohort: the coordinator rejected the " << kind
              << " spec: " << reply.status().message() << "\n";
      return kExitUsage;
    }
    return Fail(ctx.err, reply.status());
  }
  return then(*client, *spec, *reply);
}

// What status, list, nodes and trials share: `argument` ("JOB", "STUDY") is the one positional
// the verb needs, or "" for none; `fetch` asks the coordinator; the reply is printed as JSON with
// --json (`to_json`), else for people (`print`).
template <typename Reply>
int ShowVerb(const ParsedArgs& args, const Context& ctx, const std::string& verb,
             const std::string& argument,
             const std::function<StatusOr<Reply>(CoordinatorClient&)>& fetch,
             const std::function<nlohmann::json(const Reply&)>& to_json,
             void (*print)(const Reply&, std::ostream&)) {
  if (argument.empty() && !args.positionals.empty()) {
    return UsageError(ctx.err, verb, verb + " takes no arguments");
  }
  if (!argument.empty() && args.positionals.size() != 1) {
    return UsageError(ctx.err, verb, verb + " needs one " + argument);
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto reply = fetch(*client);
  if (!reply.ok()) return Fail(ctx.err, reply.status());
  if (args.Has("--json")) {
    ctx.out << to_json(*reply).dump(2) << "\n";
  } else {
    print(*reply, ctx.out);
  }
  return kExitOk;
}

// What list and nodes share: every item `list` returns, as a JSON array with --json.
template <typename Item>
int ShowAll(const ParsedArgs& args, const Context& ctx, const std::string& verb,
            StatusOr<std::vector<Item>> (CoordinatorClient::*list)(),
            nlohmann::json (*to_json)(const Item&),
            void (*print)(const std::vector<Item>&, std::ostream&)) {
  return ShowVerb<std::vector<Item>>(
      args, ctx, verb, "", [&](CoordinatorClient& client) { return (client.*list)(); },
      [&](const std::vector<Item>& items) {
        nlohmann::json array = nlohmann::json::array();
        for (const Item& item : items) array.push_back(to_json(item));
        return array;
      },
      print);
}

// `cohort logs JOB --dump`: the stack dumps the agents took of one replica (every attempt, each
// after a header line, or one), read whole; nothing to follow.
int ShowStackDumps(CoordinatorClient& client, const std::string& job, const std::string& replica,
                   int attempt, std::ostream& out, std::ostream& err) {
  uint64_t offset = 0;
  while (true) {
    auto data = client.ReadLogs(job, replica, offset, attempt, 1u << 20, /*with_times=*/false,
                                /*dump=*/true);
    if (!data.ok()) return Fail(err, data.status());
    out.write(reinterpret_cast<const char*>(data->data.data()),
              static_cast<std::streamsize>(data->data.size()));
    offset = std::max<uint64_t>(data->next_offset, offset + data->data.size());
    if (data->data.empty() || data->complete) break;
  }
  out.flush();
  if (offset == 0) {
    err << "cohort: no stack dumps of " << job << " " << replica
        << " (the agents take them when the watchdog finds the job hung)\n";
  }
  return kExitOk;
}

}  // namespace

int Submit(const ParsedArgs& args, const Context& ctx) {
  std::vector<std::string> warnings;
  return SubmitSpecFile<JobSpec, std::string>(
      args, ctx, "submit", "job", ParseJobSpec,
      [&](CoordinatorClient& client, const std::string& text) {
        return client.Submit(text, &warnings);
      },
      [&](CoordinatorClient& client, const JobSpec&, const std::string& name) {
        for (const std::string& w : warnings) ctx.err << "cohort: warning: " << w << "\n";
        ctx.out << name << std::endl;
        if (!args.Has("--wait")) return kExitOk;
        // The job's name alone goes to stdout; the live view to stderr.
        return WatchJob(client, name, WatchOptionsFrom(args, ctx, ctx.err_is_terminal), ctx.err,
                        ctx.err);
      });
}

int ShowJob(const ParsedArgs& args, const Context& ctx) {
  return ShowVerb<wire::JobInfoT>(
      args, ctx, "status", "JOB",
      [&](CoordinatorClient& client) { return client.GetJob(args.positionals[0]); }, JobToJson,
      PrintJob);
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
  return WatchJob(*client, args.positionals[0], WatchOptionsFrom(args, ctx, ctx.out_is_terminal),
                  ctx.out, ctx.err);
}

int Cancel(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() != 1) return UsageError(ctx.err, "cancel", "cancel needs one JOB");
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto job = client->Cancel(args.positionals[0]);
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

int Nodes(const ParsedArgs& args, const Context& ctx) {
  return ShowAll(args, ctx, "nodes", &CoordinatorClient::ListNodes, NodeToJson, PrintNodes);
}

int Queues(const ParsedArgs& args, const Context& ctx) {
  return ShowAll(args, ctx, "queues", &CoordinatorClient::ListQueues, QueueToJson, PrintQueues);
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
    return inventory.status().code() == StatusCode::kNotFound ? kExitJobFailed : kExitUsage;
  }
  const std::vector<CheckpointEntry>& entries = inventory->checkpoints;
  const std::string& restore = inventory->restore;

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
    ctx.out << nlohmann::json{{"dir", dir}, {"checkpoints", std::move(list)}, {"restore", restore}}
                   .dump(2)
            << "\n";
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
  return restore.empty() ? kExitJobFailed : kExitOk;
}

int Keygen(const ParsedArgs& args, const Context& ctx) {
  if (!args.positionals.empty()) return UsageError(ctx.err, "keygen", "keygen takes no arguments");
  std::string dir = args.Get("--dir", DefaultClientKeyDir());
  std::string name = args.Get("--name", "client");
  if (name.empty() || name.find('/') != std::string::npos) {
    return UsageError(ctx.err, "keygen", "--name: must be a plain file name");
  }
  auto keys = GenerateCurveKeyPair();
  if (!keys.ok()) return Fail(ctx.err, keys.status());
  Status written = WriteCurveKeyFiles(dir, name, *keys);
  if (!written.ok()) {
    ctx.err << "cohort: " << written.ToString() << "\n";
    return kExitJobFailed;
  }
  ctx.out << "wrote " << dir << "/" << name << ".key (secret, keep it) and " << dir << "/" << name
          << ".pub\npublic-key = " << keys->public_key << "\n";
  return kExitOk;
}

int Tune(const ParsedArgs& args, const Context& ctx) {
  return SubmitSpecFile<StudySpec, wire::StudyInfoT>(
      args, ctx, "tune", "study", ParseStudySpec,
      [](CoordinatorClient& client, const std::string& text) { return client.SubmitStudy(text); },
      [&](CoordinatorClient& client, const StudySpec& spec, const wire::StudyInfoT& study) {
        return FollowStudy(client, study.name.empty() ? spec.name : study.name, args, ctx);
      });
}

int Trials(const ParsedArgs& args, const Context& ctx) {
  return ShowVerb<wire::StudyInfoT>(
      args, ctx, "trials", "STUDY",
      [&](CoordinatorClient& client) { return client.GetStudy(args.positionals[0]); }, StudyToJson,
      PrintStudy);
}

namespace {

// A metric value as reported: shortest round-trip.
std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Hours with 4 decimals ("0.0012"): short jobs still show.
std::string FormatHours(double h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", h);
  return buf;
}

}  // namespace

int Metrics(const ParsedArgs& args, const Context& ctx) {
  return ShowVerb<wire::JobMetricsT>(
      args, ctx, "metrics", "JOB",
      [&](CoordinatorClient& client) { return client.GetJobMetrics(args.positionals[0]); },
      [](const wire::JobMetricsT& m) {
        nlohmann::json points = nlohmann::json::array();
        for (const auto& p : m.points) {
          if (!p) continue;
          points.push_back({{"step", p->step},
                            {"time_ms", p->time_ms},
                            {"tag", p->tag},
                            {"value", p->value},
                            {"replica", p->replica}});
        }
        return nlohmann::json{{"job", m.job}, {"points", std::move(points)}};
      },
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

int Usage(const ParsedArgs& args, const Context& ctx) {
  int64_t since_ms = 0;
  if (args.Has("--since")) {
    int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    auto since = ParseSince(args.Get("--since"), now_ms);
    if (!since.ok()) return UsageError(ctx.err, "usage", since.status().message());
    since_ms = *since;
  }
  return ShowVerb<std::vector<wire::UsageRowT>>(
      args, ctx, "usage", "",
      [&](CoordinatorClient& client) {
        return client.GetUsage(args.Get("--user"), args.Get("--queue"), since_ms);
      },
      [](const std::vector<wire::UsageRowT>& rows) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : rows) {
          out.push_back({{"user", r.user},
                         {"queue", r.queue},
                         {"jobs", r.jobs},
                         {"failed", r.failed},
                         {"gpu_hours", r.gpu_hours},
                         {"cpu_hours", r.cpu_hours}});
        }
        return out;
      },
      [](const std::vector<wire::UsageRowT>& rows, std::ostream& out) {
        Table table({"USER", "QUEUE", "JOBS", "FAILED", "GPU-HOURS", "CPU-HOURS"});
        wire::UsageRowT total;
        for (const auto& r : rows) {
          table.AddRow({r.user, r.queue, std::to_string(r.jobs), std::to_string(r.failed),
                        FormatHours(r.gpu_hours), FormatHours(r.cpu_hours)});
          total.jobs += r.jobs;
          total.failed += r.failed;
          total.gpu_hours += r.gpu_hours;
          total.cpu_hours += r.cpu_hours;
        }
        if (rows.size() != 1) {
          table.AddRow({"TOTAL", "", std::to_string(total.jobs), std::to_string(total.failed),
                        FormatHours(total.gpu_hours), FormatHours(total.cpu_hours)});
        }
        table.Print(out);
      });
}

}  // namespace cohort::cli
