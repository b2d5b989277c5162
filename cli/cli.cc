#include "cli/cli.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/output.h"
#include "common/checkpoint.h"
#include "common/client.h"
#include "common/cluster_env.h"
#include "common/curve_keys.h"
#include "common/job_spec.h"
#include "common/study_spec.h"

namespace cohort::cli {
namespace {

using Clock = std::chrono::steady_clock;

// ---- argument parsing ------------------------------------------------------------------------

struct FlagSpec {
  std::string name;        // "--replica"
  bool takes_value = false;
  std::string alias;       // "-f", or empty
};

struct ParsedArgs {
  std::map<std::string, std::string> values;  // flag -> value ("" for booleans)
  std::vector<std::string> positionals;
  bool Has(const std::string& flag) const { return values.count(flag) > 0; }
  std::string Get(const std::string& flag, const std::string& fallback = "") const {
    auto it = values.find(flag);
    return it == values.end() ? fallback : it->second;
  }
};

const std::vector<FlagSpec>& GlobalFlags() {
  static const std::vector<FlagSpec> flags = {
      {"--coordinator", true, ""}, {"--insecure", false, ""}, {"--timeout", true, ""},
      {"--key", true, ""},         {"--server-key", true, ""}};
  return flags;
}

// Parses `args` against `flags` (plus the global flags and --help): "--flag value",
// "--flag=value", "-f". "--" ends the flags.
StatusOr<ParsedArgs> Parse(const std::vector<std::string>& args, std::vector<FlagSpec> flags) {
  for (const auto& g : GlobalFlags()) flags.push_back(g);
  flags.push_back({"--help", false, "-h"});
  ParsedArgs parsed;
  bool only_positionals = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (only_positionals || arg.size() < 2 || arg[0] != '-') {
      parsed.positionals.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positionals = true;
      continue;
    }
    std::string name = arg;
    std::optional<std::string> inline_value;
    if (auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    const FlagSpec* spec = nullptr;
    for (const auto& f : flags) {
      if (f.name == name || (!f.alias.empty() && f.alias == name)) spec = &f;
    }
    if (spec == nullptr) return InvalidArgument("unknown option " + name);
    if (!spec->takes_value) {
      if (inline_value) return InvalidArgument(spec->name + " takes no value");
      parsed.values[spec->name] = "";
      continue;
    }
    if (inline_value) {
      parsed.values[spec->name] = *inline_value;
    } else if (i + 1 < args.size()) {
      parsed.values[spec->name] = args[++i];
    } else {
      return InvalidArgument(spec->name + " needs a value");
    }
  }
  return parsed;
}

// ---- help texts --------------------------------------------------------------------------------

constexpr const char* kMainUsage = R"(usage: cohort [--coordinator tcp://HOST:7400] [--insecure] [--timeout 5s] VERB ...

Launch and watch training jobs on a Cohort cluster.

Verbs:
  submit FILE [--wait]        validate and submit a job file; prints the job name
  status JOB [--json]         a job's state, replicas and events
  list [--json]               all jobs
  logs JOB [--replica ROLE-INDEX] [--attempt N] [--follow]
                              a replica's output (default chief-0)
  cancel JOB [--wait]         cancel a job
  nodes [--json]              registered agents and their capacity
  checkpoint DIR|--job JOB [--json]
                              the checkpoints under a directory, verified, and the one a
                              restart would restore
  keygen [--dir DIR] [--name NAME]
                              create a CURVE key pair for this client (NAME.key, NAME.pub)
  tune FILE [--wait]          validate and submit a hyperparameter study; prints its name
  trials STUDY [--json]       a study's trials and its best trial

Global options:
  --coordinator ENDPOINT      coordinator client endpoint (env COHORT_COORDINATOR;
                              default tcp://127.0.0.1:7400)
  --insecure                  plaintext ZeroMQ, for local use (env COHORT_INSECURE=1)
  --timeout DURATION          how long to wait for each reply (default 5s)
  --key FILE                  this client's CURVE key pair (env COHORT_KEY;
                              default ~/.config/cohort/client.key)
  --server-key FILE           the coordinator's public key (env COHORT_SERVER_KEY;
                              default ~/.config/cohort/coordinator.pub)

Exit codes: 0 success, 1 the job failed or was cancelled, 2 bad usage or invalid spec,
3 coordinator unreachable. `cohort VERB --help` describes a verb.
)";

