// The coordinator's model of the cluster: jobs with their replicas and events, and nodes. Jobs are
// durable (the StateStore keeps every job changed in a loop pass, coordinator/state_store.h);
// nodes live in memory and come back when agents re-register (an admin's cordon or drain of a
// node is stored).
//
// Replica life: PENDING with an empty node_id = waiting to be placed; PENDING with a node = launch
// sent; STARTING/RUNNING as the agent reports; then one final state. A replica "holds" its node's
// GPUs, CPUs, memory and its port while it is placed and not final (stop_requested included: the
// process may still be running until the agent reports it gone).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/job_spec.h"
#include "common/node_label_edits.h"
#include "common/schema/cohort_generated.h"
#include "common/status.h"
#include "coordinator/scheduler.h"

namespace cohort::coordinator {

using wire::JobState;
using wire::ReplicaState;

struct ReplicaRecord {
  std::string name;  // "<role>-<index>"
  Role role = Role::kChief;
  int index = 0;
  int attempt = 0;
  bool launched = false;  // some attempt was ever launched (the next placement is attempt + 1)
  ReplicaState state = ReplicaState::PENDING;
  std::string node_id;    // empty: not placed
  std::string last_node;  // where the latest attempt ran (a restart prefers it)
  std::vector<int> gpus;
  int port = 0;
  int exit_code = -1;
  int signal = 0;
  // Exited with a code after a process inside it (torchrun's worker) was killed by this signal
  // (wire ReplicaStatus.cause_signal); judged as `signal` is. 0: none.
  int cause_signal = 0;
  std::string message;
  bool stop_requested = false;
  int64_t state_time_ms = 0;
  // Lost with its node while fencing is on (coordinator/job_controller.h, "Fencing"): the attempt
  // may run there until then, when its agent has surely stopped it; the replica is not placed
  // again before. 0: nothing to wait for.
  int64_t fenced_until_ms = 0;
  // A worker an elastic job runs without (coordinator/job_controller.h, "Elastic jobs"): left out
  // of the job's latest placement, STOPPED, holding nothing; placed again at the job's next
  // placement when there is room.
  bool idle = false;

