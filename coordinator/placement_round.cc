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
    if (!n.schedulable()) continue;
    (*node_index)[id] = static_cast<int>(view.nodes.size());
    view.nodes.push_back(IdleCapacity(id, n));
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

void ResolveQueue(JobRecord& job, const QueueConfig& queues) {
  int q = queues.FindQueue(job.spec.scheduling.queue);
  job.queue_index = q < 0 ? 0 : q;
  auto p = queues.FindPriority(job.spec.scheduling.priority);
  if (!p) p = queues.FindPriority("normal");
  job.priority = p.value_or(0);
}

std::vector<QueueState> QueueUsage(JobController& jobs, const QueueConfig& queues) {
  std::vector<QueueState> out;
  for (const QueueDef& q : queues.queues()) {
    out.push_back(QueueState{q.gpu_quota, q.cpu_quota, q.weight, 0, 0});
  }
  auto count = [&](JobRecord& job) {
    if (job.queue_index < 0) ResolveQueue(job, queues);
    QueueState& q = out[static_cast<size_t>(job.queue_index)];
    for (const auto& r : job.replicas) {
      if (!JobController::HoldsResources(r)) continue;
      const Resources& res = job.PoolOf(r).resources;
      q.gpus_used += res.gpus;
      q.cpus_used += res.cpus;
    }
  };
  for (const auto& [seq, job] : jobs.active()) count(*job);
  for (const JobRecord* job : jobs.EndedHolding()) count(*jobs.FindJob(job->name));
  return out;
}

PlacementRoundStats RunPlacementRound(JobController& jobs, const NodeRegistry& nodes,
                                      const Scheduler& scheduler, const QueueConfig& queues,
                                      int port_min, int port_max, int64_t now_ms) {
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
      auto slot =
          Scheduler::PlaceOne(DemandOf(*job, r), pref == node_index.end() ? -1 : pref->second, view,
                              job->needs_shared_storage);
      if (!slot) {
        // A job on the shared output root says when that is what holds it (few nodes share it).
        jobs.SetWaitingMessage(
            *job, r,
            job->needs_shared_storage
                ? "waiting to restart: " + WaitingReason({DemandOf(*job, r)}, view, true)
                : "waiting for resources to restart");
        continue;
      }
      jobs.PlaceReplica(*job, r, node_name(slot->node), slot->gpus, slot->port, now_ms);
    }
  }

  // 2. Queued jobs, in submit order, in their queues; running jobs as preemption candidates.
  ScheduleInput input;
  input.queues = QueueUsage(jobs, queues);
  for (const auto& [id, n] : nodes.nodes()) {
    if (!n.schedulable()) continue;
    input.cluster_gpus += static_cast<int64_t>(n.gpus.size());
    input.cluster_cpus += n.cpus;
  }
  std::vector<JobRecord*> running_jobs;
  std::vector<JobRecord*> queued;
  std::vector<JobRequest> requests;
  for (JobRecord* job : active) {
    if (job->state == JobState::PENDING || job->state == JobState::RUNNING) {
      RunningJob rj;
      for (const auto& r : job->replicas) {
        if (!JobController::HoldsResources(r) || r.stop_requested) continue;
        const Resources& res = job->PoolOf(r).resources;
        auto it = node_index.find(r.node_id);
        rj.held.push_back(
            HeldSlot{it == node_index.end() ? -1 : it->second, r.gpus, res.cpus, res.memory_mb});
        rj.gpus += res.gpus;
        rj.cpus += res.cpus;
      }
      if (rj.held.empty()) continue;
      rj.name = job->name;
      rj.queue = job->queue_index;
      rj.priority = job->priority;
      rj.start_ms = job->queued_since_ms;  // when it last entered the queue, i.e. was last placed
      running_jobs.push_back(job);
      input.running.push_back(std::move(rj));
      continue;
    }
    if (job->state != JobState::QUEUED) continue;
    JobRequest req;
    req.name = job->name;
    req.waiting_since_ms = job->queued_since_ms;
    req.schedulable = !JobController::AnyHolding(*job);
    req.shared_replicas = &job->demands;
    req.queue = job->queue_index;
    req.priority = job->priority;
    req.needs_shared_storage = job->needs_shared_storage;
    const std::vector<std::string>& victims = jobs.PreemptedFor(*job);
    if (!victims.empty()) {
      size_t stopping = 0;
      for (const auto& v : victims) {
        const JobRecord* victim = jobs.FindJob(v);
        if (victim != nullptr && JobController::AnyHolding(*victim)) ++stopping;
      }
      req.may_preempt = stopping == 0;
      req.nominated = stopping == 0;
    }
    queued.push_back(job);
    requests.push_back(std::move(req));
  }
  ScheduleResult result = scheduler.Schedule(requests, view, now_ms, input);
  for (const JobPlacement& p : result.placed) {
    JobRecord& job = *queued[p.request];
    std::vector<JobController::Slot> slots;
    slots.reserve(p.replicas.size());
    for (const ReplicaSlot& s : p.replicas) {
      slots.push_back(JobController::Slot{node_name(s.node), s.gpus, s.port});
    }
    jobs.PlaceJob(job, slots, p.master_port, p.bootstrap_port, now_ms);
  }
  for (const Preemption& p : result.preemptions) {
    JobRecord& preemptor = *queued[p.request];
    std::string by = "preempted by job " + preemptor.name + " (priority " +
                     preemptor.spec.scheduling.priority + ", queue " +
                     preemptor.spec.scheduling.queue + ")";
    std::vector<std::string> names;
    std::string event;
    for (size_t v : p.victims) {
      JobRecord& victim = *running_jobs[v];
      names.push_back(victim.name);
      event += (event.empty() ? "" : ", ") + victim.name + " (priority " +
               victim.spec.scheduling.priority + ", queue " + victim.spec.scheduling.queue + ")";
      jobs.PreemptJob(victim, by, now_ms);
    }
    event = std::string("preempted job") + (names.size() == 1 ? " " : "s ") + event + " to run";
    jobs.NotePreemption(preemptor, names, event, now_ms);
  }
  ExplainWaits(queued, requests, result, view);
  for (JobRecord* job : queued) {
    if (job->state != JobState::QUEUED) continue;
    std::string stopping;
    for (const auto& v : jobs.PreemptedFor(*job)) {
      const JobRecord* victim = jobs.FindJob(v);
      if (victim != nullptr && JobController::AnyHolding(*victim)) {
        stopping += (stopping.empty() ? "" : ", ") + v;
      }
    }
    if (!stopping.empty()) {
      job->waiting_reason =
          "waiting for the jobs it preempted to stop (within their grace period): " + stopping;
    }
  }
  PlacementRoundStats stats;
  stats.wall_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  stats.cpu_us = ThreadCpuUs() - cpu0;
  stats.queued = requests.size();
  stats.nodes = view.nodes.size();
  stats.preemptions = result.preemptions.size();
  return stats;
}

}  // namespace cohort::coordinator
