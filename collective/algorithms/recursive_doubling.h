// Recursive-doubling all-reduce for latency-bound buffers, among any number of workers: in each of
// log2(p) steps a worker swaps its whole partial result with the partner rank ^ 2^k and reduces
// it, where p is the largest power of two not above n. With n = p + r, first the r workers
// 1, 3, ..., 2r-1 take the buffers of 0, 2, ..., 2r-2, which sit the exchanges out and receive the
// result at the end. A call is log2(p) latencies (plus two where n is not a power of two): half
// halving-doubling's 2 log2(n), and the ring's 2(n-1) shrinks to a handful, but each worker sends
// the whole buffer log2(p) times, so it pays only while the buffer is small next to what a link
// carries in one latency (kAuto's limit in allreduce_selection.h). OpenMPI and MPICH run it for
// small buffers for the same reason.
//
// Every worker ends with identical bytes: each reduction puts the lower-ranked side's value on the
// left, so the two partners of a step compute one expression (min and max over NaNs depend on the
// operands' order), and a worker that sat out receives the result. The order of operations is
// fixed by n alone, so results repeat bit-identically; kAvg divides the result once, at the end.
#pragma once

#include "collective/algorithms/allreduce_options.h"

namespace cohort::collective {

// Called by every worker (transport rank < options.num_workers) with the same count, type, op and
// seq. Workers whose count, type or op differ all fail with kInvalidArgument naming a worker whose
// call differs from their own (pairwise_agreement.h), after the same steps as a call that agrees.
// Uses a temporary buffer of the whole count.
Status RecursiveDoublingAllreduce(Transport& transport, const AllreduceOptions& options);

}  // namespace cohort::collective
