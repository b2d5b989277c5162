// All-to-all among the workers of a transport: block j of worker i's send buffer lands in block i
// of worker j's receive buffer. Alltoall moves equal blocks of `count` elements; AlltoallV blocks
// of per-peer counts (send_counts[j] elements to worker j, recv_counts[i] from worker i; blocks
// are contiguous, in worker order).
//
// Every worker posts its receives from all peers, then sends to rank+1, rank+2, ... in turn (at any
// moment the workers send to different peers), in chunk_bytes pieces. The call header to each
// peer carries the count sent to it, so a receiver that expects another count names the sender.
#pragma once

#include <vector>

#include "collective/algorithms/collective_call.h"

namespace cohort::collective {

struct AlltoallOptions : CollectiveOptions {
  const void* send = nullptr;  // num_workers blocks
  void* recv = nullptr;        // num_workers blocks; may overlap send (then send is copied first)
  DataType type = DataType::kF32;
  // Equal blocks (Alltoall): elements per block, equal on every worker.
  size_t count = 0;
  // Per-peer blocks (AlltoallV): num_workers entries each. recv_counts[i] on worker j must equal
  // send_counts[j] on worker i.
  std::vector<size_t> send_counts;
  std::vector<size_t> recv_counts;
};

// Called by every worker with the same count, type and seq (send_counts and recv_counts ignored).
Status Alltoall(Transport& transport, const AlltoallOptions& options);
// Called by every worker with the same type and seq and matching counts (count ignored).
Status AlltoallV(Transport& transport, const AlltoallOptions& options);

}  // namespace cohort::collective
