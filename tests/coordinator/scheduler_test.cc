#include "coordinator/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <tuple>

namespace cohort::coordinator {
namespace {

// The interned selector of a pool with `labels` as its node_selector and `affinity` as its
// node_affinity.
const NodeSelector* Wants(const NodeLabels& labels,
                          const std::vector<LabelRequirement>& affinity = {}) {
  return InternSelector(NodeSelector{labels, affinity});
}

NodeFree Node(const std::string& id, int gpus, int cpus = 64, int64_t mem = 0) {
  NodeFree n;
  n.node_id = id;
  for (int i = 0; i < gpus; ++i) n.free_gpus.push_back(i);
  n.free_cpus = cpus;
  n.free_memory_mb = mem;
  n.memory_unlimited = mem == 0;
  return n;
}

JobRequest Job(const std::string& name, int replicas, int gpus_each, int64_t since = 0,
               int cpus_each = 1) {
  JobRequest j;
  j.name = name;
  j.waiting_since_ms = since;
  for (int i = 0; i < replicas; ++i) j.replicas.push_back({gpus_each, cpus_each, 0});
  return j;
}

std::vector<std::string> PlacedNames(const ScheduleResult& r, const std::vector<JobRequest>& q) {
  std::vector<std::string> out;
  for (const auto& p : r.placed) out.push_back(q[p.request].name);
  return out;
}

TEST(SchedulerTest, GangIsAllOrNothing) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("a", 2), Node("b", 1)};
  Scheduler s({});
  std::vector<JobRequest> q = {Job("big", 4, 1)};  // needs 4 GPUs, cluster has 3
  auto r = s.Schedule(q, view, 0);
  EXPECT_TRUE(r.placed.empty());
  EXPECT_EQ(view.nodes[0].free_gpus.size(), 2u);  // nothing held
  EXPECT_EQ(view.nodes[1].free_gpus.size(), 1u);
  std::vector<JobRequest> q2 = {Job("fits", 3, 1)};
  r = s.Schedule(q2, view, 0);
  ASSERT_EQ(r.placed.size(), 1u);
  EXPECT_EQ(r.placed[0].replicas.size(), 3u);
  EXPECT_TRUE(view.nodes[0].free_gpus.empty());
  EXPECT_TRUE(view.nodes[1].free_gpus.empty());
}

// Replicas with a node selector go only to nodes with those labels: the whole gang on one node
// only where every selector holds, else each replica on a node of its own selector's; a selector
// no free node has leaves the gang unplaced; PlaceOne too.
TEST(SchedulerTest, NodeSelectorsPlaceEachReplicaOnANodeWithItsLabels) {
  const NodeLabels h100{{"gpu", "h100"}}, a100{{"gpu", "a100"}}, cpu{{"kind", "cpu"}};
  const NodeSelector* wants_h100 = Wants({{"gpu", "h100"}});
  EXPECT_EQ(wants_h100, Wants(h100)) << "equal selectors are one pointer";
  EXPECT_EQ(Wants({}), nullptr);
  const NodeSelector* wants_cpu = Wants(cpu);
  ClusterView view(20000, 20999);
  view.nodes = {Node("big-a100", 8), Node("h100-1", 2), Node("h100-2", 2), Node("cpu", 0)};
  view.nodes[0].labels = &a100;
  view.nodes[1].labels = &h100;
  view.nodes[2].labels = &h100;
  view.nodes[3].labels = &cpu;
  Scheduler s({});
  // A chief on the CPU node, three one-GPU workers on the H100 nodes: the A100 node, which could
  // hold them all, takes none.
  JobRequest j = Job("j", 0, 0);
  j.replicas = {
      {0, 1, 0, wants_cpu}, {1, 1, 0, wants_h100}, {1, 1, 0, wants_h100}, {1, 1, 0, wants_h100}};
  std::vector<JobRequest> q = {j};
  auto r = s.Schedule(q, view, 0);
  ASSERT_EQ(r.placed.size(), 1u);
  const auto& slots = r.placed[0].replicas;
  EXPECT_EQ(view.nodes[static_cast<size_t>(slots[0].node)].node_id, "cpu");
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(view.nodes[static_cast<size_t>(slots[i].node)].node_id.rfind("h100-", 0), 0u) << i;
  }
  EXPECT_EQ(view.nodes[0].free_gpus.size(), 8u);
  // One H100 GPU is left: a two-GPU H100 replica waits, though the A100 node is idle.
  std::vector<JobRequest> q2 = {Job("two", 1, 2)};
  q2[0].replicas[0].selector = wants_h100;
  EXPECT_TRUE(s.Schedule(q2, view, 0).placed.empty());
  EXPECT_FALSE(Scheduler::PlaceOne({2, 1, 0, wants_h100}, 0, view).has_value());
  auto one = Scheduler::PlaceOne({1, 1, 0, wants_h100}, 0, view);  // prefers the A100: not it
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(view.nodes[static_cast<size_t>(one->node)].node_id.rfind("h100-", 0), 0u);
  // Without a selector the same replica goes anywhere.
  std::vector<JobRequest> q3 = {Job("any", 1, 2)};
  EXPECT_EQ(s.Schedule(q3, view, 0).placed.size(), 1u);
}

