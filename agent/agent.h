// Agent: the node daemon's control loop (DESIGN.md "Agents and containers"). One thread polls the
// DEALER socket to the coordinator, reaps replica processes, ships their logs and runs the
// protocol timers of common/schema/cohort.fbs:
//
//  - RegisterAgent on start, and again whenever the coordinator forgets the node (HeartbeatReply
//    known=false) or stays silent for coordinator_timeout (it restarted, or the link broke);
//    it lists every replica attempt still running and every final status not yet acked.
//  - Heartbeat every interval the RegisterAgentReply gives.
//  - ReplicaUpdate on every state change of an attempt, re-sent until an Ack answers it. An
//    ErrorReply that refuses it for now (UNAVAILABLE, RESOURCE_EXHAUSTED: the coordinator could
//    not store it) leaves it to be re-sent; FAILED_PRECONDITION makes the agent register again;
//    any other error is logged and taken as the answer.
//  - LogChunk: each attempt's log file is shipped by a LogShipper (agent/log_shipper.h). After
//    re-registering, shipping resumes from the acked offset, so nothing is lost across a
//    coordinator restart.
//  - TrialMeasurement: the chief of a tuning trial has its $CLOUD_ML_HP_METRIC_FILE followed by
//    a MetricForwarder (agent/metric_forwarder.h).
//  Updates, chunks and measurements go through one Outbox (agent/outbox.h): one message in
//  flight per stream, resent until answered; registering again resends from the acked state.
//  - Registrations and heartbeats carry what the node's health check says (agent/health_check.h);
//    an attempt that fails has it run again, and the heartbeats say so until that run has ended.
//  - Heartbeats carry each RUNNING attempt's progress (agent/progress.h: its log, metric file and
//    flight recorder), for the coordinator's hang watchdog, and what it uses (its cgroup's CPU
//    time and memory, its GPUs' latest NVML samples: agent/resource_usage.h), for `cohort
//    status`; their replies carry how late each replica here enters collectives
//    (collective_lateness()).
//  - DumpStacks: the stacks of one attempt's processes are taken on a thread of their own
//    (agent/stack_dump.h) and sent as StackDump (once; the coordinator stores them with the
//    replica's logs); a StopReplica of that attempt waits until they are taken, so the stacks
//    are the stuck process's, not those of one being stopped.
//  - ExecInReplica: a command runs beside a running attempt, as it runs (agent/
//    exec_in_replica.h), on a thread of its own; its output goes back as ExecOutput (once).
//  - ExecSessionIo: a step of an interactive session (agent/exec_session.h): its first starts
//    the command beside a running attempt; each is answered with an ExecOutput (its output since
//    the last). An attempt's sessions are killed when it ends.
//  - LaunchReplica: prepares <work_dir>/<job>/<replica>/attempt-<n>, renders the environment
//    (agent/replica_env.h) and starts the attempt through the Launcher; StopReplica: SIGTERM to
//    every process of the attempt, SIGKILL after grace_ms, final state STOPPED.
//
// An attempt is forgotten once its final status is acked, its log fully shipped and its last
// measurements acked.
// When the main process of an attempt exits, whatever it left behind (its process group and its
// cgroup, or without cgroups every process carrying its COHORT_ATTEMPT_DIR) is killed at once.
//
// Preemption (SIGTERM/SIGINT to the daemon) signals every replica, waits grace_period, kills
// what is left, reports each attempt PREEMPTED (exit code and signal kept) and waits up to
// preempt_ack_wait for the acks and the last log chunks. Launches that arrive meanwhile are
// ignored (see HandleLaunch).
//
// Live restart (SIGUSR2; agent/handoff.h): Run() stops at the next moment every replica can be
// handed over (none starting, being stopped or ended and not yet delivered; at most
// kHandoffWait from the request), with TakeHandoff() holding it and every replica running on; main
// re-executes the agent's binary with it, and the new image Adopt()s them before its first step.
// Container replicas are handed over as their runtime's foreground process and the container
// (agent/container_replica.h). The `cohort exec` sessions and commands beside replicas are killed
// first (the execve would cut them off; a command's ExecOutput says so in killed_because). Past
// the wait, or where an attempt cannot be handed over, the request is
// refused with an error naming why, and the agent runs on as it was.
//
// Across an ordinary restart (a stop and start, a reboot, a crash) how attempts ended here is
// kept in the ends file (agent/handoff.h), rewritten durably whenever it changes and reported at
// the next start's first registration: a coordinator that had not heard an end learns it.
//
// Time: every timer (heartbeats, resends, the coordinator timeout, stop deadlines, preemption
// waits, metric polls) reads the injected Clock, so tests step a ManualClock; only the socket
// wait in RunOnce is real time.
//
// The parts: CoordinatorSession (agent/coordinator_session.h) keeps the registration and the
// heartbeats; ReplicaManager (agent/replica_manager.h) launches, stops, reaps and forgets the
// attempts. The Agent runs the loop, dispatches the coordinator's messages and answers to them,
// sends status updates, takes stack dumps and carries out preemption.
//
// Thread safety: none; all calls from one thread. Lifetime: the zmq context and the clock
// outlive the Agent.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "agent/attempt.h"
#include "agent/coordinator_session.h"
#include "agent/exec_in_replica.h"
#include "agent/exec_session.h"
#include "agent/handoff.h"
#include "agent/health_check.h"
#include "agent/http_service.h"
#include "agent/inventory.h"
#include "agent/latest_file_writer.h"
#include "agent/launcher.h"
#include "agent/outbox.h"
#include "agent/replica_manager.h"
#include "agent/replica_user.h"
#include "common/clock.h"
#include "common/messaging.h"
#include "common/rate_limited_log.h"
#include "common/status.h"

