#include "agent/agent.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "agent/replica_env.h"
#include "agent/stack_dump.h"
#include "common/logging.h"
#include "common/service_notify.h"

namespace cohort::agent {
namespace {

using std::chrono::milliseconds;

std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// This agent's ZeroMQ routing id: its node id, then '/' and 64 random bits. The coordinator's
// ROUTER hands a routing id over to the newest connection that claims it, so an id that another
// peer could guess would let that peer take this node's launches and stops; this one is known
// only to the coordinator and this process (a reconnect of the same socket keeps it).
std::string SessionRoutingId(const std::string& node_id) {
  std::random_device random;
  uint64_t bits = (static_cast<uint64_t>(random()) << 32) ^ random();
  char suffix[17];
  std::snprintf(suffix, sizeof(suffix), "%016llx", static_cast<unsigned long long>(bits));
  return node_id + "/" + suffix;
}

}  // namespace

StatusOr<std::unique_ptr<Agent>> Agent::Create(zmq::context_t& context, AgentConfig config,
                                               std::unique_ptr<Launcher> process_launcher,
                                               Clock* clock) {
  if (config.node_id.empty()) return InvalidArgument("node id is empty");
  if (config.work_dir.empty()) return InvalidArgument("work dir is empty");
  COHORT_RETURN_IF_ERROR(MakeDirs(config.work_dir));
  COHORT_ASSIGN_OR_RETURN(DealerSocket socket,
                          DealerSocket::Connect(context, config.coordinator,
                                                SessionRoutingId(config.node_id), config.security));
  auto http_endpoint = ParseHttpEndpoint(config.http_endpoint);
  if (!http_endpoint.ok()) return http_endpoint.status().WithContext("--http-endpoint");
  std::unique_ptr<AgentHttp> http;
  if (http_endpoint->enabled) {
    auto started = AgentHttp::Start(*http_endpoint, config.http_token);
    if (started.ok()) {
      http = std::move(*started);
      spdlog::info("metrics on {}/metrics", http->url());
    } else if (config.http_endpoint_explicit ||
               started.status().code() == StatusCode::kInvalidArgument) {
      return started.status().WithContext("--http-endpoint");
    } else {
      spdlog::warn("HTTP endpoint off (/metrics): {}", started.status().ToString());
    }
  }
  std::unique_ptr<Agent> agent(
      new Agent(std::move(config), std::move(socket), std::move(process_launcher), clock));
  agent->http_ = std::move(http);
  return agent;
}

Agent::Agent(AgentConfig config, DealerSocket socket, std::unique_ptr<Launcher> process_launcher,
             Clock* clock)
    : config_(std::move(config)),
      socket_(std::move(socket)),
      clock_(clock),
      outbox_(*clock, [this](wire::BodyUnion body) { return Transmit(std::move(body)); }),
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

uint64_t Agent::Transmit(wire::BodyUnion body) {
  uint64_t id = socket_.NextRequestId();
  Status s = socket_.Send(EncodeBody(id, std::move(body)));
  if (!s.ok()) spdlog::debug("send to the coordinator: {}", s.ToString());
  return id;
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
  CollectDumps();
  Reap();
  EnforceDeadlines();
  RunTimers();
  ShipLogsAndMetrics();
  Forget();
  if (preempting_) CarryOnPreemption();
  if (http_ && Now() >= next_publish_) PublishSnapshot();
  return Status::Ok();
}

void Agent::PublishSnapshot() {
  next_publish_ = Now() + milliseconds(500);
  auto s = std::make_shared<AgentSnapshot>();
  s->node_id = config_.node_id;
  s->cgroups = config_.cgroups;
  s->cgroups_reason = config_.cgroups_reason;
  s->log_bytes_shipped = log_bytes_shipped_;
  s->attempts_started = attempts_started_;
  for (const auto& [key, a] : attempts_) {
    if (!a.live()) continue;
    s->attempts.push_back(AttemptView{a.job, a.replica, a.attempt,
                                      a.process ? a.process->cgroup_path() : "", a.gpus});
  }
  http_->Publish(std::move(s));
}

Status Agent::Run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    Status s = RunOnce(config_.loop_interval);
    if (!s.ok()) spdlog::warn("agent loop: {}", s.ToString());
  }
  return Preempt();
}

