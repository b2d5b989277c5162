#include "coordinator/coordinator.h"

#include <spdlog/spdlog.h>

#include <time.h>

#include <algorithm>
#include <filesystem>

#include "common/cluster_env.h"
#include "coordinator/tuning/study_info.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxEventsPerJob = 1000;
constexpr size_t kMaxMessagesPerPass = 4096;
constexpr int64_t kPeriodicMs = 1000;
// After a job ends, logs still in flight get this long before a reader is told "complete" even
// without the attempt's eof chunk.
constexpr int64_t kLogGraceMs = 5000;

// CPU time of this thread: a round's cost without the time the OS gave to other processes.
int64_t ThreadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

std::string FormatDuration(int64_t ms) {
  if (ms == 0) return "0s";
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

ReplicaDemand DemandOf(const JobRecord& job, const ReplicaRecord& r) {
  const Resources& res = job.PoolOf(r).resources;
  return ReplicaDemand{res.gpus, res.cpus, res.memory_mb};
}

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options, Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      scheduler_(SchedulerOptions{options_.starvation_limit.count()}),
      studies_(options_.state_dir + "/studies") {}

Coordinator::~Coordinator() {
  // Sockets close before the context (and the ZAP handler) go away.
  client_.reset();
  agent_.reset();
  zap_.reset();
}

StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(const CoordinatorOptions& options,
                                                           Clock* clock,
                                                           zmq::context_t* context) {
  std::unique_ptr<Coordinator> c(new Coordinator(options, clock));
  if (context == nullptr) {
    c->owned_context_ = std::make_unique<zmq::context_t>(1);
    context = c->owned_context_.get();
  }
  c->context_ = context;
  c->started_ms_ = clock->NowMs();
  c->last_periodic_ms_ = c->started_ms_;
  c->logs_ = std::make_unique<LogStore>(options.state_dir + "/logs");
  COHORT_RETURN_IF_ERROR(c->Recover());

  SocketSecurity client_sec, agent_sec;
  if (options.insecure) {
    spdlog::warn("--insecure: client and agent endpoints are PLAINTEXT and unauthenticated; "
                 "use only on a trusted local network");
  } else {
    auto keys = LoadOwnKeys(options.curve_key);
    if (!keys.ok()) {
      return keys.status().WithContext("CURVE key (--key-file; or run with --insecure)");
    }
    COHORT_ASSIGN_OR_RETURN(c->zap_, ZapAuthenticator::Start(
                                         *context, {{"clients", options.client_keys_dir},
                                                    {"agents", options.agent_keys_dir}}));
    client_sec = SocketSecurity{false, *keys, "", "clients"};
    agent_sec = SocketSecurity{false, *keys, "", "agents"};
  }
  auto client = RouterSocket::Bind(*context, options.client_endpoint, client_sec);
  if (!client.ok()) return client.status().WithContext("client endpoint");
  c->client_ = std::make_unique<RouterSocket>(std::move(*client));
  auto agent = RouterSocket::Bind(*context, options.agent_endpoint, agent_sec);
  if (!agent.ok()) return agent.status().WithContext("agent endpoint");
  c->agent_ = std::make_unique<RouterSocket>(std::move(*agent));
  spdlog::info("coordinator: clients on {}, agents on {}, state in {}", c->client_endpoint(),
               c->agent_endpoint(), options.state_dir);
  return c;
}

Status Coordinator::Recover() {
  JournalReplay replay;
  COHORT_ASSIGN_OR_RETURN(journal_, Journal::Open(options_.state_dir, &replay));
  size_t bad = 0;
  for (const auto& rec : replay.records) {
    auto study = studies_.Replay(rec);
    if (!study.ok()) {
      ++bad;
      spdlog::error("journal: skipping a study record: {}", study.status().ToString());
      continue;
    }
    if (*study) continue;
    auto job = JobFromJson(rec);
    if (!job.ok()) {
      ++bad;
      spdlog::error("journal: skipping a record: {}", job.status().ToString());
      continue;
    }
    auto owned = std::make_unique<JobRecord>(std::move(*job));
    next_seq_ = std::max(next_seq_, owned->seq + 1);
    jobs_[owned->name] = std::move(owned);
  }
  for (auto& [name, job] : jobs_) {
    if (!job->finished()) {
      active_[job->seq] = job.get();
    } else if (AnyHolding(*job)) {
      ended_holding_.insert(name);
    }
  }
  if (!replay.records.empty()) {
    spdlog::info("journal: recovered {} jobs ({} unfinished) from {} records{}", jobs_.size(),
                 active_.size(), replay.records.size(),
                 bad ? fmt::format(", {} unreadable", bad) : std::string());
  }
  RecoverStudies();
  if (journal_->journal_records() > options_.snapshot_every) {
    COHORT_RETURN_IF_ERROR(journal_->Compact(SnapshotRecords()));
  }
  return Status::Ok();
}

std::vector<std::string> Coordinator::SnapshotRecords() const {
  std::vector<std::string> all = studies_.SnapshotRecords();
  all.reserve(all.size() + jobs_.size());
  for (const auto& [name, job] : jobs_) all.push_back(JobToJson(*job));
  return all;
}

void Coordinator::RecoverStudies() {
  // A torn tail may have kept a trial but lost its job (submitted again) or its job's end.
  for (TrialJobLaunch& launch : studies_.ActiveTrialJobs()) {
    auto it = jobs_.find(launch.job.name);
    if (it == jobs_.end()) {
      spdlog::warn("study {}: trial {} has no job after recovery; submitting it again",
                   launch.study, launch.trial_id);
      SubmitTrialJob(std::move(launch));
    } else if (it->second->finished()) {
      JobEnded(*it->second);
    }
  }
  RunStudies();
}

const JobRecord* Coordinator::FindJob(const std::string& name) const {
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : it->second.get();
}

const NodeRecord* Coordinator::FindNode(const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second;
}

// ---- loop -----------------------------------------------------------------------------------

Status Coordinator::RunOnce(std::chrono::milliseconds poll_timeout) {
  zmq::pollitem_t items[2] = {{client_->socket().handle(), 0, ZMQ_POLLIN, 0},
                              {agent_->socket().handle(), 0, ZMQ_POLLIN, 0}};
  try {
    zmq::poll(items, 2, poll_timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) return Unavailable(std::string("poll: ") + e.what());
  }
  // Agents first: their updates free resources that submissions in the same pass may use.
  // Every request read in this pass is answered at Commit: those are the peer's outstanding ones.
  std::map<std::string, int> outstanding;
  for (bool agent : {true, false}) {
    RouterSocket& socket = agent ? *agent_ : *client_;
    for (size_t i = 0; i < kMaxMessagesPerPass; ++i) {
      auto m = socket.Receive(std::chrono::milliseconds(0));
      if (!m.ok()) return m.status();
      if (!m->has_value()) break;
      ++stats_.messages;
      if (++outstanding[(*m)->peer] > options_.max_requests_per_peer) {
        RefuseOverLimit(**m, agent);
      } else if (agent) {
        HandleAgent(**m);
      } else {
        HandleClient(**m);
      }
    }
  }
  Tick();
  return Commit();
}

Status Coordinator::Run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    COHORT_RETURN_IF_ERROR(RunOnce(std::chrono::milliseconds(50)));
  }
  spdlog::info("scheduler stats: rounds={} last_round_us={} max_round_us={} last_round_cpu_us={} "
                  "max_round_cpu_us={} queued={} "
               "active_jobs={} jobs={} nodes={} messages={}",
               stats_.schedule_rounds, stats_.last_round_us, stats_.max_round_us,
                  stats_.last_round_cpu_us, stats_.max_round_cpu_us,
               stats_.last_round_queued, active_.size(), jobs_.size(), nodes_.size(),
               stats_.messages);
  return Status::Ok();
}

