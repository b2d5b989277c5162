#include "agent/attempt.h"

#include <signal.h>

#include "agent/failure_excerpt.h"
#include "common/logging.h"
#include "common/text_join.h"

namespace cohort::agent {

std::string AttemptKey(const std::string& job, const std::string& replica, int attempt) {
  return job + "\n" + replica + "\n" + std::to_string(attempt);
}

wire::ReplicaStatusT Attempt::ToStatus() const {
  wire::ReplicaStatusT s;
  s.job = job;
  s.job_created_ms = job_created_ms;
  s.replica = replica;
  s.attempt = attempt;
  s.state = state;
  s.exit_code = exit.exit_code;
  s.signal = exit.signal;
  s.cause_signal = cause_signal;
  s.health_rechecking = health_rechecking;
  s.message = message;
  s.pid = process ? process->pid() : 0;
  return s;
}

wire::ReplicaState Attempt::FinalState(wire::ReplicaState fallback) const {
  return stop == StopCause::kPreemption ? wire::ReplicaState::PREEMPTED : fallback;
}

void Attempt::RequestStop(StopCause cause, std::string reason, milliseconds grace,
                          milliseconds now) {
  // Not started yet: it never will (the agent ends it on its next StartPending).
  // A process that already exited keeps its own outcome.
  if (!pending && (!process || process->exit_info())) return;
  if (stop == StopCause::kNone || cause == StopCause::kPreemption) stop = cause;
  if (stop_reason.empty()) stop_reason = std::move(reason);
  if (pending) return;
  milliseconds deadline = now + grace;
  if (!kill_at || deadline < *kill_at) kill_at = deadline;
  if (grace.count() == 0 || process->PollLaunch() == ReplicaProcess::LaunchState::kStarting) {
    process->KillAll();
  } else {
    process->Signal(SIGTERM);
  }
}

std::optional<Attempt::Change> Attempt::TakeStart() {
  if (!process || final || launch_settled) return std::nullopt;
  if (process->PollLaunch() == ReplicaProcess::LaunchState::kStarting) return std::nullopt;
  launch_settled = true;
  std::string error = process->launch_error();
  spdlog::info("{}/{} attempt {}: started pid {}{}{}", job, replica, attempt, process->pid(),
               error.empty() ? "" : ", but ", error);
  if (!error.empty()) {
    message = std::move(error);  // the exit reports FAILED with exit 127/126 (or killed)
    return std::nullopt;
  }
  return Change{wire::ReplicaState::RUNNING, start_note};
}

void Attempt::EnforceDeadline(milliseconds now) {
  if (final || !process || !kill_at || now < *kill_at || process->exit_info()) return;
  spdlog::info("{}/{} attempt {}: grace period over, killing it", job, replica, attempt);
  process->KillAll();
  kill_at = now + std::chrono::seconds(1);
}

std::optional<Attempt::Change> Attempt::TakeExit() {
  if (!process || final || !process->exit_info()) return std::nullopt;
  exit = *process->exit_info();
  Change change;
  switch (stop) {
    case StopCause::kCoordinator:
    case StopCause::kReplaced:
    case StopCause::kFence:
      change.state = wire::ReplicaState::STOPPED;
      break;
    case StopCause::kPreemption:
      change.state = wire::ReplicaState::PREEMPTED;
      break;
    case StopCause::kGpuFault:
      change.state = wire::ReplicaState::FAILED;
      break;
    default:
      change.state = exit.exit_code == 0 && exit.signal == 0 ? wire::ReplicaState::SUCCEEDED
                                                             : wire::ReplicaState::FAILED;
  }
  // A failure's exit code and signal travel in the status, where the coordinator words them; its
  // message carries what they cannot: the launch error, and the cause its log gives.
  std::vector<std::string> parts;
  if (!message.empty()) parts.push_back(message);
  if (!stop_reason.empty()) parts.push_back(stop_reason);
  if (change.state == wire::ReplicaState::FAILED) {
    if (exit.oom_kills > 0) {
      parts.push_back("out of memory: the kernel's OOM killer ended " +
                      std::to_string(exit.oom_kills) + " of its processes");
    }
    std::string raised;
    if (!error_file.empty()) {
      LogTail file = ReadLogTail(error_file, kMaxErrorFileBytes);
      if (file.whole) raised = ErrorFileMessage(file.text);
    }
    const LogTail tail = log ? ReadLogTail(log->path(), kFailureLogTailBytes) : LogTail{};
    if (exit.signal == 0) cause_signal = TorchrunKillSignal(tail.text, tail.whole);
    if (!raised.empty()) {
      parts.push_back("raised: " + raised);
    } else if (log) {
      std::string excerpt = FailureExcerpt(tail.text, tail.whole,
                                           /*any_last_line=*/LastLineTellsTheCause(exit.signal));
      if (!excerpt.empty()) parts.push_back("log: " + excerpt);
    }
  } else {
    parts.push_back(exit.Describe());
  }
  change.message = JoinWith(parts, "; ");
  final = true;
  spdlog::info("{}/{} attempt {}: {}, {}{}{}", job, replica, attempt,
               wire::EnumNameReplicaState(change.state), exit.Describe(),
               change.message.empty() ? "" : ": ", change.message);
  return change;
}

void Attempt::CollectLeftovers() {
  if (!final || gone) return;
  if (process && process->AnyAlive()) {
    process->KillAll();
    return;
  }
  if (process) process->Release();
  gone = true;
}

bool Attempt::forgettable() const {
  return gone && acked_version >= version && (!log || log->done()) && (!metrics || metrics->done());
}

}  // namespace cohort::agent
