#include "coordinator/placement_round.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "coordinator/gang_fit.h"

namespace cohort::coordinator {
namespace {

// CPU time of this thread: a round's cost without the time the OS gave to other processes.
int64_t ThreadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

ReplicaDemand DemandOf(const JobRecord& job, const ReplicaRecord& r) {
  const Resources& res = job.PoolOf(r).resources;
  return ReplicaDemand{res.gpus, res.cpus, res.memory_mb};
}

}  // namespace

ClusterView BuildClusterView(const NodeRegistry& nodes, JobController& jobs, int port_min,
                             int port_max, std::map<std::string, int>* node_index) {
  ClusterView view(port_min, port_max);
  // Replica ports are unique across the cluster; a port something listens on at any node is
  // never handed out (the replica placed there would fail to bind it).
  for (const auto& [id, n] : nodes.nodes()) {
    if (!n.ready) continue;
    for (int port : n.listening_ports) view.MarkPortUsed(port);
  }
  for (const auto& [id, n] : nodes.nodes()) {
    if (!n.ready || n.draining) continue;
    NodeFree f;
    f.node_id = id;
    for (const auto& g : n.gpus) f.free_gpus.push_back(g.index);
    std::sort(f.free_gpus.begin(), f.free_gpus.end());
    f.free_cpus = n.cpus;
    f.free_memory_mb = n.memory_mb;
    f.memory_unlimited = n.memory_mb <= 0;
    (*node_index)[id] = static_cast<int>(view.nodes.size());
    view.nodes.push_back(std::move(f));
  }
  auto account = [&](const JobRecord& job) {
    bool any = false;
    for (const auto& r : job.replicas) {
      if (!JobController::HoldsResources(r)) continue;
      any = true;
      view.MarkPortUsed(r.port);
      auto it = node_index->find(r.node_id);
      if (it == node_index->end()) continue;
      NodeFree& f = view.nodes[static_cast<size_t>(it->second)];
      for (int g : r.gpus) {
        auto pos = std::find(f.free_gpus.begin(), f.free_gpus.end(), g);
        if (pos != f.free_gpus.end()) f.free_gpus.erase(pos);
      }
      const Resources& res = job.PoolOf(r).resources;
      f.free_cpus -= res.cpus;
      f.free_memory_mb -= res.memory_mb;
    }
    if (any || job.state == JobState::PENDING || job.state == JobState::RUNNING) {
      view.MarkPortUsed(job.master_port);
      view.MarkPortUsed(job.bootstrap_port);
    }
  };
  for (const auto& [seq, job] : jobs.active()) account(*job);
  for (const JobRecord* job : jobs.EndedHolding()) account(*job);
  return view;
}

PlacementRoundStats RunPlacementRound(JobController& jobs, const NodeRegistry& nodes,
                                      const Scheduler& scheduler, int port_min, int port_max,
                                      int64_t now_ms) {
  auto t0 = std::chrono::steady_clock::now();
  int64_t cpu0 = ThreadCpuUs();
  std::map<std::string, int> node_index;
  ClusterView view = BuildClusterView(nodes, jobs, port_min, port_max, &node_index);
  auto node_name = [&](int i) { return view.nodes[static_cast<size_t>(i)].node_id; };

  // 1. Replicas of running jobs waiting to be placed again (restarts) come first.
  std::vector<JobRecord*> active;
  for (const auto& [seq, job] : jobs.active()) active.push_back(job);
  for (JobRecord* job : active) {
    if (job->state != JobState::PENDING && job->state != JobState::RUNNING) continue;
    for (auto& r : job->replicas) {
      if (r.placed() || IsFinal(r.state) || !r.launched) continue;
      auto pref = node_index.find(r.last_node);
      auto slot = Scheduler::PlaceOne(DemandOf(*job, r),
                                      pref == node_index.end() ? -1 : pref->second, view);
      if (!slot) {
        jobs.SetWaitingMessage(*job, r, "waiting for resources to restart");
        continue;
      }
      jobs.PlaceReplica(*job, r, node_name(slot->node), slot->gpus, slot->port, now_ms);
    }
  }

  // 2. Queued jobs, in submit order.
  std::vector<JobRecord*> queued;
  std::vector<JobRequest> requests;
  for (JobRecord* job : active) {
    if (job->state != JobState::QUEUED) continue;
    JobRequest req;
    req.name = job->name;
    req.waiting_since_ms = job->queued_since_ms;
    req.schedulable = !JobController::AnyHolding(*job);
    req.shared_replicas = &job->demands;
    queued.push_back(job);
    requests.push_back(std::move(req));
  }
  ScheduleResult result = scheduler.Schedule(requests, view, now_ms);
  for (const JobPlacement& p : result.placed) {
    JobRecord& job = *queued[p.request];
    std::vector<JobController::Slot> slots;
    slots.reserve(p.replicas.size());
    for (const ReplicaSlot& s : p.replicas) {
      slots.push_back(JobController::Slot{node_name(s.node), s.gpus, s.port});
    }
    jobs.PlaceJob(job, slots, p.master_port, p.bootstrap_port, now_ms);
  }
  ExplainWaits(queued, requests, result, view);
  PlacementRoundStats stats;
  stats.wall_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  stats.cpu_us = ThreadCpuUs() - cpu0;
  stats.queued = requests.size();
  stats.nodes = view.nodes.size();
  return stats;
}

}  // namespace cohort::coordinator
