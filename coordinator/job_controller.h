// JobController is the job state machine of the coordinator (DESIGN.md "Jobs" and "Failure
// attribution"). It owns every JobRecord and turns events (a submit, a cancel, a replica's
// reported state, a lost node, a placement, the passing of time) into changed jobs and commands
// (launch this replica, stop that one, this job ended). It has no sockets and no clock of its
// own: every event carries `now_ms`, and the Coordinator sends what TakeCommands() returns and
// stores what TakeDirty() names, the way StudyController hands back StudyActions.
//
// States:
//   QUEUED -> PENDING (placed, launches sent) -> RUNNING (every replica reported RUNNING)
//   -> SUCCEEDED when the chief exits 0 (whatever its other replicas do later). The chief and
//      worker replicas still running get scheduling.finish_grace (30 s by default) to exit on their
//      own, as DDP ranks finishing their last step do; then they are stopped (STOPPED, not a
//      failure). Parameter servers, reducers and evaluators are stopped once no worker runs; a
//      replica not yet running, at once. Each later end is an event ("worker-1 attempt 0 exited 0
//      after the job ended"). FAILED on a permanent failure, on a spent restart budget, or on
//      scheduling.timeout (counted from the first placement, less the time suspended); cancel ->
//      CANCELLING (stops sent) -> CANCELLED once no replica of the job holds resources.
//   Any state not finished nor CANCELLING -> SUSPENDED (Suspend) -> QUEUED (Resume).
//
// Failure attribution. A replica that ends retryably (exit 130/137/138/143, SIGINT/KILL/USR1/TERM,
// an exit of torchrun inside it after such a signal killed one of its workers (cause_signal),
// PREEMPTED, LOST, a STOPPED the coordinator did not ask for) opens an *incident* of its job: one
// restart is spent, and the replica (or, where the job restarts whole, JobSpec::RestartsWholeJob:
// restart_job_on_worker_restart, or unset, a job of one all-reduce group, the whole job) starts
// again as attempt+1. Every later failure of a replica that was already running when the incident
// opened (same attempt), within `incident_window_ms` of the incident's last failure, is
// *collateral*: whatever its exit code, it is attributed to the incident, spends nothing, and is
// restarted with it. So a node loss, a preemption or a killed rank that takes every other DDP rank
// down with an ordinary exit 1 spends one restart, and the incident's event names the cause and
// the consequences ("restart 1/3: node-b lost (worker-0); chief-0, worker-1 exited with code 1 as
// a consequence").
//   Where the job does not restart whole (restart_job_on_worker_restart: false, or unset in a
// parameter-server job), the replicas that fell in an incident (its cause and its collateral)
// restart, each as attempt+1, and the others keep running. Unset in a job of one group, an
// evaluator's incident restarts the evaluator alone, and takes the whole job once a rank falls
// in it (Incident::TakesTheWholeJob).
//
// Preemption by the scheduler (PreemptJob) is not a failure: every replica is stopped (SIGTERM, the
// stop grace, SIGKILL; a trainer checkpoints on SIGTERM), the job goes back to QUEUED, and once its
// replicas are gone it is placed again like a new job (each replica as attempt+1, resuming from
// its newest checkpoint). No restart is spent and no incident opens; the replicas so stopped end
// PREEMPTED. The preemptor waits (NotePreemption) until its victims hold nothing, then is placed
// first. This bookkeeping lives in memory: after a coordinator restart the stopping replicas end
// STOPPED and the preemptor competes like any queued job.
//
// Suspension (`cohort suspend`, `cohort resume`; Kubeflow's runPolicy.suspend, Slurm's
// suspend/requeue): a user or an admin takes a job off the cluster for a while without ending it.
// Its replicas stop as a preemption stops them (SIGTERM, the stop grace, SIGKILL: a trainer
// checkpoints on SIGTERM; they end STOPPED), and the job stays SUSPENDED, placed nowhere and
// asking for nothing, until resumed; then it is QUEUED like a preempted job and placed again when
// its replicas are gone and there is room, each replica as attempt+1 resuming from its newest
// checkpoint. No restart is spent, an incident or held verdict of it is dropped (what its
// replicas do once asked to stop is no failure), an elastic job asks for every worker again,
// and the time suspended (JobRecord::suspended_ms) counts toward neither the scheduling timeout
// nor usage. Cancel works on a suspended job as on any other. Stored: a coordinator restart keeps
// a job suspended. A job submitted with scheduling.hold (`cohort submit --hold`, Slurm's --hold)
// is SUSPENDED from its submission.
//
// Dependencies (scheduling.after, Slurm's --dependency). A job submitted to run after others,
// each once it has SUCCEEDED (afterok, the default), FAILED or been CANCELLED (`JOB:failed`,
// afternotok) or ended at all (`JOB:ended`, afterany), stays QUEUED, outside every scheduling
// round (JobRecord::waits_for_jobs; so it holds no place in its queue's reservation either),
// until each of them has ended so; an event says when each does. Each must be known and not
// ended (or cancelling) otherwise at submit (CheckAfter). When one ends otherwise the job ends at
// once, naming it: FAILED when it waited for a success, CANCELLED (not needed) when it waited for
// a failure that did not come; and so in turn do the jobs after it, as they ask.
// Derived from the jobs at every start: a job named there that is gone (or that was submitted
// after the waiting job: the name's second owner) was deleted after it ended, and only an end as
// asked leaves a job waiting on it (any other ends the waiting job in the same store write), so
// it counts as met. An entry may name an array (see "Arrays"; Slurm's dependency on an array
// job): it has ended once every task has, SUCCEEDED when each did, else FAILED when one did,
// else CANCELLED; `sweep:failed` so runs when some task did not succeed.
//
// Arrays (scheduling.array, Slurm's --array, Kubernetes' Indexed Job). Each task of an array is a
// job of its own (the ClientService submits them all at once); with a parallelism P at most P of
// them are in flight, the others QUEUED outside every round as a job waiting for others is
// (JobRecord::waits_for_array_slot, with waits_for_jobs), until a task in flight ends: the task
// of the lowest index waiting then takes its slot. In flight is every task not ended and not
// waiting for a slot, suspended ones included (a slot is given back by ending, not by pausing).
// Derived from the jobs at every start: a task ever placed is in flight, the slots left go to the
// others by index, as before the restart.
//
// Waiting (scheduling.max_wait, Vertex's maxWaitDuration). A job that sets it FAILS once it has
// been QUEUED that long at a stretch, its dependencies met (JobRecord::queued_since_ms: from its
// submit, the restart or preemption that requeued it, its resume, or its last dependency met),
// naming what it waited for (the round's waiting reason). Each wait is bounded alone: a job
// placed once may wait as long again after a restart. Checked by the timers once the agents had
// a heartbeat timeout to register after a coordinator start (before that, every job is waiting
// for them); the time the coordinator was down counts, as the job did wait.
//
// Held verdicts. Collateral can reach the coordinator before its cause: a rank whose peer's node
// died exits 1 at once, while the node is declared lost only after heartbeat_timeout. So a
// permanent-looking end (exit 1, 2, ...) of a replica in a job of several replicas is not judged
// at once: the verdict is held until every node of the job has been heard from at least
// `heartbeat_interval_ms` after the end was reported (an agent reports an exit in the same loop
// pass that reaps it and before its next heartbeat, on one ordered connection, so a cause on a
// live node arrives first), or until an incident opens (the end is then collateral). A node that
// stays silent is declared lost within heartbeat_timeout, which opens an incident; so a verdict is
// held at most heartbeat_timeout plus one interval, and about one interval (1 s by default) when
// every node is healthy. A genuinely permanent failure still fails the job, after that interval,
// or at once when no other replica of the job still runs; either way the job's message names the
// first failure held (held in the order reported; after a restart, in the order they ended), not
// the rank that fell with it last.
// Held verdicts and incidents live in memory: after a coordinator restart a held failure is held
// again from the restart.
//
// Node faults. An agent may run a health check (agent/health_check.h; NodeRecord::unhealthy says
// why its node fails it). A permanent-looking end on a node whose check fails is the node's fault,
// not the job's: it opens an incident like a retryable end ("restart 1/3: ... because worker-0
// attempt 0 exited with code 1 on node b, which fails its health check: GPU 0: XID 79"), and the
// replica, or the whole job, starts again on another node (nothing new is placed on that one).
// The same holds for a GPU its agent finds unfit through NVML (NodeRecord::unhealthy_gpus): a
// permanent-looking end of a replica pinned to it is the GPU's fault ("... exited with code 1 on
// GPU 3 of node b, which NVML finds unfit: 1 uncorrectable ECC error ..."), and it starts again
// on other GPUs (nothing new is placed on that one; the node's others take work). The agent
// samples its GPUs again after such a failure, as it reruns its check.
// So that a failure is judged by a verdict taken after it, the agent runs its check again when a
// replica fails there, says so in the failure's report (ReplicaStatus.health_rechecking) and in
// its heartbeats until that run has ended (NodeRecord::health_rechecking); meanwhile a failure
// held on that node is not judged, nor, once no other replica runs, is the job's last failure. A
// failure held longer than twice heartbeat_timeout is judged anyway: a health check slower than
// that (the agent's health-check-timeout, 15 s by default, bounds a run) holds a job no longer.
//
// Launches into silence. An agent can report its replica's end and die (or restart) a moment later;
// until the heartbeat timeout the coordinator still takes its node for a live one, and a restart
// may be placed there (a replica prefers its last node). Such a launch, sent after the node was
// last heard from and gone before any word of it came back (its replica still PENDING; the node
// lost, or registered again without it), never ran: its loss opens an incident that spends no
// restart ("relaunch (no restart spent): ..."), so that the one thing that happened, the first end,
// is the only restart the job pays for. The replica, or in a job that restarts whole the whole
// job, is placed again, and what falls with it is collateral as in any incident. An attempt
// its node acknowledged, or one whose node was lost while it still answered (its session ended),
// spends a restart as any loss does; when a node takes both kinds down at once, one that ran opens
// the incident.
//
// Fencing. A node declared lost may only have lost its way to the coordinator (a partition): its
// replicas may still run, and write the checkpoints their restarts resume from. With
// fence_after_ms set, every agent stops all its replicas once it has heard nothing from the
// coordinator for that long (SIGTERM, fence_grace_ms, SIGKILL), and a replica lost with its node
// (ReplicaRecord::fenced_until_ms) is placed again only once its agent has surely done so: from
// the last message between them either way (its agent may have heard a launch or a stop after its
// own last word arrived, the partition being one-way), fence_after_ms, the grace and two heartbeat
// intervals (for the reply to its last heartbeat, its loop, the reaping and the clocks' rates).
// When that time has passed by the node's loss, nothing waits. A node that never registers again
// after a coordinator restart counts from the restart (no agent heard this coordinator before).
// So at most one attempt of a replica runs at a time, even across a partition, at the price of
// that wait after a node loss; a real loss and a partition look the same from here, until the
// node is heard from again: once its agent registers again not running the held attempt, or
// reports that attempt ended, the replica is placed at once (FencedNodeReturned,
// FencedAttemptEnded). The hold is stored with the replica and outlives a coordinator restart.
//
// Elastic jobs. A job whose worker pool sets min_replicas (below its replicas; such a job restarts
// whole, RestartsWholeJob) may run with fewer workers than it asks for, as torchrun's
// --nnodes MIN:MAX and Kubeflow's elastic policy allow: every placement asks for all of them, and
// the placement round (coordinator/placement_round.h) lowers a queued job's ask
// (JobRecord::elastic_workers, ShrinkElastic) to what fits, never below min_replicas, once it has
// waited the settle time. The workers left out are `idle` (STOPPED, holding nothing; the cluster
// environment of the others leaves them out: WORLD_SIZE counts the workers that run). A running
// job with idle workers grows (GrowElastic) when the round finds room for more and no queued job
// waits for room: the whole job restarts from its checkpoint at the larger size, spending no
// restart. A restart, a preemption or a growth asks for every worker again. Every replica of a
// placement of a job that restarts whole runs the same attempt number, the job's next (torchrun's
// workers share one restart count): a worker idle during an attempt skips that number.
//
// Thread safety: none; the coordinator loop calls it. Lifetime: `health` must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/job_spec.h"
#include "coordinator/incident.h"
#include "coordinator/scheduler.h"
#include "coordinator/state.h"

