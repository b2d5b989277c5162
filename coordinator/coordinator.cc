#include "coordinator/coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <utility>

#include "common/wire_json.h"
#include "common/zmq_calls.h"
#include "coordinator/job_array.h"
#include "coordinator/job_notice.h"
#include "coordinator/launch_plan.h"
#include "coordinator/placement_round.h"

namespace cohort::coordinator {
namespace {

constexpr int64_t kPeriodicMs = 1000;

JobControllerOptions ControllerOptions(const CoordinatorOptions& options, const NodeRegistry& nodes,
                                       int64_t started_ms) {
  JobControllerOptions o;
  o.default_output_base = DefaultJobOutputBase(options);
  o.checked_output_root = options.output_root;
  o.heartbeat_timeout_ms = options.heartbeat_timeout.count();
  o.heartbeat_interval_ms = nodes.heartbeat_interval_ms();
  o.fence_after_ms = options.fence_after.count();
  o.fence_grace_ms = options.FenceGrace().count();
  o.started_ms = started_ms;
  return o;
}

// Client requests that change nothing. When their pass fails to commit they are answered again
// from the restored memory instead of being refused with the pass's writes. A read left out of
// this list is only refused in such a pass, as a write is.
bool IsRead(wire::Body type) {
  switch (type) {
    case wire::Body::GetJob:
    case wire::Body::ListJobs:
    case wire::Body::ListNodes:
    case wire::Body::ListQueues:
    case wire::Body::GetVersion:
    case wire::Body::GetLogs:
    case wire::Body::GetStudy:
    case wire::Body::ListStudies:
    case wire::Body::GetJobMetrics:
    case wire::Body::GetUsage:
      return true;
    default:
      return false;
  }
}

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options, Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      backups_(StateBackupOptions{options_.backup_dir, options_.backup_every.count(),
                                  options_.backup_keep},
               clock->NowMs()),
      logs_(options_.state_dir + "/logs"),
      storage_(options_.output_root),
      scheduler_(SchedulerOptions{options_.starvation_limit.count()}),
      nodes_(options_.heartbeat_timeout.count()),
      jobs_(ControllerOptions(options_, nodes_, clock->NowMs()), &nodes_),
      studies_(DefaultStudyOutputBase(options_)),
      client_service_(
          jobs_, nodes_, studies_, logs_, outbox_,
          ClientServiceOptions{options_.max_spec_bytes, options_.port_min, options_.port_max,
                               clock->NowMs() + options_.heartbeat_timeout.count(),
                               &options_.queues, Permissions(options_.admins)},
          [this] { study_runner_.Run(clock_->NowMs()); },
          [this](const JobQuery& query) { return store_->ListJobs(query); }),
      admin_service_(jobs_, nodes_, studies_, client_service_, outbox_,
                     Permissions(options_.admins), [this] { study_runner_.Run(clock_->NowMs()); }),
      agent_service_(jobs_, nodes_, studies_, logs_, outbox_,
                     static_cast<int>(options_.stop_grace.count()), options_.fence_after.count(),
                     options_.FenceGrace().count(), !options_.insecure,
                     [this] { study_runner_.Run(clock_->NowMs()); }) {
  WatchdogOptions watchdog;
  for (const QueueDef& queue : options_.queues.queues()) {
    if (queue.gpu_idle_limit_ms > 0) {
      watchdog.gpu_idle_limit_ms[queue.name] = queue.gpu_idle_limit_ms;
    }
  }
  watchdog_ = Watchdog(std::move(watchdog));
  agent_service_.SetWatchdog(&watchdog_);
  client_service_.SetWatchdog(&watchdog_);
  client_service_.SetExecRelay(&exec_relay_);
  client_service_.SetStackDumper(
      [this](const JobRecord& job, const ReplicaRecord& r, const std::string& reason) {
        return SendDumpStacks(job, r, reason, clock_->NowMs());
      });
  client_service_.SetPreviewer([this](std::vector<JobRecord>& drafts, int64_t now) {
    return PreviewPlacement(jobs_, nodes_, scheduler_, options_.queues, options_.port_min,
                            options_.port_max, drafts, now,
                            ElasticOptions{true, options_.heartbeat_timeout.count()});
  });
  agent_service_.SetExecRelay(&exec_relay_);
  admin_service_.SetStateBackups(&backups_);
  agent_service_.SetUsageTracker(&usage_);
  client_service_.SetUsageTracker(&usage_);
  nodes_.SetStorageProbe(&storage_);
}

Coordinator::~Coordinator() {
  // Sockets close before the context (and the ZAP handler) go away.
  client_.reset();
  agent_.reset();
  zap_.reset();
}

StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(const CoordinatorOptions& options,
                                                           Clock* clock, zmq::context_t* context) {
  std::unique_ptr<Coordinator> c(new Coordinator(options, clock));
  if (context == nullptr) {
    c->owned_context_ = std::make_unique<zmq::context_t>(1);
    context = c->owned_context_.get();
  }
  c->context_ = context;
  c->started_ms_ = clock->NowMs();
  c->last_periodic_ms_ = c->started_ms_;
  COHORT_RETURN_IF_ERROR(c->Recover());

  SocketSecurity client_sec, agent_sec;
  if (options.insecure) {
    spdlog::warn(
        "--insecure: client and agent endpoints are PLAINTEXT and unauthenticated; "
        "use only on a trusted local network");
  } else {
    auto keys = LoadOwnKeys(options.curve_key);
    if (!keys.ok()) {
      return keys.status().WithContext("CURVE key (--key-file; or run with --insecure)");
    }
    COHORT_ASSIGN_OR_RETURN(
        c->zap_, ZapAuthenticator::Start(*context, {{"clients", options.client_keys_dir},
                                                    {"agents", options.agent_keys_dir}}));
    c->peer_keys_ = std::make_unique<PeerKeys>(std::map<std::string, std::string>{
        {"clients", options.client_keys_dir}, {"agents", options.agent_keys_dir}});
    client_sec = SocketSecurity{false, *keys, "", "clients"};
    agent_sec = SocketSecurity{false, *keys, "", "agents"};
  }
  auto client = RouterSocket::Bind(*context, options.client_endpoint, client_sec);
  if (!client.ok()) return client.status().WithContext("client endpoint");
  c->client_ = std::make_unique<RouterSocket>(std::move(*client));
  auto agent = RouterSocket::Bind(*context, options.agent_endpoint, agent_sec);
  if (!agent.ok()) return agent.status().WithContext("agent endpoint");
  c->agent_ = std::make_unique<RouterSocket>(std::move(*agent));
  auto http_endpoint = ParseHttpEndpoint(options.http_endpoint);
  if (!http_endpoint.ok()) return http_endpoint.status().WithContext("--http-endpoint");
  if (http_endpoint->enabled) {
    auto http = CoordinatorHttp::Start(*http_endpoint, options.http_token);
    if (http.ok()) {
      c->http_ = std::move(*http);
      c->PublishSnapshot(clock->NowMs());
    } else if (options.http_endpoint_explicit ||
               http.status().code() == StatusCode::kInvalidArgument) {
      return http.status().WithContext("--http-endpoint");
    } else {
      spdlog::warn("HTTP endpoint off (/metrics, dashboard): {}", http.status().ToString());
    }
  }
  if (!options.notify_url.empty()) {
    COHORT_ASSIGN_OR_RETURN(WebhookUrl url, ParseWebhookUrl(options.notify_url));
    NotifierOptions notify;
    notify.url = std::move(url);
    notify.ca_file = options.notify_ca_file;
    spdlog::info("notify: job ends are POSTed to {}", notify.url.origin);
    c->notifier_ = std::make_unique<Notifier>(std::move(notify));
  }
  spdlog::info("coordinator: clients on {}, agents on {}, HTTP on {}, state in {}",
               c->client_endpoint(), c->agent_endpoint(),
               c->http_ ? c->http_->url() : std::string("none"), options.state_dir);
  return c;
}

// ---- recovery -------------------------------------------------------------------------------

Status Coordinator::Recover() {
  StateStoreOptions store_options;
  store_options.accept_damaged_state = options_.accept_damaged_state;
  COHORT_ASSIGN_OR_RETURN(store_, OpenStateStore(options_.state_dir, store_options));
  COHORT_ASSIGN_OR_RETURN(StoredState state, store_->Load());
  std::vector<std::string> bad_studies;
  for (const std::string& record : state.studies) {
    auto study = studies_.Replay(record);
    if (!study.ok() || !*study) {
      bad_studies.push_back(study.ok() ? "a stored study record is not a study"
                                       : study.status().message());
    }
  }
  if (!bad_studies.empty()) {
    if (!options_.accept_damaged_state) {
      return DataLoss("a stored study cannot be rebuilt: " + bad_studies.front() +
                      ". The coordinator did not start; start with --accept-damaged-state to go "
                      "on without it");
    }
    for (const auto& why : bad_studies) spdlog::error("--accept-damaged-state: study: {}", why);
  }
  for (const TrainingMetric& m : state.training_metrics) training_.Add(m);
  nodes_.RestoreSettings(state.node_settings);
  nodes_.RestoreEvents(std::move(state.node_events));
  size_t jobs = state.jobs.size();
  for (JobRecord& job : state.jobs) jobs_.Restore(std::move(job));
  jobs_.FinishRestore(clock_->NowMs());
  spdlog::info("state store: recovered {} jobs ({} unfinished) and {} studies from {}", jobs,
               jobs_.active().size(), studies_.size(), store_->Describe());
  if (!state.dropped.empty()) {
    spdlog::error(
        "--accept-damaged-state: {} jobs or studies dropped or kept in part (listed "
        "above)",
        state.dropped.size());
  }
  study_runner_.Recover(clock_->NowMs());
  return Status::Ok();
}

// ---- loop -----------------------------------------------------------------------------------

Status Coordinator::RunOnce(std::chrono::milliseconds poll_timeout) {
  zmq::pollitem_t items[2] = {{client_->socket().handle(), 0, ZMQ_POLLIN, 0},
                              {agent_->socket().handle(), 0, ZMQ_POLLIN, 0}};
  try {
    PollFrames(items, 2, poll_timeout);
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("poll: ") + e.what());
  }
  // Agents first: their updates free resources that submissions in the same pass may use.
  // Each socket gives at most kMaxMessagesPerPass messages a pass, good or bad, and each one is
  // read and handled once, so a flood of anything cannot keep the pass from its timers. Every
  // message read counts in its peer's budget for the pass; requests within it are answered at
  // Commit, requests beyond it are refused unprocessed, and bad frames beyond it are dropped.
  for (bool agent : {true, false}) {
    RouterSocket& socket = agent ? *agent_ : *client_;
    std::map<std::string, int> used;
    for (size_t i = 0; i < kMaxMessagesPerPass; ++i) {
      auto in = socket.Next();
      if (!in.ok()) return in.status();
      if (!in->has_value()) break;
      Incoming& frame = **in;
      ++stats_.messages;
      bool within_budget = ++used[frame.peer] <= options_.max_requests_per_peer;
      if (!frame.message.ok()) {
        ++stats_.bad_frames;
        bad_frames_.Log("{} endpoint: {} frame from peer {}: {}", agent ? "agent" : "client",
                        within_budget ? "refusing a bad" : "dropping a bad", PeerName(frame.peer),
                        frame.message.status().ToString());
        if (within_budget) outbox_.To(agent, frame.peer, EncodeError(0, frame.message.status()));
        continue;
      }
      RoutedMessage m{std::move(frame.peer), std::move(*frame.message), std::move(frame.identity)};
      int64_t now = clock_->NowMs();
      ++counters_.requests[{agent ? "agent" : "client", wire::EnumNameBody(m.message.type())}];
      if (!within_budget) {
        RefuseOverLimit(m, agent);
      } else if (!KeyStillListed(m, agent)) {
        continue;
      } else if (agent) {
        agent_service_.Handle(m, now);
      } else {
        HandleClient(m, now);
        if (IsRead(m.message.type())) pass_reads_.push_back(std::move(m));
      }
    }
  }
  Tick();
  ExecuteCommands();
  COHORT_RETURN_IF_ERROR(Commit());
  StepBackups(clock_->NowMs());
  if (http_) PublishSnapshot(clock_->NowMs());
  return Status::Ok();
}

void Coordinator::StepBackups(int64_t now) {
  const std::vector<StateBackupResult> ended = backups_.Step(*store_, now);
  admin_service_.BackupsEnded(ended);
  for (const StateBackupResult& r : ended) {
    if (r.ok) {
      spdlog::info("state backup: wrote {} ({} bytes: {} jobs, {} studies) in {} ms; {} kept",
                   r.path, r.bytes, r.info.jobs, r.info.studies, r.ended_ms - r.started_ms, r.kept);
    } else {
      spdlog::error("state backup into {} failed: {}; the next try in {} s", options_.backup_dir,
                    WithReadOnlyPathHint(r.error),
                    std::max<int64_t>(0, backups_.next_due_ms() - now) / 1000);
    }
  }
}

void Coordinator::HandleClient(const RoutedMessage& m, int64_t now) {
  if (observability_service_.Handle(m, now) || admin_service_.Handle(m, now)) return;
  client_service_.Handle(m, now);
}

Status Coordinator::Run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    // A backup being copied moves on every pass: no pass waits for a message meanwhile.
    COHORT_RETURN_IF_ERROR(RunOnce(std::chrono::milliseconds(backups_.copying() ? 0 : 50)));
  }
  LogStats(true);
  return Status::Ok();
}

