#include "agent/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "agent/replica_env.h"
#include "common/logging.h"
#include "common/service_notify.h"

namespace cohort::agent {
namespace {

using std::chrono::milliseconds;

std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// Appends one line of the agent's own to an attempt's log (launch failures), so `cohort logs`
// shows why the replica never ran.
void AppendToLog(const std::string& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  std::string text = "cohort-agent: " + line + "\n";
  (void)!::write(fd, text.data(), text.size());
  ::close(fd);
}

}  // namespace

StatusOr<std::unique_ptr<Agent>> Agent::Create(zmq::context_t& context, AgentConfig config,
                                               std::unique_ptr<Launcher> process_launcher) {
  if (config.node_id.empty()) return InvalidArgument("node id is empty");
  if (config.work_dir.empty()) return InvalidArgument("work dir is empty");
  COHORT_RETURN_IF_ERROR(MakeDirs(config.work_dir));
  COHORT_ASSIGN_OR_RETURN(
      DealerSocket socket,
      DealerSocket::Connect(context, config.coordinator, config.node_id, config.security));
  return std::unique_ptr<Agent>(
      new Agent(std::move(config), std::move(socket), std::move(process_launcher)));
}

Agent::Agent(AgentConfig config, DealerSocket socket, std::unique_ptr<Launcher> process_launcher)
    : config_(std::move(config)),
      socket_(std::move(socket)),
      process_launcher_(std::move(process_launcher)),
      heartbeat_interval_(config_.default_heartbeat_interval) {
  next_register_ = Now();
  last_heard_ = Now();
}

Agent::~Agent() {
  // No replica outlives its agent: kill whatever is still there.
  for (auto& [key, a] : attempts_) {
    if (a.process && (!a.process->exit_info() || a.process->AnyAlive())) a.process->KillAll();
  }
}

void Agent::SetContainerLauncher(std::unique_ptr<Launcher> launcher) {
  container_launcher_ = std::move(launcher);
}

std::string Agent::Key(const std::string& job, const std::string& replica, int attempt) {
  return job + "\n" + replica + "\n" + std::to_string(attempt);
}

uint64_t Agent::Send(RequestKind kind, const std::string& key, uint64_t version,
                     wire::BodyUnion body) {
  uint64_t id = socket_.NextRequestId();
  Status s = socket_.Send(EncodeBody(id, std::move(body)));
  if (!s.ok()) spdlog::debug("send to the coordinator: {}", s.ToString());
  if (kind != RequestKind::kRegister) pending_[id] = Pending{kind, key, version, Now()};
  return id;
}

std::vector<wire::ReplicaStatusT> Agent::Statuses() const {
  std::vector<wire::ReplicaStatusT> out;
  for (const auto& [key, a] : attempts_) out.push_back(ToStatus(a));
  return out;
}

wire::ReplicaStatusT Agent::ToStatus(const Attempt& a) const {
  wire::ReplicaStatusT s;
  s.job = a.job;
  s.replica = a.replica;
  s.attempt = a.attempt;
  s.state = a.state;
  s.exit_code = a.exit.exit_code;
  s.signal = a.exit.signal;
  s.message = a.message;
  s.pid = a.process ? a.process->pid() : 0;
  return s;
}

// ---- the loop -----------------------------------------------------------------------------

Status Agent::RunOnce(milliseconds max_wait) {
  milliseconds wait = max_wait;
  for (int i = 0; i < 1000; ++i) {
    auto received = socket_.Receive(wait);
    if (!received.ok()) return received.status();
    if (!received->has_value()) break;
    HandleMessage(**received);
    wait = milliseconds(0);
  }
  StartPending();
  Reap();
  EnforceDeadlines();
  RunTimers();
  ShipLogs();
  Forget();
  return Status::Ok();
}

Status Agent::Run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    Status s = RunOnce(config_.loop_interval);
    if (!s.ok()) spdlog::warn("agent loop: {}", s.ToString());
  }
  return Preempt();
}

