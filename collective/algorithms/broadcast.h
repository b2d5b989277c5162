// Broadcast among the workers of a transport: the root's buffer ends up on every worker.
// Calls of at most one chunk go down a binomial tree (log2(n) steps: latency-bound); larger ones
// down the chain root, root+1, ..., root-1, cut into chunk_bytes pieces that each worker forwards
// as soon as they arrive, so every link carries the buffer once and the pieces overlap.
#pragma once

#include "collective/algorithms/collective_call.h"

namespace cohort::collective {

struct BroadcastOptions : CollectiveOptions {
  void* data = nullptr;  // the root's: what is sent; every other worker's: where it lands
  size_t count = 0;      // elements, equal on every worker
  DataType type = DataType::kF32;
  int root = 0;
};

// Called by every worker with the same count, type, root and seq. kInvalidArgument naming the
// peer when a worker it receives from called something else (see collective_call.h).
Status Broadcast(Transport& transport, const BroadcastOptions& options);

}  // namespace cohort::collective
