#include "collective/algorithms/hierarchical_allreduce.h"

#include <string>

#include "collective/algorithms/recursive_doubling.h"
#include "collective/algorithms/ring_allreduce.h"
#include "collective/allreduce_selection.h"
#include "collective/transport/subset_transport.h"

namespace cohort::collective {

Status HierarchicalAllreduce(SharedMemoryGroup& local, const std::vector<int>& host_workers,
                             Transport& transport, const std::vector<int>& across,
                             const AllreduceOptions& options) {
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
  // The headers across hosts carry the whole call, and name workers by their transport rank.
  AgreementSeed seed;
  seed.mine = AllreduceCallOf(options, transport.rank());
  seed.job_ranks = &across;
  ring.agreement = &seed;
  auto reduce_across = [&](void* slice, size_t count, const AgreementCall* differ) {
    ring.data = slice;
    ring.count = count;
    for (int i = 0; i < 2; ++i) {
      seed.differ[i] = differ != nullptr ? differ[i] : AgreementCall{};
      if (differ != nullptr) seed.differ[i].rank = host_workers.at(differ[i].rank);
    }
    const Status s =
        few_steps ? RecursiveDoublingAllreduce(hosts, ring) : RingAllreduce(hosts, ring);
    // Errors name workers by their transport rank (the seed maps the stage's ranks); a
    // disagreement says where it was found already.
    if (s.ok() || s.code() == StatusCode::kInvalidArgument) return s;
    std::string workers;
    for (int w : across) workers += (workers.empty() ? "" : ", ") + std::to_string(w);
    return s.WithContext("across hosts, among workers " + workers);
  };
  return local.Allreduce(options, reduce_across, options.num_workers);
}

}  // namespace cohort::collective
