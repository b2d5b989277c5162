#include "coordinator/gang_fit.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/text_join.h"

namespace cohort::coordinator {
namespace {

// "4 GPUs, 2 CPUs, 8192 MiB" (the parts that are asked for).
std::string Describe(const ReplicaDemand& d) {
  std::vector<std::string> parts;
  if (d.gpus > 0) parts.push_back(Counted(d.gpus, "GPU"));
  if (d.cpus > 0) parts.push_back(Counted(d.cpus, "CPU"));
  if (d.memory_mb > 0) parts.push_back(std::to_string(d.memory_mb) + " MiB");
  if (parts.empty()) return "no resources";
  std::string text = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) text += ", " + parts[i];
  return text;
}

bool Fits(const NodeFree& n, const ReplicaDemand& d) {
  return d.gpus <= static_cast<int>(n.free_gpus.size()) && d.cpus <= n.free_cpus &&
         (n.memory_unlimited || d.memory_mb <= n.free_memory_mb) && Selects(n, d.selector);
}

// How many replicas of `d` fit on `n` at once, at most `cap` (and one of a spread group).
int64_t Room(const NodeFree& n, const ReplicaDemand& d, int64_t cap) {
  if (!Selects(n, d.selector)) return 0;
  int64_t room = d.spread_group > 0 ? std::min<int64_t>(cap, 1) : cap;
  if (d.gpus > 0) room = std::min<int64_t>(room, static_cast<int64_t>(n.free_gpus.size()) / d.gpus);
  if (d.cpus > 0) room = std::min<int64_t>(room, std::max(n.free_cpus, 0) / d.cpus);
  if (d.memory_mb > 0 && !n.memory_unlimited) {
    room = std::min<int64_t>(room, std::max<int64_t>(n.free_memory_mb, 0) / d.memory_mb);
  }
  return room;
}

// A waiting reason with its WaitingReasonHash, made once for every job it is given to.
struct Reason {
  explicit Reason(std::string t) : text(std::move(t)), hash(WaitingReasonHash(text)) {}
  std::string text;
  size_t hash;
};

ReplicaDemand Total(const std::vector<ReplicaDemand>& demands) {
  ReplicaDemand total{0, 0, 0};
  for (const auto& d : demands) {
    total.gpus += d.gpus;
    total.cpus += d.cpus;
    total.memory_mb += d.memory_mb;
  }
  return total;
}

}  // namespace

NodeFree IdleCapacity(const std::string& node_id, const NodeRecord& node) {
  NodeFree f;
  f.node_id = node_id;
  for (const auto& g : node.gpus) {
    f.free_gpus.push_back(g.index);
    if (g.numa_node >= 0) f.gpu_numa[g.index] = g.numa_node;
  }
  std::sort(f.free_gpus.begin(), f.free_gpus.end());
  f.free_cpus = node.cpus;
  f.free_memory_mb = node.memory_mb;
  f.memory_unlimited = node.memory_mb <= 0;
  f.shares_output_root = node.storage.shared;
  f.labels = &node.labels;
  return f;
}

void IdleClusterCheck::Rebuild(const NodeRegistry& nodes, int port_min, int port_max) {
  idle_ = ClusterView(port_min, port_max);
  most_gpus_ = most_cpus_ = 0;
  most_memory_ = 0;
  memory_unlimited_ = false;
  cluster_ = ReplicaDemand{0, 0, 0};
  for (const auto& [id, n] : nodes.nodes()) {
    NodeFree f = IdleCapacity(id, n);
    f.port_space = idle_.SpaceOfDomain(n.port_domain_id);
    most_gpus_ = std::max(most_gpus_, static_cast<int>(n.gpus.size()));
    most_cpus_ = std::max(most_cpus_, n.cpus);
    most_memory_ = std::max(most_memory_, n.memory_mb);
    memory_unlimited_ |= f.memory_unlimited;
    cluster_.gpus += static_cast<int>(n.gpus.size());
    cluster_.cpus += n.cpus;
    idle_.nodes.push_back(std::move(f));
  }
  version_ = nodes.capacity_version();
  port_min_ = port_min;
  port_max_ = port_max;
}

