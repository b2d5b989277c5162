// CoordinatorSession: the agent's standing with the coordinator. It knows whether this node is
// registered, when to register again and how long to back off, when the next heartbeat is due,
// and what the coordinator's replies said (the heartbeat interval, how late each replica here
// enters collectives). It builds and sends RegisterAgent and Heartbeat; what they say about the
// replicas comes from the caller (agent/replica_manager.h).
//
//  - Registering: at start, after a HeartbeatReply with known=false, after Unregister() (a report
//    refused with FAILED_PRECONDITION), and after coordinator_timeout of silence (default
//    max(5 heartbeat intervals, 3 s)). RegisterAgent is resent after resend_interval, doubling up
//    to max_register_interval, until a RegisterAgentReply answers one of those outstanding.
//  - Heartbeats: one every interval the RegisterAgentReply gives (default_heartbeat_interval
//    until then), sent through the Outbox as its heartbeat stream.
//  - Storage: both carry what the StorageCheck last found at the output root the
//    RegisterAgentReply names (agent/storage_check.h).
//  - Health: both carry what the node's health check last said (agent/health_check.h), and which
//    of its GPUs NVML finds unfit (GpuHealth, from agent/resource_usage.h's GpuSampler).
//  - Fencing: the RegisterAgentReply hands the coordinator's --fence-after and --fence-grace. Once
//    the coordinator has said nothing for that long (refusals of this node's word do not count),
//    FenceDue() is true, once per silence: the coordinator may have declared this node lost and
//    placed its replicas elsewhere, so the agent stops them (coordinator/job_controller.h,
//    "Fencing"). 0: never.
//
// Time: every timer reads the injected Clock.
// Thread safety: none; the agent loop owns it. Lifetime: `config`, `clock` and `outbox` outlive
// it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/health_check.h"
#include "agent/outbox.h"
#include "agent/storage_check.h"
#include "common/clock.h"
#include "common/schema/cohort_generated.h"
#include "common/status.h"

namespace cohort::agent {

struct AgentConfig;

// What the node's GPUs' health says now (GpuSampler::UnhealthyGpus and Resampling).
struct GpuHealth {
  std::map<int, std::string> unhealthy;  // GPU index -> why
  bool resampling = false;               // sampled again after a failure, not ended yet
};

class CoordinatorSession {
 public:
  using milliseconds = std::chrono::milliseconds;
  // How late a replica here enters collectives after its job's first rank, as the coordinator
  // last said (median ms over its window, samples).
  struct CollectiveLateness {
    double median_ms = 0;
    int samples = 0;
  };
  // What a RegisterAgent reports of the replicas here: the statuses not yet acknowledged, and
  // the version each carries, by attempt key.
  struct ReplicaReport {
    std::vector<wire::ReplicaStatusT> statuses;
    std::map<std::string, uint64_t> versions;
  };

  // `transmit` sends a message outside the outbox (RegisterAgent) and returns its request id.
  CoordinatorSession(const AgentConfig& config, Clock& clock, Outbox& outbox,
                     Outbox::Transmit transmit);

  bool registered() const { return registered_; }
  // By "<job>/<replica>".
  const std::map<std::string, CollectiveLateness>& collective_lateness() const { return lateness_; }

  // Any message from the coordinator: it is alive now. `refused`: it refused this node's word
  // (PERMISSION_DENIED or UNAUTHENTICATED: its key was removed, say), which does not hold off the
  // fence, since the coordinator may have declared this node lost for it.
  void Heard(bool refused = false);
  // A RegisterAgentReply to request `id`. Returns the versions that registration carried (now
  // acknowledged), by attempt key; nullopt for a late duplicate, which changes nothing. Whatever
  // was in flight before may be lost: the caller resets the outbox.
  std::optional<std::map<std::string, uint64_t>> OnRegistered(
      uint64_t id, const wire::RegisterAgentReply& reply);
  // known=false registers again at once; the lateness list replaces the last (an empty list is
  // left out of a reply: absent means none).
  void OnHeartbeatReply(const wire::HeartbeatReply& reply);
  // An ErrorReply to request `id`: true (and logged) when it refused a RegisterAgent, which is
  // then sent again after its backoff.
  bool OnRefused(uint64_t id, const Status& error);
  // The coordinator does not know this node (it refused a report with FAILED_PRECONDITION):
  // register again when the backoff allows.
  void Unregister() { registered_ = false; }

  // Registered but silent past the coordinator timeout: registers again. Then true when a
  // RegisterAgent is due (not registered, and the backoff has passed).
  bool RegisterDue();
  // True once per silence of the coordinator longer than its --fence-after (see the header
  // comment); the replicas are then stopped with fence_grace().
  bool FenceDue();
  milliseconds fence_after() const { return fence_after_; }
  milliseconds fence_grace() const { return fence_grace_; }
  // Why this agent's live restart was undone (Handoff::went_back_because): told in its
  // registrations until one is answered.
  void TellLiveRestartUndone(std::string why) { live_restart_undone_ = std::move(why); }
  // Sends RegisterAgent with `replicas` and backs off before the next one.
  void Register(ReplicaReport replicas, const GpuHealth& gpus = {});
  bool HeartbeatDue() const { return Now() >= next_heartbeat_; }
  // Sends a Heartbeat (`draining` while the agent shuts down) carrying `progress`, the running
  // replicas' progress; the next is due one heartbeat interval later.
  void SendHeartbeat(bool draining, std::vector<std::unique_ptr<wire::ReplicaProgressT>> progress,
                     const GpuHealth& gpus = {});
  // The node's health check, which both messages report.
  HealthCheck& health() { return health_; }

 private:
  milliseconds Now() const { return milliseconds(clock_.NowMs()); }
  std::vector<std::unique_ptr<wire::UnhealthyGpuT>> UnhealthyGpus(const GpuHealth& gpus) const;

  const AgentConfig& config_;
  Clock& clock_;
  Outbox& outbox_;
  Outbox::Transmit transmit_;
  bool registered_ = false;
  // The versions each outstanding RegisterAgent carried, by request id.
  std::map<uint64_t, std::map<std::string, uint64_t>> register_requests_;
  std::map<std::string, CollectiveLateness> lateness_;
  // Readings of clock_.
  milliseconds next_register_{0};
  milliseconds register_backoff_{0};
  milliseconds next_heartbeat_{0};
  milliseconds last_heard_{0};
  milliseconds heartbeat_interval_;
  milliseconds last_accepted_{0};  // like last_heard_, but not reset by refusals
  milliseconds fence_after_{0};    // 0: no fencing
  milliseconds fence_grace_{0};
  bool fenced_ = false;  // FenceDue() fired in this silence
  std::string live_restart_undone_;
  StorageCheck storage_;
  HealthCheck health_;
};

}  // namespace cohort::agent