  int pool() const { return PoolIndex(role); }
  bool placed() const { return !node_id.empty(); }
};

struct JobEventRecord {
  int64_t time_ms = 0;
  std::string message;
};

// JobRecord::waiting_reason_hash of a reason: 0 for none (""), never 0 for another.
size_t WaitingReasonHash(std::string_view reason);

// What every scheduling round reads of every job (a round walks 100,000 queued jobs, and each
// cache line it touches per job costs it) comes first, on one 64-byte line.
struct alignas(64) JobRecord {
  uint64_t seq = 0;  // submit order
  // When it last entered the queue: submitted, requeued (a restart, a preemption), resumed, or
  // its last dependency (scheduling.after) met. While SUSPENDED, when the suspension began.
  int64_t queued_since_ms = 0;
  // Its queue (an index into the coordinator's QueueConfig::queues) and priority value, resolved
  // from spec.scheduling by the placement round (derived, not stored; -1: not resolved yet).
  int queue_index = -1;
  int priority = 0;
  uint32_t shape_id = 0;  // the JobController's ShapeTable id of `demands` (derived, not stored)
  JobState state = JobState::QUEUED;
  // Its output dir lies under the cluster's checked output root: it is placed only on nodes that
  // share that root (coordinator/storage_probe.h). Derived by the JobController, not stored.
  bool needs_shared_storage = false;
  // It was ever placed (PlaceJob; at Restore, a start time or any launched or placed replica).
  // While false no replica holds anything and no start time runs, so a round or a timeout check
  // need not look further. Derived, not stored.
  bool may_hold = false;
  // Its worker pool is elastic (JobSpec::MinWorkers). Derived, not stored.
  bool elastic = false;
  // Some job of its scheduling.after has not SUCCEEDED yet: no round considers it
  // (coordinator/job_controller.h, "Dependencies"). Derived, not stored.
  bool waits_for_jobs = false;
  // A task of an array waiting for a slot (coordinator/job_controller.h, "Arrays"); waits_for_jobs
  // is set with it. Derived, not stored.
  bool waits_for_array_slot = false;
  // Its spec sets scheduling.max_wait: the timers look at it while it is queued. Derived, not
  // stored.
  bool wait_limited = false;
  // WaitingReasonHash(waiting_reason), kept among the fields a round reads anyway: a round that
  // finds a queued job's reason unchanged (most jobs, most rounds) compares this, not the text.
  size_t waiting_reason_hash = 0;
  std::string name;
  // Per replica of its next placement, from spec: every replica, or with `elastic_workers` set,
  // the chief, the first elastic_workers workers and the other pools (derived, not stored).
  std::vector<ReplicaDemand> demands;
  // An elastic job's worker count for its next placement (JobSpec::MinWorkers; the JobController
  // lowers it when the whole job does not fit, see "Elastic jobs"); -1: every worker. Derived,
  // not stored: a coordinator restart asks for every worker again.
  int elastic_workers = -1;
  std::string spec_yaml;
  JobSpec spec;  // parsed from spec_yaml (not stored separately)
  std::string message;
  // Why a QUEUED job is not placed yet, from the latest scheduling round (coordinator/gang_fit.h);
  // shown instead of `message` while it is queued. Not stored: every round sets it again, through
  // SetWaitingReason only.
  std::string waiting_reason;
  int64_t create_time_ms = 0;
  // First placement; the scheduling timeout counts from here (less suspended_ms).
  int64_t start_time_ms = 0;
  // When every replica first ran (its first "running: ..." event, which a job of more events than
  // it keeps loses); 0: never yet. A job runs for the first time once (--notify-on start).
  int64_t first_running_ms = 0;
  // Time spent SUSPENDED after its first placement, before the latest resume
  // (coordinator/job_controller.h, "Suspension"): not counted by the scheduling timeout nor by
  // usage. While SUSPENDED, queued_since_ms is when the suspension began.
  int64_t suspended_ms = 0;
  int64_t end_time_ms = 0;
  int restarts = 0;
  std::string output_dir;
  std::string trial_id;
  std::string study;
  // Who owns it (a cohort user): over CURVE the user its submitter's key is listed under
  // (clients/<user>.pub), with --insecure the user the client claimed (unverified); a study's
  // trial jobs have the study's owner. Empty: none recorded (a job stored before owners were).
  // Decides who may cancel it (coordinator/permissions.h) and the Unix account its replicas run
  // as on the agents.
  std::string owner;
  int master_port = 0;
  int bootstrap_port = 0;
  std::vector<ReplicaRecord> replicas;  // pool order, then index
  std::vector<JobEventRecord> events;

