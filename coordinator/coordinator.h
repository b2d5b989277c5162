// Coordinator is the cohort-coordinator daemon minus main(): the durable job store (Journal),
// the gang Scheduler, the job controller, and the two ROUTER endpoints (clients, agents), all
// driven by one single-threaded event loop.
//
// Loop: RunOnce() polls both sockets for up to `poll_timeout`, handles every message waiting,
// runs the timers (node heartbeat check, job timeouts, scheduling rounds) against the injected
// Clock, then commits: every job changed in this pass is appended to the journal, the journal is
// fsynced, and only then are the replies, launches and stops queued during the pass sent. So no
// one (client, agent) ever hears of a change that a crash could undo. Tests step RunOnce() with a
// ManualClock; main() calls Run().
//
// Job controller (DESIGN.md "Jobs"):
//   QUEUED -> PENDING (placed, launches sent) -> RUNNING (every replica reported RUNNING)
//   -> SUCCEEDED when the chief exits 0 (every other replica is then stopped: STOPPED, not a
//      failure); FAILED on a permanent replica failure (all others stopped), on a spent restart
//      budget, or on scheduling.timeout (counted from the first placement); cancel -> CANCELLING
//      (stops sent) -> CANCELLED once no replica of the job holds resources.
//   A retryable end (exit 130/137/138/143, SIGINT/KILL/USR1/TERM, PREEMPTED, LOST, a STOPPED the
//   coordinator did not ask for) restarts that replica as attempt+1 on a node where it fits (its
//   previous node first), or, with restart_job_on_worker_restart, stops the whole job and queues
//   it again (every replica attempt+1 once the old attempts are gone). Each restart takes one
//   from max_restarts and is recorded as a job event with its reason.
// Nodes: a node whose agent sends a draining heartbeat (it is shutting down) gets nothing new
// placed on it until it registers again; the replicas it reports PREEMPTED restart elsewhere.
// A node silent for heartbeat_timeout is LOST and its replicas LOST (then restarted). After
// a coordinator restart, nodes are unknown until their agents re-register; replicas on a node that
// has not re-registered within heartbeat_timeout of the start are LOST too.
//
// Errors: a malformed frame or an invalid request is answered with ErrorReply; RunOnce returns an
// error only when the journal cannot be written (the daemon then exits non-zero). A peer's
// requests beyond max_requests_per_peer in one pass are answered RESOURCE_EXHAUSTED unprocessed.
// Thread safety: not thread-safe; one thread drives it. Lifetime: `clock` (and `context`, when
// given) must outlive the Coordinator.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/clock.h"
#include "common/curve_keys.h"
#include "common/messaging.h"
#include "common/status.h"
#include "coordinator/journal.h"
#include "coordinator/log_store.h"
#include "coordinator/options.h"
#include "coordinator/scheduler.h"
#include "coordinator/state.h"
#include "coordinator/study_controller.h"

namespace cohort::coordinator {

struct CoordinatorStats {
  uint64_t schedule_rounds = 0;
  int64_t last_round_us = 0;
  int64_t max_round_us = 0;
  int64_t last_round_cpu_us = 0;  // the round's own CPU time (wall time includes preemption)
  int64_t max_round_cpu_us = 0;
  size_t last_round_queued = 0;
  uint64_t messages = 0;
  uint64_t refused = 0;  // requests over --max-requests-per-peer
};

class Coordinator {
 public:
  // Replays the journal under options.state_dir and binds both endpoints. `context`: the ZeroMQ
  // context to use (tests share one for inproc://); nullptr: the coordinator owns one.
  static StatusOr<std::unique_ptr<Coordinator>> Create(const CoordinatorOptions& options,
                                                       Clock* clock,
                                                       zmq::context_t* context = nullptr);
  ~Coordinator();

  // One pass of the loop (see the header comment).
  Status RunOnce(std::chrono::milliseconds poll_timeout);
  // Loops until `stop` becomes true or RunOnce fails.
  Status Run(const std::atomic<bool>& stop);

  // Endpoints as bound (tcp://...:0 resolved to the real port).
  std::string client_endpoint() const { return client_->endpoint(); }
  std::string agent_endpoint() const { return agent_->endpoint(); }

  // Introspection for tests and the bench.
  const JobRecord* FindJob(const std::string& name) const;
  const NodeRecord* FindNode(const std::string& node_id) const;
  const StudyController& studies() const { return studies_; }
  const CoordinatorStats& stats() const { return stats_; }
  size_t job_count() const { return jobs_.size(); }

 private:
  Coordinator(CoordinatorOptions options, Clock* clock);
  Status Recover();

