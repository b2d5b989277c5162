// Scheduler is the coordinator's placement logic: pure data in, placements and preemptions out, no
// sockets, no clock of its own, so it is unit-tested directly.
//
// Policy (gang scheduling in queues with quotas, fair share and priorities):
//  - A job is placed only when ALL its replicas fit at once (GPUs, CPUs, memory per node). No
//    partial holds: a job that does not fit takes nothing, so nothing can deadlock.
//  - Queues (coordinator/queue_config.h). Each queue has a GPU and a CPU quota (what it is
//    guaranteed) and a weight. Within a queue, jobs are tried by priority (highest first), then in
//    the order given (the coordinator passes submit order). Across queues, each step of a round
//    takes the head of one queue, chosen so that:
//      1. a job whose preemptions have completed (`nominated`) goes first;
//      2. then jobs that fit within their queue's quota (usage + the job <= quota, GPUs and CPUs),
//         highest priority first;
//      3. then jobs that would borrow idle capacity beyond their quota, from the queue with the
//         lowest weighted share of what it borrows: max(GPUs over quota / cluster GPUs, CPUs over
//         quota / cluster CPUs) / weight (the dominant resource, as Kueue's fair sharing and
//         DRF do), then highest priority.
//    A job that does not fit is skipped and later jobs may start (backfill) ...
//  - ... Reservation rule: once a queue's first job that does not fit has waited longer than
//    `starvation_limit_ms`, no later job of that queue starts and no queue borrows beyond its
//    quota until it starts (`starving_job` names it). Jobs of other queues still start within
//    their quotas. So small jobs, of its queue or borrowing ones of any queue, cannot overtake a
//    big job forever: what frees up is left for it.
//  - Preemption. A job that did not fit may stop running jobs ("victims"), each either
//      a. of its own queue with a lower priority, or
//      b. of another queue that uses more than its quota (borrowing), when the job fits within
//         its own queue's quota (reclaim: the quota is a guarantee); any priority.
//    A job that borrows itself only preempts under (a). Victims are the FEWEST jobs whose
//    resources, added to what is free, let the gang fit: one victim is searched exhaustively (in
//    preference order: lowest priority, borrowing queue, latest started); otherwise victims are
//    added largest first until it fits, then every victim not needed is dropped again (so no
//    victim of the set is superfluous; the set is minimal, not always minimum). At most
//    kMaxPreemptorsPerRound jobs search a round, each over at most kMaxCandidates candidates.
//    The preemptor's placement is taken from the view (later jobs of the round do not plan on
//    that room), but it is not placed: its victims first stop through their grace period; it is
//    placed, `nominated`, in a round after they are gone.
//  - Placement prefers packing: all replicas on one node when any node can hold them (best fit:
//    the node with the fewest free GPUs, then CPUs, that fits); otherwise first-fit-decreasing over
//    nodes ordered by free GPUs (largest first), which keeps a job on few nodes. Replicas of one
//    job may share a node. The search is greedy: it may miss a placement an exhaustive search
//    would find, never produces an invalid one.
//  - GPUs are pinned per replica (node-local indices, lowest free first); a GPU is never given to
//    two live replicas. Where the agent named each GPU's NUMA node, a replica's GPUs come from
//    one node where one has enough free (the one with fewest free that does, so that whole nodes
//    stay free for larger replicas), else from as few nodes as it can (PickGpus): its GPUs then
//    share the CPUs and memory near them (agent/inventory.h).
//  - Ports: each replica gets one port from [port_min, port_max], unique in its node's port space
//    (the network stack its replicas bind in: a host, or a network namespace; several agents on
//    one host share one, as in the demo); each job also gets a master_port and a bootstrap_port,
//    in its chief's (replica 0's) space. A gang is placed only where each space it uses has the
//    ports it needs, so a cluster of N hosts has N times --port-range, not one range in all.
//  - Within one round, a job whose demand equals one that already failed is skipped without a
//    search (10,000 queued jobs of a few shapes cost a few searches, not 10,000). Each request's
//    demands are read once a round, to find its shape; the rest of the round uses the shape's id.
//    A round that places many jobs (thousands at once on a cluster that just freed up) orders the
//    nodes by free GPUs and CPUs after kSearchesBeforeNodeOrder searches, so that each further
//    search costs O(log nodes), not a pass over every node; the placements are the same.
//  - Node selectors. A replica whose pool gives a node_selector or node_affinity is placed only on
//    nodes whose labels (NodeFree::labels) match them (NodeSelector::Matches); the whole gang on
//    one node only where every replica's selector holds.
//  - Preferences. Where replicas give preferred_node_affinity, the gang goes where its
//    preferences weigh most: on one node, the one whose labels satisfy the most weight (summed
//    over the gang's replicas), best fit among equals; over several, first-fit-decreasing reads
//    the nodes by that weight first, then by free resources. Such a search reads every node (no
//    node order).
//  - One per node. Replicas of a pool with one_per_node (ReplicaDemand::spread_group) go to
//    distinct nodes: the whole gang is never put on one node then, first-fit-decreasing skips a
//    node that holds one of the group already, and a replica restarted or added alone avoids the
//    nodes its running pool-mates hold (SpreadOccupied).
//  - Topology. A job's topology levels (ReplicaDemand::topology: its preferred_topology keys,
//    then its required_topology key) are label keys (a rack, a block) tried tightest first: at a
//    level K the gang goes whole on nodes that share one value of K, the values tried best fit
//    first (the one whose nodes have the fewest free GPUs, then CPUs, that may still hold the
//    gang), each as the gang's search with every replica's selector narrowed to that value
//    (InDomain). Below a required level, each value is also narrowed to one value of the
//    required key (a rack that spans two zones is tried zone by zone). When no value of any
//    level has room: with a required level the gang is not placed (nodes without its label take
//    none of it), else it is placed anywhere. A replica placed alone (a restart, elastic growth)
//    is narrowed by its caller to the values its job's running replicas share. Such a search
//    reads every node once per value tried.
//  - Storage. A job whose output dir lies under the cluster's checked output root
//    (`needs_shared_storage`: its restore after a move must find its checkpoints there) is placed,
//    and restarted, only on nodes whose agents read the coordinator's storage marker there
//    (`NodeFree::shares_output_root`, coordinator/storage_probe.h); for preemption too, only room
//    on such nodes counts.
//
// Thread safety: none needed; a Scheduler has no mutable state besides its port cursor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/job_spec.h"