void Coordinator::Tick() {
  int64_t now = clock_->NowMs();
  // After a failed commit the timers wait for their retry (RollBack): what they would change
  // cannot be stored yet, and every pass they change something in would fail to commit.
  if (now < store_retry_at_ms_) return;
  if (std::exchange(redo_after_rollback_, false)) RedoAfterRollBack(now);
  for (const auto& [node_id, why] : nodes_.CheckLost(now)) {
    const NodeRecord& node = *nodes_.Find(node_id);
    jobs_.NodeLost(node_id, why, now, node.silent_since_ms(), node.last_contact_ms());
  }
  // Keys are re-checked every half heartbeat interval, so that with the pass it waits for (at
  // most the poll timeout) a removed key ends its session within one interval.
  if (peer_keys_ && now - last_key_check_ms_ >= nodes_.heartbeat_interval_ms() / 2) {
    last_key_check_ms_ = now;
    EndRevokedSessions(now);
  }
  jobs_.ReleaseVerdicts(now);
  exec_relay_.Check(now);
  RunWatchdog(now);
  bool periodic = now - last_periodic_ms_ >= kPeriodicMs;
  if (periodic) {
    last_periodic_ms_ = now;
    bad_frames_.Flush();
    slow_commits_.Flush();
    jobs_.CheckTimeouts(now, now - started_ms_ > options_.heartbeat_timeout.count());
    admin_service_.ApplyRetention(now, options_.job_retention.count());
    usage_.Sweep(now);
  }
  // Jobs that ended tell their studies, which may submit or cancel trial jobs.
  ExecuteCommands();
  if (jobs_.TakeScheduleNeeded() || periodic) ScheduleRound(now);
  if (now - last_stats_log_ms_ >= 5000) {
    last_stats_log_ms_ = now;
    LogStats(false);
  }
}

