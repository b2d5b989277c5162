#include "coordinator/scheduler.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "common/fnv.h"
#include "common/logging.h"

namespace cohort::coordinator {
bool Selects(const NodeFree& node, const NodeSelector* selector) {
  static const NodeLabels kNone;
  return selector == nullptr || selector->Matches(node.labels != nullptr ? *node.labels : kNone);
}

std::vector<int> PickGpus(const std::vector<int>& free_gpus, const std::map<int, int>& gpu_numa,
                          int count) {
  const auto lowest = [&] {
    return std::vector<int>(free_gpus.begin(), free_gpus.begin() + count);
  };
  std::map<int, std::vector<int>> by_numa;  // NUMA node -> its free GPUs, ascending
  for (int g : free_gpus) {
    const auto numa = gpu_numa.find(g);
    if (numa == gpu_numa.end()) return lowest();
    by_numa[numa->second].push_back(g);
  }
  std::vector<int> picked;
  int left = count;
  while (left > 0) {
    // The NUMA node with the fewest free GPUs that has `left`; else the one with the most.
    auto best = by_numa.end();
    for (auto it = by_numa.begin(); it != by_numa.end(); ++it) {
      const size_t n = it->second.size();
      if (n == 0) continue;
      if (best == by_numa.end()) {
        best = it;
        continue;
      }
      const size_t b = best->second.size();
      const bool fits = n >= static_cast<size_t>(left), best_fits = b >= static_cast<size_t>(left);
      if ((fits && (!best_fits || n < b)) || (!fits && !best_fits && n > b)) best = it;
    }
    std::vector<int>& gpus = best->second;
    const int take = std::min<int>(left, static_cast<int>(gpus.size()));
    picked.insert(picked.end(), gpus.begin(), gpus.begin() + take);
    gpus.erase(gpus.begin(), gpus.begin() + take);
    left -= take;
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

namespace {

bool Fits(const NodeFree& node, int gpus_left, int cpus_left, int64_t mem_left,
          const ReplicaDemand& d) {
  return d.gpus <= gpus_left && d.cpus <= cpus_left &&
         (node.memory_unlimited || d.memory_mb <= mem_left) && Selects(node, d.selector);
}

// Whether `node` may take a replica of a job at all (see "Storage" in the header).
bool Eligible(const NodeFree& node, bool shared_storage_only) {
  return !shared_storage_only || node.shares_output_root;
}

// Moves `d` out of `node`'s free resources into `slot`. Callers take only where Fits() held.
void Take(NodeFree& node, const ReplicaDemand& d, ReplicaSlot& slot) {
  COHORT_CHECK(d.gpus >= 0 && static_cast<size_t>(d.gpus) <= node.free_gpus.size() &&
               d.cpus <= node.free_cpus);
  slot.gpus = PickGpus(node.free_gpus, node.gpu_numa, d.gpus);
  for (int g : slot.gpus) {
    node.free_gpus.erase(std::lower_bound(node.free_gpus.begin(), node.free_gpus.end(), g));
  }
  node.free_cpus -= d.cpus;
  if (!node.memory_unlimited) node.free_memory_mb -= d.memory_mb;
}

// Takes the replicas from the nodes FindGang chose, largest replicas first (so a node's lowest
// GPUs go to its largest replica).
std::vector<ReplicaSlot> TakeGang(const std::vector<ReplicaDemand>& replicas,
                                  const std::vector<int>& where, ClusterView& view) {
  std::vector<size_t> order(replicas.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(replicas[a].gpus, replicas[a].cpus, replicas[a].memory_mb) >
           std::tie(replicas[b].gpus, replicas[b].cpus, replicas[b].memory_mb);
  });
  std::vector<ReplicaSlot> slots(replicas.size());
  for (size_t r : order) {
    slots[r].node = where[r];
    Take(view.nodes[static_cast<size_t>(where[r])], replicas[r], slots[r]);
  }
  return slots;
}

// A running job's resources back into (Release) or out of (Retake) the view.
void Release(const RunningJob& job, ClusterView& view) {
  for (const HeldSlot& h : job.held) {
    if (h.node < 0) continue;
    NodeFree& n = view.nodes[static_cast<size_t>(h.node)];
    for (int g : h.gpus)
      n.free_gpus.insert(std::lower_bound(n.free_gpus.begin(), n.free_gpus.end(), g), g);
    n.free_cpus += h.cpus;
    if (!n.memory_unlimited) n.free_memory_mb += h.memory_mb;
  }
}

void Retake(const RunningJob& job, ClusterView& view) {
  for (const HeldSlot& h : job.held) {
    if (h.node < 0) continue;
    NodeFree& n = view.nodes[static_cast<size_t>(h.node)];
    for (int g : h.gpus) {
      auto pos = std::lower_bound(n.free_gpus.begin(), n.free_gpus.end(), g);
      if (pos != n.free_gpus.end() && *pos == g) n.free_gpus.erase(pos);
    }
    n.free_cpus -= h.cpus;
    if (!n.memory_unlimited) n.free_memory_mb -= h.memory_mb;
  }
}

uint64_t ShapeHash(const std::vector<ReplicaDemand>& replicas, bool shared_storage_only) {
  Fnv1a h;  // over the node filter and the demand triples
  h.Add(uint64_t{shared_storage_only ? 1u : 0u});
  for (const auto& r : replicas) {
    h.Add(static_cast<uint64_t>(r.gpus))
        .Add(static_cast<uint64_t>(r.cpus))
        .Add(static_cast<uint64_t>(r.memory_mb))
        .Add(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(r.selector)))
        .Add(static_cast<uint64_t>(r.spread_group))
        .Add(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(r.preference)))
        .Add(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(r.topology)))
        .Add(uint64_t{r.topology_preferred ? 1u : 0u});
  }
  return h.value();
}