namespace cohort::coordinator {

struct ReplicaDemand {
  int gpus = 0;
  int cpus = 1;
  int64_t memory_mb = 0;  // 0: not limited
  // Only nodes whose labels it matches may take it (its pool's node_selector and node_affinity,
  // InternSelector'd, so that equal selectors are one pointer); nullptr: any node.
  const NodeSelector* selector = nullptr;
  // Above 0: no two replicas of one gang with this group share a node, nor go to a node the
  // caller says holds one already (see "One per node"); its pool's one_per_node (PoolDemand).
  int spread_group = 0;
  // Its pool's preferred_node_affinity (InternPreference'd); nullptr: none. See "Preferences".
  const std::vector<NodePreference>* preference = nullptr;
  // Its job's topology levels (SchedulingSpec::TopologyLevels, InternTopology'd), the same for
  // every replica of the gang; nullptr: none. See "Topology".
  const std::vector<std::string>* topology = nullptr;
  // No required_topology: anywhere when no value of any level has room.
  bool topology_preferred = false;
};

// The one copy of a list of topology levels; nullptr for none. Thread-safe.
const std::vector<std::string>* InternTopology(const std::vector<std::string>& levels);
// The required level's key of `demand` (the last level), or nullptr when it has none.
const std::string* RequiredTopology(const ReplicaDemand& demand);
// `demand` on nodes whose labels have each of `domain`'s values only: its selector narrowed (In
// [value] per key), its topology dropped (see "Topology").
ReplicaDemand InDomain(const ReplicaDemand& demand, const NodeLabels& domain);

// The nodes (ClusterView indices) already holding a replica of a spread group: what a replica of
// that group placed now must avoid ({spread_group, node}).
using SpreadOccupied = std::vector<std::pair<int, int>>;

// The one copy of `selector` every demand with that selector points to (never freed: a distinct
// selector costs a submitted job first); nullptr for an empty one. Thread-safe.
const NodeSelector* InternSelector(const NodeSelector& selector);
// The same for a pool's preferred_node_affinity.
const std::vector<NodePreference>* InternPreference(const std::vector<NodePreference>& preference);

// What is still free on one node this round. The coordinator builds it from node capacity minus
// every live replica.
struct NodeFree {
  std::string node_id;
  std::vector<int> free_gpus;   // node-local indices, ascending
  std::map<int, int> gpu_numa;  // GPU index -> its NUMA node, where its agent named one
  int free_cpus = 0;
  int64_t free_memory_mb = 0;
  bool memory_unlimited = false;    // the node did not report its memory
  bool shares_output_root = false;  // its agent sees the coordinator's output root (see "Storage")
  const NodeLabels* labels = nullptr;  // its agent's labels (see "Node selectors"); nullptr: none
  int port_space = 0;                  // index of its port space in the ClusterView (see "Ports")
  // GPUs its agent finds unfit, and others an admin cordoned (neither in free_gpus): said in a
  // waiting reason.
  int unfit_gpus = 0;
  int cordoned_gpus = 0;
};

// `count` of `free_gpus` (ascending) for one replica, ascending: lowest first where `gpu_numa`
// names no NUMA node for one of them; else those of the NUMA node with the fewest free GPUs that
// has `count`, lowest first, and where none has, whole nodes largest first until one can give the
// rest (see "GPUs are pinned" above). Needs count <= free_gpus.size().
std::vector<int> PickGpus(const std::vector<int>& free_gpus, const std::map<int, int>& gpu_numa,
                          int count);

// Whether `node`'s labels match `selector` (nullptr: any node does; a node without labels
// matches only what asks for none to be there: NotIn, DoesNotExist).
bool Selects(const NodeFree& node, const NodeSelector* selector);

// Free resources of the whole cluster plus the ports in use in each port space; Schedule()
// consumes from it. A new view has one port space, 0, where every node is until the builder adds
// more (one host, as in the unit tests and the demo).
class ClusterView {
 public:
  // MarkPortUsed's space for a port held where the view cannot tell the space (a replica on a
  // node that has not registered since the coordinator started): no space may hand it out.
  static constexpr int kEverySpace = -1;

