#include "common/client.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>
#include <thread>
#include <utility>

#include "common/curve_keys.h"

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;

std::string TypeName(wire::Body type) { return wire::EnumNameBody(type); }

}  // namespace

std::string LocalUserName() {
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  const char* user = std::getenv("USER");
  return user != nullptr ? user : "";
}

std::string DefaultClientKeyDir() {
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.config/cohort";
  return ".cohort";
}

ClientOptions ClientOptionsFromEnvironment() {
  ClientOptions options;
  options.user = LocalUserName();
  options.key_file = DefaultClientKeyDir() + "/client.key";
  options.server_key_file = DefaultClientKeyDir() + "/coordinator.pub";
  if (const char* key = std::getenv("COHORT_KEY"); key && *key) options.key_file = key;
  if (const char* key = std::getenv("COHORT_SERVER_KEY"); key && *key) {
    options.server_key_file = key;
  }
  if (const char* endpoint = std::getenv("COHORT_COORDINATOR"); endpoint && *endpoint) {
    options.endpoint = endpoint;
  }
  if (const char* insecure = std::getenv("COHORT_INSECURE"); insecure) {
    std::string_view v(insecure);
    options.insecure = v == "1" || v == "true" || v == "yes";
  }
  return options;
}

bool IsTerminal(wire::JobState state) {
  return state == wire::JobState::SUCCEEDED || state == wire::JobState::FAILED ||
         state == wire::JobState::CANCELLED;
}

nlohmann::json JobToJson(const wire::JobInfoT& job) {
  nlohmann::json replicas = nlohmann::json::array();
  for (const auto& r : job.replicas) {
    if (!r) continue;
    replicas.push_back({{"replica", r->replica},
                        {"role", r->role},
                        {"index", r->index},
                        {"pool", r->pool},
                        {"node_id", r->node_id},
                        {"gpus", r->gpus},
                        {"state", wire::EnumNameReplicaState(r->state)},
                        {"attempt", r->attempt},
                        {"exit_code", r->exit_code},
                        {"message", r->message}});
  }
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : job.events) {
    if (e) events.push_back({{"time_ms", e->time_ms}, {"message", e->message}});
  }
  return {{"name", job.name},
          {"state", wire::EnumNameJobState(job.state)},
          {"message", job.message},
          {"create_time_ms", job.create_time_ms},
          {"start_time_ms", job.start_time_ms},
          {"end_time_ms", job.end_time_ms},
          {"restarts", job.restarts},
          {"max_restarts", job.max_restarts},
          {"output_dir", job.output_dir},
          {"trial_id", job.trial_id},
          {"study", job.study},
          {"queue", job.queue},
          {"priority", job.priority},
          {"owner", job.owner},
          {"replicas", std::move(replicas)},
          {"events", std::move(events)},
          {"stragglers", job.stragglers}};
}

nlohmann::json NodeToJson(const wire::NodeInfoT& node) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : node.gpus) {
    if (g) {
      gpus.push_back({{"index", g->index},
                      {"model", g->model},
                      {"memory_mb", g->memory_mb},
                      {"uuid", g->uuid}});
    }
  }
  return {{"node_id", node.node_id},
          {"address", node.address},
          {"state", node.state},
          {"gpus", std::move(gpus)},
          {"gpus_used", node.gpus_used},
          {"cpus", node.cpus},
          {"cpus_used", node.cpus_used},
          {"memory_mb", node.memory_mb},
          {"memory_used_mb", node.memory_used_mb},
          {"replicas", node.replicas},
          {"last_heartbeat_ms", node.last_heartbeat_ms},
          {"storage", node.storage},
          {"admin", node.admin}};
}

nlohmann::json QueueToJson(const wire::QueueInfoT& queue) {
  return {{"name", queue.name},
          {"gpu_quota", queue.gpu_quota},
          {"cpu_quota", queue.cpu_quota},
          {"weight", queue.weight},
          {"gpus_used", queue.gpus_used},
          {"cpus_used", queue.cpus_used},
          {"running", queue.running},
          {"waiting", queue.waiting},
          {"waiting_jobs", queue.waiting_jobs}};
}

