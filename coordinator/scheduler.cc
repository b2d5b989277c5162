#include "coordinator/scheduler.h"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <unordered_map>

#include "common/logging.h"

namespace cohort::coordinator {
namespace {

bool Fits(const NodeFree& node, int gpus_left, int cpus_left, int64_t mem_left,
          const ReplicaDemand& d) {
  return d.gpus <= gpus_left && d.cpus <= cpus_left &&
         (node.memory_unlimited || d.memory_mb <= mem_left);
}

// Moves `d` out of `node`'s free resources into `slot`. Callers take only where Fits() held.
void Take(NodeFree& node, const ReplicaDemand& d, ReplicaSlot& slot) {
  COHORT_CHECK(d.gpus >= 0 && static_cast<size_t>(d.gpus) <= node.free_gpus.size() &&
               d.cpus <= node.free_cpus);
  slot.gpus.assign(node.free_gpus.begin(), node.free_gpus.begin() + d.gpus);
  node.free_gpus.erase(node.free_gpus.begin(), node.free_gpus.begin() + d.gpus);
  node.free_cpus -= d.cpus;
  if (!node.memory_unlimited) node.free_memory_mb -= d.memory_mb;
}

uint64_t ShapeHash(const std::vector<ReplicaDemand>& replicas) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the demand triples
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  for (const auto& r : replicas) {
    mix(static_cast<uint64_t>(r.gpus));
    mix(static_cast<uint64_t>(r.cpus));
    mix(static_cast<uint64_t>(r.memory_mb));
  }
  return h;
}

bool SameShape(const std::vector<ReplicaDemand>& a, const std::vector<ReplicaDemand>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].gpus != b[i].gpus || a[i].cpus != b[i].cpus || a[i].memory_mb != b[i].memory_mb) {
      return false;
    }
  }
  return true;
}

}  // namespace

ClusterView::ClusterView(int port_min, int port_max)
    : port_min_(port_min),
      port_max_(std::max(port_min, port_max)),
      used_(static_cast<size_t>(port_max_ - port_min_ + 1), false),
      ports_free_(port_max_ - port_min_ + 1) {}

void ClusterView::MarkPortUsed(int port) {
  if (port < port_min_ || port > port_max_) return;
  auto i = static_cast<size_t>(port - port_min_);
  if (!used_[i]) {
    used_[i] = true;
    --ports_free_;
  }
}

int ClusterView::TakePort() {
  if (ports_free_ <= 0) return 0;
  int n = static_cast<int>(used_.size());
  for (int k = 0; k < n; ++k) {
    int i = (cursor_ + k) % n;
    if (!used_[static_cast<size_t>(i)]) {
      used_[static_cast<size_t>(i)] = true;
      --ports_free_;
      cursor_ = (i + 1) % n;
      return port_min_ + i;
    }
  }
  return 0;
}

std::optional<std::vector<ReplicaSlot>> Scheduler::PlaceGang(
    const std::vector<ReplicaDemand>& replicas, ClusterView& view) {
  std::vector<ReplicaSlot> slots(replicas.size());
  if (replicas.empty()) return slots;
  ReplicaDemand total{0, 0, 0};
  for (const auto& r : replicas) {
    total.gpus += r.gpus;
    total.cpus += r.cpus;
    total.memory_mb += r.memory_mb;
  }
  // Largest replicas first.
  std::vector<size_t> order(replicas.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(replicas[a].gpus, replicas[a].cpus, replicas[a].memory_mb) >
           std::tie(replicas[b].gpus, replicas[b].cpus, replicas[b].memory_mb);
  });

  // 1. The whole gang on one node: best fit.
  int best = -1;
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    const NodeFree& n = view.nodes[i];
    if (!Fits(n, static_cast<int>(n.free_gpus.size()), n.free_cpus, n.free_memory_mb, total)) {
      continue;
    }
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const NodeFree& b = view.nodes[static_cast<size_t>(best)];
    if (std::make_tuple(n.free_gpus.size(), n.free_cpus) <
        std::make_tuple(b.free_gpus.size(), b.free_cpus)) {
      best = static_cast<int>(i);
    }
  }
  if (best >= 0) {
    for (size_t r : order) {
      slots[r].node = best;
      Take(view.nodes[static_cast<size_t>(best)], replicas[r], slots[r]);
    }
    return slots;
  }
  if (replicas.size() == 1) return std::nullopt;

  // 2. First-fit decreasing over nodes, largest free first. Only nodes that can take the
  // smallest replica are candidates (on a busy cluster, few).
  const ReplicaDemand& smallest = replicas[order.back()];
  std::vector<size_t> nodes;
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    const NodeFree& n = view.nodes[i];
    if (Fits(n, static_cast<int>(n.free_gpus.size()), n.free_cpus, n.free_memory_mb, smallest)) {
      nodes.push_back(i);
    }
  }
  std::stable_sort(nodes.begin(), nodes.end(), [&](size_t a, size_t b) {
    const NodeFree& x = view.nodes[a];
    const NodeFree& y = view.nodes[b];
    return std::make_tuple(x.free_gpus.size(), x.free_cpus) >
           std::make_tuple(y.free_gpus.size(), y.free_cpus);
  });
  std::vector<int> gpus_left(view.nodes.size()), cpus_left(view.nodes.size());
  std::vector<int64_t> mem_left(view.nodes.size());
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    gpus_left[i] = static_cast<int>(view.nodes[i].free_gpus.size());
    cpus_left[i] = view.nodes[i].free_cpus;
    mem_left[i] = view.nodes[i].free_memory_mb;
  }
  for (size_t r : order) {
    const ReplicaDemand& d = replicas[r];
    bool placed = false;
    for (size_t i : nodes) {
      if (Fits(view.nodes[i], gpus_left[i], cpus_left[i], mem_left[i], d)) {
        gpus_left[i] -= d.gpus;
        cpus_left[i] -= d.cpus;
        mem_left[i] -= d.memory_mb;
        slots[r].node = static_cast<int>(i);
        placed = true;
        break;
      }
    }
    if (!placed) return std::nullopt;
  }
  for (size_t r : order) {
    Take(view.nodes[static_cast<size_t>(slots[r].node)], replicas[r], slots[r]);
  }
  return slots;
}