// node_affinity's expressions: In takes any listed value, NotIn and DoesNotExist also take a node
// without labels, Exists needs the key, and all of them hold together with node_selector's.
TEST(SchedulerTest, NodeAffinityExpressionsSelectTheirNodes) {
  const NodeLabels h100{{"gpu", "h100"}, {"ib", "yes"}}, h200{{"gpu", "h200"}},
      a100{{"gpu", "a100"}, {"zone", "b"}};
  ClusterView view(20000, 20999);
  view.nodes = {Node("h100", 1), Node("h200", 1), Node("a100", 1), Node("bare", 1)};
  view.nodes[0].labels = &h100;
  view.nodes[1].labels = &h200;
  view.nodes[2].labels = &a100;
  auto selected = [&](const NodeSelector* selector) {
    std::string out;
    for (const NodeFree& n : view.nodes) {
      if (Selects(n, selector)) out += (out.empty() ? "" : ",") + n.node_id;
    }
    return out;
  };
  using Op = LabelOp;
  EXPECT_EQ(selected(Wants({}, {{"gpu", Op::kIn, {"h100", "h200"}}})), "h100,h200");
  EXPECT_EQ(selected(Wants({}, {{"gpu", Op::kNotIn, {"h100", "h200"}}})), "a100,bare");
  EXPECT_EQ(selected(Wants({}, {{"ib", Op::kExists, {}}})), "h100");
  EXPECT_EQ(selected(Wants({}, {{"zone", Op::kDoesNotExist, {}}})), "h100,h200,bare");
  EXPECT_EQ(selected(Wants({{"gpu", "h100"}}, {{"zone", Op::kDoesNotExist, {}}})), "h100");
  EXPECT_EQ(selected(Wants({}, {{"gpu", Op::kIn, {"h200"}}, {"gpu", Op::kNotIn, {"h200"}}})), "");
  // A gang of two H100-or-H200 replicas: one on each of those nodes, not on the idle others.
  JobRequest j = Job("j", 0, 0);
  const NodeSelector* hopper = Wants({}, {{"gpu", Op::kIn, {"h100", "h200"}}});
  j.replicas = {{1, 1, 0, hopper}, {1, 1, 0, hopper}};
  std::vector<JobRequest> q = {j};
  auto r = Scheduler({}).Schedule(q, view, 0);
  ASSERT_EQ(r.placed.size(), 1u);
  std::set<std::string> on;
  for (const auto& slot : r.placed[0].replicas) {
    on.insert(view.nodes[static_cast<size_t>(slot.node)].node_id);
  }
  EXPECT_EQ(on, (std::set<std::string>{"h100", "h200"}));
}

TEST(SchedulerTest, GpusArePinnedAndNeverUsedTwice) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("a", 4), Node("b", 4)};
  Scheduler s({});
  std::vector<JobRequest> q = {Job("j1", 3, 1), Job("j2", 2, 2), Job("j3", 1, 1), Job("j4", 1, 1)};
  auto r = s.Schedule(q, view, 0);
  std::set<std::pair<int, int>> used;  // (node, gpu)
  int total = 0;
  for (const auto& p : r.placed) {
    for (const auto& slot : p.replicas) {
      for (int g : slot.gpus) {
        EXPECT_TRUE(used.insert({slot.node, g}).second) << "GPU " << g << " given twice";
        EXPECT_GE(g, 0);
        EXPECT_LT(g, 4);
        ++total;
      }
    }
  }
  EXPECT_EQ(total, 3 + 4 + 1);  // j4 does not fit: 8 GPUs in all
  EXPECT_EQ(PlacedNames(r, q), (std::vector<std::string>{"j1", "j2", "j3"}));
}

// An 8-GPU node whose GPUs 0-3 hang off NUMA node 0 and 4-7 off node 1, as on an H100 server.
std::map<int, int> TwoSockets() {
  std::map<int, int> numa;
  for (int g = 0; g < 8; ++g) numa[g] = g < 4 ? 0 : 1;
  return numa;
}

TEST(PickGpusTest, AReplicasGpusComeFromOneNumaNodeWhereOneHasEnough) {
  const std::map<int, int> numa = TwoSockets();
  // Node 0 has 3 free and node 1 has 4: a replica of 2 takes node 0's (the fewest that fit),
  // leaving node 1 whole for a replica of 4.
  EXPECT_EQ(PickGpus({1, 2, 3, 4, 5, 6, 7}, numa, 2), (std::vector<int>{1, 2}));
  EXPECT_EQ(PickGpus({3, 4, 5, 6, 7}, numa, 2), (std::vector<int>{4, 5}));
  EXPECT_EQ(PickGpus({1, 2, 3, 4, 5, 6, 7}, numa, 4), (std::vector<int>{4, 5, 6, 7}));
  // Lowest first would straddle the sockets here: {3, 4}.
  EXPECT_EQ(PickGpus({3, 4, 5, 6}, numa, 2), (std::vector<int>{4, 5}));
  // None has enough: the node with the most gives all, then the best fit gives the rest.
  EXPECT_EQ(PickGpus({2, 3, 4, 5, 6}, numa, 4), (std::vector<int>{2, 4, 5, 6}));
  EXPECT_EQ(PickGpus({0, 1, 2, 3, 4, 5, 6, 7}, numa, 8),
            (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(PickGpus({0, 1}, numa, 0), std::vector<int>());
  // A GPU whose NUMA node is unknown: lowest first, as without any.
  std::map<int, int> partial = numa;
  partial.erase(5);
  EXPECT_EQ(PickGpus({3, 4, 5, 6}, partial, 2), (std::vector<int>{3, 4}));
  EXPECT_EQ(PickGpus({3, 4, 5, 6}, {}, 2), (std::vector<int>{3, 4}));
}

TEST(SchedulerTest, AGangOnANodeOfTwoNumaNodesKeepsEachReplicasGpusOnOne) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("h100", 8)};
  view.nodes[0].gpu_numa = TwoSockets();
  Scheduler s({});
  // Three replicas: 4 + 2 + 2 GPUs. Largest first: the 4 take one NUMA node whole, the 2s share
  // the other (lowest first would do the same here).
  JobRequest j = Job("j", 0, 0);
  j.replicas = {{2, 1, 0}, {4, 1, 0}, {2, 1, 0}};
  std::vector<JobRequest> q = {j};
  auto r = s.Schedule(q, view, 0);
  ASSERT_EQ(r.placed.size(), 1u);
  EXPECT_EQ(r.placed[0].replicas[1].gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(r.placed[0].replicas[0].gpus, (std::vector<int>{4, 5}));
  EXPECT_EQ(r.placed[0].replicas[2].gpus, (std::vector<int>{6, 7}));

  // GPU 3 free on NUMA node 0 and 4, 6, 7 on node 1: a replica of 2 takes 4 and 6, not 3 and 4.
  view.nodes[0].free_gpus = {3, 4, 6, 7};
  std::vector<JobRequest> q2 = {Job("k", 1, 2)};
  r = s.Schedule(q2, view, 0);
  ASSERT_EQ(r.placed.size(), 1u);
  EXPECT_EQ(r.placed[0].replicas[0].gpus, (std::vector<int>{4, 6}));
  EXPECT_EQ(view.nodes[0].free_gpus, (std::vector<int>{3, 7}));
}

TEST(SchedulerTest, PacksOntoOneNodeWhenItFits) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("big", 8), Node("small", 2), Node("mid", 4)};
  Scheduler s({});
  std::vector<JobRequest> q = {Job("j", 2, 1)};
  auto r = s.Schedule(q, view, 0);
  ASSERT_EQ(r.placed.size(), 1u);
  // Best fit: the smallest node that holds the whole gang.
  EXPECT_EQ(r.placed[0].replicas[0].node, 1);
  EXPECT_EQ(r.placed[0].replicas[1].node, 1);
  EXPECT_NE(r.placed[0].replicas[0].gpus, r.placed[0].replicas[1].gpus);
}