nlohmann::json StudyToJson(const wire::StudyInfoT& study) {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : study.trials) {
    if (!t) continue;
    nlohmann::json parameters = nlohmann::json::object();
    for (const auto& kv : t->parameters) {
      if (kv) parameters[kv->key] = kv->value;
    }
    trials.push_back({{"id", t->id},
                      {"parameters", std::move(parameters)},
                      {"state", t->state},
                      {"final_metric", t->has_final_metric ? nlohmann::json(t->final_metric)
                                                           : nlohmann::json(nullptr)},
                      {"job", t->job},
                      {"steps", t->steps},
                      {"message", t->message}});
  }
  return {{"name", study.name},
          {"state", study.state},
          {"metric", study.metric},
          {"goal", study.goal},
          {"algorithm", study.algorithm},
          {"max_trials", study.max_trials},
          {"parallel_trials", study.parallel_trials},
          {"best_trial", study.best_trial},
          {"owner", study.owner},
          {"message", study.message},
          {"create_time_ms", study.create_time_ms},
          {"end_time_ms", study.end_time_ms},
          {"trials", std::move(trials)}};
}

bool IsStudyTerminal(const std::string& state) {
  return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED";
}

StatusOr<CoordinatorClient> CoordinatorClient::Connect(const ClientOptions& options) {
  if (options.endpoint.empty()) return InvalidArgument("coordinator endpoint is empty");
  auto context = std::make_unique<zmq::context_t>(1);
  SocketSecurity security;
  security.insecure = options.insecure;
  if (!options.insecure) {
    COHORT_ASSIGN_OR_RETURN(security,
                            CurveClientSecurity(options.key_file, options.server_key_file));
  }
  auto socket = DealerSocket::Connect(*context, options.endpoint, "", security);
  if (!socket.ok()) {
    return socket.status().WithContext("coordinator " + options.endpoint);
  }
  if (options.insecure) socket->set_claimed_user(options.user);
  return CoordinatorClient(options, std::move(context),
                           std::make_unique<DealerSocket>(std::move(*socket)));
}

StatusOr<CoordinatorClient> CoordinatorClient::Connect(const std::string& endpoint, bool insecure) {
  ClientOptions options;
  options.endpoint = endpoint;
  options.insecure = insecure;
  options.user = LocalUserName();
  return Connect(options);
}

CoordinatorClient::~CoordinatorClient() = default;

template <typename R, typename T>
StatusOr<Message> CoordinatorClient::Request(T body, std::string_view what) {
  auto reply = socket_->Call(std::move(body), options_.timeout);
  if (!reply.ok()) {
    Status s = reply.status();
    if (s.code() == StatusCode::kUnavailable) {
      return Unavailable("coordinator at " + options_.endpoint + " is unreachable (" +
                         std::string(what) + "): " + s.message());
    }
    return s;
  }
  if (reply->template As<R>() == nullptr) {
    return DataLoss(std::string(what) + ": unexpected reply " + TypeName(reply->type()) + " from " +
                    options_.endpoint);
  }
  return reply;
}

StatusOr<std::string> CoordinatorClient::Submit(const std::string& spec_yaml,
                                                std::vector<std::string>* warnings) {
  wire::SubmitJobT request;
  request.spec_yaml = spec_yaml;
  COHORT_ASSIGN_OR_RETURN(Message reply,
                          (Request<wire::SubmitJobReply>(std::move(request), "submit")));
  const auto* body = reply.As<wire::SubmitJobReply>();
  if (warnings != nullptr && body->warnings() != nullptr) {
    for (const auto* w : *body->warnings()) warnings->push_back(w->str());
  }
  return body->name() ? body->name()->str() : std::string();
}

StatusOr<wire::JobInfoT> CoordinatorClient::GetJob(const std::string& name) {
  wire::GetJobT request;
  request.name = name;
  COHORT_ASSIGN_OR_RETURN(Message reply, (Request<wire::JobInfo>(std::move(request), "get job")));
  wire::JobInfoT job;
  reply.As<wire::JobInfo>()->UnPackTo(&job);
  return job;
}