const std::map<std::string, std::string>& VerbUsage() {
  static const std::map<std::string, std::string> usage = {
      {"submit", R"(usage: cohort submit FILE [--wait]

Validates the job file (YAML; see DESIGN.md) and submits it. Prints the job name on stdout.
FILE may be - for standard input.
  --wait    follow the job's state (on stderr) until it ends; exit 0 only if it SUCCEEDED,
            1 if it FAILED or was CANCELLED
Exit 2 when the file is invalid; the message names the offending field.
)"},
      {"status", R"(usage: cohort status JOB [--json]

Shows the job's state, message, times, restarts, each replica's node, GPUs, state, attempt and
exit code, and the job's events with their reasons.
  --json    print the job as JSON
)"},
      {"list", R"(usage: cohort list [--json]

Lists every job the coordinator knows, oldest first.
  --json    print a JSON array of jobs
)"},
      {"logs", R"(usage: cohort logs JOB [--replica ROLE-INDEX] [--attempt N] [--follow]

Prints a replica's combined stdout and stderr as the coordinator holds it.
  --replica ROLE-INDEX   which replica (default chief-0), e.g. worker-1
  --attempt N            one attempt only (default: every attempt, each after a header line)
  --follow, -f           keep printing new output until the replica has finished
)"},
      {"cancel", R"(usage: cohort cancel JOB [--wait]

Asks the coordinator to cancel the job; prints its state.
  --wait    wait until the job has ended and print its final state
)"},
      {"nodes", R"(usage: cohort nodes [--json]

Lists the registered agents: address, state, GPUs/CPUs/memory used of total, replicas, last
heartbeat.
  --json    print a JSON array of nodes
)"},
      {"checkpoint", R"(usage: cohort checkpoint DIR [--json]
       cohort checkpoint --job JOB [--json]

Lists the checkpoints (ckpt-<step>/) under DIR, or under the job's checkpoint directory
(<output_dir>/checkpoints/, asked from the coordinator), verifies each against its MANIFEST (sizes
and checksums), and names the one a restarted replica would restore: the newest that verifies.
Reads the files directly, so DIR must be visible from this host. Exit 0 when a valid checkpoint
exists, 1 when none does.
  --json    print {"dir", "checkpoints": [{name, step, files, bytes, valid, error}], "restore"}
)"},
      {"keygen", R"(usage: cohort keygen [--dir DIR] [--name NAME]

Creates a CURVE key pair: DIR/NAME.key (both halves, mode 0600) and DIR/NAME.pub (public half).
Defaults: DIR ~/.config/cohort, NAME client. Give NAME.pub to the cluster admin, who puts it in
the coordinator's clients/ key directory; put the coordinator's coordinator.pub next to your key
(or point --server-key at it). Existing files are never overwritten.
)"},
      {"tune", R"(usage: cohort tune FILE [--wait]

Validates a study file (YAML; see common/study_spec.h) and submits it. Prints the study name.
FILE may be - for standard input.
  --wait    follow the study (progress on stderr) until it ends, then print the trials table and
            the best trial; exit 0 only if the study SUCCEEDED, 1 if it FAILED or was CANCELLED
Exit 2 when the file is invalid; the message names the offending field.
)"},
      {"trials", R"(usage: cohort trials STUDY [--json]

Shows a study's state, every trial (state, parameters, final metric, steps reported, job) and the
best trial so far (marked *).
  --json    print the study as JSON
)"},
  };
  return usage;
}

// ---- helpers -----------------------------------------------------------------------------------

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kUnavailable:
      return kExitUnreachable;
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

int UsageError(std::ostream& err, const std::string& verb, const std::string& message) {
  err << "cohort: " << message << "\n";
  auto it = VerbUsage().find(verb);
  err << (it != VerbUsage().end() ? it->second : std::string(kMainUsage));
  return kExitUsage;
}

struct Context {
  ClientOptions options;
  std::ostream& out;
  std::ostream& err;
};

