// Simulated agents of the control-plane benchmarks (bench/control_plane, bench/recovery): one
// DealerSocket per node speaking the agent protocol to a real cohort-coordinator, launching
// nothing. Each benchmark decides how its agents answer; this holds the messages and the receive
// loop they share, and the job file of their job mix. Header only: both benchmarks link the
// messaging layer already (the peers, which link cohort_bench_common, must not).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/messaging.h"

namespace cohort::bench {

// The RegisterAgent of a simulated node at 127.0.0.1, a host of its own for ports: GPUs 0 ..
// gpus-1, 64 CPUs, 512000 MB.
inline wire::RegisterAgentT SimRegistration(const std::string& node_id, int gpus) {
  wire::RegisterAgentT reg;
  reg.node_id = node_id;
  reg.address = "127.0.0.1";
  reg.port_domain = "sim " + node_id;  // a host of its own, as each node of a real cluster is
  for (int g = 0; g < gpus; ++g) {
    auto gi = std::make_unique<wire::GpuInfoT>();
    gi->index = g;
    reg.gpus.push_back(std::move(gi));
  }
  reg.cpus = 64;
  reg.memory_mb = 512000;
  return reg;
}

// The job file of the benchmarks' job mix: a chief and replicas - 1 workers of `gpus` GPUs and
// one CPU each, running /bin/true.
inline std::string SimJobYaml(const std::string& name, int replicas, int gpus) {
  const std::string pool = "    resources: {gpus: " + std::to_string(gpus) +
                           ", cpus: 1}\n    process: {command: [/bin/true]}\n";
  std::string y = "name: " + name + "\nworker_pools:\n  - role: chief\n    replicas: 1\n" + pool;
  if (replicas > 1) {
    y += "  - role: worker\n    replicas: " + std::to_string(replicas - 1) + "\n" + pool;
  }
  return y;
}

// The status, in `state`, of the replica a LaunchReplica or StopReplica names.
template <typename Request>
wire::ReplicaStatusT StatusOf(const Request& request, wire::ReplicaState state) {
  wire::ReplicaStatusT s;
  s.job = request.job()->str();
  s.replica = request.replica()->str();
  s.attempt = request.attempt();
  s.state = state;
  return s;
}

// Sends node `node_id`'s ReplicaUpdate carrying `status`.
inline void SendReplicaUpdate(DealerSocket& socket, const std::string& node_id,
                              const wire::ReplicaStatusT& status) {
  wire::ReplicaUpdateT u;
  u.node_id = node_id;
  u.status = std::make_unique<wire::ReplicaStatusT>(status);
  (void)socket.Send(Encode(socket.NextRequestId(), std::move(u)));
}

// Sends node `node_id`'s Heartbeat.
inline void SendHeartbeat(DealerSocket& socket, const std::string& node_id) {
  wire::HeartbeatT hb;
  hb.node_id = node_id;
  (void)socket.Send(Encode(socket.NextRequestId(), std::move(hb)));
}

// Waits up to `wait` until some agent's socket holds a message, then drains every readable
// socket, handing each message to on_message(agent, message) in the order it came. `Agent` is any
// type with a `std::unique_ptr<DealerSocket> socket`.
template <typename Agent, typename OnMessage>
void ReceiveAll(std::vector<Agent>& agents, std::chrono::milliseconds wait, OnMessage on_message) {
  std::vector<zmq::pollitem_t> items;
  items.reserve(agents.size());
  for (auto& a : agents) items.push_back({a.socket->socket().handle(), 0, ZMQ_POLLIN, 0});
  zmq::poll(items.data(), items.size(), wait);
  for (size_t i = 0; i < agents.size(); ++i) {
    if (!(items[i].revents & ZMQ_POLLIN)) continue;
    while (true) {
      auto m = agents[i].socket->Receive(std::chrono::milliseconds(0));
      if (!m.ok() || !m->has_value()) break;
      on_message(agents[i], **m);
    }
  }
}

}  // namespace cohort::bench