bool SameShape(const std::vector<ReplicaDemand>& a, const std::vector<ReplicaDemand>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].gpus != b[i].gpus || a[i].cpus != b[i].cpus || a[i].memory_mb != b[i].memory_mb ||
        a[i].selector != b[i].selector || a[i].spread_group != b[i].spread_group ||
        a[i].preference != b[i].preference || a[i].topology != b[i].topology ||
        a[i].topology_preferred != b[i].topology_preferred) {
      return false;
    }
  }
  return true;
}

}  // namespace

const NodeSelector* InternSelector(const NodeSelector& selector) {
  if (selector.empty()) return nullptr;
  static std::mutex mu;
  static std::set<NodeSelector>* selectors = new std::set<NodeSelector>();  // never freed
  std::lock_guard<std::mutex> lock(mu);
  return &*selectors->insert(selector).first;
}

const std::vector<std::string>* InternTopology(const std::vector<std::string>& levels) {
  if (levels.empty()) return nullptr;
  static std::mutex mu;
  static auto* lists = new std::set<std::vector<std::string>>();  // never freed
  std::lock_guard<std::mutex> lock(mu);
  return &*lists->insert(levels).first;
}

const std::string* RequiredTopology(const ReplicaDemand& demand) {
  if (demand.topology == nullptr || demand.topology_preferred) return nullptr;
  return &demand.topology->back();
}

ReplicaDemand InDomain(const ReplicaDemand& demand, const NodeLabels& domain) {
  ReplicaDemand out = demand;
  out.topology = nullptr;
  out.topology_preferred = false;
  if (domain.empty()) return out;
  NodeSelector narrowed = demand.selector != nullptr ? *demand.selector : NodeSelector{};
  for (const auto& [key, value] : domain) {
    narrowed.requirements.push_back(LabelRequirement{key, LabelOp::kIn, {value}});
  }
  std::sort(narrowed.requirements.begin(), narrowed.requirements.end());
  out.selector = InternSelector(narrowed);
  return out;
}

const std::vector<NodePreference>* InternPreference(const std::vector<NodePreference>& preference) {
  if (preference.empty()) return nullptr;
  static std::mutex mu;
  static auto* preferences = new std::set<std::vector<NodePreference>>();  // never freed
  std::lock_guard<std::mutex> lock(mu);
  return &*preferences->insert(preference).first;
}

uint32_t ShapeTable::Intern(const std::vector<ReplicaDemand>& demands) {
  std::vector<uint32_t>& ids = ids_by_hash_[ShapeHash(demands, false)];
  for (uint32_t id : ids) {
    if (SameShape(shapes_[id - 1], demands)) return id;
  }
  shapes_.push_back(demands);
  ids.push_back(static_cast<uint32_t>(shapes_.size()));
  return ids.back();
}

ClusterView::ClusterView(int port_min, int port_max)
    : port_min_(port_min), port_max_(std::max(port_min, port_max)), spaces_(1) {}

int ClusterView::AddPortSpace() {
  spaces_.emplace_back();
  return static_cast<int>(spaces_.size()) - 1;
}

int ClusterView::SpaceOfDomain(uint32_t domain) {
  if (domain >= space_of_domain_.size()) space_of_domain_.resize(domain + size_t{1}, -1);
  int& space = space_of_domain_[domain];
  if (space < 0) space = std::exchange(domain_in_space_0_, true) ? AddPortSpace() : 0;
  return space;
}

bool ClusterView::Contains(uint64_t key) const {
  if (keys_.empty()) return false;
  const size_t mask = keys_.size() - 1;
  for (size_t i = Slot(key, mask);; i = (i + 1) & mask) {
    if (keys_[i] == key) return true;
    if (keys_[i] == kEmpty) return false;
  }
}

bool ClusterView::Insert(uint64_t key) {
  if ((size_ + 1) * 2 > keys_.size()) {  // at most half full: probes stay short
    std::vector<uint64_t> old = std::move(keys_);
    keys_.assign(std::max<size_t>(64, old.size() * 2), kEmpty);
    size_ = 0;
    for (uint64_t k : old) {
      if (k != kEmpty) Insert(k);
    }
  }
  const size_t mask = keys_.size() - 1;
  for (size_t i = Slot(key, mask);; i = (i + 1) & mask) {
    if (keys_[i] == key) return false;
    if (keys_[i] == kEmpty) {
      keys_[i] = key;
      ++size_;
      return true;
    }
  }
}

void ClusterView::MarkPortUsed(int space, int port) {
  if (port < port_min_ || port > port_max_) return;
  if (space == kEverySpace) {
    if (Insert(Key(kEverySpace, port))) ++every_used_;
    return;
  }
  COHORT_CHECK(space >= 0 && static_cast<size_t>(space) < spaces_.size());
  if (Contains(Key(kEverySpace, port))) return;
  if (Insert(Key(space, port))) ++spaces_[static_cast<size_t>(space)].used;
}

int ClusterView::ports_free(int space) const {
  COHORT_CHECK(space >= 0 && static_cast<size_t>(space) < spaces_.size());
  return std::max(0, port_range() - every_used_ - spaces_[static_cast<size_t>(space)].used);
}

