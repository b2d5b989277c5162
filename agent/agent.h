// Agent: the node daemon's control loop (DESIGN.md "Agents and containers"). One thread polls the
// DEALER socket to the coordinator, reaps replica processes, ships their logs and runs the
// protocol timers of common/schema/cohort.fbs:
//
//  - RegisterAgent on start, and again whenever the coordinator forgets the node (HeartbeatReply
//    known=false) or stays silent for coordinator_timeout (it restarted, or the link broke);
//    it lists every replica attempt still running and every final status not yet acked.
//  - Heartbeat every interval the RegisterAgentReply gives.
//  - ReplicaUpdate on every state change of an attempt, re-sent until an Ack (or an ErrorReply,
//    which is logged and not retried) answers it.
//  - LogChunk: each attempt's log file is shipped in chunks of at most log_chunk_bytes from the
//    offset the coordinator last acknowledged, one chunk in flight per attempt; a LogAck moves the
//    offset (back, too, when the coordinator holds less). The last chunk carries eof once the
//    attempt ended and no process of it remains. After re-registering, shipping resumes from the
//    acked offset, so nothing is lost across a coordinator restart.
//  - TrialMeasurement: the chief of a tuning trial has its $CLOUD_ML_HP_METRIC_FILE tailed
//    (agent/metric_tail.h); each new line is sent in file order, the next once the last is acked.
//  - LaunchReplica: prepares <work_dir>/<job>/<replica>/attempt-<n>, renders the environment
//    (agent/replica_env.h) and starts the attempt through the Launcher; StopReplica: SIGTERM to
//    every process of the attempt, SIGKILL after grace_ms, final state STOPPED.
//
// An attempt is forgotten once its final status is acked, its log fully shipped and its last
// measurements acked.
// When the main process of an attempt exits, whatever it left behind (its process group and
// cgroup) is killed at once.
//
// Preempt() (SIGTERM/SIGINT to the daemon) signals every replica, waits grace_period, kills what
// is left, reports each attempt PREEMPTED (exit code and signal kept) and waits up to
// preempt_ack_wait for the acks and the last log chunks. Launches that arrive meanwhile are
// ignored (see HandleLaunch).
//
// Thread safety: none; all calls from one thread. Lifetime: the zmq context outlives the Agent.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/inventory.h"
#include "agent/launcher.h"
#include "agent/metric_tail.h"
#include "agent/replica_env.h"
#include "common/messaging.h"
#include "common/status.h"

namespace cohort::agent {

using TimePoint = std::chrono::steady_clock::time_point;

struct AgentConfig {
  std::string coordinator;        // tcp://host:7401
  std::string node_id;            // also the DEALER routing id
  std::string advertise_address;
  std::string work_dir;
  NodeInventory inventory;
  std::map<std::string, std::string> labels;
  SocketSecurity security;
  std::chrono::milliseconds grace_period{30000};
  // Attempt working dirs and logs older than this (and not running) are removed; 0 keeps them.
  std::chrono::milliseconds attempt_retention{7 * 24 * 3600 * 1000LL};
  std::chrono::milliseconds sweep_interval{10 * 60 * 1000};

  // Protocol timing.
  std::chrono::milliseconds default_heartbeat_interval{1000};  // until the coordinator says
  std::chrono::milliseconds coordinator_timeout{0};  // 0: max(5 heartbeat intervals, 3 s)
  std::chrono::milliseconds resend_interval{1000};   // unanswered register/update/log chunk
  std::chrono::milliseconds max_register_interval{5000};  // backoff cap while unregistered
  std::chrono::milliseconds loop_interval{20};       // longest socket wait in Run()
  std::chrono::milliseconds preempt_ack_wait{5000};
  size_t log_chunk_bytes = 256 << 10;
  std::chrono::milliseconds metric_poll_interval{200};  // $CLOUD_ML_HP_METRIC_FILE reads
  // Reap every child (the daemon is a PR_SET_CHILD_SUBREAPER, so orphans come to it), not only
  // the replicas' main processes.
  bool reap_all_children = false;
  // Injectable clock; steady_clock::now when empty.
  std::function<TimePoint()> now;
};

class Agent {
 public:
  // Connects the socket (ZeroMQ connects lazily; nothing waits for the coordinator here).
  static StatusOr<std::unique_ptr<Agent>> Create(zmq::context_t& context, AgentConfig config,
                                                 std::unique_ptr<Launcher> process_launcher);
  ~Agent();

  // Where LaunchReplica with a container goes; without one such launches fail with a message.
  void SetContainerLauncher(std::unique_ptr<Launcher> launcher);

  // One loop step: waits up to `max_wait` for coordinator messages, handles them, reaps,
  // enforces stop deadlines, runs the timers and ships logs.
  Status RunOnce(std::chrono::milliseconds max_wait);
  // Steps until `stop` becomes true, then Preempt().
  Status Run(const std::atomic<bool>& stop);
  // The preemption sequence; returns when every replica is gone and reported (or the ack wait
  // ran out).
  Status Preempt();