  ClusterView(int port_min, int port_max);
  std::vector<NodeFree> nodes;

  // A new, empty port space; returns its index.
  int AddPortSpace();
  // The port space of the nodes that report port domain `domain` (NodeRecord::port_domain_id):
  // the first domain asked for is space 0, each other one gets a new space.
  int SpaceOfDomain(uint32_t domain);
  int port_spaces() const { return static_cast<int>(spaces_.size()); }
  int port_range() const { return port_max_ - port_min_ + 1; }
  // Marks `port` used in `space` (or kEverySpace); a port outside the range is ignored.
  void MarkPortUsed(int space, int port);
  // The next port free in `space` at or after that space's cursor (wrapping), marked used; 0
  // when none is left.
  int TakePort(int space);
  // Ports `space` can still hand out. A port marked both in `space` and in every space is counted
  // twice, so this may be short by such ports (never over).
  int ports_free(int space) const;
  // Whether `port` is in use in `space`.
  bool Used(int space, int port) const {
    return Contains(Key(kEverySpace, port)) || Contains(Key(space, port));
  }

 private:
  struct PortSpace {
    int used = 0;    // ports marked in this space alone
    int cursor = 0;  // offset into the range where TakePort looks first
  };
  // The (space, port) pairs in use: an open-addressing set, since a bitmap of the range for each
  // of 10,000 spaces (each with a few ports used) would be 12-80 MB to clear every round.
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t Key(int space, int port) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(space + 1)) << 17) |
           static_cast<uint32_t>(port);
  }
  static size_t Slot(uint64_t key, size_t mask) {  // Fibonacci hashing: the product's high bits
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
  }
  bool Contains(uint64_t key) const;
  bool Insert(uint64_t key);  // false: it was there

  int port_min_, port_max_;
  std::vector<PortSpace> spaces_;
  std::vector<int> space_of_domain_;  // port domain id -> its space; -1: not asked for yet
  bool domain_in_space_0_ = false;
  int every_used_ = 0;  // ports marked in every space
  std::vector<uint64_t> keys_;
  size_t size_ = 0;
};

