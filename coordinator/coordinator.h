// Coordinator is the cohort-coordinator daemon minus main(): one single-threaded event loop over
// small managers. It owns the two ROUTER endpoints (clients, agents), the durable state
// (StateStore), and wires the managers together:
//   ClientService / AdminService / AgentService   wire requests in, replies out
//                                  (coordinator/*_service.h)
//   JobController                  the job state machine: events in, commands out
//   NodeRegistry                   nodes, heartbeats, node loss
//   PlacementRound + Scheduler     the scheduling round;  LaunchPlan  launch/stop messages
//   StudyController + StudyRunner  hyperparameter studies; their trial jobs submitted, cancelled
//   ObservabilityService           `cohort metrics` and `cohort usage` answered
//   SnapshotPublisher              what the HTTP endpoint (/metrics, dashboard) serves
//   Watchdog                       hung jobs and stragglers, from the progress in heartbeats
//   ExecRelay                      `cohort exec` between a client and a replica's agent
//
// Loop: RunOnce() polls both sockets for up to `poll_timeout`, hands every message waiting to its
// service, runs the timers (node heartbeat check, job timeouts, held verdicts, scheduling rounds)
// against the injected Clock, turns the JobController's commands into launches and stops, then
// commits: the jobs changed in this pass and the studies' new records go to the StateStore as one
// transaction, and only once it is durable is the Outbox (replies, launches, stops) sent. So no
// one (client, agent) ever hears of a change that a crash could undo. Tests step RunOnce() with a
// ManualClock; main() calls Run().
//
// A failed commit (a full disk, any write error) never stops the coordinator. The pass is rolled
// back as if the coordinator had crashed just before committing it, except that it keeps running
// and tells everyone of the pass:
//  - nothing of the pass goes out: each reply becomes an ErrorReply naming the cause, to clients
//    and agents RESOURCE_EXHAUSTED (disk full) or UNAVAILABLE (other write errors); an agent
//    keeps an update so answered and sends it again (agent/outbox.h); launches and stops are
//    dropped. Only the pass's client reads (GetJob, ListJobs, GetLogs, ...) are not refused:
//    once memory is restored they are answered again from it, so a read is never refused for a
//    write that happened to share its pass;
//  - memory goes back to the last commit: the jobs the pass changed are read back from the store
//    (a job the pass submitted disappears), the other jobs are kept as they are (they equal the
//    store), every study is rebuilt from the store; as after a restart, held verdicts are held
//    again and open incidents are forgotten. Nodes stay registered.
// Then the coordinator retries: every pass that a request changes something in tries to commit
// again, while the timers (node losses, verdicts, timeouts, scheduling, trials: the changes the
// coordinator makes by itself) wait a retry interval (1 s) after a failure, so that passes of
// reads alone keep committing nothing and answering. When they run again, the node losses the
// rolled-back passes recorded are applied again first. Only when the store cannot even be read
// back does RunOnce return the error (the daemon then exits non-zero and starts again from what
// is stored).
//
// Errors: a malformed frame or an invalid request is answered with ErrorReply. Each endpoint gives
// a pass at most kMaxMessagesPerPass messages, each read and handled once; every message,
// bad frames included, counts in its peer's budget of max_requests_per_peer a pass: requests
// beyond it are answered RESOURCE_EXHAUSTED unprocessed, bad frames beyond it are dropped.
// Warnings about bad frames are rate-limited, with a count of those left out.
//
// Identity (CURVE; none of it with --insecure): the ZAP handler admits a key listed in clients/ or
// agents/ and names the connection by its file (clients/<user>.pub: user <user>, on every
// RoutedMessage; agents/<node-id>.pub: node <node-id>, which is the only node it may speak for:
// AgentService). Every message whose key has been removed (or replaced) since its handshake is
// refused UNAUTHENTICATED, and every half heartbeat interval the key directories are re-read and a
// READY node whose agent's key is gone is LOST at once, its routing id forgotten (PeerKeys): a
// removed key's sessions end within one heartbeat interval.
// Thread safety: not thread-safe; one thread drives it. Lifetime: `clock` (and `context`, when
// given) must outlive the Coordinator.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/clock.h"
#include "common/curve_keys.h"
#include "common/messaging.h"
#include "common/rate_limited_log.h"
#include "common/status.h"
#include "coordinator/admin_service.h"
#include "coordinator/agent_service.h"
#include "coordinator/client_service.h"
#include "coordinator/http_service.h"
#include "coordinator/job_controller.h"
#include "coordinator/log_store.h"
#include "coordinator/node_registry.h"
#include "coordinator/notifier.h"
#include "coordinator/observability_service.h"
#include "coordinator/options.h"
#include "coordinator/outbox.h"
#include "coordinator/peer_keys.h"
#include "coordinator/replica_usage.h"
#include "coordinator/scheduler.h"
#include "coordinator/snapshot_publisher.h"
#include "coordinator/state.h"
#include "coordinator/state_backups.h"
#include "coordinator/state_store.h"
#include "coordinator/study_controller.h"
#include "coordinator/study_runner.h"
#include "coordinator/training_metrics.h"
#include "coordinator/watchdog.h"