void Coordinator::RunWatchdog(int64_t now) {
  Watchdog::Checked checked = watchdog_.Check(
      [this](const std::string& name) -> const JobRecord* { return jobs_.FindJob(name); }, now);
  for (const auto& [name, note] : checked.notes) {
    if (JobRecord* job = jobs_.FindJob(name)) jobs_.Note(*job, note, now);
  }
  for (const HangVerdict& hang : checked.hangs) {
    JobRecord* job = jobs_.FindJob(hang.job);
    if (job == nullptr) continue;
    // The dumps go out before the stops the restart sends: the agent takes the stacks first.
    for (const std::string& name : hang.dump) {
      const ReplicaRecord* r = job->FindReplica(name);
      if (r != nullptr && SendDumpStacks(*job, *r, hang.message, now)) {
        watchdog_.StacksAsked(job->name, r->name, r->attempt, now);
      }
    }
    jobs_.Hang(*job, hang.stuck, hang.message, now, hang.fail_reason);
  }
}

bool Coordinator::SendDumpStacks(const JobRecord& job, const ReplicaRecord& r,
                                 const std::string& reason, int64_t now) {
  const NodeRecord* node = nodes_.FindReady(r.node_id);
  if (node == nullptr) return false;
  agent_service_.SendDumpStacks(node->peer, job.name, r.name, r.attempt, reason);
  nodes_.NoteSent(node->node_id, now);
  return true;
}

