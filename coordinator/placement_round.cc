#include "coordinator/placement_round.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
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

// Every schedulable node's whole capacity but the GPUs its agent finds unfit, a port space per
// port domain, and the ports something listens on at a READY node (the replica placed there would
// fail to bind one).
ClusterView NodesView(const NodeRegistry& nodes, int port_min, int port_max,
                      NodeIndex* node_index) {
  ClusterView view(port_min, port_max);
  node_index->reserve(nodes.nodes().size());
  for (const auto& [id, n] : nodes.nodes()) {
    const int space = view.SpaceOfDomain(n.port_domain_id);
    NodePlace place{-1, space};
    if (n.ready) {
      for (int port : n.listening_ports) view.MarkPortUsed(space, port);
    }
    if (n.schedulable()) {
      place.node = static_cast<int>(view.nodes.size());
      view.nodes.push_back(IdleCapacity(id, n));
      NodeFree& free = view.nodes.back();
      free.port_space = space;
      free.unfit_gpus = static_cast<int>(
          std::erase_if(free.free_gpus, [&n = n](int g) { return n.unhealthy_gpus.count(g) > 0; }));
      free.cordoned_gpus = static_cast<int>(
          std::erase_if(free.free_gpus, [&n = n](int g) { return n.cordoned_gpus.count(g) > 0; }));
    }
    node_index->emplace(id, place);
  }
  return view;
}

// The port space of `node_id` (where it listens), or every space for a node not known now.
int PortSpaceOf(const NodeIndex& node_index, const std::string& node_id) {
  auto it = node_index.find(node_id);
  return it == node_index.end() ? ClusterView::kEverySpace : it->second.port_space;
}

// Where a job's master and bootstrap ports are bound: its chief's (replica 0's) node, or the node
// it last ran on while it waits to restart.
const std::string& JobPortsNode(const JobRecord& job) {
  static const std::string kNone;
  if (job.replicas.empty()) return kNone;
  const ReplicaRecord& chief = job.replicas.front();
  return chief.placed() ? chief.node_id : chief.last_node;
}

std::vector<QueueState> NoUsage(const QueueConfig& queues) {
  std::vector<QueueState> out;
  for (const QueueDef& q : queues.queues()) {
    out.push_back(QueueState{q.gpu_quota, q.cpu_quota, q.weight, 0, 0});
  }
  return out;
}

// What `job`'s replicas hold comes out of `view` and into its queue's `usage`; their ports, and
// the job's own while it holds anything or is placed (`live`), are marked used.
void AccountHeld(JobRecord& job, bool live, const QueueConfig& queues, ClusterView& view,
                 const NodeIndex& node_index, std::vector<QueueState>& usage) {
  if (job.queue_index < 0) ResolveQueue(job, queues);
  QueueState& q = usage[static_cast<size_t>(job.queue_index)];
  bool any = false;
  for (const auto& r : job.replicas) {
    if (!JobController::HoldsResources(r)) continue;
    any = true;
    auto it = node_index.find(r.node_id);
    view.MarkPortUsed(it == node_index.end() ? ClusterView::kEverySpace : it->second.port_space,
                      r.port);
    const Resources& res = job.PoolOf(r).resources;
    q.gpus_used += res.gpus;
    q.cpus_used += res.cpus;
    if (it == node_index.end() || it->second.node < 0) continue;
    NodeFree& f = view.nodes[static_cast<size_t>(it->second.node)];
    for (int g : r.gpus) {
      auto pos = std::find(f.free_gpus.begin(), f.free_gpus.end(), g);
      if (pos != f.free_gpus.end()) f.free_gpus.erase(pos);
    }
    f.free_cpus -= res.cpus;
    f.free_memory_mb -= res.memory_mb;
  }
  if (any || live) {
    const int space = PortSpaceOf(node_index, JobPortsNode(job));
    view.MarkPortUsed(space, job.master_port);
    view.MarkPortUsed(space, job.bootstrap_port);
  }
}

// The chief of running `job` restarts in port space `space`, not where the job's master and
// bootstrap ports are held: they stay when both are free there, else the job gets two new ones.
void MoveJobPorts(JobController& jobs, JobRecord& job, int space, ClusterView& view,
                  int64_t now_ms) {
  if (!view.Used(space, job.master_port) && !view.Used(space, job.bootstrap_port) &&
      job.master_port != job.bootstrap_port) {
    view.MarkPortUsed(space, job.master_port);
    view.MarkPortUsed(space, job.bootstrap_port);
    return;
  }
  int master = view.TakePort(space);
  int bootstrap = view.TakePort(space);
  jobs.SetJobPorts(job, master, bootstrap, now_ms);
}

