#include "coordinator/state.h"

#include <charconv>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/clock.h"
#include "common/config.h"
#include "common/enum_names.h"
#include "common/signal_name.h"
#include "common/utf8.h"

namespace cohort::coordinator {

using nlohmann::json;

const ReplicaRecord* JobRecord::FindReplica(const std::string& replica_name) const {
  for (const auto& r : replicas) {
    if (r.name == replica_name) return &r;
  }
  return nullptr;
}

ReplicaRecord* JobRecord::FindReplica(const std::string& replica_name) {
  return const_cast<ReplicaRecord*>(std::as_const(*this).FindReplica(replica_name));
}

const WorkerPoolSpec& JobRecord::PoolOf(const ReplicaRecord& r) const {
  const WorkerPoolSpec* pool = spec.FindPool(r.role);
  if (pool == nullptr) {
    static const WorkerPoolSpec kEmpty;
    return kEmpty;
  }
  return *pool;
}

bool JobRecord::finished() const { return IsFinal(state); }

size_t WaitingReasonHash(std::string_view reason) {
  return reason.empty() ? 0 : std::hash<std::string_view>{}(reason) | 1;
}

void JobRecord::SetWaitingReason(const std::string& reason, size_t hash) {
  if (waiting_reason_hash == hash) return;
  waiting_reason = reason;
  waiting_reason_hash = hash;
}

const JobEventRecord* FirstRunningEvent(const JobRecord& job) {
  for (const JobEventRecord& e : job.events) {
    if (e.message.rfind("running:", 0) == 0) return &e;
  }
  return nullptr;
}

int64_t FirstRunningTimeFromEvents(const JobRecord& job) {
  const JobEventRecord* running = FirstRunningEvent(job);
  return running == nullptr ? 0 : running->time_ms;
}

std::string JobRecord::ShownMessage() const {
  if (state != JobState::QUEUED) return message;
  std::string shown = WaitingFor();
  if (wait_limited && !waits_for_jobs) {
    const int64_t max_wait = spec.scheduling.max_wait.count();
    shown += "; fails at " + FormatUtc(queued_since_ms + max_wait, "%Y-%m-%d %H:%M:%S UTC") +
             " unless placed (scheduling.max_wait: " + FormatDuration(max_wait) + ")";
  }
  return shown;
}

namespace {

// kNone has no name: a node without an admin state shows an empty column.
constexpr EnumName<NodeAdmin> kNodeAdminNames[] = {
    {NodeAdmin::kNone, ""}, {NodeAdmin::kCordoned, "cordoned"}, {NodeAdmin::kDraining, "draining"}};

}  // namespace

std::string_view NodeAdminName(NodeAdmin admin) { return NameIn(kNodeAdminNames, admin, ""); }

StatusOr<NodeAdmin> ParseNodeAdmin(std::string_view name) {
  if (auto a = ValueIn(kNodeAdminNames, name)) return *a;
  return InvalidArgument("no node admin state '" + std::string(name) +
                         "' (expected cordoned or draining)");
}

std::string FormatGpuSet(const std::set<int>& gpus) {
  std::string text;
  for (int gpu : gpus) text += (text.empty() ? "" : ",") + std::to_string(gpu);
  return text;
}

StatusOr<std::set<int>> ParseGpuSet(std::string_view text) {
  std::set<int> gpus;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(at, end - at);
    int gpu = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), gpu);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || gpu < 0 ||
        gpu >= kMaxGpusPerNode) {
      return InvalidArgument("'" + std::string(text) + "' is not a list of GPU indexes");
    }
    gpus.insert(gpu);
    at = end + 1;
  }
  return gpus;
}

Status CheckCordonReason(std::string_view reason) {
  if (reason.size() > kMaxCordonReasonBytes) {
    return InvalidArgument("the reason has " + std::to_string(reason.size()) + " bytes; at most " +
                           std::to_string(kMaxCordonReasonBytes) + " are kept");
  }
  if (ValidUtf8(reason, /*printable=*/true) != reason) {
    return InvalidArgument(
        "the reason must be printable UTF-8 text (no control characters, no tabs)");
  }
  return Status::Ok();
}