Status Agent::Preempt() {
  BeginPreemption();
  while (!preempted_) COHORT_RETURN_IF_ERROR(RunOnce(config_.loop_interval));
  return Status::Ok();
}

void Agent::BeginPreemption() {
  preempting_ = true;
  NotifyStopping();
  // Tell the coordinator (a draining heartbeat) before any replica can end and be reported
  // PREEMPTED, so that it restarts them on other nodes and places nothing new here.
  if (registered_) SendHeartbeat();
  int running = 0;
  for (auto& [key, a] : attempts_) {
    if (!a.live()) continue;
    a.RequestStop(StopCause::kPreemption, "preempted: the agent on this node is shutting down",
                  config_.grace_period, Now());
    ++running;
  }
  spdlog::info("preemption: signalled {} replica(s), grace period {} ms", running,
               config_.grace_period.count());
  // Every replica gone: the grace period, SIGKILL, and a little time for the kernel.
  preempt_give_up_ = Now() + config_.grace_period + std::chrono::seconds(10);
  CarryOnPreemption();
}

void Agent::CarryOnPreemption() {
  if (preempted_) return;
  if (!preempt_acks_by_) {
    bool all_gone = std::all_of(attempts_.begin(), attempts_.end(),
                                [](const auto& entry) { return entry.second.gone; });
    if (!all_gone && Now() < preempt_give_up_) return;
    // Then the acks and the last log chunks, briefly.
    preempt_acks_by_ = Now() + config_.preempt_ack_wait;
  }
  if (!attempts_.empty() && Now() < *preempt_acks_by_) return;
  if (!attempts_.empty()) {
    spdlog::warn("preemption: {} replica status(es) or log(s) not acknowledged by the coordinator",
                 attempts_.size());
  }
  preempted_ = true;
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
        if (a == attempts_.end()) continue;
        a->second.acked_version = std::max(a->second.acked_version, version);
      }
      register_requests_.clear();
      if (!registered_) spdlog::info("registered with the coordinator at {}", config_.coordinator);
      registered_ = true;
      register_backoff_ = milliseconds(0);
      next_heartbeat_ = Now() + heartbeat_interval_;
      // Whatever was in flight before may be lost: resume from the acknowledged state.
      outbox_.Reset();
      break;
    }
    case wire::Body::HeartbeatReply: {
      outbox_.Answered(id);
      const wire::HeartbeatReply* reply = message.As<wire::HeartbeatReply>();
      if (reply->lateness()) {
        lateness_.clear();
        for (const wire::ReplicaLateness* l : *reply->lateness()) {
          lateness_[Str(l->job()) + "/" + Str(l->replica())] = {l->median_ms(), l->samples()};
        }
      }
      if (!reply->known() && registered_) {
        spdlog::warn("the coordinator does not know this node (it restarted?); registering again");
        registered_ = false;
        next_register_ = Now();
      }
      break;
    }
    case wire::Body::Ack:
      HandleAnswer(id, Status::Ok());
      break;
    case wire::Body::ErrorReply: {
      Status error = message.ErrorStatus();
      if (register_requests_.count(id)) {
        spdlog::warn("the coordinator refused registration: {}", error.ToString());
        register_requests_.erase(id);
      } else if (outbox_.Awaits(id)) {
        HandleAnswer(id, error);
      } else {
        spdlog::warn("error from the coordinator (request {}): {}", id, error.ToString());
      }
      break;
    }
    case wire::Body::LogAck: {
      auto answer = outbox_.Answered(id);
      auto it = answer ? attempts_.find(answer->stream.key) : attempts_.end();
      if (it != attempts_.end() && it->second.log && answer->stream.kind == Outbox::Kind::kLog) {
        uint64_t before = it->second.log->acked();
        it->second.log->OnLogAck(*answer, message.As<wire::LogAck>()->next_offset());
        if (it->second.log->acked() > before)
          log_bytes_shipped_ += it->second.log->acked() - before;
      }
      break;
    }
    case wire::Body::LaunchReplica:
      HandleLaunch(*message.As<wire::LaunchReplica>());
      break;
    case wire::Body::StopReplica:
      HandleStop(*message.As<wire::StopReplica>());
      break;
    case wire::Body::DumpStacks:
      HandleDumpStacks(*message.As<wire::DumpStacks>());
      break;
    default:
      spdlog::warn("unexpected {} message from the coordinator",
                   wire::EnumNameBody(message.type()));
  }
}