int ClusterView::TakePort(int space) {
  if (ports_free(space) <= 0) return 0;
  PortSpace& s = spaces_[static_cast<size_t>(space)];
  const int n = port_range();
  for (int k = 0; k < n; ++k) {
    int i = (s.cursor + k) % n;
    if (Used(space, port_min_ + i)) continue;
    Insert(Key(space, port_min_ + i));
    ++s.used;
    s.cursor = (i + 1) % n;
    return port_min_ + i;
  }
  return 0;
}

namespace {

// The nodes of a view in the orders FindGang reads them: best fit takes the first node that fits
// by (free GPUs, free CPUs, index), first-fit-decreasing reads nodes by free GPUs and free CPUs
// from the most, index ascending among equals. With it a search finds its node in O(log nodes)
// instead of a pass over every node. It costs about a pass's work per node to build, so a round
// builds it only once it has searched often (Scheduler::kSearchesBeforeNodeOrder), and re-files
// each node it takes from.
class NodeOrder {
 public:
  using Key = std::tuple<int, int, int>;  // free GPUs, free CPUs, index

  explicit NodeOrder(const ClusterView& view) : view_(view), keys_(view.nodes.size()) {
    for (size_t i = 0; i < view.nodes.size(); ++i) File(i);
  }
  // `node`'s free GPUs or CPUs changed.
  void Refile(size_t node) {
    set_.erase(keys_[node]);
    File(node);
  }
  const std::set<Key>& set() const { return set_; }

  // The nodes by free GPUs, then free CPUs, from the most; index ascending among equals.
  class Descending {
   public:
    explicit Descending(const std::set<Key>& set) : set_(set), rest_(set.end()) {
      pos_ = group_end_ = rest_;
    }
    // The next node's index; false when none is left.
    bool Next(size_t* node) {
      if (pos_ == group_end_) {
        if (rest_ == set_.begin()) return false;
        const Key& last = *std::prev(rest_);
        group_end_ = rest_;
        pos_ = rest_ = set_.lower_bound(
            Key{std::get<0>(last), std::get<1>(last), std::numeric_limits<int>::min()});
      }
      *node = static_cast<size_t>(std::get<2>(*pos_++));
      return true;
    }

   private:
    const std::set<Key>& set_;
    std::set<Key>::const_iterator rest_;  // [begin, rest_) not read yet
    std::set<Key>::const_iterator pos_, group_end_;
  };

 private:
  void File(size_t i) {
    const NodeFree& n = view_.nodes[i];
    keys_[i] = Key{static_cast<int>(n.free_gpus.size()), n.free_cpus, static_cast<int>(i)};
    set_.insert(keys_[i]);
  }