Status Agent::Preempt() {
  preempting_ = true;
  NotifyStopping();
  // Tell the coordinator (a draining heartbeat) before any replica can end and be reported
  // PREEMPTED, so that it restarts them on other nodes and places nothing new here.
  if (registered_) SendHeartbeat();
  int running = 0;
  for (auto& [key, a] : attempts_) {
    if (a.final || (!a.process && !a.pending)) continue;
    RequestStop(a, StopCause::kPreemption, "preempted: the agent on this node is shutting down",
                config_.grace_period);
    ++running;
  }
  spdlog::info("preemption: signalled {} replica(s), grace period {} ms", running,
               config_.grace_period.count());
  // Every replica gone: the grace period, SIGKILL, and a little time for the kernel.
  TimePoint give_up = Now() + config_.grace_period + std::chrono::seconds(10);
  while (Now() < give_up) {
    bool all_gone = std::all_of(attempts_.begin(), attempts_.end(),
                                [](const auto& entry) { return entry.second.gone; });
    if (all_gone) break;
    COHORT_RETURN_IF_ERROR(RunOnce(config_.loop_interval));
  }
  // Then the acks and the last log chunks, briefly.
  TimePoint ack_deadline = Now() + config_.preempt_ack_wait;
  while (!attempts_.empty() && Now() < ack_deadline) {
    COHORT_RETURN_IF_ERROR(RunOnce(config_.loop_interval));
  }
  if (!attempts_.empty()) {
    spdlog::warn("preemption: {} replica status(es) or log(s) not acknowledged by the coordinator",
                 attempts_.size());
  }
  return Status::Ok();
}

// ---- messages from the coordinator --------------------------------------------------------

void Agent::HandleMessage(const Message& message) {
  last_heard_ = Now();
  uint64_t id = message.request_id();
  switch (message.type()) {
    case wire::Body::RegisterAgentReply: {
      auto it = register_requests_.find(id);
      if (it == register_requests_.end()) break;  // a late duplicate
      int interval = message.As<wire::RegisterAgentReply>()->heartbeat_interval_ms();
      if (interval > 0) heartbeat_interval_ = milliseconds(interval);
      for (const auto& [key, version] : it->second) {
        auto a = attempts_.find(key);
        if (a != attempts_.end()) a->second.acked_version = std::max(a->second.acked_version, version);
      }
      register_requests_.clear();
      if (!registered_) spdlog::info("registered with the coordinator at {}", config_.coordinator);
      registered_ = true;
      register_backoff_ = milliseconds(0);
      next_heartbeat_ = Now() + heartbeat_interval_;
      // Whatever was in flight before may be lost: resume from the acknowledged state.
      pending_.clear();
      for (auto& [key, a] : attempts_) {
        a.update_request = 0;
        a.log_request = 0;
        a.metric_request = 0;
      }
      break;
    }
    case wire::Body::HeartbeatReply:
      pending_.erase(id);
      if (!message.As<wire::HeartbeatReply>()->known() && registered_) {
        spdlog::warn("the coordinator does not know this node (it restarted?); registering again");
        registered_ = false;
        next_register_ = Now();
      }
      break;
    case wire::Body::Ack:
      HandleAck(id, Status::Ok());
      break;
    case wire::Body::ErrorReply: {
      Status error = message.ErrorStatus();
      if (register_requests_.count(id)) {
        spdlog::warn("the coordinator refused registration: {}", error.ToString());
        register_requests_.erase(id);
      } else if (pending_.count(id)) {
        HandleAck(id, error);
      } else {
        spdlog::warn("error from the coordinator (request {}): {}", id, error.ToString());
      }
      break;
    }
    case wire::Body::LogAck:
      HandleLogAck(id, *message.As<wire::LogAck>());
      break;
    case wire::Body::LaunchReplica:
      HandleLaunch(*message.As<wire::LaunchReplica>());
      break;
    case wire::Body::StopReplica:
      HandleStop(*message.As<wire::StopReplica>());
      break;
    default:
      spdlog::warn("unexpected {} message from the coordinator",
                   wire::EnumNameBody(message.type()));
  }
}