namespace cohort::agent {

struct AgentConfig {
  std::string coordinator;  // tcp://host:7401
  std::string node_id;      // also the DEALER routing id
  std::string advertise_address;
  std::string work_dir;
  // Where the built-in programs of `builtin:` pools (cohort-reducer, cohort-ps) are.
  std::string builtin_dir;
  NodeInventory inventory;
  // Whether a replica pinned to GPUs runs on the CPUs near them (--cpu-binding; GpuLocalCpus in
  // agent/inventory.h).
  bool bind_cpus_to_gpus = true;
  // Whether a replica's cpus also caps the CPU time it takes (--cpu-limit quota), beside weighing
  // it under contention (LaunchRequest::cpus).
  bool cpu_quota = false;
  std::map<std::string, std::string> labels;
  // The interface of advertise_address (InterfaceOfAddress), which replicas' gloo binds to unless
  // their job says otherwise; "": none found, left to the job.
  std::string socket_interface;
  SocketSecurity security;
  std::chrono::milliseconds grace_period{30000};
  // Attempt working dirs and logs older than this (and not running) are removed; 0 keeps them.
  std::chrono::milliseconds attempt_retention{7 * 24 * 3600 * 1000LL};
  std::chrono::milliseconds sweep_interval{10 * 60 * 1000};

  // Protocol timing.
  std::chrono::milliseconds default_heartbeat_interval{1000};  // until the coordinator says
  std::chrono::milliseconds coordinator_timeout{0};            // 0: max(5 heartbeat intervals, 3 s)
  std::chrono::milliseconds resend_interval{1000};        // unanswered register/update/log chunk
  std::chrono::milliseconds max_register_interval{5000};  // backoff cap while unregistered
  std::chrono::milliseconds loop_interval{20};            // longest socket wait in Run()
  std::chrono::milliseconds preempt_ack_wait{5000};
  size_t log_chunk_bytes = 256 << 10;
  std::chrono::milliseconds metric_poll_interval{200};  // $CLOUD_ML_HP_METRIC_FILE reads
  // Reap every child (the daemon is a PR_SET_CHILD_SUBREAPER, so orphans come to it), not only
  // the replicas' main processes.
  bool reap_all_children = false;
  // The HTTP endpoint (/metrics; agent/http_service.h): HOST:PORT or "none" (the command line's
  // default is 127.0.0.1:7481). A default address that cannot be bound leaves it off (a
  // warning); one given explicitly must bind.
  std::string http_endpoint = "none";
  bool http_endpoint_explicit = false;
  std::string http_token;
  // Whether replicas get cgroups here, and why not (for /metrics' HELP texts).
  bool cgroups = false;
  std::string cgroups_reason;
  // This agent's level of replica cgroups (agent/cgroup.h: <own cgroup>/cohort/<node id>@<tag>),
  // which main removes once the agent has stopped; empty without cgroups.
  std::string cgroup_dir;
  // The storage check (agent/storage_check.h): the root to read instead of the coordinator's
  // output root (empty: the coordinator's), how often, and when a read counts as hung.
  std::string output_root;
  std::chrono::milliseconds storage_check_interval{5000};
  std::chrono::milliseconds storage_check_hung_after{10000};
  // The node's health check (agent/health_check.h): the program and its arguments (empty: none),
  // how often it runs and how long a run may take.
  HealthCheckOptions health_check;
  // Whether the driver's Xid events take GPUs out of service (agent/resource_usage.h), and the
  // Xids that do not beside the applications' own (--ignore-xids).
  bool watch_xids = true;
  std::set<uint64_t> ignored_xids;
  // Which Unix account job owners' replicas run as (agent/replica_user.h): --users,
  // --allow-root-users. With security.insecure every owner may map to root.
  ReplicaUserOptions users;
  // The sitecustomize directory process replicas get first on PYTHONPATH (agent/python_site.h);
  // Create() installs it under work_dir. Empty: none.
  std::string python_site;
};

class Agent {
 public:
  using CollectiveLateness = CoordinatorSession::CollectiveLateness;