Status IdleClusterCheck::Check(const JobSpec& spec, const NodeRegistry& nodes, int port_min,
                               int port_max) {
  if (nodes.nodes().empty()) return Status::Ok();
  if (version_ != nodes.capacity_version() || port_min != port_min_ || port_max != port_max_) {
    Rebuild(nodes, port_min, port_max);
  }
  const ClusterView& view = idle_;

  // Each pool's replica on some node; an elastic job's fewest workers (it may run with those).
  const std::optional<int> min_workers = spec.MinWorkers();
  std::vector<ReplicaDemand> demands;
  for (const WorkerPoolSpec& pool : spec.pools) {
    const ReplicaDemand d = PoolDemand(spec, pool);
    const int replicas = pool.role == Role::kWorker && min_workers ? *min_workers : pool.replicas;
    for (int i = 0; i < replicas; ++i) demands.push_back(d);
    const int64_t fitting = std::count_if(view.nodes.begin(), view.nodes.end(),
                                          [&](const NodeFree& n) { return Fits(n, d); });
    std::string head = std::string(RoleName(pool.role)) + " pool needs ";
    if (fitting > 0 && d.spread_group > 0 && fitting < replicas) {
      return FailedPrecondition(
          head + Counted(replicas, "node") + " (one_per_node: " + Describe(d) +
          " for one replica on each); " + std::to_string(fitting) + " of the " +
          Counted(static_cast<int64_t>(view.nodes.size()), "node") + " could take one");
    }
    if (fitting > 0) continue;
    if (std::none_of(view.nodes.begin(), view.nodes.end(),
                     [&](const NodeFree& n) { return Selects(n, d.selector); })) {
      return FailedPrecondition(head + "a node with labels " + FormatNodeSelector(*d.selector) +
                                " (" + NodeSelectorFields(*d.selector) + "); none of " +
                                Counted(static_cast<int64_t>(view.nodes.size()), "node") +
                                " has them (cohort nodes: LABELS)");
    }
    if (d.selector != nullptr) {
      const int64_t matching =
          std::count_if(view.nodes.begin(), view.nodes.end(),
                        [&](const NodeFree& n) { return Selects(n, d.selector); });
      return FailedPrecondition(head + Describe(d) + " per replica on a node with labels " +
                                FormatNodeSelector(*d.selector) + "; none of the " +
                                Counted(matching, "node") + " with them has all of that at once");
    }
    if (d.gpus > most_gpus_) {
      return FailedPrecondition(head + Counted(d.gpus, "GPU") +
                                " per replica; the largest node has " + std::to_string(most_gpus_));
    }
    if (d.cpus > most_cpus_) {
      return FailedPrecondition(head + Counted(d.cpus, "CPU") +
                                " per replica; the largest node has " + std::to_string(most_cpus_));
    }
    if (!memory_unlimited_ && d.memory_mb > most_memory_) {
      return FailedPrecondition(head + std::to_string(d.memory_mb) +
                                " MiB of memory per replica; the largest node has " +
                                std::to_string(most_memory_) + " MiB");
    }
    return FailedPrecondition(head + Describe(d) + " per replica; no node has all of that at once");
  }

  if (Scheduler::FindGang(demands, view, false, Scheduler::PortNeed::kJob)) return Status::Ok();
  if (const std::string* required = demands.empty() ? nullptr : RequiredTopology(demands.front());
      required != nullptr) {
    const std::string& key = *required;
    std::vector<ReplicaDemand> anywhere = demands;
    for (ReplicaDemand& d : anywhere) d.topology = nullptr;
    if (Scheduler::FindGang(anywhere, view, false, Scheduler::PortNeed::kNone)) {
      std::set<std::string> values;
      for (const NodeFree& n : view.nodes) {
        if (n.labels == nullptr) continue;
        if (auto label = n.labels->find(key); label != n.labels->end())
          values.insert(label->second);
      }
      const std::string head = "its " + Counted(static_cast<int64_t>(demands.size()), "replica") +
                               " (" + Describe(Total(demands)) + " in all) need nodes of one " +
                               key + " (scheduling.required_topology); ";
      if (values.empty()) {
        return FailedPrecondition(head + "no node has the label " + key +
                                  " (cohort nodes: LABELS)");
      }
      // A cluster of many racks is not listed whole.
      const std::string listed =
          JoinFirst(std::vector<std::string>(values.begin(), values.end()), 5);
      return FailedPrecondition(head + "none of its " +
                                Counted(static_cast<int64_t>(values.size()), "value") + " (" +
                                listed +
                                ") has room for them all, even with nothing else "
                                "running");
    }
  }
  if (!Scheduler::FindGang(demands, view, false, Scheduler::PortNeed::kNone)) {
    return FailedPrecondition("its " + Counted(static_cast<int64_t>(demands.size()), "replica") +
                              " (" + Describe(Total(demands)) + " in all) do not fit together on " +
                              Counted(static_cast<int64_t>(nodes.nodes().size()), "node") + " (" +
                              Describe(cluster_) + " in all), even with nothing else running");
  }
  return FailedPrecondition(
      "the job needs more ports on one host than the coordinator's --port-range has (" +
      std::to_string(port_max - port_min + 1) +
      "): one per replica on the host it runs on, and two more on the chief's");
}

