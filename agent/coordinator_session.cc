#include "agent/coordinator_session.h"

#include <algorithm>

#include "agent/agent.h"
#include "agent/inventory.h"
#include "common/build_version.h"
#include "common/logging.h"
#include "common/process_start.h"
#include "common/wire_string.h"

namespace cohort::agent {
CoordinatorSession::CoordinatorSession(const AgentConfig& config, Clock& clock, Outbox& outbox,
                                       Outbox::Transmit transmit)
    : config_(config),
      clock_(clock),
      outbox_(outbox),
      transmit_(std::move(transmit)),
      heartbeat_interval_(config.default_heartbeat_interval),
      storage_(config.output_root, config.storage_check_interval, config.storage_check_hung_after),
      health_(config.health_check) {
  next_register_ = Now();
  last_heard_ = Now();
  last_accepted_ = last_heard_;
}

std::vector<std::unique_ptr<wire::UnhealthyGpuT>> CoordinatorSession::UnhealthyGpus(
    const GpuHealth& gpus) const {
  std::vector<std::unique_ptr<wire::UnhealthyGpuT>> out;
  for (const GpuDevice& gpu : config_.inventory.gpus) {  // those this node offers, no other
    auto it = gpus.unhealthy.find(gpu.index);
    if (it == gpus.unhealthy.end()) continue;
    auto entry = std::make_unique<wire::UnhealthyGpuT>();
    entry->index = gpu.index;
    entry->reason = it->second;
    out.push_back(std::move(entry));
  }
  return out;
}

void CoordinatorSession::Heard(bool refused) {
  last_heard_ = Now();
  if (refused) return;
  last_accepted_ = last_heard_;
  fenced_ = false;
}

std::optional<std::map<std::string, uint64_t>> CoordinatorSession::OnRegistered(
    uint64_t id, const wire::RegisterAgentReply& reply) {
  auto it = register_requests_.find(id);
  if (it == register_requests_.end()) return std::nullopt;  // a late duplicate
  if (reply.heartbeat_interval_ms() > 0) {
    heartbeat_interval_ = milliseconds(reply.heartbeat_interval_ms());
  }
  storage_.SetCoordinatorRoot(Str(reply.output_root()));
  fence_after_ = milliseconds(std::max<int64_t>(0, reply.fence_after_ms()));
  fence_grace_ = milliseconds(std::max<int64_t>(0, reply.fence_grace_ms()));
  std::map<std::string, uint64_t> acked = std::move(it->second);
  register_requests_.clear();
  live_restart_undone_.clear();  // told
  if (!registered_) spdlog::info("registered with the coordinator at {}", config_.coordinator);
  registered_ = true;
  register_backoff_ = milliseconds(0);
  next_heartbeat_ = Now() + heartbeat_interval_;
  return acked;
}

void CoordinatorSession::OnHeartbeatReply(const wire::HeartbeatReply& reply) {
  lateness_.clear();  // an empty list is left out of the reply
  if (reply.lateness()) {
    for (const wire::ReplicaLateness* l : *reply.lateness()) {
      lateness_[Str(l->job()) + "/" + Str(l->replica())] = {l->median_ms(), l->samples()};
    }
  }
  if (!reply.known() && registered_) {
    spdlog::warn("the coordinator does not know this node (it restarted?); registering again");
    registered_ = false;
    next_register_ = Now();
  }
}

bool CoordinatorSession::OnRefused(uint64_t id, const Status& error) {
  if (!register_requests_.count(id)) return false;
  spdlog::warn("the coordinator refused registration: {}", error.ToString());
  register_requests_.erase(id);
  return true;
}

bool CoordinatorSession::RegisterDue() {
  milliseconds now = Now();
  if (registered_) {
    milliseconds timeout = config_.coordinator_timeout;
    if (timeout.count() <= 0) timeout = std::max(5 * heartbeat_interval_, milliseconds(3000));
    if (now - last_heard_ > timeout) {
      spdlog::warn("no word from the coordinator for {} ms; registering again",
                   (now - last_heard_).count());
      registered_ = false;
      next_register_ = now;
    }
  }
  return !registered_ && now >= next_register_;
}

bool CoordinatorSession::FenceDue() {
  if (fence_after_.count() <= 0 || fenced_ || Now() - last_accepted_ < fence_after_) return false;
  fenced_ = true;
  return true;
}

void CoordinatorSession::Register(ReplicaReport replicas, const GpuHealth& gpus) {
  wire::RegisterAgentT reg;
  reg.node_id = config_.node_id;
  reg.address = config_.advertise_address;
  for (const auto& gpu : config_.inventory.gpus) {
    auto info = std::make_unique<wire::GpuInfoT>();
    info->index = gpu.index;
    info->model = gpu.model;
    info->memory_mb = gpu.memory_mb;
    info->uuid = gpu.uuid;
    info->numa_node = gpu.numa_node;
    reg.gpus.push_back(std::move(info));
  }
  reg.cpus = config_.inventory.cpus;
  reg.memory_mb = config_.inventory.memory_mb;
  reg.listening_ports = ListeningTcpPorts();
  reg.port_domain = PortDomain();
  reg.version = CohortBuildVersion();
  reg.uptime_ms = ProcessUptimeMs();
  reg.agent_instance = ProcessInstance();
  reg.live_restart_undone = live_restart_undone_;
  if (auto storage = storage_.Report()) {
    reg.storage = std::make_unique<wire::StorageReportT>(std::move(*storage));
  }
  reg.unhealthy = health_.Problem();
  reg.unhealthy_gpus = UnhealthyGpus(gpus);
  for (const auto& [key, value] : config_.labels) {
    auto kv = std::make_unique<wire::KeyValueT>();
    kv->key = key;
    kv->value = value;
    reg.labels.push_back(std::move(kv));
  }
  for (wire::ReplicaStatusT& status : replicas.statuses) {
    reg.replicas.push_back(std::make_unique<wire::ReplicaStatusT>(std::move(status)));
  }
  size_t count = reg.replicas.size();
  wire::BodyUnion body;
  body.Set(std::move(reg));
  uint64_t id = transmit_(std::move(body));
  register_requests_[id] = std::move(replicas.versions);
  spdlog::debug("RegisterAgent sent with {} replica(s)", count);

  register_backoff_ = register_backoff_.count() == 0
                          ? config_.resend_interval
                          : std::min(2 * register_backoff_, config_.max_register_interval);
  next_register_ = Now() + register_backoff_;
}

void CoordinatorSession::SendHeartbeat(
    bool draining, std::vector<std::unique_ptr<wire::ReplicaProgressT>> progress,
    const GpuHealth& gpus) {
  wire::HeartbeatT heartbeat;
  heartbeat.node_id = config_.node_id;
  heartbeat.draining = draining;
  heartbeat.listening_ports = ListeningTcpPorts();
  heartbeat.progress = std::move(progress);
  if (auto storage = storage_.Report()) {
    heartbeat.storage = std::make_unique<wire::StorageReportT>(std::move(*storage));
  }
  // In this order: a recheck that ends between the two reads leaves its verdict in `unhealthy`.
  heartbeat.health_rechecking = health_.Rechecking() || gpus.resampling;
  heartbeat.unhealthy = health_.Problem();
  heartbeat.unhealthy_gpus = UnhealthyGpus(gpus);
  wire::BodyUnion body;
  body.Set(std::move(heartbeat));
  outbox_.Send({Outbox::Kind::kHeartbeat, ""}, 0, std::move(body));
  next_heartbeat_ = Now() + heartbeat_interval_;
}

}  // namespace cohort::agent
