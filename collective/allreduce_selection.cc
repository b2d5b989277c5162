#include "collective/allreduce_selection.h"

#include "collective/algorithms/halving_doubling.h"

namespace cohort::collective {
namespace {

constexpr size_t kAnySize = SIZE_MAX;

constexpr SelectionRule kAllreduceRules[] = {
    {SelectionNeed::kSharedMemory, kAnySize, Algorithm::kSharedMemory},
    {SelectionNeed::kOneHost, kAnySize, Algorithm::kRing},
    {SelectionNeed::kHostGroups, kAnySize, Algorithm::kHierarchical},
    {SelectionNeed::kNothing, kRecursiveDoublingAllreduceMaxBytes, Algorithm::kRecursiveDoubling},
    {SelectionNeed::kPowerOfTwoWorkers, kHalvingDoublingMaxBytes, Algorithm::kHalvingDoubling},
    {SelectionNeed::kReducers, kAnySize, Algorithm::kReductionServer},
    {SelectionNeed::kNothing, kAnySize, Algorithm::kRing},
};

}  // namespace

std::span<const SelectionRule> AllreduceSelectionTable() { return kAllreduceRules; }

bool Meets(const AllreduceSupport& support, SelectionNeed need) {
  switch (need) {
    case SelectionNeed::kNothing:
      return true;
    case SelectionNeed::kSharedMemory:
      return support.shared_memory;
    case SelectionNeed::kOneHost:
      return support.one_host;
    case SelectionNeed::kHostGroups:
      return support.host_groups;
    case SelectionNeed::kPowerOfTwoWorkers:
      return HalvingDoublingFits(support.num_workers);
    case SelectionNeed::kReducers:
      return support.num_reducers > 0;
  }
  return false;
}

Algorithm SelectAllreduceAlgorithm(const AllreduceSupport& support, Algorithm configured,
                                   size_t bytes) {
  switch (configured) {
    case Algorithm::kRing:
    case Algorithm::kHalvingDoubling:
    case Algorithm::kRecursiveDoubling:
      return configured;
    case Algorithm::kSharedMemory:
      return Meets(support, SelectionNeed::kSharedMemory) ? configured : Algorithm::kRing;
    case Algorithm::kHierarchical:
      return Meets(support, SelectionNeed::kHostGroups) ? configured : Algorithm::kRing;
    case Algorithm::kReductionServer:
      return Meets(support, SelectionNeed::kReducers) ? configured : Algorithm::kRing;
    case Algorithm::kAuto:
      break;
  }
  for (const SelectionRule& rule : kAllreduceRules) {
    if (bytes <= rule.max_bytes && Meets(support, rule.need)) return rule.algorithm;
  }
  return Algorithm::kRing;
}

}  // namespace cohort::collective