std::string WaitingReason(const std::vector<ReplicaDemand>& demands, const ClusterView& view,
                          bool shared_storage_only) {
  if (view.nodes.empty()) return "waiting for a node: none is ready";
  if (shared_storage_only) {
    ClusterView sharing = view;
    std::erase_if(sharing.nodes, [](const NodeFree& n) { return !n.shares_output_root; });
    if (sharing.nodes.empty()) {
      return "waiting for a node that shares the output root (its output dir is there): none "
             "does now (cohort nodes: STORAGE)";
    }
    return WaitingReason(demands, sharing, false) + " (on the nodes that share the output root)";
  }
  // Replicas of one kind, in the job's order.
  std::vector<std::pair<ReplicaDemand, int64_t>> kinds;
  for (const auto& d : demands) {
    auto same = [&](const auto& k) {
      return k.first.gpus == d.gpus && k.first.cpus == d.cpus && k.first.memory_mb == d.memory_mb &&
             k.first.selector == d.selector && k.first.spread_group == d.spread_group;
    };
    auto it = std::find_if(kinds.begin(), kinds.end(), same);
    if (it == kinds.end()) {
      kinds.emplace_back(d, 1);
    } else {
      ++it->second;
    }
  }
  for (const auto& [d, count] : kinds) {
    if (d.selector != nullptr &&
        std::none_of(view.nodes.begin(), view.nodes.end(),
                     [&, &d = d](const NodeFree& n) { return Selects(n, d.selector); })) {
      return "waiting for a node with labels " + FormatNodeSelector(*d.selector) + " (" +
             NodeSelectorFields(*d.selector) + "): none that takes work now has them";
    }
    int64_t room = 0;
    for (const NodeFree& n : view.nodes) {
      room += Room(n, d, count - room);
      if (room >= count) break;
    }
    if (room >= count) continue;
    std::string want = count == 1
                           ? "1 replica with " + Describe(d)
                           : std::to_string(count) + " replicas with " + Describe(d) + " each";
    if (d.selector != nullptr) {
      want += " on nodes with labels " + FormatNodeSelector(*d.selector);
    }
    if (d.spread_group > 0 && count > 1) want += ", each on its own node (one_per_node)";
    std::string have = room == 0 ? "none fits now"
                                 : std::to_string(room) + " fit" + (room == 1 ? "s" : "") + " now";
    int64_t unfit = 0, cordoned = 0;
    for (const NodeFree& n : view.nodes) {
      if (d.gpus > 0 && Selects(n, d.selector)) {
        unfit += n.unfit_gpus;
        cordoned += n.cordoned_gpus;
      }
    }
    std::string out;  // "1 GPU is unfit, 2 cordoned"
    if (unfit > 0) out = Counted(unfit, "GPU") + (unfit == 1 ? " is" : " are") + " unfit";
    if (cordoned > 0) {
      out += unfit > 0 ? ", " + std::to_string(cordoned)
                       : Counted(cordoned, "GPU") + (cordoned == 1 ? " is" : " are");
      out += " cordoned";
    }
    if (!out.empty()) have += " (" + out + ": cohort nodes says which)";
    return "waiting for room for " + want + "; " + have;
  }
  if (Scheduler::FindGang(demands, view, false, Scheduler::PortNeed::kNone)) {
    int most = 0;
    for (int space = 0; space < view.port_spaces(); ++space) {
      most = std::max(most, view.ports_free(space));
    }
    return "waiting for free ports: it needs one per replica on its hosts and two more on the "
           "chief's; a host has at most " +
           std::to_string(most) + " of --port-range free";
  }
  const std::string* required = demands.empty() ? nullptr : RequiredTopology(demands.front());
  return "waiting for room for its " + Counted(static_cast<int64_t>(demands.size()), "replica") +
         " together (" + Describe(Total(demands)) + " in all" +
         (required != nullptr ? ", on nodes of one " + *required + " (required_topology)"
                              : std::string()) +
         "): each fits now, not all at once";
}