  const ClusterView& view_;
  std::vector<Key> keys_;
  std::set<Key> set_;
};

std::optional<std::vector<int>> FindGangAnywhere(const std::vector<ReplicaDemand>& replicas,
                                                 const ClusterView& view, bool shared_storage_only,
                                                 Scheduler::PortNeed ports, const NodeOrder* order,
                                                 const SpreadOccupied& occupied);

// FindGang, reading nodes through `order` when given (it must be of `view` as it is now): a gang
// with a topology in one label value's nodes (see "Topology"), else anywhere.
std::optional<std::vector<int>> FindGangIn(const std::vector<ReplicaDemand>& replicas,
                                           const ClusterView& view, bool shared_storage_only,
                                           Scheduler::PortNeed ports, const NodeOrder* order,
                                           const SpreadOccupied& occupied) {
  if (replicas.empty() || replicas.front().topology == nullptr) {
    return FindGangAnywhere(replicas, view, shared_storage_only, ports, order, occupied);
  }
  const std::string* required = RequiredTopology(replicas.front());
  int64_t gang_gpus = 0, gang_cpus = 0;
  for (const auto& r : replicas) {
    gang_gpus += r.gpus;
    gang_cpus += r.cpus;
  }
  struct Room {
    int64_t gpus = 0;
    int64_t cpus = 0;
  };
  std::vector<ReplicaDemand> narrowed(replicas.size());
  for (const std::string& key : *replicas.front().topology) {
    // This level's domains among the nodes that may take work: each value of its key, below a
    // required level with the node's value of the required key too, and what their nodes have
    // free.
    std::map<NodeLabels, Room> domains;
    for (const NodeFree& n : view.nodes) {
      if (n.labels == nullptr || !Eligible(n, shared_storage_only)) continue;
      auto label = n.labels->find(key);
      if (label == n.labels->end()) continue;
      NodeLabels domain{{key, label->second}};
      if (required != nullptr && *required != key) {
        auto outer = n.labels->find(*required);
        if (outer == n.labels->end()) continue;
        domain.emplace(*required, outer->second);
      }
      Room& room = domains[std::move(domain)];
      room.gpus += static_cast<int64_t>(n.free_gpus.size());
      room.cpus += n.free_cpus;
    }
    std::vector<std::pair<Room, const NodeLabels*>> fitting;
    for (const auto& [domain, room] : domains) {
      if (room.gpus >= gang_gpus && room.cpus >= gang_cpus) fitting.emplace_back(room, &domain);
    }
    std::sort(fitting.begin(), fitting.end(), [](const auto& a, const auto& b) {
      return std::tie(a.first.gpus, a.first.cpus, *a.second) <
             std::tie(b.first.gpus, b.first.cpus, *b.second);
    });
    for (const auto& [room, domain] : fitting) {
      for (size_t i = 0; i < replicas.size(); ++i) narrowed[i] = InDomain(replicas[i], *domain);
      auto where = FindGangAnywhere(narrowed, view, shared_storage_only, ports, order, occupied);
      if (where) return where;
    }
  }
  if (required != nullptr) return std::nullopt;
  for (size_t i = 0; i < replicas.size(); ++i) narrowed[i] = InDomain(replicas[i], {});
  return FindGangAnywhere(narrowed, view, shared_storage_only, ports, order, occupied);
}

// FindGangIn without a topology.
std::optional<std::vector<int>> FindGangAnywhere(const std::vector<ReplicaDemand>& replicas,
                                                 const ClusterView& view, bool shared_storage_only,
                                                 Scheduler::PortNeed ports, const NodeOrder* order,
                                                 const SpreadOccupied& occupied) {
  using PortNeed = Scheduler::PortNeed;
  std::vector<int> where(replicas.size(), -1);
  if (replicas.empty()) return where;
  ReplicaDemand total{0, 0, 0};
  std::vector<const NodeSelector*> selectors;  // the distinct ones of the gang
  std::vector<int> groups;                     // its spread groups, one entry per replica
  for (const auto& r : replicas) {
    total.gpus += r.gpus;
    total.cpus += r.cpus;
    total.memory_mb += r.memory_mb;
    if (r.selector != nullptr &&
        std::find(selectors.begin(), selectors.end(), r.selector) == selectors.end()) {
      selectors.push_back(r.selector);
    }
    if (r.spread_group > 0) groups.push_back(r.spread_group);
  }
  // The nodes a replica of `group` may not go to: those `occupied` names and, during the search,
  // those it put one of the group on (see "One per node").
  SpreadOccupied spread = occupied;
  auto spread_allows = [&](int group, int node) {
    return group == 0 ||
           std::find(spread.begin(), spread.end(), std::make_pair(group, node)) == spread.end();
  };
  std::sort(groups.begin(), groups.end());
  const bool one_node_allowed = std::adjacent_find(groups.begin(), groups.end()) == groups.end();
  // What node `n` is worth to the gang (see "Preferences"); a gang without preferences reads the
  // nodes through `order`, one with them reads every node.
  const bool prefers = std::any_of(replicas.begin(), replicas.end(),
                                   [](const ReplicaDemand& r) { return r.preference != nullptr; });
  auto worth = [&](const NodeFree& n) {
    static const NodeLabels kNoLabels;
    int score = 0;
    for (const auto& r : replicas) {
      if (r.preference != nullptr) {
        score += PreferenceScore(*r.preference, n.labels ? *n.labels : kNoLabels);
      }
    }
    return score;
  };
  if (prefers) order = nullptr;
  // The ports replica r needs in its node's space.
  const int job_ports = ports == PortNeed::kJob ? 2 : 0;
  auto ports_of = [&](size_t r) {
    return ports == PortNeed::kNone ? 0 : 1 + (r == 0 ? job_ports : 0);
  };
  auto ports_left = [&](const NodeFree& n) {
    return ports == PortNeed::kNone ? std::numeric_limits<int>::max()
                                    : view.ports_free(n.port_space);
  };

  // 1. The whole gang on one node: best fit (the fewest free GPUs, then CPUs; the first such).
  const int gang_ports =
      ports == PortNeed::kNone ? 0 : static_cast<int>(replicas.size()) + job_ports;
  auto takes_all = [&](const NodeFree& n) {
    return one_node_allowed &&
           std::all_of(
               groups.begin(), groups.end(),
               [&](int g) { return spread_allows(g, static_cast<int>(&n - view.nodes.data())); }) &&
           Eligible(n, shared_storage_only) &&
           Fits(n, static_cast<int>(n.free_gpus.size()), n.free_cpus, n.free_memory_mb, total) &&
           ports_left(n) >= gang_ports &&
           std::all_of(selectors.begin(), selectors.end(),
                       [&](const NodeSelector* s) { return Selects(n, s); });
  };
  int best = -1;
  if (order != nullptr) {
    const std::set<NodeOrder::Key>& set = order->set();
    constexpr int kFirst = std::numeric_limits<int>::min();
    for (auto it = set.lower_bound({total.gpus, total.cpus, kFirst}); it != set.end();) {
      const auto [gpus, cpus, i] = *it;
      if (cpus < total.cpus) {  // too few CPUs: on to this GPU count's nodes with enough
        it = set.lower_bound({gpus, total.cpus, kFirst});
        continue;
      }
      if (takes_all(view.nodes[static_cast<size_t>(i)])) {
        best = i;
        break;
      }
      ++it;
    }
  } else {
    int best_worth = 0;
    for (size_t i = 0; i < view.nodes.size(); ++i) {
      const NodeFree& n = view.nodes[i];
      if (!takes_all(n)) continue;
      const int w = prefers ? worth(n) : 0;
      if (best < 0) {
        best = static_cast<int>(i);
        best_worth = w;
        continue;
      }
      const NodeFree& b = view.nodes[static_cast<size_t>(best)];
      if (std::make_tuple(-w, n.free_gpus.size(), n.free_cpus) <
          std::make_tuple(-best_worth, b.free_gpus.size(), b.free_cpus)) {
        best = static_cast<int>(i);
        best_worth = w;
      }
    }
  }
  if (best >= 0) {
    std::fill(where.begin(), where.end(), best);
    return where;
  }
  if (replicas.size() == 1) return std::nullopt;

  // 2. First-fit decreasing over nodes, largest free first: largest replicas first. Only nodes
  // that can take the smallest replica are candidates, read in that order as far as needed (on an
  // idle cluster, the first few).
  std::vector<size_t> by_size(replicas.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) {
    return std::tie(replicas[a].gpus, replicas[a].cpus, replicas[a].memory_mb) >
           std::tie(replicas[b].gpus, replicas[b].cpus, replicas[b].memory_mb);
  });
  // Its resources alone: a node that suits none but the smallest's selector may take another.
  const ReplicaDemand smallest{replicas[by_size.back()].gpus, replicas[by_size.back()].cpus,
                               replicas[by_size.back()].memory_mb};
  auto candidate = [&](const NodeFree& n) {
    return Eligible(n, shared_storage_only) &&
           Fits(n, static_cast<int>(n.free_gpus.size()), n.free_cpus, n.free_memory_mb, smallest) &&
           ports_left(n) >= (ports == PortNeed::kNone ? 0 : 1);
  };
  // The next candidate in that order; false when none is left.
  std::function<bool(size_t*)> next;
  std::optional<NodeOrder::Descending> descending;
  std::vector<size_t> sorted;
  size_t sorted_pos = 0;
  if (order != nullptr) {
    descending.emplace(order->set());
    next = [&](size_t* node) {
      while (descending->Next(node)) {
        const NodeFree& n = view.nodes[*node];
        if (static_cast<int>(n.free_gpus.size()) < smallest.gpus) return false;  // nor the rest
        if (candidate(n)) return true;
      }
      return false;
    };
  } else {
    std::vector<int> worths(prefers ? view.nodes.size() : 0, 0);
    for (size_t i = 0; i < view.nodes.size(); ++i) {
      if (!candidate(view.nodes[i])) continue;
      sorted.push_back(i);
      if (prefers) worths[i] = worth(view.nodes[i]);
    }
    std::stable_sort(sorted.begin(), sorted.end(), [&](size_t a, size_t b) {
      const NodeFree& x = view.nodes[a];
      const NodeFree& y = view.nodes[b];
      const int wx = prefers ? worths[a] : 0;
      const int wy = prefers ? worths[b] : 0;
      return std::make_tuple(wx, x.free_gpus.size(), x.free_cpus) >
             std::make_tuple(wy, y.free_gpus.size(), y.free_cpus);
    });
    next = [&](size_t* node) {
      if (sorted_pos == sorted.size()) return false;
      *node = sorted[sorted_pos++];
      return true;
    };
  }
  std::vector<size_t> nodes;  // the candidates read so far, in order
  std::vector<int> gpus_left, cpus_left;
  std::vector<int64_t> mem_left;
  std::unordered_map<int, int> ports_taken;  // space -> ports this gang takes there
  // Takes replica r on candidate k if it fits there.
  auto take = [&](size_t r, size_t k) {
    const NodeFree& n = view.nodes[nodes[k]];
    const ReplicaDemand& d = replicas[r];
    if (!Fits(n, gpus_left[k], cpus_left[k], mem_left[k], d)) return false;
    if (!spread_allows(d.spread_group, static_cast<int>(nodes[k]))) return false;
    if (ports != PortNeed::kNone) {
      int& taken = ports_taken[n.port_space];
      if (ports_left(n) - taken < ports_of(r)) return false;
      taken += ports_of(r);
    }
    gpus_left[k] -= d.gpus;
    cpus_left[k] -= d.cpus;
    mem_left[k] -= d.memory_mb;
    where[r] = static_cast<int>(nodes[k]);
    if (d.spread_group > 0) spread.emplace_back(d.spread_group, static_cast<int>(nodes[k]));
    return true;
  };
  for (size_t r : by_size) {
    bool placed = false;
    for (size_t k = 0; k < nodes.size() && !placed; ++k) placed = take(r, k);
    size_t node;
    while (!placed && next(&node)) {
      const NodeFree& n = view.nodes[node];
      nodes.push_back(node);
      gpus_left.push_back(static_cast<int>(n.free_gpus.size()));
      cpus_left.push_back(n.free_cpus);
      mem_left.push_back(n.free_memory_mb);
      placed = take(r, nodes.size() - 1);
    }
    if (!placed) return std::nullopt;
  }
  return where;
}