TEST(SchedulerTest, SpreadsOverFewNodesWhenNoneHoldsTheGang) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("n1", 2), Node("n2", 4), Node("n3", 1), Node("n4", 4)};
  Scheduler s({});
  std::vector<JobRequest> q = {Job("j", 6, 1)};
  auto r = s.Schedule(q, view, 0);
  ASSERT_EQ(r.placed.size(), 1u);
  std::set<int> nodes;
  for (const auto& slot : r.placed[0].replicas) nodes.insert(slot.node);
  EXPECT_EQ(nodes, (std::set<int>{1, 3}));  // the two 4-GPU nodes
}

// A pool with one_per_node (a spread group) puts each replica on a node of its own, where the
// rest of the gang would have packed onto one; too few nodes leave the gang unplaced; a replica
// placed alone avoids the nodes its pool-mates hold, the one it prefers too.
TEST(SchedulerTest, OnePerNodePutsEachReplicaOfItsPoolOnANodeOfItsOwn) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("big", 8), Node("mid", 4), Node("small", 2)};
  constexpr int kReducerGroup = 4;
  const ReplicaDemand chief{1, 1, 0};
  const ReplicaDemand reducer{0, 1, 0, nullptr, kReducerGroup};
  auto placed = Scheduler::FindGang({chief, reducer, reducer, reducer}, view);
  ASSERT_TRUE(placed);
  EXPECT_EQ(std::set<int>(placed->begin() + 1, placed->end()), (std::set<int>{0, 1, 2}));
  // Without it, the same gang packs onto one node (best fit: the smallest).
  auto packed = Scheduler::FindGang({chief, {0, 1, 0}, {0, 1, 0}, {0, 1, 0}}, view);
  ASSERT_TRUE(packed);
  EXPECT_EQ(std::set<int>(packed->begin(), packed->end()), std::set<int>{2});
  // Two groups of one job spread each on its own: two workers with a GPU, two reducers.
  const ReplicaDemand worker{1, 1, 0, nullptr, 2};
  auto both = Scheduler::FindGang({worker, worker, reducer, reducer}, view);
  ASSERT_TRUE(both);
  EXPECT_NE((*both)[0], (*both)[1]);
  EXPECT_NE((*both)[2], (*both)[3]);
  // Four reducers on three nodes: no placement, nothing taken.
  EXPECT_FALSE(Scheduler::PlaceGang({chief, reducer, reducer, reducer, reducer}, view));
  EXPECT_EQ(view.nodes[2].free_gpus.size(), 2u);
  // One reducer alone, its pool-mates on big and small: mid, though it prefers small.
  const SpreadOccupied mates = {{kReducerGroup, 0}, {kReducerGroup, 2}, {2, 1}};
  auto slot = Scheduler::PlaceOne(reducer, 2, view, false, mates);
  ASSERT_TRUE(slot);
  EXPECT_EQ(slot->node, 1);
  EXPECT_FALSE(Scheduler::PlaceOne(reducer, -1, view, false,
                                   {{kReducerGroup, 0}, {kReducerGroup, 1}, {kReducerGroup, 2}}));
  // Another group's occupancy is no bar.
  EXPECT_TRUE(Scheduler::PlaceOne({0, 1, 0}, 2, view, false, mates));
}

// preferred_node_affinity: the gang goes where its preferences weigh most, though another node
// fits better (best fit among equals); over several nodes the preferred ones fill first; a gang
// without preferences packs as before; a preference no node satisfies changes nothing.
TEST(SchedulerTest, PreferencesPutTheGangWhereTheyWeighMost) {
  const NodeLabels h100{{"gpu", "h100"}}, a100{{"gpu", "a100"}}, zone_a{{"zone", "a"}};
  ClusterView view(20000, 20999);
  view.nodes = {Node("small", 2), Node("big-h100", 8), Node("mid-a100", 4), Node("mid-zone", 4)};
  view.nodes[1].labels = &h100;
  view.nodes[2].labels = &a100;
  view.nodes[3].labels = &zone_a;
  auto prefer = [](std::vector<NodePreference> terms) { return InternPreference(terms); };
  const auto* likes_h100 = prefer({{10, {{"gpu", LabelOp::kIn, {"h100"}}}}});
  const auto* likes_a100_more =
      prefer({{10, {{"gpu", LabelOp::kIn, {"h100"}}}}, {50, {{"gpu", LabelOp::kIn, {"a100"}}}}});
  const auto* likes_tpu = prefer({{10, {{"gpu", LabelOp::kIn, {"tpu"}}}}});
  auto one_node = [&](const std::vector<ReplicaDemand>& gang) {
    auto where = Scheduler::FindGang(gang, view);
    EXPECT_TRUE(where);
    std::set<int> nodes(where->begin(), where->end());
    EXPECT_EQ(nodes.size(), 1u);
    return *nodes.begin();
  };
  const ReplicaDemand plain{1, 1, 0};
  ReplicaDemand h{1, 1, 0};
  h.preference = likes_h100;
  ReplicaDemand a{1, 1, 0};
  a.preference = likes_a100_more;
  ReplicaDemand tpu{1, 1, 0};
  tpu.preference = likes_tpu;
  EXPECT_EQ(one_node({plain, plain}), 0);  // best fit: the smallest
  EXPECT_EQ(one_node({h, h}), 1);
  EXPECT_EQ(one_node({a, a}), 2);
  EXPECT_EQ(one_node({tpu, tpu}), 0) << "a preference nothing satisfies changes nothing";
  // The gang's weights add up: two that like the H100 outweigh one that likes the A100 more.
  EXPECT_EQ(one_node({h, h, h, h, h, h, a}), 1);
  // A gang no node holds: first-fit-decreasing reads the preferred node first.
  std::vector<ReplicaDemand> many(10, a);
  auto spread = Scheduler::FindGang(many, view);
  ASSERT_TRUE(spread);
  EXPECT_EQ(std::count(spread->begin(), spread->end(), 2), 4) << "the A100 node filled first";
  // Shapes with and without the preference are not one.
  ShapeTable shapes;
  EXPECT_NE(shapes.Intern({h}), shapes.Intern({plain}));
}

