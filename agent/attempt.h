// Attempt: one replica attempt on this node, from its LaunchReplica until the agent forgets it.
// It holds the attempt's lifecycle: its state (PENDING, STARTING, RUNNING, then one final state),
// its process, why and until when it is being stopped, and the version of its status; the
// LogShipper and MetricForwarder that deliver its log and measurements hang off it. The agent
// drives it and reports each state change it makes (agent/agent.h).
//
// Final states: SUCCEEDED or FAILED by the exit of its main process, STOPPED when the
// coordinator stopped it or a newer attempt of the replica replaced it, PREEMPTED when the agent
// shut down (exit code and signal kept in each case). An attempt is `gone` once it is final and
// no process of it remains; leftovers of an ended main process are killed. It may be forgotten
// once gone, its last status acknowledged, its log shipped and its measurements answered.
//
// Thread safety: none; the agent loop owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "agent/exec_in_replica.h"
#include "agent/launcher.h"
#include "agent/log_shipper.h"
#include "agent/metric_forwarder.h"
#include "agent/replica_env.h"
#include "common/schema/cohort_generated.h"

namespace cohort::agent {

// "<job>\n<replica>\n<attempt>": names an attempt among the agent's, and its outbox streams.
std::string AttemptKey(const std::string& job, const std::string& replica, int attempt);

// Why an attempt is stopped: the coordinator asked, the agent shuts down (PREEMPTED), a newer
// attempt of the replica replaces it, the coordinator fell silent past its --fence-after
// (agent/coordinator_session.h), or a GPU pinned to it reported an Xid after which nothing runs
// there (agent/nvml.h, XidStopsTheGpu: it ends FAILED, killed, a failure its job restarts from).
// The others end it STOPPED.
enum class StopCause { kNone, kCoordinator, kPreemption, kReplaced, kFence, kGpuFault };

// What a launch's step off the agent loop found: the checkpoint a restart restores from, what
// it set aside, and how the launcher's Prepare went (an image unpack; agent/launcher.h).
struct PreparedLaunch {
  RestorePoint restore;
  std::string start_note;                  // Attempt::start_note
  std::map<std::string, std::string> env;  // the request's, rendered with `restore`
  Status prepared;
};

// A launch waiting for its checkpoint lookup (which reads and checksums the checkpoint) and its
// launcher's Prepare (which may unpack an image for minutes): both run on a thread of their own,
// off the agent loop.
struct PendingLaunch {
  LaunchPlan plan;
  Launcher* launcher = nullptr;
  std::future<PreparedLaunch> ready;
};

struct Attempt {
  using milliseconds = std::chrono::milliseconds;
  // A change of state for the agent to report.
  struct Change {
    wire::ReplicaState state;
    std::string message;
  };

  std::string key() const { return AttemptKey(job, replica, attempt); }
  // Started (or starting) and not final.
  bool live() const { return !final && (process || pending); }
  wire::ReplicaStatusT ToStatus() const;
  // `fallback`, or PREEMPTED when the agent's shutdown is what stopped it.
  wire::ReplicaState FinalState(wire::ReplicaState fallback) const;

  // SIGTERM to every process of the attempt, SIGKILL once `grace` has passed (at once for 0, and
  // for a process that has not executed its command yet: no user code runs there to checkpoint,
  // and as a PID namespace's init it would ignore the SIGTERM, holding the stop for the grace).
  // A pending launch just never starts; a process that already exited keeps its outcome. The
  // first cause wins, except that preemption overrides any other.
  void RequestStop(StopCause cause, std::string reason, milliseconds grace, milliseconds now);
  // Until its launched process has executed the command or failed to: polls it (never waits).
  // Once it has, logs the start and returns RUNNING with start_note; once it failed to, logs that
  // and keeps launch_error() as the message (its exit then reports FAILED with it). nullopt
  // otherwise.
  std::optional<Change> TakeStart();
  // SIGKILL to a process still running past its stop deadline (again a second later, should it
  // somehow survive).
  void EnforceDeadline(milliseconds now);
  // Once the main process has exited: the attempt becomes final; returns its final state and
  // message: the launch error and stop reason, then, for FAILED, whether the OOM killer ended
  // processes of it, and the cause: "raised: " with the exception its error file holds, else "log:
  // " with what its log's end gives (agent/failure_excerpt.h; both files are local, read here),
  // else how it exited (a failure's exit code and signal are in the status already). nullopt
  // otherwise.
  std::optional<Change> TakeExit();
  // For a final attempt: kills what its main process left behind, and once nothing is left,
  // releases it and marks it gone.
  void CollectLeftovers();
  bool forgettable() const;

  std::string job;
  int64_t job_created_ms = 0;  // LaunchReplica.job_created_ms: which job of that name
  std::string replica;
  int attempt = 0;
  std::vector<int> gpus;  // node-local GPU indices pinned to it
  wire::ReplicaState state = wire::ReplicaState::PENDING;
  ExitInfo exit;
  // FAILED with a code: the signal that killed a process inside it, as torchrun reported it
  // (agent/failure_excerpt.h's TorchrunKillSignal); 0: none.
  int cause_signal = 0;
  // It failed and the node's health check runs again to judge it (ReplicaStatus).
  bool health_rechecking = false;
  std::string message;
  // What the agent did before the start that its RUNNING report says (torn checkpoints set
  // aside: agent/torn_checkpoints.h); usually "".
  std::string start_note;
  std::unique_ptr<ReplicaProcess> process;
  // How `cohort exec` runs a command as this attempt runs (set at its launch).
  ExecTarget exec_target;
  std::unique_ptr<PendingLaunch> pending;  // STARTING, lookup or Prepare under way
  bool launch_settled = false;             // process executed the command or failed to (TakeStart)
  StopCause stop = StopCause::kNone;
  std::string stop_reason;
  std::optional<milliseconds> kill_at;
  bool final = false;  // state is SUCCEEDED, FAILED, PREEMPTED or STOPPED
  bool gone = false;   // final, and no process of it remains
  // Status delivery: the version of the newest state, and the newest the coordinator acked.
  uint64_t version = 0;
  uint64_t acked_version = 0;
  std::string error_file;   // its TORCHELASTIC_ERROR_FILE; empty: none to read
  bool chief = false;       // role "chief": its metric file is forwarded (a tuning trial's)
  int64_t launched_ns = 0;  // FlightClockNs() at its launch (agent/flight_recorder_poller.h)
  std::unique_ptr<LogShipper> log;           // null: no log file to ship
  std::unique_ptr<MetricForwarder> metrics;  // the chief of a tuning trial only
};

}  // namespace cohort::agent
