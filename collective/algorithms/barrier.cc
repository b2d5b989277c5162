#include "collective/algorithms/barrier.h"

namespace cohort::collective {

Status Barrier(Transport& transport, const CollectiveOptions& options) {
  COHORT_RETURN_IF_ERROR(CheckCollective(transport, options, "barrier"));
  const int n = options.num_workers;
  const int rank = transport.rank();
  HeaderExchange headers(transport, MakeCallHeader(FlightOp::kBarrier, options, DataType::kF32, 0),
                         options);
  // Each round's peers differ from every other round's (2^k < n), so one header tag serves all.
  for (int dist = 1; dist < n; dist <<= 1) {
    const int from = (rank - dist + n) % n;
    COHORT_RETURN_IF_ERROR(headers.Recv(from));
    COHORT_RETURN_IF_ERROR(headers.Send((rank + dist) % n));
    COHORT_RETURN_IF_ERROR(headers.Check(from));
  }
  return headers.Finish();
}

}  // namespace cohort::collective