struct ReplicaSlot {
  int node = -1;  // index into ClusterView::nodes
  std::vector<int> gpus;
  int port = 0;
};

// Interns demand lists: equal lists get the same id, counted from 1 (0 means none). The
// JobController gives each job the id of its demands when it takes the job in, so that a
// scheduling round knows which of 100,000 queued jobs share a shape without reading their
// demands (each a list somewhere else in memory). It keeps one copy of each distinct list it was
// given, for as long as it lives (a distinct shape costs a submitted job first).
class ShapeTable {
 public:
  uint32_t Intern(const std::vector<ReplicaDemand>& demands);
  size_t size() const { return shapes_.size(); }

 private:
  std::unordered_map<uint64_t, std::vector<uint32_t>> ids_by_hash_;
  std::vector<std::vector<ReplicaDemand>> shapes_;  // id - 1 -> its list
};

struct JobRequest {
  std::string name;
  int64_t waiting_since_ms = 0;         // when it (last) entered the queue
  std::vector<ReplicaDemand> replicas;  // in the job's replica order; [0] is the chief
  // When set, used instead of `replicas` (lets the caller keep one demand list per job instead of
  // copying it every round). Must outlive the Schedule() call.
  const std::vector<ReplicaDemand>* shared_replicas = nullptr;
  const std::vector<ReplicaDemand>& demands() const {
    return shared_replicas ? *shared_replicas : replicas;
  }
  // The ShapeTable id of demands(), or 0 (the round finds the shape from the demands themselves).
  uint32_t shape_id = 0;
  bool schedulable = true;  // false: waiting on something else (old attempts ending);
                            // it still counts for the starvation limit
  int queue = 0;            // index into ScheduleInput::queues
  int priority = 0;         // larger runs first and may preempt smaller
  bool nominated = false;   // the jobs it preempted are gone: it goes first
  bool may_preempt = true;  // false: jobs it preempted are still stopping
  // Only nodes that share the output root may take it (see "Storage").
  bool needs_shared_storage = false;
};

// One queue as a round starts: its quota, weight and what its jobs hold now.
struct QueueState {
  int64_t gpu_quota = 0;
  int64_t cpu_quota = 0;
  double weight = 1.0;
  int64_t gpus_used = 0;  // by its jobs' replicas that hold resources (running or stopping)
  int64_t cpus_used = 0;
};

// What one replica of a running job holds on one node.
struct HeldSlot {
  int node = -1;  // index into ClusterView::nodes; -1: a node that takes no work (not in the view)
  std::vector<int> gpus;
  int cpus = 0;
  int64_t memory_mb = 0;
};

// A running job (placed, not being stopped): a preemption candidate.
struct RunningJob {
  std::string name;
  int queue = 0;
  int priority = 0;
  int64_t start_ms = 0;  // its latest placement: among equals the latest started is preempted
  std::vector<HeldSlot> held;
  int64_t gpus = 0;  // totals of `held`
  int64_t cpus = 0;
};

// Everything a round needs besides the queued jobs and the view. An empty `queues` means one
// queue with no quota (every job borrows; the order is priority, then the order given).
struct ScheduleInput {
  std::vector<QueueState> queues;
  std::vector<RunningJob> running;
  int64_t cluster_gpus = 0;  // every GPU and CPU of the nodes that take work (the shares' unit)
  int64_t cluster_cpus = 0;
};

