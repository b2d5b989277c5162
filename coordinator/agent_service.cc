#include "coordinator/agent_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "common/utf8.h"
#include "common/wire_string.h"
#include "coordinator/launch_plan.h"
#include "coordinator/tuning/study_info.h"

namespace cohort::coordinator {
namespace {

// A replica's state as an agent reports it must be one the coordinator knows: the schema's enum is
// a byte on the wire, and a value it has no name for would be judged a failure and stored, where
// the next start would refuse the whole state as damaged.
Status CheckReportedState(const wire::ReplicaStatus& s, const std::string& field) {
  const auto state = static_cast<int64_t>(s.state());
  if (IsReplicaState(state)) return Status::Ok();
  return InvalidArgument(field + ".state: " + std::to_string(state) + " is no replica state");
}

}  // namespace

bool RoutingIdOfNode(std::string_view routing_id, std::string_view node_id) {
  if (routing_id == node_id) return true;
  return routing_id.size() > node_id.size() + 1 &&
         routing_id.substr(0, node_id.size()) == node_id && routing_id[node_id.size()] == '/';
}

void AgentService::Handle(const RoutedMessage& m, int64_t now_ms) {
  const Message& msg = m.message;
  // A routing id belongs to the node whose key uses it; a connection that claims another's is
  // refused whatever it sends.
  if (bind_identity_ && !RoutingIdOfNode(m.peer, m.identity.user)) {
    refusals_.Log("agent endpoint: refused a {} from routing id {} over the key of node '{}'",
                  wire::EnumNameBody(msg.type()), PeerName(m.peer), m.identity.user);
    if (msg.type() != wire::Body::Ack && msg.type() != wire::Body::ErrorReply) {
      Reply(m, EncodeError(
                   msg.request_id(),
                   PermissionDenied("this connection's key is listed as node '" + m.identity.user +
                                    "'; its routing id must be '" + m.identity.user +
                                    "/...', not '" + PeerName(m.peer) + "'")));
    }
    return;
  }
  switch (msg.type()) {
    case wire::Body::RegisterAgent:
      OnRegister(m, *msg.As<wire::RegisterAgent>(), now_ms);
      return;
    case wire::Body::Heartbeat:
      OnHeartbeat(m, *msg.As<wire::Heartbeat>(), now_ms);
      return;
    case wire::Body::ReplicaUpdate:
      OnReplicaUpdate(m, *msg.As<wire::ReplicaUpdate>(), now_ms);
      return;
    case wire::Body::LogChunk:
      OnLogChunk(m, *msg.As<wire::LogChunk>(), now_ms);
      return;
    case wire::Body::TrialMeasurement:
      OnTrialMeasurement(m, *msg.As<wire::TrialMeasurement>());
      return;
    case wire::Body::StackDump:
      OnStackDump(m, *msg.As<wire::StackDump>(), now_ms);
      return;
    case wire::Body::ExecOutput:
      OnExecOutput(m, *msg.As<wire::ExecOutput>());
      return;
    case wire::Body::Ack:
      return;
    case wire::Body::ErrorReply:
      warnings_.Log("agent {} reported an error: {}", PeerName(m.peer),
                    msg.ErrorStatus().ToString());
      return;
    default:
      Reply(m, EncodeError(msg.request_id(), InvalidArgument(std::string("unexpected ") +
                                                             wire::EnumNameBody(msg.type()) +
                                                             " on the agent endpoint")));
  }
}

bool AgentService::SpeaksFor(const RoutedMessage& m, const std::string& node_id,
                             std::string_view what) {
  if (!bind_identity_ || m.identity.user == node_id) return true;
  refusals_.Log(
      "agent endpoint: refused a {} for node '{}' from the key of node '{}' (public key {})", what,
      node_id, m.identity.user, m.identity.key);
  Reply(m,
        EncodeError(m.message.request_id(),
                    PermissionDenied("this connection's key is listed as node '" + m.identity.user +
                                     "' (agents/" + m.identity.user + ".pub); it may not send a " +
                                     std::string(what) + " for node '" + node_id + "'")));
  return false;
}

void AgentService::SendStop(const std::string& peer, const std::string& job,
                            const std::string& replica, int attempt, const std::string& reason) {
  outbox_.ToAgent(peer, Encode(0, PlanStop(job, replica, attempt, reason, stop_grace_ms_)));
}

void AgentService::SendDumpStacks(const std::string& peer, const std::string& job,
                                  const std::string& replica, int attempt,
                                  const std::string& reason) {
  wire::DumpStacksT dump;
  dump.job = job;
  dump.replica = replica;
  dump.attempt = attempt;
  dump.reason = reason;
  outbox_.ToAgent(peer, Encode(0, std::move(dump)));
}

bool AgentService::RanUnrecorded(const JobRecord& job, const ReplicaRecord& r,
                                 const wire::ReplicaStatus& s) {
  if (s.state() != wire::ReplicaState::SUCCEEDED || r.role != Role::kChief) return false;
  // The same job, not an earlier one of its name (deleted since), and an attempt after every one
  // the state knows: the next it would place is r.attempt, or r.attempt + 1 once one launched.
  if (s.job_created_ms() <= 0 || s.job_created_ms() != job.create_time_ms) return false;
  return s.attempt() > r.attempt || (s.attempt() == r.attempt && !r.launched);
}

bool AgentService::IsCurrentAttempt(const JobRecord& job, const ReplicaRecord* r,
                                    const std::string& node_id, const wire::ReplicaStatus& s) {
  return r != nullptr && r->node_id == node_id && r->attempt == s.attempt() && !IsFinal(r->state) &&
         (s.job_created_ms() == 0 || s.job_created_ms() == job.create_time_ms);
}

bool AgentService::ApplyIfCurrent(const std::string& node_id, const wire::ReplicaStatus& s,
                                  int64_t now_ms) {
  JobRecord* job = jobs_.FindJob(Str(s.job()));
  ReplicaRecord* r = job == nullptr ? nullptr : job->FindReplica(Str(s.replica()));
  if (job == nullptr || !IsCurrentAttempt(*job, r, node_id, s)) return false;
  // The message goes into the job's events and every client's view: well-formed, printable and
  // bounded, whatever the agent (or what it quotes of a replica's log) sent.
  std::string message =
      TruncateUtf8(ValidUtf8(Str(s.message()), /*printable=*/true), kMaxReplicaMessageBytes);
  // Its node's health verdict on this failure is not in yet: the judgement waits for it
  // (JobController, "Node faults"); the node's heartbeats say when it is.
  if (s.health_rechecking()) {
    if (NodeRecord* node = nodes_.FindReady(node_id)) node->health_rechecking = true;
  }
  jobs_.ApplyReplicaStatus(*job, *r, s.state(), s.exit_code(), s.signal(), message, now_ms,
                           s.cause_signal());
  return true;
}

void AgentService::OnRegister(const RoutedMessage& m, const wire::RegisterAgent& req,
                              int64_t now_ms) {
  uint64_t id = m.message.request_id();
  std::string node_id = Str(req.node_id());
  if (node_id.empty()) {
    Reply(m, EncodeError(id, InvalidArgument("RegisterAgent.node_id: must not be empty")));
    return;
  }
  if (!SpeaksFor(m, node_id, "RegisterAgent")) return;
  Status valid = CheckAgentNames(req);
  for (flatbuffers::uoffset_t i = 0; valid.ok() && req.replicas() && i < req.replicas()->size();
       ++i) {
    valid = CheckReportedState(*req.replicas()->Get(i),
                               "RegisterAgent.replicas[" + std::to_string(i) + "]");
  }
  if (!valid.ok()) {
    refusals_.Log("agent endpoint: refused a registration from {}: {}", PeerName(m.peer),
                  valid.message());
    Reply(m, EncodeError(id, valid));
    return;
  }
  const NodeRegistry::Registration reg = nodes_.Register(req, m.peer, now_ms);
  NodeRecord& node = *reg.node;
  node.key = m.identity.key;

  // Reconcile what the agent runs with what we think runs there.
  std::set<std::pair<std::string, std::string>> reported;  // (job, replica) current attempts
  std::set<std::string> live;  // "job/replica/attempt" of every attempt still running there
  if (req.replicas()) {
    for (const auto* s : *req.replicas()) {
      std::string job_name = Str(s->job());
      std::string replica = Str(s->replica());
      if (!IsFinal(s->state())) {
        live.insert(AttemptId(job_name, replica, s->attempt()));
      }
      JobRecord* job = jobs_.FindJob(job_name);
      const ReplicaRecord* r = job == nullptr ? nullptr : job->FindReplica(replica);
      const bool ours = job != nullptr && IsCurrentAttempt(*job, r, node_id, *s);
      if (ours) {
        reported.insert({job_name, replica});
        if (r->stop_requested && !IsFinal(s->state())) {
          SendStop(node.peer, job_name, replica, r->attempt, "stop (after coordinator restart)");
        }
        ApplyIfCurrent(node_id, *s, now_ms);
      } else if (!IsFinal(s->state())) {
        spdlog::info("node {}: stopping {}/{} attempt {} (not a live replica here)", node_id,
                     job_name, replica, s->attempt());
        SendStop(node.peer, job_name, replica, s->attempt(),
                 "the coordinator does not run this attempt here");
      } else if (r != nullptr && RanUnrecorded(*job, *r, *s)) {
        jobs_.ChiefSucceededUnrecorded(*job, node_id, s->attempt(), now_ms);
      }
    }
  }
  jobs_.Reconcile(node_id, reported, now_ms, reg.last_heard_ms);
  jobs_.FencedNodeReturned(node_id, live, now_ms);
  wire::RegisterAgentReplyT reply;
  reply.heartbeat_interval_ms = static_cast<int>(nodes_.heartbeat_interval_ms());
  reply.output_root = nodes_.storage_root();
  reply.fence_after_ms = fence_after_ms_;
  reply.fence_grace_ms = fence_grace_ms_;
  Reply(m, Encode(id, std::move(reply)));
}

void AgentService::OnHeartbeat(const RoutedMessage& m, const wire::Heartbeat& req, int64_t now_ms) {
  if (!SpeaksFor(m, Str(req.node_id()), "Heartbeat")) return;
  wire::HeartbeatReplyT reply;
  reply.known = nodes_.Heartbeat(req, m.peer, now_ms);
  if (reply.known && req.progress()) {
    std::string node_id = Str(req.node_id());
    for (const wire::ReplicaProgress* p : *req.progress()) {
      JobRecord* job = jobs_.FindJob(Str(p->job()));
      const ReplicaRecord* r = job == nullptr ? nullptr : job->FindReplica(Str(p->replica()));
      if (r == nullptr || r->node_id != node_id || r->attempt != p->attempt()) continue;
      ReplicaUsageTracker::Sample sample = ReplicaUsageTracker::FromProgress(*p, r->gpus);
      ProgressReport report;
      report.gpus_sampled = static_cast<int>(sample.gpus.size());
      report.gpus_busy = std::any_of(sample.gpus.begin(), sample.gpus.end(), [](const auto& g) {
        return g.utilization >= Watchdog::kBusyUtilization;
      });
      if (usage_ != nullptr) {
        usage_->Observe(job->name, r->name, r->attempt, std::move(sample), now_ms);
      }
      if (watchdog_ == nullptr) continue;
      report.replica = r->name;
      report.attempt = p->attempt();
      report.log_idle_ms = p->log_idle_ms();
      report.metric_idle_ms = p->metric_idle_ms();
      report.has_recorder = p->has_recorder();
      report.ranks_exited = p->ranks_exited();
      report.rank = p->rank();
      report.completed_seq = p->completed_seq();
      report.completed_idle_ms = p->completed_idle_ms();
      report.current_seq = p->current_seq();
      // Words of the hang event the job's history keeps: printable and short, whatever was sent.
      report.current_op = TruncateUtf8(ValidUtf8(Str(p->current_op()), true), kMaxOpNameBytes);
      report.current_algorithm =
          TruncateUtf8(ValidUtf8(Str(p->current_algorithm()), true), kMaxOpNameBytes);
      report.current_bytes = p->current_bytes();
      report.current_ms = p->current_ms();
      if (p->starts()) {
        for (const wire::OpStart* s : *p->starts())
          report.starts.emplace_back(s->seq(), s->unix_us());
      }
      watchdog_->Report(*job, report, now_ms);
      for (const Lateness& l : watchdog_->LatenessOf(job->name)) {
        if (l.replica != r->name) continue;
        auto out = std::make_unique<wire::ReplicaLatenessT>();
        out->job = job->name;
        out->replica = l.replica;
        out->median_ms = l.median_ms;
        out->samples = static_cast<int>(l.samples);
        reply.lateness.push_back(std::move(out));
      }
    }
  }
  Reply(m, Encode(m.message.request_id(), std::move(reply)));
}

void AgentService::OnReplicaUpdate(const RoutedMessage& m, const wire::ReplicaUpdate& req,
                                   int64_t now_ms) {
  uint64_t id = m.message.request_id();
  std::string node_id = Str(req.node_id());
  if (!SpeaksFor(m, node_id, "ReplicaUpdate")) return;
  NodeRecord* node = nodes_.FindReady(node_id);
  if (node == nullptr || req.status() == nullptr) {
    // Not acked: the agent keeps the update and reports it when it registers again.
    Reply(m, EncodeError(id, FailedPrecondition("node '" + node_id +
                                                "' is not registered; send RegisterAgent")));
    return;
  }
  const wire::ReplicaStatus& s = *req.status();
  if (Status valid = CheckReportedState(s, "ReplicaUpdate.status"); !valid.ok()) {
    refusals_.Log("agent endpoint: refused a replica update from {}: {}", PeerName(m.peer),
                  valid.message());
    Reply(m, EncodeError(id, valid));
    return;
  }
  nodes_.Touch(*node, now_ms);
  if (!ApplyIfCurrent(node_id, s, now_ms)) {
    if (!IsFinal(s.state())) {
      SendStop(node->peer, Str(s.job()), Str(s.replica()), s.attempt(),
               "the coordinator does not run this attempt here");
    } else {
      jobs_.FencedAttemptEnded(node_id, Str(s.job()), Str(s.replica()), s.attempt(), now_ms);
    }
  }
  Reply(m, Encode(id, wire::AckT{}));
}

void AgentService::OnLogChunk(const RoutedMessage& m, const wire::LogChunk& req, int64_t now_ms) {
  std::string job_name = Str(req.job());
  std::string replica = Str(req.replica());
  int attempt = req.attempt();
  size_t size = req.data() ? req.data()->size() : 0;
  wire::LogAckT ack;
  ack.job = job_name;
  ack.replica = replica;
  ack.attempt = attempt;
  JobRecord* job = jobs_.FindJob(job_name);
  ReplicaRecord* r = job == nullptr ? nullptr : job->FindReplica(replica);
  if (!r || attempt < 0 || attempt > r->attempt) {
    // Nothing to store it under: acknowledge it as consumed so the agent moves on.
    warnings_.Log("dropping {} log bytes for unknown {}/{} attempt {}", size, job_name, replica,
                  attempt);
    ack.next_offset = req.offset() + size;
    Reply(m, Encode(m.message.request_id(), std::move(ack)));
    return;
  }
  // The current attempt's output comes from the node it runs on (earlier attempts' tails may come
  // from where they ran).
  const std::string& runs_on = r->node_id.empty() ? r->last_node : r->node_id;
  if (attempt == r->attempt && !runs_on.empty() && !SpeaksFor(m, runs_on, "LogChunk")) return;
  std::string_view data(size ? reinterpret_cast<const char*>(req.data()->data()) : "", size);
  auto held = logs_.Append(job_name, replica, attempt, req.offset(), data, now_ms);
  if (!held.ok()) {
    spdlog::error("log store: {}", held.status().ToString());
    Reply(m, EncodeError(m.message.request_id(), held.status()));
    return;
  }
  if (req.eof() && *held == req.offset() + size) logs_.MarkEof(job_name, replica, attempt);
  ack.next_offset = *held;
  Reply(m, Encode(m.message.request_id(), std::move(ack)));
}

void AgentService::OnStackDump(const RoutedMessage& m, const wire::StackDump& req, int64_t now_ms) {
  if (!SpeaksFor(m, Str(req.node_id()), "StackDump")) return;
  std::string job_name = Str(req.job());
  std::string replica = Str(req.replica());
  JobRecord* job = jobs_.FindJob(job_name);
  ReplicaRecord* r = job == nullptr ? nullptr : job->FindReplica(replica);
  if (r == nullptr || req.attempt() < 0 || req.attempt() > r->attempt) {
    spdlog::warn("dropping a stack dump of unknown {}/{} attempt {}", job_name, replica,
                 req.attempt());
  } else {
    std::string text = Str(req.text());
    Status stored = logs_.AppendStacks(job_name, replica, req.attempt(), text);
    if (!stored.ok()) {
      spdlog::error("log store: {}", stored.ToString());
      Reply(m, EncodeError(m.message.request_id(), stored));
      return;
    }
    spdlog::info("job {}: stacks of {} attempt {} stored ({} bytes)", job_name, replica,
                 req.attempt(), text.size());
    // A hang verdict's dump: the job's events say where the replica was.
    if (watchdog_ != nullptr) {
      if (auto where = watchdog_->StacksTaken(job_name, replica, req.attempt(), text, now_ms)) {
        jobs_.Note(*job, *where, now_ms);
      }
    }
  }
  Reply(m, Encode(m.message.request_id(), wire::AckT{}));
}

void AgentService::OnExecOutput(const RoutedMessage& m, const wire::ExecOutput& req) {
  const std::string node_id = Str(req.node_id());
  if (!SpeaksFor(m, node_id, "ExecOutput")) return;
  if (exec_relay_ != nullptr) {
    wire::ExecOutputT output;
    req.UnPackTo(&output);
    output.error = ValidUtf8(output.error);  // the client's error: text, unlike the output
    output.killed_because = ValidUtf8(output.killed_because);
    exec_relay_->OnOutput(node_id, std::move(output));
  }
  Reply(m, Encode(m.message.request_id(), wire::AckT{}));
}

void AgentService::OnTrialMeasurement(const RoutedMessage& m, const wire::TrialMeasurement& req) {
  std::string job = Str(req.job());
  const JobRecord* record = jobs_.FindJob(job);
  const ReplicaRecord* r = nullptr;
  if (record != nullptr) {
    for (const auto& replica : record->replicas) {
      if (replica.name == Str(req.replica())) r = &replica;
    }
  }
  if (r != nullptr && !r->node_id.empty() && !SpeaksFor(m, r->node_id, "TrialMeasurement")) return;
  auto metrics = tuning::MeasurementMetrics(req);
  Status s = !metrics.ok()       ? metrics.status()
             : record == nullptr ? NotFound("no job named '" + job + "'")
                                 : Status::Ok();
  if (s.ok()) {
    for (const auto& [tag, value] : *metrics) {
      training_metrics_.push_back(TrainingMetric{job, Str(req.replica()), req.step(),
                                                 std::llround(req.timestamp() * 1000), tag, value});
    }
    if (!record->study.empty()) {
      s = studies_.AddMeasurement(job, req.step(), *metrics);
      if (s.ok()) run_studies_();
    }
  }
  if (!s.ok()) {
    // Acked all the same: the agent must not resend a line that can never be taken.
    warnings_.Log("measurement of job {} step {} dropped: {}", job, req.step(), s.ToString());
  }
  Reply(m, Encode(m.message.request_id(), wire::AckT{}));
}

}  // namespace cohort::coordinator