void Agent::HandleAnswer(uint64_t request_id, const Status& error) {
  auto answer = outbox_.Answered(request_id);
  if (!answer) return;
  auto it = attempts_.find(answer->stream.key);
  if (it == attempts_.end()) return;
  Attempt& a = it->second;
  switch (answer->stream.kind) {
    case Outbox::Kind::kStatus:
      HandleStatusAnswer(a, *answer, error);
      break;
    case Outbox::Kind::kLog:
      if (a.log) a.log->OnError(*answer, error);
      break;
    case Outbox::Kind::kMetric:
      if (a.metrics) a.metrics->OnAnswer(*answer, error);
      break;
    case Outbox::Kind::kHeartbeat:
      break;
  }
}

void Agent::HandleStatusAnswer(Attempt& a, const Outbox::Answer& answer, const Status& error) {
  if (error.code() == StatusCode::kFailedPrecondition) {
    // The coordinator does not know this node (it restarted, or declared us lost): the update
    // is not taken. Keep it unacked so RegisterAgent carries it, and register again.
    spdlog::info("coordinator has not registered this node; re-registering with {}/{} attempt {}",
                 a.job, a.replica, a.attempt);
    if (answer.current) outbox_.Settle(answer.stream);
    registered_ = false;
    return;
  }
  if (Outbox::Transient(error)) {
    // The coordinator could not take it now (its store fails, its disk is full): the update
    // stays in flight and goes again after the resend interval.
    if (answer.current) {
      transient_refusals_.Log("coordinator could not take the status of {}/{} attempt {} yet: {}",
                              a.job, a.replica, a.attempt, error.ToString());
    }
    return;
  }
  if (!error.ok()) {
    spdlog::warn("coordinator rejected the status of {}/{} attempt {}: {}", a.job, a.replica,
                 a.attempt, error.ToString());
  }
  a.acked_version = std::max(a.acked_version, answer.version);
  if (answer.current) outbox_.Settle(answer.stream);
}

void Agent::HandleLaunch(const wire::LaunchReplica& launch) {
  std::string job = Str(launch.job());
  std::string replica = Str(launch.replica());
  std::string key = AttemptKey(job, replica, launch.attempt());
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
    if (other.job == job && other.replica == replica && other.live() &&
        other.stop == StopCause::kNone) {
      spdlog::warn("{}/{}: attempt {} replaces attempt {} still running here; stopping it", job,
                   replica, launch.attempt(), other.attempt);
      other.RequestStop(StopCause::kReplaced,
                        "replaced by attempt " + std::to_string(launch.attempt()),
                        config_.grace_period, Now());
    }
  }
  Attempt& a = attempts_[key];
  a.job = job;
  a.replica = replica;
  a.attempt = launch.attempt();
  StartAttempt(a, launch);
}

