// AgentService handles what agents send on the agent endpoint: registration (with reconciliation
// of the replicas the agent reports against what the coordinator believes runs there),
// heartbeats (and the replicas' progress they carry, for the Watchdog, and their usage, for the
// ReplicaUsageTracker), replica state updates
// (their messages made well-formed, printable UTF-8 of at most kMaxReplicaMessageBytes),
// log chunks, stack dumps, `cohort exec` outputs (to the ExecRelay), trial measurements and
// training metrics. What an agent sends is never trusted to be UTF-8: a registration whose names
// are not is refused (CheckAgentNames), a measurement whose metric names are not is dropped, and
// other text it sends is made well-formed and printable as it is taken. Node bookkeeping goes to
// the NodeRegistry, replica fates to the JobController; answers (and stops for attempts the
// coordinator does not run there) are queued in the Outbox. A measurement of any job is kept as
// training metrics (TakeTrainingMetrics: the coordinator stores them with the pass); one of a
// trial's job also goes to its study.
//
// Identity (with `bind_identity`, i.e. CURVE): a connection's key is listed as exactly one node
// (agents/<node-id>.pub, the ZAP User-Id of its messages), its routing id must be that node's
// (RoutingIdOfNode: agents connect with "<node-id>/<64 random bits>", so that no other peer can
// claim it and have ZeroMQ hand it this node's launches), and every message must be that node's:
// RegisterAgent, Heartbeat and ReplicaUpdate name it, and a LogChunk or TrialMeasurement for a
// replica's current attempt must come from the node that attempt runs on. Anything else is refused
// (PERMISSION_DENIED) and logged, rate-limited. Without it (--insecure) nothing is checked.
//
// Thread safety: none; the coordinator loop calls it. Lifetime: everything it is given must
// outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/messaging.h"
#include "common/rate_limited_log.h"
#include "coordinator/exec_relay.h"
#include "coordinator/job_controller.h"
#include "coordinator/log_store.h"
#include "coordinator/node_registry.h"
#include "coordinator/outbox.h"
#include "coordinator/replica_usage.h"
#include "coordinator/study_controller.h"
#include "coordinator/training_metrics.h"
#include "coordinator/watchdog.h"

namespace cohort::coordinator {

// The most of a replica status's message the coordinator keeps (bytes; longer ones are cut).
inline constexpr size_t kMaxReplicaMessageBytes = 1024;
// The most of a progress report's operation or algorithm name kept ("allreduce").
inline constexpr size_t kMaxOpNameBytes = 64;

// True when `routing_id` may be used by the key of node `node_id`: "<node-id>/<anything>", or the
// bare node id (test harnesses; an agent never uses it, as a predictable id can be taken over).
bool RoutingIdOfNode(std::string_view routing_id, std::string_view node_id);

class AgentService {
 public:
  // `stop_grace_ms`: the grace of the stops it sends; `fence_after_ms` and `fence_grace_ms`, what
  // it hands agents at registration. `run_studies`: submits and cancels the jobs the studies ask
  // for (after a measurement arrives).
  AgentService(JobController& jobs, NodeRegistry& nodes, StudyController& studies, LogStore& logs,
               Outbox& outbox, int stop_grace_ms, int64_t fence_after_ms, int64_t fence_grace_ms,
               bool bind_identity, std::function<void()> run_studies)
      : jobs_(jobs),
        nodes_(nodes),
        studies_(studies),
        logs_(logs),
        outbox_(outbox),
        stop_grace_ms_(stop_grace_ms),
        fence_after_ms_(fence_after_ms),
        fence_grace_ms_(fence_grace_ms),
        bind_identity_(bind_identity),
        run_studies_(std::move(run_studies)) {}

