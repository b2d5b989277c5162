// All-gather among the workers of a transport, equal sizes: worker r contributes `count` elements
// and every worker ends with all n contributions, r's at offset r * count.
//
// Ring (any n): n-1 steps; in step s a worker passes block (rank - s) to its right and receives
// block (rank - s - 1) from its left, cut into chunk_bytes pieces, each forwarded in the next step
// as soon as it arrived; each block crosses each link once (the bandwidth bound, (n-1)/n of the
// output per link). Recursive doubling (n a power of two): log2(n) exchanges of doubling runs of
// blocks with the partner rank ^ 2^k: fewer steps, for latency-bound calls. kAuto takes recursive
// doubling for outputs up to kHalvingDoublingMaxBytes among a power-of-two number of workers, else
// the ring.
#pragma once

#include "collective/algorithms/collective_call.h"

namespace cohort::collective {

enum class AllgatherAlgorithm : uint8_t { kAuto = 0, kRing = 1, kRecursiveDoubling = 2 };

// Recursive doubling's limit under kAuto (bytes of the whole output): the halving-doubling
// all-reduce's, whose small-buffer advantage it shares.
constexpr size_t kRecursiveDoublingMaxBytes = size_t{64} << 10;

struct AllgatherOptions : CollectiveOptions {
  const void* send = nullptr;  // count elements; may be recv + rank * count (in place)
  void* recv = nullptr;        // num_workers * count elements
  size_t count = 0;            // per worker, equal on every worker
  DataType type = DataType::kF32;
  AllgatherAlgorithm algorithm = AllgatherAlgorithm::kAuto;
};

// The algorithm kAuto runs for these options (the same on every worker).
AllgatherAlgorithm ChooseAllgatherAlgorithm(const AllgatherOptions& options);

// Called by every worker with the same count, type, algorithm and seq; kRecursiveDoubling needs a
// power-of-two number of workers (kInvalidArgument otherwise).
Status Allgather(Transport& transport, const AllgatherOptions& options);

}  // namespace cohort::collective
