// Hierarchical all-reduce for jobs with several workers on each of several hosts (a node's GPUs):
// the workers of a host sum their buffers through shared memory, each ending with one slice of the
// host's sum (SharedMemoryGroup); the workers with the same local rank on every host all-reduce
// that slice with a ring over the transport (by recursive doubling, log2(H) steps instead of the
// ring's 2(H-1), for buffers up to kRecursiveDoublingAllreduceMaxBytes); each worker publishes the
// result and copies the other slices from its host's peers. A host's link then carries 2(H-1)/H of
// the buffer each way for H hosts, however many workers it has, where a flat ring or Reduction
// Server sends every worker's bytes through it. Sums run in local-rank order within a host, then
// in ring (or recursive doubling's) order across hosts: bit-identical run to run for a fixed
// placement.
//
// Agreement: every worker fails with kInvalidArgument naming a worker whose call (count, type, op)
// differs from its own, wherever the two run. The workers of a host compare their calls in shared
// memory; the stage across hosts announces the whole call in its headers (pairwise_agreement.h),
// so the workers with one local rank compare theirs across hosts, and a host that found two
// calls differ passes that on there, where every other host hears of it. Calls whose sizes put
// them on different sides of kRecursiveDoublingAllreduceMaxBytes (recursive doubling across hosts
// for one, the ring for the other) do not meet: the stall check in options.stall_check finds
// those (stalled_call_check.h; the Communicator gives it the workers with this local rank).
#pragma once

#include <vector>

#include "collective/algorithms/allreduce_options.h"
#include "collective/algorithms/shared_memory_allreduce.h"

namespace cohort::collective {

// Called by every worker with the same seq (and count, type and op, else all fail as above).
// `local` is this host's group, `host_workers` the transport ranks of its workers by their rank
// in it; `across` the transport ranks of the workers with this worker's local rank, one per host
// in host order (this worker among them); options.num_workers is the job's worker count (kAvg
// divides by it). Uses options.chunk_bytes as the ring's pipeline unit across hosts.
Status HierarchicalAllreduce(SharedMemoryGroup& local, const std::vector<int>& host_workers,
                             Transport& transport, const std::vector<int>& across,
                             const AllreduceOptions& options);

}  // namespace cohort::collective
