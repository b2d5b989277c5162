// Where the ranks run decides which all-reduces a Communicator can use. The loopback fabric fakes
// the placement (hosts, shared memory allowed) that a UCX transport would report, so the choices
// between the shared-memory, hierarchical and network algorithms run here in one process, with
// the real shared-memory segments among the threads.
#include <gtest/gtest.h>

#include <mutex>
#include <optional>

#include "collective/communicator.h"
#include "collective/reducer.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "collective/transport/subset_transport.h"
#include "tests/collective/test_util.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;
using enum Algorithm;

Placement Hosts(std::vector<std::string> hosts, bool shared_memory) {
  Placement p;
  p.hosts = std::move(hosts);
  p.shared_memory = shared_memory;
  return p;
}

TEST(PlacementTest, HostsGroupInOrderOfTheirFirstRank) {
  const Placement p = Hosts({"b", "a", "b", "c", "a"}, true);
  EXPECT_EQ(p.GroupByHost(5), (std::vector<std::vector<int>>{{0, 2}, {1, 4}, {3}}));
  EXPECT_EQ(p.GroupByHost(2), (std::vector<std::vector<int>>{{0}, {1}}));
  EXPECT_TRUE(p.AllOnHostOf(1, 4, 1));
  EXPECT_FALSE(p.AllOnHostOf(0, 0, 2));
  EXPECT_TRUE(p.AllOnHostOf(0, 2, 0)) << "no ranks: trivially";
  EXPECT_TRUE(p.AllOnHostOf(4, 4, 10)) << "ranks past the end are ignored";
  const Placement one = Placement::OneHost(3, false);
  EXPECT_TRUE(one.AllOnHostOf(2, 0, 3));
  EXPECT_FALSE(one.shared_memory);
}

TEST(PlacementTest, TransportsReportIt) {
  LoopbackFabric plain(3);
  auto t = plain.CreateTransport(1);
  EXPECT_FALSE(t->placement().shared_memory) << "loopback ranks talk as across hosts by default";
  EXPECT_TRUE(t->placement().AllOnHostOf(1, 0, 3));

  LoopbackFabric fabric(Hosts({"a", "b", "a", "b"}, true));
  EXPECT_EQ(fabric.size(), 4);
  auto t2 = fabric.CreateTransport(2);
  EXPECT_EQ(t2->placement().hosts, (std::vector<std::string>{"a", "b", "a", "b"}));
  SubsetTransport subset(*t2, {1, 2});
  EXPECT_EQ(subset.placement().hosts, (std::vector<std::string>{"b", "a"}));
  EXPECT_TRUE(subset.placement().shared_memory);
}

