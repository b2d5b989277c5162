// ReplicaManager: the replica attempts on this node and their lifecycle, from LaunchReplica until
// the agent forgets them (agent/attempt.h). It prepares each attempt's working dir and log,
// plans the launch (agent/replica_env.h), looks up the checkpoint a restart resumes from and has
// the container launcher Prepare the launch (unpack its image; agent/launcher.h) on a thread of
// its own, starts the attempt through the process or the container launcher, stops
// it, reaps its processes (and, as a subreaper, their orphans), enforces stop deadlines, samples
// the progress of running attempts, removes old attempt dirs and forgets attempts once done.
//
// Reporting: every change of an attempt's state bumps its version and calls `report` with it;
// the agent decides whether and how to send it (agent/agent.h). A log shipper and, for the chief
// of a tuning trial, a metric forwarder are created over `outbox` for each attempt.
//
// Users: each attempt runs as its job owner's Unix account (LaunchReplica.owner, mapped and
// checked by agent/replica_user.h); an owner that cannot run here fails the attempt before it
// starts, naming the user and the node. Its working dir and the output dirs it creates are that
// account's.
//
// Off the loop: the checkpoint lookup, the rendering of the environment with its result, the
// making of the output dirs (MakeOutputDirs: on the job's output storage, an NFS export that may
// hang) and the launcher's Prepare of one attempt run on one std::async thread; the loop never
// waits for it (StartPending polls it), nor for a container runtime's commands
// (agent/launcher.h). Nor for the exec of a launched process: the attempt stays STARTING until
// Reap() polls that it ran (agent/launcher.h). An attempt stopped meanwhile ends at once, STOPPED
// (PREEMPTED in a shutdown), without starting; its unpack goes on in the background and fills the
// image cache, and once it is done the launcher forgets what it prepared (Launcher::Forget).
// Destroying the manager cancels the Prepares under way (a killed umoci: within about 100 ms) and
// then waits for the threads, so no thread outlives the launchers; the agent's shutdown waits a
// bounded time unless a lookup or MakeOutputDirs hangs in the kernel on a dead NFS server, which
// nothing can cancel. The container launcher, destroyed last, then gives the runtime commands
// still queued (the last SIGKILLs) a bounded time (agent/oci_launcher.h).
//
// Nor for the job's metric file (on the same storage) or the replica's flight recorder (wherever
// the job's env points it): each attempt that has one gets a MetricFileReader (agent/
// metric_file_reader.h), whose thread stats it for the progress probe and tails it for the
// chief's forwarder, and a FlightRecorderPoller (agent/flight_recorder_poller.h); a hung read
// holds only that reader's thread, which the manager does not wait for.
//
// Thread safety: none; the agent loop owns it. Lifetime: `config`, `clock` and `outbox` outlive
// it. Destroying it SIGKILLs every process of every attempt still here: no replica outlives it.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/attempt.h"
#include "agent/coordinator_session.h"
#include "agent/launcher.h"
#include "agent/outbox.h"
#include "agent/progress.h"
#include "agent/replica_user.h"
#include "agent/resource_usage.h"
#include "common/clock.h"

namespace cohort::agent {

struct AgentConfig;

class ReplicaManager {
 public:
  using milliseconds = std::chrono::milliseconds;
  using Report = std::function<void(Attempt& attempt)>;

  ReplicaManager(const AgentConfig& config, Clock& clock, Outbox& outbox,
                 std::unique_ptr<Launcher> process_launcher, Report report);
  ~ReplicaManager();
  ReplicaManager(const ReplicaManager&) = delete;
  ReplicaManager& operator=(const ReplicaManager&) = delete;

  // Where launches with a container go; without one they fail with a message.
  void SetContainerLauncher(std::unique_ptr<Launcher> launcher);

  // The attempts not yet forgotten, by attempt key.
  std::map<std::string, Attempt>& attempts() { return attempts_; }
  const std::map<std::string, Attempt>& attempts() const { return attempts_; }
  Attempt* Find(const std::string& key);
  uint64_t attempts_started() const { return attempts_started_; }
  // Lookups and Prepares of attempts stopped meanwhile, not done yet (for tests).
  size_t abandoned_count() const { return abandoned_.size(); }

  // Starts a new attempt (the caller has checked that it is not here yet). An older attempt of
  // the same replica still running is stopped (replaced). A bad job or replica name, a launch
  // that cannot be planned, or a missing container launcher fail the attempt before it starts.
  void Launch(const wire::LaunchReplica& launch);
  // Launches the attempts whose checkpoint lookup and Prepare are done (fails those whose
  // Prepare failed, exit code -1, with its message); ends those stopped meanwhile.
  void StartPending();
  // SIGTERM to the attempt, SIGKILL after the grace the message gives. An attempt unknown here
  // is reported STOPPED ("not running on this node"); a final one reports its final state again.
  void Stop(const wire::StopReplica& stop);
  // Stops every live attempt for `cause`; returns how many.
  int StopAll(StopCause cause, const std::string& reason, milliseconds grace);
  // Kills every started live attempt pinned to GPU `gpu` (-1: to any GPU), which can no longer
  // run it (StopCause::kGpuFault); returns how many.
  int KillOnGpu(int gpu, const std::string& reason);
  // Learns which launched processes executed their command (RUNNING; a launch error is kept for
  // the exit to report), reaps exited main processes, reports their final states and kills
  // their leftovers. Never waits.
  void Reap();
  void EnforceDeadlines();
  // Every attempt is gone (final, no process left).
  bool AllGone() const;