namespace cohort::coordinator {

// When the coordinator last heard from a node (any message), as the job controller needs it to
// hold and release verdicts. NodeRegistry implements it.
class NodeHealth {
 public:
  virtual ~NodeHealth() = default;
  // nullopt: the node is unknown or LOST.
  virtual std::optional<int64_t> LastHeardMs(const std::string& node_id) const = 0;
  // Why the node's health check fails as its agent last said; "" when it passes, the node runs
  // none, or it is unknown (the default: no node has a check).
  virtual std::string Unhealthy(const std::string& /*node_id*/) const { return ""; }
  // Its GPUs that its agent finds unfit (NodeRecord::unhealthy_gpus), index -> why.
  virtual std::map<int, std::string> UnhealthyGpus(const std::string& /*node_id*/) const {
    return {};
  }
  // Its agent runs the check again after a replica failed there (its verdict is not in yet).
  virtual bool HealthRechecking(const std::string& /*node_id*/) const { return false; }
};

// Send the current attempt's launch of `replica` to the node it is placed on.
struct LaunchCommand {
  std::string job;
  std::string replica;
  // The job is placed whole (PlaceJob), or every other replica of it holds nothing or is placed
  // but not started (PlaceReplica: the replicas an incident took, placed again one by one): no
  // process of the job runs, so the agent may set aside torn checkpoints
  // (LaunchReplica.others_stopped).
  bool others_stopped = false;
};

// Ask `node_id`'s agent to stop one attempt (sent only while the node is ready; a node that
// registers again is told at reconciliation).
struct StopCommand {
  std::string node_id;
  std::string job;
  std::string replica;
  int attempt = 0;
  std::string reason;
};

struct ControllerCommands {
  std::vector<LaunchCommand> launch;
  std::vector<StopCommand> stop;
  std::vector<std::string> ended;  // jobs that reached a final state (studies hear of them)
  // Jobs all of whose replicas ran for the first time, and restarts spent (the job, and its
  // incident's event as it opened): the coordinator's notices (--notify-on).
  std::vector<std::string> started;
  std::vector<std::pair<std::string, std::string>> restarted;