Status Coordinator::Commit() {
  // Study records before job records: a torn tail can then lose a trial's job, which Recover
  // resubmits, but never leave a trial job without its trial.
  for (const std::string& record : studies_.TakeJournalRecords()) {
    COHORT_RETURN_IF_ERROR(journal_->Append(record));
  }
  for (const auto& name : dirty_) {
    auto it = jobs_.find(name);
    if (it == jobs_.end()) continue;
    COHORT_RETURN_IF_ERROR(journal_->Append(JobToJson(*it->second)));
  }
  dirty_.clear();
  COHORT_RETURN_IF_ERROR(journal_->Sync());
  if (journal_->journal_records() > options_.snapshot_every) {
    COHORT_RETURN_IF_ERROR(journal_->Compact(SnapshotRecords()));
    spdlog::info("journal: compacted {} jobs and {} studies into a snapshot", jobs_.size(),
                 studies_.size());
  }
  std::vector<Outgoing> out;
  out.swap(outbox_);
  for (auto& o : out) {
    Status s = (o.agent ? agent_ : client_)->Send(o.peer, std::move(o.frame));
    if (!s.ok()) {
      spdlog::debug("send to {} peer {}: {}", o.agent ? "agent" : "client", o.peer,
                    s.ToString());
    }
  }
  return Status::Ok();
}

void Coordinator::RefuseOverLimit(const RoutedMessage& m, bool agent) {
  ++stats_.refused;
  // Answers (Ack, ErrorReply) are not requests: nothing to refuse, nothing to answer.
  if (m.message.type() == wire::Body::Ack || m.message.type() == wire::Body::ErrorReply) return;
  Reply(m,
        EncodeError(m.message.request_id(),
                    ResourceExhausted("more than " +
                                      std::to_string(options_.max_requests_per_peer) +
                                      " requests outstanding from this peer; wait for the "
                                      "replies before sending more")),
        agent);
}

void Coordinator::Reply(const RoutedMessage& m, zmq::message_t frame, bool agent) {
  outbox_.push_back(Outgoing{agent, m.peer, std::move(frame)});
}

void Coordinator::SendToAgent(const std::string& peer, zmq::message_t frame) {
  outbox_.push_back(Outgoing{true, peer, std::move(frame)});
}

void Coordinator::MarkDirty(JobRecord& job) { dirty_.insert(job.name); }

void Coordinator::AddEvent(JobRecord& job, const std::string& message) {
  spdlog::info("job {}: {}", job.name, message);
  job.events.push_back({clock_->NowMs(), message});
  if (job.events.size() > kMaxEventsPerJob) {
    job.events.erase(job.events.begin(), job.events.begin() + (job.events.size() - kMaxEventsPerJob));
  }
  MarkDirty(job);
}

// ---- client endpoint ------------------------------------------------------------------------

void Coordinator::HandleClient(const RoutedMessage& m) {
  const Message& msg = m.message;
  uint64_t id = msg.request_id();
  switch (msg.type()) {
    case wire::Body::SubmitJob:
      OnSubmit(m, *msg.As<wire::SubmitJob>());
      return;
    case wire::Body::GetJob: {
      std::string name = Str(msg.As<wire::GetJob>()->name());
      const JobRecord* job = FindJob(name);
      if (!job) {
        Reply(m, EncodeError(id, NotFound("no job named '" + name + "'")), false);
      } else {
        Reply(m, Encode(id, ToInfo(*job)), false);
      }
      return;
    }
    case wire::Body::ListJobs: {
      std::vector<const JobRecord*> all;
      for (const auto& [n, j] : jobs_) all.push_back(j.get());
      std::sort(all.begin(), all.end(),
                [](const JobRecord* a, const JobRecord* b) { return a->seq < b->seq; });
      wire::JobListT list;
      for (const JobRecord* j : all) list.jobs.push_back(std::make_unique<wire::JobInfoT>(ToInfo(*j)));
      Reply(m, Encode(id, std::move(list)), false);
      return;
    }
    case wire::Body::CancelJob:
      OnCancel(m, *msg.As<wire::CancelJob>());
      return;
    case wire::Body::ListNodes:
      Reply(m, Encode(id, Nodes()), false);
      return;
    case wire::Body::GetLogs:
      OnGetLogs(m, *msg.As<wire::GetLogs>());
      return;
    case wire::Body::SubmitStudy:
      OnSubmitStudy(m, *msg.As<wire::SubmitStudy>());
      return;
    case wire::Body::GetStudy: {
      auto info = studies_.Info(Str(msg.As<wire::GetStudy>()->name()));
      Reply(m, info.ok() ? Encode(id, std::move(*info)) : EncodeError(id, info.status()), false);
      return;
    }
    case wire::Body::ListStudies: {
      wire::StudyListT list;
      for (auto& info : studies_.List()) {
        list.studies.push_back(std::make_unique<wire::StudyInfoT>(std::move(info)));
      }
      Reply(m, Encode(id, std::move(list)), false);
      return;
    }
    default:
      Reply(m,
            EncodeError(id, InvalidArgument(std::string("unexpected ") +
                                            wire::EnumNameBody(msg.type()) +
                                            " on the client endpoint")),
            false);
  }
}