void Agent::StartAttempt(Attempt& a, const wire::LaunchReplica& launch) {
  ++attempts_started_;
  if (launch.gpus()) a.gpus.assign(launch.gpus()->begin(), launch.gpus()->end());
  if (Status s = CheckPathComponent("job", a.job); !s.ok()) return FailBeforeLaunch(a, s, -1);
  if (Status s = CheckPathComponent("replica", a.replica); !s.ok()) {
    return FailBeforeLaunch(a, s, -1);
  }
  if (a.attempt < 0) return FailBeforeLaunch(a, InvalidArgument("negative attempt number"), -1);
  auto pending = std::make_unique<PendingLaunch>();
  LaunchRequest& request = pending->plan.request;
  request.job = a.job;
  request.replica = a.replica;
  request.attempt = a.attempt;
  request.working_dir = AttemptWorkingDir(config_.work_dir, a.job, a.replica, a.attempt);
  request.log_path = AttemptLogPath(config_.work_dir, a.job, a.replica, a.attempt);
  a.log =
      std::make_unique<LogShipper>(outbox_, a.key(), a.job, a.replica, a.attempt, request.log_path,
                                   config_.log_chunk_bytes, 2 * config_.resend_interval);
  if (Status s = MakeDirs(request.working_dir); !s.ok()) return FailBeforeLaunch(a, s, -1);
  SetState(a, wire::ReplicaState::STARTING, "");

  if (Status s = PlanLaunch(launch, config_.builtin_dir, &pending->plan); !s.ok()) {
    return FailBeforeLaunch(a, s, s.code() == StatusCode::kNotFound ? 127 : 2);
  }
  if (!pending->plan.container) pending->plan.env.attempt_dir = request.working_dir;
  pending->launcher = process_launcher_.get();
  if (pending->plan.container) {
    pending->launcher = container_launcher_.get();
    if (pending->launcher == nullptr) {
      return FailBeforeLaunch(
          a,
          FailedPrecondition("this agent has no container launcher (image " + request.image + ")"),
          -1);
    }
  }
  // A first start begins from scratch; a restart resumes from the newest valid checkpoint.
  if (a.attempt > 0 && !pending->plan.checkpoint_dir.empty()) {
    pending->restore =
        std::async(std::launch::async, FindRestoreCheckpoint, pending->plan.checkpoint_dir);
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
    pending->plan.env.restore_checkpoint = restore.checkpoint;
    // The attempt's log says where it restores from and what was skipped (`cohort logs`).
    for (const std::string& note : restore.notes) {
      AppendAgentNote(pending->plan.request.log_path, note);
    }
    FinishLaunch(a, *pending);
  }
}

void Agent::FinishLaunch(Attempt& a, PendingLaunch& pending) {
  if (a.stop != StopCause::kNone) {
    // Stopped (or preempted) while the checkpoint lookup ran: it never starts.
    a.final = true;
    a.gone = true;
    SetState(a, a.FinalState(wire::ReplicaState::STOPPED),
             a.stop_reason.empty() ? "stopped before it started"
                                   : a.stop_reason + "; stopped before it started");
    return;
  }
  const ReplicaEnvInput& env = pending.plan.env;
  if (!env.restore_checkpoint.empty()) {
    spdlog::info("{}/{} attempt {}: restoring from {}", a.job, a.replica, a.attempt,
                 env.restore_checkpoint);
  }
  LaunchRequest& request = pending.plan.request;
  request.env = BuildReplicaEnv(env);
  if (Status s = MakeOutputDirs(request.env); !s.ok()) return FailBeforeLaunch(a, s, -1);
  auto process = pending.launcher->Launch(request);
  if (!process.ok()) return FailBeforeLaunch(a, process.status(), -1);
  a.process = std::move(*process);
  std::string error = a.process->launch_error();
  spdlog::info("{}/{} attempt {}: started pid {}{}{}", a.job, a.replica, a.attempt,
               a.process->pid(), error.empty() ? "" : ", but ", error);
  if (pending.plan.chief) {
    auto file = env.launch_env.find("CLOUD_ML_HP_METRIC_FILE");
    if (file != env.launch_env.end() && !file->second.empty()) {
      auto trial = env.launch_env.find("CLOUD_ML_TRIAL_ID");
      a.metrics = std::make_unique<MetricForwarder>(
          outbox_, *clock_, a.key(), file->second, a.job, a.replica,
          trial == env.launch_env.end() ? "" : trial->second, config_.metric_poll_interval,
          config_.resend_interval);
    }
  }
  auto metric_file = request.env.find("CLOUD_ML_HP_METRIC_FILE");
  auto recorder = request.env.find(kFlightRecorderEnv);
  probes_[a.key()] = std::make_unique<ProgressProbe>(
      request.log_path, metric_file == request.env.end() ? "" : metric_file->second,
      recorder == request.env.end() ? "" : recorder->second, clock_->NowMs());
  if (error.empty()) {
    SetState(a, wire::ReplicaState::RUNNING, "");
  } else {
    a.message = error;  // the reaper reports FAILED with exit 127/126
  }
}