  bool empty() const {
    return launch.empty() && stop.empty() && ended.empty() && started.empty() && restarted.empty();
  }
};

struct JobControllerOptions {
  // Parent of the output dirs of jobs that name none: <default_output_base>/<job>.
  std::string default_output_base;
  int64_t heartbeat_timeout_ms = 10'000;
  // How often agents heartbeat (the interval the coordinator hands them).
  int64_t heartbeat_interval_ms = 1'000;
  // The output root the storage check verifies (coordinator/storage_probe.h); empty: none. Jobs
  // whose output dir lies under it need nodes that share it (JobRecord::needs_shared_storage).
  std::string checked_output_root;
  // Fencing (see "Fencing"): the agents' --fence-after (0: off) and the grace they stop with.
  int64_t fence_after_ms = 0;
  int64_t fence_grace_ms = 30'000;
  // When this coordinator started: no agent has heard from it since before then.
  int64_t started_ms = 0;
};

class JobController {
 public:
  JobController(JobControllerOptions options, const NodeHealth* health);

  // ---- recovery: Restore every stored job, then FinishRestore once.
  void Restore(JobRecord job);
  void FinishRestore(int64_t now_ms);

  // ---- events
  // Whether `spec`'s scheduling.after may be waited for (see "Dependencies"): kNotFound for a job
  // not known, kFailedPrecondition for one that ended (or is cancelling) otherwise than asked.
  Status CheckAfter(const JobSpec& spec) const;
  // A new job, QUEUED (SUSPENDED with scheduling.hold). The name must be free (callers check with
  // FindJob), and its scheduling.after checked (CheckAfter).
  JobRecord& Submit(JobSpec spec, const std::string& yaml, int64_t now_ms);
  // The record Submit would make of `spec`, QUEUED, kept by nobody (a dry run's,
  // coordinator/placement_round.h PreviewPlacement): its seq the next one, its shape not interned.
  JobRecord Draft(JobSpec spec, const std::string& yaml, int64_t now_ms) const;
  // What a draft of a job with scheduling.after would wait for ("waiting for job a to succeed
  // (scheduling.after)"), or "" when every job it names has ended as asked.
  std::string AfterWaitOf(const JobRecord& job) const;
  // The tasks of array `array` (see "Arrays"), by index: (index, job name); empty when it has
  // none.
  const std::vector<std::pair<int, std::string>>& ArrayTasks(const std::string& array) const;
  // Every array with a task, by name: its tasks as ArrayTasks has them.
  const std::map<std::string, std::vector<std::pair<int, std::string>>>& Arrays() const {
    return arrays_;
  }
  // What a job held at submit (scheduling.hold) says while SUSPENDED.
  static std::string HeldAtSubmitMessage(const std::string& name);
  // Moves `job` to the priority class and queue given (each only when not empty; names the
  // caller checked), in its spec and its stored file, with an event naming the change and `by`;
  // the next round places and preempts by them (schedule_needed). FAILED_PRECONDITION for a job
  // that ended or is being cancelled; OK, and no event, when nothing changes.
  Status UpdateScheduling(JobRecord& job, const std::string& priority, const std::string& queue,
                          const std::string& by, int64_t now_ms);
  // CANCELLING, then CANCELLED once nothing of it holds resources. A SUCCEEDED job whose ranks
  // are still finishing (scheduling.finish_grace) stays SUCCEEDED; they are stopped now. Any
  // other finished job: nothing.
  void Cancel(JobRecord& job, const std::string& reason, int64_t now_ms);
  // The agent running `r`'s current attempt reported a state (never backwards; a final state
  // ends the attempt). `cause_signal`: ReplicaRecord::cause_signal of a failure. A RUNNING report
  // with a message (what the agent did before the start) is also an event.
  void ApplyReplicaStatus(JobRecord& job, ReplicaRecord& r, ReplicaState state, int exit_code,
                          int signal, const std::string& message, int64_t now_ms,
                          int cause_signal = 0);
  // Every live replica on `node_id` is LOST (STOPPED when a stop was asked). `silent_since_ms`:
  // when the node was last heard from, for a node lost because it fell silent; nullopt for one
  // lost while it still answered. Launches sent since then never reached it (see "Launches into
  // silence"). `last_contact_ms`: the last message either way (NodeRecord::last_contact_ms), which
  // a fence counts from (see "Fencing"); nullopt: `silent_since_ms`, else now.
  void NodeLost(const std::string& node_id, const std::string& why, int64_t now_ms,
                std::optional<int64_t> silent_since_ms,
                std::optional<int64_t> last_contact_ms = std::nullopt);
  // `node_id` registered again reporting `reported` (job, replica) current attempts: the live
  // replicas placed there that it did not report are gone (LOST, or STOPPED when asked to stop).
  // `last_heard_ms`: when the node was last heard from before this registration (nullopt: not
  // known); a launch sent since then that it does not report never ran (see "Launches into
  // silence").
  void Reconcile(const std::string& node_id,
                 const std::set<std::pair<std::string, std::string>>& reported, int64_t now_ms,
                 std::optional<int64_t> last_heard_ms);
  // `node_id` reports that the job's chief succeeded in attempt `attempt`, an attempt this
  // coordinator's state never placed (newer than its own record of the chief: a state restored
  // from a backup older than that run). The job ends SUCCEEDED as the chief's exit 0 ends it,
  // rather than running again; the caller has matched the job by name and create time. Ended jobs
  // are left alone.
  void ChiefSucceededUnrecorded(JobRecord& job, const std::string& node_id, int attempt,
                                int64_t now_ms);
  // `node_id` registered again; `live` names the attempts it still runs (AttemptId):
  // the replicas held for a fence on it whose attempt is not among them are placed now.
  void FencedNodeReturned(const std::string& node_id, const std::set<std::string>& live,
                          int64_t now_ms);
  // `node_id` reports `attempt` of job/replica ended, an attempt the job no longer runs: a fence
  // held for it is over.
  void FencedAttemptEnded(const std::string& node_id, const std::string& job,
                          const std::string& replica, int attempt, int64_t now_ms);
  // Timers (the coordinator calls it about once a second): job timeouts, and (once
  // `registration_grace_over`) replicas on nodes that never registered after a coordinator
  // restart (held from options.started_ms, see "Fencing") and jobs queued past their
  // scheduling.max_wait (see "Waiting").
  void CheckTimeouts(int64_t now_ms, bool registration_grace_over);
  // Judges the held verdicts whose nodes have all been heard from since (every loop pass; it
  // costs nothing while none is held).
  void ReleaseVerdicts(int64_t now_ms);
  // The watchdog found the RUNNING job hung (coordinator/watchdog.h), `stuck` naming the replicas
  // that hold it: `message` becomes an event; then, with scheduling.hang_action: fail, the job
  // fails; else the whole job restarts as one incident that spends one restart (a rank that
  // never entered an operation cannot join its peers inside it, so a hang never restarts one
  // replica alone), or fails when the budget is spent. With a `fail_reason` (a queue's
  // gpu-idle-limit) it fails with that message whatever its hang_action.
  void Hang(JobRecord& job, const std::vector<std::string>& stuck, const std::string& message,
            int64_t now_ms, const std::string& fail_reason = "");
  // Records `message` as an event of the job (the watchdog's notes).
  void Note(JobRecord& job, const std::string& message, int64_t now_ms) {
    AddEvent(job, message, now_ms);
  }
  // Records `message` as Note does, but what a person or a script may ask for again and again
  // (`cohort exec`, `cohort stacks`) folds into an equal event among the job's last
  // kRepeatWindow: that one moves to the end, at this time, as "MESSAGE (N times)". A script
  // that runs `cohort exec --all` every minute leaves one event per replica, not a thousand
  // that push the job's history (its placement, its restarts) out of the kept 1000.
  static constexpr size_t kRepeatWindow = 64;
  void NoteRepeatable(JobRecord& job, const std::string& message, int64_t now_ms);

