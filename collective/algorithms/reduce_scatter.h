// Reduce-scatter among the workers of a transport, equal blocks: every worker contributes
// n * count elements; worker r ends with block r (elements r*count .. r*count+count-1) reduced over
// all workers.
//
// Ring: n-1 steps; in step s a worker receives from its left the partial reduction of block
// (rank - s - 2), adds its own contribution and passes it right (or, in the last step, where the
// block is its own, keeps it). Blocks are cut into chunk_bytes pieces and each piece is forwarded
// as soon as it is reduced, so receiving, reducing and sending overlap. Each block crosses each
// link once ((n-1)/n of the input per link). Block b is reduced in the fixed order b+1, b+2, ...,
// b: the result is bit-identical from run to run for a fixed worker count; kAvg divides once at the
// end.
#pragma once

#include "collective/algorithms/collective_call.h"

namespace cohort::collective {

struct ReduceScatterOptions : CollectiveOptions {
  const void* send = nullptr;  // num_workers * count elements; not modified
  void* recv = nullptr;        // count elements; may alias the send buffer
  size_t count = 0;            // per worker (one block), equal on every worker
  DataType type = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;
};

// Called by every worker with the same count, type, op and seq. Uses two temporary buffers of
// count elements.
Status ReduceScatter(Transport& transport, const ReduceScatterOptions& options);

}  // namespace cohort::collective
