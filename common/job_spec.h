// JobSpec is a training job as its YAML file describes it (DESIGN.md "Jobs"): a name, up to four
// worker pools keyed by role, and scheduling options. ParseJobSpec() both parses and validates;
// every error names the offending field ("worker_pools[1].replicas: must be at least 1, got 0"),
// unknown keys included, so a typo is never silently ignored. The CLI validates before sending and
// the coordinator validates again on receipt with the same code.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/enum_names.h"
#include "common/status.h"

namespace cohort {

// A replica's role. The Vertex worker pool index follows from it: chief=0, worker=1,
// parameter_server and reducer=2, evaluator=3.
enum class Role { kChief, kWorker, kParameterServer, kReducer, kEvaluator };
inline constexpr EnumName<Role> kRoleNames[] = {{Role::kChief, "chief"},
                                                {Role::kWorker, "worker"},
                                                {Role::kParameterServer, "parameter_server"},
                                                {Role::kReducer, "reducer"},
                                                {Role::kEvaluator, "evaluator"}};

std::string_view RoleName(Role role);  // "chief", "worker", "parameter_server", ...
StatusOr<Role> ParseRole(std::string_view name);
int PoolIndex(Role role);

// Built-in pool-2 programs that Cohort itself ships (CPU only).
enum class Builtin { kNone, kReducer, kParameterServer };
// The names a spec may give (kNone has none).
inline constexpr EnumName<Builtin> kBuiltinNames[] = {
    {Builtin::kReducer, "reducer"}, {Builtin::kParameterServer, "parameter_server"}};
std::string_view BuiltinName(Builtin builtin);  // "", "reducer", "parameter_server"

// A node's labels (its agent's --label KEY=VALUE), a pool's node_selector and a job's labels: keys
// [A-Za-z0-9][A-Za-z0-9._/-]{0,62}, values [A-Za-z0-9._-]{0,63}.
using NodeLabels = std::map<std::string, std::string>;
// InvalidArgument naming what is wrong with the key or the value; OK when both are valid.
Status CheckNodeLabel(std::string_view key, std::string_view value);
// "KEY=VALUE" (an agent's --label) to its key and value, checked.
StatusOr<std::pair<std::string, std::string>> ParseNodeLabel(std::string_view text);
// Whether `labels` has every key of `selector` with its value.
bool LabelsMatch(const NodeLabels& labels, const NodeLabels& selector);
// `text` as a label value: each character a value cannot hold becomes '-', cut to 63.
std::string ToNodeLabelValue(std::string_view text);
// "gpu=h100,zone=b" ("" for none).
std::string FormatNodeLabels(const NodeLabels& labels);
// The inverse of FormatNodeLabels; kInvalidArgument as ParseNodeLabel for a malformed item.
StatusOr<NodeLabels> ParseNodeLabels(std::string_view text);
inline constexpr size_t kMaxNodeLabels = 32;
// The label of a node's GPU kind as GKE names it ("nvidia-h100-80gb"), which agents give nodes
// of NVIDIA GPUs they recognise (agent/inventory.h) and a Vertex job's acceleratorType asks for
// (common/vertex_job.h).
inline constexpr char kAcceleratorLabel[] = "cloud.google.com/gke-accelerator";
inline constexpr size_t kMaxJobLabels = 64;  // as Vertex AI's

// One expression of a pool's node_affinity (Kubernetes' nodeAffinity matchExpressions, required
// during scheduling): In / NotIn: the node's label `key` is (not) one of `values` (NotIn also
// holds where the node lacks the key); Exists / DoesNotExist: the node has (not) the key; Gt / Lt:
// the node's label is an integer greater (less) than the one value, an integer.
enum class LabelOp { kIn, kNotIn, kExists, kDoesNotExist, kGt, kLt };
inline constexpr EnumName<LabelOp> kLabelOpNames[] = {
    {LabelOp::kIn, "In"},         {LabelOp::kNotIn, "NotIn"},
    {LabelOp::kExists, "Exists"}, {LabelOp::kDoesNotExist, "DoesNotExist"},
    {LabelOp::kGt, "Gt"},         {LabelOp::kLt, "Lt"}};
struct LabelRequirement {
  std::string key;
  LabelOp op = LabelOp::kExists;
  // In, NotIn: one or more (parsed: sorted, distinct); Gt, Lt: one integer; else none.
  std::vector<std::string> values;