void Agent::FailBeforeLaunch(Attempt& a, const Status& status, int exit_code) {
  spdlog::warn("{}/{} attempt {}: cannot launch: {}", a.job, a.replica, a.attempt,
               status.ToString());
  if (a.log) AppendAgentNote(a.log->path(), status.message());
  a.exit.exit_code = exit_code;
  a.final = true;
  a.gone = true;
  SetState(a, a.FinalState(wire::ReplicaState::FAILED), status.message());
}

void Agent::HandleStop(const wire::StopReplica& stop) {
  std::string key = AttemptKey(Str(stop.job()), Str(stop.replica()), stop.attempt());
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
    SetState(a, wire::ReplicaState::STOPPED, "not running on this node");
    return;
  }
  Attempt& a = it->second;
  if (a.final) {
    a.version++;  // re-send the final status
    SendUpdate(a);
    return;
  }
  if (auto dump = dumps_.find(key); dump != dumps_.end()) {
    // Its stacks are being taken: the stop waits for them (CollectDumps).
    dump->second.stop.emplace();
    stop.UnPackTo(&*dump->second.stop);
    return;
  }
  std::string reason = Str(stop.reason());
  spdlog::info("{}/{} attempt {}: stop requested{}{}", a.job, a.replica, a.attempt,
               reason.empty() ? "" : ": ", reason);
  a.RequestStop(StopCause::kCoordinator, reason, milliseconds(std::max(0, stop.grace_ms())), Now());
}

void Agent::HandleDumpStacks(const wire::DumpStacks& dump) {
  std::string key = AttemptKey(Str(dump.job()), Str(dump.replica()), dump.attempt());
  auto it = attempts_.find(key);
  if (it == attempts_.end() || it->second.final || !it->second.process || dumps_.count(key)) {
    spdlog::info("{}/{} attempt {}: no stacks to take (not running here)", Str(dump.job()),
                 Str(dump.replica()), dump.attempt());
    return;
  }
  Attempt& a = it->second;
  spdlog::info("{}/{} attempt {}: taking stacks: {}", a.job, a.replica, a.attempt,
               Str(dump.reason()));
  std::string python_dir =
      StackDumpDir(AttemptWorkingDir(config_.work_dir, a.job, a.replica, a.attempt));
  dumps_[key].text = std::async(std::launch::async, TakeStackDump, a.process->pid(), python_dir,
                                Str(dump.reason()), StackDumpOptions{});
}