  // Moves a running job off its nodes without counting it a failure (see "Preemption"): `reason`
  // ("preempted by job X (priority high)") goes into its events and its replicas' stop. Nothing
  // happens to a job that is not PENDING or RUNNING.
  void PreemptJob(JobRecord& job, const std::string& reason, int64_t now_ms);
  // `preemptor` stopped the jobs named `victims` to run: `event` goes into its events ("preempted
  // job Y to run"), and it waits for them.
  void NotePreemption(JobRecord& preemptor, const std::vector<std::string>& victims,
                      const std::string& event, int64_t now_ms);
  // See "Suspension": suspends a job not finished (nor CANCELLING; kFailedPrecondition naming
  // its state), or queues a suspended one again; `reason` ("suspended by alice") becomes an
  // event, its message and its replicas' stop. A job already SUSPENDED (Suspend) or not
  // SUSPENDED (Resume) is left as it is.
  Status Suspend(JobRecord& job, const std::string& reason, int64_t now_ms);
  Status Resume(JobRecord& job, const std::string& reason, int64_t now_ms);
  // The jobs `job` preempted and waits for (empty when none, or once it was placed).
  const std::vector<std::string>& PreemptedFor(const JobRecord& job) const;
  // Every job that preempted others and has not been placed since: preemptor -> its victims.
  const std::map<std::string, std::vector<std::string>>& preemptors() const {
    return preempted_for_;
  }

