#include "collective/algorithms/hierarchical_allreduce.h"

#include <string>

#include "collective/algorithms/recursive_doubling.h"
#include "collective/algorithms/ring_allreduce.h"
#include "collective/allreduce_selection.h"
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
  // A host's link carries all its workers' slices at once, the whole buffer: small buffers go by
  // the fewest steps, as a flat all-reduce of that size would.
  const bool few_steps =
      options.count * DataTypeSize(options.type) <= kRecursiveDoublingAllreduceMaxBytes;
  auto reduce_across = [&](void* slice, size_t count) {
    ring.data = slice;
    ring.count = count;
    const Status s =
        few_steps ? RecursiveDoublingAllreduce(hosts, ring) : RingAllreduce(hosts, ring);
    if (s.ok()) return s;
    // Its "worker i" is the i-th of `across`.
    std::string workers;
    for (int w : across) workers += (workers.empty() ? "" : ", ") + std::to_string(w);
    return s.WithContext("across hosts, among workers " + workers + " (worker i: the i-th)");
  };
  return local.Allreduce(options, reduce_across, options.num_workers);
}

}  // namespace cohort::collective