void Coordinator::OnSubmit(const RoutedMessage& m, const wire::SubmitJob& req) {
  uint64_t id = m.message.request_id();
  std::string yaml = Str(req.spec_yaml());
  auto spec = ParseJobSpec(yaml, "submitted job");
  if (!spec.ok()) {
    Reply(m, EncodeError(id, InvalidArgument(spec.status().message())), false);
    return;
  }
  if (jobs_.count(spec->name)) {
    Reply(m, EncodeError(id, AlreadyExists("a job named '" + spec->name + "' already exists")),
          false);
    return;
  }
  JobRecord& job = AddJob(std::move(*spec), yaml);
  wire::SubmitJobReplyT reply;
  reply.name = job.name;
  Reply(m, Encode(id, std::move(reply)), false);
}

JobRecord& Coordinator::AddJob(JobSpec spec, const std::string& yaml) {
  auto job = std::make_unique<JobRecord>();
  int64_t now = clock_->NowMs();
  job->seq = next_seq_++;
  job->name = spec.name;
  job->spec_yaml = yaml;
  job->output_dir =
      spec.output_dir.empty() ? options_.state_dir + "/jobs/" + spec.name : spec.output_dir;
  job->spec = std::move(spec);
  job->state = JobState::QUEUED;
  job->message = "waiting for resources";
  job->create_time_ms = now;
  job->queued_since_ms = now;
  job->replicas = MakeReplicas(job->spec);
  FillDemands(*job);
  JobRecord* raw = job.get();
  jobs_[raw->name] = std::move(job);
  active_[raw->seq] = raw;
  AddEvent(*raw, "submitted (" + std::to_string(raw->replicas.size()) + " replicas)");
  MarkDirty(*raw);
  schedule_needed_ = true;
  return *raw;
}

void Coordinator::CancelJob(JobRecord& job, const std::string& reason) {
  if (job.finished() || job.state == JobState::CANCELLING) return;
  job.state = JobState::CANCELLING;
  job.message = reason;
  AddEvent(job, reason);
  StopReplicas(job, "job cancelled");
  MaybeFinishCancel(job);
}

void Coordinator::OnSubmitStudy(const RoutedMessage& m, const wire::SubmitStudy& req) {
  uint64_t id = m.message.request_id();
  std::string yaml = Str(req.spec_yaml());
  auto name = studies_.Submit(yaml, clock_->NowMs());
  if (!name.ok()) {
    Reply(m, EncodeError(id, name.status()), false);
    return;
  }
  RunStudies();
  Reply(m, Encode(id, *studies_.Info(*name)), false);
}

void Coordinator::OnTrialMeasurement(const RoutedMessage& m, const wire::TrialMeasurement& req) {
  uint64_t id = m.message.request_id();
  auto metrics = tuning::MeasurementMetrics(req);
  Status s = metrics.ok() ? studies_.AddMeasurement(Str(req.job()), req.step(), *metrics)
                          : metrics.status();
  if (!s.ok()) {
    // Acked all the same: the agent must not resend a line that can never be taken.
    spdlog::warn("measurement of job {} step {} dropped: {}", Str(req.job()), req.step(),
                 s.ToString());
  } else {
    RunStudies();
  }
  Reply(m, Encode(id, wire::AckT{}), true);
}

void Coordinator::RunStudies() {
  StudyActions actions = studies_.TakeActions(clock_->NowMs());
  for (size_t i = 0; i < actions.cancel.size(); ++i) {
    auto it = jobs_.find(actions.cancel[i]);
    if (it != jobs_.end()) CancelJob(*it->second, actions.cancel_reasons[i]);
  }
  for (TrialJobLaunch& launch : actions.submit) SubmitTrialJob(std::move(launch));
}

void Coordinator::SubmitTrialJob(TrialJobLaunch launch) {
  if (jobs_.count(launch.job.name)) {
    spdlog::error("study {}: trial {}: a job named {} exists already; not submitted",
                  launch.study, launch.trial_id, launch.job.name);
    return;
  }
  JobRecord& job = AddJob(std::move(launch.job), launch.spec_yaml);
  job.study = launch.study;
  job.trial_id = launch.trial_id;
}

void Coordinator::OnCancel(const RoutedMessage& m, const wire::CancelJob& req) {
  uint64_t id = m.message.request_id();
  std::string name = Str(req.name());
  auto it = jobs_.find(name);
  if (it == jobs_.end()) {
    Reply(m, EncodeError(id, NotFound("no job named '" + name + "'")), false);
    return;
  }
  JobRecord& job = *it->second;
  CancelJob(job, "cancel requested");
  Reply(m, Encode(id, ToInfo(job)), false);
}

void Coordinator::OnGetLogs(const RoutedMessage& m, const wire::GetLogs& req) {
  uint64_t id = m.message.request_id();
  std::string name = Str(req.job());
  std::string replica = Str(req.replica());
  auto it = jobs_.find(name);
  if (it == jobs_.end()) {
    Reply(m, EncodeError(id, NotFound("no job named '" + name + "'")), false);
    return;
  }
  JobRecord& job = *it->second;
  ReplicaRecord* r = job.FindReplica(replica);
  if (!r) {
    Reply(m, EncodeError(id, NotFound("job " + name + " has no replica '" + replica + "'")),
          false);
    return;
  }
  int attempt = req.attempt();
  if (attempt < -1 || attempt > r->attempt) {
    Reply(m, EncodeError(id, InvalidArgument("replica " + replica + " has no attempt " +
                                             std::to_string(attempt))),
          false);
    return;
  }
  uint32_t max_bytes = std::min<uint32_t>(req.max_bytes() ? req.max_bytes() : 1, 16u << 20);
  auto read = logs_->Read(name, replica, attempt, r->attempt, req.offset(), max_bytes);
  if (!read.ok()) {
    Reply(m, EncodeError(id, read.status()), false);
    return;
  }
  bool no_more = !r->launched || r->state == ReplicaState::LOST ||
                 logs_->Eof(name, replica, r->attempt) ||
                 clock_->NowMs() - job.end_time_ms > kLogGraceMs;
  wire::LogDataT data;
  data.job = name;
  data.replica = replica;
  data.offset = req.offset();
  data.next_offset = read->next_offset;
  data.data.assign(read->data.begin(), read->data.end());
  data.complete = job.finished() && read->at_end && no_more;
  Reply(m, Encode(id, std::move(data)), false);
}