void Coordinator::ScheduleRound(int64_t now) {
  // Elastic jobs are resized only once the agents had a heartbeat timeout to register.
  const int64_t settle_ms = options_.heartbeat_timeout.count();
  PlacementRoundStats round = RunPlacementRound(
      jobs_, nodes_, scheduler_, options_.queues, options_.port_min, options_.port_max, now,
      ElasticOptions{now - started_ms_ > settle_ms, settle_ms});
  if (round.wall_us > 50'000) {
    spdlog::warn("scheduling round took {} ms ({} queued jobs, {} nodes)", round.wall_us / 1000,
                 round.queued, round.nodes);
  }
  counters_.round_seconds.Observe(static_cast<double>(round.wall_us) / 1e6);
  stats_.NoteRound(round.wall_us, round.cpu_us, round.queued);
}

void Coordinator::ExecuteCommands() {
  // Ending a job can make a study submit or cancel jobs, which issue commands in turn.
  while (true) {
    ControllerCommands commands = jobs_.TakeCommands();
    if (commands.empty()) return;
    const int64_t now = clock_->NowMs();
    for (const StopCommand& stop : commands.stop) {
      // A node that is not ready is told when it registers again (reconciliation).
      if (const NodeRecord* node = nodes_.FindReady(stop.node_id)) {
        agent_service_.SendStop(node->peer, stop.job, stop.replica, stop.attempt, stop.reason);
        nodes_.NoteSent(stop.node_id, now);
      }
    }
    for (const LaunchCommand& launch : commands.launch) {
      JobRecord* job = jobs_.FindJob(launch.job);
      if (job == nullptr) continue;
      const ReplicaRecord* r = job->FindReplica(launch.replica);
      const NodeRecord* node = r == nullptr ? nullptr : nodes_.Find(r->node_id);
      if (node == nullptr || node->peer.empty()) continue;
      auto address_of = [this](const std::string& id) { return nodes_.AddressOf(id); };
      auto mig_nodes = [this](const std::string& id) {
        const NodeRecord* n = nodes_.Find(id);
        return n != nullptr && std::any_of(n->gpus.begin(), n->gpus.end(), [](const auto& g) {
                 return g.uuid.rfind("MIG-", 0) == 0;
               });
      };
      wire::LaunchReplicaT plan = PlanLaunch(*job, *r, address_of, mig_nodes);
      plan.others_stopped = launch.others_stopped;
      outbox_.ToAgent(node->peer, Encode(0, plan));
      nodes_.NoteSent(node->node_id, now);
    }
    if (notifier_) QueueNotices(commands, now);
    for (const std::string& name : commands.ended) {
      if (const JobRecord* job = jobs_.FindJob(name)) study_runner_.JobEnded(*job, now);
    }
  }
}