void Agent::HandleAck(uint64_t request_id, const Status& error) {
  auto it = pending_.find(request_id);
  if (it == pending_.end()) return;
  Pending p = it->second;
  pending_.erase(it);
  auto a = attempts_.find(p.key);
  if (a == attempts_.end()) return;
  if (p.kind == RequestKind::kUpdate) {
    if (error.code() == StatusCode::kFailedPrecondition) {
      // The coordinator does not know this node (it restarted, or declared us lost): the update
      // is not taken. Keep it unacked so RegisterAgent carries it, and register again.
      spdlog::info("coordinator has not registered this node; re-registering with {}/{} attempt {}",
                   a->second.job, a->second.replica, a->second.attempt);
      if (a->second.update_request == request_id) a->second.update_request = 0;
      registered_ = false;
      return;
    }
    if (!error.ok()) {
      spdlog::warn("coordinator rejected the status of {}/{} attempt {}: {}", a->second.job,
                   a->second.replica, a->second.attempt, error.ToString());
    }
    a->second.acked_version = std::max(a->second.acked_version, p.version);
    if (a->second.update_request == request_id) a->second.update_request = 0;
  } else if (p.kind == RequestKind::kMetric) {
    Attempt& at = a->second;
    if (at.metric_request != request_id || !at.metrics) return;
    if (!error.ok()) {
      spdlog::warn("coordinator rejected a measurement of {}/{}: {}", at.job, at.replica,
                   error.ToString());
    }
    if (!at.metrics->queue().empty()) at.metrics->queue().pop_front();
    at.metric_request = 0;
  } else if (p.kind == RequestKind::kLog && a->second.log_request == request_id &&
             (error.code() == StatusCode::kFailedPrecondition ||
              error.code() == StatusCode::kUnavailable ||
              error.code() == StatusCode::kResourceExhausted)) {
    // Passing trouble: ShipLog sends the chunk again after the resend interval.
    spdlog::info("coordinator could not take the log of {}/{} attempt {} yet: {}", a->second.job,
                 a->second.replica, a->second.attempt, error.ToString());
  } else if (p.kind == RequestKind::kLog && a->second.log_request == request_id && !error.ok()) {
    spdlog::warn("coordinator refused the log of {}/{} attempt {}; not shipping it further: {}",
                 a->second.job, a->second.replica, a->second.attempt, error.ToString());
    a->second.log_request = 0;
    a->second.log_done = true;
  }
}

void Agent::HandleLogAck(uint64_t request_id, const wire::LogAck& ack) {
  pending_.erase(request_id);
  auto it = attempts_.find(Key(Str(ack.job()), Str(ack.replica()), ack.attempt()));
  if (it == attempts_.end()) return;
  Attempt& a = it->second;
  if (a.log_request != request_id) return;  // an answer to an older chunk
  a.log_request = 0;
  a.log_acked = ack.next_offset();
  if (a.log_sent_eof && a.log_acked == a.log_sent_end) a.log_done = true;
}

void Agent::HandleLaunch(const wire::LaunchReplica& launch) {
  std::string job = Str(launch.job());
  std::string replica = Str(launch.replica());
  std::string key = Key(job, replica, launch.attempt());
  if (attempts_.count(key)) {
    spdlog::debug("launch of {}/{} attempt {} already handled", job, replica, launch.attempt());
    return;
  }
  if (preempting_) {
    // Answering PREEMPTED would invite the coordinator to place it here again at once; silence
    // leaves it pending until this node stops heartbeating and is declared lost, and the replica
    // is placed elsewhere.
    spdlog::warn("{}/{} attempt {}: launch ignored, this agent is shutting down", job, replica,
                 launch.attempt());
    return;
  }
  // One attempt of a replica at a time on a node: an older one still running is replaced.
  for (auto& [other_key, other] : attempts_) {
    if (other.job == job && other.replica == replica && !other.final &&
        (other.process || other.pending) && other.stop == StopCause::kNone) {
      spdlog::warn("{}/{}: attempt {} replaces attempt {} still running here; stopping it", job,
                   replica, launch.attempt(), other.attempt);
      RequestStop(other, StopCause::kReplaced,
                  "replaced by attempt " + std::to_string(launch.attempt()), config_.grace_period);
    }
  }
  Attempt& a = attempts_[key];
  a.job = job;
  a.replica = replica;
  a.attempt = launch.attempt();
  StartAttempt(a, launch);
}