  // Message handlers.
  void HandleClient(const RoutedMessage& m);
  void HandleAgent(const RoutedMessage& m);
  void OnSubmit(const RoutedMessage& m, const wire::SubmitJob& req);
  void OnCancel(const RoutedMessage& m, const wire::CancelJob& req);
  void OnGetLogs(const RoutedMessage& m, const wire::GetLogs& req);
  void OnRegister(const RoutedMessage& m, const wire::RegisterAgent& req);
  void OnHeartbeat(const RoutedMessage& m, const wire::Heartbeat& req);
  void OnReplicaUpdate(const RoutedMessage& m, const wire::ReplicaUpdate& req);
  void OnLogChunk(const RoutedMessage& m, const wire::LogChunk& req);
  void OnSubmitStudy(const RoutedMessage& m, const wire::SubmitStudy& req);
  void OnTrialMeasurement(const RoutedMessage& m, const wire::TrialMeasurement& req);

  // Jobs.
  JobRecord& AddJob(JobSpec spec, const std::string& yaml);  // queued, journaled at commit
  void CancelJob(JobRecord& job, const std::string& reason);

  // Studies: trial jobs submitted and cancelled as the StudyController asks.
  void RunStudies();
  void SubmitTrialJob(TrialJobLaunch launch);
  void JobEnded(const JobRecord& job);  // tells the study of a trial job that it ended
  void RecoverStudies();
  std::vector<std::string> SnapshotRecords() const;  // studies and jobs, for a journal snapshot

  // Controller.
  void ApplyReplicaStatus(JobRecord& job, ReplicaRecord& r, const wire::ReplicaStatus& s);
  void OnReplicaEnded(JobRecord& job, ReplicaRecord& r);
  void RestartReplica(JobRecord& job, ReplicaRecord& r, const std::string& reason);
  void RestartJob(JobRecord& job, const std::string& reason);
  void FinishJob(JobRecord& job, JobState state, const std::string& message);
  void StopReplicas(JobRecord& job, const std::string& reason);
  void MaybeFinishCancel(JobRecord& job);
  void MaybeRunning(JobRecord& job);
  void SetReplicaState(ReplicaRecord& r, ReplicaState s, const std::string& message);
  void AddEvent(JobRecord& job, const std::string& message);
  void MarkDirty(JobRecord& job);
  void NodeLost(NodeRecord& node, const std::string& why);
  void SendStop(JobRecord& job, ReplicaRecord& r, const std::string& reason);
  void SendStopTo(const std::string& peer, const std::string& job, const std::string& replica,
                  int attempt, const std::string& reason);
  void Launch(JobRecord& job, ReplicaRecord& r);
  bool HoldsResources(const ReplicaRecord& r) const { return r.placed() && !IsFinal(r.state); }
  bool AnyHolding(const JobRecord& job) const;

  // Timers.
  void Tick();
  void CheckNodes(int64_t now);
  void CheckJobs(int64_t now);
  void ScheduleRound();
  ClusterView BuildView(std::map<std::string, int>* node_index) const;

  // Commit and send.
  Status Commit();
  void Reply(const RoutedMessage& m, zmq::message_t frame, bool agent);
  void RefuseOverLimit(const RoutedMessage& m, bool agent);
  void SendToAgent(const std::string& peer, zmq::message_t frame);

  wire::JobInfoT ToInfo(const JobRecord& job) const;
  wire::NodeListT Nodes() const;

  struct Outgoing {
    bool agent;
    std::string peer;
    zmq::message_t frame;
  };

  CoordinatorOptions options_;
  Clock* clock_;
  std::unique_ptr<zmq::context_t> owned_context_;
  zmq::context_t* context_ = nullptr;
  std::unique_ptr<ZapAuthenticator> zap_;
  std::unique_ptr<RouterSocket> client_;
  std::unique_ptr<RouterSocket> agent_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<LogStore> logs_;
  Scheduler scheduler_;

  std::map<std::string, std::unique_ptr<JobRecord>> jobs_;
  StudyController studies_;
  std::map<uint64_t, JobRecord*> active_;  // unfinished jobs by submit order
  // Finished jobs whose replicas may still hold resources (stops outstanding); pruned lazily.
  mutable std::set<std::string> ended_holding_;
  std::map<std::string, NodeRecord> nodes_;
  std::set<std::string> dirty_;
  std::vector<Outgoing> outbox_;
  uint64_t next_seq_ = 1;
  int64_t started_ms_ = 0;
  int64_t last_periodic_ms_ = 0;
  int64_t last_stats_log_ms_ = 0;
  bool schedule_needed_ = true;
  CoordinatorStats stats_;
};

}  // namespace cohort::coordinator