  // ---- placement (PlacementRound)
  // A restarting replica of a running job got a slot; its attempt+1 is launched.
  void PlaceReplica(JobRecord& job, ReplicaRecord& r, const std::string& node_id,
                    std::vector<int> gpus, int port, int64_t now_ms);
  // A queued job got every replica placed (slots[i] for replicas[i]).
  struct Slot {
    std::string node_id;
    std::vector<int> gpus;
    int port = 0;
  };
  void PlaceJob(JobRecord& job, const std::vector<Slot>& slots, int master_port, int bootstrap_port,
                int64_t now_ms);
  // Elastic jobs (see "Elastic jobs"): the queued `job` asks for `workers` workers from now on
  // (within min_replicas and its replicas); nothing for a job that is not elastic or not queued.
  void ShrinkElastic(JobRecord& job, int workers);
  // The running elastic `job` restarts whole with `workers` workers (`why`: the room found, for
  // its event); spends no restart. Nothing unless it runs fewer now and every replica it runs
  // is RUNNING (an end is judged first: a held verdict is never lost to a growth).
  void GrowElastic(JobRecord& job, int workers, const std::string& why, int64_t now_ms);
  // Its worker pool's replicas; the workers its latest placement runs (not idle).
  static int ElasticMaxWorkers(const JobRecord& job);
  static int ElasticWorkersRunning(const JobRecord& job);
  // A running job's chief restarted alone on a host where its master and bootstrap ports are
  // taken: these are its ports from now on (launches from now on carry them).
  void SetJobPorts(JobRecord& job, int master_port, int bootstrap_port, int64_t now_ms);
  // Sets the job's or replica's waiting message (journaled only when it changed).
  void SetWaitingMessage(JobRecord& job, const std::string& message);
  void SetWaitingMessage(JobRecord& job, ReplicaRecord& r, const std::string& message);
  // Forgets a finished job whose replicas hold nothing (`cohort delete`, retention): kNotFound,
  // or kFailedPrecondition naming its state. The name is free again; TakeDeleted names it (the
  // store removes its rows) and it counts as dirty (a failed commit reads it back).
  Status Delete(const std::string& name);