  auto operator<=>(const LabelRequirement&) const = default;
};

// One preferred_node_affinity term (Kubernetes' preferredDuringSchedulingIgnoredDuringExecution):
// a node whose labels satisfy every one of `requirements` is worth `weight` to the pool's
// replicas. One expression: `{weight: 80, key: gpu, operator: In, values: [h100]}`; several
// (Kubernetes' preference.matchExpressions): `{weight: 80, match_expressions: [{key: gpu,
// operator: In, values: [h100]}, {key: zone, operator: In, values: [a]}]}`.
struct NodePreference {
  int weight = 1;                              // 1..kMaxPreferenceWeight
  std::vector<LabelRequirement> requirements;  // all of them; 1..kMaxNodeLabels

  auto operator<=>(const NodePreference&) const = default;
};
inline constexpr int kMaxPreferenceWeight = 100;
// The sum of the weights of the terms of `preferences` whose requirements `node`'s labels all
// satisfy.
int PreferenceScore(const std::vector<NodePreference>& preferences, const NodeLabels& node);

// A label value as Gt and Lt read it: a decimal integer ("-3", "81920"); nullopt otherwise.
std::optional<int64_t> LabelInteger(std::string_view value);

// All a pool asks of a node's labels: each of `labels` with its value (node_selector) and each
// requirement (node_affinity).
struct NodeSelector {
  NodeLabels labels;
  std::vector<LabelRequirement> requirements;

  bool empty() const { return labels.empty() && requirements.empty(); }
  bool Matches(const NodeLabels& node) const;
  auto operator<=>(const NodeSelector&) const = default;
};
// Kubernetes' label selector syntax: "gpu=h100,zone notin (b),infiniband,!maintenance" ("" for an
// empty selector), Gt and Lt as "mem>40000", "mem<81920".
std::string FormatNodeSelector(const NodeSelector& selector);
// The inverse of FormatNodeSelector, as kubectl's -l reads it: comma-separated requirements, each
// KEY=VALUE (or ==), KEY!=VALUE (NotIn of one value), KEY in (A,B), KEY notin (A,B), KEY (Exists),
// !KEY (DoesNotExist), KEY>N, KEY<N; spaces around a requirement and its parts are allowed.
// kInvalidArgument naming the requirement that is malformed, or a key or value CheckNodeLabel
// refuses, or a text over kMaxNodeSelectorBytes (the coordinator matches selectors clients send
// against every node, on its loop); "" is the empty selector (every node).
StatusOr<NodeSelector> ParseNodeSelector(std::string_view text);
inline constexpr size_t kMaxNodeSelectorBytes = 4096;
// The spec fields it comes from: "node_selector", "node_affinity" or "node_selector,
// node_affinity".
std::string NodeSelectorFields(const NodeSelector& selector);

struct Resources {
  int gpus = 0;
  int cpus = 1;
  int64_t memory_mb = 0;  // 0: not limited
  // False where a job file left cpus or memory_mb out (the values above are then the built-in
  // ones): the coordinator fills in its queue's defaults per GPU at submit
  // (coordinator/queue_config.h, ApplyResourceDefaults), and JobSpecToYaml writes only what was
  // given, so that a spec made from another (a Vertex CustomJob's) takes them too.
  bool cpus_given = true;
  bool memory_given = true;

  // The largest cpus a replica may ask for.
  static constexpr int kMaxCpus = 1024;

  bool operator==(const Resources&) const = default;
};

// What a replica runs. A process has a command; a container has an image and optionally a
// command (the image's entrypoint otherwise).
struct ProcessSpec {
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;

  bool operator==(const ProcessSpec&) const = default;
};

struct ContainerSpec {
  std::string image;
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;