void Agent::StartAttempt(Attempt& a, const wire::LaunchReplica& launch) {
  if (Status s = CheckPathComponent("job", a.job); !s.ok()) return FailBeforeLaunch(a, s, -1);
  if (Status s = CheckPathComponent("replica", a.replica); !s.ok()) {
    return FailBeforeLaunch(a, s, -1);
  }
  if (a.attempt < 0) return FailBeforeLaunch(a, InvalidArgument("negative attempt number"), -1);
  LaunchRequest request;
  request.job = a.job;
  request.replica = a.replica;
  request.attempt = a.attempt;
  request.working_dir = AttemptWorkingDir(config_.work_dir, a.job, a.replica, a.attempt);
  request.log_path = AttemptLogPath(config_.work_dir, a.job, a.replica, a.attempt);
  a.log_path = request.log_path;
  if (Status s = MakeDirs(request.working_dir); !s.ok()) return FailBeforeLaunch(a, s, -1);
  SetState(a, wire::ReplicaState::STARTING, "");

  std::string builtin = Str(launch.builtin());
  if (!builtin.empty()) {
    auto binary = ResolveBuiltinBinary(builtin);
    if (!binary.ok()) {
      return FailBeforeLaunch(a, binary.status(),
                              binary.status().code() == StatusCode::kNotFound ? 127 : 2);
    }
    request.argv.push_back(*binary);
  }
  if (launch.command()) {
    for (const auto* arg : *launch.command()) request.argv.push_back(Str(arg));
  }
  if (launch.gpus()) request.gpus.assign(launch.gpus()->begin(), launch.gpus()->end());
  request.cpus = launch.cpus();
  request.memory_mb = launch.memory_mb();
  auto pending = std::make_unique<PendingLaunch>();
  ReplicaEnvInput& env = pending->env;
  if (launch.env()) {
    for (const auto* kv : *launch.env()) env.launch_env[Str(kv->key())] = Str(kv->value());
  }
  env.attempt = a.attempt;
  env.gpus = request.gpus;
  pending->chief = launch.role() && launch.role()->str() == "chief";

  Launcher* launcher = process_launcher_.get();
  if (launch.container()) {
    request.image = Str(launch.container()->image());
    launcher = container_launcher_.get();
    if (launcher == nullptr) {
      return FailBeforeLaunch(
          a, FailedPrecondition("this agent has no container launcher (image " + request.image + ")"),
          -1);
    }
  }
  if (request.argv.empty() && launch.container() == nullptr) {
    return FailBeforeLaunch(a, InvalidArgument("the launch has no command"), 2);
  }
  pending->launcher = launcher;
  pending->request = std::move(request);
  // A first start begins from scratch; a restart resumes from the newest valid checkpoint.
  std::string checkpoint_dir = Str(launch.checkpoint_dir());
  if (a.attempt > 0 && !checkpoint_dir.empty()) {
    pending->restore = std::async(std::launch::async, FindRestoreCheckpoint, checkpoint_dir);
    a.pending = std::move(pending);
    return;  // StartPending() launches it when the lookup is done
  }
  FinishLaunch(a, *pending);
}

void Agent::StartPending() {
  for (auto& [key, a] : attempts_) {
    if (!a.pending) continue;
    if (a.pending->restore.wait_for(std::chrono::seconds(0)) != std::future_status::ready) continue;
    std::unique_ptr<PendingLaunch> pending = std::move(a.pending);
    RestorePoint restore = pending->restore.get();
    pending->env.restore_checkpoint = restore.checkpoint;
    // The attempt's log says where it restores from and what was skipped (`cohort logs`).
    for (const std::string& note : restore.notes) AppendToLog(pending->request.log_path, note);
    FinishLaunch(a, *pending);
  }
}