// The nodes (view indices) that replicas of `job`'s one_per_node pools hold: where a replica of
// such a pool placed alone may not go (Scheduler, "One per node").
SpreadOccupied SpreadOccupiedBy(const JobRecord& job, const NodeIndex& node_index) {
  SpreadOccupied out;
  for (const auto& r : job.replicas) {
    const int group = SpreadGroup(job.PoolOf(r));
    if (group == 0 || !JobController::HoldsResources(r)) continue;
    auto it = node_index.find(r.node_id);
    if (it != node_index.end()) out.emplace_back(group, it->second.node);
  }
  return out;
}

// What a replica of `job` placed alone (a restart, elastic growth) of `demand` (its pool's) tries,
// in order: with a topology, `demand` narrowed to each level's value where the job's replicas hold
// resources (tightest level first, each with the required level's value): the value most of them
// share, so a job its preferred topology could not keep together tries the rack of most of its
// replicas, not that of its chief (of equal counts, the value reached first in replica order);
// then, without a required level, anywhere (the Scheduler's "Topology"). `demand` alone when it
// has no topology or no replica of the job holds resources.
std::vector<ReplicaDemand> JobDomains(const JobRecord& job, const ReplicaDemand& demand,
                                      const NodeRegistry& nodes) {
  if (demand.topology == nullptr) return {demand};
  std::vector<const NodeRecord*> held;  // the node of each replica holding resources
  for (const auto& r : job.replicas) {
    if (!JobController::HoldsResources(r)) continue;
    if (const NodeRecord* node = nodes.Find(r.node_id); node != nullptr) held.push_back(node);
  }
  if (held.empty()) return {demand};
  auto most_held = [&](const std::string& key) -> const std::string* {
    std::map<std::string_view, int> count;
    const std::string* best = nullptr;
    int best_count = 0;
    for (const NodeRecord* node : held) {
      auto value = node->labels.find(key);
      if (value == node->labels.end()) continue;
      if (const int c = ++count[value->second]; c > best_count) {
        best_count = c;
        best = &value->second;
      }
    }
    return best;
  };
  const std::string* required = RequiredTopology(demand);
  NodeLabels outer;
  if (required != nullptr) {
    const std::string* value = most_held(*required);
    if (value == nullptr) return {demand};
    outer.emplace(*required, *value);
  }
  std::vector<ReplicaDemand> domains;
  for (const std::string& key : *demand.topology) {
    const std::string* value = most_held(key);
    if (value == nullptr) continue;
    NodeLabels domain = outer;
    domain[key] = *value;
    domains.push_back(InDomain(demand, domain));
  }
  if (required == nullptr) domains.push_back(InDomain(demand, {}));
  return domains;
}

// `place`'s answer for the first of `domains` (JobDomains) where it found room; none when none.
template <typename Place>
auto PlaceInJobDomains(const std::vector<ReplicaDemand>& domains, const Place& place) {
  decltype(place(domains.front())) slots;
  for (const ReplicaDemand& domain : domains) {
    slots = place(domain);
    if (slots) break;
  }
  return slots;
}

bool IsLive(const JobRecord& job) {
  return job.state == JobState::PENDING || job.state == JobState::RUNNING;
}

// A replica of `job` lost with its node, whose agent may still run it at `now_ms` (coordinator/
// job_controller.h, "Fencing"); nullptr when none.
const ReplicaRecord* FencedReplica(const JobRecord& job, int64_t now_ms) {
  for (const auto& r : job.replicas) {
    if (r.fenced_until_ms > now_ms) return &r;
  }
  return nullptr;
}

// "NAME (priority P, queue Q)": how preemptions name a job.
std::string WithClass(const JobRecord& job) {
  return job.name + " (priority " + job.spec.scheduling.priority + ", queue " +
         job.spec.scheduling.queue + ")";
}

// What a replica (or its queued job) held by a fence waits for.
std::string FenceWait(const ReplicaRecord& r) {
  const std::string& node = r.placed() ? r.node_id : r.last_node;
  return "waiting until the agent on " + node + " has surely stopped " + r.name + " attempt " +
         std::to_string(r.attempt) + " (fencing: its node was lost, and may only be cut off)";
}