  // ---- queries
  JobRecord* FindJob(const std::string& name);
  const JobRecord* FindJob(const std::string& name) const;
  const std::map<std::string, std::unique_ptr<JobRecord>>& jobs() const { return jobs_; }
  // Unfinished jobs in submit order: (seq, job). A vector, not a tree: a scheduling round walks
  // every entry (100,000 queued jobs), and a walk over a tree's nodes costs a cache miss each.
  const std::vector<std::pair<uint64_t, JobRecord*>>& active() const;
  // Finished jobs some replica of which may still hold resources (pruned as they stop).
  std::vector<const JobRecord*> EndedHolding();
  static bool HoldsResources(const ReplicaRecord& r) { return r.placed() && !IsFinal(r.state); }
  static bool AnyHolding(const JobRecord& job);
  // It is queued past its scheduling.max_wait (see "Waiting").
  static bool WaitedTooLong(const JobRecord& job, int64_t now_ms);
  // Replicas whose end awaits a verdict (see "Held verdicts"), as "job/replica".
  std::vector<std::string> HeldVerdicts() const;
  // Restarts spent since this controller was made, by the cause of their incident: "preemption",
  // "node_loss", "node_health", "exit_code" (a retryable exit or signal), "stopped" (an
  // unrequested stop), "hang" (the watchdog's verdict).
  const std::map<std::string, uint64_t>& restarts_by_cause() const { return restarts_by_cause_; }
  // Hang verdicts acted on since this controller was made (Hang), by what became of the job:
  // "restart" (a restart spent), "fail" (scheduling.hang_action: fail, or no restart left),
  // "gpu_idle_limit" (failed by its queue's gpu-idle-limit).
  const std::map<std::string, uint64_t>& hangs_by_outcome() const { return hangs_by_outcome_; }
  // Incidents that spent nothing since this controller was made: launches into silence placed
  // again (see "Launches into silence").
  uint64_t relaunches() const { return relaunches_; }
  // Replicas held for a fence at `now_ms` (see "Fencing"): lost with their node, not placed again
  // until its agent has surely stopped them. Reads only the jobs that had such a hold.
  size_t FenceHeldReplicas(int64_t now_ms) const;
  // Since this controller was made: placements of elastic jobs with idle workers, and growths
  // (see "Elastic jobs").
  uint64_t elastic_shrinks() const { return elastic_shrinks_; }
  uint64_t elastic_grows() const { return elastic_grows_; }
  // Takes over `from`'s counts (the coordinator's rollback replaces the controller).
  void CarryCountersFrom(const JobController& from) {
    restarts_by_cause_ = from.restarts_by_cause_;
    hangs_by_outcome_ = from.hangs_by_outcome_;
    relaunches_ = from.relaunches_;
    elastic_shrinks_ = from.elastic_shrinks_;
    elastic_grows_ = from.elastic_grows_;
  }

  // ---- outputs
  ControllerCommands TakeCommands();
  std::set<std::string> TakeDirty();       // names of the jobs changed since the last call
  std::vector<std::string> TakeDeleted();  // names of the jobs deleted since the last call
  bool TakeScheduleNeeded();               // resources came free or a job needs placing

 private:
  struct Held {
    std::string replica;
    int attempt = 0;
    int64_t since_ms = 0;
  };

  // `never_ran`: its launch went to a node already silent (see "Launches into silence").
  void OnReplicaEnded(JobRecord& job, ReplicaRecord& r, int64_t now_ms, bool never_ran = false);
  // The end of `r` is permanent-looking: hold the verdict, or, once no other replica runs, fail
  // the job naming the first failure held (or `r`).
  void JudgeFailure(JobRecord& job, ReplicaRecord& r, int64_t now_ms);
  // FAILED, "<cause> attempt N <how it ended> (permanent failure)", then the other failures of
  // `held` ("; then chief-0, worker-1 exited with code 1").
  void FailPermanently(JobRecord& job, const ReplicaRecord& cause, const std::vector<Held>& held,
                       int64_t now_ms);
  bool IsCollateral(const JobRecord& job, const ReplicaRecord& r, int64_t now_ms) const;
  // `spend`: the incident spends a restart (false: a launch into silence). `node_fault`: the
  // cause failed on a node whose health check fails (NodeFault), which the event names.
  void OpenIncident(JobRecord& job, ReplicaRecord& cause, int64_t now_ms, bool spend,
                    const std::string& node_fault = "");
  // "node b, which fails its health check: <why>" when `r`'s node's check fails, "GPU 3 of node
  // b, which NVML finds unfit: <why>" when one of its GPUs is unfit, else "".
  std::string NodeFault(const ReplicaRecord& r) const;
  // A node of one of the `held` failures is still taking its health verdict.
  bool AwaitsHealthVerdict(const JobRecord& job, const std::vector<Held>& held) const;
  void AddCollateral(JobRecord& job, ReplicaRecord& r, int64_t now_ms);
  void ReleaseHeld(JobRecord& job, int64_t now_ms);
  void NoteConsequence(JobRecord& job, const ReplicaRecord& r, bool restarts, int64_t now_ms);
  bool HeardFromAllNodesSince(const JobRecord& job, int64_t since_ms) const;