std::optional<ReplicaSlot> Scheduler::PlaceOne(const ReplicaDemand& demand, int preferred_node,
                                               ClusterView& view) {
  if (view.ports_free() < 1) return std::nullopt;
  if (preferred_node >= 0 && static_cast<size_t>(preferred_node) < view.nodes.size()) {
    NodeFree& n = view.nodes[static_cast<size_t>(preferred_node)];
    if (Fits(n, static_cast<int>(n.free_gpus.size()), n.free_cpus, n.free_memory_mb, demand)) {
      ReplicaSlot slot;
      slot.node = preferred_node;
      Take(n, demand, slot);
      slot.port = view.TakePort();
      return slot;
    }
  }
  auto slots = PlaceGang({demand}, view);
  if (!slots) return std::nullopt;
  (*slots)[0].port = view.TakePort();
  return std::move((*slots)[0]);
}

ScheduleResult Scheduler::Schedule(const std::vector<JobRequest>& queue, ClusterView& view,
                                   int64_t now_ms) const {
  ScheduleResult result;
  // Shapes that failed this round: hash -> the demand lists with that hash.
  std::unordered_map<uint64_t, std::vector<const std::vector<ReplicaDemand>*>> failed_shapes;
  int64_t total_free_gpus = 0;
  for (const auto& n : view.nodes) total_free_gpus += static_cast<int64_t>(n.free_gpus.size());

  for (size_t q = 0; q < queue.size(); ++q) {
    const JobRequest& job = queue[q];
    bool placed = false;
    if (job.schedulable) {
      const std::vector<ReplicaDemand>& demands = job.demands();
      int64_t gpus = 0;
      for (const auto& r : demands) gpus += r.gpus;
      size_t ports_needed = demands.size() + 2;
      if (gpus <= total_free_gpus && static_cast<size_t>(view.ports_free()) >= ports_needed) {
        uint64_t shape = ShapeHash(demands);
        bool known_failure = false;
        auto f = failed_shapes.find(shape);
        if (f != failed_shapes.end()) {
          for (const auto* other : f->second) known_failure |= SameShape(*other, demands);
        }
        if (!known_failure) {
          ++result.searches;
          auto slots = PlaceGang(demands, view);
          if (slots) {
            JobPlacement p;
            p.request = q;
            p.replicas = std::move(*slots);
            for (auto& s : p.replicas) s.port = view.TakePort();
            p.master_port = view.TakePort();
            p.bootstrap_port = view.TakePort();
            total_free_gpus -= gpus;
            result.placed.push_back(std::move(p));
            placed = true;
          } else {
            failed_shapes[shape].push_back(&demands);
          }
        }
      }
    }
    if (!placed && now_ms - job.waiting_since_ms > options_.starvation_limit_ms) {
      result.starving_job = job.name;
      break;
    }
  }
  return result;
}

}  // namespace cohort::coordinator
