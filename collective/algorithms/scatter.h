// Scatter from a root among the workers of a transport: block r of the root's buffer (elements
// r * count ..) lands in worker r's buffer. The root sends straight to each worker, in chunk_bytes
// pieces, to all at once (its link carries (n-1)/n of the buffer: the bound).
#pragma once

#include "collective/algorithms/collective_call.h"

namespace cohort::collective {

struct ScatterOptions : CollectiveOptions {
  const void* send = nullptr;  // the root's: num_workers * count elements; others': unused
  void* recv = nullptr;        // count elements; on the root it may be send + root * count
  size_t count = 0;            // per worker, equal on every worker
  DataType type = DataType::kF32;
  int root = 0;
};

// Called by every worker with the same count, type, root and seq.
Status Scatter(Transport& transport, const ScatterOptions& options);

}  // namespace cohort::collective