// required_topology: the whole gang on nodes sharing one value of the label, the tightest value
// that holds it (best fit) though other nodes would pack it tighter; nodes without the label take
// none of it; no value with room leaves it unplaced; preferred_topology then places it anywhere;
// InDomain narrows a replica placed alone to its job's value.
TEST(SchedulerTest, ATopologyKeepsTheGangOnNodesOfOneLabelValue) {
  const NodeLabels r1{{"rack", "r1"}}, r2{{"rack", "r2"}}, r2_h100{{"gpu", "h100"}, {"rack", "r2"}};
  ClusterView view(20000, 20999);
  // r1: 4 + 4 GPUs; r2: 2 + 2 GPUs; "bare" (8 GPUs) has no rack.
  view.nodes = {Node("r1-a", 4), Node("r1-b", 4), Node("r2-a", 2), Node("r2-b", 2),
                Node("bare", 8)};
  view.nodes[0].labels = &r1;
  view.nodes[1].labels = &r1;
  view.nodes[2].labels = &r2;
  view.nodes[3].labels = &r2_h100;
  ReplicaDemand worker{1, 1, 0};
  worker.topology = InternTopology({"rack"});
  auto racks_of = [&](const std::vector<int>& where) {
    std::set<std::string> racks;
    for (int n : where) {
      const NodeLabels* labels = view.nodes[static_cast<size_t>(n)].labels;
      racks.insert(labels == nullptr ? "none" : labels->at("rack"));
    }
    return racks;
  };
  // Four one-GPU workers: r1-a would hold them alone (best fit without a topology); r2 is the
  // tightest rack with room.
  auto four = Scheduler::FindGang(std::vector<ReplicaDemand>(4, worker), view);
  ASSERT_TRUE(four);
  EXPECT_EQ(racks_of(*four), std::set<std::string>{"r2"});
  auto plain = Scheduler::FindGang(std::vector<ReplicaDemand>(4, ReplicaDemand{1, 1, 0}), view);
  ASSERT_TRUE(plain);
  EXPECT_EQ(std::set<int>(plain->begin(), plain->end()), std::set<int>{0});
  // Six: only r1 has room.
  auto six = Scheduler::FindGang(std::vector<ReplicaDemand>(6, worker), view);
  ASSERT_TRUE(six);
  EXPECT_EQ(racks_of(*six), std::set<std::string>{"r1"});
  // A selector narrows further: two H100 workers fit only r2-b, in r2.
  ReplicaDemand h100 = worker;
  h100.selector = Wants({{"gpu", "h100"}});
  auto two = Scheduler::FindGang({h100, h100}, view);
  ASSERT_TRUE(two);
  EXPECT_EQ(std::set<int>(two->begin(), two->end()), std::set<int>{3});
  // Nine GPUs: no rack has them (the bare node's 8 + any rack would); nothing placed.
  EXPECT_FALSE(Scheduler::PlaceGang(std::vector<ReplicaDemand>(9, worker), view));
  EXPECT_EQ(view.nodes[4].free_gpus.size(), 8u);
  // preferred_topology: anywhere then.
  ReplicaDemand soft = worker;
  soft.topology_preferred = true;
  EXPECT_TRUE(Scheduler::FindGang(std::vector<ReplicaDemand>(9, soft), view));
  auto soft_four = Scheduler::FindGang(std::vector<ReplicaDemand>(4, soft), view);
  ASSERT_TRUE(soft_four);
  EXPECT_EQ(racks_of(*soft_four), std::set<std::string>{"r2"}) << "one rack where one has room";
  // A restart narrowed to its job's rack: r1, though it last ran on the bare node.
  auto slot = Scheduler::PlaceOne(InDomain(worker, {{"rack", "r1"}}), 4, view, false);
  ASSERT_TRUE(slot);
  EXPECT_EQ(racks_of({slot->node}), std::set<std::string>{"r1"});
  // A required topology with no value given: not on a node without the label, though preferred.
  slot = Scheduler::PlaceOne(worker, 4, view, false);
  ASSERT_TRUE(slot);
  EXPECT_NE(slot->node, 4);
  // Shapes with and without a topology, or of the two kinds, are not one.
  ShapeTable shapes;
  EXPECT_NE(shapes.Intern({worker}), shapes.Intern({ReplicaDemand{1, 1, 0}}));
  EXPECT_NE(shapes.Intern({worker}), shapes.Intern({soft}));
}