void Coordinator::QueueNotices(const ControllerCommands& commands, int64_t now) {
  // An array's tasks and a study's trials are told as jobs only with --notify-on tasks; else
  // their array and their study are told as a whole (a 1000-task array: one notice, not 1001).
  auto told_as_job = [&](const JobRecord& job) {
    return options_.notify_tasks || (!job.spec.IsArrayTask() && job.study.empty());
  };
  if (options_.notify_starts) {
    const std::set<std::string> started(commands.started.begin(), commands.started.end());
    std::set<std::string> arrays_started;
    for (const std::string& name : commands.started) {
      const JobRecord* job = jobs_.FindJob(name);
      if (job == nullptr) continue;
      if (told_as_job(*job)) pending_notices_.push_back(JobStartedNotice(*job, now));
      if (!job->spec.IsArrayTask()) continue;
      // The array's first task to run: no other task ran before this pass. Every task exists
      // from the array's submission and only an ended one can be deleted, so an array short of
      // tasks was under way already.
      const std::string array = job->spec.ArrayName();
      if (!arrays_started.insert(array).second) continue;
      const std::vector<std::pair<int, std::string>>& task_names = jobs_.ArrayTasks(array);
      std::vector<const JobRecord*> tasks;
      bool ran_before = task_names.size() < job->spec.scheduling.array.indexes.size();
      for (const auto& [index, task_name] : task_names) {
        const JobRecord* task = jobs_.FindJob(task_name);
        if (task == nullptr) continue;
        tasks.push_back(task);
        ran_before |= started.count(task_name) == 0 &&
                      (task->first_running_ms > 0 || (task->finished() && task->start_time_ms > 0));
      }
      if (!ran_before) pending_notices_.push_back(ArrayStartedNotice(array, tasks, *job, now));
    }
  }
  if (options_.notify_restarts) {
    for (const auto& [name, event] : commands.restarted) {
      const JobRecord* job = jobs_.FindJob(name);
      if (job != nullptr && told_as_job(*job)) {
        pending_notices_.push_back(JobRestartedNotice(*job, event));
      }
    }
  }
  if (!options_.notify_ends) return;
  std::set<std::string> arrays;
  for (const std::string& name : commands.ended) {
    const JobRecord* job = jobs_.FindJob(name);
    if (job == nullptr) continue;
    if (told_as_job(*job)) pending_notices_.push_back(JobEndedNotice(*job));
    if (job->spec.IsArrayTask()) arrays.insert(job->spec.ArrayName());
  }
  // An array ends with its last task (ArrayTally's rule): one notice, however many of its tasks
  // ended at once.
  for (const std::string& array : arrays) {
    std::vector<const JobRecord*> tasks;
    ArrayTally tally;
    for (const auto& [index, task] : jobs_.ArrayTasks(array)) {
      tasks.push_back(jobs_.FindJob(task));
      tally.Add(*tasks.back());
    }
    if (tally.finished()) pending_notices_.push_back(ArrayEndedNotice(array, tasks));
  }
}

