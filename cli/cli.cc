#include "cli/cli.h"

#include <unistd.h>

#include <iostream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/verbs.h"
#include "common/build_version.h"
#include "common/client.h"
#include "common/client_config.h"
#include "common/job_spec.h"
#include "common/nearest_name.h"

namespace cohort::cli {
namespace {

// ---- argument parsing ------------------------------------------------------------------------

struct FlagSpec {
  std::string name;  // "--replica"
  bool takes_value = false;
  std::string alias;     // "-f", or empty
  bool repeats = false;  // may be given more than once: ParsedArgs::All has every value
};

const std::vector<FlagSpec>& GlobalFlags() {
  static const std::vector<FlagSpec> flags = {{"--coordinator", true, ""},
                                              {"--insecure", false, ""},
                                              {"--timeout", true, ""},
                                              {"--key", true, ""},
                                              {"--server-key", true, ""}};
  return flags;
}

// Parses `args` against `flags` (plus the global flags and --help): "--flag value",
// "--flag=value", "-f". "--" ends the flags (ParsedArgs::dashdash says where). A flag that does
// not repeat keeps its last value.
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
      parsed.dashdash = parsed.positionals.size();
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
    // Bundled short flags that take no value: "-it" is "-i -t".
    if (spec == nullptr && arg.size() > 2 && arg[1] != '-') {
      std::vector<const FlagSpec*> bundled;
      for (size_t c = 1; c < arg.size(); ++c) {
        const std::string one = std::string("-") + arg[c];
        const FlagSpec* found = nullptr;
        for (const auto& f : flags) {
          if (f.alias == one && !f.takes_value) found = &f;
        }
        if (found == nullptr) {
          bundled.clear();
          break;
        }
        bundled.push_back(found);
      }
      for (const FlagSpec* f : bundled) parsed.values[f->name] = "";
      if (!bundled.empty()) continue;
    }
    if (spec == nullptr) {
      std::vector<std::string_view> names;
      for (const auto& f : flags) names.push_back(f.name);
      return InvalidArgument("unknown option " + name + DidYouMean(name, names));
    }
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
    if (spec->repeats) parsed.repeated[spec->name].push_back(parsed.values[spec->name]);
  }
  return parsed;
}

// ---- help texts --------------------------------------------------------------------------------

constexpr const char* kMainUsageHead =
    R"(usage: cohort [--coordinator tcp://HOST:7400] [--insecure] [--timeout 5s] VERB ...

Launch and watch training jobs on a Cohort cluster.

Verbs:
)";

constexpr const char* kMainUsageTail = R"(
Global options:
  --coordinator ENDPOINT      coordinator client endpoint (env COHORT_COORDINATOR;
                              default tcp://127.0.0.1:7400)
  --insecure                  plaintext ZeroMQ, for local use (env COHORT_INSECURE=1)
  --timeout DURATION          how long to wait for each reply (default 5s)
  --key FILE                  this client's CURVE key pair (env COHORT_KEY;
                              default ~/.config/cohort/client.key)
  --server-key FILE           the coordinator's public key (env COHORT_SERVER_KEY;
                              default ~/.config/cohort/coordinator.pub)

Defaults for these come from the client config file (env COHORT_CLIENT_CONFIG; default
~/.config/cohort/client.conf): `name = value` lines with the names coordinator, insecure, key,
server-key, timeout. The environment overrides the file; flags override both.

Exit codes: 0 success, 1 the job failed or was cancelled, 2 bad usage or invalid spec,
3 coordinator unreachable (no answer), 4 the coordinator refused this client's key (not
listed), 5 permission denied (another user's job or study; only its owner or an admin may
change it). `cohort VERB --help` describes a verb.
)";

// One verb of the CLI: the flags it takes besides the global ones and --help, its entry in
// `cohort --help` (synopsis, then the description, which may run over several lines), its own
// --help text (below a usage line made of the synopsis, unless the text opens with its own
// "usage:" lines; see Help), and the function that runs it (cli/verbs.h).
struct Verb {
  std::string name;
  std::vector<FlagSpec> flags;
  std::string synopsis;
  std::string description;
  std::string usage;
  int (*run)(const ParsedArgs& args, const Context& ctx);
};

// ---- global flags ----------------------------------------------------------------------------

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

// ---- the verbs -------------------------------------------------------------------------------

// The end of the --help text of the verbs that send a spec file (submit, tune).
constexpr const char* kSpecFileExit =
    R"(Exit 2 when the file is invalid (the message names the offending field) or larger than the
coordinator's --max-spec-size (1 MiB unless COHORT_MAX_SPEC_SIZE says otherwise).
)";

std::string SpecFileHelp(const std::string& text) { return text + kSpecFileExit; }