namespace {

// The waiting reason of each of requests [first, last) after the round `result` (an empty text
// for one placed), given `view`, what is free after it: `set(q, text, hash)` for each.
template <typename Set>
void ExplainRequests(size_t first, size_t last, const std::vector<JobRequest>& requests,
                     const ScheduleResult& result, const ClusterView& view, Set&& set) {
  const size_t n = requests.size();
  std::vector<bool> placed(n, false);
  for (const JobPlacement& p : result.placed) placed[p.request] = true;
  std::vector<bool> preempting(n, false);
  for (const Preemption& p : result.preemptions) preempting[p.request] = true;
  std::vector<bool> reserving(n, false);
  for (int w : result.waiting_behind) {
    if (w >= 0) reserving[static_cast<size_t>(w)] = true;
  }
  static const Reason kNone{""};
  static const Reason kPreempting{"preempting jobs to make room; it starts once they stopped"};
  static const Reason kPreviousAttempt{"waiting for the replicas of its previous attempt to stop"};
  // Many queued jobs share a few shapes (and node filters): each shape's reason is found once.
  // Most jobs keep their reason from round to round: SetWaitingReason then compares hashes only.
  std::vector<std::optional<Reason>> by_shape;
  std::unordered_map<int, Reason> behind_reason;  // the job waited behind -> the reason
  for (size_t q = first; q < last; ++q) {
    if (placed[q]) {
      set(q, kNone.text, kNone.hash);
      continue;
    }
    if (preempting[q]) {
      set(q, kPreempting.text, kPreempting.hash);
      continue;
    }
    int behind = q < result.waiting_behind.size() ? result.waiting_behind[q] : -1;
    if (behind >= 0 && static_cast<size_t>(behind) != q) {
      auto it = behind_reason.find(behind);
      if (it == behind_reason.end()) {
        std::string text = "waiting behind job " + requests[static_cast<size_t>(behind)].name +
                           ", which has waited longer than the starvation limit: later jobs of "
                           "its queue, and jobs borrowing beyond their queue's quota, start "
                           "only after it";
        it = behind_reason.emplace(behind, Reason(std::move(text))).first;
      }
      set(q, it->second.text, it->second.hash);
      continue;
    }
    const Reason* base = &kPreviousAttempt;
    bool borrowing = false;
    if (requests[q].schedulable) {
      const size_t shape = q < result.shapes.size() ? result.shapes[q] : by_shape.size();
      if (shape >= by_shape.size()) by_shape.resize(shape + 1);
      if (!by_shape[shape]) {
        by_shape[shape].emplace(
            WaitingReason(requests[q].demands(), view, requests[q].needs_shared_storage));
      }
      base = &*by_shape[shape];
      // (Noted for a queue with a quota; the default queue without one always borrows.)
      size_t queue = static_cast<size_t>(std::max(requests[q].queue, 0));
      bool has_quota = queue < result.queues.size() &&
                       (result.queues[queue].gpu_quota > 0 || result.queues[queue].cpu_quota >= 0);
      borrowing = has_quota && q < result.borrowing.size() && result.borrowing[q];
    }
    if (!borrowing && !reserving[q]) {
      set(q, base->text, base->hash);  // the common case: no copy to build
      continue;
    }
    std::string reason = base->text;
    if (borrowing) reason += " (beyond its queue's quota: it borrows idle capacity)";
    if (reserving[q]) {
      reason +=
          "; later jobs of its queue, and borrowing jobs, are held back until it starts (it has "
          "waited longer than the starvation limit)";
    }
    set(q, reason, WaitingReasonHash(reason));
  }
}

}  // namespace

void ExplainWaits(const std::vector<JobRecord*>& queued, const std::vector<JobRequest>& requests,
                  const ScheduleResult& result, const ClusterView& view) {
  // Each job's record is a cache miss by now (the round walked 100,000 since): ask for a few
  // ahead, so that the misses overlap instead of following one another.
  constexpr size_t kPrefetchAhead = 16;
  ExplainRequests(0, queued.size(), requests, result, view,
                  [&](size_t q, const std::string& text, size_t hash) {
                    if (q + kPrefetchAhead < queued.size())
                      __builtin_prefetch(queued[q + kPrefetchAhead], 1);
                    queued[q]->SetWaitingReason(text, hash);
                  });
}

std::string ExplainWait(size_t request, const std::vector<JobRequest>& requests,
                        const ScheduleResult& result, const ClusterView& view) {
  std::string out;
  ExplainRequests(request, request + 1, requests, result, view,
                  [&](size_t, const std::string& text, size_t) { out = text; });
  return out;
}

}  // namespace cohort::coordinator