Status Coordinator::Commit() {
  std::vector<RoutedMessage> reads = std::exchange(pass_reads_, {});
  // The studies the pass ended (a last trial's end, `cohort cancel STUDY`), after their jobs'.
  for (const std::string& study : studies_.TakeEnded()) {
    if (!notifier_ || !options_.notify_ends) continue;
    if (auto info = studies_.Info(study); info.ok()) {
      pending_notices_.push_back(StudyEndedNotice(*info));
    }
  }
  StateChanges changes;
  changes.study_records = studies_.TakeJournalRecords();
  changes.training_metrics = agent_service_.TakeTrainingMetrics();
  changes.node_settings = nodes_.PendingSettings();
  changes.node_events = nodes_.PendingEvents();
  changes.forgotten_nodes = nodes_.ForgottenNodes();
  changes.deleted_jobs = jobs_.TakeDeleted();
  std::set<std::string> dirty = jobs_.TakeDirty();
  for (const auto& name : dirty) {
    if (const JobRecord* job = jobs_.FindJob(name)) changes.jobs.push_back(job);
  }
  const auto commit_start = std::chrono::steady_clock::now();
  Status stored = store_->Commit(changes);
  if (!changes.empty()) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - commit_start).count();
    counters_.commit_seconds.Observe(seconds);
    if (seconds >= kSlowCommitSeconds) {
      slow_commits_.Log(
          "state store: a commit took {:.1f} s (the storage's fsync); every reply and "
          "heartbeat answer of that loop pass waited for it",
          seconds);
    }
  }
  if (!stored.ok()) return RollBack(dirty, stored, reads);
  // The ends are stored: their notices may go. (A pass rolled back ends its jobs again later.)
  if (notifier_ && options_.notify_nodes) {
    for (const auto& [node, event] : changes.node_events) {
      pending_notices_.push_back(NodeEventNotice(node, event));
    }
  }
  if (notifier_ && !pending_notices_.empty()) notifier_->Post(std::exchange(pending_notices_, {}));
  for (const TrainingMetric& m : changes.training_metrics) training_.Add(m);
  nodes_.SettingsStored();
  nodes_.EventsStored();
  for (const std::string& name : changes.deleted_jobs) {
    training_.Remove(name);
    if (Status gone = logs_.DeleteJob(name); !gone.ok()) spdlog::warn("{}", gone.ToString());
  }
  if (http_) snapshots_.MarkChanged(dirty);
  if (store_failing_since_ms_ >= 0 && !changes.empty()) {
    spdlog::info("state store: writes are stored again, after {} of failures",
                 FormatDuration(clock_->NowMs() - store_failing_since_ms_));
    store_failing_since_ms_ = -1;
    store_retry_at_ms_ = 0;
  }
  SendOutbox();
  return Status::Ok();
}

void Coordinator::SendOutbox() {
  for (auto& o : outbox_.Take()) {
    // Our own frames: the envelope is read without verifying it.
    const auto* envelope = wire::GetEnvelope(o.frame.data());
    if (envelope->body_type() == wire::Body::ErrorReply) {
      auto code = static_cast<StatusCode>(envelope->body_as_ErrorReply()->code());
      ++counters_.errors[{o.agent ? "agent" : "client", std::string(StatusCodeName(code))}];
    }
    Status s = (o.agent ? agent_ : client_)->Send(o.peer, std::move(o.frame));
    if (!s.ok()) {
      spdlog::debug("send to {} peer {}: {}", o.agent ? "agent" : "client", o.peer, s.ToString());
    }
  }
}