void Agent::CollectDumps() {
  for (auto it = dumps_.begin(); it != dumps_.end();) {
    if (it->second.text.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++it;
      continue;
    }
    std::string text = it->second.text.get();
    std::optional<wire::StopReplicaT> stop = std::move(it->second.stop);
    std::string key = it->first;
    it = dumps_.erase(it);
    auto a = attempts_.find(key);
    if (a == attempts_.end()) continue;
    Attempt& attempt = a->second;
    spdlog::info("{}/{} attempt {}: stacks taken ({} bytes)", attempt.job, attempt.replica,
                 attempt.attempt, text.size());
    if (attempt.log) {
      AppendAgentNote(attempt.log->path(), "stacks taken (cohort logs " + attempt.job +
                                               " --replica " + attempt.replica + " --dump)");
    }
    wire::StackDumpT dump;
    dump.node_id = config_.node_id;
    dump.job = attempt.job;
    dump.replica = attempt.replica;
    dump.attempt = attempt.attempt;
    dump.text = std::move(text);
    wire::BodyUnion body;
    body.Set(std::move(dump));
    Transmit(std::move(body));
    if (stop) {
      flatbuffers::FlatBufferBuilder fbb;
      fbb.Finish(wire::StopReplica::Pack(fbb, &*stop));
      HandleStop(*flatbuffers::GetRoot<wire::StopReplica>(fbb.GetBufferPointer()));
    }
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
    if (::waitid(P_PID, static_cast<id_t>(a.process->pid()), &info, WEXITED | WNOHANG | WNOWAIT) ==
            0 &&
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
    if (auto change = a.TakeExit()) SetState(a, change->state, std::move(change->message));
  }
  for (auto& [key, a] : attempts_) a.CollectLeftovers();
}

void Agent::EnforceDeadlines() {
  milliseconds now = Now();
  for (auto& [key, a] : attempts_) a.EnforceDeadline(now);
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
  if (a.final && a.metrics && !a.metrics->done()) return;
  wire::ReplicaUpdateT update;
  update.node_id = config_.node_id;
  update.status = std::make_unique<wire::ReplicaStatusT>(a.ToStatus());
  wire::BodyUnion body;
  body.Set(std::move(update));
  outbox_.Send({Outbox::Kind::kStatus, a.key()}, a.version, std::move(body));
}

void Agent::SendHeartbeat() {
  wire::HeartbeatT heartbeat;
  heartbeat.node_id = config_.node_id;
  heartbeat.draining = preempting_;
  heartbeat.listening_ports = ListeningTcpPorts();
  for (auto& [key, a] : attempts_) {
    auto probe = probes_.find(key);
    if (probe == probes_.end() || a.final || a.state != wire::ReplicaState::RUNNING) continue;
    auto progress = std::make_unique<wire::ReplicaProgressT>();
    progress->job = a.job;
    progress->replica = a.replica;
    progress->attempt = a.attempt;
    probe->second->Sample(clock_->NowMs(), progress.get());
    heartbeat.progress.push_back(std::move(progress));
  }
  wire::BodyUnion body;
  body.Set(std::move(heartbeat));
  outbox_.Send({Outbox::Kind::kHeartbeat, ""}, 0, std::move(body));
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
    reg.replicas.push_back(std::make_unique<wire::ReplicaStatusT>(a.ToStatus()));
    versions[key] = a.version;
  }
  size_t count = reg.replicas.size();
  wire::BodyUnion body;
  body.Set(std::move(reg));
  uint64_t id = Transmit(std::move(body));
  register_requests_[id] = std::move(versions);
  spdlog::debug("RegisterAgent sent with {} replica(s)", count);
}

void Agent::RunTimers() {
  milliseconds now = Now();
  if (config_.attempt_retention.count() > 0 && now >= next_sweep_) {
    next_sweep_ = now + config_.sweep_interval;
    int removed =
        SweepAttemptDirs(config_.work_dir, config_.attempt_retention,
                         [&](const std::string& job, const std::string& replica, int attempt) {
                           return attempts_.count(AttemptKey(job, replica, attempt)) > 0;
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
    if (!outbox_.Ready({Outbox::Kind::kStatus, key}, config_.resend_interval)) continue;
    SendUpdate(a);
  }
  // Requests nobody answered are waited for only so long.
  outbox_.ForgetOlderThan(std::chrono::minutes(1));
}

void Agent::ShipLogsAndMetrics() {
  if (!registered_) return;
  for (auto& [key, a] : attempts_) {
    if (a.log) a.log->Ship(a.gone);
    if (a.metrics) a.metrics->Forward(a.gone);
  }
}

void Agent::Forget() {
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    Attempt& a = it->second;
    if (a.forgettable()) {
      if (a.process) a.process->Release();
      outbox_.Close(it->first);
      probes_.erase(it->first);
      it = attempts_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace cohort::agent