  // What RegisterAgent reports: every attempt here (the versions of those not final or not yet
  // acknowledged), then how the last kEndedKept attempts forgotten here ended. A coordinator
  // restored from an older backup (README "Backups") learns from the ends how replicas it thinks
  // still run here ended, instead of restarting a job that succeeded since; one that knows them
  // ignores them.
  CoordinatorSession::ReplicaReport Registration() const;
  static constexpr size_t kEndedKept = 256;
  // A live restart's (agent/handoff.h): the ends Registration reports, the oldest first (final
  // attempts not forgotten yet included); the new image keeps them as its own.
  std::vector<wire::ReplicaStatusT> Ended() const;
  void KeepEnded(const std::vector<wire::ReplicaStatusT>& ended);
  // Counts the changes to what Ended() returns (an attempt ending, an end dropped): the agent
  // rewrites its ends file (agent/handoff.h) when this moved.
  uint64_t ends_changed() const { return ends_changed_; }
  // The progress of every RUNNING attempt, for a heartbeat, with what it uses: its cgroup's CPU
  // time and memory, read now, and its GPUs' entries of `gpus` (GpuSampler::Latest()).
  std::vector<std::unique_ptr<wire::ReplicaProgressT>> SampleProgress(const GpuSamples& gpus);
  // Every sweep_interval: removes attempt dirs older than attempt_retention (0 keeps them) that
  // belong to no attempt here.
  void SweepOldAttempts();
  // Forgets the attempts that are done (Attempt::forgettable): releases what they held and
  // closes their outbox streams.
  void Forget();
  // SIGKILL to every process of every attempt still here.
  void KillAll();

  // A live restart (agent/handoff.h). HandOver: every attempt, as the image the agent re-executes
  // adopts it, once each runs (RUNNING, not being stopped) and nothing of one is under way that
  // the execve would cut off: a launch, a stop, an end not yet delivered (kUnavailable, naming
  // the attempt: try again soon); another error for one that cannot be handed over at all.
  StatusOr<std::vector<HandedOverAttempt>> HandOver();
  // Takes on one handed-over attempt as RUNNING, as if launched here: its log shipped on from
  // where the coordinator's copy ends, its measurements after those delivered. An error (a bad
  // name, a pid that is not this process's child) leaves it out, killed where it is this
  // process's child (it must not run beside its restart); the coordinator, not hearing of it at
  // registration, restarts it.
  Status Adopt(const HandedOverAttempt& handed);

 private:
  milliseconds Now() const { return milliseconds(clock_.NowMs()); }
  void SetState(Attempt& a, wire::ReplicaState state, std::string message);
  void StartAttempt(Attempt& a, const wire::LaunchReplica& launch);
  void FinishLaunch(Attempt& a, PendingLaunch& pending);
  // Keeps `end` among the last kEndedKept ends (ended_).
  void RememberEnd(wire::ReplicaStatusT end);
  // Adopt's taking over, without its cleanup of a failure.
  Status TakeOver(const HandedOverAttempt& handed);
  // What follows a launch, or an adoption: the attempt's process, its exec target, error file,
  // metric forwarder (`measurements_answered` delivered already) and progress probe.
  void Attach(Attempt& a, std::unique_ptr<ReplicaProcess> process, const LaunchRequest& request,
              uint64_t measurements_answered);
  void FailBeforeLaunch(Attempt& a, const Status& status, int exit_code);

  const AgentConfig& config_;
  Clock& clock_;
  Outbox& outbox_;
  Report report_;
  std::unique_ptr<Launcher> process_launcher_;
  std::unique_ptr<Launcher> container_launcher_;
  ReplicaUsers users_;  // which account each job owner's replicas run as
  std::map<std::string, Attempt> attempts_;
  // The final statuses of the attempts forgotten here, the newest last (Registration). One whose
  // key is launched again (by a coordinator restored to before it) is dropped.
  std::deque<wire::ReplicaStatusT> ended_;
  uint64_t ends_changed_ = 0;
  // Lookups and Prepares of attempts stopped before they were done; dropped once done. Declared
  // after the launchers: destroyed (waited for) first.
  std::vector<std::unique_ptr<PendingLaunch>> abandoned_;
  std::map<std::string, std::unique_ptr<ProgressProbe>> probes_;  // by attempt key, started ones
  milliseconds next_sweep_{0};
  uint64_t attempts_started_ = 0;
};

}  // namespace cohort::agent