  // Connects the socket (ZeroMQ connects lazily; nothing waits for the coordinator here).
  static StatusOr<std::unique_ptr<Agent>> Create(zmq::context_t& context, AgentConfig config,
                                                 std::unique_ptr<Launcher> process_launcher,
                                                 Clock* clock);
  ~Agent();

  // Where LaunchReplica with a container goes; without one such launches fail with a message.
  void SetContainerLauncher(std::unique_ptr<Launcher> launcher);

  // One loop step: waits up to `max_wait` for coordinator messages, handles them, reaps,
  // enforces stop deadlines, runs the timers and ships logs.
  Status RunOnce(std::chrono::milliseconds max_wait);
  // Steps until `stop` becomes true, then Preempt(). Each time `reloads` (SIGHUPs) grows, the
  // GPUs Xids took out of service are put back (their admin reset them). Each time `restarts`
  // (SIGUSR2s) grows, a live restart is asked for: Run returns once it holds the handoff (see
  // "Live restart" above), without stopping anything.
  Status Run(const std::atomic<bool>& stop, const std::atomic<int>* reloads = nullptr,
             const std::atomic<int>* restarts = nullptr);
  // How long a live restart waits for the replicas to settle before it is refused.
  static constexpr std::chrono::seconds kHandoffWait{60};
  // What Run() returned with for a live restart, once (nullopt otherwise): after an execve that
  // failed, Run() goes on as before.
  std::optional<Handoff> TakeHandoff() { return std::exchange(handoff_, std::nullopt); }
  // Takes on what an earlier image handed over (before the first RunOnce); returns how many
  // attempts it adopted, logging each one it could not. Where a new image went back to this one
  // (Handoff::went_back_because), the registration tells the coordinator why.
  int Adopt(const Handoff& handoff);
  // An ordinary start's, instead (before the first RunOnce): keeps how attempts that ended here
  // before ended, from the ends file (agent/handoff.h), for the first registration to report.
  // Returns how many; an error where the file cannot be taken (the agent goes on without it).
  StatusOr<size_t> KeepEndsFromDisk();
  // The preemption sequence: BeginPreemption(), then RunOnce() until preempted().
  Status Preempt();
  // Starts preempting: a draining heartbeat, then SIGTERM to every replica (SIGKILL after
  // grace_period). RunOnce() carries it on.
  void BeginPreemption();
  // Every replica is gone and reported (or the waits for that ran out).
  bool preempted() const { return preempted_; }

  bool registered() const { return session_.registered(); }
  // "http://HOST:PORT" of the HTTP endpoint; empty when it is off.
  std::string http_url() const { return http_ ? http_->url() : ""; }
  // Attempts not yet forgotten (running, or final but unacked / log not fully shipped).
  size_t attempt_count() const { return replicas_.attempts().size(); }
  const AgentConfig& config() const { return config_; }
  // How late a replica here enters collectives after its job's first rank, as the coordinator
  // last said, by "<job>/<replica>".
  const std::map<std::string, CollectiveLateness>& collective_lateness() const {
    return session_.collective_lateness();
  }

 private:
  using milliseconds = std::chrono::milliseconds;
  Agent(AgentConfig config, DealerSocket socket, std::unique_ptr<Launcher> process_launcher,
        Clock* clock);

  milliseconds Now() const { return milliseconds(clock_->NowMs()); }
  uint64_t Transmit(wire::BodyUnion body);