// Topology levels: preferred [rack, block] tries one rack, then one block, then anywhere; with
// block required, never past one block, and a rack that spans two blocks is tried block by block.
TEST(SchedulerTest, TopologyLevelsAreTriedTightestFirst) {
  const NodeLabels b1r1{{"block", "b1"}, {"rack", "r1"}}, b1r2{{"block", "b1"}, {"rack", "r2"}},
      b2r3{{"block", "b2"}, {"rack", "r3"}}, b3r4{{"block", "b3"}, {"rack", "r4"}};
  ClusterView view(20000, 20999);
  // b1: r1 (2 + 2 GPUs), r2 (2); b2: r3 (4 + 4: one rack of 8); r4 is in b2 and b3 (2 + 2).
  view.nodes = {Node("r1-a", 2), Node("r1-b", 2),  Node("r2-a", 2), Node("r3-a", 4),
                Node("r3-b", 4), Node("r4-b2", 2), Node("r4-b3", 2)};
  const NodeLabels b2r4{{"block", "b2"}, {"rack", "r4"}};
  for (int i : {0, 1}) view.nodes[static_cast<size_t>(i)].labels = &b1r1;
  view.nodes[2].labels = &b1r2;
  for (int i : {3, 4}) view.nodes[static_cast<size_t>(i)].labels = &b2r3;
  view.nodes[5].labels = &b2r4;
  view.nodes[6].labels = &b3r4;
  auto where = [&](const std::vector<int>& nodes, const std::string& key) {
    std::set<std::string> values;
    for (int n : nodes) values.insert(view.nodes[static_cast<size_t>(n)].labels->at(key));
    return values;
  };
  ReplicaDemand preferred{1, 1, 0};
  preferred.topology = InternTopology({"rack", "block"});
  preferred.topology_preferred = true;
  ReplicaDemand required = preferred;
  required.topology_preferred = false;
  EXPECT_EQ(*RequiredTopology(required), "block");
  EXPECT_EQ(RequiredTopology(preferred), nullptr);
  auto gang = [](int n, const ReplicaDemand& d) { return std::vector<ReplicaDemand>(n, d); };

  // Four: r1 and r4 hold them (4 GPUs each); r1 is one rack of one block, r4 spans two.
  auto four = Scheduler::FindGang(gang(4, preferred), view);
  ASSERT_TRUE(four);
  EXPECT_EQ(where(*four, "rack"), std::set<std::string>{"r1"});
  // Six: no rack but r3 (8 GPUs) holds them; r3 is the only rack with room.
  auto six = Scheduler::FindGang(gang(6, preferred), view);
  ASSERT_TRUE(six);
  EXPECT_EQ(where(*six, "rack"), std::set<std::string>{"r3"});
  // Nine: no rack; b2 (r3 + r4-b2: 10 GPUs) is the one block with room.
  auto nine = Scheduler::FindGang(gang(9, required), view);
  ASSERT_TRUE(nine);
  EXPECT_EQ(where(*nine, "block"), std::set<std::string>{"b2"});
  EXPECT_EQ(where(*nine, "rack"), (std::set<std::string>{"r3", "r4"}));
  // Eleven: no block has them; preferred goes anywhere, required waits.
  EXPECT_TRUE(Scheduler::FindGang(gang(11, preferred), view));
  EXPECT_FALSE(Scheduler::FindGang(gang(11, required), view));

  // With r1 full, r4 (4 GPUs, its nodes in two blocks) is the tightest rack for the preferred
  // levels; with block required, r4 is tried block by block (2 GPUs each), so r3 takes them.
  ClusterView busy = view;
  busy.nodes[0].free_gpus.clear();
  busy.nodes[1].free_gpus.clear();
  auto soft_four = Scheduler::FindGang(gang(4, preferred), busy);
  ASSERT_TRUE(soft_four);
  EXPECT_EQ(where(*soft_four, "rack"), std::set<std::string>{"r4"});
  auto hard_four = Scheduler::FindGang(gang(4, required), busy);
  ASSERT_TRUE(hard_four);
  EXPECT_EQ(where(*hard_four, "block").size(), 1u);
  EXPECT_EQ(where(*hard_four, "rack"), std::set<std::string>{"r3"});
}

TEST(SchedulerTest, CpuAndMemoryLimitsCount) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("a", 0, 4, 1000)};
  Scheduler s({});
  JobRequest mem;
  mem.name = "mem";
  mem.replicas = {{0, 1, 600}, {0, 1, 600}};
  JobRequest cpu = Job("cpu", 5, 0);
  JobRequest ok;
  ok.name = "ok";
  ok.replicas = {{0, 2, 500}, {0, 2, 500}};
  std::vector<JobRequest> q = {mem, cpu, ok};
  auto r = s.Schedule(q, view, 0);
  EXPECT_EQ(PlacedNames(r, q), (std::vector<std::string>{"ok"}));
  EXPECT_EQ(view.nodes[0].free_cpus, 0);
  EXPECT_EQ(view.nodes[0].free_memory_mb, 0);
}

TEST(SchedulerTest, QueueOrderDecidesWhoGetsScarceResources) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("a", 2)};
  Scheduler s({});
  std::vector<JobRequest> q = {Job("first", 1, 2), Job("second", 1, 2)};
  auto r = s.Schedule(q, view, 0);
  EXPECT_EQ(PlacedNames(r, q), (std::vector<std::string>{"first"}));
}