  bool operator==(const ContainerSpec&) const = default;
};

struct WorkerPoolSpec {
  Role role = Role::kChief;
  int replicas = 1;
  // An elastic pool (the worker pool only): the job may run with as few as this many of its
  // `replicas` when no more fit, and grows again when room comes (README "Elastic jobs").
  // nullopt: every replica, always.
  std::optional<int> min_replicas;
  Resources resources;
  // Its replicas go only to nodes with every one of these labels (Kubernetes' nodeSelector,
  // Vertex's machine type): `node_selector: {gpu: h100}`. Empty: any node.
  NodeLabels node_selector;
  // And to nodes whose labels satisfy every one of these (Kubernetes' required nodeAffinity):
  // `node_affinity: [{key: gpu, operator: In, values: [h100, h200]}]`. Empty: no more.
  std::vector<LabelRequirement> node_affinity;
  // Of the nodes it may go to, those it would rather have: the scheduler puts its replicas where
  // the sum of the weights their labels satisfy is highest, then packs as it would without.
  std::vector<NodePreference> preferred_node_affinity;
  // No two of its replicas on one node (Kubernetes' pod anti-affinity on the hostname, Ray's
  // STRICT_SPREAD): reducers that each bring a node's link, workers that each own a machine as on
  // Vertex. Replicas of other pools may share their nodes. false: packed as few nodes as fit.
  bool one_per_node = false;
  std::optional<ProcessSpec> process;  // exactly one of process, container, builtin
  std::optional<ContainerSpec> container;
  Builtin builtin = Builtin::kNone;