CordonNote NextCordonNote(const NodeSettings& after, const CordonNote& before,
                          const std::string& reason, const std::string& by, int64_t now_ms) {
  if (!after.cordoned()) return CordonNote{};
  if (!reason.empty()) return CordonNote{reason, by, now_ms};
  if (!before.empty()) return before;
  return CordonNote{"", by, now_ms};
}

std::string NodeAdminLabel(const NodeRecord& node, bool holds_replicas) {
  if (node.admin == NodeAdmin::kDraining && !holds_replicas) return "drained";
  return std::string(NodeAdminName(node.admin));
}

std::string NodeStateName(const NodeRecord& node, bool holds_replicas) {
  if (!node.ready) return "LOST";
  if (node.draining) return "DRAINING";
  switch (node.admin) {
    case NodeAdmin::kCordoned:
      return "CORDONED";
    case NodeAdmin::kDraining:
      return holds_replicas ? "DRAINING" : "DRAINED";
    case NodeAdmin::kNone:
      break;
  }
  return node.unhealthy.empty() ? "READY" : "UNHEALTHY";
}

bool IsFinal(ReplicaState s) {
  switch (s) {
    case ReplicaState::PENDING:
    case ReplicaState::STARTING:
    case ReplicaState::RUNNING:
      return false;
    default:
      return true;
  }
}

bool IsFinal(JobState s) {
  return s == JobState::SUCCEEDED || s == JobState::FAILED || s == JobState::CANCELLED;
}

bool IsJobState(int64_t value) {
  return value >= static_cast<int64_t>(JobState::MIN) &&
         value <= static_cast<int64_t>(JobState::MAX);
}

bool IsReplicaState(int64_t value) {
  return value >= static_cast<int64_t>(ReplicaState::MIN) &&
         value <= static_cast<int64_t>(ReplicaState::MAX);
}

bool IsRetryable(const ReplicaRecord& r) {
  switch (r.state) {
    case ReplicaState::PREEMPTED:
    case ReplicaState::LOST:
    case ReplicaState::STOPPED:
      return true;
    case ReplicaState::FAILED: {
      const auto retryable_signal = [](int s) { return s == 2 || s == 9 || s == 10 || s == 15; };
      if (retryable_signal(r.signal) || retryable_signal(r.cause_signal)) return true;
      return r.exit_code == 130 || r.exit_code == 137 || r.exit_code == 138 || r.exit_code == 143;
    }
    default:
      return false;
  }
}

std::string DescribeFailedExit(const ReplicaRecord& r) {
  const auto signal_text = [](int signal) {
    const std::string name = SignalName(signal);
    return "signal " + std::to_string(signal) + (name.empty() ? "" : " (" + name + ")");
  };
  if (r.signal != 0) return "was killed by " + signal_text(r.signal);
  if (r.exit_code >= 0) {
    std::string text = "exited with code " + std::to_string(r.exit_code);
    if (r.cause_signal != 0) {
      text += " after " + signal_text(r.cause_signal) + " killed a process inside it";
    }
    return text;
  }
  return "failed";
}

std::string DescribeEnd(const ReplicaRecord& r) {
  std::string what;
  switch (r.state) {
    case ReplicaState::SUCCEEDED:
      return "exited 0";  // its agent's message says no more ("exited with code 0")
    case ReplicaState::FAILED:
      what = DescribeFailedExit(r);
      break;
    case ReplicaState::PREEMPTED:
      what = "was preempted";
      break;
    case ReplicaState::LOST:
      what = "was lost with its node";
      break;
    case ReplicaState::STOPPED:
      what = "was stopped";
      break;
    default:
      what = std::string("is ") + wire::EnumNameReplicaState(r.state);
  }
  if (!r.message.empty()) what += " (" + r.message + ")";
  return what;
}

