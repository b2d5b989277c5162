// Halving-doubling all-reduce (Rabenseifner's: reduce-scatter by recursive halving, then
// all-gather by recursive doubling) among a power-of-two number of workers. It moves the same
// bytes per worker as the ring, 2(n-1)/n of the buffer each way, in 2 log2(n) steps instead of
// 2(n-1): where a step costs more in latency than in bytes (small buffers, ranks sharing a few
// cores) that is what decides. Each block is reduced only by its owner and then copied, so every
// rank ends with identical bytes, and the order of operations is fixed, so results are
// bit-identical run to run; kAvg divides the owned block once before the all-gather.
#pragma once

#include "collective/algorithms/allreduce_options.h"

namespace cohort::collective {

// True when halving-doubling can run among `workers` ranks (a power of two).
constexpr bool HalvingDoublingFits(int workers) {
  return workers > 0 && (workers & (workers - 1)) == 0;
}

// Called by every worker (transport rank < options.num_workers) with the same count, type, op and
// seq; options.num_workers must be a power of two (kInvalidArgument otherwise). Workers whose
// count, type or op differ all fail with kInvalidArgument naming a worker whose call differs
// from their own (pairwise_agreement.h), at the end of the reduce-scatter. Uses a temporary
// buffer of half the count.
Status HalvingDoublingAllreduce(Transport& transport, const AllreduceOptions& options);

}  // namespace cohort::collective