wire::JobInfoT Coordinator::ToInfo(const JobRecord& job) const {
  wire::JobInfoT info;
  info.name = job.name;
  info.state = job.state;
  info.message = job.message;
  info.create_time_ms = job.create_time_ms;
  info.start_time_ms = job.start_time_ms;
  info.end_time_ms = job.end_time_ms;
  info.restarts = job.restarts;
  info.max_restarts = job.spec.scheduling.max_restarts;
  info.output_dir = job.output_dir;
  info.trial_id = job.trial_id;
  info.study = job.study;
  for (const auto& r : job.replicas) {
    auto ri = std::make_unique<wire::ReplicaInfoT>();
    ri->replica = r.name;
    ri->role = std::string(RoleName(r.role));
    ri->index = r.index;
    ri->pool = r.pool();
    ri->node_id = r.node_id;
    ri->gpus = r.gpus;
    ri->state = r.state;
    ri->attempt = r.attempt;
    ri->exit_code = r.exit_code;
    ri->message = r.message;
    info.replicas.push_back(std::move(ri));
  }
  for (const auto& e : job.events) {
    auto je = std::make_unique<wire::JobEventT>();
    je->time_ms = e.time_ms;
    je->message = e.message;
    info.events.push_back(std::move(je));
  }
  return info;
}

wire::NodeListT Coordinator::Nodes() const {
  struct Use {
    std::vector<int> gpus;
    int cpus = 0;
    int64_t mem = 0;
    int replicas = 0;
  };
  std::map<std::string, Use> use;
  for (const auto& [seq, job] : active_) {
    (void)seq;
    for (const auto& r : job->replicas) {
      if (!HoldsResources(r)) continue;
      Use& u = use[r.node_id];
      u.gpus.insert(u.gpus.end(), r.gpus.begin(), r.gpus.end());
      const Resources& res = job->PoolOf(r).resources;
      u.cpus += res.cpus;
      u.mem += res.memory_mb;
      ++u.replicas;
    }
  }
  // Jobs that ended may still have replicas being stopped.
  for (const auto& name : ended_holding_) {
    auto it = jobs_.find(name);
    if (it == jobs_.end()) continue;
    const JobRecord* job = it->second.get();
    for (const auto& r : job->replicas) {
      if (!HoldsResources(r)) continue;
      Use& u = use[r.node_id];
      u.gpus.insert(u.gpus.end(), r.gpus.begin(), r.gpus.end());
      const Resources& res = job->PoolOf(r).resources;
      u.cpus += res.cpus;
      u.mem += res.memory_mb;
      ++u.replicas;
    }
  }
  wire::NodeListT list;
  for (const auto& [id, n] : nodes_) {
    auto ni = std::make_unique<wire::NodeInfoT>();
    ni->node_id = id;
    ni->address = n.address;
    ni->state = !n.ready ? "LOST" : n.draining ? "DRAINING" : "READY";
    for (const auto& g : n.gpus) ni->gpus.push_back(std::make_unique<wire::GpuInfoT>(g));
    ni->cpus = n.cpus;
    ni->memory_mb = n.memory_mb;
    ni->last_heartbeat_ms = n.last_heartbeat_ms;
    auto u = use.find(id);
    if (u != use.end()) {
      ni->gpus_used = u->second.gpus;
      std::sort(ni->gpus_used.begin(), ni->gpus_used.end());
      ni->cpus_used = u->second.cpus;
      ni->memory_used_mb = u->second.mem;
      ni->replicas = u->second.replicas;
    }
    list.nodes.push_back(std::move(ni));
  }
  return list;
}

// ---- agent endpoint -------------------------------------------------------------------------

void Coordinator::HandleAgent(const RoutedMessage& m) {
  const Message& msg = m.message;
  switch (msg.type()) {
    case wire::Body::RegisterAgent:
      OnRegister(m, *msg.As<wire::RegisterAgent>());
      return;
    case wire::Body::Heartbeat:
      OnHeartbeat(m, *msg.As<wire::Heartbeat>());
      return;
    case wire::Body::ReplicaUpdate:
      OnReplicaUpdate(m, *msg.As<wire::ReplicaUpdate>());
      return;
    case wire::Body::LogChunk:
      OnLogChunk(m, *msg.As<wire::LogChunk>());
      return;
    case wire::Body::TrialMeasurement:
      OnTrialMeasurement(m, *msg.As<wire::TrialMeasurement>());
      return;
    case wire::Body::Ack:
      return;
    case wire::Body::ErrorReply:
      spdlog::warn("agent {} reported an error: {}", m.peer, msg.ErrorStatus().ToString());
      return;
    default:
      Reply(m,
            EncodeError(msg.request_id(),
                        InvalidArgument(std::string("unexpected ") +
                                        wire::EnumNameBody(msg.type()) +
                                        " on the agent endpoint")),
            true);
  }
}