std::string FormatDuration(int64_t ms) {
  return cohort::FormatDuration(std::chrono::milliseconds(ms));
}

std::vector<ReplicaRecord> MakeReplicas(const JobSpec& spec) {
  std::vector<ReplicaRecord> out;
  for (const auto& pool : spec.pools) {
    for (int i = 0; i < pool.replicas; ++i) {
      ReplicaRecord r;
      r.role = pool.role;
      r.index = i;
      r.name = std::string(RoleName(pool.role)) + "-" + std::to_string(i);
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::string AttemptId(const std::string& job, const std::string& replica, int attempt) {
  return job + "/" + replica + "/" + std::to_string(attempt);
}

namespace {
bool WithWorkers(const ReplicaRecord& r, int workers) {
  return workers < 0 || r.role != Role::kWorker || r.index < workers;
}
}  // namespace

ReplicaDemand PoolDemand(const JobSpec& job, const WorkerPoolSpec& pool) {
  const Resources& res = pool.resources;
  return ReplicaDemand{res.gpus,
                       res.cpus,
                       res.memory_mb,
                       InternSelector(pool.Selector()),
                       SpreadGroup(pool),
                       InternPreference(pool.preferred_node_affinity),
                       InternTopology(job.scheduling.TopologyLevels()),
                       job.scheduling.required_topology.empty()};
}

int SpreadGroup(const WorkerPoolSpec& pool) {
  return pool.one_per_node ? static_cast<int>(pool.role) + 1 : 0;
}

bool InNextPlacement(const JobRecord& job, const ReplicaRecord& r) {
  return WithWorkers(r, job.elastic_workers);
}

std::vector<ReplicaDemand> DemandsWithWorkers(const JobRecord& job, int workers) {
  std::vector<ReplicaDemand> out;
  for (const auto& r : job.replicas) {
    if (!WithWorkers(r, workers)) continue;
    out.push_back(PoolDemand(job.spec, job.PoolOf(r)));
  }
  return out;
}

void FillDemands(JobRecord& job) { job.demands = DemandsWithWorkers(job, job.elastic_workers); }

std::string JobToJson(const JobRecord& job) {
  json j;
  j["type"] = "job";
  j["seq"] = job.seq;
  j["name"] = job.name;
  j["spec_yaml"] = job.spec_yaml;
  j["state"] = static_cast<int>(job.state);
  j["message"] = job.message;
  j["create_time_ms"] = job.create_time_ms;
  j["queued_since_ms"] = job.queued_since_ms;
  j["start_time_ms"] = job.start_time_ms;
  j["end_time_ms"] = job.end_time_ms;
  j["restarts"] = job.restarts;
  if (job.suspended_ms != 0) j["suspended_ms"] = job.suspended_ms;
  if (job.first_running_ms != 0) j["first_running_ms"] = job.first_running_ms;
  j["output_dir"] = job.output_dir;
  j["trial_id"] = job.trial_id;
  j["study"] = job.study;
  if (!job.owner.empty()) j["owner"] = job.owner;
  j["master_port"] = job.master_port;
  j["bootstrap_port"] = job.bootstrap_port;
  json reps = json::array();
  for (const auto& r : job.replicas) {
    reps.push_back({{"name", r.name},
                    {"role", std::string(RoleName(r.role))},
                    {"index", r.index},
                    {"attempt", r.attempt},
                    {"launched", r.launched},
                    {"state", static_cast<int>(r.state)},
                    {"node_id", r.node_id},
                    {"last_node", r.last_node},
                    {"gpus", r.gpus},
                    {"port", r.port},
                    {"exit_code", r.exit_code},
                    {"signal", r.signal},
                    {"cause_signal", r.cause_signal},
                    {"message", r.message},
                    {"stop_requested", r.stop_requested},
                    {"state_time_ms", r.state_time_ms},
                    {"fenced_until_ms", r.fenced_until_ms},
                    {"idle", r.idle}});
  }
  j["replicas"] = std::move(reps);
  json events = json::array();
  for (const auto& e : job.events) events.push_back({{"t", e.time_ms}, {"m", e.message}});
  j["events"] = std::move(events);
  // Text from outside is made UTF-8 where it is taken (AgentService, NodeRegistry); should any
  // slip through, it is stored with U+FFFD rather than thrown on, which would end the coordinator.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

StatusOr<JobRecord> JobFromJson(const std::string& text) {
  JobRecord job;
  try {
    json j = json::parse(text);
    if (j.value("type", "") != "job") return DataLoss("journal record is not a job");
    job.seq = j.at("seq").get<uint64_t>();
    job.name = j.at("name").get<std::string>();
    job.spec_yaml = j.at("spec_yaml").get<std::string>();
    const int state = j.at("state").get<int>();
    if (!IsJobState(state))
      return DataLoss("journal: state " + std::to_string(state) + " is no job state");
    job.state = static_cast<JobState>(state);
    job.message = j.value("message", "");
    job.create_time_ms = j.value("create_time_ms", int64_t{0});
    job.queued_since_ms = j.value("queued_since_ms", int64_t{0});
    job.start_time_ms = j.value("start_time_ms", int64_t{0});
    job.end_time_ms = j.value("end_time_ms", int64_t{0});
    job.restarts = j.value("restarts", 0);
    job.suspended_ms = j.value("suspended_ms", int64_t{0});
    job.first_running_ms = j.value("first_running_ms", int64_t{0});
    job.output_dir = j.value("output_dir", "");
    job.trial_id = j.value("trial_id", "");
    job.study = j.value("study", "");
    job.owner = j.value("owner", "");
    job.master_port = j.value("master_port", 0);
    job.bootstrap_port = j.value("bootstrap_port", 0);
    for (const auto& jr : j.at("replicas")) {
      ReplicaRecord r;
      r.name = jr.at("name").get<std::string>();
      auto role = ParseRole(jr.at("role").get<std::string>());
      if (!role.ok())
        return DataLoss("journal: replica " + r.name + ": " + role.status().message());
      r.role = *role;
      r.index = jr.value("index", 0);
      r.attempt = jr.value("attempt", 0);
      r.launched = jr.value("launched", false);
      const int state = jr.value("state", 0);
      if (!IsReplicaState(state)) {
        return DataLoss("journal: replica " + r.name + ": state " + std::to_string(state) +
                        " is no replica state");
      }
      r.state = static_cast<ReplicaState>(state);
      r.node_id = jr.value("node_id", "");
      r.last_node = jr.value("last_node", "");
      r.gpus = jr.value("gpus", std::vector<int>{});
      r.port = jr.value("port", 0);
      r.exit_code = jr.value("exit_code", -1);
      r.signal = jr.value("signal", 0);
      r.cause_signal = jr.value("cause_signal", 0);
      r.message = jr.value("message", "");
      r.stop_requested = jr.value("stop_requested", false);
      r.state_time_ms = jr.value("state_time_ms", int64_t{0});
      r.fenced_until_ms = jr.value("fenced_until_ms", int64_t{0});
      r.idle = jr.value("idle", false);
      job.replicas.push_back(std::move(r));
    }
    for (const auto& je : j.at("events")) {
      job.events.push_back({je.value("t", int64_t{0}), je.value("m", "")});
    }
  } catch (const json::exception& e) {
    return DataLoss(std::string("journal record does not parse: ") + e.what());
  }
  auto spec = ParseJobSpec(job.spec_yaml, "journaled spec of " + job.name);
  if (!spec.ok()) return spec.status();
  job.spec = std::move(*spec);
  FillDemands(job);
  if (job.first_running_ms == 0) job.first_running_ms = FirstRunningTimeFromEvents(job);
  return job;
}

}  // namespace cohort::coordinator