void Agent::FinishLaunch(Attempt& a, PendingLaunch& pending) {
  if (a.stop != StopCause::kNone) {
    // Stopped (or preempted) while the checkpoint lookup ran: it never starts.
    a.final = true;
    a.gone = true;
    SetState(a,
             a.stop == StopCause::kPreemption ? wire::ReplicaState::PREEMPTED
                                              : wire::ReplicaState::STOPPED,
             a.stop_reason.empty() ? "stopped before it started"
                                   : a.stop_reason + "; stopped before it started");
    return;
  }
  const ReplicaEnvInput& env = pending.env;
  if (!env.restore_checkpoint.empty()) {
    spdlog::info("{}/{} attempt {}: restoring from {}", a.job, a.replica, a.attempt,
                 env.restore_checkpoint);
  }
  pending.request.env = BuildReplicaEnv(env);
  if (Status s = MakeOutputDirs(pending.request.env); !s.ok()) return FailBeforeLaunch(a, s, -1);
  auto process = pending.launcher->Launch(pending.request);
  if (!process.ok()) return FailBeforeLaunch(a, process.status(), -1);
  a.process = std::move(*process);
  std::string error = a.process->launch_error();
  spdlog::info("{}/{} attempt {}: started pid {}{}{}", a.job, a.replica, a.attempt,
               a.process->pid(), error.empty() ? "" : ", but ", error);
  if (pending.chief) {
    auto file = env.launch_env.find("CLOUD_ML_HP_METRIC_FILE");
    if (file != env.launch_env.end() && !file->second.empty()) {
      auto trial = env.launch_env.find("CLOUD_ML_TRIAL_ID");
      a.metrics = MetricTail::Create(file->second, a.job, a.replica,
                                     trial == env.launch_env.end() ? "" : trial->second);
    }
  }
  if (error.empty()) {
    SetState(a, wire::ReplicaState::RUNNING, "");
  } else {
    a.message = error;  // the reaper reports FAILED with exit 127/126
  }
}

void Agent::FailBeforeLaunch(Attempt& a, const Status& status, int exit_code) {
  spdlog::warn("{}/{} attempt {}: cannot launch: {}", a.job, a.replica, a.attempt,
               status.ToString());
  if (!a.log_path.empty()) AppendToLog(a.log_path, status.message());
  a.exit.exit_code = exit_code;
  a.final = true;
  a.gone = true;
  if (a.log_path.empty()) a.log_done = true;
  SetState(a,
           a.stop == StopCause::kPreemption ? wire::ReplicaState::PREEMPTED
                                            : wire::ReplicaState::FAILED,
           status.message());
}

void Agent::HandleStop(const wire::StopReplica& stop) {
  std::string key = Key(Str(stop.job()), Str(stop.replica()), stop.attempt());
  auto it = attempts_.find(key);
  if (it == attempts_.end()) {
    // Not here (never launched, or already forgotten): report it stopped so the coordinator
    // can move on.
    Attempt& a = attempts_[key];
    a.job = Str(stop.job());
    a.replica = Str(stop.replica());
    a.attempt = stop.attempt();
    a.final = true;
    a.gone = true;
    a.log_done = true;
    SetState(a, wire::ReplicaState::STOPPED, "not running on this node");
    return;
  }
  Attempt& a = it->second;
  if (a.final) {
    a.version++;  // re-send the final status
    SendUpdate(a);
    return;
  }
  std::string reason = Str(stop.reason());
  spdlog::info("{}/{} attempt {}: stop requested{}{}", a.job, a.replica, a.attempt,
               reason.empty() ? "" : ": ", reason);
  RequestStop(a, StopCause::kCoordinator, reason, milliseconds(std::max(0, stop.grace_ms())));
}

