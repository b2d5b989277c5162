#include "common/client.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "common/curve_keys.h"
#include "common/job_spec.h"

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
StatusOr<Message> CoordinatorClient::Request(T body, std::string_view what,
                                             std::chrono::milliseconds timeout) {
  auto reply = socket_->Call(std::move(body), timeout.count() > 0 ? timeout : options_.timeout);
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

template <typename R, typename T>
StatusOr<typename R::NativeTableType> CoordinatorClient::Call(T body, std::string_view what,
                                                              std::chrono::milliseconds timeout) {
  COHORT_ASSIGN_OR_RETURN(Message reply, (Request<R>(std::move(body), what, timeout)));
  typename R::NativeTableType out;
  reply.As<R>()->UnPackTo(&out);
  return out;
}

template <typename R, typename T>
StatusOr<typename R::NativeTableType> CoordinatorClient::CallNamed(const std::string& name,
                                                                   std::string_view what) {
  T request;
  request.name = name;
  return Call<R>(std::move(request), what);
}

template <typename R, typename T, typename Item>
StatusOr<std::vector<Item>> CoordinatorClient::CallList(
    T body, std::string_view what, std::vector<std::unique_ptr<Item>> R::NativeTableType::*field) {
  COHORT_ASSIGN_OR_RETURN(typename R::NativeTableType list, (Call<R>(std::move(body), what)));
  std::vector<Item> out;
  out.reserve((list.*field).size());
  for (auto& entry : list.*field) {
    if (entry) out.push_back(std::move(*entry));
  }
  return out;
}

StatusOr<std::string> CoordinatorClient::Submit(const std::string& spec_yaml,
                                                wire::SubmitJobReplyT* reply) {
  wire::SubmitJobT request;
  request.spec_yaml = spec_yaml;
  COHORT_ASSIGN_OR_RETURN(wire::SubmitJobReplyT answer,
                          (Call<wire::SubmitJobReply>(std::move(request), "submit")));
  std::string name = answer.name;
  if (reply != nullptr) *reply = std::move(answer);
  return name;
}

StatusOr<wire::SubmitJobReplyT> CoordinatorClient::DryRun(const std::string& spec_yaml) {
  wire::SubmitJobT request;
  request.spec_yaml = spec_yaml;
  request.dry_run = true;
  COHORT_ASSIGN_OR_RETURN(wire::SubmitJobReplyT reply,
                          (Call<wire::SubmitJobReply>(std::move(request), "dry-run submit")));
  if (reply.dry_run == nullptr) {
    // A coordinator older than dry runs reads the request as a submit.
    return FailedPrecondition(
        "the coordinator does not know dry runs (it is older than this "
        "client): it submitted the job as " +
        reply.name + "; `cohort cancel " + reply.name + "` takes it back");
  }
  return reply;
}

StatusOr<wire::JobInfoT> CoordinatorClient::GetJob(const std::string& name) {
  return CallNamed<wire::JobInfo, wire::GetJobT>(name, "get job");
}

StatusOr<std::string> CoordinatorClient::GetJobSpec(const std::string& name) {
  wire::GetJobT request;
  request.name = name;
  request.with_spec = true;
  auto job = Call<wire::JobInfo>(std::move(request), "get job");
  if (job.ok()) return std::move(job->spec_yaml);
  if (job.status().code() != StatusCode::kNotFound) return job.status();
  auto array = GetArray(name, /*with_spec=*/true);
  if (!array.ok() && array.status().code() == StatusCode::kNotFound) return NoJobOrArray(name);
  if (!array.ok()) return array.status();
  return std::move(array->spec_yaml);
}

StatusOr<std::vector<wire::JobInfoT>> CoordinatorClient::ListJobs() {
  return ListJobs(wire::ListJobsT{});
}

StatusOr<std::vector<wire::JobInfoT>> CoordinatorClient::ListJobs(const wire::ListJobsT& query) {
  return CallList<wire::JobList>(wire::ListJobsT(query), "list jobs", &wire::JobListT::jobs);
}

StatusOr<wire::JobInfoT> CoordinatorClient::Cancel(const std::string& name) {
  return CallNamed<wire::JobInfo, wire::CancelJobT>(name, "cancel");
}

StatusOr<std::vector<wire::JobInfoT>> CoordinatorClient::CancelArray(const std::string& name) {
  wire::CancelArrayT request;
  request.name = name;
  return CallList<wire::JobList>(std::move(request), "cancel array", &wire::JobListT::jobs);
}

StatusOr<std::vector<wire::ArrayInfoT>> CoordinatorClient::ListArrays() {
  return CallList<wire::ArrayList>(wire::ListArraysT{}, "list arrays", &wire::ArrayListT::arrays);
}

StatusOr<CoordinatorClient::ArrayStatus> CoordinatorClient::GetArray(const std::string& name,
                                                                     bool with_spec) {
  wire::GetArrayT request;
  request.name = name;
  request.with_spec = with_spec;
  COHORT_ASSIGN_OR_RETURN(wire::ArrayStatusT reply,
                          Call<wire::ArrayStatus>(std::move(request), "get array"));
  if (!reply.summary) return Internal("get array " + name + ": the reply has no summary");
  ArrayStatus out{std::move(*reply.summary), {}, std::move(reply.spec_yaml)};
  out.tasks.reserve(reply.tasks.size());
  for (auto& task : reply.tasks) {
    if (task) out.tasks.push_back(std::move(*task));
  }
  return out;
}

StatusOr<std::vector<wire::JobInfoT>> CoordinatorClient::SuspendArray(const std::string& name,
                                                                      bool resume) {
  wire::SuspendArrayT request;
  request.name = name;
  request.resume = resume;
  return CallList<wire::JobList>(std::move(request), resume ? "resume array" : "suspend array",
                                 &wire::JobListT::jobs);
}

StatusOr<std::vector<wire::JobInfoT>> CoordinatorClient::UpdateArray(const std::string& name,
                                                                     const std::string& priority,
                                                                     const std::string& queue) {
  wire::UpdateArrayT request;
  request.name = name;
  request.priority = priority;
  request.queue = queue;
  return CallList<wire::JobList>(std::move(request), "update array", &wire::JobListT::jobs);
}

StatusOr<wire::JobInfoT> CoordinatorClient::Suspend(const std::string& name, bool resume) {
  wire::SuspendJobT request;
  request.name = name;
  request.resume = resume;
  return Call<wire::JobInfo>(std::move(request), resume ? "resume" : "suspend");
}

StatusOr<wire::JobInfoT> CoordinatorClient::Update(const std::string& name,
                                                   const std::string& priority,
                                                   const std::string& queue) {
  wire::UpdateJobT request;
  request.name = name;
  request.priority = priority;
  request.queue = queue;
  return Call<wire::JobInfo>(std::move(request), "update");
}

StatusOr<wire::ExecOutputT> CoordinatorClient::ExecStep(wire::ExecSessionIoT step) {
  return Call<wire::ExecOutput>(
      std::move(step), "exec",
      std::chrono::milliseconds(kExecStepHoldMs + kExecAnswerSlackMs) + options_.timeout);
}

StatusOr<wire::ExecOutputT> CoordinatorClient::Exec(const std::string& job,
                                                    const std::string& replica,
                                                    const std::vector<std::string>& argv,
                                                    std::chrono::milliseconds timeout) {
  wire::ExecInReplicaT request;
  request.job = job;
  request.replica = replica;
  request.argv = argv;
  request.timeout_ms = timeout.count();
  // The coordinator answers once the command has ended: the wait is the command's, and then the
  // coordinator's own wait for a silent agent, plus the call timeout.
  const std::chrono::milliseconds command =
      timeout.count() > 0 ? timeout : std::chrono::milliseconds(kDefaultExecTimeoutMs);
  return Call<wire::ExecOutput>(
      std::move(request), "exec",
      command + std::chrono::milliseconds(kExecAnswerSlackMs) + options_.timeout);
}

StatusOr<wire::JobInfoT> CoordinatorClient::DumpStacks(const std::string& job,
                                                       const std::string& replica) {
  wire::DumpStacksT request;
  request.job = job;
  request.replica = replica;
  return Call<wire::JobInfo>(std::move(request), "stacks");
}

StatusOr<wire::NodeAdminReplyT> CoordinatorClient::AdminNode(const std::string& node_id,
                                                             const std::string& action,
                                                             const std::vector<std::string>& labels,
                                                             const std::vector<int>& gpus,
                                                             const std::string& reason) {
  wire::NodeAdminT request;
  request.node_id = node_id;
  request.action = action;
  request.labels = labels;
  request.gpus = gpus;
  request.reason = reason;
  return Call<wire::NodeAdminReply>(std::move(request), action);
}

StatusOr<wire::BackupReplyT> CoordinatorClient::BackupState(std::chrono::milliseconds timeout) {
  return Call<wire::BackupReply>(wire::BackupStateT{}, "backup", timeout);
}

StatusOr<std::string> CoordinatorClient::CoordinatorVersion() {
  COHORT_ASSIGN_OR_RETURN(wire::VersionInfoT info,
                          Call<wire::VersionInfo>(wire::GetVersionT{}, "version"));
  return std::move(info.coordinator);
}

Status CoordinatorClient::DeleteJob(const std::string& name) {
  return CallNamed<wire::Ack, wire::DeleteJobT>(name, "delete").status();
}

StatusOr<wire::StudyInfoT> CoordinatorClient::CancelStudy(const std::string& name) {
  return CallNamed<wire::StudyInfo, wire::CancelStudyT>(name, "cancel study");
}

StatusOr<std::vector<wire::QueueInfoT>> CoordinatorClient::ListQueues() {
  return CallList<wire::QueueList>(wire::ListQueuesT{}, "list queues", &wire::QueueListT::queues);
}

StatusOr<std::vector<wire::NodeInfoT>> CoordinatorClient::ListNodes(const std::string& selector,
                                                                    const std::string& events_of) {
  wire::ListNodesT request;
  request.selector = selector;
  request.events_of = events_of;
  COHORT_ASSIGN_OR_RETURN(wire::NodeListT list,
                          Call<wire::NodeList>(std::move(request), "list nodes"));
  std::optional<NodeSelector> unapplied;
  if (!selector.empty() && list.selector.empty()) {
    COHORT_ASSIGN_OR_RETURN(unapplied, ParseNodeSelector(selector));
  }
  std::vector<wire::NodeInfoT> out;
  for (auto& node : list.nodes) {
    if (!node) continue;
    if (unapplied) {
      StatusOr<NodeLabels> labels = ParseNodeLabels(node->labels);
      if (!labels.ok() || !unapplied->Matches(*labels)) continue;
    }
    out.push_back(std::move(*node));
  }
  return out;
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
  return Call<wire::LogData>(std::move(request), "logs");
}

StatusOr<wire::StudyInfoT> CoordinatorClient::SubmitStudy(const std::string& spec_yaml) {
  wire::SubmitStudyT request;
  request.spec_yaml = spec_yaml;
  return Call<wire::StudyInfo>(std::move(request), "submit study");
}

StatusOr<wire::StudyInfoT> CoordinatorClient::GetStudy(const std::string& name) {
  return CallNamed<wire::StudyInfo, wire::GetStudyT>(name, "get study");
}

StatusOr<std::string> CoordinatorClient::GetStudySpec(const std::string& name) {
  wire::GetStudyT request;
  request.name = name;
  request.with_spec = true;
  COHORT_ASSIGN_OR_RETURN(wire::StudyInfoT study,
                          Call<wire::StudyInfo>(std::move(request), "get study"));
  return std::move(study.spec_yaml);
}

StatusOr<std::vector<wire::StudyInfoT>> CoordinatorClient::ListStudies() {
  return CallList<wire::StudyList>(wire::ListStudiesT{}, "list studies",
                                   &wire::StudyListT::studies);
}

StatusOr<wire::JobMetricsT> CoordinatorClient::GetJobMetrics(const std::string& job) {
  wire::GetJobMetricsT request;
  request.job = job;
  return Call<wire::JobMetrics>(std::move(request), "get job metrics");
}

StatusOr<std::vector<wire::UsageRowT>> CoordinatorClient::GetUsage(wire::GetUsageT request) {
  return CallList<wire::UsageReport>(std::move(request), "get usage", &wire::UsageReportT::rows);
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