void Coordinator::OnRegister(const RoutedMessage& m, const wire::RegisterAgent& req) {
  uint64_t id = m.message.request_id();
  std::string node_id = Str(req.node_id());
  if (node_id.empty()) {
    Reply(m, EncodeError(id, InvalidArgument("RegisterAgent.node_id: must not be empty")), true);
    return;
  }
  int64_t now = clock_->NowMs();
  bool returning = nodes_.count(node_id) > 0;
  NodeRecord& node = nodes_[node_id];
  bool was_lost = returning && !node.ready;
  node.node_id = node_id;
  node.address = Str(req.address());
  if (node.address.empty()) node.address = node_id;
  node.gpus.clear();
  if (req.gpus()) {
    for (const auto* g : *req.gpus()) {
      wire::GpuInfoT info;
      g->UnPackTo(&info);
      node.gpus.push_back(std::move(info));
    }
  }
  node.cpus = req.cpus();
  node.memory_mb = req.memory_mb();
  node.labels.clear();
  if (req.labels()) {
    for (const auto* kv : *req.labels()) node.labels[Str(kv->key())] = Str(kv->value());
  }
  node.last_heartbeat_ms = now;
  node.ready = true;
  node.draining = false;
  node.listening_ports.clear();
  if (req.listening_ports()) {
    node.listening_ports.assign(req.listening_ports()->begin(), req.listening_ports()->end());
  }
  node.peer = m.peer;
  spdlog::info("node {} {} ({} GPUs, {} CPUs, {} MiB) at {}", node_id,
               was_lost ? "came back" : (returning ? "re-registered" : "registered"),
               node.gpus.size(), node.cpus, node.memory_mb, node.address);

  // Reconcile what the agent runs with what we think runs there.
  std::set<std::pair<std::string, std::string>> reported;  // (job, replica) current attempts
  if (req.replicas()) {
    for (const auto* s : *req.replicas()) {
      std::string job_name = Str(s->job());
      std::string replica = Str(s->replica());
      auto it = jobs_.find(job_name);
      ReplicaRecord* r = it == jobs_.end() ? nullptr : it->second->FindReplica(replica);
      bool ours = r && r->node_id == node_id && r->attempt == s->attempt() && !IsFinal(r->state);
      if (ours) {
        reported.insert({job_name, replica});
        JobRecord& job = *it->second;
        if (r->stop_requested && !IsFinal(s->state())) {
          SendStopTo(node.peer, job_name, replica, r->attempt, "stop (after coordinator restart)");
        }
        ApplyReplicaStatus(job, *r, *s);
      } else if (!IsFinal(s->state())) {
        spdlog::info("node {}: stopping {}/{} attempt {} (not a live replica here)", node_id,
                     job_name, replica, s->attempt());
        SendStopTo(node.peer, job_name, replica, s->attempt(),
                   "the coordinator does not run this attempt here");
      }
    }
  }
  std::vector<JobRecord*> active_jobs;
  for (auto& [seq, job] : active_) active_jobs.push_back(job);
  for (JobRecord* job : active_jobs) {
    for (auto& r : job->replicas) {
      if (job->finished()) break;
      if (r.node_id != node_id || IsFinal(r.state) || reported.count({job->name, r.name})) {
        continue;
      }
      if (r.stop_requested) {
        SetReplicaState(r, ReplicaState::STOPPED, "gone when its node re-registered");
      } else {
        SetReplicaState(r, ReplicaState::LOST,
                        "node " + node_id + " re-registered without it");
      }
      MarkDirty(*job);
      OnReplicaEnded(*job, r);
    }
  }
  // Finished jobs may still wait for replicas to stop.
  for (const auto& name : ended_holding_) {
    auto jit = jobs_.find(name);
    if (jit == jobs_.end()) continue;
    JobRecord* job = jit->second.get();
    for (auto& r : job->replicas) {
      if (r.node_id == node_id && !IsFinal(r.state) && !reported.count({name, r.name})) {
        SetReplicaState(r, ReplicaState::STOPPED, "gone when its node re-registered");
        MarkDirty(*job);
      }
    }
  }
  schedule_needed_ = true;
  wire::RegisterAgentReplyT reply;
  reply.heartbeat_interval_ms = static_cast<int>(
      std::clamp<int64_t>(options_.heartbeat_timeout.count() / 4, 10, 1000));
  Reply(m, Encode(id, std::move(reply)), true);
}

void Coordinator::OnHeartbeat(const RoutedMessage& m, const wire::Heartbeat& req) {
  auto it = nodes_.find(Str(req.node_id()));
  wire::HeartbeatReplyT reply;
  reply.known = it != nodes_.end() && it->second.ready;
  if (reply.known) {
    NodeRecord& node = it->second;
    node.last_heartbeat_ms = clock_->NowMs();
    node.peer = m.peer;
    // An empty list is sent as no list at all.
    node.listening_ports.clear();
    if (req.listening_ports()) {
      node.listening_ports.assign(req.listening_ports()->begin(), req.listening_ports()->end());
    }
    if (req.draining() && !node.draining) {
      node.draining = true;
      spdlog::info("node {} is draining (its agent is shutting down): nothing new is placed there",
                   node.node_id);
    }
  }
  Reply(m, Encode(m.message.request_id(), std::move(reply)), true);
}

void Coordinator::OnReplicaUpdate(const RoutedMessage& m, const wire::ReplicaUpdate& req) {
  uint64_t id = m.message.request_id();
  std::string node_id = Str(req.node_id());
  auto nit = nodes_.find(node_id);
  if (nit == nodes_.end() || !nit->second.ready || req.status() == nullptr) {
    // Not acked: the agent keeps the update and reports it when it registers again.
    Reply(m, EncodeError(id, FailedPrecondition("node '" + node_id +
                                                 "' is not registered; send RegisterAgent")),
          true);
    return;
  }
  NodeRecord& node = nit->second;
  node.last_heartbeat_ms = clock_->NowMs();
  const wire::ReplicaStatus& s = *req.status();
  std::string job_name = Str(s.job());
  std::string replica = Str(s.replica());
  auto it = jobs_.find(job_name);
  ReplicaRecord* r = it == jobs_.end() ? nullptr : it->second->FindReplica(replica);
  bool current = r && r->node_id == node_id && r->attempt == s.attempt() && !IsFinal(r->state);
  if (current) {
    ApplyReplicaStatus(*it->second, *r, s);
  } else if (!IsFinal(s.state())) {
    SendStopTo(node.peer, job_name, replica, s.attempt(),
               "the coordinator does not run this attempt here");
  }
  Reply(m, Encode(id, wire::AckT{}), true);
}

void Coordinator::OnLogChunk(const RoutedMessage& m, const wire::LogChunk& req) {
  std::string job_name = Str(req.job());
  std::string replica = Str(req.replica());
  int attempt = req.attempt();
  size_t size = req.data() ? req.data()->size() : 0;
  wire::LogAckT ack;
  ack.job = job_name;
  ack.replica = replica;
  ack.attempt = attempt;
  auto it = jobs_.find(job_name);
  ReplicaRecord* r = it == jobs_.end() ? nullptr : it->second->FindReplica(replica);
  if (!r || attempt < 0 || attempt > r->attempt) {
    // Nothing to store it under: acknowledge it as consumed so the agent moves on.
    spdlog::warn("dropping {} log bytes for unknown {}/{} attempt {}", size, job_name, replica,
                 attempt);
    ack.next_offset = req.offset() + size;
    Reply(m, Encode(m.message.request_id(), std::move(ack)), true);
    return;
  }
  std::string_view data(size ? reinterpret_cast<const char*>(req.data()->data()) : "", size);
  auto held = logs_->Append(job_name, replica, attempt, req.offset(), data);
  if (!held.ok()) {
    spdlog::error("log store: {}", held.status().ToString());
    Reply(m, EncodeError(m.message.request_id(), held.status()), true);
    return;
  }
  if (req.eof() && *held == req.offset() + size) logs_->MarkEof(job_name, replica, attempt);
  ack.next_offset = *held;
  Reply(m, Encode(m.message.request_id(), std::move(ack)), true);
}

// ---- controller -----------------------------------------------------------------------------

void Coordinator::SetReplicaState(ReplicaRecord& r, ReplicaState s, const std::string& message) {
  r.state = s;
  r.message = message;
  r.state_time_ms = clock_->NowMs();
}