// The request a queued job makes of the Scheduler.
JobRequest RequestOf(const JobController& jobs, const JobRecord& job, int64_t now_ms) {
  JobRequest req;
  req.name = job.name;
  req.waiting_since_ms = job.queued_since_ms;
  req.schedulable =
      !job.may_hold || (!JobController::AnyHolding(job) && FencedReplica(job, now_ms) == nullptr);
  req.shared_replicas = &job.demands;
  req.shape_id = job.shape_id;
  req.queue = job.queue_index;
  req.priority = job.priority;
  req.needs_shared_storage = job.needs_shared_storage;
  const std::vector<std::string>& victims = jobs.PreemptedFor(job);
  if (!victims.empty()) {
    size_t stopping = 0;
    for (const auto& v : victims) {
      const JobRecord* victim = jobs.FindJob(v);
      if (victim != nullptr && JobController::AnyHolding(*victim)) ++stopping;
    }
    req.may_preempt = stopping == 0;
    req.nominated = stopping == 0;
  }
  return req;
}

// The jobs a round works on, from one walk over the active ones: a round's cost is mostly this
// walk (100,000 queued jobs are 100,000 records scattered in memory), so each record is read once
// here, for what it holds (accounted in `view` and `usage` on the way) and what it asks.
struct RoundJobs {
  std::vector<JobRecord*> live;      // PENDING or RUNNING, in submit order
  std::vector<JobRecord*> queued;    // QUEUED (not waiting for other jobs), in submit order
  std::vector<JobRequest> requests;  // queued[i] asks requests[i] (with `with_requests`)
  // Queued jobs held by a fence (FencedReplica), nothing else of theirs holding resources.
  std::vector<JobRecord*> fenced;
  std::vector<size_t> elastic;  // indices into `queued` of elastic jobs (with `with_requests`)
};

RoundJobs WalkJobs(JobController& jobs, const QueueConfig& queues, ClusterView& view,
                   const NodeIndex& node_index, std::vector<QueueState>& usage, bool with_requests,
                   int64_t now_ms) {
  RoundJobs out;
  out.queued.reserve(jobs.active().size());
  if (with_requests) out.requests.reserve(jobs.active().size());
  // Records are cache misses (100,000 of them, spread over the heap): the one kPrefetchAhead
  // further on is asked for while this one is read, so that the misses overlap.
  constexpr size_t kPrefetchAhead = 8;
  const auto& active = jobs.active();
  for (size_t i = 0; i < active.size(); ++i) {
    if (i + kPrefetchAhead < active.size())
      __builtin_prefetch(active[i + kPrefetchAhead].second, 1);
    JobRecord* job = active[i].second;
    if (job->queue_index < 0) ResolveQueue(*job, queues);
    const bool live = IsLive(*job);
    if (live || job->may_hold) AccountHeld(*job, live, queues, view, node_index, usage);
    if (live) {
      out.live.push_back(job);
    } else if (job->state == JobState::QUEUED && !job->waits_for_jobs) {
      out.queued.push_back(job);
      if (with_requests) {
        out.requests.push_back(RequestOf(jobs, *job, now_ms));
        if (job->may_hold && !out.requests.back().schedulable && !JobController::AnyHolding(*job)) {
          out.fenced.push_back(job);
        }
        if (job->elastic) out.elastic.push_back(out.queued.size() - 1);
      }
    }
  }
  for (const JobRecord* ended : jobs.EndedHolding()) {
    AccountHeld(*jobs.FindJob(ended->name), false, queues, view, node_index, usage);
  }
  return out;
}

// Whether a queued job could preempt a running one under the Scheduler's rules
// (coordinator/scheduler.h, "Preemption"): a victim of its own queue has a lower priority, and one
// of another queue needs two queues. So with one queue, no queued job above the lowest priority
// running is a preemptor, and the round need not list the running jobs (a slot per replica they
// hold) as candidates.
bool PreemptionPossible(const std::vector<QueueState>& queues, const std::vector<JobRecord*>& live,
                        const std::vector<JobRequest>& requests) {
  if (live.empty() || requests.empty()) return false;
  if (queues.size() > 1) return true;
  int lowest_running = live.front()->priority;
  for (const JobRecord* job : live) lowest_running = std::min(lowest_running, job->priority);
  return std::any_of(requests.begin(), requests.end(),
                     [&](const JobRequest& r) { return r.priority > lowest_running; });
}

