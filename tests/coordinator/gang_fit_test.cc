// gang_fit: what a job that can never fit is told at submit, and what a queued job says it waits
// for, from plain data (a NodeRegistry fed RegisterAgent messages, a ClusterView).
#include "coordinator/gang_fit.h"

#include <gtest/gtest.h>

namespace cohort::coordinator {
namespace {

// A node with a host of its own (its port domain is its id, unless `port_domain` is given).
void AddNode(NodeRegistry& nodes, const std::string& id, int gpus, int cpus, int64_t memory_mb,
             const std::string& port_domain = "", const NodeLabels& labels = {}) {
  wire::RegisterAgentT reg;
  reg.node_id = id;
  reg.port_domain = port_domain;
  for (const auto& [key, value] : labels) {
    auto kv = std::make_unique<wire::KeyValueT>();
    kv->key = key;
    kv->value = value;
    reg.labels.push_back(std::move(kv));
  }
  for (int i = 0; i < gpus; ++i) {
    auto g = std::make_unique<wire::GpuInfoT>();
    g->index = i;
    reg.gpus.push_back(std::move(g));
  }
  reg.cpus = cpus;
  reg.memory_mb = memory_mb;
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(wire::RegisterAgent::Pack(builder, &reg));
  nodes.Register(*flatbuffers::GetRoot<wire::RegisterAgent>(builder.GetBufferPointer()), id, 0);
}

JobSpec Spec(const std::string& yaml) {
  auto spec = ParseJobSpec(yaml);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : JobSpec{};
}

std::string Pool(const std::string& role, int replicas, const std::string& resources) {
  return "  - role: " + role + "\n    replicas: " + std::to_string(replicas) +
         "\n    resources: " + resources + "\n    process: {command: [/bin/true]}\n";
}

TEST(GangFitTest, RefusesWhatNoIdleNodeOrNoIdleClusterHolds) {
  NodeRegistry nodes(10'000);
  IdleClusterCheck idle;
  EXPECT_TRUE(idle.Check(Spec("name: j\nworker_pools:\n" + Pool("chief", 1, "{}") +
                              Pool("worker", 1, "{gpus: 64}")),
                         nodes, 20000, 20100)
                  .ok())
      << "no node known: the job waits for nodes";
  AddNode(nodes, "a", 8, 16, 64'000);
  AddNode(nodes, "b", 4, 32, 0);  // memory not reported: not limited

  auto check = [&](const std::string& pools) {
    return idle.Check(Spec("name: j\nworker_pools:\n" + pools), nodes, 20000, 20100);
  };
  EXPECT_EQ(check(Pool("chief", 1, "{}") + Pool("worker", 2, "{gpus: 64}")).message(),
            "worker pool needs 64 GPUs per replica; the largest node has 8");
  EXPECT_EQ(check(Pool("chief", 1, "{cpus: 64}")).message(),
            "chief pool needs 64 CPUs per replica; the largest node has 32");
  // Node b has no memory limit, so memory alone is never what is missing...
  EXPECT_TRUE(check(Pool("chief", 1, "{memory_mb: 100000}")).ok());
  // ... but 8 GPUs and 100 GB together fit nowhere.
  EXPECT_EQ(check(Pool("chief", 1, "{gpus: 8, memory_mb: 100000}")).message(),
            "chief pool needs 8 GPUs, 1 CPU, 100000 MiB per replica; no node has all of that at "
            "once");
  Status together = check(Pool("chief", 1, "{gpus: 8}") + Pool("worker", 2, "{gpus: 4}"));
  EXPECT_EQ(together.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(together.message(),
            "its 3 replicas (16 GPUs, 3 CPUs in all) do not fit together on 2 nodes (12 GPUs, 48 "
            "CPUs in all), even with nothing else running");
  EXPECT_TRUE(check(Pool("chief", 1, "{gpus: 8}") + Pool("worker", 1, "{gpus: 4}")).ok());
  // one_per_node: three reducers need three nodes, whatever room two have.
  const std::string spread = "    one_per_node: true\n";
  EXPECT_EQ(check(Pool("chief", 1, "{}") + Pool("reducer", 3, "{cpus: 1}") + spread).message(),
            "reducer pool needs 3 nodes (one_per_node: 1 CPU for one replica on each); 2 of the "
            "2 nodes could take one");
  EXPECT_TRUE(check(Pool("chief", 1, "{}") + Pool("reducer", 2, "{cpus: 1}") + spread).ok());
}

// Ports are counted per host: one per replica on its host, two more on the chief's. The job of a
// chief and 3 workers needs 6 ports on one host, but fits 5 on each of two hosts (3 and 3: the
// chief and a worker on one, two workers on the other); with 2 ports a host, the chief's host
// alone lacks one.
TEST(GangFitTest, PortsAreCountedOnEachHostNotAcrossTheCluster) {
  const JobSpec spec =
      Spec("name: j\nworker_pools:\n" + Pool("chief", 1, "{}") + Pool("worker", 3, "{}"));
  NodeRegistry two_hosts(10'000);
  AddNode(two_hosts, "a", 0, 2, 0);
  AddNode(two_hosts, "b", 0, 2, 0);
  IdleClusterCheck idle;
  EXPECT_TRUE(idle.Check(spec, two_hosts, 20000, 20004).ok());
  Status few = idle.Check(spec, two_hosts, 20000, 20001);
  EXPECT_EQ(few.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(few.message(),
            "the job needs more ports on one host than the coordinator's --port-range has (2): "
            "one per replica on the host it runs on, and two more on the chief's");

  // The same two nodes on one host (agents that report one port domain) share its 5 ports.
  NodeRegistry one_host(10'000);
  AddNode(one_host, "a", 0, 2, 0, "host-1");
  AddNode(one_host, "b", 0, 2, 0, "host-1");
  IdleClusterCheck shared;
  EXPECT_EQ(shared.Check(spec, one_host, 20000, 20004).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(shared.Check(spec, one_host, 20000, 20005).ok());
}

// The idle cluster is kept between submits; a node that registers again with another capacity,
// a new node, or a forgotten one changes what fits.
TEST(GangFitTest, TheIdleClusterFollowsNodesThatRegisterOrAreForgotten) {
  NodeRegistry nodes(10'000);
  IdleClusterCheck idle;
  auto check = [&](const std::string& pools) {
    return idle.Check(Spec("name: j\nworker_pools:\n" + pools), nodes, 20000, 20100);
  };
  AddNode(nodes, "a", 4, 16, 0);
  EXPECT_EQ(check(Pool("chief", 1, "{gpus: 8}")).message(),
            "chief pool needs 8 GPUs per replica; the largest node has 4");
  AddNode(nodes, "a", 8, 16, 0);  // the same node, upgraded
  EXPECT_TRUE(check(Pool("chief", 1, "{gpus: 8}")).ok());
  EXPECT_EQ(check(Pool("chief", 1, "{gpus: 8}") + Pool("worker", 1, "{gpus: 8}")).message(),
            "its 2 replicas (16 GPUs, 2 CPUs in all) do not fit together on 1 node (8 GPUs, 16 "
            "CPUs in all), even with nothing else running");
  AddNode(nodes, "b", 8, 16, 0);
  EXPECT_TRUE(check(Pool("chief", 1, "{gpus: 8}") + Pool("worker", 1, "{gpus: 8}")).ok());
  ASSERT_TRUE(nodes.EndSession("b", "its key was removed",
                               0));  // LOST: still counted (it may come back) ...
  EXPECT_TRUE(check(Pool("chief", 1, "{gpus: 8}") + Pool("worker", 1, "{gpus: 8}")).ok());
  ASSERT_TRUE(nodes.Forget("b").ok());  // ... until forgotten
  EXPECT_FALSE(check(Pool("chief", 1, "{gpus: 8}") + Pool("worker", 1, "{gpus: 8}")).ok());
}

NodeFree Free(const std::string& id, int gpus, int cpus) {
  NodeFree n;
  n.node_id = id;
  for (int i = 0; i < gpus; ++i) n.free_gpus.push_back(i);
  n.free_cpus = cpus;
  n.memory_unlimited = true;
  return n;
}

// required_topology: the job fits only within one value of the label; the refusal names the key
// and its values, or that no node has the label; preferred_topology is never refused for it; a
// waiting job says it waits for room in one value.
TEST(GangFitTest, ATopologyNeedsOneLabelValueWithRoomForTheWholeJob) {
  NodeRegistry nodes(10'000);
  IdleClusterCheck idle;
  AddNode(nodes, "a", 4, 16, 0, "", {{"rack", "r1"}});
  AddNode(nodes, "b", 4, 16, 0, "", {{"rack", "r2"}});
  AddNode(nodes, "c", 4, 16, 0, "", {{"rack", "r2"}});
  auto check = [&](int workers, const std::string& scheduling) {
    return idle.Check(
        Spec("name: j\nworker_pools:\n" + Pool("chief", 1, "{gpus: 4}") +
             Pool("worker", workers, "{gpus: 2}") + "scheduling: " + scheduling + "\n"),
        nodes, 20000, 20100);
  };
  EXPECT_TRUE(check(2, "{required_topology: rack}").ok());  // r2: 8 GPUs
  EXPECT_EQ(check(3, "{required_topology: rack}").message(),
            "its 4 replicas (10 GPUs, 4 CPUs in all) need nodes of one rack "
            "(scheduling.required_topology); none of its 2 values (r1, r2) has room for them all, "
            "even with nothing else running");
  EXPECT_TRUE(check(3, "{preferred_topology: rack}").ok());
  // Levels: refused for the required one only; preferred levels alone never.
  EXPECT_EQ(check(3, "{preferred_topology: [host], required_topology: rack}").message(),
            check(3, "{required_topology: rack}").message());
  EXPECT_TRUE(check(2, "{preferred_topology: [host], required_topology: rack}").ok());
  EXPECT_TRUE(check(3, "{preferred_topology: [host, rack]}").ok());
  // Many values: five named, the rest counted.
  for (int i = 0; i < 6; ++i) {
    AddNode(nodes, "s" + std::to_string(i), 1, 16, 0, "", {{"switch", "sw" + std::to_string(i)}});
  }
  const std::string many = check(1, "{required_topology: switch}").message();
  EXPECT_NE(many.find("none of its 6 values (sw0, sw1, sw2, sw3, sw4 and 1 more) has room"),
            std::string::npos)
      << many;
  EXPECT_EQ(check(1, "{required_topology: zone}").message(),
            "its 2 replicas (6 GPUs, 2 CPUs in all) need nodes of one zone "
            "(scheduling.required_topology); no node has the label zone (cohort nodes: LABELS)");

  const NodeLabels r1{{"rack", "r1"}}, r2{{"rack", "r2"}};
  ClusterView view(20000, 20100);
  view.nodes = {Free("a", 2, 8), Free("b", 2, 8)};
  view.nodes[0].labels = &r1;
  view.nodes[1].labels = &r2;
  ReplicaDemand worker{1, 1, 0};
  worker.topology = InternTopology({"rack"});
  EXPECT_EQ(WaitingReason({worker, worker, worker}, view),
            "waiting for room for its 3 replicas together (3 GPUs, 3 CPUs in all, on nodes of one "
            "rack (required_topology)): each fits now, not all at once");
}

TEST(GangFitTest, AWaitingJobSaysWhatIsMissing) {
  ClusterView view(20000, 20100);
  EXPECT_EQ(WaitingReason({{4, 1, 0}}, view), "waiting for a node: none is ready");
  view.nodes = {Free("a", 4, 8), Free("b", 2, 8)};
  EXPECT_EQ(WaitingReason({{4, 1, 0}, {4, 1, 0}}, view),
            "waiting for room for 2 replicas with 4 GPUs, 1 CPU each; 1 fits now");
  EXPECT_EQ(WaitingReason({{8, 1, 0}}, view),
            "waiting for room for 1 replica with 8 GPUs, 1 CPU; none fits now");
  // Several replicas on one node count: 8 CPUs hold two of 4.
  EXPECT_EQ(WaitingReason({{0, 4, 0}, {0, 4, 0}, {0, 4, 0}, {0, 4, 0}, {0, 4, 0}}, view),
            "waiting for room for 5 replicas with 4 CPUs each; 4 fit now");
  // Each kind fits on its own, not both at once.
  EXPECT_EQ(WaitingReason({{4, 1, 0}, {2, 8, 0}, {0, 8, 0}}, view),
            "waiting for room for its 3 replicas together (6 GPUs, 17 CPUs in all): each fits "
            "now, not all at once");
  // one_per_node: a node holds one of them, however much room it has.
  const ReplicaDemand spread{0, 1, 0, nullptr, 5};
  EXPECT_EQ(WaitingReason({spread, spread, spread}, view),
            "waiting for room for 3 replicas with 1 CPU each, each on its own node "
            "(one_per_node); 2 fit now");
  ClusterView few_ports(20000, 20002);
  few_ports.nodes = {Free("a", 4, 8)};
  EXPECT_EQ(WaitingReason({{1, 1, 0}, {1, 1, 0}}, few_ports),
            "waiting for free ports: it needs one per replica on its hosts and two more on the "
            "chief's; a host has at most 3 of --port-range free");
}

// ExplainWaits compares hashes, not texts, for jobs whose reason did not change: a reason that
// does change must still reach the job, round after round, and a placed job's goes.
TEST(GangFitTest, AQueuedJobsReasonFollowsTheRounds) {
  std::vector<JobRecord> records(3);
  std::vector<JobRecord*> queued;
  std::vector<JobRequest> requests(3);
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].name = requests[i].name = "job" + std::to_string(i);
    requests[i].replicas = {{4, 1, 0}};
    queued.push_back(&records[i]);
  }
  requests[2].schedulable = false;
  ScheduleResult result;
  ClusterView view(20000, 20100);
  ExplainWaits(queued, requests, result, view);
  EXPECT_EQ(records[0].waiting_reason, "waiting for a node: none is ready");
  EXPECT_EQ(records[1].waiting_reason, "waiting for a node: none is ready");
  EXPECT_EQ(records[2].waiting_reason, "waiting for the replicas of its previous attempt to stop");
  EXPECT_EQ(records[0].waiting_reason_hash, WaitingReasonHash(records[0].waiting_reason));

  view.nodes = {Free("a", 2, 8)};
  ExplainWaits(queued, requests, result, view);  // a node came: the shape's reason changes
  EXPECT_EQ(records[1].waiting_reason,
            "waiting for room for 1 replica with 4 GPUs, 1 CPU; none fits now");
  EXPECT_EQ(records[2].waiting_reason, "waiting for the replicas of its previous attempt to stop");

  result.placed.push_back(JobPlacement{});
  result.placed.back().request = 0;
  ExplainWaits(queued, requests, result, view);
  EXPECT_EQ(records[0].waiting_reason, "");
  EXPECT_EQ(records[0].waiting_reason_hash, 0u);
  EXPECT_EQ(records[1].waiting_reason,
            "waiting for room for 1 replica with 4 GPUs, 1 CPU; none fits now");
  EXPECT_NE(WaitingReasonHash("x"), 0u);
}

}  // namespace
}  // namespace cohort::coordinator