Status Coordinator::RollBack(const std::set<std::string>& dirty, const Status& cause,
                             const std::vector<RoutedMessage>& reads) {
  const int64_t now = clock_->NowMs();
  ++stats_.rolled_back;
  if (store_failing_since_ms_ < 0) {
    store_failing_since_ms_ = now;
    last_store_warning_ms_ = now;
    spdlog::error(
        "state store: a commit failed; the pass is rolled back and its requests are "
        "refused (reads are still served, writes are retried): {}",
        cause.ToString());
  } else if (now - last_store_warning_ms_ >= 10'000) {
    last_store_warning_ms_ = now;
    spdlog::error("state store: still failing after {} ({} passes rolled back): {}",
                  FormatDuration(now - store_failing_since_ms_), stats_.rolled_back,
                  cause.ToString());
  }

  // Nothing of the pass goes out: replies become errors naming the cause, and no notice.
  pending_notices_.clear();
  const std::string what = "the coordinator could not store its state (" + cause.message() +
                           "); nothing of this request was kept";
  // Agents resend what is refused so (agent/outbox.h, Outbox::Transient).
  const StatusCode code = cause.code() == StatusCode::kResourceExhausted
                              ? StatusCode::kResourceExhausted
                              : StatusCode::kUnavailable;
  const Status client_error(code,
                            what + "; reads are served and writes are retried: try again later");
  const Status agent_error(code, what + "; send it again later");
  std::set<std::pair<std::string, uint64_t>> answered_again;
  for (const RoutedMessage& read : reads)
    answered_again.emplace(read.peer, read.message.request_id());
  for (auto& o : outbox_.Take()) {
    auto m = Message::Parse(std::move(o.frame));
    if (!m.ok() || m->request_id() == 0) continue;  // launches and stops
    if (!o.agent && answered_again.count({o.peer, m->request_id()})) continue;
    Status s =
        (o.agent ? agent_ : client_)
            ->Send(o.peer, EncodeError(m->request_id(), o.agent ? agent_error : client_error));
    if (!s.ok()) spdlog::debug("send to peer {}: {}", o.peer, s.ToString());
  }

  // Memory goes back to the last commit (a job deleted in the pass is among `dirty`: read back).
  nodes_.RevertSettings();
  COHORT_ASSIGN_OR_RETURN(std::vector<JobRecord> stored, store_->LoadJobs(dirty));
  COHORT_ASSIGN_OR_RETURN(std::vector<std::string> stored_studies, store_->LoadStudies());
  // The jobs the pass did not change equal the store: moved over, not copied or re-read.
  JobController jobs(ControllerOptions(options_, nodes_, started_ms_), &nodes_);
  for (const auto& [name, job] : jobs_.jobs()) {
    if (!dirty.count(name)) jobs.Restore(std::move(*job));
  }
  for (JobRecord& job : stored) jobs.Restore(std::move(job));
  jobs.FinishRestore(now);
  jobs.CarryCountersFrom(jobs_);
  jobs_ = std::move(jobs);
  snapshots_.MarkAllChanged();
  studies_ = StudyController(DefaultStudyOutputBase(options_));
  for (const std::string& record : stored_studies) {
    auto study = studies_.Replay(record);
    if (!study.ok()) spdlog::error("state store: a study: {}", study.status().ToString());
  }
  // Memory equals the store again. The pass's reads are answered from it, as a pass of reads
  // alone would be; they change nothing, so their replies go out at once.
  for (const RoutedMessage& read : reads) HandleClient(read, now);
  SendOutbox();
  // What the coordinator would change by itself (node losses, verdicts, timeouts, placements,
  // trials) waits for the timers' next retry.
  redo_after_rollback_ = true;
  if (now >= store_retry_at_ms_) store_retry_at_ms_ = now + kPeriodicMs;
  return Status::Ok();
}

void Coordinator::RedoAfterRollBack(int64_t now) {
  // Nodes stay registered through a rollback: the losses the rolled-back passes recorded are
  // applied again, as they were recorded (replicas already LOST are left alone). A node whose
  // session was ended while it answered keeps that: its launches of the last interval ran.
  for (const auto& [node_id, node] : nodes_.nodes()) {
    if (node.ready) continue;
    jobs_.NodeLost(node_id, node.lost_why, now, node.silent_since_ms(), node.last_contact_ms());
  }
  study_runner_.Recover(now);
}

bool Coordinator::KeyStillListed(const RoutedMessage& m, bool agent) {
  if (!peer_keys_) return true;
  Status listed = peer_keys_->Check(agent ? "agents" : "clients", m.identity);
  if (listed.ok()) return true;
  ++stats_.key_refused;
  key_refusals_.Log("{} endpoint: refused a {} from peer {}: {}", agent ? "agent" : "client",
                    wire::EnumNameBody(m.message.type()), PeerName(m.peer), listed.message());
  if (m.message.type() != wire::Body::Ack && m.message.type() != wire::Body::ErrorReply) {
    outbox_.To(agent, m.peer, EncodeError(m.message.request_id(), listed));
  }
  return false;
}

