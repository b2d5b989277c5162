// Gather to a root among the workers of a transport: worker r's `count` elements land in the
// root's buffer at offset r * count. Every worker sends straight to the root, in chunk_bytes
// pieces; the root receives from all at once (its link carries (n-1)/n of the result: the bound).
#pragma once

#include "collective/algorithms/collective_call.h"

namespace cohort::collective {

struct GatherOptions : CollectiveOptions {
  const void* send = nullptr;  // count elements; on the root it may be recv + root * count
  void* recv = nullptr;        // the root's: num_workers * count elements; others': unused
  size_t count = 0;            // per worker, equal on every worker
  DataType type = DataType::kF32;
  int root = 0;
};

// Called by every worker with the same count, type, root and seq.
Status Gather(Transport& transport, const GatherOptions& options);

}  // namespace cohort::collective