  void HandleMessage(const Message& message);
  void HandleLaunch(const wire::LaunchReplica& launch);
  void HandleStop(const wire::StopReplica& stop);
  void HandleDumpStacks(const wire::DumpStacks& dump);
  // Sends the stack dumps taken and carries out the stops that waited for them.
  void CollectDumps();
  // Runs a command beside a running attempt (agent/exec_in_replica.h); one that cannot run is
  // answered at once, as an ExecOutput with its error.
  void HandleExec(const wire::ExecInReplica& exec);
  // A step of an interactive session; one that cannot be taken is answered at once, as an
  // ExecOutput with its error.
  void HandleExecSession(const wire::ExecSessionIo& io);
  // Sends the ExecOutput of each command that ended and each session step due; ends the
  // sessions their clients left.
  void CollectExecs();
  // An Ack or ErrorReply (`error`) to a message of the outbox.
  void HandleAnswer(uint64_t request_id, const Status& error);
  void HandleStatusAnswer(Attempt& a, const Outbox::Answer& answer, const Status& error);
  // A state change of an attempt: a failure has the health check run again, then SendUpdate.
  void OnAttemptChanged(Attempt& a);
  // Sends the attempt's status as a ReplicaUpdate (when registered; RegisterAgent carries it
  // otherwise).
  void SendUpdate(Attempt& a);

  // A live restart's step: the handoff, once every replica can be handed over; kUnavailable
  // while one cannot yet, another error when it never can.
  StatusOr<Handoff> HandOverNow();

  void RunTimers();
  // The coordinator has been silent past its --fence-after: stops every replica here.
  void Fence();
  // Kills the replicas pinned to a GPU that reported an Xid after which nothing runs on it
  // (GpuSampler::TakeGpuFaults): their job restarts elsewhere instead of hanging in the driver.
  void KillWorkOnFailedGpus();
  void ShipLogsAndMetrics();
  // Hands the ends (agent/handoff.h) to ends_file_'s thread when they changed since they were
  // last handed over. A write that failed is logged (once, until one succeeds again) and tried
  // again 10 s later; it never stops the agent, nor does a slow one delay its loop.
  void WriteEndsIfChanged();
  void CarryOnPreemption();
  void PublishSnapshot();
  // A heartbeat with every RUNNING attempt's progress and usage (when registered).
  void SendHeartbeat();
  GpuHealth GpuHealthNow() const;

  AgentConfig config_;
  DealerSocket socket_;
  Clock* clock_;
  Outbox outbox_;  // before replicas_, whose shippers and forwarders use it
  CoordinatorSession session_;
  // Stack dumps being taken, by attempt key, with the stop that waits for one. Before replicas_,
  // whose destruction kills the processes whose stacks are being taken.
  struct PendingDump {
    std::future<std::string> text;
    std::optional<wire::StopReplicaT> stop;
  };
  std::map<std::string, PendingDump> dumps_;
  // `cohort exec` commands running beside replicas here (agent/exec_in_replica.h).
  ExecRunner execs_;
  ExecSessions exec_sessions_;  // `cohort exec -i` / `-it` sessions (agent/exec_session.h)
  ReplicaManager replicas_;
  bool preempting_ = false;
  // Preemption: until when replicas may take to go, then until when their acks may take.
  milliseconds preempt_give_up_{0};
  std::optional<milliseconds> preempt_acks_by_;
  bool preempted_ = false;
  std::optional<Handoff> handoff_;
  // Updates the coordinator could not take for now (they are resent): a full disk there lasts.
  RateLimitedLog transient_refusals_{spdlog::level::info, "transient refusals", 5,
                                     std::chrono::seconds(30)};
  // Samples the GPUs on a thread of its own, for heartbeats and /metrics.
  GpuSampler gpu_sampler_;
  // The HTTP endpoint and what it shows.
  std::unique_ptr<AgentHttp> http_;
  milliseconds next_publish_{0};
  // The ends file, written off the loop (a slow fsync must not delay heartbeats).
  LatestFileWriter ends_file_;
  uint64_t ends_posted_ = 0;  // ReplicaManager::ends_changed() when the ends were last posted
  uint64_t ends_posts_ = 0;   // posts to ends_file_, each its version
  uint64_t ends_judged_ = 0;  // the post whose write WriteEndsIfChanged last judged
  milliseconds ends_retry_at_{0};
  bool ends_unwritten_ = false;  // the last write judged failed
  uint64_t log_bytes_shipped_ = 0;
  uint64_t replicas_fenced_ = 0;  // Fence() stopped so many attempts
};

}  // namespace cohort::agent