namespace cohort::coordinator {

struct CoordinatorStats {
  uint64_t schedule_rounds = 0;
  int64_t last_round_us = 0;
  int64_t max_round_us = 0;
  int64_t last_round_cpu_us = 0;  // the round's own CPU time (wall time includes preemption)
  int64_t max_round_cpu_us = 0;
  // The CPU time of the last kRecentRounds rounds (a ring; `schedule_rounds` says how far it is
  // filled): one round is one sample of a noisy figure, their median is the one to quote.
  static constexpr size_t kRecentRounds = 16;
  std::array<int64_t, kRecentRounds> recent_round_cpu_us{};
  // Counts a round and its times and queue into the fields above and below.
  void NoteRound(int64_t wall_us, int64_t cpu_us, size_t queued);
  int64_t RecentRoundCpuMedianUs() const;
  size_t last_round_queued = 0;
  uint64_t messages = 0;     // read from both endpoints, bad frames included
  uint64_t bad_frames = 0;   // frames that did not verify
  uint64_t refused = 0;      // requests over --max-requests-per-peer
  uint64_t key_refused = 0;  // messages whose key was removed after their handshake
  uint64_t rolled_back = 0;  // passes whose commit failed
};

class Coordinator {
 public:
  // Messages read from each endpoint in one pass, at most.
  static constexpr size_t kMaxMessagesPerPass = 4096;

  // Loads the state store under options.state_dir and binds both endpoints. `context`: the ZeroMQ
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
  // "http://HOST:PORT" of the HTTP endpoint; empty when it is off.
  std::string http_url() const { return http_ ? http_->url() : ""; }

  // Introspection for tests and the bench.
  const JobRecord* FindJob(const std::string& name) const { return jobs_.FindJob(name); }
  const NodeRecord* FindNode(const std::string& node_id) const { return nodes_.Find(node_id); }
  const JobController& jobs() const { return jobs_; }
  const StudyController& studies() const { return studies_; }
  const Watchdog& watchdog() const { return watchdog_; }
  const CoordinatorStats& stats() const { return stats_; }
  size_t job_count() const { return jobs_.jobs().size(); }

 private:
  Coordinator(CoordinatorOptions options, Clock* clock);
  Status Recover();

  // Timers, then the JobController's commands into the outbox.
  void Tick();
  void ScheduleRound(int64_t now);
  void ExecuteCommands();
  // The notices (--notify-url, --notify-on) of what `commands` tell, into pending_notices_.
  void QueueNotices(const ControllerCommands& commands, int64_t now);
  // The watchdog's verdicts: stack dumps of the stuck replicas, then JobController::Hang.
  void RunWatchdog(int64_t now);
  // Queues a DumpStacks of `r`'s attempt for the agent of its node; false when that node is not
  // READY.
  bool SendDumpStacks(const JobRecord& job, const ReplicaRecord& r, const std::string& reason,
                      int64_t now);