void Coordinator::EndRevokedSessions(int64_t now) {
  peer_keys_->Refresh();
  std::vector<std::pair<std::string, std::string>> revoked;
  for (const auto& [id, node] : nodes_.nodes()) {
    if (!node.ready || node.key.empty()) continue;
    Status listed = peer_keys_->Check("agents", PeerIdentity{id, node.key});
    if (!listed.ok()) revoked.emplace_back(id, listed.message());
  }
  for (const auto& [id, why] : revoked) {
    if (!nodes_.EndSession(id, "its agent's key was removed: " + why, now)) continue;
    spdlog::warn("node {} LOST: its session is ended: {}", id, why);
    const NodeRecord& node = *nodes_.Find(id);
    jobs_.NodeLost(id, node.lost_why, now, node.silent_since_ms(), now);
  }
}

void Coordinator::RefuseOverLimit(const RoutedMessage& m, bool agent) {
  ++stats_.refused;
  // Answers (Ack, ErrorReply) are not requests: nothing to refuse, nothing to answer.
  if (m.message.type() == wire::Body::Ack || m.message.type() == wire::Body::ErrorReply) return;
  outbox_.To(
      agent, m.peer,
      EncodeError(m.message.request_id(),
                  ResourceExhausted("more than " + std::to_string(options_.max_requests_per_peer) +
                                    " requests outstanding from this peer; wait for the "
                                    "replies before sending more")));
}

void Coordinator::PublishSnapshot(int64_t now) {
  if (!snapshots_.Due(now)) return;
  CoordinatorCounters counters = counters_;
  counters.restarts_by_cause = jobs_.restarts_by_cause();
  counters.hangs_by_outcome = jobs_.hangs_by_outcome();
  counters.relaunches = jobs_.relaunches();
  counters.elastic_shrinks = jobs_.elastic_shrinks();
  counters.elastic_grows = jobs_.elastic_grows();
  counters.fence_held = jobs_.FenceHeldReplicas(now);
  counters.bad_frames = stats_.bad_frames;
  counters.refused = stats_.refused;
  counters.rolled_back = stats_.rolled_back;
  counters.backups = backups_.counters();
  if (notifier_) {
    const Notifier::Counters notices = notifier_->counters();
    counters.notices_by_result = {{"delivered", notices.delivered},
                                  {"retried", notices.retried},
                                  {"dropped", notices.dropped}};
    counters.notices_queued = notices.queued;
  }
  SnapshotSources sources{nodes_,      studies_,          training_, usage_, std::move(counters),
                          started_ms_, options_.state_dir};
  for (const auto& queue : client_service_.Queues().queues) {
    sources.queues.push_back(QueueToJson(*queue));
  }
  if (auto snapshot = snapshots_.Build(jobs_, sources, now)) http_->Publish(std::move(snapshot));
}

void CoordinatorStats::NoteRound(int64_t wall_us, int64_t cpu_us, size_t queued) {
  recent_round_cpu_us[schedule_rounds % kRecentRounds] = cpu_us;
  ++schedule_rounds;
  last_round_us = wall_us;
  max_round_us = std::max(max_round_us, wall_us);
  last_round_cpu_us = cpu_us;
  max_round_cpu_us = std::max(max_round_cpu_us, cpu_us);
  last_round_queued = queued;
}

int64_t CoordinatorStats::RecentRoundCpuMedianUs() const {
  const size_t n = std::min<uint64_t>(schedule_rounds, kRecentRounds);
  if (n == 0) return 0;
  std::array<int64_t, kRecentRounds> sorted = recent_round_cpu_us;
  std::nth_element(sorted.begin(), sorted.begin() + n / 2, sorted.begin() + n);
  return sorted[n / 2];
}

void Coordinator::LogStats(bool at_exit) const {
  spdlog::log(at_exit ? spdlog::level::info : spdlog::level::debug,
              "scheduler stats: rounds={} last_round_us={} max_round_us={} last_round_cpu_us={} "
              "max_round_cpu_us={} median_round_cpu_us_last{}={} queued={} active_jobs={} "
              "jobs={} nodes={} messages={} bad_frames={} refused={}",
              stats_.schedule_rounds, stats_.last_round_us, stats_.max_round_us,
              stats_.last_round_cpu_us, stats_.max_round_cpu_us, CoordinatorStats::kRecentRounds,
              stats_.RecentRoundCpuMedianUs(), stats_.last_round_queued, jobs_.active().size(),
              jobs_.jobs().size(), nodes_.nodes().size(), stats_.messages, stats_.bad_frames,
              stats_.refused);
}

}  // namespace cohort::coordinator