void Coordinator::ApplyReplicaStatus(JobRecord& job, ReplicaRecord& r,
                                     const wire::ReplicaStatus& s) {
  ReplicaState state = s.state();
  if (state == r.state && !IsFinal(state)) return;
  if (!IsFinal(state)) {
    // PENDING -> STARTING -> RUNNING; never backwards.
    if (static_cast<int>(state) < static_cast<int>(r.state)) return;
    SetReplicaState(r, state, Str(s.message()));
    MarkDirty(job);
    if (state == ReplicaState::RUNNING) MaybeRunning(job);
    return;
  }
  SetReplicaState(r, state, Str(s.message()));
  r.exit_code = s.exit_code();
  r.signal = s.signal();
  MarkDirty(job);
  OnReplicaEnded(job, r);
}

void Coordinator::MaybeRunning(JobRecord& job) {
  if (job.state != JobState::PENDING) return;
  for (const auto& r : job.replicas) {
    if (r.state != ReplicaState::RUNNING && r.state != ReplicaState::SUCCEEDED) return;
  }
  job.state = JobState::RUNNING;
  job.message = "all replicas running";
  AddEvent(job, "running: all " + std::to_string(job.replicas.size()) + " replicas running");
}

bool Coordinator::AnyHolding(const JobRecord& job) const {
  for (const auto& r : job.replicas) {
    if (HoldsResources(r)) return true;
  }
  return false;
}

void Coordinator::OnReplicaEnded(JobRecord& job, ReplicaRecord& r) {
  schedule_needed_ = true;  // resources came free
  std::string who = r.name + " attempt " + std::to_string(r.attempt);
  if (job.finished()) return;
  if (job.state == JobState::CANCELLING) {
    MaybeFinishCancel(job);
    return;
  }
  if (r.stop_requested) return;  // we asked for it (a whole-job restart in progress)
  if (job.state == JobState::QUEUED) return;
  if (r.state == ReplicaState::SUCCEEDED) {
    if (r.role == Role::kChief) {
      FinishJob(job, JobState::SUCCEEDED, "the chief exited 0");
    } else {
      AddEvent(job, who + " exited 0");
    }
    return;
  }
  std::string why = who + " " + DescribeEnd(r);
  if (!IsRetryable(r)) {
    FinishJob(job, JobState::FAILED, why + " (permanent failure)");
    return;
  }
  int budget = job.spec.scheduling.max_restarts;
  if (job.restarts >= budget) {
    FinishJob(job, JobState::FAILED,
              why + "; the restart budget (max_restarts=" + std::to_string(budget) +
                  ") is spent");
    return;
  }
  ++job.restarts;
  if (job.spec.scheduling.restart_job_on_worker_restart) {
    RestartJob(job, why);
  } else {
    RestartReplica(job, r, why);
  }
}

void Coordinator::RestartReplica(JobRecord& job, ReplicaRecord& r, const std::string& reason) {
  AddEvent(job, "restart " + std::to_string(job.restarts) + "/" +
                    std::to_string(job.spec.scheduling.max_restarts) + ": " + r.name +
                    " as attempt " + std::to_string(r.attempt + 1) + " because " + reason);
  r.last_node = r.node_id;
  r.node_id.clear();
  r.gpus.clear();
  r.port = 0;
  r.stop_requested = false;
  SetReplicaState(r, ReplicaState::PENDING, "waiting to be placed again");
  r.exit_code = -1;
  r.signal = 0;
  MarkDirty(job);
  schedule_needed_ = true;
}

void Coordinator::RestartJob(JobRecord& job, const std::string& reason) {
  AddEvent(job, "restart " + std::to_string(job.restarts) + "/" +
                    std::to_string(job.spec.scheduling.max_restarts) +
                    ": the whole job (restart_job_on_worker_restart) because " + reason);
  StopReplicas(job, "the job restarts");
  job.state = JobState::QUEUED;
  job.message = "restarting: waiting for the old replicas to stop and for resources";
  job.queued_since_ms = clock_->NowMs();
  MarkDirty(job);
  schedule_needed_ = true;
}

void Coordinator::StopReplicas(JobRecord& job, const std::string& reason) {
  for (auto& r : job.replicas) {
    if (HoldsResources(r)) {
      SendStop(job, r, reason);
    } else if (!IsFinal(r.state)) {
      // Never placed: nothing runs.
      SetReplicaState(r, ReplicaState::STOPPED, "not started: " + reason);
      r.stop_requested = true;
    }
  }
  MarkDirty(job);
}

void Coordinator::SendStop(JobRecord& job, ReplicaRecord& r, const std::string& reason) {
  r.stop_requested = true;
  MarkDirty(job);
  auto it = nodes_.find(r.node_id);
  if (it == nodes_.end() || !it->second.ready) return;  // sent again when the node registers
  SendStopTo(it->second.peer, job.name, r.name, r.attempt, reason);
}

void Coordinator::SendStopTo(const std::string& peer, const std::string& job,
                             const std::string& replica, int attempt, const std::string& reason) {
  wire::StopReplicaT stop;
  stop.job = job;
  stop.replica = replica;
  stop.attempt = attempt;
  stop.grace_ms = static_cast<int>(options_.stop_grace.count());
  stop.reason = reason;
  SendToAgent(peer, Encode(0, std::move(stop)));
}

void Coordinator::FinishJob(JobRecord& job, JobState state, const std::string& message) {
  job.state = state;
  job.message = message;
  job.end_time_ms = clock_->NowMs();
  AddEvent(job, std::string(wire::EnumNameJobState(state)) + ": " + message);
  StopReplicas(job, std::string("the job ended (") + wire::EnumNameJobState(state) + ")");
  active_.erase(job.seq);
  if (AnyHolding(job)) ended_holding_.insert(job.name);
  MarkDirty(job);
  JobEnded(job);
}

void Coordinator::JobEnded(const JobRecord& job) {
  if (job.study.empty()) return;
  studies_.JobEnded(job.name, job.state == JobState::SUCCEEDED, job.message, clock_->NowMs());
  RunStudies();
}

void Coordinator::MaybeFinishCancel(JobRecord& job) {
  if (job.state != JobState::CANCELLING || AnyHolding(job)) return;
  job.state = JobState::CANCELLED;
  job.message = "cancelled";
  job.end_time_ms = clock_->NowMs();
  AddEvent(job, "CANCELLED: every replica stopped");
  active_.erase(job.seq);
  MarkDirty(job);
  JobEnded(job);
}