// The most workers, below `asked` and at least its min_replicas, with which elastic `job` fits
// `view` whole now; nullopt when none does.
std::optional<int> ElasticWorkersThatFit(const JobRecord& job, int asked, const ClusterView& view) {
  for (int k = asked - 1; k >= *job.spec.MinWorkers(); --k) {
    if (Scheduler::FindGang(DemandsWithWorkers(job, k), view, job.needs_shared_storage)) return k;
  }
  return std::nullopt;
}

// An elastic queued job's ask comes down to what fits; a running one with idle workers grows
// into room nobody queued waits for (see ElasticOptions).
void ResizeElasticJobs(JobController& jobs, const NodeRegistry& nodes, const RoundJobs& round,
                       const ScheduleResult& result, ClusterView& view, const NodeIndex& node_index,
                       const ElasticOptions& elastic, int64_t now_ms) {
  if (round.elastic.empty() && std::none_of(round.live.begin(), round.live.end(),
                                            [](const JobRecord* j) { return j->elastic; })) {
    return;
  }
  std::vector<bool> placed(round.queued.size(), false);
  for (const JobPlacement& p : result.placed) placed[p.request] = true;
  auto waits_for_room = [&](size_t i) {
    const JobRequest& req = round.requests[i];
    return !placed[i] && req.schedulable && req.may_preempt;
  };
  bool room_wanted = false;
  for (size_t i = 0; i < round.queued.size() && !room_wanted; ++i) room_wanted = waits_for_room(i);
  for (size_t i : round.elastic) {
    if (!waits_for_room(i)) continue;
    JobRecord& job = *round.queued[i];
    if (now_ms - job.queued_since_ms < elastic.settle_ms) continue;
    if (result.waiting_behind.size() > i && result.waiting_behind[i] >= 0) continue;
    if (!jobs.PreemptedFor(job).empty()) continue;
    const int asked =
        job.elastic_workers < 0 ? JobController::ElasticMaxWorkers(job) : job.elastic_workers;
    if (std::optional<int> fits = ElasticWorkersThatFit(job, asked, view)) {
      jobs.ShrinkElastic(job, *fits);
    }
  }
  if (room_wanted) return;
  for (JobRecord* job : round.live) {
    if (!job->elastic || job->state != JobState::RUNNING) continue;
    const int running = JobController::ElasticWorkersRunning(*job);
    const int max = JobController::ElasticMaxWorkers(*job);
    const ReplicaRecord& chief = job->replicas.front();
    if (running >= max || now_ms - chief.state_time_ms < elastic.settle_ms) continue;
    const ReplicaDemand worker = PoolDemand(job->spec, *job->spec.FindPool(Role::kWorker));
    const std::vector<ReplicaDemand> domains = JobDomains(*job, worker, nodes);
    for (int more = max - running; more >= 1; --more) {
      auto slots = PlaceInJobDomains(domains, [&](const ReplicaDemand& domain) {
        return Scheduler::PlaceGang(std::vector<ReplicaDemand>(static_cast<size_t>(more), domain),
                                    view, job->needs_shared_storage, Scheduler::PortNeed::kReplicas,
                                    SpreadOccupiedBy(*job, node_index));
      });
      if (!slots) continue;
      std::set<std::string> where;
      for (const ReplicaSlot& s : *slots)
        where.insert(view.nodes[static_cast<size_t>(s.node)].node_id);
      std::string on;
      for (const auto& n : where) on += (on.empty() ? "" : ", ") + n;
      jobs.GrowElastic(*job, running + more,
                       "room for " + std::to_string(more) + " more worker" +
                           (more == 1 ? "" : "s") + " on " + on,
                       now_ms);
      break;
    }
  }
}