TEST(SchedulerTest, BackfillStartsLaterJobsThatFit) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("a", 2)};
  Scheduler s({60'000});
  std::vector<JobRequest> q = {Job("huge", 1, 4, 0), Job("small", 1, 1, 0), Job("small2", 1, 1, 0)};
  auto r = s.Schedule(q, view, 30'000);  // huge waited 30 s < limit
  EXPECT_EQ(PlacedNames(r, q), (std::vector<std::string>{"small", "small2"}));
  EXPECT_TRUE(r.starving_job.empty());
}

TEST(SchedulerTest, StarvationLimitStopsBackfill) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("a", 2)};
  Scheduler s({60'000});
  std::vector<JobRequest> q = {Job("wide", 1, 2, 0), Job("small", 1, 1, 50'000)};
  // Pretend one GPU is busy: wide does not fit now.
  view.nodes[0].free_gpus = {1};
  auto r = s.Schedule(q, view, 61'000);  // wide waited 61 s > 60 s
  EXPECT_TRUE(r.placed.empty());
  EXPECT_EQ(r.starving_job, "wide");
  EXPECT_EQ(view.nodes[0].free_gpus.size(), 1u);  // held for wide
  // Once the GPU is free again, wide starts first.
  view.nodes[0].free_gpus = {0, 1};
  r = s.Schedule(q, view, 62'000);
  EXPECT_EQ(PlacedNames(r, q), (std::vector<std::string>{"wide"}));
}

TEST(SchedulerTest, JobsAheadOfAStarvingJobStillStart) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("a", 1)};
  Scheduler s({1000});
  std::vector<JobRequest> q = {Job("fits", 1, 1, 0), Job("starving", 1, 2, 0),
                               Job("later", 1, 0, 0)};
  auto r = s.Schedule(q, view, 5000);
  EXPECT_EQ(PlacedNames(r, q), (std::vector<std::string>{"fits"}));
  EXPECT_EQ(r.starving_job, "starving");
}

TEST(SchedulerTest, UnschedulableJobsAreSkippedButCanStarve) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("a", 4)};
  Scheduler s({1000});
  JobRequest waiting = Job("restarting", 1, 1, 0);
  waiting.schedulable = false;
  std::vector<JobRequest> q = {waiting, Job("next", 1, 1, 0)};
  auto r = s.Schedule(q, view, 500);
  EXPECT_EQ(PlacedNames(r, q), (std::vector<std::string>{"next"}));
  r = s.Schedule(q, view, 5000);
  EXPECT_EQ(r.starving_job, "restarting");
}

TEST(SchedulerTest, PortsAreUniqueAcrossTheNodesOfOneHostAndJobs) {
  ClusterView view(30000, 30100);
  view.MarkPortUsed(0, 30000);
  view.MarkPortUsed(0, 30001);
  view.nodes = {Node("a", 8), Node("b", 8)};
  Scheduler s({});
  std::vector<JobRequest> q;
  for (int i = 0; i < 8; ++i) q.push_back(Job("j" + std::to_string(i), 2, 1));
  auto r = s.Schedule(q, view, 0);
  ASSERT_EQ(r.placed.size(), 8u);
  std::set<int> ports = {30000, 30001};
  for (const auto& p : r.placed) {
    for (const auto& slot : p.replicas) EXPECT_TRUE(ports.insert(slot.port).second);
    EXPECT_TRUE(ports.insert(p.master_port).second);
    EXPECT_TRUE(ports.insert(p.bootstrap_port).second);
  }
  for (int port : ports) {
    EXPECT_GE(port, 30000);
    EXPECT_LE(port, 30100);
  }
}

TEST(SchedulerTest, RunningOutOfPortsBlocksPlacement) {
  ClusterView view(40000, 40002);  // 3 ports: a 1-replica job needs 3
  view.nodes = {Node("a", 8)};
  Scheduler s({});
  std::vector<JobRequest> q = {Job("one", 1, 1), Job("two", 1, 1)};
  auto r = s.Schedule(q, view, 0);
  EXPECT_EQ(PlacedNames(r, q), (std::vector<std::string>{"one"}));
  EXPECT_EQ(view.ports_free(0), 0);
}

// Each port space (a host) has the whole range: three 3-port jobs on three 1-GPU nodes of two
// hosts place two, one per host, each with the same three ports.
TEST(SchedulerTest, EachHostHasTheWholePortRange) {
  ClusterView view(40000, 40002);
  view.nodes = {Node("a", 1), Node("b", 1), Node("c", 1)};
  view.nodes[1].port_space = view.AddPortSpace();
  view.nodes[2].port_space = view.nodes[1].port_space;  // b and c: one host
  Scheduler s({});
  std::vector<JobRequest> q = {Job("one", 1, 1), Job("two", 1, 1), Job("three", 1, 1)};
  auto r = s.Schedule(q, view, 0);
  ASSERT_EQ(PlacedNames(r, q), (std::vector<std::string>{"one", "two"}));
  std::set<int> hosts;
  for (const auto& p : r.placed) {
    hosts.insert(view.nodes[static_cast<size_t>(p.replicas[0].node)].port_space);
    EXPECT_EQ((std::set<int>{p.replicas[0].port, p.master_port, p.bootstrap_port}),
              (std::set<int>{40000, 40001, 40002}));
  }
  EXPECT_EQ(hosts, (std::set<int>{0, 1}));
  EXPECT_EQ(view.ports_free(0), 0);
  EXPECT_EQ(view.ports_free(1), 0);
}

// A gang over two hosts needs one port per replica on each and the job's two on the chief's:
// 3 ports a host hold a chief and a worker on two hosts, not on one.
TEST(SchedulerTest, AGangOverTwoHostsNeedsItsPortsOnEach) {
  Scheduler s({});
  ClusterView two_hosts(40000, 40002);
  two_hosts.nodes = {Node("a", 1), Node("b", 1)};
  two_hosts.nodes[1].port_space = two_hosts.AddPortSpace();
  std::vector<JobRequest> q = {Job("pair", 2, 1)};
  auto r = s.Schedule(q, two_hosts, 0);
  ASSERT_EQ(r.placed.size(), 1u);
  const JobPlacement& p = r.placed[0];
  ASSERT_EQ(p.replicas.size(), 2u);
  EXPECT_NE(p.replicas[0].node, p.replicas[1].node);
  EXPECT_EQ((std::set<int>{p.replicas[0].port, p.master_port, p.bootstrap_port}),
            (std::set<int>{40000, 40001, 40002}));
  EXPECT_NE(p.replicas[1].port, 0);

  ClusterView one_host(40000, 40002);
  one_host.nodes = {Node("a", 1), Node("b", 1)};
  r = s.Schedule(q, one_host, 0);
  EXPECT_TRUE(r.placed.empty()) << "4 ports on one host of 3";
}

// A port held where the view cannot tell the host (a node not registered since a restart) is
// handed out on no host.
TEST(SchedulerTest, APortHeldOnAnUnknownHostIsHandedOutNowhere) {
  ClusterView view(40000, 40003);
  const int other = view.AddPortSpace();
  view.MarkPortUsed(ClusterView::kEverySpace, 40000);
  view.MarkPortUsed(other, 40001);
  view.MarkPortUsed(other, 40001);  // twice: counted once
  view.MarkPortUsed(other, 50000);  // outside the range: ignored
  EXPECT_EQ(view.ports_free(0), 3);
  EXPECT_EQ(view.ports_free(other), 2);
  EXPECT_TRUE(view.Used(0, 40000));
  EXPECT_FALSE(view.Used(0, 40001));
  std::set<int> taken;
  for (int i = 0; i < 3; ++i) taken.insert(view.TakePort(0));
  EXPECT_EQ(taken, (std::set<int>{40001, 40002, 40003}));
  EXPECT_EQ(view.TakePort(0), 0);
  taken.clear();
  for (int i = 0; i < 2; ++i) taken.insert(view.TakePort(other));
  EXPECT_EQ(taken, (std::set<int>{40002, 40003}));
  EXPECT_EQ(view.TakePort(other), 0);
}

TEST(SchedulerTest, PlaceOnePrefersTheGivenNode) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("a", 4), Node("b", 1)};
  auto slot = Scheduler::PlaceOne({1, 1, 0}, 0, view);
  ASSERT_TRUE(slot);
  EXPECT_EQ(slot->node, 0);
  EXPECT_NE(slot->port, 0);
  slot = Scheduler::PlaceOne({1, 1, 0}, -1, view);  // best fit: b
  ASSERT_TRUE(slot);
  EXPECT_EQ(slot->node, 1);
  EXPECT_FALSE(Scheduler::PlaceOne({5, 1, 0}, 0, view));
}

