// cohort-agent: parse flags, build the inventory and the launcher, run the loop until SIGTERM or
// SIGINT, then preempt the replicas (agent/agent.h) and exit 0. SIGHUP (systemctl reload) puts
// the GPUs that Xids took out of service back, once their admin has reset them.
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>

#include "agent/agent.h"
#include "agent/agent_options.h"
#include "agent/cgroup.h"
#include "agent/proc_scan.h"
#include "common/logging.h"
#include "common/service_notify.h"
#include "common/version.h"

namespace {
std::atomic<bool> g_stop{false};
std::atomic<int> g_reloads{0};
void OnStopSignal(int) { g_stop.store(true); }
void OnReloadSignal(int) { g_reloads.fetch_add(1); }
}  // namespace

int main(int argc, char** argv) {
  using namespace cohort;
  auto flags = agent::ParseAgentFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "cohort-agent: %s (see --help)\n", flags.status().message().c_str());
    return 2;
  }
  if (flags->help) return std::printf("%s", flags->usage.c_str()) < 0;
  if (flags->version) return std::puts("cohort-agent " COHORT_VERSION) < 0;
  InitLogging("cohort-agent", flags->log_level);
  if (Status s = agent::LoadSecurity(*flags); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return 2;
  }
  flags->config.inventory = *agent::BuildInventory(*flags);
  agent::AddGpuLabels(flags->config.inventory.gpus, &flags->config.labels);
  agent::AddRdmaLabels(agent::RdmaDevices(), &flags->config.labels);
  flags->config.socket_interface = agent::InterfaceOfAddress(flags->config.advertise_address);
  if (flags->config.socket_interface.empty()) {
    spdlog::warn(
        "no interface of this node holds its advertise address {}: replicas' gloo binds "
        "where their hostname resolves unless their job sets GLOO_SOCKET_IFNAME",
        flags->config.advertise_address);
  } else {
    spdlog::info("replicas' gloo binds to {}, the interface of {} (GLOO_SOCKET_IFNAME)",
                 flags->config.socket_interface, flags->config.advertise_address);
  }
  flags->config.reap_all_children = ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGHUP, OnReloadSignal);
  std::signal(SIGPIPE, SIG_IGN);
  zmq::context_t context;
  MonotonicClock clock;
  auto agent = agent::BuildAgent(context, *flags, &clock);
  if (!agent.ok()) {
    spdlog::error("{}", agent.status().ToString());
    return 1;
  }
  spdlog::info("node {} ({}): {} GPU(s), {} CPU(s), {} MiB; coordinator {}", flags->config.node_id,
               flags->config.advertise_address, flags->config.inventory.gpus.size(),
               flags->config.inventory.cpus, flags->config.inventory.memory_mb,
               flags->config.coordinator);
  NotifyReady();
  Status s = (*agent)->Run(g_stop, &g_reloads);
  if (!s.ok()) spdlog::error("{}", s.ToString());
  // No process of a replica outlives the agent: as a subreaper it inherited every orphan of its
  // replicas, so whatever is still below it now (one that rewrote its environment) dies too.
  if (flags->config.reap_all_children) {
    int left = agent::KillUntilNoneLeft([] { return agent::Descendants(::getpid()); });
    if (left > 0) spdlog::warn("killed {} process(es) left by replicas at shutdown", left);
  }
  // Nor does its level of cgroups, once every replica cgroup under it went with its replica (one
  // that did not stays, for the next start's sweep).
  const std::string cgroup_dir = (*agent)->config().cgroup_dir;
  agent->reset();
  if (!cgroup_dir.empty() && !agent::CgroupManager::Remove(cgroup_dir).ok()) {
    spdlog::info("left the cgroup {}: replica cgroups remain under it", cgroup_dir);
  }
  return s.ok() ? 0 : 1;
}