// In the order `cohort --help` lists them.
const std::vector<Verb>& Verbs() {
  static const std::vector<Verb> verbs = {
      {"submit",
       {{"--wait", false, ""},
        {"--replica", true, ""},
        {"--all", false, ""},
        {"--name", true, ""},
        {"--after", true, ""},
        {"--hold", false, ""},
        {"--array", true, ""},
        {"--dry-run", false, ""},
        {"--json", false, ""},
        {"--env", true, "", true},
        {"--label", true, "", true}},
       "submit FILE [--name N] [--after JOB[:C],...] [--hold] [--array SPEC] [--env K=V]... "
       "[--label K=V]... [--wait [--replica R|--all] | --dry-run [--json]] [-- ARG...]",
       "validate and submit a job file; prints the job name",
       SpecFileHelp(R"(usage: cohort submit FILE [--name N] [--after JOB[:CONDITION][,...]] [--hold]
                    [--array INDEXES[%PARALLELISM]] [--env KEY=VALUE]... [--label KEY=VALUE]...
                    [--wait [--replica ROLE-INDEX | --all] | --dry-run [--json]] [-- ARG...]

Validates the job file (YAML; see DESIGN.md; or a Vertex AI CustomJob file, YAML or JSON, as
gcloud and the REST API take it: each field without a counterpart is named in a note on stderr)
and submits it. Prints the job name on stdout (with
`name_prefix:` in the file, the name the coordinator generated: the prefix, '-' and 8 letters
and digits). FILE may be - for standard input.
  --name N  the job's name instead of the file's name or name_prefix
            ([A-Za-z][A-Za-z0-9_-]{0,127})
  --after JOB[:CONDITION][,...]   run it once each of these jobs has ended as CONDITION says
            (added to the file's scheduling.after; Slurm's --dependency); a job array (--array)
            as a whole: SUCCEEDED once every task has, else FAILED or CANCELLED as one ended:
              succeeded  (the default) SUCCEEDED (afterok); if it ends otherwise this job FAILS
              failed     FAILED or CANCELLED (afternotok); if it SUCCEEDS this job is CANCELLED
              ended      in any state (afterany)
  --hold    submit it SUSPENDED (scheduling.hold; Slurm's --hold): it runs once `cohort resume
            JOB` queues it
  --array INDEXES[%PARALLELISM]   submit a job array (scheduling.array; Slurm's --array,
            Kubernetes' Indexed Job): one job of each index, its task, named NAME-INDEX, its
            replicas given COHORT_ARRAY_INDEX (and JOB_COMPLETION_INDEX) and COHORT_ARRAY_COUNT,
            its output_dir OUTPUT_DIR/INDEX; INDEXES as N, N-M or N-M:STEP, comma-separated (at
            most 1000 tasks, indexes up to 99999); at most PARALLELISM tasks run at once, the
            others wait their turn by index: `--array 0-99%8`. Prints NAME; `cohort list -l
            cohort/array=NAME` lists the tasks, `cohort cancel NAME` cancels them all
  --env KEY=VALUE   set KEY in the env of every pool that runs a command (its process or
            container), over the file's value (Slurm's --export); may be given again
  --label KEY=VALUE   set the job's label KEY, over the file's `labels` (gcloud's --labels):
            `cohort list -l KEY=VALUE` and `cohort usage --by-label KEY` find it; may be given
            again
  -- ARG... appended to the args of every pool that runs a command (Slurm's arguments after the
            script): `cohort submit train.yaml --name lr-3 -- --lr=3e-4`; for a container that
            gives no args, they replace its image's CMD, as args do
  --wait    show the job live on stderr until it ends, as `cohort watch` does (elapsed time,
            state, replicas, events such as restarts and their causes, the chief's output);
            exit 0 only if it SUCCEEDED, 1 if it FAILED or was CANCELLED. For an array: a line
            as each task ends, exit 0 only if every task SUCCEEDED
  --replica ROLE-INDEX   with --wait, follow this replica's output instead of chief-0's
  --all                  with --wait, follow every replica's output
  --dry-run submit nothing: the coordinator checks the file as a submit does and says what its
            next scheduling round would do with the job were it submitted now (Slurm's
            --test-only): start it (on which nodes, with which GPUs), preempt which jobs for it,
            or keep it waiting, and for what (room, its queue's turn, the jobs of --after,
            --hold). A forecast for this moment: jobs that end or arrive change it
  --json    with --dry-run, print the coordinator's answer as JSON: name, warnings, dry_run
            (outcome START, PREEMPT, WAIT, WAIT_FOR_JOBS or HOLD; replicas with node_id and
            gpus; preempts; reason; queue; queued_ahead)
)"),
       Submit},
      {"status",
       {{"--json", false, ""}, {"--spec", false, ""}},
       "status JOB|ARRAY [--json | --spec]",
       "a job's state, replicas and events",
       R"(
Shows the job's state, message, times, restarts, each replica's node, GPUs, state, attempt and
exit code, what each running replica uses (as `cohort top` does), and the job's events with their
reasons. A name that is no job's is taken as a job array's (`cohort submit --array`): a line
with its state, its tasks by state and how many are in flight (as `cohort arrays`), then the
tasks as `cohort list` shows them (with --json, {"array": NAME, "summary": {as cohort arrays
--json}, "tasks": [each task as a job]}).
  --json    print the job as JSON
  --spec    print the job file the coordinator stored instead: what `cohort submit` sent, with
            --name, --after, --hold, --env, --label and -- ARGS applied, a generated name
            filled in, a Vertex AI file as the Cohort job file it became (`cohort submit FILE
            --name NEW` runs it again); for an array, the array's file as its first task has it
            (`cohort submit FILE --name NEW --array 3,7` runs those tasks again)
)",
       ShowJob},
      {"list",
       {{"--json", false, ""},
        {"--state", true, ""},
        {"--since", true, ""},
        {"--limit", true, ""},
        {"--selector", true, "-l"}},
       "list [--state S] [--since T] [--limit N] [-l SELECTOR] [--json]",
       "jobs, all or a history query",
       R"(usage: cohort list [--state S[,S...]] [--since T] [--limit N] [-l SELECTOR] [--json]

Lists the jobs the coordinator knows, oldest first. With a filter, the coordinator's state store
answers the query (newest N of the jobs that match, still printed oldest first).
  --state S[,S...]   only jobs in these states: QUEUED, PENDING, RUNNING, SUCCEEDED, FAILED,
                     CANCELLING, CANCELLED (any case)
  --since T          only jobs submitted at or after T: a duration ago (30m, 2h, 7d) or a
                     local time (2026-11-25, 2026-11-25T14:30, 2026-11-25 14:30:00)
  --limit N          only the newest N jobs
  -l, --selector SELECTOR
                     only the jobs whose labels (the job file's `labels`) match: Kubernetes'
                     selector syntax, as kubectl's -l: team=vision,sweep in (lr,wd),!debug
  --json             print a JSON array of jobs (each with its labels as an object)
)",
       List},
      {"arrays",
       {{"--json", false, ""}},
       "arrays [--json]",
       "job arrays: their tasks by state, ended, in flight",
       R"(usage: cohort arrays [--json]

Lists the job arrays (`cohort submit --array`), newest first: each one's state (ACTIVE until
every task has ended, then SUCCEEDED when each did, else FAILED when one did, else CANCELLED, as
--after judges it), its indexes and parallelism, its tasks ended of all, in flight of its
parallelism, and its tasks by state. `cohort status ARRAY` lists one array's tasks.
  --json    print a JSON array of arrays (by_state as an object: {"RUNNING": 2, ...})
)",
       Arrays},
      {"top",
       {{"--json", false, ""}, {"--nodes", false, ""}, {"--selector", true, "-l"}},
       "top [JOB | --nodes [-l SELECTOR]] [--json]",
       "what running replicas use: CPU, memory, GPUs",
       R"(usage: cohort top [JOB] [--json]
       cohort top --nodes [-l SELECTOR] [--json]

What each running replica of JOB (without one: of every running job) uses, as its agent last
reported it (each heartbeat, about every second): CPU cores (the CPU time of its cgroup per
second over the last 10 s), memory (its cgroup's), and each GPU pinned to it: utilization and
memory used/total (NVML, sampled every 5 s; "-" where the node has no NVML), then (idle 12m05s)
once all of them have sampled 0% for a minute without a break. CPU and memory need the agent's
cgroups ("-" without them). `cohort status JOB` shows the same under "Usage".
  --json    print [{job, replica, node_id, usage: {cpu_cores, memory_bytes, gpus: [{index,
            utilization, memory_used_bytes, memory_total_bytes}], age_ms, gpus_idle_ms}}]
            (usage null: not reported yet; cpu_cores and memory_bytes -1: not known)

With --nodes, one line a node: what its running replicas use, summed (CPU cores, memory), beside
what they hold (CPUs held/total) and each of its GPUs (0:97%, 1:- held but not sampled, 2:free):
the nodes that are busy, and the GPUs held and idle. Only Cohort's replicas are counted, not
anything else running there; a node whose replicas have not all reported says how many did.
  -l, --selector SELECTOR   only the nodes whose labels match (as cohort nodes -l)
  --json    with --nodes: the nodes as `cohort nodes --json` prints them, each with usage:
            {cpu_cores, memory_bytes, gpus: [...], replicas} (null: no replica there has
            reported)
)",
       Top},
      {"logs",
       {{"--replica", true, ""},
        {"--attempt", true, ""},
        {"--follow", false, "-f"},
        {"--all", false, ""},
        {"--tail", true, ""},
        {"--since", true, ""},
        {"--timestamps", false, ""},
        {"--dump", false, ""}},
       "logs JOB [--replica ROLE-INDEX|--all] [--attempt N] [--tail N] [--since T] [--timestamps] "
       "[--follow] [--dump]",
       "a replica's output (default chief-0), or every replica's",
       R"(usage: cohort logs JOB [--replica ROLE-INDEX | --all] [--attempt N] [--tail N] [--since T]
                 [--timestamps] [--follow] [--dump]

Prints a replica's combined stdout and stderr as the coordinator holds it. While the job has not
started, says so on stderr.
  --replica ROLE-INDEX   which replica (default chief-0), e.g. worker-1
  --all                  every replica, each line prefixed with "[ROLE-INDEX] "
  --attempt N            one attempt only (default: every attempt, each after a header line)
  --tail N               only the last N lines of each replica (then new ones with --follow)
  --since T              only lines that reached the coordinator at or after T: a duration ago
                         (10m, 2h) or a local time (2026-11-25T14:30); lines stored before the
                         coordinator kept arrival times are left out
  --timestamps           each line after the UTC time it reached the coordinator
                         (2026-11-25T03:20:01.123Z; "-" where not known)
  --follow, -f           keep printing new output until the replicas have finished
  --dump                 the replica's stack dumps instead (native and Python stacks, taken when
                         the coordinator's watchdog found the job hung: scheduling.hang_timeout,
                         and by `cohort stacks`)
)",
       Logs},
      {"exec",
       {{"--replica", true, ""},
        {"--all", false, ""},
        {"--kill-after", true, ""},
        {"--stdin", false, "-i"},
        {"--tty", false, "-t"}},
       "exec JOB [-i|-it] [--replica ROLE-INDEX|--all] [--kill-after D] -- COMMAND [ARG...]",
       "run a command beside a running replica, as it\nruns (nvidia-smi, ls, py-spy dump)",
       R"(usage: cohort exec JOB [--replica ROLE-INDEX | --all] [--kill-after DURATION] -- COMMAND
                 [ARG...]
       cohort exec JOB -i|-it [--replica ROLE-INDEX] -- COMMAND [ARG...]

Runs COMMAND on the node of a running replica, as the replica runs, and prints its output
(stdout and stderr together, at most 1 MiB), as `kubectl exec` and Slurm's `srun --jobid
--overlap` do: for a process replica with its environment (its pinned GPUs, RANK, AIP_* dirs;
COHORT_REPLICA_PID names its command's pid), in its working directory, as its account, in its
cgroup; for a container replica inside its container (the runtime's exec). stdin is empty and
there is no terminal. Only the job's owner or an admin may (exit 5 otherwise), and each command
run is an event of the job. Exits with the command's exit status (127: not found on the
replica's PATH; 137: killed); cohort's own errors print "cohort: ..." and exit as usual (2: no
such job or replica, or the replica is not running; 3: no answer, or the replica's node was lost
meanwhile; 1: its agent never said how the command ended).
  --replica ROLE-INDEX   which replica (default chief-0, else the job's first), e.g. worker-1
  --all                  every running replica, at most 16 at once, each output line prefixed
                         with "[ROLE-INDEX] " (as pdsh does); exits with the largest status
  --kill-after DURATION  the command is killed (SIGKILL) after this long (default 60s, at most
                         1h); cohort then exits 124
  -i, --stdin            an interactive session: stdin streams to the command and its output
                         streams back as it comes (no 1 MiB bound, no --kill-after); the end of
                         stdin closes the command's; ^C (SIGINT) kills the command, then exits
                         130. A session nothing is heard from for 30 s is killed
  -t, --tty              with a terminal of its own (implies -i), sized as this one and resized
                         with it; this terminal is in raw mode meanwhile, so ^C, ^D and ^Z are
                         the command's: cohort exec train -it -- bash
Quote what the replica's shell should expand: cohort exec train -- sh -c 'ls $AIP_CHECKPOINT_DIR'
)",
       Exec},
      {"stacks",
       {{"--replica", true, ""}},
       "stacks JOB [--replica ROLE-INDEX]",
       "what every running replica is doing now: its\nPython and native stacks",
       R"(usage: cohort stacks JOB [--replica ROLE-INDEX]

Has the agents take the stacks of the job's running replicas now, as the watchdog does for a hung
job (scheduling.hang_timeout), and prints them as they come, each after a "==== worker-1 attempt 0
====" line: every process of the replica (at most 8) with its command line, its Python stacks
(faulthandler: any Python process of a process replica or a runc/crun container, registered by
the agent's sitecustomize; in a docker/podman container, one that imported cohort.collective or
cohort.torch) and its
native stacks (eu-stack, else gdb). What a DDP job is stuck in, rank by rank, as `py-spy dump` on each
node or Ray's `ray stack` shows it. They are kept with the replica's logs (`cohort logs JOB
--replica R --dump`). Only the job's owner or an admin may (exit 5 otherwise), and each request is
an event of the job. Waits up to 2 minutes for the dumps (exit 1 naming the replicas whose dumps
did not come). Ends with one line a replica saying where it is: its main thread's innermost
Python frame and, when that is a library's, the innermost one in the job's own code, as in
`in backward (torch/autograd/__init__.py:197), from train (train.py:88)`; without Python stacks,
its innermost native frames. The hang watchdog's dumps give that line as an event.
  --replica ROLE-INDEX   that replica alone, e.g. worker-1
)",
       Stacks},
      {"watch",
       {{"--replica", true, ""}, {"--all", false, ""}},
       "watch JOB [--replica ROLE-INDEX|--all]",
       "a job live until it ends: state, replicas, restarts, output",
       R"(usage: cohort watch JOB [--replica ROLE-INDEX | --all]

Shows the job live until it ends: the time since it was submitted, its state and why (what a
queued job waits for), each replica's state, node and attempt, every event as it happens
(placements, restarts and their causes, the end), and the chief's output lines, each prefixed
with "[ROLE-INDEX] ". On a terminal the status block is redrawn in place below the output;
otherwise every change is printed as a line "[mm:ss] ...".
  --replica ROLE-INDEX   follow this replica's output instead of chief-0's
  --all                  follow every replica's output
Exit 0 if the job SUCCEEDED, 1 if it FAILED or was CANCELLED. A name that is no job's is taken
as a job array's (`cohort submit --array`): a line as each task ends, then one for the array;
exit 0 only if every task SUCCEEDED.
)",
       Watch},
      {"cancel",
       {{"--wait", false, ""}},
       "cancel JOB|ARRAY|STUDY [--wait]",
       "cancel a job, a job array's tasks, or a study and\nits running trials",
       R"(
Asks the coordinator to cancel the job; prints its state. A name that is no job's is taken as a
job array's (`cohort submit --array`): every task not ended is cancelled, and each task's state
is printed; else as a study's: the study ends CANCELLED and its running trials are cancelled.
Only the owner (who submitted it) or an admin may: anyone else gets exit code 5, the message
naming the owner (for an array, no task is cancelled then).
  --wait    (a job or an array) wait until it has ended and print the final states
)",
       Cancel},
      {"suspend",
       {{"--wait", false, ""}},
       "suspend JOB|ARRAY [--wait]",
       "take a job (or an array's tasks) off the cluster\nuntil resumed (no restart spent)",
       R"(
Suspends a queued or running job: its replicas stop as a preemption stops them (SIGTERM, the
coordinator's stop grace, then SIGKILL: a trainer that checkpoints on SIGTERM loses nothing), and
the job stays SUSPENDED, holding no GPU and placed nowhere, until `cohort resume`. No restart is
spent, and the time suspended counts toward neither scheduling.timeout nor usage. Suspending a
suspended job does nothing. Only the owner or an admin may (exit 5 otherwise); a job that ended or
is being cancelled is refused (exit 2). A name that is no job's is taken as a job array's (`cohort
submit --array`): every task not ended is suspended, a task in flight keeping its slot of the
array's parallelism, and each task's state is printed (for an array of another owner's, no task
is suspended).
  --wait    wait until every replica has stopped (its GPUs are free), then print the state
)",
       Suspend},
      {"resume",
       {},
       "resume JOB|ARRAY",
       "queue a suspended job (or an array's tasks) again",
       R"(
Queues a suspended job again: it is placed when there is room, as a preempted job is, each
replica as its next attempt, resuming from its newest checkpoint. Resuming a job that is not
suspended does nothing. Only the owner or an admin may (exit 5 otherwise). A name that is no job's
is taken as a job array's: each suspended task is queued again (one waiting for its turn waits
for it again).
)",
       Resume},
      {"update",
       {{"--priority", true, ""}, {"--queue", true, ""}},
       "update JOB|ARRAY [--priority CLASS] [--queue QUEUE]",
       "move a job (or an array's tasks) to another priority\nclass or queue",
       R"(
Moves a job that has not ended to another priority class or queue (Slurm's `scontrol update
job=X priority=`): the job file's scheduling.priority and scheduling.queue, as if submitted with
them. A queued job is placed by them from the next scheduling round (a higher class may preempt
lower ones, as at submit); a running job keeps running, and may be preempted by them. The change
is an event of the job and is kept across coordinator restarts. Only the owner or an admin may
(exit 5 otherwise); a class or queue the coordinator does not have, or a job that ended, is
refused (exit 2). Prints the job's state, class and queue after. A name that is no job's is taken
as a job array's: each task not ended is moved, those waiting for their turn too.
  --priority CLASS   a priority class of the coordinator (low, normal, high, and those configured)
  --queue QUEUE      a queue of the coordinator (`cohort queues` lists them)
)",
       Update},
      {"delete",
       {},
       "delete JOB|ARRAY",
       "delete a finished job (or array) and its records and\nlogs",
       R"(
Deletes a finished job (SUCCEEDED, FAILED or CANCELLED): it leaves `cohort list` and `status`,
and the coordinator removes its stored records (replicas, events, training metrics) and its logs.
Its output directory (checkpoints, models) is left as it is. A job not finished is refused (exit
2): cancel it first. The name can then be used again. A name that is no job's is taken as a job
array's (`cohort submit --array`): each of its tasks is deleted once every one has finished.
)",
       Delete},
      {"nodes",
       {{"--json", false, ""}, {"--selector", true, "-l"}},
       "nodes [NODE | -l SELECTOR] [--json]",
       "registered agents and their capacity",
       R"(
Lists the registered agents: address, state, GPUs/CPUs/memory used of total, replicas, last
heartbeat, the agent's version (an upgrade's progress, node by node). With a NODE, that one at
length: each GPU's model, memory, NUMA node, UUID, use now (where its agent samples NVML) and who
holds it (job/replica) or why nothing new may go there (unfit, cordoned), then the replicas that hold part of the node, then its events: registered,
LOST and back, health check and GPUs failing and passing again, cordons (who, why), drains,
uncordons and label edits (the newest 50, kept across coordinator restarts).
  -l, --selector SELECTOR
            only the nodes whose labels match (Kubernetes' selector syntax, as kubectl's -l):
            rack=r1,gpu in (h100,h200),zone!=b,infiniband,!maintenance,nvidia.com/gpu.memory>40000
  --json    print a JSON array of nodes
)",
       Nodes},
      {"cordon",
       {{"--selector", true, "-l"}, {"--gpu", true, "", true}, {"--reason", true, ""}},
       "cordon NODE|-l SELECTOR [--gpu N]... [--reason TEXT]",
       "place nothing new on a node, or on some of its GPUs\n(kept across restarts)",
       R"(
Marks the node cordoned: the scheduler places nothing new there; what runs there keeps running.
The mark is stored by the coordinator and survives its restart and the agent's re-registration.
`cohort nodes` shows the node CORDONED, and who cordoned it, when and why. An admin's verb.
  --reason TEXT
            why (Slurm's drain Reason=), at most 256 bytes: `cohort nodes` shows it with the
            admin's user and the time until nothing of the node is cordoned; a later cordon or
            drain with a reason replaces it, one without keeps it
  --gpu N   cordon GPU N of the node alone (again for more): nothing new is placed on it, the
            node's other GPUs take work; `cohort nodes` lists it ("node2 GPU 3 is cordoned")
  -l, --selector SELECTOR
            every node whose labels match, instead of one NODE: Kubernetes' selector syntax,
            rack=r1,gpu in (h100,h200),zone!=b,infiniband,!maintenance; none matching does nothing
)",
       Cordon},
      {"uncordon",
       {{"--selector", true, "-l"}, {"--gpu", true, "", true}},
       "uncordon NODE|-l SELECTOR [--gpu N]...",
       "undo cordon or drain",
       R"(
Clears a cordon or drain: the node takes new replicas again. An admin's verb.
  --gpu N   uncordon GPU N of the node alone (again for more), leaving the node's own mark
  -l, --selector SELECTOR
            every node whose labels match, instead of one NODE: Kubernetes' selector syntax,
            rack=r1,gpu in (h100,h200),zone!=b,infiniband,!maintenance; none matching does nothing
)",
       Uncordon},
      {"drain",
       {{"--now", false, ""},
        {"--selector", true, "-l"},
        {"--gpu", true, "", true},
        {"--reason", true, ""}},
       "drain NODE|-l SELECTOR [--gpu N]... [--now] [--reason TEXT]",
       "cordon a node (or some of its GPUs) and let its\nreplicas finish, or move them now",
       R"(
Cordons the node and lets the replicas running there finish; `cohort nodes` shows it DRAINING,
then DRAINED once none is left. Stored like a cordon; `cohort uncordon` ends it. An admin's verb.
  --now     also preempt every job with a replica there: its replicas are stopped (SIGTERM, the
            grace period, so they checkpoint), and the job goes back to the queue and resumes
            from its newest checkpoint on other nodes; no restart of its budget is spent
  --reason TEXT
            why, kept with the drain as cordon's --reason is
  --gpu N   drain GPU N of the node alone (again for more): it is cordoned, and what runs on it
            finishes there (the reply names those jobs), or with --now is preempted and resumes
            elsewhere, the node's other GPUs included; `cohort uncordon NODE --gpu N` ends it
  -l, --selector SELECTOR
            every node whose labels match, instead of one NODE: Kubernetes' selector syntax,
            rack=r1,gpu in (h100,h200),zone!=b,infiniband,!maintenance; none matching does nothing
)",
       Drain},
      {"label",
       {{"--reset", false, ""}, {"--selector", true, "-l"}},
       "label NODE|-l SELECTOR [KEY=VALUE|KEY-]... [--reset]",
       "set or remove a node's labels (kept across restarts)",
       R"(
Edits the labels node_selector, node_affinity and preferred_node_affinity match, as `kubectl
label` does: KEY=VALUE sets a label (or changes its value), KEY- removes one, whatever the node's
agent registered with its --label. The edits are stored by the coordinator and apply over the
agent's labels at every registration, across coordinator restarts; a job waiting for such a node
is placed at the next round, and what runs there keeps running though it may no longer match (as
Kubernetes' IgnoredDuringExecution). `cohort nodes` shows the labels the node has; `--json` also
its label_edits. An admin's verb.
  --reset   drop the node's earlier edits first: with no KEY=VALUE or KEY-, the node has its
            agent's labels again
  -l, --selector SELECTOR
            every node whose labels match, instead of one NODE: Kubernetes' selector syntax,
            rack=r1,gpu in (h100,h200),zone!=b,infiniband,!maintenance; none matching does nothing
)",
       Label},
      {"forget",
       {{"--selector", true, "-l"}},
       "forget NODE|-l SELECTOR",
       "remove a LOST node from the node list",
       R"(
Removes a LOST node (and its cordon or drain) from the coordinator's node list. A node that is
heard from is refused (exit 2): stop its agent first. If its agent comes back later it registers
as a new node. An admin's verb.
  -l, --selector SELECTOR
            every node whose labels match, instead of one NODE: Kubernetes' selector syntax,
            rack=r1,gpu in (h100,h200),zone!=b,infiniband,!maintenance; none matching does nothing
)",
       Forget},
      {"queues",
       {{"--json", false, ""}},
       "queues [--json]",
       "job queues: quota, use, waiting jobs",
       R"(
Lists the coordinator's job queues: weight, GPUs and CPUs used of the quota (use beyond the quota
is borrowed idle capacity, returned by preemption when another queue needs its quota), running
waiting (jobs waiting for other jobs first included) and suspended jobs, and the next waiting jobs
in the order the scheduler tries them.
  --json    print a JSON array of queues
)",
       Queues},
      {"checkpoint",
       {{"--job", true, ""}, {"--json", false, ""}},
       "checkpoint DIR|--job JOB [--json]",
       "the checkpoints under a directory, verified, and the one a\nrestart would restore; a "
       "script's own, torn or not",
       R"(usage: cohort checkpoint DIR [--json]
       cohort checkpoint --job JOB [--json]

Lists the checkpoints (ckpt-<step>/) under DIR, or under the job's checkpoint directory
(<output_dir>/checkpoints/, asked from the coordinator), verifies each against its MANIFEST (sizes
and checksums), and names the one a restarted replica would restore: the newest that verifies.
Then a script's own checkpoints there (files named as one, .pt .pth .ckpt .bin .safetensors .tar,
or holding a torch.save archive; step folders such as checkpoint-500/ or epoch_3/), each "ok" or
TORN with why (a save cut short, judged from its bytes), oldest first, and those the agent set
aside as torn before a restart (under DIR/.cohort-torn/attempt-<K>/). Reads the files directly,
so DIR must be visible from this host. Exit 0 when a valid checkpoint or a script's checkpoint
not torn exists, 1 when none does.
  --json    print {"dir", "checkpoints": [{name, step, files, bytes, valid, error}], "restore",
            "script_checkpoints": [{path, folder, bytes, modified_ms, torn}], "script_newest",
            "set_aside": [the same, path under .cohort-torn/], "script_walk_complete"}
)",
       Checkpoint},
      {"backup",
       {{"--json", false, ""}},
       "backup [--json]",
       "take a backup of the coordinator's state database now",
       R"(
Asks the coordinator for a backup of its state database now, as its --backup-dir schedule takes
them (README "Backups"): a consistent copy taken while it runs, checked, fsynced and named
state-<UTC time>.db in its backup dir (on the coordinator's host), the oldest beyond
--backup-keep removed. Waits until it is written (up to 10 minutes, or --timeout if longer) and
prints its path, size and what it holds; before an upgrade of the coordinator, say. A coordinator
without --backup-dir refuses (exit 2); a backup that fails says why (exit 1). An admin's verb.
  --json    print {"path", "bytes", "jobs", "studies", "duration_ms"}
)",
       Backup},
      {"version",
       {{"--json", false, ""}},
       "version [--json]",
       "this client's build and the coordinator's",
       R"(
Prints this client's build (as --version does) and the coordinator's, each the release and the
commit it was built from: "cohort 0.1.0+g298bf5264a1c", ".dirty" after it for a build with
uncommitted changes. The agents' builds are in `cohort nodes`. Where the coordinator does not say
(one too old to, exit 1; one that cannot be reached, exit 3) the client's line is printed and why
on stderr.
  --json    print {"client", "coordinator"} (coordinator null, and "error", where it did not say)
)",
       Version},
      {"keygen",
       {{"--dir", true, ""}, {"--name", true, ""}},
       "keygen [--dir DIR] [--name NAME]",
       "create a CURVE key pair for this client (NAME.key, NAME.pub)",
       R"(
Creates a CURVE key pair: DIR/NAME.key (both halves, mode 0600) and DIR/NAME.pub (public half).
Defaults: DIR ~/.config/cohort, NAME client. Give NAME.pub to the cluster admin, who puts it in
the coordinator's clients/ key directory; put the coordinator's coordinator.pub next to your key
(or point --server-key at it). Existing files are never overwritten.
)",
       Keygen},
      {"tune",
       {{"--wait", false, ""},
        {"--name", true, ""},
        {"--env", true, "", true},
        {"--label", true, "", true}},
       "tune FILE [--name N] [--env K=V]... [--label K=V]... [--wait] [-- ARG...]",
       "validate and submit a hyperparameter study; prints its name",
       SpecFileHelp(R"(
Validates a study file (YAML; see common/study_spec.h; or a Vertex AI HyperparameterTuningJob
file, YAML or JSON: each field without a counterpart is named in a note on stderr) and submits
it. Prints the study name. FILE may be - for standard input.
  --name N  the study's name instead of the file's name (or a Vertex file's displayName, which
            it may then lack; [A-Za-z][A-Za-z0-9_-]{0,99}): the same file runs again as another
            study. A
            trial_job.output_dir in the file is kept: its trials write where the first study's
            did (<output_dir>/<trial id>/), and find their checkpoints
  --env KEY=VALUE   set KEY in the env of every pool of the trial job that runs a command, over
            the file's value, in every trial; may be given again
  --label KEY=VALUE   set the label KEY of every trial job, over the trial_job's `labels`
            (`cohort usage --by-label KEY` sums the study's hours); may be given again
  -- ARG... appended to the args of every pool of the trial job that runs a command, before the
            trial's parameters: `cohort tune hp.yaml -- --epochs=5`
  --wait    follow the study (progress on stderr) until it ends, then print the trials table and
            the best trial; exit 0 only if the study SUCCEEDED, 1 if it FAILED or was CANCELLED
)"),
       Tune},
      {"trials",
       {{"--json", false, ""}, {"--spec", false, ""}},
       "trials STUDY [--json | --spec]",
       "a study's trials and its best trial",
       R"(
Shows a study's state, every trial (state, parameters, final metric, steps reported, job) and the
best trial so far (marked *).
  --json    print the study as JSON
  --spec    print the study file the coordinator stored instead: a Vertex AI tuning file as the
            Cohort study file it became (the owner or an admin only)
)",
       Trials},
      {"studies",
       {{"--json", false, ""}},
       "studies [--json]",
       "hyperparameter studies: state, trials, best trial",
       R"(
Lists the studies: state, trials finished of the most, trials running, the best trial and its
metric, when it was submitted. `cohort trials STUDY` shows one in full.
  --json    print a JSON array of studies
)",
       Studies},
      {"metrics",
       {{"--json", false, ""}},
       "metrics JOB [--json]",
       "the training metrics a job reported, per step",
       R"(
Prints the metrics the job's chief reported the way trials do (JSON lines appended to
$CLOUD_ML_HP_METRIC_FILE, or Python's cohort.hypertune reporter): one row per step, one column
per metric, in the order they arrived.
  --json    print {"job", "points": [{step, time_ms, tag, value, replica}]}
)",
       Metrics},
      {"usage",
       {{"--user", true, ""},
        {"--queue", true, ""},
        {"--since", true, ""},
        {"--selector", true, "-l"},
        {"--by-label", true, ""},
        {"--json", false, ""}},
       "usage [--user U] [--queue Q] [--since T] [-l SELECTOR] [--by-label KEY]",
       "GPU-hours, CPU-hours, jobs and failures per user and\nqueue, or per label",
       R"(usage: cohort usage [--user U] [--queue Q] [--since T] [-l SELECTOR] [--by-label KEY]
                    [--json]

Accounting from the coordinator's state store, like sacct: per user and queue, the jobs, the
failed jobs, GPU-hours and CPU-hours (what the jobs' replicas requested, from first placement to
the end; the time restarting counts as held), and a total.
  --user U     only jobs of user U
  --queue Q    only jobs of queue Q
  --since T    only usage from T on: a duration back from now (7d, 12h) or a local time
               (2026-11-01 or 2026-11-01T08:00)
  -l, --selector SELECTOR   only jobs whose labels match it, as `cohort list -l` takes it
               (team=vision,sweep in (lr,wd))
  --by-label KEY   a row per value of the jobs' label KEY instead of per user and queue (as a
               cloud bill broken down by label): `cohort usage --by-label team`; the jobs
               without it make the row <none>
  --json       print a JSON array of rows ({user, queue, ...}; with --by-label {label, ...},
               label null for the jobs without it)
)",
       Usage},
  };
  return verbs;
}

// `cohort VERB --help`: "usage: cohort " and the synopsis, then the verb's usage text; or the
// usage text alone where it gives its own usage lines.
std::string Help(const Verb& verb) {
  if (verb.usage.rfind("usage:", 0) == 0) return verb.usage;
  return "usage: cohort " + verb.synopsis + "\n" + verb.usage;
}

// The verb called `name`, or nullptr.
const Verb* FindVerb(const std::string& name) {
  for (const Verb& verb : Verbs()) {
    if (verb.name == name) return &verb;
  }
  return nullptr;
}

// A verb's synopsis as `cohort --help` lists it: indented by two, and where wider than
// kHelpWidth broken at the spaces between its top-level words (a [...] group stays whole), each
// later line aligned after the verb's name.
std::string ListedSynopsis(const std::string& synopsis) {
  constexpr size_t kHelpWidth = 100;
  std::vector<std::string> words(1);
  int depth = 0;
  for (char c : synopsis) {
    if (c == ' ' && depth == 0) {
      words.emplace_back();
      continue;
    }
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    words.back() += c;
  }
  const std::string indent(2 + words[0].size() + 1, ' ');
  std::string text = "  " + words[0];
  size_t line_start = 0;
  for (size_t i = 1; i < words.size(); ++i) {
    if (text.size() - line_start + 1 + words[i].size() > kHelpWidth) {
      text += "\n";
      line_start = text.size();
      text += indent + words[i];
    } else {
      text += " " + words[i];
    }
  }
  return text;
}

// `cohort --help`: kMainUsageHead, each verb's synopsis and description, kMainUsageTail.
const std::string& MainUsage() {
  static const std::string usage = [] {
    constexpr size_t kDescriptionColumn = 30;
    const std::string indent(kDescriptionColumn, ' ');
    std::string text = kMainUsageHead;
    for (const Verb& verb : Verbs()) {
      std::string line = ListedSynopsis(verb.synopsis);
      line += line.size() < kDescriptionColumn ? std::string(kDescriptionColumn - line.size(), ' ')
                                               : "\n" + indent;
      for (char c : verb.description) line += c == '\n' ? "\n" + indent : std::string(1, c);
      text += line + "\n";
    }
    return text + kMainUsageTail;
  }();
  return usage;
}

}  // namespace

int UsageError(std::ostream& err, const std::string& verb, const std::string& message) {
  err << "cohort: " << message << "\n";
  const Verb* known = FindVerb(verb);
  err << (known != nullptr ? Help(*known) : MainUsage());
  return kExitUsage;
}

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
    out << "cohort " << CohortBuildVersion() << "\n";
    return kExitOk;
  }
  if (i >= args.size()) {
    if (global_args->Has("--help")) {
      out << MainUsage();
      return kExitOk;
    }
    return UsageError(err, "", "no verb given");
  }
  const std::string verb = args[i];
  std::vector<std::string> rest(args.begin() + static_cast<long>(i) + 1, args.end());

  if (verb == "help") {
    const Verb* known = rest.empty() ? nullptr : FindVerb(rest[0]);
    out << (known != nullptr ? Help(*known) : MainUsage());
    return kExitOk;
  }

  const Verb* known = FindVerb(verb);
  if (known == nullptr) {
    std::vector<std::string_view> names;
    for (const Verb& v : Verbs()) names.push_back(v.name);
    return UsageError(err, "", "unknown verb '" + verb + "'" + DidYouMean(verb, names));
  }
  auto parsed = Parse(rest, known->flags);
  if (!parsed.ok()) return UsageError(err, verb, parsed.status().message());
  if (parsed->Has("--help")) {
    out << Help(*known);
    return kExitOk;
  }

  auto configured = ClientOptionsFromConfig();
  if (!configured.ok()) {
    err << "cohort: " << configured.status().message() << "\n";
    return kExitUsage;
  }
  Context ctx{*configured, out, err};
  ctx.out_is_terminal = &out == &std::cout && ::isatty(STDOUT_FILENO) == 1;
  ctx.err_is_terminal = &err == &std::cerr && ::isatty(STDERR_FILENO) == 1;
  Status globals_status = ApplyGlobals(*global_args, ctx.options);
  if (globals_status.ok()) globals_status = ApplyGlobals(*parsed, ctx.options);
  if (!globals_status.ok()) return UsageError(err, verb, globals_status.message());

  return known->run(*parsed, ctx);
}

}  // namespace cohort::cli
