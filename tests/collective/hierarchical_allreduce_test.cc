// HierarchicalAllreduce with workers as threads: H "hosts" of L workers each, every host with its
// own SharedMemoryGroup (real POSIX shared memory) and every worker with a loopback transport (the
// links between hosts). Every type and op against the double-precision reference, counts from 0 to
// several slots, repeats bit-identical, every worker with the same bytes; and workers whose calls
// differ all failing alike.
#include "collective/algorithms/hierarchical_allreduce.h"

#include <gtest/gtest.h>

#include "collective/transport/loopback/loopback_transport.h"
#include "tests/collective/test_util.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

constexpr size_t kSlotBytes = size_t{64} << 10;

// H hosts of L workers: worker w on host w / L with local rank w % L (the Communicator orders hosts
// by their first worker the same way), each host with its own SharedMemoryGroup, each worker with
// a loopback transport.
struct Cluster {
  Cluster(int hosts, int per_host, const std::string& name)
      : hosts(hosts), per_host(per_host), fabric(hosts * per_host), bootstraps(hosts) {
    const int n = hosts * per_host;
    for (int w = 0; w < n; ++w) transports.push_back(fabric.CreateTransport(w));
    groups.resize(n);
    testing::RunRanks(n, [&](int w) {
      const int h = w / per_host;
      auto g =
          SharedMemoryGroup::Create(bootstraps[h], name + "-host" + std::to_string(h), w % per_host,
                                    per_host, kSlotBytes, DeadlineAfter(milliseconds(20000)));
      if (g.ok()) groups[w] = std::move(*g);
    });
  }
  bool ok() const {
    for (const auto& g : groups)
      if (g == nullptr) return false;
    return true;
  }
  // HierarchicalAllreduce on worker w.
  Status Allreduce(int w, AllreduceOptions o) {
    std::vector<int> host_workers, across;
    for (int l = 0; l < per_host; ++l) host_workers.push_back(w / per_host * per_host + l);
    for (int h = 0; h < hosts; ++h) across.push_back(h * per_host + w % per_host);
    o.chunk_bytes = 4096;
    o.num_workers = hosts * per_host;
    return HierarchicalAllreduce(*groups[w], host_workers, *transports[w], across, o);
  }

  int hosts;
  int per_host;
  LoopbackFabric fabric;
  std::vector<InMemoryBootstrap> bootstraps;  // one a host
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::unique_ptr<SharedMemoryGroup>> groups;
};

class HierarchicalAllreduceTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(HierarchicalAllreduceTest, EveryTypeOpAndCountMatchesReferenceAndRepeatsBitIdentically) {
  const auto [hosts, per_host] = GetParam();
  const int n = hosts * per_host;
  Cluster cluster(hosts, per_host, "hier-test-" + std::to_string(n));
  ASSERT_TRUE(cluster.ok()) << "a worker has no group";

  std::vector<uint32_t> seq(n, 0);
  // 0; fewer elements than workers; one slot (at most 8 KiB: recursive doubling across hosts);
  // several slots with a partial last one (the ring across hosts).
  const auto failures = testing::CheckEveryCase(
      n, {0, 3, 1001, 70001}, [&](int w, void* data, size_t count, DataType type, ReduceOp op) {
        AllreduceOptions o;
        o.data = data;
        o.count = count;
        o.type = type;
        o.op = op;
        o.seq = seq[w]++;
        o.deadline = DeadlineAfter(milliseconds(60000));
        return cluster.Allreduce(w, o);
      });
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// One worker's call differs (count, type, op; an empty call against a small one): every worker,
// on its host or another, fails with kInvalidArgument naming a worker whose call differs from its
// own and quoting both calls, well before the deadline, and its group is unusable after. Small
// calls cross hosts by recursive doubling, large ones (several slots) by the ring.
TEST_P(HierarchicalAllreduceTest, WorkersWhoseCallsDifferAllFailNamingOne) {
  const auto [hosts, per_host] = GetParam();
  const int n = hosts * per_host;
  int cluster_id = 0;
  for (size_t count : {size_t{1000}, size_t{70001}}) {
    const testing::AllreduceCall common = {"", count};
    // (An empty call against a large one crosses hosts by another algorithm: they never meet.)
    for (int odd : {0, n - 1}) {
      for (const testing::AllreduceCall& variant : testing::OddCalls(count, count == 1000)) {
        const std::string name = std::to_string(count) + " elements, worker " +
                                 std::to_string(odd) + "'s " + variant.name;
        Cluster cluster(hosts, per_host,
                        "hier-agree-" + std::to_string(n) + "-" + std::to_string(cluster_id++));
        ASSERT_TRUE(cluster.ok()) << name << ": a worker has no group";
        std::vector<std::string> failures(n);
        testing::RunRanks(n, [&](int w) {
          const testing::AllreduceCall& call = w == odd ? variant : common;
          std::vector<char> data(call.count * DataTypeSize(call.type) + 1);
          AllreduceOptions o;
          o.data = data.data();
          o.count = call.count;
          o.type = call.type;
          o.op = call.op;
          o.deadline = DeadlineAfter(milliseconds(20000));
          failures[w] =
              testing::DisagreementProblem(cluster.Allreduce(w, o), w, odd, common, variant);
          if (!failures[w].empty()) return;
          o.count = 0;
          const Status after = cluster.Allreduce(w, o);
          if (after.code() != StatusCode::kAborted) failures[w] = "then " + after.ToString();
        });
        for (int w = 0; w < n; ++w) {
          if (!failures[w].empty())
            ADD_FAILURE() << name << ": worker " << w << ": " << failures[w];
        }
      }
    }
  }
}

// The stage across hosts runs on a transport of its own ranks (worker 3 is rank 1 of worker 1's);
// its errors still name workers by their rank in the job. Worker 3 never calls: worker 1 waits for
// it across hosts, and worker 0 for worker 2, which waits for worker 3 on its host.
TEST(HierarchicalAllreduceNamingTest, AStageAcrossHostsNamesWorkersByTheirJobRanks) {
  for (size_t count : {size_t{1000}, size_t{70001}}) {  // recursive doubling, the ring
    Cluster cluster(2, 2, "hier-naming-" + std::to_string(count));
    ASSERT_TRUE(cluster.ok());
    std::vector<Status> got(3);
    testing::RunRanks(3, [&](int w) {
      std::vector<float> data(count, 1.0f);
      AllreduceOptions o;
      o.data = data.data();
      o.count = count;
      o.deadline = DeadlineAfter(milliseconds(1000));
      got[w] = cluster.Allreduce(w, o);
    });
    for (const auto& [w, waited] : {std::pair{0, 2}, {1, 3}}) {
      const std::string& m = got[w].message();
      EXPECT_NE(m.find("receiving from worker " + std::to_string(waited)), std::string::npos)
          << count << " elements, worker " << w << ": " << got[w].ToString();
      EXPECT_EQ(m.find("receiving from worker 1:"), std::string::npos)
          << count << " elements, worker " << w << ": " << got[w].ToString();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HostsAndWorkersPerHost, HierarchicalAllreduceTest,
                         ::testing::Values(std::make_tuple(2, 2), std::make_tuple(3, 2),
                                           std::make_tuple(2, 3), std::make_tuple(2, 1)),
                         [](const auto& info) {
                           return "h" + std::to_string(std::get<0>(info.param)) + "_l" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace cohort::collective