// PlaceGang, reading nodes through `order` when given, which it keeps up to date.
std::optional<std::vector<ReplicaSlot>> PlaceGangIn(const std::vector<ReplicaDemand>& replicas,
                                                    ClusterView& view, bool shared_storage_only,
                                                    Scheduler::PortNeed ports, NodeOrder* order,
                                                    const SpreadOccupied& occupied = {}) {
  auto where = FindGangIn(replicas, view, shared_storage_only, ports, order, occupied);
  if (!where) return std::nullopt;
  std::vector<ReplicaSlot> slots = TakeGang(replicas, *where, view);
  if (ports != Scheduler::PortNeed::kNone) {
    for (auto& slot : slots) {
      slot.port = view.TakePort(view.nodes[static_cast<size_t>(slot.node)].port_space);
    }
  }
  if (order != nullptr) {
    for (int node : *where) order->Refile(static_cast<size_t>(node));
  }
  return slots;
}

}  // namespace

std::optional<std::vector<int>> Scheduler::FindGang(const std::vector<ReplicaDemand>& replicas,
                                                    const ClusterView& view,
                                                    bool shared_storage_only, PortNeed ports,
                                                    const SpreadOccupied& occupied) {
  return FindGangIn(replicas, view, shared_storage_only, ports, nullptr, occupied);
}