// Places the replicas of running jobs that wait to be placed again (restarts; step 1 of a round),
// each on its previous node when it fits, taking from `view` and counting them in `usage`.
// `apply`: the JobController places them (and says why the others wait); false for a preview,
// where only the view and the usage change (not the job's own two ports, which move with a chief
// placed in another port space).
void PlaceRestarts(JobController& jobs, const NodeRegistry& nodes, const RoundJobs& round,
                   ClusterView& view, const NodeIndex& node_index, std::vector<QueueState>& usage,
                   int64_t now_ms, bool apply) {
  auto node_name = [&](int i) { return view.nodes[static_cast<size_t>(i)].node_id; };
  for (JobRecord* job : round.live) {
    for (auto& r : job->replicas) {
      if (r.placed() || IsFinal(r.state) || !r.launched) continue;
      if (r.fenced_until_ms > now_ms) {
        if (apply) jobs.SetWaitingMessage(*job, r, FenceWait(r));
        continue;
      }
      const ReplicaDemand pool_demand = PoolDemand(job->spec, job->PoolOf(r));
      const std::vector<ReplicaDemand> domains = JobDomains(*job, pool_demand, nodes);
      auto pref = node_index.find(r.last_node);
      const bool chief = &r == &job->replicas.front();
      const int ports_space = chief ? PortSpaceOf(node_index, JobPortsNode(*job)) : 0;
      auto slot = PlaceInJobDomains(domains, [&](const ReplicaDemand& domain) {
        return Scheduler::PlaceOne(domain, pref == node_index.end() ? -1 : pref->second.node, view,
                                   job->needs_shared_storage, SpreadOccupiedBy(*job, node_index));
      });
      if (!slot) {
        if (!apply) continue;
        // A job on the shared output root says when that is what holds it (few nodes share it),
        // and one that keeps to one label value which.
        const ReplicaDemand& widest = domains.back();
        std::string waiting = job->needs_shared_storage
                                  ? "waiting to restart: " + WaitingReason({widest}, view, true)
                                  : "waiting for resources to restart";
        if (const std::string* required = RequiredTopology(pool_demand);
            required != nullptr && widest.topology == nullptr) {
          waiting += " on its " + *required + "'s nodes (required_topology)";
        }
        jobs.SetWaitingMessage(*job, r, waiting);
        continue;
      }
      QueueState& q = usage[static_cast<size_t>(job->queue_index)];
      q.gpus_used += pool_demand.gpus;
      q.cpus_used += pool_demand.cpus;
      if (!apply) continue;
      jobs.PlaceReplica(*job, r, node_name(slot->node), slot->gpus, slot->port, now_ms);
      const int space = view.nodes[static_cast<size_t>(slot->node)].port_space;
      if (chief && space != ports_space) MoveJobPorts(jobs, *job, space, view, now_ms);
    }
  }
}

// What a round starts from: the cluster view and each queue's use once every job holding
// resources is counted (WalkJobs), with the restarts placed (PlaceRestarts, applied or not).
struct RoundStart {
  NodeIndex node_index;
  ClusterView view{0, 0};
  ScheduleInput input;
  RoundJobs jobs;
};

// A round's start: WalkJobs over the view of `nodes`, then the restarts placed (PlaceRestarts:
// `apply`, or a preview's).
RoundStart StartRound(JobController& jobs, const NodeRegistry& nodes, const QueueConfig& queues,
                      int port_min, int port_max, int64_t now_ms, bool apply) {
  RoundStart start;
  start.view = NodesView(nodes, port_min, port_max, &start.node_index);
  start.input.queues = NoUsage(queues);
  start.jobs =
      WalkJobs(jobs, queues, start.view, start.node_index, start.input.queues, true, now_ms);
  PlaceRestarts(jobs, nodes, start.jobs, start.view, start.node_index, start.input.queues, now_ms,
                apply);
  return start;
}

// The running jobs a round offers the Scheduler as preemption victims (into `input.running`, with
// the cluster's GPUs and CPUs), where a queued job could preempt one (PreemptionPossible); returns
// their records, input.running[i]'s at [i].
std::vector<JobRecord*> OfferRunning(const NodeRegistry& nodes, const RoundJobs& round,
                                     const NodeIndex& node_index, ScheduleInput& input) {
  for (const auto& [id, n] : nodes.nodes()) {
    if (!n.schedulable()) continue;
    input.cluster_gpus += static_cast<int64_t>(n.gpus.size());
    input.cluster_cpus += n.cpus;
  }
  std::vector<JobRecord*> running_jobs;
  if (PreemptionPossible(input.queues, round.live, round.requests)) {
    for (JobRecord* job : round.live) {
      RunningJob rj;
      for (const auto& r : job->replicas) {
        if (!JobController::HoldsResources(r) || r.stop_requested) continue;
        const Resources& res = job->PoolOf(r).resources;
        auto it = node_index.find(r.node_id);
        rj.held.push_back(HeldSlot{it == node_index.end() ? -1 : it->second.node, r.gpus, res.cpus,
                                   res.memory_mb});
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
    }
  }
  return running_jobs;
}

}  // namespace

