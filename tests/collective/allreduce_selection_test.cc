// The all-reduce selection table (collective/allreduce_selection.h) as a pure function: each
// rule, its size threshold on both sides, the order of the rules, and pinned algorithms.
#include "collective/allreduce_selection.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/collective/selection_cases.h"

namespace cohort::collective {
namespace {

AllreduceSupport Across(int workers, int reducers) {
  AllreduceSupport s;
  s.num_workers = workers;
  s.num_reducers = reducers;
  return s;
}

TEST(AllreduceSelectionTest, TheLastRuleMatchesEverything) {
  const auto table = AllreduceSelectionTable();
  ASSERT_FALSE(table.empty());
  EXPECT_EQ(table.back().need, SelectionNeed::kNothing);
  EXPECT_EQ(table.back().max_bytes, SIZE_MAX);
  EXPECT_EQ(table.back().algorithm, Algorithm::kRing);
  for (const SelectionRule& rule : table) {
    EXPECT_NE(rule.algorithm, Algorithm::kAuto) << "a rule must name an algorithm";
  }
}

TEST(AllreduceSelectionTest, AcrossHostsTheBufferSizeDecides) {
  for (const testing::AcrossHostsCase& c : testing::kAcrossHostsCases) {
    const Algorithm got =
        SelectAllreduceAlgorithm(Across(c.workers, c.reducers), Algorithm::kAuto, c.bytes);
    EXPECT_EQ(got, c.want) << c.workers << " workers, " << c.reducers << " reducers, " << c.bytes
                           << " bytes: " << AlgorithmName(got);
  }
}

TEST(AllreduceSelectionTest, SharedMemoryComesFirstThenTheHierarchy) {
  AllreduceSupport one_host = Across(4, 2);
  one_host.one_host = true;
  one_host.shared_memory = true;
  for (size_t bytes : {size_t{0}, size_t{1024}, size_t{1} << 30}) {
    EXPECT_EQ(SelectAllreduceAlgorithm(one_host, Algorithm::kAuto, bytes),
              Algorithm::kSharedMemory);
  }
  // The workers' segments could not be made: the ring, not the Reduction Server, on one host.
  one_host.shared_memory = false;
  EXPECT_EQ(SelectAllreduceAlgorithm(one_host, Algorithm::kAuto, 1024), Algorithm::kRing);
  EXPECT_EQ(SelectAllreduceAlgorithm(one_host, Algorithm::kAuto, SIZE_MAX), Algorithm::kRing);

  // Workers sharing a host whose reducers run elsewhere: still shared memory.
  AllreduceSupport workers_only = Across(3, 1);
  workers_only.shared_memory = true;
  EXPECT_EQ(SelectAllreduceAlgorithm(workers_only, Algorithm::kAuto, 1024),
            Algorithm::kSharedMemory);

  AllreduceSupport hosts = Across(4, 4);
  hosts.host_groups = true;
  EXPECT_EQ(SelectAllreduceAlgorithm(hosts, Algorithm::kAuto, 1024), Algorithm::kHierarchical)
      << "the hierarchy wins over recursive doubling, even for small buffers";
  EXPECT_EQ(SelectAllreduceAlgorithm(hosts, Algorithm::kAuto, SIZE_MAX), Algorithm::kHierarchical);
}

TEST(AllreduceSelectionTest, APinnedAlgorithmRunsWhereItCanElseTheRing) {
  const AllreduceSupport none = Across(3, 0);
  EXPECT_EQ(SelectAllreduceAlgorithm(none, Algorithm::kRing, 8), Algorithm::kRing);
  EXPECT_EQ(SelectAllreduceAlgorithm(none, Algorithm::kHalvingDoubling, 8),
            Algorithm::kHalvingDoubling)
      << "pinned as it is: Allreduce refuses it for 3 workers, naming why";
  EXPECT_EQ(SelectAllreduceAlgorithm(none, Algorithm::kRecursiveDoubling, SIZE_MAX),
            Algorithm::kRecursiveDoubling)
      << "pinned: any size, any number of workers";
  EXPECT_EQ(SelectAllreduceAlgorithm(none, Algorithm::kSharedMemory, 8), Algorithm::kRing);
  EXPECT_EQ(SelectAllreduceAlgorithm(none, Algorithm::kHierarchical, 8), Algorithm::kRing);
  EXPECT_EQ(SelectAllreduceAlgorithm(none, Algorithm::kReductionServer, 8), Algorithm::kRing);

  AllreduceSupport all = Across(4, 2);
  all.shared_memory = true;
  all.host_groups = true;
  EXPECT_EQ(SelectAllreduceAlgorithm(all, Algorithm::kSharedMemory, 8), Algorithm::kSharedMemory);
  EXPECT_EQ(SelectAllreduceAlgorithm(all, Algorithm::kHierarchical, 8), Algorithm::kHierarchical);
  EXPECT_EQ(SelectAllreduceAlgorithm(all, Algorithm::kReductionServer, 8),
            Algorithm::kReductionServer);
  EXPECT_EQ(SelectAllreduceAlgorithm(all, Algorithm::kRing, 8), Algorithm::kRing);
}

}  // namespace
}  // namespace cohort::collective