void Coordinator::NodeLost(NodeRecord& node, const std::string& why) {
  node.ready = false;
  spdlog::warn("node {} LOST: {}", node.node_id, why);
  for (auto& [name, job] : jobs_) {
    for (auto& r : job->replicas) {
      if (r.node_id != node.node_id || IsFinal(r.state)) continue;
      if (r.stop_requested) {
        SetReplicaState(r, ReplicaState::STOPPED, "its node was lost while stopping: " + why);
      } else {
        SetReplicaState(r, ReplicaState::LOST, why);
      }
      MarkDirty(*job);
      OnReplicaEnded(*job, r);
    }
  }
  schedule_needed_ = true;
}

void Coordinator::Launch(JobRecord& job, ReplicaRecord& r) {
  const WorkerPoolSpec& pool = job.PoolOf(r);
  ClusterEnvInput in;
  in.job_name = job.name;
  in.trial_id = job.trial_id;
  in.output_dir = job.output_dir;
  in.role = r.role;
  in.index = r.index;
  in.gpus = r.gpus;
  in.master_port = job.master_port;
  in.bootstrap_port = job.bootstrap_port;
  int local_rank = 0;
  for (const auto& other : job.replicas) {
    auto nit = nodes_.find(other.node_id);
    in.replicas.push_back(ReplicaEndpoint{other.role, other.index,
                                          nit == nodes_.end() ? other.node_id : nit->second.address,
                                          other.port});
    if (&other == &r) continue;
    bool trains = other.role == Role::kChief || other.role == Role::kWorker;
    if (trains && other.node_id == r.node_id) ++in.local_world_size;  // starts at 1: r itself
    if (trains && other.node_id == r.node_id && &other < &r) ++local_rank;
  }
  in.local_rank = local_rank;
  std::map<std::string, std::string> env = RenderClusterEnv(in);

  wire::LaunchReplicaT launch;
  launch.job = job.name;
  launch.replica = r.name;
  launch.role = std::string(RoleName(r.role));
  launch.index = r.index;
  launch.attempt = r.attempt;
  if (pool.process) {
    launch.command = pool.process->command;
    launch.command.insert(launch.command.end(), pool.process->args.begin(),
                          pool.process->args.end());
    for (const auto& [k, v] : pool.process->env) env[k] = v;
  } else if (pool.container) {
    launch.container = std::make_unique<wire::ContainerSpecT>();
    launch.container->image = pool.container->image;
    launch.command = pool.container->command;
    launch.command.insert(launch.command.end(), pool.container->args.begin(),
                          pool.container->args.end());
    for (const auto& [k, v] : pool.container->env) env[k] = v;
  }
  for (const auto& [k, v] : env) {
    auto kv = std::make_unique<wire::KeyValueT>();
    kv->key = k;
    kv->value = v;
    launch.env.push_back(std::move(kv));
  }
  launch.gpus = r.gpus;
  launch.cpus = pool.resources.cpus;
  launch.memory_mb = pool.resources.memory_mb;
  launch.builtin = std::string(BuiltinName(pool.builtin));
  launch.checkpoint_dir = CheckpointDir(job.output_dir, job.trial_id);
  auto nit = nodes_.find(r.node_id);
  if (nit != nodes_.end()) SendToAgent(nit->second.peer, Encode(0, std::move(launch)));
}

// ---- timers ---------------------------------------------------------------------------------

void Coordinator::Tick() {
  int64_t now = clock_->NowMs();
  CheckNodes(now);
  bool periodic = now - last_periodic_ms_ >= kPeriodicMs;
  if (periodic) {
    last_periodic_ms_ = now;
    CheckJobs(now);
  }
  if (schedule_needed_ || periodic) ScheduleRound();
  if (now - last_stats_log_ms_ >= 5000) {
    last_stats_log_ms_ = now;
    spdlog::debug("scheduler stats: rounds={} last_round_us={} max_round_us={} last_round_cpu_us={} "
                  "max_round_cpu_us={} queued={} "
                  "active_jobs={} jobs={} nodes={} messages={}",
                  stats_.schedule_rounds, stats_.last_round_us, stats_.max_round_us,
                  stats_.last_round_cpu_us, stats_.max_round_cpu_us,
                  stats_.last_round_queued, active_.size(), jobs_.size(), nodes_.size(),
                  stats_.messages);
  }
}

void Coordinator::CheckNodes(int64_t now) {
  for (auto& [id, node] : nodes_) {
    if (node.ready && now - node.last_heartbeat_ms > options_.heartbeat_timeout.count()) {
      NodeLost(node, "no heartbeat for " + FormatDuration(now - node.last_heartbeat_ms) +
                         " (timeout " + FormatDuration(options_.heartbeat_timeout.count()) + ")");
    }
  }
}

void Coordinator::CheckJobs(int64_t now) {
  bool grace_over = now - started_ms_ > options_.heartbeat_timeout.count();
  std::vector<JobRecord*> jobs;
  for (auto& [seq, job] : active_) jobs.push_back(job);
  for (JobRecord* job : jobs) {
    if (job->finished()) continue;
    if (grace_over) {
      for (auto& r : job->replicas) {
        if (!r.placed() || IsFinal(r.state) || nodes_.count(r.node_id)) continue;
        SetReplicaState(r, r.stop_requested ? ReplicaState::STOPPED : ReplicaState::LOST,
                        "node " + r.node_id + " did not re-register after the coordinator restarted");
        MarkDirty(*job);
        OnReplicaEnded(*job, r);
        if (job->finished()) break;
      }
    }
    if (job->finished()) continue;
    int64_t timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
                          job->spec.scheduling.timeout)
                          .count();
    if (job->start_time_ms > 0 && job->state != JobState::CANCELLING &&
        now - job->start_time_ms > timeout) {
      FinishJob(*job, JobState::FAILED, "timed out after " + FormatDuration(timeout));
    }
  }
  if (grace_over) {
    for (const auto& name : ended_holding_) {
      auto jit = jobs_.find(name);
      if (jit == jobs_.end()) continue;
      JobRecord* job = jit->second.get();
      for (auto& r : job->replicas) {
        if (r.placed() && !IsFinal(r.state) && !nodes_.count(r.node_id)) {
          SetReplicaState(r, ReplicaState::STOPPED, "its node did not re-register");
          MarkDirty(*job);
        }
      }
    }
  }
}