TEST(SchedulerTest, ManyQueuedJobsOfOneShapeCostFewSearches) {
  ClusterView view(20000, 29999);
  for (int i = 0; i < 100; ++i) view.nodes.push_back(Node("n" + std::to_string(i), 8));
  Scheduler s({});
  std::vector<JobRequest> q;
  for (int i = 0; i < 2000; ++i) q.push_back(Job("j" + std::to_string(i), 4, 2));
  auto r = s.Schedule(q, view, 0);
  EXPECT_EQ(r.placed.size(), 100u);  // 800 GPUs / 8 per job
  EXPECT_LE(r.searches, 101u);
}

TEST(SchedulerTest, TheShapeTableGivesEqualDemandsOneId) {
  ShapeTable table;
  const std::vector<ReplicaDemand> a = {{2, 1, 0}, {2, 1, 0}};
  const std::vector<ReplicaDemand> b = {{2, 1, 0}, {2, 1, 1024}};
  uint32_t id = table.Intern(a);
  EXPECT_NE(id, 0u);
  EXPECT_EQ(table.Intern(std::vector<ReplicaDemand>(a)), id);
  EXPECT_NE(table.Intern(b), id);
  EXPECT_NE(table.Intern({{2, 1, 0}}), id);
  EXPECT_EQ(table.size(), 3u);
}

// A round with the JobController's shape ids decides as one that reads every request's demands:
// the same placements, searches and shapes; jobs of one id but another node filter stay apart.
TEST(SchedulerTest, ShapeIdsGiveTheRoundThatTheDemandsGive) {
  ShapeTable table;
  std::vector<JobRequest> plain;
  for (int i = 0; i < 60; ++i) {
    plain.push_back(Job("j" + std::to_string(i), 1 + i % 3, 1 << (i % 4)));
    plain.back().needs_shared_storage = i % 5 == 0;
  }
  std::vector<JobRequest> with_ids = plain;
  for (JobRequest& r : with_ids) r.shape_id = table.Intern(r.replicas);
  auto round = [](const std::vector<JobRequest>& q) {
    ClusterView view(20000, 29999);
    for (int n = 0; n < 6; ++n) view.nodes.push_back(Node("n" + std::to_string(n), 8));
    view.nodes[0].shares_output_root = true;
    return Scheduler({}).Schedule(q, view, 0);
  };
  ScheduleResult a = round(plain), b = round(with_ids);
  EXPECT_EQ(PlacedNames(a, plain), PlacedNames(b, with_ids));
  EXPECT_FALSE(a.placed.empty());
  EXPECT_LT(a.placed.size(), plain.size());
  EXPECT_EQ(a.searches, b.searches);
  EXPECT_EQ(a.shapes, b.shapes);
  // 12 demand lists, each with and without the filter where both occur.
  std::set<size_t> distinct(b.shapes.begin(), b.shapes.end());
  EXPECT_GT(distinct.size(), 12u);
}

// A round that places many jobs orders the nodes after kSearchesBeforeNodeOrder searches; its
// placements (nodes, GPUs, ports) are the ones a pass over every node per search finds: each job
// placed with PlaceGang in the same order, on a copy of the same cluster. The cluster is uneven
// (partly used nodes, CPU- and memory-bound ones, hosts of several nodes, few ports, some nodes
// on the shared output root, labelled nodes) and the jobs need one node or several, some of their
// replicas on nodes with a label; each replica lands where its selector holds.
TEST(SchedulerTest, OrderingTheNodesChangesNoPlacement) {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::vector<NodeLabels> labels = {{}, {{"gpu", "h100"}}, {{"gpu", "a100"}, {"zone", "b"}}};
  const std::vector<const NodeSelector*> selectors = {
      nullptr, Wants({{"gpu", "h100"}}), Wants({{"zone", "b"}}),
      Wants({}, {{"gpu", LabelOp::kNotIn, {"a100"}}, {"zone", LabelOp::kDoesNotExist, {}}})};
  const std::vector<NodePreference>* prefers_h100 =
      InternPreference({{30, {{"gpu", LabelOp::kIn, {"h100"}}}}});
  ClusterView view(30000, 30011);  // 12 ports a host
  for (int n = 0; n < 400; ++n) {
    NodeFree node = Node("n" + std::to_string(n), pick(0, 8), pick(2, 64),
                         pick(0, 3) == 0 ? 0 : 1000 * pick(8, 256));
    node.free_gpus.erase(node.free_gpus.begin(),
                         node.free_gpus.begin() + pick(0, static_cast<int>(node.free_gpus.size())));
    node.shares_output_root = pick(0, 4) == 0;
    node.labels = &labels[static_cast<size_t>(pick(0, 2))];
    node.port_space =
        n % 3 == 0 || view.port_spaces() == 1 ? view.AddPortSpace() : view.port_spaces() - 1;
    view.nodes.push_back(std::move(node));
  }
  std::vector<JobRequest> q;
  for (int i = 0; i < 3000; ++i) {
    JobRequest job;
    job.name = "j" + std::to_string(i);
    int replicas = pick(0, 3) == 0 ? pick(2, 6) : 1;
    for (int r = 0; r < replicas; ++r) {
      job.replicas.push_back(
          {pick(0, 8), pick(1, 16), pick(0, 1) * 1000 * pick(1, 64),
           pick(0, 3) == 0 ? selectors[static_cast<size_t>(pick(1, 3))] : nullptr,
           pick(0, 1) == 0 ? pick(1, 2) : 0, pick(0, 9) == 0 ? prefers_h100 : nullptr});
    }
    job.needs_shared_storage = pick(0, 9) == 0;
    q.push_back(std::move(job));
  }
  ClusterView reference = view;
  ScheduleResult round = Scheduler({}).Schedule(q, view, 0);
  ASSERT_GT(round.searches, 10 * Scheduler::kSearchesBeforeNodeOrder);

  std::vector<JobPlacement> expected;
  using Shape = std::vector<
      std::tuple<int, int, int64_t, const NodeSelector*, int, const std::vector<NodePreference>*>>;
  std::set<std::pair<Shape, bool>> failed;
  for (size_t i = 0; i < q.size(); ++i) {
    Shape shape;
    for (const auto& d : q[i].replicas) {
      shape.emplace_back(d.gpus, d.cpus, d.memory_mb, d.selector, d.spread_group, d.preference);
    }
    if (failed.count({shape, q[i].needs_shared_storage})) continue;
    auto slots = Scheduler::PlaceGang(q[i].replicas, reference, q[i].needs_shared_storage);
    if (!slots) {
      failed.insert({shape, q[i].needs_shared_storage});
      continue;
    }
    JobPlacement p;
    p.request = i;
    p.replicas = std::move(*slots);
    int chief = reference.nodes[static_cast<size_t>(p.replicas[0].node)].port_space;
    p.master_port = reference.TakePort(chief);
    p.bootstrap_port = reference.TakePort(chief);
    expected.push_back(std::move(p));
  }
  ASSERT_GT(expected.size(), 200u);
  ASSERT_EQ(round.placed.size(), expected.size());
  size_t multi_node = 0, selected = 0, spread = 0;
  for (size_t k = 0; k < expected.size(); ++k) {
    const JobPlacement& a = round.placed[k];
    const JobPlacement& b = expected[k];
    ASSERT_EQ(a.request, b.request) << k;
    ASSERT_EQ(a.replicas.size(), b.replicas.size());
    std::set<int> nodes;
    for (size_t r = 0; r < a.replicas.size(); ++r) {
      EXPECT_EQ(a.replicas[r].node, b.replicas[r].node) << q[a.request].name << " replica " << r;
      EXPECT_EQ(a.replicas[r].gpus, b.replicas[r].gpus);
      EXPECT_EQ(a.replicas[r].port, b.replicas[r].port);
      nodes.insert(a.replicas[r].node);
      const NodeSelector* selector = q[a.request].replicas[r].selector;
      EXPECT_TRUE(Selects(view.nodes[static_cast<size_t>(a.replicas[r].node)], selector))
          << q[a.request].name << " replica " << r;
      selected += selector != nullptr;
      for (size_t o = 0; o < r; ++o) {
        const int group = q[a.request].replicas[r].spread_group;
        if (group == 0 || q[a.request].replicas[o].spread_group != group) continue;
        EXPECT_NE(a.replicas[o].node, a.replicas[r].node) << q[a.request].name << " replica " << r;
        ++spread;
      }
    }
    EXPECT_EQ(a.master_port, b.master_port);
    EXPECT_EQ(a.bootstrap_port, b.bootstrap_port);
    multi_node += nodes.size() > 1;
  }
  EXPECT_GT(multi_node, 10u) << "the first-fit-decreasing search was read through the order too";
  EXPECT_GT(selected, 50u) << "replicas with a node selector were placed";
  EXPECT_GT(spread, 5u) << "replicas of one spread group were placed";
}

