#include "agent/http_service.h"

#include <map>

#include "common/build_version.h"
#include "common/prometheus_text.h"

namespace cohort::agent {
namespace {

using Type = PrometheusText::Type;

}  // namespace

std::string AgentHttp::RenderMetrics(const AgentSnapshot& s) {
  PrometheusText t;
  std::string no_cgroups =
      s.cgroups ? ""
                : " No samples: replicas on this node have no cgroup (" + s.cgroups_reason + ").";
  std::vector<std::pair<const AttemptView*, CgroupUsage>> usage;
  for (const AttemptView& a : s.attempts) {
    if (!a.cgroup.empty()) usage.emplace_back(&a, ReadCgroupUsage(a.cgroup));
  }
  auto labels = [&s](const AttemptView& a) -> PrometheusLabels {
    return {{"node", s.node_id},
            {"job", a.job},
            {"replica", a.replica},
            {"attempt", std::to_string(a.attempt)}};
  };
  auto family = [&](const char* name, Type type, const std::string& help,
                    double CgroupUsage::*field) {
    t.Family(name, type, help + no_cgroups);
    for (const auto& [a, u] : usage) {
      if (u.*field >= 0) t.Sample(name, labels(*a), u.*field);
    }
  };
  family("cohort_replica_cpu_seconds_total", Type::kCounter,
         "CPU time used by a replica attempt's processes (cgroup cpu.stat usage_usec).",
         &CgroupUsage::cpu_seconds);
  family("cohort_replica_memory_bytes", Type::kGauge,
         "Memory used by a replica attempt's processes (cgroup memory.current; none where the "
         "memory controller is not enabled for the agent's cgroups).",
         &CgroupUsage::memory_bytes);
  family("cohort_replica_io_read_bytes_total", Type::kCounter,
         "Bytes read from block devices by a replica attempt (cgroup io.stat rbytes; none "
         "where the io controller is not enabled).",
         &CgroupUsage::io_read_bytes);
  family("cohort_replica_io_write_bytes_total", Type::kCounter,
         "Bytes written to block devices by a replica attempt (cgroup io.stat wbytes; none "
         "where the io controller is not enabled).",
         &CgroupUsage::io_write_bytes);

  static const GpuSamples kNone(Unavailable("no GPU sample is taken"));
  const GpuSamples& gpus = s.gpus ? *s.gpus : kNone;
  std::string no_gpus = gpus.ok() ? "" : " No samples: " + gpus.status().message() + ".";
  std::map<int, const AttemptView*> owner;
  for (const AttemptView& a : s.attempts) {
    for (int g : a.gpus) owner[g] = &a;
  }
  auto gpu_labels = [&](const GpuSample& g) -> PrometheusLabels {
    auto it = owner.find(g.index);
    return {{"node", s.node_id},
            {"gpu", std::to_string(g.index)},
            {"uuid", g.uuid},
            {"job", it == owner.end() ? "" : it->second->job},
            {"replica", it == owner.end() ? "" : it->second->replica}};
  };
  t.Family("cohort_gpu_utilization_percent", Type::kGauge,
           "GPU utilisation over NVML's last sample period, with the replica it is assigned "
           "to." +
               no_gpus);
  if (gpus.ok()) {
    for (const GpuSample& g : *gpus) {
      if (g.read) t.Sample("cohort_gpu_utilization_percent", gpu_labels(g), g.utilization);
    }
  }
  t.Family("cohort_gpu_memory_used_bytes", Type::kGauge,
           "GPU memory in use (NVML), with the replica the GPU is assigned to." + no_gpus);
  if (gpus.ok()) {
    for (const GpuSample& g : *gpus) {
      if (g.read) t.Sample("cohort_gpu_memory_used_bytes", gpu_labels(g), g.memory_used_bytes);
    }
  }
  t.Family("cohort_gpu_memory_total_bytes", Type::kGauge, "GPU memory (NVML)." + no_gpus);
  if (gpus.ok()) {
    for (const GpuSample& g : *gpus) {
      if (g.read) t.Sample("cohort_gpu_memory_total_bytes", gpu_labels(g), g.memory_total_bytes);
    }
  }
  t.Family("cohort_gpu_healthy", Type::kGauge,
           "1 while NVML finds the GPU fit for work, 0 while it finds it unfit (uncorrectable ECC "
           "errors, a row remapping pending or failed, lost from the bus, an Xid error until the "
           "agent's reload): nothing new is placed on it." +
               no_gpus);
  if (gpus.ok()) {
    for (const GpuSample& g : *gpus) {
      t.Sample("cohort_gpu_healthy", gpu_labels(g), g.problem.empty() ? 1 : 0);
    }
  }
  t.Family("cohort_gpu_xid_errors_total", Type::kCounter,
           "Critical Xid errors the NVIDIA driver reported for the GPU since the agent started "
           "(NVML's events; gpu \"\" when it named none), the applications' own (13, 31, 43, 45, "
           "68, 109) among them.");
  for (const auto& [key, count] : s.xid_errors) {
    t.Sample("cohort_gpu_xid_errors_total",
             {{"node", s.node_id},
              {"gpu", key.first < 0 ? "" : std::to_string(key.first)},
              {"xid", std::to_string(key.second)}},
             static_cast<double>(count));
  }

  t.Family("cohort_replica_collective_lateness_seconds", Type::kGauge,
           "How late a replica enters its job's collective operations after the job's first "
           "rank: the median over the coordinator's window of the last operations (a straggler "
           "is persistently late). Only jobs whose ranks keep a Cohort flight recorder.");
  for (const LatenessView& l : s.lateness) {
    t.Sample("cohort_replica_collective_lateness_seconds",
             {{"node", s.node_id}, {"job", l.job}, {"replica", l.replica}}, l.median_ms / 1000);
  }
  t.Family("cohort_replica_collective_lateness_samples", Type::kGauge,
           "Operations behind cohort_replica_collective_lateness_seconds (the window's fill).");
  for (const LatenessView& l : s.lateness) {
    t.Sample("cohort_replica_collective_lateness_samples",
             {{"node", s.node_id}, {"job", l.job}, {"replica", l.replica}}, l.samples);
  }

  t.Family("cohort_agent_build_info", Type::kGauge,
           "Always 1, labelled with the build this agent runs (its --version: the release and "
           "the commit it was built from).");
  t.Sample("cohort_agent_build_info",
           {{"node", s.node_id}, {"version", std::string(CohortBuildVersion())}}, 1);
  t.Family("cohort_agent_replicas", Type::kGauge, "Replica attempts running on this node.");
  t.Sample("cohort_agent_replicas", {{"node", s.node_id}}, s.attempts.size());
  t.Family("cohort_agent_attempts_started_total", Type::kCounter,
           "Replica attempts this agent launched (since it started).");
  t.Sample("cohort_agent_attempts_started_total", {{"node", s.node_id}}, s.attempts_started);
  t.Family("cohort_agent_log_bytes_shipped_total", Type::kCounter,
           "Replica log bytes the coordinator acknowledged (since the agent started).");
  t.Sample("cohort_agent_log_bytes_shipped_total", {{"node", s.node_id}}, s.log_bytes_shipped);
  t.Family("cohort_agent_replicas_fenced_total", Type::kCounter,
           "Replica attempts this agent stopped because the coordinator was silent past its "
           "--fence-after (since the agent started).");
  t.Sample("cohort_agent_replicas_fenced_total", {{"node", s.node_id}}, s.replicas_fenced);
  if (s.health_checked) {  // a node without --health-check has no such series
    t.Family("cohort_agent_health_check_passing", Type::kGauge,
             "1 while this node's --health-check passes, 0 while it fails (nothing new is placed "
             "here then; its reason is in cohort nodes).");
    t.Sample("cohort_agent_health_check_passing", {{"node", s.node_id}}, s.health_passing ? 1 : 0);
    t.Family("cohort_agent_health_check_runs_total", Type::kCounter,
             "Runs of this node's --health-check that ended (since the agent started).");
    t.Sample("cohort_agent_health_check_runs_total", {{"node", s.node_id}}, s.health_check_runs);
  }
  return t.Take();
}

StatusOr<std::unique_ptr<AgentHttp>> AgentHttp::Start(const HttpEndpoint& endpoint,
                                                      const std::string& token) {
  std::unique_ptr<AgentHttp> h(new AgentHttp());
  AgentHttp* self = h.get();
  std::map<std::string, HttpHandler> routes = {
      {"/metrics", [self](const HttpRequest&) {
         std::shared_ptr<const AgentSnapshot> s;
         {
           std::lock_guard<std::mutex> lock(self->mu_);
           s = self->snapshot_;
         }
         if (!s) return HttpResponse{503, "text/plain; charset=utf-8", "the agent is starting\n"};
         return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", RenderMetrics(*s)};
       }}};
  HttpServerOptions options;
  options.endpoint = endpoint;
  options.token = token;
  options.threads = 2;
  COHORT_ASSIGN_OR_RETURN(h->server_, HttpServer::Start(options, std::move(routes)));
  return h;
}

void AgentHttp::Publish(std::shared_ptr<const AgentSnapshot> snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_ = std::move(snapshot);
}

}  // namespace cohort::agent