  NodeSelector Selector() const { return NodeSelector{node_selector, node_affinity}; }
  bool operator==(const WorkerPoolSpec&) const = default;
};

// What counts as progress of a running job, for the hang watchdog: its ranks completing Cohort
// collective operations (the flight recorder), its replicas writing metric lines
// ($CLOUD_ML_HP_METRIC_FILE), their writing to stdout/stderr, or the GPUs of its replicas that
// hold some being used (NVML's utilization at 1% or more: a notebook or a stuck script holding
// GPUs it does not use).
enum class ProgressSource { kCollective, kMetrics, kLogs, kGpus };
inline constexpr EnumName<ProgressSource> kProgressSourceNames[] = {
    {ProgressSource::kCollective, "collective"},
    {ProgressSource::kMetrics, "metrics"},
    {ProgressSource::kLogs, "logs"},
    {ProgressSource::kGpus, "gpus"}};
// "collective", "metrics", "logs", "gpus"
std::string_view ProgressSourceName(ProgressSource source);
// What the watchdog does with a hung job: restart it under its policy (spends one restart), or
// fail it.
enum class HangAction { kRestart, kFail };
inline constexpr EnumName<HangAction> kHangActionNames[] = {{HangAction::kRestart, "restart"},
                                                            {HangAction::kFail, "fail"}};
std::string_view HangActionName(HangAction action);  // "restart", "fail"

inline constexpr std::chrono::milliseconds kDefaultFinishGrace{30'000};
// The longest scheduling.finish_grace a spec may ask for.
inline constexpr std::chrono::milliseconds kMaxFinishGrace{3'600'000};
inline constexpr size_t kMaxAfterJobs = 32;

// What a job of scheduling.after must end as for the job after it to run (Slurm's
// --dependency kinds): SUCCEEDED (afterok, the default); FAILED or CANCELLED (afternotok: a
// fallback, a report of the failure); any final state (afterany: a cleanup, an evaluation of
// whatever was written).
enum class AfterCondition { kSucceeded, kFailed, kEnded };
inline constexpr EnumName<AfterCondition> kAfterConditionNames[] = {
    {AfterCondition::kSucceeded, "succeeded"},
    {AfterCondition::kFailed, "failed"},
    {AfterCondition::kEnded, "ended"}};
std::string_view AfterConditionName(AfterCondition when);  // "succeeded", "failed", "ended"
// One entry of scheduling.after, written "JOB" (it must succeed) or "JOB:CONDITION"
// ("prep", "train:failed", "train:ended").
struct JobDependency {
  std::string job;
  AfterCondition when = AfterCondition::kSucceeded;

  bool operator==(const JobDependency&) const = default;
};
// "prep" or "train:ended" (the condition only when not kSucceeded): ParseJobDependency's input.
std::string FormatJobDependency(const JobDependency& dependency);
// "JOB[:succeeded|failed|ended]"; kInvalidArgument naming what is wrong.
StatusOr<JobDependency> ParseJobDependency(std::string_view text);

// A job array (Slurm's --array, Kubernetes' Indexed Job): `scheduling.array: "0-99%8"` makes the
// coordinator submit one job of each index, its task, named <name>-<index> and carrying
// scheduling.array_index, which the agent hands the replicas as COHORT_ARRAY_INDEX (and
// Kubernetes' JOB_COMPLETION_INDEX); at most `parallelism` tasks are in flight at once, the
// others wait outside the scheduling round (coordinator/job_controller.h, "Arrays"). Text:
// comma-separated N, N-M or N-M:STEP, then optionally %PARALLELISM.
struct ArraySpec {
  std::vector<int> indexes;  // ascending, distinct; empty: no array
  int parallelism = 0;       // the most tasks in flight at once; 0: no bound
  std::optional<int> index;  // a task's own index (scheduling.array_index)

  bool operator==(const ArraySpec&) const = default;
};
inline constexpr size_t kMaxArrayTasks = 1000;  // as Slurm's default MaxArraySize
inline constexpr int kMaxArrayIndex = 99999;
// What an array's tasks store of their job files in all (each task keeps its own): a 1 MiB file
// makes at most 64 tasks, a 64 KiB one 1000.
inline constexpr size_t kMaxArraySpecBytes = 64 << 20;
// An array's name is a label value: at most 63 characters.
inline constexpr size_t kMaxArrayNameLength = 63;
// The labels every task carries (`cohort list -l cohort/array=NAME`); set by the parser from
// scheduling.array_index and the name, never written in a job file: the prefix "cohort/" is
// refused in a job file's labels.
inline constexpr std::string_view kArrayLabel = "cohort/array";
inline constexpr std::string_view kArrayIndexLabel = "cohort/array-index";
inline constexpr std::string_view kReservedLabelPrefix = "cohort/";
// "0-99%8", "1,3,10-20:5%2" (index unset); kInvalidArgument naming what is wrong.
StatusOr<ArraySpec> ParseArraySpec(std::string_view text);
// The canonical text of `array`'s indexes and parallelism: runs of consecutive indexes as N-M.
std::string FormatArraySpec(const ArraySpec& array);

inline constexpr size_t kMaxTopologyLevels = 4;

struct SchedulingSpec {
  std::chrono::seconds timeout = std::chrono::hours(24 * 7);
  int max_restarts = 3;
  // Whether a replica's fall restarts every replica (Vertex's restartJobOnWorkerRestart); unset:
  // as the job's shape says (JobSpec::RestartsWholeJob).
  std::optional<bool> restart_job_on_worker_restart;
  // The longest it may wait at a stretch to be placed (Vertex's scheduling.maxWaitDuration):
  // QUEUED with its dependencies met, at submit, after a restart or a preemption or a resume,
  // it FAILS once it has waited this long, naming what it waited for. 0: it waits for as long as
  // it takes.
  std::chrono::milliseconds max_wait{0};
  // The coordinator's queue the job waits in, and its priority class (coordinator/queue_config.h);
  // the coordinator refuses names it does not know at submit.
  std::string queue = "default";
  std::string priority = "normal";
  // No progress (by `progress`) for this long is a hang; 0: the watchdog leaves the job alone.
  std::chrono::milliseconds hang_timeout{0};
  ProgressSource progress = ProgressSource::kCollective;
  HangAction hang_action = HangAction::kRestart;
  // Once the chief exits 0 the job has SUCCEEDED; the chief and worker replicas still running get
  // this long to exit on their own (a DDP rank in its last barrier or destroy_process_group, or
  // writing its own outputs) before they are stopped. Parameter servers, reducers and evaluators
  // serve the workers: they are stopped once no worker runs. 0: every replica is stopped at once.
  std::chrono::milliseconds finish_grace = kDefaultFinishGrace;
  // The jobs it runs after (Slurm's --dependency): it is placed only once each of them has ended
  // as its condition asks (by default SUCCEEDED), and FAILS when one ends otherwise. Distinct job
  // names, in the order given.
  std::vector<JobDependency> after;
  // Submitted SUSPENDED (Slurm's --hold, Kubeflow's runPolicy.suspend at creation): placed only
  // once `cohort resume` queues it.
  bool hold = false;
  // Node label keys (a rack, a switch, an NVLink domain) the job keeps inside (Kueue's
  // topology-aware scheduling, Slurm's --switches). required_topology K: the whole job, every
  // pool, on nodes that share one value of K; nodes without the label take none of it.
  // preferred_topology: levels tried tightest first, each the same where one of its values has
  // room: [rack, block] tries one rack, then one block, then (without a required_topology)
  // anywhere. With both, the preferred levels come first, each inside one value of the required
  // key. "" / empty: none; distinct keys, at most kMaxTopologyLevels in all.
  std::string required_topology;
  std::vector<std::string> preferred_topology;
  // A job array, or with `array.index` one task of it (see ArraySpec).
  ArraySpec array;
  // The levels tried, tightest first: the preferred ones, then the required one (empty: none).
  std::vector<std::string> TopologyLevels() const {
    std::vector<std::string> levels = preferred_topology;
    if (!required_topology.empty()) levels.push_back(required_topology);
    return levels;
  }

  bool operator==(const SchedulingSpec&) const = default;
};

struct JobSpec {
  std::string name;  // [A-Za-z][A-Za-z0-9_-]{0,127}
  // Instead of a name: the coordinator names the job <name_prefix>-<8 lowercase letters and
  // digits>, unique (a prefix of at most kMaxNamePrefixLength characters of the name's form).
  std::string name_prefix;
  std::string output_dir;  // empty: the coordinator picks <state-dir>/jobs/<name>
  // What the job is, for people and their tools (Kubernetes' and Vertex's job labels): `labels:
  // {team: vision, sweep: lr}`, node labels' syntax, at most kMaxJobLabels. `cohort list -l
  // team=vision` selects by them; they change nothing of how the job runs.
  NodeLabels labels;
  std::vector<WorkerPoolSpec> pools;  // sorted by pool index after parsing
  SchedulingSpec scheduling;

  const WorkerPoolSpec* FindPool(Role role) const;
  int TotalReplicas() const;
  // The worker pool's min_replicas when it is below its replicas (the job is elastic); nullopt
  // for a job that always runs whole.
  std::optional<int> MinWorkers() const;
  // Whether a replica that falls takes every replica of the job into its restart:
  // scheduling.restart_job_on_worker_restart where the job says; otherwise whether its replicas
  // are one collective group (IsOneCollectiveGroup).
  bool RestartsWholeJob() const;
  // More than one chief, worker or reducer replica and no parameter server: the ranks of one
  // all-reduce group (DDP, Horovod, MultiWorkerMirroredStrategy, the Reduction Server), which
  // cannot take back a member that was replaced; a rank restarted alone could never rejoin, and
  // one cut off without a reset (a node lost) leaves the others hanging. Parameter-server workers
  // rejoin alone (Vertex's default); an evaluator is no rank (Incident::TakesTheWholeJob).
  bool IsOneCollectiveGroup() const;
  // Why RestartsWholeJob says what it says, as a restart's event and `cohort status` quote it:
  // "restart_job_on_worker_restart" (true, set), "restart_job_on_worker_restart: false",
  // "its ranks are one group: restart_job_on_worker_restart unset", "a parameter-server job:
  // restart_job_on_worker_restart unset", "restart_job_on_worker_restart unset" (one rank).
  std::string RestartReason() const;
  // What a replica's retryable fall restarts, and why: "the whole job (<RestartReason>)" or "the
  // replica that fell (<RestartReason>)", and where the shape decides and the job has an
  // evaluator, ", an evaluator alone" (Incident::TakesTheWholeJob).
  std::string RestartRule() const;
  // An array to expand into its tasks (scheduling.array without array_index).
  bool IsArray() const {
    return !scheduling.array.indexes.empty() && !scheduling.array.index.has_value();
  }
  // One task of an array (scheduling.array_index): its array's name is its own less "-<index>".
  bool IsArrayTask() const { return scheduling.array.index.has_value(); }
  std::string ArrayName() const;

  bool operator==(const JobSpec&) const = default;  // field by field
};

// Parses YAML text and validates it. `source` names the input in errors ("job.yaml").
StatusOr<JobSpec> ParseJobSpec(std::string_view yaml, std::string_view source = "job spec");
// Reads and parses a file.
StatusOr<JobSpec> LoadJobSpec(const std::string& path);
// Checks every rule of DESIGN.md on an already-built spec (ParseJobSpec calls it).
Status ValidateJobSpec(const JobSpec& spec);
// Canonical YAML for a spec: ParseJobSpec(JobSpecToYaml(s)) equals s.
std::string JobSpecToYaml(const JobSpec& spec);
// The task of index `index` of the array `array` (IsArray, its name set): named <name>-<index>,
// its output_dir, when the array gives one, <output_dir>/<index>, with the labels kArrayLabel and
// kArrayIndexLabel.
JobSpec ArrayTask(const JobSpec& array, int index);
// The array a task (IsArrayTask) was made from, as ArrayTask's inverse: ArrayOfTask(ArrayTask(a,
// i)) == a. `cohort status ARRAY --spec`: the array's file from its task's.
JobSpec ArrayOfTask(const JobSpec& task);
// The job file's text with scheduling.array set to `array`: `cohort submit --array`.
// kInvalidArgument when the text is not a YAML map, or its scheduling is of another kind.
StatusOr<std::string> WithArray(std::string_view yaml, std::string_view array);
// Job names: [A-Za-z][A-Za-z0-9_-]{0,127}.
bool IsValidJobName(std::string_view name);
// The longest name_prefix: a generated name adds "-" and 8 characters.
inline constexpr size_t kMaxNamePrefixLength = 119;
// The job file's YAML text with its name set to `name` (a name_prefix removed): `cohort submit
// --name`. kInvalidArgument when the text is not a YAML map.
StatusOr<std::string> WithJobName(std::string_view yaml, std::string_view name);
// The job file's YAML text with `after` added to its scheduling.after (its own entries first, an
// entry it has already not repeated; one job under two conditions fails validation):
// `cohort submit --after`. kInvalidArgument when the text is not a YAML map, or its scheduling or
// scheduling.after is of another kind.
StatusOr<std::string> WithAfter(std::string_view yaml, const std::vector<JobDependency>& after);
// The job file's YAML text with scheduling.hold set: `cohort submit --hold`. kInvalidArgument
// when the text is not a YAML map, or its scheduling is of another kind.
StatusOr<std::string> WithHold(std::string_view yaml);
// The job file's text with scheduling.priority and scheduling.queue set to these (each only when
// not empty): `cohort update`.
StatusOr<std::string> WithSchedulingClass(std::string_view yaml, std::string_view priority,
                                          std::string_view queue);
// The job file's text with `env` set in the env of every pool that runs a command (its process
// or container; over the file's own values): `cohort submit --env`, as sbatch's --export.
// kInvalidArgument naming what is wrong for a name that is not an environment variable's, when no
// pool runs a command, or when a pool's worker_pools entry, process, container or env is of
// another kind.
StatusOr<std::string> WithEnv(std::string_view yaml, const std::map<std::string, std::string>& env);
// The job file's text with `args` appended to the args of every pool that runs a command:
// `cohort submit FILE -- ARGS`, as sbatch's arguments after the script. kInvalidArgument as
// WithEnv.
StatusOr<std::string> WithArgs(std::string_view yaml, const std::vector<std::string>& args);
// The job file's text with `labels` set in its labels (over the file's own values): `cohort
// submit --label`, as gcloud's --labels. kInvalidArgument naming what is wrong when the text is
// not a YAML map or its labels are of another kind; the labels themselves are checked when the
// result is parsed (at most kMaxJobLabels in all).
StatusOr<std::string> WithLabels(std::string_view yaml, const NodeLabels& labels);
// What a submitter changes in a job file's text before it is parsed: `cohort submit --name,
// --after, --hold, --array, --env, --label, -- ARGS`, and the same fields of the SubmitJob request
// (the Python client's keywords), which the coordinator applies with the same function.
struct SubmitEdits {
  std::string name;                  // the job's name, a name_prefix removed ("": the file's own)
  std::vector<JobDependency> after;  // added to scheduling.after
  bool hold = false;                 // scheduling.hold set
  std::string array;                 // scheduling.array set ("": the file's own)
  std::map<std::string, std::string> env;  // set in every pool's env
  std::vector<std::string> args;           // appended to every pool's args
  NodeLabels labels;                       // set in the job's labels

  bool empty() const {
    return name.empty() && after.empty() && !hold && array.empty() && env.empty() && args.empty() &&
           labels.empty();
  }
};
// At most this many --env entries and -- ARGS each in one submit.
inline constexpr size_t kMaxSubmitEditEntries = 256;
// The job file's text with `edits` applied (WithJobName, WithAfter, WithHold, WithArray, WithEnv,
// WithArgs, WithLabels; the text as it is when `edits` is empty). kInvalidArgument naming the field
// for a name that is not a valid job name, else as those functions.
StatusOr<std::string> ApplySubmitEdits(std::string_view yaml, const SubmitEdits& edits);
// Queue and priority class names: [A-Za-z][A-Za-z0-9_-]{0,63}.
bool IsValidSchedulingName(std::string_view name);
// "7d", "12h", "30m", "45s", "1500ms" (and bare seconds) to a duration.
StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view text);
// True for a name an environment variable may have: [A-Za-z_][A-Za-z0-9_]*.
bool IsValidEnvName(std::string_view name);

}  // namespace cohort