void Agent::RequestStop(Attempt& a, StopCause cause, std::string reason, milliseconds grace) {
  if (a.pending) {  // not started yet: FinishLaunch will not start it
    if (a.stop == StopCause::kNone || cause == StopCause::kPreemption) a.stop = cause;
    if (a.stop_reason.empty()) a.stop_reason = std::move(reason);
    return;
  }
  // A process that already exited keeps its own outcome.
  if (!a.process || a.process->exit_info()) return;
  if (a.stop == StopCause::kNone || cause == StopCause::kPreemption) a.stop = cause;
  if (a.stop_reason.empty()) a.stop_reason = std::move(reason);
  TimePoint kill_at = Now() + grace;
  if (!a.kill_at || kill_at < *a.kill_at) a.kill_at = kill_at;
  if (grace.count() == 0) {
    a.process->KillAll();
  } else {
    a.process->Signal(SIGTERM);
  }
}

// ---- processes ------------------------------------------------------------------------------

void Agent::Reap() {
  // A replica's main process is peeked at (WNOWAIT) before it is reaped: while it is a zombie
  // its process-group id cannot be reused, so killing the group it leaves behind is safe.
  auto reap = [](ReplicaProcess& process) {
    process.KillAll();
    int wait_status = 0;
    if (::waitpid(process.pid(), &wait_status, WNOHANG) == process.pid()) {
      process.OnExited(wait_status);
    }
  };
  for (auto& [key, a] : attempts_) {
    if (!a.process || a.process->exit_info()) continue;
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(a.process->pid()), &info,
                 WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == a.process->pid()) {
      reap(*a.process);
    }
  }
  // As a subreaper the agent inherits orphans of its replicas: reap those too.
  while (config_.reap_all_children) {
    int wait_status = 0;
    pid_t pid = ::waitpid(-1, &wait_status, WNOHANG);
    if (pid <= 0) break;
    for (auto& [key, a] : attempts_) {
      if (a.process && a.process->pid() == pid && !a.process->exit_info()) {
        a.process->OnExited(wait_status);
        break;
      }
    }
  }
  for (auto& [key, a] : attempts_) {
    if (!a.process || a.final || !a.process->exit_info()) continue;
    a.exit = *a.process->exit_info();
    wire::ReplicaState state;
    std::string message = a.exit.Describe();
    switch (a.stop) {
      case StopCause::kCoordinator:
      case StopCause::kReplaced:
        state = wire::ReplicaState::STOPPED;
        break;
      case StopCause::kPreemption:
        state = wire::ReplicaState::PREEMPTED;
        break;
      default:
        state = a.exit.exit_code == 0 && a.exit.signal == 0 ? wire::ReplicaState::SUCCEEDED
                                                             : wire::ReplicaState::FAILED;
    }
    if (!a.stop_reason.empty()) message = a.stop_reason + "; " + message;
    if (!a.message.empty()) message = a.message + "; " + message;
    a.final = true;
    spdlog::info("{}/{} attempt {}: {} ({})", a.job, a.replica, a.attempt,
                 wire::EnumNameReplicaState(state), message);
    SetState(a, state, message);
  }
  for (auto& [key, a] : attempts_) {
    if (!a.final || a.gone) continue;
    if (a.process && a.process->AnyAlive()) {
      a.process->KillAll();
      continue;
    }
    if (a.process) a.process->Release();
    a.gone = true;
  }
}

void Agent::EnforceDeadlines() {
  TimePoint now = Now();
  for (auto& [key, a] : attempts_) {
    if (a.final || !a.process || !a.kill_at || now < *a.kill_at) continue;
    if (!a.process->exit_info()) {
      spdlog::info("{}/{} attempt {}: grace period over, killing it", a.job, a.replica, a.attempt);
      a.process->KillAll();
      a.kill_at = now + std::chrono::seconds(1);  // again, should it somehow survive
    }
  }
}

// ---- the protocol -------------------------------------------------------------------------