// Communicators of `workers` workers and `reducers` reducers (threads) on `placement`; each
// worker runs body(rank, comm) once every worker has its communicator.
void RunOn(const Placement& placement, int workers, int reducers,
           const std::function<void(std::vector<std::unique_ptr<Communicator>>&)>& body) {
  LoopbackFabric fabric(placement);
  ASSERT_EQ(fabric.size(), workers + reducers);
  InMemoryBootstrap bootstrap;
  CommunicatorOptions options;
  options.transport = CommunicatorOptions::TransportKind::kLoopback;
  options.loopback_fabric = &fabric;
  options.timeout = milliseconds(30000);
  options.key_prefix = "placement-test";
  std::vector<std::unique_ptr<Communicator>> comms(workers);
  std::mutex mu;
  std::vector<std::string> failures;
  std::atomic<bool> stop{false};
  std::vector<std::thread> reducer_threads;
  for (int j = 0; j < reducers; ++j) {
    reducer_threads.emplace_back([&, j] {
      ReducerOptions ro;
      ro.comm = options;
      ro.rejoin_timeout = milliseconds(0);
      ro.max_generations = 1;
      Status s = RunReducer(bootstrap, workers, reducers, j, ro, stop);
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok()) failures.push_back("reducer " + std::to_string(j) + ": " + s.ToString());
    });
  }
  testing::RunRanks(workers, [&](int r) {
    auto comm = Communicator::Create(bootstrap, r, workers, reducers, options);
    std::lock_guard<std::mutex> lock(mu);
    if (!comm.ok()) {
      failures.push_back("worker " + std::to_string(r) + ": " + comm.status().ToString());
    } else {
      comms[r] = std::move(*comm);
    }
  });
  if (failures.empty()) body(comms);
  comms.clear();  // tells the reducers the workers are done
  for (auto& t : reducer_threads) t.join();
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// Every type, op and a few counts through Allreduce(kAuto): correct, repeatable, the same bytes
// on every worker.
void ExpectAutoAllreduceCorrect(std::vector<std::unique_ptr<Communicator>>& comms) {
  const auto failures =
      testing::CheckEveryCase(static_cast<int>(comms.size()), {0, 3, 70001},
                              [&](int w, void* data, size_t count, DataType type, ReduceOp op) {
                                return comms[w]->Allreduce(data, count, type, op);
                              });
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// What every worker's Communicator reports on a placement; what is left unset is not checked.
struct Choices {
  bool shm = false;                               // shared_memory_available()
  std::optional<bool> hierarchy = std::nullopt;   // hierarchical_available()
  std::optional<Algorithm> small = std::nullopt;  // AutoAlgorithm(1024)
  std::optional<Algorithm> large = std::nullopt;  // AutoAlgorithm(), for the largest buffers
  std::optional<size_t> chunk = std::nullopt;     // chunk_bytes()
};

void ExpectChoices(std::vector<std::unique_ptr<Communicator>>& comms, const Choices& want) {
  for (auto& c : comms) {
    EXPECT_EQ(c->shared_memory_available(), want.shm) << "rank " << c->rank();
    if (want.hierarchy) {
      EXPECT_EQ(c->hierarchical_available(), *want.hierarchy);
    }
    if (want.small) {
      EXPECT_EQ(c->AutoAlgorithm(1024), *want.small);
    }
    if (want.large) {
      EXPECT_EQ(c->AutoAlgorithm(), *want.large);
    }
    if (want.chunk) {
      EXPECT_EQ(c->chunk_bytes(), *want.chunk);
    }
  }
}

TEST(CommunicatorPlacementTest, WorkersSharingAHostWithSharedMemoryUseIt) {
  RunOn(Placement::OneHost(4, true), 4, 0, [](auto& comms) {
    // Every rank on one host: the same-host chunk size.
    ExpectChoices(comms, {.shm = true,
                          .hierarchy = false,
                          .small = kSharedMemory,
                          .large = kSharedMemory,
                          .chunk = kSameHostChunkBytes});
    ExpectAutoAllreduceCorrect(comms);
  });
}

TEST(CommunicatorPlacementTest, AReducerElsewhereLeavesTheWorkersTheirSharedMemory) {
  RunOn(Hosts({"a", "a", "a", "reducers"}, true), 3, 1, [](auto& comms) {
    // The reducer is across a link: the default chunk size.
    ExpectChoices(comms, {.shm = true, .large = kSharedMemory, .chunk = kDefaultChunkBytes});
    ExpectAutoAllreduceCorrect(comms);
    // The Reduction Server still runs when asked for.
    testing::RunRanks(3, [&](int w) {
      std::vector<char> data = testing::MakeInput(DataType::kF32, w, 5000);
      EXPECT_TRUE(comms[w]
                      ->Allreduce(data.data(), 5000, DataType::kF32, ReduceOp::kSum,
                                  Algorithm::kReductionServer)
                      .ok());
      EXPECT_EQ(testing::CheckResult(DataType::kF32, ReduceOp::kSum, 3, data.data(), 5000), "");
    });
  });
}

TEST(CommunicatorPlacementTest, HostsOfEquallyManyWorkersRunTheHierarchicalAllreduce) {
  // Hosts interleaved by rank: each host's workers are found by name, not by rank ranges.
  RunOn(Hosts({"a", "b", "a", "b"}, true), 4, 0, [](auto& comms) {
    ExpectChoices(
        comms,
        {.shm = false, .hierarchy = true, .small = kHierarchical, .chunk = kDefaultChunkBytes});
    ExpectAutoAllreduceCorrect(comms);
  });
}

TEST(CommunicatorPlacementTest, WithoutSharedMemoryOrEqualHostsTheNetworkAlgorithmsRun) {
  // Uneven hosts: no hierarchy; small buffers by recursive doubling, large by the ring.
  RunOn(Hosts({"a", "a", "a", "b"}, true), 4, 0, [](auto& comms) {
    ExpectChoices(comms,
                  {.shm = false, .hierarchy = false, .small = kRecursiveDoubling, .large = kRing});
  });
  // One host, shared memory not allowed (UCX_TLS=tcp): as across hosts.
  RunOn(Placement::OneHost(2, false), 2, 0, [](auto& comms) {
    ExpectChoices(comms, {.shm = false, .large = kRing, .chunk = kDefaultChunkBytes});
  });
}

}  // namespace
}  // namespace cohort::collective