  // The live replicas of `job` on `node_id` that `gone` picks went with their node (NodeLost,
  // Reconcile): STOPPED (`stopped_why`) when a stop was asked, else LOST (`lost_why`). Those
  // that ran go first: one of them, not a launch into silence, opens the incident.
  // `fenced_until_ms`: ReplicaRecord::fenced_until_ms of those (0: they surely stopped). True
  // when it ended any.
  bool EndGoneReplicas(JobRecord& job, const std::string& node_id,
                       const std::function<bool(const ReplicaRecord&)>& gone,
                       const std::string& lost_why, const std::string& stopped_why,
                       std::optional<int64_t> silent_since_ms, int64_t now_ms,
                       int64_t fenced_until_ms = 0);
  // With fencing on: when the agent of a node whose last message either way was at
  // `last_contact_ms` has surely stopped what it ran (see "Fencing"); 0 with fencing off.
  int64_t FencedUntil(int64_t last_contact_ms) const;
  // Sets r's fenced_until_ms to `until` (0: none) and notes the job among fenced_jobs_.
  void HoldForFence(JobRecord& job, ReplicaRecord& r, int64_t until);
  // The replicas of `job` lost on `node_id` wait for `until`: an event says so.
  void NoteFenceWait(JobRecord& job, const std::string& node_id, int64_t until, int64_t now_ms);
  // Ends `r`'s fence (its node said its attempt is gone): placed now, and an event says why.
  void EndFence(JobRecord& job, ReplicaRecord& r, const std::string& why, int64_t now_ms);
  void RestartReplica(JobRecord& job, ReplicaRecord& r, int64_t now_ms);
  void RestartJob(JobRecord& job, int64_t now_ms);
  // Back to QUEUED: stops every replica (`stop_reason`), sets its message and queue time, and
  // asks for `elastic_workers` workers next (-1: every one). RestartJob, PreemptJob, GrowElastic.
  void Requeue(JobRecord& job, const std::string& stop_reason, std::string message,
               int elastic_workers, int64_t now_ms);
  // job.elastic_workers = `workers` (-1: every worker), with its demands and shape.
  void SetElasticWorkers(JobRecord& job, int workers);
  void FinishJob(JobRecord& job, JobState state, const std::string& message, int64_t now_ms);
  // Stops every replica of `job` not ended and not `spare`d: sends the stop of those placed, marks
  // those never placed STOPPED. Returns how many.
  int StopReplicas(JobRecord& job, const std::string& reason, int64_t now_ms,
                   const std::function<bool(const ReplicaRecord&)>& spare = nullptr);
  static bool AskedToStop(const ReplicaRecord& r) { return r.stop_requested; }
  // A chief or worker replica running, not asked to stop: one a SUCCEEDED job waits for.
  static bool Finishing(const ReplicaRecord& r);
  // A SUCCEEDED job (see "States"): stops what need not wait any longer. Its finishing replicas
  // until scheduling.finish_grace after its end, and while any of them runs, its servers; every
  // other replica at once. Idempotent; derived from the records alone, so a coordinator restart
  // keeps the grace.
  void SettleSucceeded(JobRecord& job, int64_t now_ms);
  void SendStop(JobRecord& job, ReplicaRecord& r, const std::string& reason);
  void MaybeFinishCancel(JobRecord& job, int64_t now_ms);
  void MaybeRunning(JobRecord& job, int64_t now_ms);
  void SetReplicaState(ReplicaRecord& r, ReplicaState s, const std::string& message,
                       int64_t now_ms);
  void AddEvent(JobRecord& job, const std::string& message, int64_t now_ms);
  void ReplaceEvent(JobRecord& job, int64_t time_ms, const std::string& prefix,
                    const std::string& message);
  void MarkDirty(JobRecord& job) { dirty_.insert(job.name); }
  // `job` reached a final state: studies hear of it, and the jobs that run after it go on or fail.
  void Ended(JobRecord& job, int64_t now_ms);
  // See "Dependencies": `job` waits for the jobs of its scheduling.after that have not ended yet,
  // or fails when one ended otherwise than its entry asks.
  void WaitForAfter(JobRecord& job, int64_t now_ms);
  // What an entry of scheduling.after names (see "Dependencies"): a job, or an array as a whole.
  struct Dependency {
    std::string name;
    bool array = false;
    uint64_t seq = 0;       // the job's submit order; an array's: its first task's
    bool finished = false;  // an array: every task has
    // Once finished, its end; an array's: SUCCEEDED when every task did, else FAILED when one
    // did, else CANCELLED. A job being cancelled: CANCELLING.
    JobState state = JobState::QUEUED;
    // An array's tasks that did not succeed, for the message of a job that fails after it.
    std::string unsuccessful;