StatusOr<std::vector<wire::JobInfoT>> CoordinatorClient::ListJobs() {
  return ListJobs(wire::ListJobsT{});
}

StatusOr<std::vector<wire::JobInfoT>> CoordinatorClient::ListJobs(const wire::ListJobsT& query) {
  COHORT_ASSIGN_OR_RETURN(Message reply,
                          (Request<wire::JobList>(wire::ListJobsT(query), "list jobs")));
  wire::JobListT list;
  reply.As<wire::JobList>()->UnPackTo(&list);
  std::vector<wire::JobInfoT> jobs;
  jobs.reserve(list.jobs.size());
  for (auto& job : list.jobs) {
    if (job) jobs.push_back(std::move(*job));
  }
  return jobs;
}

StatusOr<wire::JobInfoT> CoordinatorClient::Cancel(const std::string& name) {
  wire::CancelJobT request;
  request.name = name;
  COHORT_ASSIGN_OR_RETURN(Message reply, (Request<wire::JobInfo>(std::move(request), "cancel")));
  wire::JobInfoT job;
  reply.As<wire::JobInfo>()->UnPackTo(&job);
  return job;
}

StatusOr<wire::NodeAdminReplyT> CoordinatorClient::AdminNode(const std::string& node_id,
                                                             const std::string& action) {
  wire::NodeAdminT request;
  request.node_id = node_id;
  request.action = action;
  COHORT_ASSIGN_OR_RETURN(Message reply,
                          (Request<wire::NodeAdminReply>(std::move(request), action)));
  wire::NodeAdminReplyT out;
  reply.As<wire::NodeAdminReply>()->UnPackTo(&out);
  return out;
}

Status CoordinatorClient::DeleteJob(const std::string& name) {
  wire::DeleteJobT request;
  request.name = name;
  return Request<wire::Ack>(std::move(request), "delete").status();
}

StatusOr<wire::StudyInfoT> CoordinatorClient::CancelStudy(const std::string& name) {
  wire::CancelStudyT request;
  request.name = name;
  COHORT_ASSIGN_OR_RETURN(Message reply,
                          (Request<wire::StudyInfo>(std::move(request), "cancel study")));
  wire::StudyInfoT study;
  reply.As<wire::StudyInfo>()->UnPackTo(&study);
  return study;
}

StatusOr<std::vector<wire::QueueInfoT>> CoordinatorClient::ListQueues() {
  COHORT_ASSIGN_OR_RETURN(Message reply,
                          (Request<wire::QueueList>(wire::ListQueuesT{}, "list queues")));
  wire::QueueListT list;
  reply.As<wire::QueueList>()->UnPackTo(&list);
  std::vector<wire::QueueInfoT> queues;
  queues.reserve(list.queues.size());
  for (auto& queue : list.queues) {
    if (queue) queues.push_back(std::move(*queue));
  }
  return queues;
}

StatusOr<std::vector<wire::NodeInfoT>> CoordinatorClient::ListNodes() {
  COHORT_ASSIGN_OR_RETURN(Message reply,
                          (Request<wire::NodeList>(wire::ListNodesT{}, "list nodes")));
  wire::NodeListT list;
  reply.As<wire::NodeList>()->UnPackTo(&list);
  std::vector<wire::NodeInfoT> nodes;
  nodes.reserve(list.nodes.size());
  for (auto& node : list.nodes) {
    if (node) nodes.push_back(std::move(*node));
  }
  return nodes;
}

StatusOr<wire::LogDataT> CoordinatorClient::ReadLogs(const std::string& job,
                                                     const std::string& replica, uint64_t offset,
                                                     int attempt, uint32_t max_bytes,
                                                     bool with_times, bool dump) {
  wire::GetLogsT request;
  request.with_times = with_times;
  request.dump = dump;
  request.job = job;
  request.replica = replica;
  request.attempt = attempt;
  request.offset = offset;
  request.max_bytes = max_bytes;
  COHORT_ASSIGN_OR_RETURN(Message reply, (Request<wire::LogData>(std::move(request), "logs")));
  wire::LogDataT data;
  reply.As<wire::LogData>()->UnPackTo(&data);
  return data;
}

