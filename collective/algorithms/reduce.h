// Reduce to a root among the workers of a transport: the reduction by `op` of every worker's
// `count` elements lands on the root only.
//
// Calls of at most one chunk go up a binomial tree (log2(n) steps: latency-bound). Larger ones go
// along the chain root+1, root+2, ..., root-1, root, cut into chunk_bytes pieces: each worker adds
// its contribution to the partial sum it receives and passes it on as soon as it is reduced, so
// every link carries the buffer once and the pieces overlap. Both orders are fixed, so the result
// is bit-identical from run to run for a fixed worker count and root; kAvg divides once, on the
// root.
#pragma once

#include "collective/algorithms/collective_call.h"

namespace cohort::collective {

struct ReduceOptions : CollectiveOptions {
  const void* send = nullptr;  // count elements; not modified
  void* recv = nullptr;        // the root's: count elements (may equal send); others': unused
  size_t count = 0;            // equal on every worker
  DataType type = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
};

// Called by every worker with the same count, type, op, root and seq. Uses a few chunks of
// temporary memory (the tree: count elements on workers that are not the root).
Status Reduce(Transport& transport, const ReduceOptions& options);

}  // namespace cohort::collective
