#include "collective/algorithms/halving_doubling.h"

#include <algorithm>
#include <string>
#include <vector>

#include "collective/algorithms/pairwise_agreement.h"
#include "collective/algorithms/stalled_call_check.h"
#include "collective/kernels/reduce.h"

namespace cohort::collective {

Status HalvingDoublingAllreduce(Transport& transport, const AllreduceOptions& options) {
  const int n = options.num_workers;
  const int rank = transport.rank();
  COHORT_RETURN_IF_ERROR(CheckAllreduceWorker(rank, options, "halving-doubling all-reduce"));
  if (!HalvingDoublingFits(n)) {
    return InvalidArgument(
        "halving-doubling all-reduce needs a power-of-two number of workers, not " +
        std::to_string(n));
  }
  if (n == 1) return Status::Ok();
  const size_t es = DataTypeSize(options.type);
  auto* data = static_cast<char*>(options.data);

  const std::vector<size_t> offset = BlockOffsets(options.count, n);
  auto bytes = [&](int lo, int hi) { return (offset[hi] - offset[lo]) * es; };
  auto at = [&](int block) { return data + offset[block] * es; };
  // One all-gather exchange with `partner`: send blocks [send_lo, send_hi), receive into `into`.
  auto exchange = [&](int partner, uint32_t step, int send_lo, int send_hi, void* into,
                      size_t into_bytes) -> Status {
    const Tag tag = MakeTag(options.seq, step);
    COHORT_ASSIGN_OR_RETURN(Request recv,
                            transport.Irecv(partner, tag, MutableBytes{into, into_bytes}));
    COHORT_ASSIGN_OR_RETURN(
        Request send,
        transport.Isend(partner, tag, ConstBytes{at(send_lo), bytes(send_lo, send_hi)}));
    const std::string with =
        "halving-doubling all-reduce (all-gather): worker " + std::to_string(partner);
    COHORT_RETURN_IF_ERROR(WaitChecked(recv, options.deadline, options.stall_check,
                                       [&] { return "receive from " + with; }));
    return WaitChecked(send, options.deadline, options.stall_check,
                       [&] { return "send to " + with; });
  };

  // Reduce-scatter: at distance d the rank keeps the half of its blocks on its side of bit d and
  // sends the other half to rank ^ d; after log2(n) steps it owns block `rank`, fully reduced.
  // Its steps cross every dimension of the hypercube, so they also carry the calls' agreement
  // (pairwise_agreement.h): an empty call exchanges headers too, and after them every worker
  // knows whether all calls match.
  PairwiseAgreement agreement(transport, options, "halving-doubling all-reduce");
  std::vector<char> partial(bytes(0, n / 2));  // the largest half: the first blocks are the longer
  int lo = 0, hi = n;
  uint32_t step = 1;
  for (int d = n / 2; d >= 1; d /= 2, ++step) {
    const int mid = lo + (hi - lo) / 2;
    const bool lower = (rank & d) == 0;
    const int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const int send_lo = lower ? mid : lo, send_hi = lower ? hi : mid;
    COHORT_ASSIGN_OR_RETURN(
        const bool swapped,
        agreement.Swap(rank ^ d, step, ConstBytes{at(send_lo), bytes(send_lo, send_hi)},
                       MutableBytes{partial.data(), bytes(keep_lo, keep_hi)}));
    if (swapped) {
      ReduceInto(options.type, options.op, at(keep_lo), partial.data(),
                 offset[keep_hi] - offset[keep_lo]);
    }
    lo = keep_lo;
    hi = keep_hi;
  }
  COHORT_RETURN_IF_ERROR(agreement.Verdict());
  if (options.count == 0) return Status::Ok();
  if (options.op == ReduceOp::kAvg)
    ScaleForAverage(options.type, at(lo), offset[hi] - offset[lo], n);

  // All-gather: at distance d the rank and rank ^ d swap their d-block runs, which are siblings.
  for (int d = 1; d < n; d *= 2, ++step) {
    const int peer_lo = (rank & d) != 0 ? lo - d : hi;
    COHORT_RETURN_IF_ERROR(
        exchange(rank ^ d, step, lo, hi, at(peer_lo), bytes(peer_lo, peer_lo + d)));
    lo = std::min(lo, peer_lo);
    hi = std::max(hi, peer_lo + d);
  }
  return Status::Ok();
}

}  // namespace cohort::collective
