#include "collective/algorithms/recursive_doubling.h"

#include <cstring>
#include <vector>

#include "collective/algorithms/pairwise_agreement.h"
#include "collective/kernels/reduce.h"

namespace cohort::collective {

Status RecursiveDoublingAllreduce(Transport& transport, const AllreduceOptions& options) {
  const int n = options.num_workers;
  const int rank = transport.rank();
  COHORT_RETURN_IF_ERROR(CheckAllreduceWorker(rank, options, "recursive-doubling all-reduce"));
  if (n == 1) return Status::Ok();
  // An empty call still exchanges its headers: a worker whose count is 0 where another's is not
  // must fail too.
  const size_t bytes = options.count * DataTypeSize(options.type);
  auto* data = static_cast<char*>(options.data);
  std::vector<char> theirs(bytes);
  PairwiseAgreement agreement(transport, options, "recursive-doubling all-reduce");

  int p = 1, exchanges = 0;
  while (p * 2 <= n) {
    p *= 2;
    ++exchanges;
  }
  const int extra = n - p;  // workers 0, 2, ..., 2 * extra - 2 sit the exchanges out
  // Steps: 1 the fold, 2 .. exchanges + 1 the exchanges, exchanges + 2 the result's way back.
  const uint32_t result_step = static_cast<uint32_t>(exchanges) + 2;
  // data = theirs op data where the partner ranks lower, else data op theirs: both partners of a
  // step evaluate the same expression.
  auto combine = [&](int partner) {
    if (partner < rank) {
      ReduceInto(options.type, options.op, theirs.data(), data, options.count);
      std::memcpy(data, theirs.data(), bytes);
    } else {
      ReduceInto(options.type, options.op, data, theirs.data(), options.count);
    }
  };

  if (rank < 2 * extra) {
    if (rank % 2 == 0) {
      COHORT_RETURN_IF_ERROR(agreement.Send(rank + 1, 1, ConstBytes{data, bytes}));
      COHORT_RETURN_IF_ERROR(agreement.Finish());  // before the result lands in the same bytes
      COHORT_RETURN_IF_ERROR(
          agreement.Receive(rank + 1, result_step, MutableBytes{data, bytes}).status());
      return agreement.Verdict();
    }
    COHORT_ASSIGN_OR_RETURN(const bool folded,
                            agreement.Receive(rank - 1, 1, MutableBytes{theirs.data(), bytes}));
    if (folded) combine(rank - 1);
  }
  // Among the p workers left, by their place v among them.
  const int v = rank < 2 * extra ? rank / 2 : rank - extra;
  auto worker_at = [extra](int place) { return place < extra ? 2 * place + 1 : place + extra; };
  uint32_t step = 2;
  for (int distance = 1; distance < p; distance *= 2, ++step) {
    const int partner = worker_at(v ^ distance);
    COHORT_ASSIGN_OR_RETURN(
        const bool swapped,
        agreement.Swap(partner, step, ConstBytes{data, bytes}, MutableBytes{theirs.data(), bytes}));
    if (swapped) combine(partner);
  }
  if (options.op == ReduceOp::kAvg && !agreement.disagreement_known())
    ScaleForAverage(options.type, data, options.count, n);
  if (rank < 2 * extra)
    COHORT_RETURN_IF_ERROR(agreement.Send(rank - 1, result_step, ConstBytes{data, bytes}));
  COHORT_RETURN_IF_ERROR(agreement.Finish());
  return agreement.Verdict();
}

}  // namespace cohort::collective
