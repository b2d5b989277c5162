// Coordinator is the cohort-coordinator daemon minus main(): one single-threaded event loop over
// small managers. It owns the two ROUTER endpoints (clients, agents), the durable job store
// (Journal), and wires the managers together:
//   ClientService / AgentService   wire requests in, replies out (coordinator/*_service.h)
//   JobController                  the job state machine: events in, commands out
//   NodeRegistry                   nodes, heartbeats, node loss
//   PlacementRound + Scheduler     the scheduling round;  LaunchPlan  launch/stop messages
//   StudyController                hyperparameter studies (trial jobs submitted and cancelled)
//
// Loop: RunOnce() polls both sockets for up to `poll_timeout`, hands every message waiting to its
// service, runs the timers (node heartbeat check, job timeouts, held verdicts, scheduling rounds)
// against the injected Clock, turns the JobController's commands into launches and stops, then
// commits: every job changed in this pass is appended to the journal, the journal is fsynced, and
// only then is the Outbox (replies, launches, stops) sent. So no one (client, agent) ever hears
// of a change that a crash could undo. Tests step RunOnce() with a ManualClock; main() calls Run().
//
// Errors: a malformed frame or an invalid request is answered with ErrorReply; RunOnce returns an
// error only when the journal cannot be written (the daemon then exits non-zero). Each endpoint
// gives a pass at most kMaxMessagesPerPass messages, each read and handled once; every message,
// bad frames included, counts in its peer's budget of max_requests_per_peer a pass: requests
// beyond it are answered RESOURCE_EXHAUSTED unprocessed, bad frames beyond it are dropped.
// Warnings about bad frames are rate-limited, with a count of those left out.
// Thread safety: not thread-safe; one thread drives it. Lifetime: `clock` (and `context`, when
// given) must outlive the Coordinator.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/clock.h"
#include "common/curve_keys.h"
#include "common/messaging.h"
#include "common/rate_limited_log.h"
#include "common/status.h"
#include "coordinator/agent_service.h"
#include "coordinator/client_service.h"
#include "coordinator/job_controller.h"
#include "coordinator/journal.h"
#include "coordinator/log_store.h"
#include "coordinator/node_registry.h"
#include "coordinator/options.h"
#include "coordinator/outbox.h"
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
  uint64_t messages = 0;    // read from both endpoints, bad frames included
  uint64_t bad_frames = 0;  // frames that did not verify
  uint64_t refused = 0;     // requests over --max-requests-per-peer
};

class Coordinator {
 public:
  // Messages read from each endpoint in one pass, at most.
  static constexpr size_t kMaxMessagesPerPass = 4096;

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
  const JobRecord* FindJob(const std::string& name) const { return jobs_.FindJob(name); }
  const NodeRecord* FindNode(const std::string& node_id) const { return nodes_.Find(node_id); }
  const JobController& jobs() const { return jobs_; }
  const StudyController& studies() const { return studies_; }
  const CoordinatorStats& stats() const { return stats_; }
  size_t job_count() const { return jobs_.jobs().size(); }

 private:
  Coordinator(CoordinatorOptions options, Clock* clock);
  Status Recover();
  std::vector<std::string> SnapshotRecords() const;  // studies and jobs, for a journal snapshot

  // Studies: trial jobs submitted and cancelled as the StudyController asks.
  void RunStudies();
  void SubmitTrialJob(TrialJobLaunch launch);
  void RecoverStudies();

  // Timers, then the JobController's commands into the outbox.
  void Tick();
  void ScheduleRound(int64_t now);
  void ExecuteCommands();

  Status Commit();
  void RefuseOverLimit(const RoutedMessage& m, bool agent);
  void LogStats(bool at_exit) const;

  CoordinatorOptions options_;
  Clock* clock_;
  std::unique_ptr<zmq::context_t> owned_context_;
  zmq::context_t* context_ = nullptr;
  std::unique_ptr<ZapAuthenticator> zap_;
  std::unique_ptr<RouterSocket> client_;
  std::unique_ptr<RouterSocket> agent_;
  std::unique_ptr<Journal> journal_;
  LogStore logs_;
  Scheduler scheduler_;
  NodeRegistry nodes_;
  JobController jobs_;
  StudyController studies_;
  Outbox outbox_;
  ClientService client_service_;
  AgentService agent_service_;
  int64_t started_ms_ = 0;
  int64_t last_periodic_ms_ = 0;
  int64_t last_stats_log_ms_ = 0;
  CoordinatorStats stats_;
  RateLimitedLog bad_frames_{spdlog::level::warn, "bad frames", 10, std::chrono::seconds(10)};
};

}  // namespace cohort::coordinator
