#include "agent/agent.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "agent/nvml.h"
#include "agent/python_site.h"
#include "agent/replica_env.h"
#include "agent/stack_dump.h"
#include "common/build_version.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/service_notify.h"
#include "common/utf8.h"
#include "common/wire_string.h"

namespace cohort::agent {
namespace {

using std::chrono::milliseconds;

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
  if (auto site = InstallPythonSite(config.work_dir); site.ok()) {
    config.python_site = *site;
  } else {
    spdlog::warn("no Python stacks of replicas that do not import cohort: {}",
                 site.status().ToString());
  }
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
      session_(config_, *clock, outbox_,
               [this](wire::BodyUnion body) { return Transmit(std::move(body)); }),
      replicas_(config_, *clock, outbox_, std::move(process_launcher),
                [this](Attempt& a) { OnAttemptChanged(a); }),
      gpu_sampler_(
          std::chrono::seconds(5),
          [mig = MigDevicesOffered(config_.inventory.gpus)] { return ReadGpuSamples(mig); },
          std::chrono::seconds(30),
          XidWatch{config_.watch_xids ? kNvmlLibrary : "", config_.ignored_xids}),
      ends_file_(EndsPath(config_.work_dir), kEndsFileMode) {}

// No replica outlives its agent: ~ReplicaManager kills whatever is still there.
Agent::~Agent() = default;

void Agent::SetContainerLauncher(std::unique_ptr<Launcher> launcher) {
  replicas_.SetContainerLauncher(std::move(launcher));
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
  replicas_.StartPending();
  KillWorkOnFailedGpus();
  CollectDumps();
  CollectExecs();
  replicas_.Reap();
  replicas_.EnforceDeadlines();
  RunTimers();
  ShipLogsAndMetrics();
  replicas_.Forget();
  WriteEndsIfChanged();
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
  s->replicas_fenced = replicas_fenced_;
  s->attempts_started = replicas_.attempts_started();
  s->health_checked = !config_.health_check.argv.empty();
  s->health_passing = session_.health().Problem().empty();
  s->health_check_runs = session_.health().runs();
  s->gpus = gpu_sampler_.Latest();
  s->xid_errors = gpu_sampler_.XidCounts();
  for (const auto& [key, a] : replicas_.attempts()) {
    if (!a.live()) continue;
    s->attempts.push_back(AttemptView{a.job, a.replica, a.attempt,
                                      a.process ? a.process->cgroup_path() : "", a.gpus});
  }
  for (const auto& [key, l] : session_.collective_lateness()) {  // "<job>/<replica>"
    const size_t slash = key.find('/');
    s->lateness.push_back(
        LatenessView{key.substr(0, slash), key.substr(slash + 1), l.median_ms, l.samples});
  }
  http_->Publish(std::move(s));
}

GpuHealth Agent::GpuHealthNow() const {
  GpuHealth health;
  // In this order: a sample that ends between the two reads leaves its verdict in `unhealthy`.
  health.resampling = gpu_sampler_.Resampling();
  health.unhealthy = gpu_sampler_.UnhealthyGpus();
  return health;
}

void Agent::SendHeartbeat() {
  if (!session_.registered()) return;
  const std::shared_ptr<const GpuSamples> gpus = gpu_sampler_.Latest();
  session_.SendHeartbeat(preempting_, replicas_.SampleProgress(*gpus), GpuHealthNow());
}

Status Agent::Run(const std::atomic<bool>& stop, const std::atomic<int>* reloads,
                  const std::atomic<int>* restarts) {
  int reloaded = reloads ? reloads->load() : 0;
  int restarted = restarts ? restarts->load() : 0;
  std::optional<milliseconds> handoff_by;  // a live restart asked for, refused past then
  while (!stop.load()) {
    Status s = RunOnce(config_.loop_interval);
    if (!s.ok()) spdlog::warn("agent loop: {}", s.ToString());
    if (restarts != nullptr && restarts->load() != restarted) {
      restarted = restarts->load();
      if (!handoff_by) {
        handoff_by = Now() + kHandoffWait;
        spdlog::info("live restart asked for: handing {} replica attempt(s) over once each runs",
                     replicas_.attempts().size());
        // The execve would cut them off: they end now, their clients told so.
        for (const auto& [key, a] : replicas_.attempts()) exec_sessions_.EndAttempt(key);
        execs_.KillAll("the agent on " + config_.node_id +
                       " restarted live (an upgrade), which a command it runs cannot outlive");
      }
    }
    if (handoff_by) {
      StatusOr<Handoff> handoff = HandOverNow();
      if (handoff.ok()) {
        spdlog::info("live restart: handing over {} replica attempt(s)", handoff->attempts.size());
        handoff_ = std::move(*handoff);
        ends_file_.Flush();  // the execve would cut its write short
        return Status::Ok();
      }
      if (handoff.status().code() != StatusCode::kUnavailable || Now() >= *handoff_by) {
        spdlog::error(
            "live restart refused: {}; the agent runs on as it was (drain the node and "
            "restart the agent to upgrade it)",
            handoff.status().message());
        handoff_by.reset();
      }
    }
    if (reloads != nullptr && reloads->load() != reloaded) {
      reloaded = reloads->load();
      const int forgotten = gpu_sampler_.ForgetXids();
      spdlog::info(
          "reload: GPUs that Xids took out of service are back in service ({} verdict{} "
          "forgotten)",
          forgotten, forgotten == 1 ? "" : "s");
    }
  }
  return Preempt();
}

StatusOr<Handoff> Agent::HandOverNow() {
  if (preempting_) return FailedPrecondition("the agent is shutting down");
  if (!dumps_.empty()) return Unavailable("a stack dump is being taken");
  if (execs_.running() > 0) return Unavailable("a `cohort exec` command runs beside a replica");
  if (exec_sessions_.size() > 0) return Unavailable("a `cohort exec` session is open");
  COHORT_ASSIGN_OR_RETURN(std::vector<HandedOverAttempt> attempts, replicas_.HandOver());
  Handoff handoff;
  handoff.agent_pid = ::getpid();
  handoff.from_version = CohortBuildVersion();
  handoff.attempts = std::move(attempts);
  handoff.ended = replicas_.Ended();
  return handoff;
}

int Agent::Adopt(const Handoff& handoff) {
  replicas_.KeepEnded(handoff.ended);
  if (!handoff.went_back_because.empty()) {
    session_.TellLiveRestartUndone(handoff.went_back_because);
  }
  int adopted = 0;
  for (const HandedOverAttempt& h : handoff.attempts) {
    Status s = replicas_.Adopt(h);
    if (s.ok()) {
      ++adopted;
      spdlog::info("{}/{} attempt {}: taken over, pid {}", h.job, h.replica, h.attempt, h.pid);
    } else {
      spdlog::error("{}/{} attempt {} (pid {}) could not be taken over: {}", h.job, h.replica,
                    h.attempt, h.pid, s.ToString());
    }
  }
  return adopted;
}

StatusOr<size_t> Agent::KeepEndsFromDisk() {
  COHORT_ASSIGN_OR_RETURN(std::vector<wire::ReplicaStatusT> ended,
                          ReadEnds(config_.work_dir, config_.node_id));
  replicas_.KeepEnded(ended);
  return ended.size();
}

void Agent::WriteEndsIfChanged() {
  // How the newest post's write went, once it is done.
  if (auto last = ends_file_.Last();
      last && last->version == ends_posts_ && ends_judged_ != ends_posts_) {
    ends_judged_ = ends_posts_;
    if (last->status.ok()) {
      if (ends_unwritten_) spdlog::info("the ends file {} is written again", ends_file_.path());
      ends_unwritten_ = false;
    } else {
      if (!ends_unwritten_) {
        spdlog::error(
            "how replicas here ended cannot be kept on disk ({}); trying again every 10 s. An "
            "agent started again before it is written forgets the ends its coordinator has not "
            "heard",
            last->status.ToString());
      }
      ends_unwritten_ = true;
      ends_retry_at_ = Now() + std::chrono::seconds(10);
    }
  }
  if (ends_unwritten_ && Now() < ends_retry_at_) return;
  const bool retry = ends_unwritten_ && ends_judged_ == ends_posts_;
  const uint64_t changed = replicas_.ends_changed();
  if (changed == ends_posted_ && !retry) return;
  ends_posted_ = changed;
  ends_file_.Post(++ends_posts_, EncodeEnds(config_.node_id, replicas_.Ended()));
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
  SendHeartbeat();
  int running =
      replicas_.StopAll(StopCause::kPreemption,
                        "preempted: the agent on this node is shutting down", config_.grace_period);
  spdlog::info("preemption: signalled {} replica(s), grace period {} ms", running,
               config_.grace_period.count());
  // Every replica gone: the grace period, SIGKILL, and a little time for the kernel.
  preempt_give_up_ = Now() + config_.grace_period + std::chrono::seconds(10);
  CarryOnPreemption();
}

void Agent::CarryOnPreemption() {
  if (preempted_) return;
  size_t left = replicas_.attempts().size();
  if (!preempt_acks_by_) {
    if (!replicas_.AllGone() && Now() < preempt_give_up_) return;
    // Then the acks and the last log chunks, briefly.
    preempt_acks_by_ = Now() + config_.preempt_ack_wait;
  }
  if (left > 0 && Now() < *preempt_acks_by_) return;
  if (left > 0) {
    spdlog::warn("preemption: {} replica status(es) or log(s) not acknowledged by the coordinator",
                 left);
  }
  preempted_ = true;
}

// ---- messages from the coordinator --------------------------------------------------------

void Agent::HandleMessage(const Message& message) {
  const StatusCode code =
      message.type() == wire::Body::ErrorReply ? message.ErrorStatus().code() : StatusCode::kOk;
  session_.Heard(code == StatusCode::kPermissionDenied || code == StatusCode::kUnauthenticated);
  uint64_t id = message.request_id();
  switch (message.type()) {
    case wire::Body::RegisterAgentReply: {
      auto acked = session_.OnRegistered(id, *message.As<wire::RegisterAgentReply>());
      if (!acked) break;
      for (const auto& [key, version] : *acked) {
        if (Attempt* a = replicas_.Find(key))
          a->acked_version = std::max(a->acked_version, version);
      }
      // Whatever was in flight before may be lost: resume from the acknowledged state.
      outbox_.Reset();
      break;
    }
    case wire::Body::HeartbeatReply:
      outbox_.Answered(id);
      session_.OnHeartbeatReply(*message.As<wire::HeartbeatReply>());
      break;
    case wire::Body::Ack:
      HandleAnswer(id, Status::Ok());
      break;
    case wire::Body::ErrorReply: {
      Status error = message.ErrorStatus();
      if (session_.OnRefused(id, error)) break;
      if (outbox_.Awaits(id)) {
        HandleAnswer(id, error);
      } else {
        spdlog::warn("error from the coordinator (request {}): {}", id,
                     ValidUtf8(error.ToString(), /*printable=*/true));
      }
      break;
    }
    case wire::Body::LogAck: {
      auto answer = outbox_.Answered(id);
      Attempt* a = answer ? replicas_.Find(answer->stream.key) : nullptr;
      if (a && a->log && answer->stream.kind == Outbox::Kind::kLog) {
        uint64_t before = a->log->acked();
        a->log->OnLogAck(*answer, message.As<wire::LogAck>()->next_offset());
        if (a->log->acked() > before) log_bytes_shipped_ += a->log->acked() - before;
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
    case wire::Body::ExecInReplica:
      HandleExec(*message.As<wire::ExecInReplica>());
      break;
    case wire::Body::ExecSessionIo:
      HandleExecSession(*message.As<wire::ExecSessionIo>());
      break;
    default:
      spdlog::warn("unexpected {} message from the coordinator",
                   wire::EnumNameBody(message.type()));
  }
}

void Agent::HandleAnswer(uint64_t request_id, const Status& error) {
  auto answer = outbox_.Answered(request_id);
  if (!answer) return;
  Attempt* a = replicas_.Find(answer->stream.key);
  if (a == nullptr) return;
  switch (answer->stream.kind) {
    case Outbox::Kind::kStatus:
      HandleStatusAnswer(*a, *answer, error);
      break;
    case Outbox::Kind::kLog:
      if (a->log) a->log->OnError(*answer, error);
      break;
    case Outbox::Kind::kMetric:
      if (a->metrics) a->metrics->OnAnswer(*answer, error);
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
    session_.Unregister();
    return;
  }
  if (Outbox::Transient(error)) {
    // The coordinator could not take it now (its store fails, its disk is full): the update
    // stays in flight and goes again after the resend interval.
    if (answer.current) {
      transient_refusals_.Log("coordinator could not take the status of {}/{} attempt {} yet: {}",
                              a.job, a.replica, a.attempt,
                              ValidUtf8(error.ToString(), /*printable=*/true));
    }
    return;
  }
  if (!error.ok()) {
    spdlog::warn("coordinator rejected the status of {}/{} attempt {}: {}", a.job, a.replica,
                 a.attempt, ValidUtf8(error.ToString(), /*printable=*/true));
  }
  a.acked_version = std::max(a.acked_version, answer.version);
  if (answer.current) outbox_.Settle(answer.stream);
}

void Agent::HandleLaunch(const wire::LaunchReplica& launch) {
  std::string job = Str(launch.job());
  std::string replica = Str(launch.replica());
  if (replicas_.Find(AttemptKey(job, replica, launch.attempt()))) {
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
  replicas_.Launch(launch);
}

void Agent::HandleStop(const wire::StopReplica& stop) {
  std::string key = AttemptKey(Str(stop.job()), Str(stop.replica()), stop.attempt());
  Attempt* a = replicas_.Find(key);
  if (auto dump = dumps_.find(key); a && !a->final && dump != dumps_.end()) {
    // Its stacks are being taken: the stop waits for them (CollectDumps).
    dump->second.stop.emplace();
    stop.UnPackTo(&*dump->second.stop);
    return;
  }
  replicas_.Stop(stop);
}

void Agent::HandleDumpStacks(const wire::DumpStacks& dump) {
  std::string key = AttemptKey(Str(dump.job()), Str(dump.replica()), dump.attempt());
  Attempt* a = replicas_.Find(key);
  if (a == nullptr || a->final || !a->process || dumps_.count(key)) {
    spdlog::info("{}/{} attempt {}: no stacks to take (not running here)",
                 ValidUtf8(Str(dump.job()), /*printable=*/true),
                 ValidUtf8(Str(dump.replica()), /*printable=*/true), dump.attempt());
    return;
  }
  spdlog::info("{}/{} attempt {}: taking stacks: {}", a->job, a->replica, a->attempt,
               Str(dump.reason()));
  std::string python_dir =
      StackDumpDir(AttemptWorkingDir(config_.work_dir, a->job, a->replica, a->attempt));
  dumps_[key].text = std::async(std::launch::async, TakeStackDump, a->process->command_pid(),
                                python_dir, Str(dump.reason()), StackDumpOptions{});
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
    Attempt* attempt = replicas_.Find(key);
    if (attempt == nullptr) continue;
    spdlog::info("{}/{} attempt {}: stacks taken ({} bytes)", attempt->job, attempt->replica,
                 attempt->attempt, text.size());
    if (attempt->log) {
      AppendAgentNote(attempt->log->path(), "stacks taken (cohort logs " + attempt->job +
                                                " --replica " + attempt->replica + " --dump)");
    }
    wire::StackDumpT dump;
    dump.node_id = config_.node_id;
    dump.job = attempt->job;
    dump.replica = attempt->replica;
    dump.attempt = attempt->attempt;
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

// The ExecOutput that answers `request` (an ExecInReplica or an ExecSessionIo), before its output.
template <typename Request>
wire::ExecOutputT ExecAnswerHeader(const Request& request, const std::string& node_id) {
  wire::ExecOutputT header;
  header.node_id = node_id;
  header.exec_id = request.exec_id();
  header.job = Str(request.job());
  header.replica = Str(request.replica());
  header.attempt = request.attempt();
  return header;
}

void Agent::HandleExec(const wire::ExecInReplica& exec) {
  wire::ExecOutputT header = ExecAnswerHeader(exec, config_.node_id);
  std::vector<std::string> argv;
  if (exec.argv()) {
    for (const auto* arg : *exec.argv()) argv.push_back(Str(arg));
  }
  Attempt* a = replicas_.Find(AttemptKey(header.job, header.replica, header.attempt));
  Status started;
  if (a == nullptr || a->final || !a->process || a->state != wire::ReplicaState::RUNNING) {
    started =
        FailedPrecondition(header.replica + " attempt " + std::to_string(header.attempt) +
                           " of job " + header.job + " is not running on node " + config_.node_id);
  } else {
    spdlog::info("{}/{} attempt {}: exec {} ({} arguments)", a->job, a->replica, a->attempt,
                 argv.empty() ? "" : argv.front(), argv.size());
    started = execs_.Start(header, a->exec_target, a->process->command_pid(), std::move(argv),
                           milliseconds(std::max<int64_t>(exec.timeout_ms(), 1)));
  }
  if (started.ok()) return;
  header.error = started.message();
  wire::BodyUnion body;
  body.Set(std::move(header));
  Transmit(std::move(body));
}

void Agent::HandleExecSession(const wire::ExecSessionIo& io) {
  wire::ExecOutputT header = ExecAnswerHeader(io, config_.node_id);
  header.session = io.session();
  const std::string key = AttemptKey(header.job, header.replica, header.attempt);
  const int64_t now_ms = clock_->NowMs();
  ExecStep step;
  if (io.input()) step.input.assign(io.input()->begin(), io.input()->end());
  step.input_closed = io.input_closed();
  step.kill = io.kill();
  step.rows = io.rows();
  step.cols = io.cols();
  Status taken;
  uint64_t session = io.session();
  if (session == 0) {
    std::vector<std::string> argv;
    if (io.argv()) {
      for (const auto* arg : *io.argv()) argv.push_back(Str(arg));
    }
    Attempt* a = replicas_.Find(key);
    if (a == nullptr || a->final || !a->process || a->state != wire::ReplicaState::RUNNING) {
      taken = FailedPrecondition(header.replica + " attempt " + std::to_string(header.attempt) +
                                 " of job " + header.job + " is not running on node " +
                                 config_.node_id);
    } else {
      spdlog::info("{}/{} attempt {}: exec session {} ({} arguments{})", a->job, a->replica,
                   a->attempt, argv.empty() ? "" : argv.front(), argv.size(),
                   io.tty() ? ", on a terminal" : "");
      auto opened = exec_sessions_.Open(key, a->exec_target, a->process->command_pid(), argv,
                                        io.tty(), io.rows(), io.cols(), now_ms);
      taken = opened.status();
      if (opened.ok()) session = *opened;
    }
  }
  if (taken.ok()) taken = exec_sessions_.Step(session, key, step, header, now_ms);
  if (taken.ok()) return;
  header.error = taken.message();
  wire::BodyUnion body;
  body.Set(std::move(header));
  Transmit(std::move(body));
}

void Agent::CollectExecs() {
  for (wire::ExecOutputT& output : execs_.TakeFinished()) {
    spdlog::info("{}/{} attempt {}: exec ended with code {}{}{}", output.job, output.replica,
                 output.attempt, output.exit_code, output.timed_out ? " (timed out)" : "",
                 output.killed_because.empty() ? "" : " (killed: " + output.killed_because + ")");
    wire::BodyUnion body;
    body.Set(std::move(output));
    Transmit(std::move(body));
  }
  const int64_t now_ms = clock_->NowMs();
  for (wire::ExecOutputT& answer : exec_sessions_.TakeAnswers(now_ms)) {
    if (!answer.running) {
      spdlog::info("{}/{} attempt {}: exec session ended with code {}", answer.job, answer.replica,
                   answer.attempt, answer.exit_code);
    }
    wire::BodyUnion body;
    body.Set(std::move(answer));
    Transmit(std::move(body));
  }
  if (const size_t left = exec_sessions_.EndIdle(now_ms); left > 0) {
    spdlog::info("{} exec session(s) killed: no step came for {} s", left,
                 kExecSessionIdleMs / 1000);
  }
}

// ---- the protocol -------------------------------------------------------------------------

void Agent::OnAttemptChanged(Attempt& a) {
  // A failure here is judged by a health verdict taken after it (agent/health_check.h), and by
  // a sample of its GPUs' health taken after it (agent/resource_usage.h): the heartbeats after
  // this update say the check runs again until both have ended.
  if (a.final && a.state == wire::ReplicaState::FAILED && a.stop == StopCause::kNone) {
    const bool rechecking = session_.health().RunNow();
    const bool resampling = !a.gpus.empty() && gpu_sampler_.SampleNow();
    a.health_rechecking = rechecking || resampling;
  }
  if (a.final) exec_sessions_.EndAttempt(AttemptKey(a.job, a.replica, a.attempt));
  SendUpdate(a);
}

void Agent::SendUpdate(Attempt& a) {
  if (!session_.registered()) return;  // RegisterAgent will carry it
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

void Agent::RunTimers() {
  replicas_.SweepOldAttempts();
  if (session_.FenceDue()) Fence();
  if (session_.RegisterDue()) session_.Register(replicas_.Registration(), GpuHealthNow());
  if (!session_.registered()) return;
  if (session_.HeartbeatDue()) SendHeartbeat();
  for (auto& [key, a] : replicas_.attempts()) {
    if (a.acked_version >= a.version) continue;
    if (!outbox_.Ready({Outbox::Kind::kStatus, key}, config_.resend_interval)) continue;
    SendUpdate(a);
  }
  // Requests nobody answered are waited for only so long.
  outbox_.ForgetOlderThan(std::chrono::minutes(1));
}

void Agent::KillWorkOnFailedGpus() {
  const std::vector<GpuSampler::GpuFault> faults = gpu_sampler_.TakeGpuFaults();
  if (faults.empty()) return;
  // The coordinator hears that the GPU is unfit before it hears of the kills, so that it places
  // their restarts elsewhere.
  SendHeartbeat();
  for (const GpuSampler::GpuFault& fault : faults) {
    // The replicas pinned to the GPU, or to its MIG devices where the agent offers those.
    std::vector<std::pair<int, std::string>> pinned;  // index, how the kill names it
    for (const GpuDevice& d : config_.inventory.gpus) {
      if (d.is_mig() && d.gpu() == fault.gpu) {
        pinned.emplace_back(d.index, "its MIG device " + std::to_string(d.index) + " (of GPU " +
                                         std::to_string(fault.gpu) + ")");
      }
    }
    if (pinned.empty()) {
      pinned.emplace_back(fault.gpu, fault.gpu < 0 ? "a GPU (NVML does not name it)"
                                                   : "its GPU " + std::to_string(fault.gpu));
    }
    for (const auto& [index, gpu] : pinned) {
      const int killed =
          replicas_.KillOnGpu(index, "killed by its agent: " + gpu + " reported " + fault.xid +
                                         ", after which nothing runs there until it is reset");
      if (killed > 0) {
        spdlog::warn("{}: killed {} replica(s) pinned to {}", fault.xid, killed,
                     index < 0 ? "any GPU" : "GPU " + std::to_string(index));
      }
    }
  }
}

void Agent::Fence() {
  const std::string reason = "fenced: no word from the coordinator for its --fence-after (" +
                             FormatDuration(session_.fence_after()) +
                             "); it may have declared this node lost and started the replica "
                             "elsewhere";
  const int stopped = replicas_.StopAll(StopCause::kFence, reason, session_.fence_grace());
  replicas_fenced_ += static_cast<uint64_t>(stopped);
  if (stopped > 0) {
    spdlog::warn("{}: stopping {} replica(s), grace period {}", reason, stopped,
                 FormatDuration(session_.fence_grace()));
  }
}

void Agent::ShipLogsAndMetrics() {
  if (!session_.registered()) return;
  for (auto& [key, a] : replicas_.attempts()) {
    if (a.log) a.log->Ship(a.gone);
    if (a.metrics) a.metrics->Forward(a.gone);
  }
}

}  // namespace cohort::agent