void Agent::SetState(Attempt& a, wire::ReplicaState state, std::string message) {
  a.state = state;
  a.message = std::move(message);
  a.version++;
  SendUpdate(a);
}

void Agent::SendUpdate(Attempt& a) {
  if (!registered_) return;  // RegisterAgent will carry it
  // A trial's end waits for its last measurements: the coordinator judges the trial by them
  // when it hears that the job ended. RunTimers sends it once they are acknowledged.
  if (a.final && a.metrics && !(a.metrics_final_polled && a.metrics->queue().empty())) return;
  wire::ReplicaUpdateT update;
  update.node_id = config_.node_id;
  update.status = std::make_unique<wire::ReplicaStatusT>(ToStatus(a));
  wire::BodyUnion body;
  body.Set(std::move(update));
  a.update_request = Send(RequestKind::kUpdate, Key(a.job, a.replica, a.attempt), a.version,
                          std::move(body));
  a.update_sent = Now();
}

void Agent::SendHeartbeat() {
  wire::HeartbeatT heartbeat;
  heartbeat.node_id = config_.node_id;
  heartbeat.draining = preempting_;
  heartbeat.listening_ports = ListeningTcpPorts();
  wire::BodyUnion body;
  body.Set(std::move(heartbeat));
  Send(RequestKind::kHeartbeat, "", 0, std::move(body));
  next_heartbeat_ = Now() + heartbeat_interval_;
}

void Agent::SendRegister() {
  wire::RegisterAgentT reg;
  reg.node_id = config_.node_id;
  reg.address = config_.advertise_address;
  for (const auto& gpu : config_.inventory.gpus) {
    auto info = std::make_unique<wire::GpuInfoT>();
    info->index = gpu.index;
    info->model = gpu.model;
    info->memory_mb = gpu.memory_mb;
    info->uuid = gpu.uuid;
    reg.gpus.push_back(std::move(info));
  }
  reg.cpus = config_.inventory.cpus;
  reg.memory_mb = config_.inventory.memory_mb;
  reg.listening_ports = ListeningTcpPorts();
  for (const auto& [key, value] : config_.labels) {
    auto kv = std::make_unique<wire::KeyValueT>();
    kv->key = key;
    kv->value = value;
    reg.labels.push_back(std::move(kv));
  }
  std::map<std::string, uint64_t> versions;
  for (const auto& [key, a] : attempts_) {
    if (a.final && a.acked_version >= a.version) continue;
    reg.replicas.push_back(std::make_unique<wire::ReplicaStatusT>(ToStatus(a)));
    versions[key] = a.version;
  }
  size_t count = reg.replicas.size();
  wire::BodyUnion body;
  body.Set(std::move(reg));
  uint64_t id = Send(RequestKind::kRegister, "", 0, std::move(body));
  register_requests_[id] = std::move(versions);
  spdlog::debug("RegisterAgent sent with {} replica(s)", count);
}