// Applies global flags found by a verb's parse to the options.
Status ApplyGlobals(const ParsedArgs& args, ClientOptions& options) {
  if (args.Has("--coordinator")) options.endpoint = args.Get("--coordinator");
  if (args.Has("--insecure")) options.insecure = true;
  if (args.Has("--key")) options.key_file = args.Get("--key");
  if (args.Has("--server-key")) options.server_key_file = args.Get("--server-key");
  if (args.Has("--timeout")) {
    auto timeout = ParseDuration(args.Get("--timeout"));
    if (!timeout.ok()) return timeout.status().WithContext("--timeout");
    if (timeout->count() <= 0) return InvalidArgument("--timeout: must be positive");
    options.timeout = *timeout;
  }
  return Status::Ok();
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

std::string StateLine(const wire::JobInfoT& job) {
  std::string line = "job " + job.name + ": " + wire::EnumNameJobState(job.state);
  if (!job.message.empty()) line += " (" + job.message + ")";
  return line;
}

int ExitForFinalState(const wire::JobInfoT& job) {
  return job.state == wire::JobState::SUCCEEDED ? kExitOk : kExitJobFailed;
}

// Follows a job until it ends, printing each state change on err.
int FollowJob(CoordinatorClient& client, const std::string& name, const Context& ctx) {
  auto job = client.WaitForJob(
      name, [](const wire::JobInfoT& j) { return IsTerminal(j.state); },
      Clock::time_point::max(), std::chrono::milliseconds(500),
      [&](const wire::JobInfoT& j) { ctx.err << StateLine(j) << std::endl; },
      std::max<std::chrono::milliseconds>(ctx.options.timeout * 6, std::chrono::seconds(30)));
  if (!job.ok()) return Fail(ctx.err, job.status());
  return ExitForFinalState(*job);
}

// ---- verbs -------------------------------------------------------------------------------------

int Submit(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() != 1) return UsageError(ctx.err, "submit", "submit needs one FILE");
  const std::string& file = args.positionals[0];
  auto text = ReadSpecText(file);
  if (!text.ok()) return UsageError(ctx.err, "submit", text.status().message());
  auto spec = ParseJobSpec(*text, file == "-" ? "<stdin>" : file);
  if (!spec.ok()) {
    ctx.err << "cohort: invalid job spec: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto name = client->Submit(*text);
  if (!name.ok()) {
    if (name.status().code() == StatusCode::kInvalidArgument) {
      ctx.err << "cohort: the coordinator rejected the job spec: " << name.status().message()
              << "\n";
      return kExitUsage;
    }
    return Fail(ctx.err, name.status());
  }
  ctx.out << *name << std::endl;
  if (!args.Has("--wait")) return kExitOk;
  return FollowJob(*client, *name, ctx);
}

int Status_(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() != 1) return UsageError(ctx.err, "status", "status needs one JOB");
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto job = client->GetJob(args.positionals[0]);
  if (!job.ok()) return Fail(ctx.err, job.status());
  if (args.Has("--json")) {
    ctx.out << JobToJson(*job).dump(2) << "\n";
  } else {
    PrintJob(*job, ctx.out);
  }
  return kExitOk;
}

int List(const ParsedArgs& args, const Context& ctx) {
  if (!args.positionals.empty()) return UsageError(ctx.err, "list", "list takes no arguments");
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto jobs = client->ListJobs();
  if (!jobs.ok()) return Fail(ctx.err, jobs.status());
  if (args.Has("--json")) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& job : *jobs) array.push_back(JobToJson(job));
    ctx.out << array.dump(2) << "\n";
  } else {
    PrintJobList(*jobs, ctx.out);
  }
  return kExitOk;
}