ClusterView BuildClusterView(const NodeRegistry& nodes, JobController& jobs,
                             const QueueConfig& queues, int port_min, int port_max,
                             NodeIndex* node_index) {
  ClusterView view = NodesView(nodes, port_min, port_max, node_index);
  std::vector<QueueState> usage = NoUsage(queues);
  WalkJobs(jobs, queues, view, *node_index, usage, false, 0);
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
  // What AccountHeld counts, over a view of no nodes (nothing to take GPUs from).
  std::vector<QueueState> out = NoUsage(queues);
  ClusterView none(0, 0);
  const NodeIndex no_nodes;
  for (const auto& [seq, job] : jobs.active()) {
    if (job->queue_index < 0) ResolveQueue(*job, queues);  // callers read every job's queue
    if (job->may_hold) AccountHeld(*job, false, queues, none, no_nodes, out);
  }
  for (const JobRecord* ended : jobs.EndedHolding()) {
    AccountHeld(*jobs.FindJob(ended->name), false, queues, none, no_nodes, out);
  }
  return out;
}

PlacementRoundStats RunPlacementRound(JobController& jobs, const NodeRegistry& nodes,
                                      const Scheduler& scheduler, const QueueConfig& queues,
                                      int port_min, int port_max, int64_t now_ms,
                                      const ElasticOptions& elastic) {
  auto t0 = std::chrono::steady_clock::now();
  int64_t cpu0 = ThreadCpuUs();
  // 1. Replicas of running jobs waiting to be placed again (restarts) come first.
  RoundStart start = StartRound(jobs, nodes, queues, port_min, port_max, now_ms, true);
  const NodeIndex& node_index = start.node_index;
  ClusterView& view = start.view;
  ScheduleInput& input = start.input;
  const RoundJobs& round = start.jobs;
  auto node_name = [&](int i) { return view.nodes[static_cast<size_t>(i)].node_id; };

  // 2. Queued jobs, in submit order, in their queues; running jobs as preemption candidates where
  // a queued job could preempt one.
  const std::vector<JobRecord*>& queued = round.queued;
  const std::vector<JobRequest>& requests = round.requests;
  std::vector<JobRecord*> running_jobs = OfferRunning(nodes, round, node_index, input);
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
    std::string by = "preempted by job " + WithClass(preemptor);
    std::vector<std::string> names;
    std::string event;
    for (size_t v : p.victims) {
      JobRecord& victim = *running_jobs[v];
      names.push_back(victim.name);
      event += (event.empty() ? "" : ", ") + WithClass(victim);
      jobs.PreemptJob(victim, by, now_ms);
    }
    event = std::string("preempted job") + (names.size() == 1 ? " " : "s ") + event + " to run";
    jobs.NotePreemption(preemptor, names, event, now_ms);
  }
  ExplainWaits(queued, requests, result, view);
  if (elastic.resize) {
    ResizeElasticJobs(jobs, nodes, round, result, view, node_index, elastic, now_ms);
  }
  for (JobRecord* job : round.fenced) {
    if (const ReplicaRecord* r = FencedReplica(*job, now_ms)) {
      const std::string reason = FenceWait(*r);
      job->SetWaitingReason(reason, WaitingReasonHash(reason));
    }
  }
  // Preemptors whose victims are still stopping (few: walked from their own index).
  for (const auto& [name, victims] : jobs.preemptors()) {
    JobRecord* job = jobs.FindJob(name);
    if (job == nullptr || job->state != JobState::QUEUED) continue;
    std::string stopping;
    for (const auto& v : victims) {
      const JobRecord* victim = jobs.FindJob(v);
      if (victim != nullptr && JobController::AnyHolding(*victim)) {
        stopping += (stopping.empty() ? "" : ", ") + v;
      }
    }
    if (!stopping.empty()) {
      const std::string reason =
          "waiting for the jobs it preempted to stop (within their grace period): " + stopping;
      job->SetWaitingReason(reason, WaitingReasonHash(reason));
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
  stats.candidates = input.running.size();
  return stats;
}

std::vector<PlacementPreview> PreviewPlacement(JobController& jobs, const NodeRegistry& nodes,
                                               const Scheduler& scheduler,
                                               const QueueConfig& queues, int port_min,
                                               int port_max, std::vector<JobRecord>& drafts,
                                               int64_t now_ms, const ElasticOptions& elastic) {
  std::vector<PlacementPreview> out(drafts.size());
  // The round RunPlacementRound would run, with the drafts queued last, and nothing applied.
  RoundStart start = StartRound(jobs, nodes, queues, port_min, port_max, now_ms, false);
  ClusterView& view = start.view;
  RoundJobs& round = start.jobs;
  std::vector<size_t> request_of(drafts.size(), SIZE_MAX);  // the draft's index in the round
  std::map<int, size_t> queued_in;                          // queue index -> jobs queued there
  for (const JobRecord* job : round.queued) ++queued_in[job->queue_index];
  for (size_t d = 0; d < drafts.size(); ++d) {
    JobRecord& draft = drafts[d];
    PlacementPreview& preview = out[d];
    ResolveQueue(draft, queues);
    preview.queue = queues.queues()[static_cast<size_t>(draft.queue_index)].name;
    if (draft.spec.scheduling.hold) {
      preview.outcome = wire::DryRunOutcome::HOLD;
      preview.reason = JobController::HeldAtSubmitMessage(draft.name);
      continue;
    }
    if (std::string after = jobs.AfterWaitOf(draft); !after.empty()) {
      preview.outcome = wire::DryRunOutcome::WAIT_FOR_JOBS;
      preview.reason = std::move(after);
      continue;
    }
    preview.queued_ahead = queued_in[draft.queue_index]++;
    round.queued.push_back(&draft);
    round.requests.push_back(RequestOf(jobs, draft, now_ms));
    request_of[d] = round.requests.size() - 1;
  }
  std::vector<JobRecord*> running_jobs = OfferRunning(nodes, round, start.node_index, start.input);
  ScheduleResult result = scheduler.Schedule(round.requests, view, now_ms, start.input);
  for (size_t d = 0; d < drafts.size(); ++d) {
    const size_t me = request_of[d];
    if (me == SIZE_MAX) continue;
    const JobRecord& draft = drafts[d];
    PlacementPreview& preview = out[d];
    const auto placed = std::find_if(result.placed.begin(), result.placed.end(),
                                     [&](const JobPlacement& p) { return p.request == me; });
    if (placed != result.placed.end()) {
      preview.outcome = wire::DryRunOutcome::START;
      for (size_t i = 0; i < placed->replicas.size(); ++i) {
        const ReplicaSlot& slot = placed->replicas[i];
        preview.replicas.push_back(PlacementPreview::Replica{
            draft.replicas[i].name, view.nodes[static_cast<size_t>(slot.node)].node_id, slot.gpus});
      }
      continue;
    }
    const auto preempts = std::find_if(result.preemptions.begin(), result.preemptions.end(),
                                       [&](const Preemption& p) { return p.request == me; });
    if (preempts != result.preemptions.end()) {
      preview.outcome = wire::DryRunOutcome::PREEMPT;
      for (size_t v : preempts->victims) preview.victims.push_back(WithClass(*running_jobs[v]));
      continue;
    }
    preview.outcome = wire::DryRunOutcome::WAIT;
    preview.reason = ExplainWait(me, round.requests, result, view);
    // An elastic job that does not fit whole asks for fewer workers once it has waited
    // settle_ms (ResizeElasticJobs): say how many fit now.
    if (draft.elastic && (result.waiting_behind.size() <= me || result.waiting_behind[me] < 0)) {
      if (std::optional<int> fits =
              ElasticWorkersThatFit(draft, JobController::ElasticMaxWorkers(draft), view)) {
        preview.reason += "; as an elastic job it would start with " + std::to_string(*fits) +
                          " worker" + (*fits == 1 ? "" : "s") + " after waiting " +
                          std::to_string(elastic.settle_ms / 1000) + " s";
      }
    }
    if (draft.wait_limited) {
      preview.reason += "; it fails unless placed within " +
                        FormatDuration(draft.spec.scheduling.max_wait.count()) +
                        " (scheduling.max_wait)";
    }
  }
  return out;
}

}  // namespace cohort::coordinator