  bool registered() const { return registered_; }
  // Attempts not yet forgotten (running, or final but unacked / log not fully shipped).
  size_t attempt_count() const { return attempts_.size(); }
  std::vector<wire::ReplicaStatusT> Statuses() const;
  const AgentConfig& config() const { return config_; }

 private:
  enum class StopCause { kNone, kCoordinator, kPreemption, kReplaced };
  // A launch waiting for its checkpoint lookup (which reads and checksums the checkpoint, so it
  // runs on its own thread, off the loop).
  struct PendingLaunch {
    LaunchRequest request;
    ReplicaEnvInput env;
    Launcher* launcher = nullptr;
    bool chief = false;
    std::future<RestorePoint> restore;
  };
  struct Attempt {
    std::string job;
    std::string replica;
    int attempt = 0;
    wire::ReplicaState state = wire::ReplicaState::PENDING;
    ExitInfo exit;
    std::string message;
    std::unique_ptr<ReplicaProcess> process;
    std::unique_ptr<PendingLaunch> pending;  // STARTING, restore lookup under way
    StopCause stop = StopCause::kNone;
    std::string stop_reason;
    std::optional<TimePoint> kill_at;
    bool final = false;  // state is SUCCEEDED, FAILED, PREEMPTED or STOPPED
    bool gone = false;   // final, and no process of it remains
    // ReplicaUpdate delivery.
    uint64_t version = 0;
    uint64_t acked_version = 0;
    uint64_t update_request = 0;
    TimePoint update_sent{};
    // Log shipping.
    std::string log_path;
    uint64_t log_acked = 0;
    uint64_t log_request = 0;  // the LogChunk in flight, 0 when none
    TimePoint log_sent{};
    uint64_t log_sent_end = 0;
    bool log_sent_eof = false;
    bool log_done = false;
    // Hyperparameter-tuning measurements (chief of a trial only).
    std::unique_ptr<MetricTail> metrics;
    uint64_t metric_request = 0;
    TimePoint metric_sent{};
    TimePoint next_metric_poll{};
    bool metrics_final_polled = false;
  };
  enum class RequestKind { kRegister, kHeartbeat, kUpdate, kLog, kMetric };
  struct Pending {
    RequestKind kind;
    std::string key;
    uint64_t version = 0;
    TimePoint sent{};
  };

  Agent(AgentConfig config, DealerSocket socket, std::unique_ptr<Launcher> process_launcher);

  TimePoint Now() const { return config_.now ? config_.now() : std::chrono::steady_clock::now(); }
  static std::string Key(const std::string& job, const std::string& replica, int attempt);
  uint64_t Send(RequestKind kind, const std::string& key, uint64_t version, wire::BodyUnion body);

  void HandleMessage(const Message& message);
  void HandleLaunch(const wire::LaunchReplica& launch);
  void HandleStop(const wire::StopReplica& stop);
  void HandleAck(uint64_t request_id, const Status& error);
  void HandleLogAck(uint64_t request_id, const wire::LogAck& ack);

  void StartAttempt(Attempt& a, const wire::LaunchReplica& launch);
  void StartPending();
  void FinishLaunch(Attempt& a, PendingLaunch& pending);
  void RequestStop(Attempt& a, StopCause cause, std::string reason,
                   std::chrono::milliseconds grace);
  void SetState(Attempt& a, wire::ReplicaState state, std::string message);
  void FailBeforeLaunch(Attempt& a, const Status& status, int exit_code);
  wire::ReplicaStatusT ToStatus(const Attempt& a) const;

  void Reap();
  void EnforceDeadlines();
  void RunTimers();
  void SendRegister();
  void SendHeartbeat();
  void SendUpdate(Attempt& a);
  void ShipLogs();
  void ShipLog(Attempt& a);
  void ShipMetrics(Attempt& a);
  void Forget();

  AgentConfig config_;
  DealerSocket socket_;
  std::unique_ptr<Launcher> process_launcher_;
  std::unique_ptr<Launcher> container_launcher_;
  std::map<std::string, Attempt> attempts_;
  std::map<uint64_t, Pending> pending_;
  // Registration: the versions each outstanding RegisterAgent carried, by request id.
  std::map<uint64_t, std::map<std::string, uint64_t>> register_requests_;
  bool registered_ = false;
  bool preempting_ = false;
  TimePoint next_register_{};
  std::chrono::milliseconds register_backoff_{0};
  TimePoint next_heartbeat_{};
  TimePoint next_sweep_{};  // attempt retention
  TimePoint last_heard_{};
  std::chrono::milliseconds heartbeat_interval_{1000};
};

}  // namespace cohort::agent
