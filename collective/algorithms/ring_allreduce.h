// Ring all-reduce (reduce-scatter, then all-gather) among the workers of a transport: the baseline
// and the fallback when a job has no reducers. Each segment step is cut into chunk_bytes pieces so
// receiving and reducing overlap. Segment i is summed starting at rank i and going around the
// ring, so the result is bit-identical from run to run for a fixed worker count; kAvg divides the
// owned segment once, before the all-gather, so every rank ends with identical bytes.
//
// Each byte crosses each worker's link 2(n-1)/n times each way. Every message starts with the
// sender's call (pairwise_agreement.h): workers whose calls differ all fail with kInvalidArgument.
#pragma once

#include "collective/algorithms/allreduce_options.h"

namespace cohort::collective {

// Called by every worker (transport rank < options.num_workers) with the same seq, and the same
// count, type and op (else every worker fails as above, after the same steps, an empty call
// included). Uses a temporary buffer of up to four pieces (options.chunk_bytes) of a segment.
Status RingAllreduce(Transport& transport, const AllreduceOptions& options);

}  // namespace cohort::collective