  ReplicaRecord* FindReplica(const std::string& replica_name);
  const ReplicaRecord* FindReplica(const std::string& replica_name) const;
  const WorkerPoolSpec& PoolOf(const ReplicaRecord& r) const;
  bool finished() const;
  // Sets waiting_reason to `reason` unless the hashes show it holds that already; `hash` is
  // WaitingReasonHash(reason) (a round computes it once for the many jobs that share a reason).
  // Two reasons of one 64-bit hash (about 2^-64 for a pair) would keep the older text shown until
  // the reason changes again: a display, never a decision, reads it.
  void SetWaitingReason(const std::string& reason, size_t hash);
  // Why it is queued: the latest round's waiting reason, else `message` (a requeue's, a
  // resume's).
  const std::string& WaitingFor() const {
    return waiting_reason.empty() ? message : waiting_reason;
  }
  // What users are shown of its state (`cohort status`, /api/jobs): while QUEUED, the round's
  // waiting reason (else `message`) and, for a job whose wait is bounded (scheduling.max_wait,
  // its dependencies met), when it gives up: "...; fails at 2026-12-02 14:30:05 UTC unless
  // placed (scheduling.max_wait: 30m)"; else `message`.
  std::string ShownMessage() const;
};

// What a node's agent last reported finding at the output root (the storage check,
// common/storage_marker.h), and the coordinator's verdict on it (coordinator/storage_probe.h).
struct NodeStorage {
  bool reported = false;  // the agent sent a report since it registered
  std::string root;       // the directory it read
  std::string token;      // the token it read there; empty: none
  std::string error;      // why it read none
  bool shared = false;    // it reads the coordinator's marker at the coordinator's path
  std::string verdict;    // "shared", "not shared: <why>", "checking", "no output root"
};

// An admin's setting of a node (`cohort cordon`, `cohort drain`): nothing new is placed on a node
// that has one. Kept by the StateStore, so it survives a coordinator restart and an agent's
// re-registration; `cohort uncordon` clears it. Whether a draining node is drained (no replica
// left) is read from the jobs, not stored.
enum class NodeAdmin { kNone, kCordoned, kDraining };
// "", "cordoned", "draining".
std::string_view NodeAdminName(NodeAdmin admin);
// The inverse of NodeAdminName ("" is kNone); kInvalidArgument for another name.
StatusOr<NodeAdmin> ParseNodeAdmin(std::string_view name);

// The most GPUs a node may have (an agent's --gpus).
inline constexpr int kMaxGpusPerNode = 1024;
// GPU indexes as stored and shown: "3,5" ("" for none). ParseGpuSet is the inverse;
// kInvalidArgument for other text.
std::string FormatGpuSet(const std::set<int>& gpus);
StatusOr<std::set<int>> ParseGpuSet(std::string_view text);

// The note an admin's cordon leaves on a node (`cohort cordon|drain ... --reason TEXT`, Slurm's
// Reason= with its user and time): why, who, since when. A node has one while anything of it (the
// node, or some of its GPUs) is cordoned; NextCordonNote says how each change moves it.
struct CordonNote {
  std::string reason;  // "" when none was given
  std::string by;      // the admin's user; "" when the coordinator knows no users
  int64_t since_ms = 0;
  bool empty() const { return reason.empty() && by.empty() && since_ms == 0; }
  bool operator==(const CordonNote&) const = default;
};

// The longest cordon reason kept (printable UTF-8).
inline constexpr size_t kMaxCordonReasonBytes = 256;
// OK for a reason a cordon may keep; kInvalidArgument naming what is wrong (too long, not UTF-8,
// a control character).
Status CheckCordonReason(std::string_view reason);

// What an admin set on a node, kept by the StateStore across coordinator restarts and the agent's
// re-registrations: its cordon or drain, its label edits (`cohort label`,
// common/node_label_edits.h), the GPUs cordoned alone (`cohort cordon NODE --gpu N`) and the note
// kept with a cordon.
struct NodeSettings {
  NodeAdmin admin = NodeAdmin::kNone;
  NodeLabelEdits labels;
  std::set<int> gpus = {};
  CordonNote note = {};
  bool cordoned() const { return admin != NodeAdmin::kNone || !gpus.empty(); }
  bool empty() const { return !cordoned() && labels.empty() && note.empty(); }
  bool operator==(const NodeSettings&) const = default;
};

// The note a node keeps after an admin's change to it, `after` being its settings once changed
// and `before` its note until then: none once nothing of it is cordoned; `reason` set (with `by`
// and `now_ms`) when the change gave one; else the note it had, or, for a first cordon, one with
// no reason (who and when still tell).
CordonNote NextCordonNote(const NodeSettings& after, const CordonNote& before,
                          const std::string& reason, const std::string& by, int64_t now_ms);

// One thing that happened to a node, as `cohort nodes NODE` lists them under "Events:" (Slurm's
// `sacctmgr show event`, kubectl describe's events): it registered, was LOST and came back, its
// health check or a GPU failed or passed again, an admin cordoned, drained, uncordoned or
// labelled it. `seq` counts the node's events from 1; the newest kNodeEventsKept are kept, in
// memory and in the StateStore, so they survive coordinator restarts.
struct NodeEvent {
  int64_t seq = 0;
  int64_t time_ms = 0;
  std::string text;
  bool operator==(const NodeEvent&) const = default;
};
inline constexpr size_t kNodeEventsKept = 50;
// A node's events, oldest first: never changed once made (a new event makes a new list), so the
// HTTP snapshot shares each node's list with the registry rather than copying it.
using NodeEventList = std::shared_ptr<const std::vector<NodeEvent>>;

struct NodeRecord;
// A node's state as `cohort nodes` and /api/nodes show it: LOST; DRAINING (its agent is shutting
// down, or an admin's drain while replicas still run there); DRAINED (an admin's drain, no replica
// left); CORDONED; UNHEALTHY (its health check fails); READY. `holds_replicas`: some replica holds
// resources there.
std::string NodeStateName(const NodeRecord& node, bool holds_replicas);
// The admin's setting as shown: "", "cordoned", "draining", "drained".
std::string NodeAdminLabel(const NodeRecord& node, bool holds_replicas);

struct NodeRecord {
  std::string node_id;
  std::string address;
  std::string version;  // its agent's (RegisterAgent.version); "" from one that gives none
  // When its agent's process started, by this coordinator's clock (the earliest of its
  // registrations' times less RegisterAgent.uptime_ms); 0: not known.
  int64_t agent_started_ms = 0;
  // Its agent's RegisterAgent.agent_instance, as last registered in this coordinator's life;
  // "": not known (an older agent, or none registered since this coordinator started).
  std::string agent_instance;
  std::vector<wire::GpuInfoT> gpus;
  int cpus = 0;
  int64_t memory_mb = 0;
  NodeLabels agent_labels;  // as its agent registered them
  NodeLabels labels;        // agent_labels with the admin's edits: what selectors match
  int64_t last_heartbeat_ms = 0;
  // When the coordinator last sent its agent what was not an answer (a launch, a stop, a request
  // for stacks): the agent may have heard that after the coordinator last heard it.
  int64_t last_sent_ms = 0;
  bool ready = true;  // false: LOST
  // A LOST node's loss, as the coordinator applies it again after a rolled-back pass: why, and
  // whether its session was ended while its agent still answered (a removed key) rather than
  // because it fell silent. Cleared when it registers again.
  std::string lost_why;
  bool lost_while_answering = false;
  bool draining = false;  // its agent is shutting down: nothing new is placed here
  // Why its agent's health check fails (agent/health_check.h): nothing new is placed here; ""
  // when it passes or the agent runs none.
  std::string unhealthy;
  // Its agent runs the health check again after a replica failed there: the verdict on that
  // failure is not in yet (JobController, "Node faults").
  bool health_rechecking = false;
  // Its GPUs that its agent finds unfit through NVML (agent/nvml.h), index -> why: nothing new is
  // placed on them; the node's other GPUs take work.
  std::map<int, std::string> unhealthy_gpus;
  NodeAdmin admin = NodeAdmin::kNone;  // an admin's cordon or drain: nothing new is placed here
  NodeLabelEdits label_edits;          // an admin's label edits, which `labels` has applied
  // Its GPUs an admin cordoned: nothing new is placed on them; what runs there goes on.
  std::set<int> cordoned_gpus;
  CordonNote cordon_note;            // why, by whom and since when `admin` or `cordoned_gpus` hold
  std::vector<int> listening_ports;  // as the agent last reported: never handed to a replica
  // The network stack its replicas bind ports in (RegisterAgent.port_domain; "address <address>"
  // from an agent that reports none), and the registry's small id for it: nodes with the same one
  // share ports (the Scheduler's "Ports").
  std::string port_domain;
  uint32_t port_domain_id = 0;
  std::string peer;  // ROUTER identity its agent last spoke from (the agent sets its node id)
  std::string key;   // the CURVE key its agent registered with (empty with --insecure)
  NodeStorage storage;