StatusOr<wire::StudyInfoT> CoordinatorClient::SubmitStudy(const std::string& spec_yaml) {
  wire::SubmitStudyT request;
  request.spec_yaml = spec_yaml;
  COHORT_ASSIGN_OR_RETURN(Message reply,
                          (Request<wire::StudyInfo>(std::move(request), "submit study")));
  wire::StudyInfoT study;
  reply.As<wire::StudyInfo>()->UnPackTo(&study);
  return study;
}

StatusOr<wire::StudyInfoT> CoordinatorClient::GetStudy(const std::string& name) {
  wire::GetStudyT request;
  request.name = name;
  COHORT_ASSIGN_OR_RETURN(Message reply,
                          (Request<wire::StudyInfo>(std::move(request), "get study")));
  wire::StudyInfoT study;
  reply.As<wire::StudyInfo>()->UnPackTo(&study);
  return study;
}

StatusOr<std::vector<wire::StudyInfoT>> CoordinatorClient::ListStudies() {
  COHORT_ASSIGN_OR_RETURN(Message reply,
                          (Request<wire::StudyList>(wire::ListStudiesT{}, "list studies")));
  wire::StudyListT list;
  reply.As<wire::StudyList>()->UnPackTo(&list);
  std::vector<wire::StudyInfoT> studies;
  studies.reserve(list.studies.size());
  for (auto& study : list.studies) {
    if (study) studies.push_back(std::move(*study));
  }
  return studies;
}

StatusOr<wire::JobMetricsT> CoordinatorClient::GetJobMetrics(const std::string& job) {
  wire::GetJobMetricsT request;
  request.job = job;
  COHORT_ASSIGN_OR_RETURN(Message reply,
                          (Request<wire::JobMetrics>(std::move(request), "get job metrics")));
  wire::JobMetricsT metrics;
  reply.As<wire::JobMetrics>()->UnPackTo(&metrics);
  return metrics;
}

StatusOr<std::vector<wire::UsageRowT>> CoordinatorClient::GetUsage(const std::string& user,
                                                                   const std::string& queue,
                                                                   int64_t since_ms) {
  wire::GetUsageT request;
  request.user = user;
  request.queue = queue;
  request.since_ms = since_ms;
  COHORT_ASSIGN_OR_RETURN(Message reply,
                          (Request<wire::UsageReport>(std::move(request), "get usage")));
  wire::UsageReportT report;
  reply.As<wire::UsageReport>()->UnPackTo(&report);
  std::vector<wire::UsageRowT> rows;
  for (auto& row : report.rows) {
    if (row) rows.push_back(std::move(*row));
  }
  return rows;
}

StatusOr<wire::JobInfoT> CoordinatorClient::WaitForJob(
    const std::string& name, const std::function<bool(const wire::JobInfoT&)>& done,
    Clock::time_point deadline, std::chrono::milliseconds poll,
    const std::function<void(const wire::JobInfoT&)>& on_change,
    std::chrono::milliseconds unreachable_limit) {
  bool have_previous = false;
  wire::JobState previous = wire::JobState::QUEUED;
  auto last_reply = Clock::now();
  while (true) {
    auto job = GetJob(name);
    if (job.ok()) {
      last_reply = Clock::now();
      if (on_change && (!have_previous || job->state != previous)) on_change(*job);
      have_previous = true;
      previous = job->state;
      if (done(*job)) return job;
    } else if (job.status().code() != StatusCode::kUnavailable ||
               Clock::now() - last_reply > unreachable_limit) {
      return job.status();
    }
    if (Clock::now() + poll > deadline) {
      return DeadlineExceeded(
          "job " + name + " did not reach the awaited state in time" +
          (have_previous ? std::string(" (last state ") + wire::EnumNameJobState(previous) + ")"
                         : std::string()));
    }
    std::this_thread::sleep_for(poll);
  }
}

StatusOr<wire::JobInfoT> CoordinatorClient::WaitForTerminal(const std::string& name,
                                                            Clock::time_point deadline) {
  return WaitForJob(
      name, [](const wire::JobInfoT& job) { return IsTerminal(job.state); }, deadline);
}

}  // namespace cohort
