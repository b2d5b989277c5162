#include "collective/algorithms/hierarchical_allreduce.h"

#include "collective/algorithms/ring_allreduce.h"
#include "collective/transport/subset_transport.h"

namespace cohort::collective {

Status HierarchicalAllreduce(SharedMemoryGroup& local, Transport& transport,
                             const std::vector<int>& across, const AllreduceOptions& options) {
  SubsetTransport hosts(transport, across);
  if (hosts.rank() < 0)
    return InvalidArgument(
        "hierarchical all-reduce: this worker is not among its peers across hosts");
  // Across hosts the slices are summed (kAvg divides once, by every worker, afterwards).
  AllreduceOptions ring = options;
  ring.op = options.op == ReduceOp::kAvg ? ReduceOp::kSum : options.op;
  ring.num_workers = hosts.size();
  ring.num_reducers = 0;
  auto reduce_across = [&](void* slice, size_t count) {
    ring.data = slice;
    ring.count = count;
    return RingAllreduce(hosts, ring);
  };
  return local.Allreduce(options, reduce_across, options.num_workers);
}

}  // namespace cohort::collective