std::optional<std::vector<ReplicaSlot>> Scheduler::PlaceGang(
    const std::vector<ReplicaDemand>& replicas, ClusterView& view, bool shared_storage_only,
    PortNeed ports, const SpreadOccupied& occupied) {
  return PlaceGangIn(replicas, view, shared_storage_only, ports, nullptr, occupied);
}

std::optional<ReplicaSlot> Scheduler::PlaceOne(const ReplicaDemand& demand, int preferred_node,
                                               ClusterView& view, bool shared_storage_only,
                                               const SpreadOccupied& occupied) {
  // A required topology with no value given yet (no replica of the job holds a node): the
  // preferred node must carry the label at least.
  const std::string* required = RequiredTopology(demand);
  auto in_topology = [&](const NodeFree& n) {
    return required == nullptr || (n.labels != nullptr && n.labels->count(*required) > 0);
  };
  const bool preferred_free =
      demand.spread_group == 0 ||
      std::find(occupied.begin(), occupied.end(),
                std::make_pair(demand.spread_group, preferred_node)) == occupied.end();
  if (preferred_node >= 0 && static_cast<size_t>(preferred_node) < view.nodes.size() &&
      preferred_free) {
    NodeFree& n = view.nodes[static_cast<size_t>(preferred_node)];
    if (Eligible(n, shared_storage_only) && in_topology(n) &&
        Fits(n, static_cast<int>(n.free_gpus.size()), n.free_cpus, n.free_memory_mb, demand) &&
        view.ports_free(n.port_space) >= 1) {
      ReplicaSlot slot;
      slot.node = preferred_node;
      Take(n, demand, slot);
      slot.port = view.TakePort(n.port_space);
      return slot;
    }
  }
  auto slots = PlaceGang({demand}, view, shared_storage_only, PortNeed::kReplicas, occupied);
  if (!slots) return std::nullopt;
  return std::move((*slots)[0]);
}

namespace {

struct Totals {
  int64_t gpus = 0;
  int64_t cpus = 0;
};

Totals TotalsOf(const std::vector<ReplicaDemand>& demands) {
  Totals t;
  for (const auto& d : demands) {
    t.gpus += d.gpus;
    t.cpus += d.cpus;
  }
  return t;
}

bool WithinQuota(const QueueState& q, const Totals& more) {
  return (q.gpu_quota < 0 || q.gpus_used + more.gpus <= q.gpu_quota) &&
         (q.cpu_quota < 0 || q.cpus_used + more.cpus <= q.cpu_quota);
}

bool OverQuota(const QueueState& q) {
  return (q.gpu_quota >= 0 && q.gpus_used > q.gpu_quota) ||
         (q.cpu_quota >= 0 && q.cpus_used > q.cpu_quota);
}

// The queue's weighted dominant share of what it borrows beyond its quota.
double BorrowedShare(const QueueState& q, const ScheduleInput& input) {
  double gpus =
      q.gpu_quota < 0 ? 0.0 : static_cast<double>(std::max<int64_t>(0, q.gpus_used - q.gpu_quota));
  double cpus =
      q.cpu_quota < 0 ? 0.0 : static_cast<double>(std::max<int64_t>(0, q.cpus_used - q.cpu_quota));
  double share = std::max(gpus / static_cast<double>(std::max<int64_t>(1, input.cluster_gpus)),
                          cpus / static_cast<double>(std::max<int64_t>(1, input.cluster_cpus)));
  return share / (q.weight > 0 ? q.weight : 1e-9);
}

// The fewest of `candidates` (in preference order: the first is the one to preempt first) whose
// resources, with what is free in `view`, let `demands` fit. `allowed(victim, chosen so far)`
// says whether a candidate may join the set. On success the victims' resources are left
// released in `view` (the caller takes the gang's room); on failure `view` is as it was.
template <typename Allowed>
std::optional<std::vector<size_t>> ChooseVictims(const std::vector<ReplicaDemand>& demands,
                                                 bool shared_storage_only,
                                                 const std::vector<size_t>& candidates,
                                                 const std::vector<RunningJob>& running,
                                                 int64_t free_gpus, ClusterView& view,
                                                 Allowed allowed) {
  auto fits = [&] { return Scheduler::FindGang(demands, view, shared_storage_only).has_value(); };
  // With every candidate gone, does it fit at all?
  for (size_t c : candidates) Release(running[c], view);
  bool possible = fits();
  for (size_t c : candidates) Retake(running[c], view);
  if (!possible) return std::nullopt;

  // One victim: tried in preference order.
  const int64_t gpus = TotalsOf(demands).gpus;
  std::vector<size_t> none;
  for (size_t c : candidates) {
    if (running[c].gpus + free_gpus < gpus || !allowed(c, none)) continue;
    Release(running[c], view);
    if (fits()) return std::vector<size_t>{c};
    Retake(running[c], view);
  }

  // Several: largest first until it fits ...
  std::vector<size_t> by_size = candidates;
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) {
    return std::tie(running[a].gpus, running[a].cpus) > std::tie(running[b].gpus, running[b].cpus);
  });
  std::vector<size_t> chosen;
  bool fit = false;
  for (size_t c : by_size) {
    if (!allowed(c, chosen)) continue;
    Release(running[c], view);
    chosen.push_back(c);
    if ((fit = fits())) break;
  }
  if (!fit) {
    for (size_t c : chosen) Retake(running[c], view);
    return std::nullopt;
  }
  // ... then every victim it fits without is spared, the least preferred victim first.
  std::vector<size_t> rank(running.size(), 0);
  for (size_t k = 0; k < candidates.size(); ++k) rank[candidates[k]] = k;
  std::vector<size_t> spare = chosen;
  std::sort(spare.begin(), spare.end(), [&](size_t a, size_t b) { return rank[a] > rank[b]; });
  for (size_t c : spare) {
    Retake(running[c], view);
    if (fits()) {
      chosen.erase(std::find(chosen.begin(), chosen.end(), c));
    } else {
      Release(running[c], view);
    }
  }
  std::sort(chosen.begin(), chosen.end(), [&](size_t a, size_t b) { return rank[a] < rank[b]; });
  return chosen;
}

}  // namespace