  // A client request to the service that answers it.
  void HandleClient(const RoutedMessage& m, int64_t now);
  Status Commit();
  void SendOutbox();
  // After a failed commit (see the header comment); `dirty`: the jobs the pass changed; `reads`:
  // the pass's client reads, answered again once memory is restored.
  Status RollBack(const std::set<std::string>& dirty, const Status& cause,
                  const std::vector<RoutedMessage>& reads);
  // The timers' first run after a rollback: node losses applied again, studies' trials checked.
  void RedoAfterRollBack(int64_t now);
  void RefuseOverLimit(const RoutedMessage& m, bool agent);
  // CURVE: false (the message answered UNAUTHENTICATED) when its key was removed since its
  // handshake (PeerKeys).
  bool KeyStillListed(const RoutedMessage& m, bool agent);
  // Re-reads the key directories; a READY node whose agent's key is gone is LOST at once.
  void EndRevokedSessions(int64_t now);
  // The HTTP endpoint's snapshot (coordinator/http_snapshot.h), at most every
  // kSnapshotIntervalMs.
  void PublishSnapshot(int64_t now);
  void LogStats(bool at_exit) const;
  // The state backups (--backup-dir) moved on after the pass's commit; their ends logged.
  void StepBackups(int64_t now);

  CoordinatorOptions options_;
  Clock* clock_;
  std::unique_ptr<zmq::context_t> owned_context_;
  zmq::context_t* context_ = nullptr;
  std::unique_ptr<ZapAuthenticator> zap_;
  std::unique_ptr<PeerKeys> peer_keys_;  // CURVE only
  int64_t last_key_check_ms_ = 0;
  std::unique_ptr<RouterSocket> client_;
  std::unique_ptr<RouterSocket> agent_;
  std::unique_ptr<StateStore> store_;
  StateBackups backups_;  // after store_: a copy under way reads the store's connection
  LogStore logs_;
  StorageProbe storage_;  // the storage check of options_.output_root (nodes_ judges with it)
  Scheduler scheduler_;
  NodeRegistry nodes_;
  JobController jobs_;
  StudyController studies_;
  StudyRunner study_runner_{studies_, jobs_, options_.queues};
  Watchdog watchdog_;
  Outbox outbox_;
  ExecRelay exec_relay_{outbox_, nodes_};
  ReplicaUsageTracker usage_;  // what running replicas use, from heartbeats
  ClientService client_service_;
  AdminService admin_service_;
  AgentService agent_service_;
  int64_t started_ms_ = 0;
  int64_t last_periodic_ms_ = 0;
  int64_t last_stats_log_ms_ = 0;
  int64_t store_failing_since_ms_ = -1;  // -1: the last commit succeeded
  int64_t last_store_warning_ms_ = 0;
  int64_t store_retry_at_ms_ = 0;          // the timers wait until then after a failed commit
  bool redo_after_rollback_ = false;       // RedoAfterRollBack before the timers' next run
  std::vector<RoutedMessage> pass_reads_;  // this pass's client reads (Commit, RollBack)
  // Job notices (--notify-url): those of this pass wait for its commit.
  std::unique_ptr<Notifier> notifier_;
  std::vector<std::string> pending_notices_;
  CoordinatorStats stats_;
  // Observability: what the loop counts, the training metrics, and the jobs as last published.
  std::unique_ptr<CoordinatorHttp> http_;
  CoordinatorCounters counters_;
  TrainingMetrics training_;
  ObservabilityService observability_service_{jobs_, training_, outbox_};
  SnapshotPublisher snapshots_;
  RateLimitedLog bad_frames_{spdlog::level::warn, "bad frames", 10, std::chrono::seconds(10)};
  RateLimitedLog key_refusals_{spdlog::level::warn, "messages from keys no longer listed", 10,
                               std::chrono::seconds(10)};
  // Commits slower than kSlowCommitSeconds: clients time out waiting for replies (5 s), and
  // agents' heartbeats are answered late.
  static constexpr double kSlowCommitSeconds = 1.0;
  RateLimitedLog slow_commits_{spdlog::level::warn, "slow commits", 3, std::chrono::seconds(60)};
};

}  // namespace cohort::coordinator