    std::string Describe() const { return (array ? "array " : "job ") + name; }
  };
  // The job named `name`, else the array of that name; nullopt when neither is.
  std::optional<Dependency> FindDependency(const std::string& name) const;
  static Dependency DependencyOfJob(const JobRecord& job);
  // `dep` ended: the jobs waiting for it go on (it ended as they ask) or fail.
  void ReleaseAfter(const Dependency& dep, int64_t now_ms);
  // What `job` may wait for under `name`: one submitted before it. nullopt when none is: the one
  // it named was deleted, and a job (or array) of that name submitted since is another.
  std::optional<Dependency> DependencyOf(const JobRecord& job, const std::string& name) const;
  // The entries of `job`'s scheduling.after whose jobs have not ended, in the spec's order (one
  // that is gone did: see "Dependencies").
  std::vector<JobDependency> PendingAfter(const JobRecord& job) const;
  // Ends `job`, naming `dep` (what `d` names), which ended otherwise than `d` asks: FAILED after
  // one that did not succeed, CANCELLED (not needed) after one that did not fail.
  void EndAfter(JobRecord& job, const JobDependency& d, const Dependency& dep, int64_t now_ms);
  // See "Arrays": `job`, a task, counts among its array's tasks.
  void JoinArray(JobRecord& job);
  // Gives the free slots of `array` to its tasks waiting, lowest index first; `announce`: each
  // says so in an event (not at submit and at restart: nothing changed for it then).
  void ReleaseArraySlots(const std::string& array, bool announce, int64_t now_ms);
  // What a QUEUED job that waits for other jobs (waits_for_jobs) says: its turn in its array, or
  // AfterWaitMessage.
  std::string WaitForJobsMessage(const JobRecord& job) const;
  // "waiting for jobs a, b to succeed and job c to end (scheduling.after)" for `pending`
  // (PendingAfter); an array is named "array NAME".
  std::string AfterWaitMessage(const std::vector<JobDependency>& pending) const;
  bool NeedsSharedStorage(const std::string& output_dir) const;

  JobControllerOptions options_;
  const NodeHealth* health_;
  std::map<std::string, std::unique_ptr<JobRecord>> jobs_;
  // By seq. An ended job's entry is nulled (a tombstone) and dropped by the next active() call,
  // so that a burst of ends (a study cancelled with 100,000 queued trials) costs one pass, not a
  // move of the rest per end.
  mutable std::vector<std::pair<uint64_t, JobRecord*>> active_;
  mutable size_t active_tombstones_ = 0;
  void EraseActive(uint64_t seq);
  std::set<std::string> ended_holding_;
  // Jobs that may have a replica held for a fence (pruned as they are looked at).
  std::set<std::string> fenced_jobs_;
  // Where replicas were placed, so that a node's loss or registration reads the jobs of that node,
  // not every job (10,000 agents registering again after a restart, each against 100,000 jobs):
  // node id -> names of jobs that had a live replica placed there. Every placement adds its job;
  // names no longer true (the replica ended or moved, the job was deleted) and repeats are
  // dropped when the node's jobs are read, and once the list doubles since its last pruning.
  struct NodeJobs {
    std::vector<std::string> jobs;
    size_t kept = 0;  // its size after the last pruning
  };
  std::unordered_map<std::string, NodeJobs> on_node_;
  void NoteOnNode(const std::string& node_id, const std::string& job);
  void PruneNode(const std::string& node_id, NodeJobs& entry);
  // The jobs with a live replica placed on `node_id`, in submit order.
  std::vector<JobRecord*> JobsOnNode(const std::string& node_id);
  std::map<std::string, std::vector<Held>> held_;  // by job
  std::map<std::string, Incident> incidents_;      // by job: its latest incident
  ShapeTable shapes_;  // every job's demands, interned (JobRecord::shape_id)
  std::map<std::string, std::vector<std::string>> preempted_for_;  // preemptor -> its victims
  std::set<std::string> preempting_;  // jobs whose replicas are being stopped by a preemption
  // See "Dependencies": job -> the jobs that may wait for it (those no longer waiting are skipped
  // when it ends; what each still waits for is read from the jobs, PendingAfter).
  std::map<std::string, std::vector<std::string>> dependents_;
  // See "Arrays": array name -> its tasks, (index, job name) by index.
  std::map<std::string, std::vector<std::pair<int, std::string>>> arrays_;
  uint64_t next_seq_ = 1;
  ControllerCommands commands_;
  std::set<std::string> dirty_;
  std::vector<std::string> deleted_;
  bool schedule_needed_ = true;
  std::map<std::string, uint64_t> restarts_by_cause_;
  std::map<std::string, uint64_t> hangs_by_outcome_;
  uint64_t relaunches_ = 0;
  uint64_t elastic_shrinks_ = 0;
  uint64_t elastic_grows_ = 0;
};

}  // namespace cohort::coordinator