  void Handle(const RoutedMessage& m, int64_t now_ms);
  // Where the progress that heartbeats carry goes (none: it is dropped). Outlives this.
  void SetWatchdog(Watchdog* watchdog) { watchdog_ = watchdog; }
  // Where the usage that heartbeats carry goes (none: it is dropped). Outlives this.
  void SetUsageTracker(ReplicaUsageTracker* usage) { usage_ = usage; }
  // Where agents' ExecOutput goes (none: it is dropped). Outlives this.
  void SetExecRelay(ExecRelay* relay) { exec_relay_ = relay; }
  // Queues a stop of one attempt for the agent at `peer`.
  void SendStop(const std::string& peer, const std::string& job, const std::string& replica,
                int attempt, const std::string& reason);
  // Queues a DumpStacks of one attempt for the agent at `peer` (before any stop of it, so the
  // agent takes the stacks of the stuck process, not of one being stopped).
  void SendDumpStacks(const std::string& peer, const std::string& job, const std::string& replica,
                      int attempt, const std::string& reason);
  // The training metrics received since the last call, for the pass's commit.
  std::vector<TrainingMetric> TakeTrainingMetrics() { return std::move(training_metrics_); }

  // Whether `s`, an end a registration reports, is the job's chief succeeding in an attempt its
  // state never placed (JobController::ChiefSucceededUnrecorded).
  static bool RanUnrecorded(const JobRecord& job, const ReplicaRecord& r,
                            const wire::ReplicaStatus& s);
  // Whether `s` is `r`'s current attempt on `node_id`, not yet final here: the same attempt of
  // the same job, not of an earlier one of its name (deleted since) whose end an agent still
  // reports (ReplicaStatus.job_created_ms; 0, from an agent older than it, matches any).
  static bool IsCurrentAttempt(const JobRecord& job, const ReplicaRecord* r,
                               const std::string& node_id, const wire::ReplicaStatus& s);

 private:
  void OnRegister(const RoutedMessage& m, const wire::RegisterAgent& req, int64_t now_ms);
  void OnHeartbeat(const RoutedMessage& m, const wire::Heartbeat& req, int64_t now_ms);
  void OnReplicaUpdate(const RoutedMessage& m, const wire::ReplicaUpdate& req, int64_t now_ms);
  void OnLogChunk(const RoutedMessage& m, const wire::LogChunk& req, int64_t now_ms);
  void OnTrialMeasurement(const RoutedMessage& m, const wire::TrialMeasurement& req);
  void OnStackDump(const RoutedMessage& m, const wire::StackDump& req, int64_t now_ms);
  void OnExecOutput(const RoutedMessage& m, const wire::ExecOutput& req);
  // Applies a reported status to the attempt it names when that is the replica's current attempt
  // on `node_id` (IsCurrentAttempt); true when it was.
  bool ApplyIfCurrent(const std::string& node_id, const wire::ReplicaStatus& s, int64_t now_ms);
  // True when `m` may speak for `node_id` (see "Identity"); else answers it PERMISSION_DENIED.
  bool SpeaksFor(const RoutedMessage& m, const std::string& node_id, std::string_view what);
  void Reply(const RoutedMessage& m, zmq::message_t frame) {
    outbox_.ToAgent(m.peer, std::move(frame));
  }

  JobController& jobs_;
  NodeRegistry& nodes_;
  StudyController& studies_;
  LogStore& logs_;
  Watchdog* watchdog_ = nullptr;
  ExecRelay* exec_relay_ = nullptr;
  ReplicaUsageTracker* usage_ = nullptr;
  Outbox& outbox_;
  int stop_grace_ms_;
  int64_t fence_after_ms_;  // handed to agents at registration (0: no fencing)
  int64_t fence_grace_ms_;
  bool bind_identity_;
  std::function<void()> run_studies_;
  RateLimitedLog refusals_{spdlog::level::warn, "refused agent messages", 10,
                           std::chrono::seconds(10)};
  RateLimitedLog warnings_{spdlog::level::warn, "agent message warnings", 10,
                           std::chrono::seconds(10)};
  std::vector<TrainingMetric> training_metrics_;
};

}  // namespace cohort::coordinator
