// HierarchicalAllreduce with workers as threads: H "hosts" of L workers each, every host with its
// own SharedMemoryGroup (real POSIX shared memory) and every worker with a loopback transport (the
// links between hosts). Every type and op against the double-precision reference, counts from 0 to
// several slots, repeats bit-identical, every worker with the same bytes.
#include "collective/algorithms/hierarchical_allreduce.h"

#include <gtest/gtest.h>

#include "collective/transport/loopback/loopback_transport.h"
#include "tests/collective/test_util.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

constexpr size_t kSlotBytes = size_t{64} << 10;

class HierarchicalAllreduceTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(HierarchicalAllreduceTest, EveryTypeOpAndCountMatchesReferenceAndRepeatsBitIdentically) {
  const auto [hosts, per_host] = GetParam();
  const int n = hosts * per_host;
  // Worker w runs on host w / per_host with local rank w % per_host (the Communicator orders hosts
  // by their first worker the same way).
  LoopbackFabric fabric(n);
  std::vector<std::unique_ptr<Transport>> transports(n);
  for (int w = 0; w < n; ++w) transports[w] = fabric.CreateTransport(w);
  std::vector<InMemoryBootstrap> bootstraps(hosts);
  std::vector<std::unique_ptr<SharedMemoryGroup>> groups(n);
  testing::RunRanks(n, [&](int w) {
    const int h = w / per_host;
    auto g = SharedMemoryGroup::Create(
        bootstraps[h], "hier-test-" + std::to_string(n) + "-host" + std::to_string(h), w % per_host,
        per_host, kSlotBytes, DeadlineAfter(milliseconds(20000)));
    if (g.ok()) groups[w] = std::move(*g);
  });
  for (int w = 0; w < n; ++w) ASSERT_NE(groups[w], nullptr) << "worker " << w << " has no group";

  std::vector<uint32_t> seq(n, 0);
  // 0; fewer elements than workers; one slot (at most 8 KiB: recursive doubling across hosts);
  // several slots with a partial last one (the ring across hosts).
  const auto failures = testing::CheckEveryCase(
      n, {0, 3, 1001, 70001}, [&](int w, void* data, size_t count, DataType type, ReduceOp op) {
        std::vector<int> across;
        for (int h = 0; h < hosts; ++h) across.push_back(h * per_host + w % per_host);
        AllreduceOptions o;
        o.data = data;
        o.count = count;
        o.type = type;
        o.op = op;
        o.seq = seq[w]++;
        o.deadline = DeadlineAfter(milliseconds(60000));
        o.chunk_bytes = 4096;
        o.num_workers = n;
        return HierarchicalAllreduce(*groups[w], *transports[w], across, o);
      });
  for (const auto& f : failures) ADD_FAILURE() << f;
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
