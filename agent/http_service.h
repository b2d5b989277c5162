// AgentHttp is the agent's HTTP endpoint (DESIGN.md "HTTP"; --http-endpoint, default
// 127.0.0.1:7481, "none" turns it off): /metrics in the Prometheus text format, per replica
// attempt running here
//   CPU seconds, memory bytes and I/O bytes read from the attempt's cgroup (cpu.stat usage_usec,
//   memory.current, io.stat rbytes/wbytes) at scrape time; where the agent has no cgroups the
//   families' HELP says so and no sample is written (nothing is estimated);
//   GPU utilisation and memory through NVML per GPU (the agent's GpuSampler's latest sample:
//   agent/resource_usage.h), labelled with the replica it is assigned to; without NVML the HELP
//   says why and no sample is written;
// how late each replica here enters its job's collective operations after the job's first rank
// (the median over the coordinator's window, as its heartbeat replies say; issue 18's
// stragglers), with the number of operations behind it;
// each GPU's critical Xid errors (NVML's events) by Xid;
// and the agent's log bytes shipped (acked by the coordinator) and attempts started.
// Everything comes from the AgentSnapshot the loop publishes (Publish) and from files read on
// the server's threads, never from the loop's state.
//
// Thread safety: Publish from the agent loop; requests on the server's threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/resource_usage.h"
#include "common/http_server.h"
#include "common/status.h"

namespace cohort::agent {

struct AttemptView {
  std::string job;
  std::string replica;
  int attempt = 0;
  std::string cgroup;  // empty: none
  std::vector<int> gpus;
};

// How late one replica here enters collectives after its job's first rank.
struct LatenessView {
  std::string job;
  std::string replica;
  double median_ms = 0;
  int samples = 0;
};

struct AgentSnapshot {
  std::string node_id;
  std::vector<AttemptView> attempts;  // live attempts
  std::vector<LatenessView> lateness;
  bool cgroups = false;            // replicas get cgroups on this node
  std::string cgroups_reason;      // why not
  uint64_t log_bytes_shipped = 0;  // since the agent started
  uint64_t attempts_started = 0;   // since the agent started
  uint64_t replicas_fenced = 0;    // stopped for a silent coordinator (--fence-after), since start
  // The node's health check (agent/health_check.h): whether there is one, whether its latest
  // verdict passes, and the runs ended since the agent started.
  bool health_checked = false;
  bool health_passing = true;
  uint64_t health_check_runs = 0;
  std::shared_ptr<const GpuSamples> gpus;  // GpuSampler::Latest(); null: none taken
  std::map<std::pair<int, uint64_t>, uint64_t> xid_errors;  // GpuSampler::XidCounts()
};

class AgentHttp {
 public:
  static StatusOr<std::unique_ptr<AgentHttp>> Start(const HttpEndpoint& endpoint,
                                                    const std::string& token);
  void Publish(std::shared_ptr<const AgentSnapshot> snapshot);
  std::string url() const { return server_->url(); }

  static std::string RenderMetrics(const AgentSnapshot& s);

 private:
  AgentHttp() = default;
  mutable std::mutex mu_;
  std::shared_ptr<const AgentSnapshot> snapshot_;  // guarded by mu_
  std::unique_ptr<HttpServer> server_;
};

}  // namespace cohort::agent