ClusterView Coordinator::BuildView(std::map<std::string, int>* node_index) const {
  ClusterView view(options_.port_min, options_.port_max);
  // Replica ports are unique across the cluster; a port something listens on at any node is
  // never handed out (the replica placed there would fail to bind it).
  for (const auto& [id, n] : nodes_) {
    if (!n.ready) continue;
    for (int port : n.listening_ports) view.MarkPortUsed(port);
  }
  for (const auto& [id, n] : nodes_) {
    if (!n.ready || n.draining) continue;
    NodeFree f;
    f.node_id = id;
    for (const auto& g : n.gpus) f.free_gpus.push_back(g.index);
    std::sort(f.free_gpus.begin(), f.free_gpus.end());
    f.free_cpus = n.cpus;
    f.free_memory_mb = n.memory_mb;
    f.memory_unlimited = n.memory_mb <= 0;
    (*node_index)[id] = static_cast<int>(view.nodes.size());
    view.nodes.push_back(std::move(f));
  }
  auto account = [&](const JobRecord& job) {
    bool any = false;
    for (const auto& r : job.replicas) {
      if (!HoldsResources(r)) continue;
      any = true;
      view.MarkPortUsed(r.port);
      auto it = node_index->find(r.node_id);
      if (it == node_index->end()) continue;
      NodeFree& f = view.nodes[static_cast<size_t>(it->second)];
      for (int g : r.gpus) {
        auto pos = std::find(f.free_gpus.begin(), f.free_gpus.end(), g);
        if (pos != f.free_gpus.end()) f.free_gpus.erase(pos);
      }
      const Resources& res = job.PoolOf(r).resources;
      f.free_cpus -= res.cpus;
      f.free_memory_mb -= res.memory_mb;
    }
    if (any || job.state == JobState::PENDING || job.state == JobState::RUNNING) {
      view.MarkPortUsed(job.master_port);
      view.MarkPortUsed(job.bootstrap_port);
    }
  };
  for (const auto& [seq, job] : active_) account(*job);
  for (auto it = ended_holding_.begin(); it != ended_holding_.end();) {
    auto jit = jobs_.find(*it);
    if (jit == jobs_.end() || !AnyHolding(*jit->second)) {
      it = ended_holding_.erase(it);
      continue;
    }
    account(*jit->second);
    ++it;
  }
  return view;
}

void Coordinator::ScheduleRound() {
  schedule_needed_ = false;
  auto t0 = std::chrono::steady_clock::now();
  int64_t cpu0 = ThreadCpuUs();
  int64_t now = clock_->NowMs();
  std::map<std::string, int> node_index;
  ClusterView view = BuildView(&node_index);
  auto node_name = [&](int i) { return view.nodes[static_cast<size_t>(i)].node_id; };

  // 1. Replicas of running jobs waiting to be placed again (restarts) come first.
  for (auto& [seq, job] : active_) {
    if (job->state != JobState::PENDING && job->state != JobState::RUNNING) continue;
    for (auto& r : job->replicas) {
      if (r.placed() || IsFinal(r.state) || !r.launched) continue;
      auto pref = node_index.find(r.last_node);
      auto slot = Scheduler::PlaceOne(DemandOf(*job, r),
                                      pref == node_index.end() ? -1 : pref->second, view);
      if (!slot) {
        if (r.message != "waiting for resources to restart") {
          r.message = "waiting for resources to restart";
          MarkDirty(*job);
        }
        continue;
      }
      r.node_id = node_name(slot->node);
      r.gpus = slot->gpus;
      r.port = slot->port;
      ++r.attempt;
      SetReplicaState(r, ReplicaState::PENDING, "launch sent");
      AddEvent(*job, r.name + " attempt " + std::to_string(r.attempt) + " placed on " +
                         r.node_id);
      Launch(*job, r);
    }
  }

  // 2. Queued jobs, in submit order.
  std::vector<JobRecord*> queued;
  std::vector<JobRequest> requests;
  queued.reserve(active_.size());
  requests.reserve(active_.size());
  for (auto& [seq, job] : active_) {
    if (job->state != JobState::QUEUED) continue;
    JobRequest req;
    req.name = job->name;
    req.waiting_since_ms = job->queued_since_ms;
    req.schedulable = !AnyHolding(*job);
    req.shared_replicas = &job->demands;
    queued.push_back(job);
    requests.push_back(std::move(req));
  }
  ScheduleResult result = scheduler_.Schedule(requests, view, now);
  for (const JobPlacement& p : result.placed) {
    JobRecord& job = *queued[p.request];
    job.master_port = p.master_port;
    job.bootstrap_port = p.bootstrap_port;
    std::set<std::string> used_nodes;
    for (size_t i = 0; i < job.replicas.size(); ++i) {
      ReplicaRecord& r = job.replicas[i];
      const ReplicaSlot& s = p.replicas[i];
      if (r.launched) ++r.attempt;
      r.launched = true;
      r.node_id = node_name(s.node);
      r.last_node = r.node_id;
      r.gpus = s.gpus;
      r.port = s.port;
      r.exit_code = -1;
      r.signal = 0;
      r.stop_requested = false;
      SetReplicaState(r, ReplicaState::PENDING, "launch sent");
      used_nodes.insert(r.node_id);
    }
    job.state = JobState::PENDING;
    job.message = "launching " + std::to_string(job.replicas.size()) + " replicas";
    if (job.start_time_ms == 0) job.start_time_ms = now;
    std::string where;
    for (const auto& n : used_nodes) where += (where.empty() ? "" : ", ") + n;
    AddEvent(job, "placed on " + where + "; waited " +
                      FormatDuration(now - job.queued_since_ms) + " in the queue");
    for (auto& r : job.replicas) Launch(job, r);
  }
  if (!result.starving_job.empty()) {
    auto it = jobs_.find(result.starving_job);
    std::string msg = "waiting for resources; later jobs are held back for it (waited longer "
                      "than the starvation limit)";
    if (it != jobs_.end() && it->second->message != msg) {
      it->second->message = msg;
      MarkDirty(*it->second);
    }
  }
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::steady_clock::now() - t0)
                .count();
  if (us > 50'000) {
    spdlog::warn("scheduling round took {} ms ({} queued jobs, {} nodes)", us / 1000,
                 requests.size(), view.nodes.size());
  }
  int64_t cpu_us = ThreadCpuUs() - cpu0;
  stats_.last_round_cpu_us = cpu_us;
  stats_.max_round_cpu_us = std::max(stats_.max_round_cpu_us, cpu_us);
  ++stats_.schedule_rounds;
  stats_.last_round_us = us;
  stats_.max_round_us = std::max(stats_.max_round_us, static_cast<int64_t>(us));
  stats_.last_round_queued = requests.size();
}

}  // namespace cohort::coordinator