ScheduleResult Scheduler::Schedule(const std::vector<JobRequest>& requests, ClusterView& view,
                                   int64_t now_ms, const ScheduleInput& input) const {
  ScheduleResult result;
  result.queues = input.queues;
  if (result.queues.empty()) result.queues.push_back(QueueState{0, -1, 1.0, 0, 0});
  std::vector<QueueState>& queues = result.queues;
  const size_t nq = queues.size();
  auto queue_of = [&](int q) {
    return q >= 0 && static_cast<size_t>(q) < nq ? static_cast<size_t>(q) : size_t{0};
  };
  result.borrowing.assign(requests.size(), false);

  // Each request's shape, as a round id (from the ShapeTable id where the request has one, else
  // from its demands), and its totals: the loops below touch only these arrays, not the demands
  // (100,000 queued jobs are 100,000 lists scattered in memory).
  std::vector<Totals> totals(requests.size());
  result.shapes.resize(requests.size());
  std::vector<const JobRequest*> shape_first;  // round shape id -> its first request
  std::vector<Totals> shape_totals;
  std::unordered_map<uint64_t, size_t> ids_by_table_id;  // (ShapeTable id, node filter) -> id
  std::unordered_map<uint64_t, std::vector<size_t>> ids_by_hash;
  auto new_shape = [&](const JobRequest& r) {
    shape_first.push_back(&r);
    shape_totals.push_back(TotalsOf(r.demands()));
    return shape_first.size() - 1;
  };
  std::vector<std::vector<size_t>> order(nq);
  for (size_t i = 0; i < requests.size(); ++i) {
    const JobRequest& r = requests[i];
    size_t id;
    if (r.shape_id != 0) {
      auto [it, fresh] =
          ids_by_table_id.try_emplace(uint64_t{r.shape_id} * 2 + r.needs_shared_storage);
      if (fresh) it->second = new_shape(r);
      id = it->second;
    } else {
      const std::vector<ReplicaDemand>& demands = r.demands();
      std::vector<size_t>& ids = ids_by_hash[ShapeHash(demands, r.needs_shared_storage)];
      auto same = std::find_if(ids.begin(), ids.end(), [&](size_t k) {
        return shape_first[k]->needs_shared_storage == r.needs_shared_storage &&
               SameShape(shape_first[k]->demands(), demands);
      });
      id = same != ids.end() ? *same : ids.emplace_back(new_shape(r));
    }
    result.shapes[i] = id;
    totals[i] = shape_totals[id];
    order[queue_of(r.queue)].push_back(i);
  }
  // Nominated first, then by priority, then in the order given (often already so: no sort).
  auto before = [&](size_t a, size_t b) {
    return std::make_tuple(!requests[a].nominated, -requests[a].priority) <
           std::make_tuple(!requests[b].nominated, -requests[b].priority);
  };
  for (auto& o : order) {
    if (!std::is_sorted(o.begin(), o.end(), before)) std::stable_sort(o.begin(), o.end(), before);
  }
  std::vector<size_t> head(nq, 0);
  std::vector<bool> held_back(nq, false);  // a reservation holds this queue's later jobs
  bool borrowing_stopped = false;          // a reservation holds every borrower
  std::vector<int> reserved_for(nq, -1);   // the request a held-back queue waits for
  int first_reserved = -1;
  result.waiting_behind.assign(requests.size(), -1);

  std::vector<bool> failed_shapes(shape_first.size(), false);  // no room for it this round
  int64_t total_free_gpus = 0;
  for (const auto& n : view.nodes) total_free_gpus += static_cast<int64_t>(n.free_gpus.size());
  std::vector<size_t> failed;           // not placed, in the order tried
  std::optional<NodeOrder> node_order;  // once the round has searched often

  while (true) {
    // The next job: the head of one queue (see the header comment for the order).
    size_t best = nq;
    std::tuple<bool, bool, double, int, size_t> best_key;
    for (size_t q = 0; q < nq; ++q) {
      if (held_back[q] || head[q] >= order[q].size()) continue;
      size_t i = order[q][head[q]];
      bool within = WithinQuota(queues[q], totals[i]);
      auto key =
          std::make_tuple(!requests[i].nominated, !within,
                          within ? 0.0 : BorrowedShare(queues[q], input), -requests[i].priority, i);
      if (best == nq || key < best_key) {
        best = q;
        best_key = key;
      }
    }
    if (best == nq) break;
    const size_t q = best;
    const size_t i = order[q][head[q]++];
    const JobRequest& job = requests[i];
    const bool within = !std::get<1>(best_key);
    result.borrowing[i] = !within;
    bool placed = false;
    // The shape's first request's demands: equal to this one's, and already in cache.
    const std::vector<ReplicaDemand>& demands = shape_first[result.shapes[i]]->demands();
    if (!within && borrowing_stopped) result.waiting_behind[i] = first_reserved;
    if (job.schedulable && (within || !borrowing_stopped) && totals[i].gpus <= total_free_gpus) {
      if (!failed_shapes[result.shapes[i]]) {
        ++result.searches;
        if (!node_order && result.searches > kSearchesBeforeNodeOrder) node_order.emplace(view);
        auto slots = PlaceGangIn(demands, view, job.needs_shared_storage, PortNeed::kJob,
                                 node_order ? &*node_order : nullptr);
        if (slots) {
          JobPlacement p;
          p.request = i;
          p.replicas = std::move(*slots);
          const int chief_space =
              p.replicas.empty() ? 0
                                 : view.nodes[static_cast<size_t>(p.replicas[0].node)].port_space;
          p.master_port = view.TakePort(chief_space);
          p.bootstrap_port = view.TakePort(chief_space);
          total_free_gpus -= totals[i].gpus;
          queues[q].gpus_used += totals[i].gpus;
          queues[q].cpus_used += totals[i].cpus;
          result.placed.push_back(std::move(p));
          placed = true;
        } else {
          failed_shapes[result.shapes[i]] = true;
        }
      }
    }
    if (placed) continue;
    failed.push_back(i);
    if (now_ms - job.waiting_since_ms > options_.starvation_limit_ms) {
      held_back[q] = true;
      borrowing_stopped = true;
      reserved_for[q] = static_cast<int>(i);
      if (result.starving_job.empty()) {
        result.starving_job = job.name;
        first_reserved = static_cast<int>(i);
      }
    }
  }
  for (size_t q = 0; q < nq; ++q) {
    for (size_t k = head[q]; k < order[q].size(); ++k) {
      result.waiting_behind[order[q][k]] = reserved_for[q];
    }
  }

  // Preemption, for the jobs that did not fit, in the order they were tried.
  if (input.running.empty()) return result;
  std::vector<bool> taken(input.running.size(), false);
  std::set<std::tuple<uint64_t, size_t, int, bool>> hopeless;  // (shape, queue, priority, within)
  size_t searches = 0;
  for (size_t i : failed) {
    if (searches >= kMaxPreemptorsPerRound) break;
    const JobRequest& job = requests[i];
    const std::vector<ReplicaDemand>& demands = shape_first[result.shapes[i]]->demands();
    if (!job.schedulable || !job.may_preempt) continue;
    const size_t q = queue_of(job.queue);
    const bool within = WithinQuota(queues[q], totals[i]);
    auto key = std::make_tuple(result.shapes[i], q, job.priority, within);
    if (hopeless.count(key)) continue;
    std::vector<size_t> candidates;
    for (size_t r = 0; r < input.running.size(); ++r) {
      const RunningJob& v = input.running[r];
      if (taken[r]) continue;
      size_t vq = queue_of(v.queue);
      if ((vq == q && v.priority < job.priority) || (within && vq != q && OverQuota(queues[vq]))) {
        candidates.push_back(r);
      }
    }
    if (candidates.empty()) {
      hopeless.insert(key);
      continue;
    }
    ++searches;
    const auto& running = input.running;
    std::stable_sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
      const RunningJob& x = running[a];
      const RunningJob& y = running[b];
      return std::make_tuple(x.priority, !OverQuota(queues[queue_of(x.queue)]), -x.start_ms) <
             std::make_tuple(y.priority, !OverQuota(queues[queue_of(y.queue)]), -y.start_ms);
    });
    if (candidates.size() > kMaxCandidates) candidates.resize(kMaxCandidates);
    // A victim of another queue is allowed while that queue still uses more than its quota once
    // the victims chosen before it are gone.
    auto allowed = [&](size_t c, const std::vector<size_t>& chosen) {
      size_t vq = queue_of(running[c].queue);
      if (vq == q && running[c].priority < job.priority) return true;
      QueueState left = queues[vq];
      for (size_t other : chosen) {
        if (queue_of(running[other].queue) != vq) continue;
        left.gpus_used -= running[other].gpus;
        left.cpus_used -= running[other].cpus;
      }
      return OverQuota(left);
    };
    auto victims = ChooseVictims(demands, job.needs_shared_storage, candidates, running,
                                 total_free_gpus, view, allowed);
    if (!victims) {
      hopeless.insert(key);
      continue;
    }
    auto where = FindGang(demands, view, job.needs_shared_storage);
    COHORT_CHECK(where.has_value());
    TakeGang(demands, *where, view);
    for (size_t v : *victims) {
      taken[v] = true;
      QueueState& vq = queues[queue_of(running[v].queue)];
      vq.gpus_used -= running[v].gpus;
      vq.cpus_used -= running[v].cpus;
      total_free_gpus += running[v].gpus;
    }
    total_free_gpus -= totals[i].gpus;
    queues[q].gpus_used += totals[i].gpus;
    queues[q].cpus_used += totals[i].cpus;
    result.preemptions.push_back(Preemption{i, std::move(*victims)});
  }
  return result;
}

}  // namespace cohort::coordinator