  // A LOST node's loss as JobController::NodeLost takes it: when it was last heard from, for a
  // node that fell silent; nullopt for one lost while it still answered.
  std::optional<int64_t> silent_since_ms() const {
    return lost_while_answering ? std::nullopt : std::optional<int64_t>(last_heartbeat_ms);
  }
  // The last message either way, as far as the coordinator can tell.
  int64_t last_contact_ms() const { return std::max(last_heartbeat_ms, last_sent_ms); }
  // READY, its agent not shutting down, its health check passing, and no cordon or drain: new
  // replicas may go here.
  bool schedulable() const {
    return ready && !draining && unhealthy.empty() && admin == NodeAdmin::kNone;
  }
};

bool IsFinal(ReplicaState s);
bool IsFinal(JobState s);
// Whether a number read from a state file is one of the states: a row that passes its checksum
// with another (written by hand, or by a build with more states) is damage, not a state.
bool IsJobState(int64_t value);
bool IsReplicaState(int64_t value);
// A replica that ended this way may be restarted (exit codes 130, 137, 138, 143, the signals
// behind them (INT, KILL, USR1, TERM), PREEMPTED, LOST, an unrequested STOPPED).
bool IsRetryable(const ReplicaRecord& r);
// A FAILED replica's exit: "exited with code 1", "was killed by signal 9 (SIGKILL)", "failed".
std::string DescribeFailedExit(const ReplicaRecord& r);
// How a replica ended, then the agent's message in parentheses: "exited with code 1 (log:
// ValueError: ...)", "was killed by signal 9 (SIGKILL)", "was preempted", "was lost with its
// node", ...; "exited 0" alone for a success.
std::string DescribeEnd(const ReplicaRecord& r);
// The job's first "running: ..." event still kept (every replica ran), or nullptr: what a
// job_started notice quotes, and first_running_ms of a job stored before that field was.
const JobEventRecord* FirstRunningEvent(const JobRecord& job);
// Its time, 0 without one.
int64_t FirstRunningTimeFromEvents(const JobRecord& job);
// "0s", "90s", "2m", "1500ms", "7d": the largest whole unit (common/config.h's, of milliseconds).
std::string FormatDuration(int64_t ms);

// "<job>/<replica>/<attempt>": one attempt of a replica, as an agent's registration lists what
// still runs there and a fence's end looks it up (JobController::FencedNodeReturned).
std::string AttemptId(const std::string& job, const std::string& replica, int attempt);

// Builds the replica list of a new job from its spec ("chief-0", "worker-0", ...).
std::vector<ReplicaRecord> MakeReplicas(const JobSpec& spec);

// What one replica of `job`'s `pool` asks of a node: its resources, its node selector, its spread
// group (SpreadGroup), its preferred nodes and its job's topology.
ReplicaDemand PoolDemand(const JobSpec& job, const WorkerPoolSpec& pool);
// ReplicaDemand::spread_group of `pool`'s replicas: 0, or its role's (a job has one pool per
// role) when it is one_per_node.
int SpreadGroup(const WorkerPoolSpec& pool);
// Fills job.demands from job.spec, job.replicas and job.elastic_workers.
void FillDemands(JobRecord& job);
// The demands of `job`'s replicas with `workers` workers (-1: every one), in replica order.
std::vector<ReplicaDemand> DemandsWithWorkers(const JobRecord& job, int workers);
// Whether replica `r` of `job` is in its next placement (every one but the workers from
// job.elastic_workers on).
bool InNextPlacement(const JobRecord& job, const ReplicaRecord& r);

// A job as one JSON record, the format of the journal of earlier versions (the state store imports
// such journals once). FromJson re-parses spec_yaml with ParseJobSpec.
std::string JobToJson(const JobRecord& job);
StatusOr<JobRecord> JobFromJson(const std::string& text);

}  // namespace cohort::coordinator
