// The all-reduce algorithm kAuto picks across hosts (no shared memory, no host groups) for a job of
// `workers` and `reducers` and a buffer of `bytes`: checked on the selection table itself
// (allreduce_selection_test) and through a Communicator of such a job (allreduce_inproc_test).
#pragma once

#include <cstddef>
#include <cstdint>

#include "collective/allreduce_selection.h"

namespace cohort::collective::testing {

struct AcrossHostsCase {
  int workers, reducers;
  size_t bytes;
  Algorithm want;
};

inline constexpr AcrossHostsCase kAcrossHostsCases[] = {
    {4, 2, 0, Algorithm::kRecursiveDoubling},
    {4, 2, kRecursiveDoublingAllreduceMaxBytes, Algorithm::kRecursiveDoubling},
    {4, 2, kRecursiveDoublingAllreduceMaxBytes + 1, Algorithm::kHalvingDoubling},
    {4, 2, kHalvingDoublingMaxBytes, Algorithm::kHalvingDoubling},
    {4, 2, kHalvingDoublingMaxBytes + 1, Algorithm::kReductionServer},
    {4, 2, SIZE_MAX, Algorithm::kReductionServer},
    // Not a power of two: recursive doubling folds the extra workers in, halving-doubling cannot.
    {3, 2, 1024, Algorithm::kRecursiveDoubling},
    {3, 2, kRecursiveDoublingAllreduceMaxBytes + 1, Algorithm::kReductionServer},
    {4, 0, 1024, Algorithm::kRecursiveDoubling},
    {4, 0, kHalvingDoublingMaxBytes, Algorithm::kHalvingDoubling},
    {4, 0, size_t{1} << 20, Algorithm::kRing},
    {1, 0, 8, Algorithm::kRecursiveDoubling},
    {6, 0, 8, Algorithm::kRecursiveDoubling},
    {6, 0, kRecursiveDoublingAllreduceMaxBytes + 1, Algorithm::kRing},
};

}  // namespace cohort::collective::testing