void Agent::RunTimers() {
  TimePoint now = Now();
  if (config_.attempt_retention.count() > 0 && now >= next_sweep_) {
    next_sweep_ = now + config_.sweep_interval;
    int removed = SweepAttemptDirs(
        config_.work_dir, config_.attempt_retention,
        [&](const std::string& job, const std::string& replica, int attempt) {
          return attempts_.count(Key(job, replica, attempt)) > 0;
        });
    if (removed > 0) {
      spdlog::info("removed {} ended attempt(s) older than {} s from {}", removed,
                   config_.attempt_retention.count() / 1000, config_.work_dir);
    }
  }
  if (registered_) {
    milliseconds timeout = config_.coordinator_timeout;
    if (timeout.count() <= 0) timeout = std::max(5 * heartbeat_interval_, milliseconds(3000));
    if (now - last_heard_ > timeout) {
      spdlog::warn("no word from the coordinator for {} ms; registering again",
                   std::chrono::duration_cast<milliseconds>(now - last_heard_).count());
      registered_ = false;
      next_register_ = now;
    }
  }
  if (!registered_) {
    if (now >= next_register_) {
      SendRegister();
      register_backoff_ = register_backoff_.count() == 0
                              ? config_.resend_interval
                              : std::min(2 * register_backoff_, config_.max_register_interval);
      next_register_ = now + register_backoff_;
    }
    return;
  }
  if (now >= next_heartbeat_) SendHeartbeat();
  for (auto& [key, a] : attempts_) {
    if (a.acked_version >= a.version) continue;
    if (a.update_request != 0 && now - a.update_sent < config_.resend_interval) continue;
    SendUpdate(a);
  }
  // Requests nobody answered stay in pending_ only so long.
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now - it->second.sent > std::chrono::minutes(1)) {
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

void Agent::ShipLogs() {
  if (!registered_) return;
  for (auto& [key, a] : attempts_) {
    ShipLog(a);
    ShipMetrics(a);
  }
}

void Agent::ShipMetrics(Attempt& a) {
  if (!a.metrics) return;
  TimePoint now = Now();
  if (!a.metrics_final_polled && (now >= a.next_metric_poll || a.gone)) {
    a.metrics->Poll();
    a.next_metric_poll = now + config_.metric_poll_interval;
    // Once the attempt is gone, nothing writes the file any more: that read was the last.
    if (a.gone) a.metrics_final_polled = true;
  }
  auto& queue = a.metrics->queue();
  if (queue.empty()) return;
  if (a.metric_request != 0 && now - a.metric_sent < config_.resend_interval) return;
  // The front stays queued until acked; the body is a copy.
  wire::TrialMeasurementT m;
  const wire::TrialMeasurementT& front = queue.front();
  m.job = front.job;
  m.trial = front.trial;
  m.step = front.step;
  m.timestamp = front.timestamp;
  m.replica = front.replica;
  for (const auto& kv : front.metrics) m.metrics.push_back(std::make_unique<wire::KeyValueT>(*kv));
  wire::BodyUnion body;
  body.Set(std::move(m));
  a.metric_request = Send(RequestKind::kMetric, Key(a.job, a.replica, a.attempt), 0,
                          std::move(body));
  a.metric_sent = now;
}

void Agent::ShipLog(Attempt& a) {
  if (a.log_done || a.log_path.empty()) return;
  TimePoint now = Now();
  if (a.log_request != 0 && now - a.log_sent < 2 * config_.resend_interval) return;
  struct stat st;
  uint64_t size = ::stat(a.log_path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  // Only once nothing can write to the file any more may a chunk say eof.
  bool ended = a.gone;
  if (a.log_acked > size) {
    if (ended) a.log_done = true;  // the coordinator holds more than we have: nothing to add
    return;
  }
  if (a.log_acked == size && !ended) return;
  uint64_t length = std::min<uint64_t>(size - a.log_acked, config_.log_chunk_bytes);
  wire::LogChunkT chunk;
  chunk.job = a.job;
  chunk.replica = a.replica;
  chunk.attempt = a.attempt;
  chunk.offset = a.log_acked;
  chunk.data.resize(length);
  if (length > 0) {
    int fd = ::open(a.log_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t got = ::pread(fd, chunk.data.data(), length, static_cast<off_t>(a.log_acked));
    ::close(fd);
    if (got < 0) return;
    chunk.data.resize(static_cast<size_t>(got));
    length = static_cast<uint64_t>(got);
  }
  chunk.eof = ended && a.log_acked + length == size;
  a.log_sent_end = a.log_acked + length;
  a.log_sent_eof = chunk.eof;
  wire::BodyUnion body;
  body.Set(std::move(chunk));
  a.log_request = Send(RequestKind::kLog, Key(a.job, a.replica, a.attempt), 0, std::move(body));
  a.log_sent = now;
}

void Agent::Forget() {
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    Attempt& a = it->second;
    bool metrics_done = !a.metrics || (a.metrics_final_polled && a.metrics->queue().empty());
    if (a.gone && a.acked_version >= a.version && a.log_done && metrics_done) {
      if (a.process) a.process->Release();
      it = attempts_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace cohort::agent