struct Preemption {
  size_t request = 0;           // the job that preempts (index into the request list)
  std::vector<size_t> victims;  // indices into ScheduleInput::running
};

struct JobPlacement {
  size_t request = 0;  // index into the request list
  std::vector<ReplicaSlot> replicas;
  int master_port = 0;
  int bootstrap_port = 0;
};

struct ScheduleResult {
  std::vector<JobPlacement> placed;
  // Set when the starvation limit held later jobs back: the name of the job they wait for.
  std::string starving_job;
  size_t searches = 0;  // placement searches actually run (the rest were shape-cache hits)
  std::vector<Preemption> preemptions;
  // Per request: it would have borrowed beyond its queue's quota (set for placed and unplaced
  // requests alike; the waiting reason says so).
  std::vector<bool> borrowing;
  // Per request: the request whose reservation held it back (see the reservation rule), or -1.
  std::vector<int> waiting_behind;
  // Per queue: usage after the round (placements and preemptions applied).
  std::vector<QueueState> queues;
  // Per request: its shape, a small id shared by the requests whose demands and node filter
  // (needs_shared_storage) are equal; ids count from 0 in order of first appearance.
  std::vector<size_t> shapes;
};

struct SchedulerOptions {
  int64_t starvation_limit_ms = 5 * 60 * 1000;
};

class Scheduler {
 public:
  static constexpr size_t kMaxPreemptorsPerRound = 16;
  static constexpr size_t kMaxCandidates = 512;
  // A round that has run this many placement searches (each a pass over every node) orders the
  // nodes by free resources for the rest of its searches (a round placing thousands of jobs).
  static constexpr size_t kSearchesBeforeNodeOrder = 32;

  explicit Scheduler(SchedulerOptions options) : options_(options) {}

  // One scheduling round over `requests` (each queue's jobs in submit order). Placed jobs'
  // resources and ports, and the room preemptors will take, are taken from `view`.
  ScheduleResult Schedule(const std::vector<JobRequest>& requests, ClusterView& view,
                          int64_t now_ms, const ScheduleInput& input) const;
  // One queue without quota and nothing to preempt.
  ScheduleResult Schedule(const std::vector<JobRequest>& requests, ClusterView& view,
                          int64_t now_ms) const {
    return Schedule(requests, view, now_ms, ScheduleInput{});
  }

  // The ports a gang needs where it goes (see "Ports"): none (the resources alone), one per
  // replica in its node's space, or also the job's two in its chief's (replica 0's) space.
  enum class PortNeed { kNone, kReplicas, kJob };

  // Places all of `replicas` at once (the gang rule) or nothing; takes from `view` on success,
  // with a port for each replica (the job's own two are the caller's, where kJob left room for
  // them). `shared_storage_only`: only on nodes that share the output root.
  // `occupied`: the nodes running replicas of the gang's spread groups already hold.
  static std::optional<std::vector<ReplicaSlot>> PlaceGang(
      const std::vector<ReplicaDemand>& replicas, ClusterView& view,
      bool shared_storage_only = false, PortNeed ports = PortNeed::kJob,
      const SpreadOccupied& occupied = {});
  // Where PlaceGang would put each replica (node indices), taking nothing.
  static std::optional<std::vector<int>> FindGang(const std::vector<ReplicaDemand>& replicas,
                                                  const ClusterView& view,
                                                  bool shared_storage_only = false,
                                                  PortNeed ports = PortNeed::kJob,
                                                  const SpreadOccupied& occupied = {});
  // Places one replica, on `preferred_node` (an index, or -1) when it fits there; takes from
  // `view` and assigns a port. nullopt when it fits nowhere (or no port is left).
  static std::optional<ReplicaSlot> PlaceOne(const ReplicaDemand& demand, int preferred_node,
                                             ClusterView& view, bool shared_storage_only = false,
                                             const SpreadOccupied& occupied = {});

 private:
  SchedulerOptions options_;
};

}  // namespace cohort::coordinator