int Logs(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() != 1) return UsageError(ctx.err, "logs", "logs needs one JOB");
  const std::string& job = args.positionals[0];
  std::string replica = args.Get("--replica", "chief-0");
  int attempt = -1;
  if (args.Has("--attempt")) {
    try {
      size_t used = 0;
      attempt = std::stoi(args.Get("--attempt"), &used);
      if (used != args.Get("--attempt").size() || attempt < 0) throw std::invalid_argument("");
    } catch (const std::exception&) {
      return UsageError(ctx.err, "logs", "--attempt: expected a non-negative integer");
    }
  }
  bool follow = args.Has("--follow");
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  uint64_t offset = 0;
  auto last_reply = Clock::now();
  auto unreachable_limit =
      std::max<std::chrono::milliseconds>(ctx.options.timeout * 6, std::chrono::seconds(30));
  while (true) {
    auto data = client->ReadLogs(job, replica, offset, attempt);
    if (!data.ok()) {
      // While following, ride out a coordinator restart; the offset makes the resume exact.
      if (follow && data.status().code() == StatusCode::kUnavailable &&
          Clock::now() - last_reply < unreachable_limit) {
        continue;
      }
      return Fail(ctx.err, data.status());
    }
    last_reply = Clock::now();
    if (!data->data.empty()) {
      ctx.out.write(reinterpret_cast<const char*>(data->data.data()),
                    static_cast<std::streamsize>(data->data.size()));
      ctx.out.flush();
    }
    offset = std::max<uint64_t>(data->next_offset, offset + data->data.size());
    if (!data->data.empty()) continue;  // more may be waiting right now
    if (data->complete || !follow) return kExitOk;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
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
  if (!args.positionals.empty()) return UsageError(ctx.err, "nodes", "nodes takes no arguments");
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto nodes = client->ListNodes();
  if (!nodes.ok()) return Fail(ctx.err, nodes.status());
  if (args.Has("--json")) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& node : *nodes) array.push_back(NodeToJson(node));
    ctx.out << array.dump(2) << "\n";
  } else {
    PrintNodes(*nodes, ctx.out);
  }
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

  struct Entry {
    std::string name;
    int64_t step = -1;
    size_t files = 0;
    uint64_t bytes = 0;
    bool valid = false;
    std::string error;
  };
  std::vector<Entry> entries;
  std::error_code ec;
  for (const auto& item : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = item.path().filename().string();
    if (name.rfind("ckpt-", 0) != 0 || !item.is_directory()) continue;
    Entry entry;
    entry.name = name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) {
      entry.error = "staging directory (uncommitted; ignored)";
    } else {
      auto manifest = ReadCheckpointManifest(item.path().string());
      if (manifest.ok()) {
        entry.step = manifest->step;
        entry.files = manifest->files.size();
        for (const auto& f : manifest->files) entry.bytes += f.size;
        Status verified = VerifyCheckpoint(item.path().string());
        entry.valid = verified.ok();
        if (!verified.ok()) entry.error = verified.message();
      } else {
        entry.error = manifest.status().message();
      }
    }
    entries.push_back(std::move(entry));
  }
  if (ec) {
    ctx.err << "cohort: cannot list " << dir << ": " << ec.message() << "\n";
    return ec == std::errc::no_such_file_or_directory ? kExitJobFailed : kExitUsage;
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.step != b.step ? a.step < b.step : a.name < b.name;
  });
  auto latest = FindLatestValidCheckpoint(dir);
  std::string restore = latest.ok() ? latest->path : "";

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
  if (args.positionals.size() != 1) return UsageError(ctx.err, "tune", "tune needs one FILE");
  const std::string& file = args.positionals[0];
  auto text = ReadSpecText(file);
  if (!text.ok()) return UsageError(ctx.err, "tune", text.status().message());
  auto spec = ParseStudySpec(*text, file == "-" ? "<stdin>" : file);
  if (!spec.ok()) {
    ctx.err << "cohort: invalid study spec: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto study = client->SubmitStudy(*text);
  if (!study.ok()) {
    if (study.status().code() == StatusCode::kInvalidArgument) {
      ctx.err << "cohort: the coordinator rejected the study spec: " << study.status().message()
              << "\n";
      return kExitUsage;
    }
    return Fail(ctx.err, study.status());
  }
  const std::string name = study->name.empty() ? spec->name : study->name;
  ctx.out << name << std::endl;
  if (!args.Has("--wait")) return kExitOk;

  // Follow: a progress line whenever the state or the number of finished trials changes.
  std::string last_progress;
  auto last_reply = Clock::now();
  auto unreachable_limit =
      std::max<std::chrono::milliseconds>(ctx.options.timeout * 6, std::chrono::seconds(30));
  while (true) {
    auto current = client->GetStudy(name);
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
                           std::to_string(finished) + " of " +
                           std::to_string(current->max_trials) + " trials done, " +
                           std::to_string(active) + " running" +
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

int Trials(const ParsedArgs& args, const Context& ctx) {
  if (args.positionals.size() != 1) return UsageError(ctx.err, "trials", "trials needs one STUDY");
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto study = client->GetStudy(args.positionals[0]);
  if (!study.ok()) return Fail(ctx.err, study.status());
  if (args.Has("--json")) {
    ctx.out << StudyToJson(*study).dump(2) << "\n";
  } else {
    PrintStudy(*study, ctx.out);
  }
  return kExitOk;
}

int NotAvailable(const std::string& verb, const Context& ctx) {
  ctx.err << "cohort: " << verb << " is not available in this build\n";
  return kExitUsage;
}

}  // namespace

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // Global flags come before the verb; they are also accepted after it.
  size_t i = 0;
  std::vector<std::string> globals;
  while (i < args.size() && args[i].size() > 1 && args[i][0] == '-') {
    globals.push_back(args[i]);
    bool takes_value = false;
    for (const auto& g : GlobalFlags()) {
      if (args[i] == g.name && g.takes_value) takes_value = true;
    }
    if (takes_value && i + 1 < args.size()) globals.push_back(args[++i]);
    ++i;
  }
  auto global_args = Parse(globals, {{"--version", false, ""}});
  if (!global_args.ok()) return UsageError(err, "", global_args.status().message());
  if (global_args->Has("--version")) {
    out << "cohort 0.1.0\n";
    return kExitOk;
  }
  if (i >= args.size()) {
    if (global_args->Has("--help")) {
      out << kMainUsage;
      return kExitOk;
    }
    return UsageError(err, "", "no verb given");
  }
  const std::string verb = args[i];
  std::vector<std::string> rest(args.begin() + static_cast<long>(i) + 1, args.end());

  if (verb == "help") {
    if (!rest.empty() && VerbUsage().count(rest[0])) {
      out << VerbUsage().at(rest[0]);
    } else {
      out << kMainUsage;
    }
    return kExitOk;
  }

  static const std::map<std::string, std::vector<FlagSpec>> verb_flags = {
      {"submit", {{"--wait", false, ""}}},
      {"status", {{"--json", false, ""}}},
      {"list", {{"--json", false, ""}}},
      {"logs", {{"--replica", true, ""}, {"--attempt", true, ""}, {"--follow", false, "-f"}}},
      {"cancel", {{"--wait", false, ""}}},
      {"nodes", {{"--json", false, ""}}},
      {"keygen", {{"--dir", true, ""}, {"--name", true, ""}}},
      {"checkpoint", {{"--job", true, ""}, {"--json", false, ""}}},
      {"tune", {{"--wait", false, ""}}},
      {"trials", {{"--json", false, ""}}},
  };
  auto flags = verb_flags.find(verb);
  if (flags == verb_flags.end()) return UsageError(err, "", "unknown verb '" + verb + "'");
  auto parsed = Parse(rest, flags->second);
  if (!parsed.ok()) return UsageError(err, verb, parsed.status().message());
  if (parsed->Has("--help")) {
    out << VerbUsage().at(verb);
    return kExitOk;
  }

  Context ctx{ClientOptionsFromEnvironment(), out, err};
  Status globals_status = ApplyGlobals(*global_args, ctx.options);
  if (globals_status.ok()) globals_status = ApplyGlobals(*parsed, ctx.options);
  if (!globals_status.ok()) return UsageError(err, verb, globals_status.message());

  if (verb == "submit") return Submit(*parsed, ctx);
  if (verb == "status") return Status_(*parsed, ctx);
  if (verb == "list") return List(*parsed, ctx);
  if (verb == "logs") return Logs(*parsed, ctx);
  if (verb == "cancel") return Cancel(*parsed, ctx);
  if (verb == "nodes") return Nodes(*parsed, ctx);
  if (verb == "keygen") return Keygen(*parsed, ctx);
  if (verb == "checkpoint") return Checkpoint(*parsed, ctx);
  if (verb == "tune") return Tune(*parsed, ctx);
  if (verb == "trials") return Trials(*parsed, ctx);
  return NotAvailable(verb, ctx);
}

}  // namespace cohort::cli