// ---- storage: jobs whose output dir is on the checked shared root -------------------------------

TEST(SchedulerStorageTest, AJobOnSharedStorageIsPlacedOnlyOnNodesThatShareIt) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("local", 2), Node("shared", 4)};
  view.nodes[1].shares_output_root = true;
  Scheduler s({});
  JobRequest shared = Job("shared-job", 2, 1);
  shared.needs_shared_storage = true;
  std::vector<JobRequest> q = {shared, Job("anywhere", 1, 1)};
  auto r = s.Schedule(q, view, 0);
  ASSERT_EQ(r.placed.size(), 2u);
  // Best fit alone would pick "local" (the fewest free GPUs that hold the gang); the filter
  // leaves only "shared".
  for (const auto& slot : r.placed[0].replicas) EXPECT_EQ(slot.node, 1);

  // No sharing node has room (1 GPU free on "local", 2 on "shared"): it waits, while a job
  // without the need still starts.
  JobRequest more = Job("shared-2", 3, 1);
  more.needs_shared_storage = true;
  std::vector<JobRequest> q2 = {more, Job("anywhere-2", 1, 1)};
  r = s.Schedule(q2, view, 0);
  EXPECT_EQ(PlacedNames(r, q2), std::vector<std::string>{"anywhere-2"});
}

TEST(SchedulerStorageTest, TheShapeCacheKeepsJobsWithAndWithoutTheNeedApart) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("local", 4)};
  Scheduler s({});
  JobRequest shared = Job("needs-shared", 1, 1);
  shared.needs_shared_storage = true;
  // Same demand: the first fails for want of a sharing node, the second must still be searched.
  std::vector<JobRequest> q = {shared, Job("same-shape", 1, 1)};
  auto r = s.Schedule(q, view, 0);
  EXPECT_EQ(PlacedNames(r, q), std::vector<std::string>{"same-shape"});
  EXPECT_EQ(r.searches, 2u);
}

TEST(SchedulerStorageTest, PlaceOneAndFindGangHonourTheFilter) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("local", 4), Node("shared", 1)};
  view.nodes[1].shares_output_root = true;
  // The preferred node (its last) does not share: the restart goes to the one that does.
  auto slot = Scheduler::PlaceOne({1, 1, 0}, 0, view, true);
  ASSERT_TRUE(slot);
  EXPECT_EQ(slot->node, 1);
  EXPECT_FALSE(Scheduler::PlaceOne({1, 1, 0}, 0, view, true));
  EXPECT_TRUE(Scheduler::PlaceOne({1, 1, 0}, 0, view, false));
  EXPECT_FALSE(Scheduler::FindGang({{1, 1, 0}}, view, true));
}

TEST(SchedulerStorageTest, PreemptionCountsOnlyRoomOnSharingNodes) {
  ClusterView view(20000, 20999);
  view.nodes = {Node("local", 2), Node("shared", 2)};
  view.nodes[1].shares_output_root = true;
  // Both nodes are full, each with one low-priority job.
  for (auto& n : view.nodes) n.free_gpus.clear();
  ScheduleInput input;
  input.cluster_gpus = 4;
  input.cluster_cpus = 128;
  for (int node : {0, 1}) {
    RunningJob low;
    low.name = node == 0 ? "low-local" : "low-shared";
    low.priority = 100;
    low.start_ms = node == 0 ? 10 : 5;  // the local one started later: preferred as a victim
    low.held.push_back(HeldSlot{node, {0, 1}, 1, 0});
    low.gpus = 2;
    low.cpus = 1;
    input.running.push_back(low);
  }
  JobRequest high = Job("high", 2, 1);
  high.priority = 1000;
  high.needs_shared_storage = true;
  Scheduler s({});
  std::vector<JobRequest> q = {high};
  auto r = s.Schedule(q, view, 0, input);
  ASSERT_EQ(r.preemptions.size(), 1u);
  ASSERT_EQ(r.preemptions[0].victims.size(), 1u);
  EXPECT_EQ(input.running[r.preemptions[0].victims[0]].name, "low-shared");
}

}  // namespace
}  // namespace cohort::coordinator
