#include "collective/algorithms/scatter.h"

#include <cstring>
#include <vector>

namespace cohort::collective {

Status Scatter(Transport& transport, const ScatterOptions& options) {
  COHORT_RETURN_IF_ERROR(CheckCollective(transport, options, "scatter", options.root));
  const int n = options.num_workers;
  const int rank = transport.rank();
  const bool root = rank == options.root;
  if (options.count > 0 && (options.recv == nullptr || (root && options.send == nullptr))) {
    return InvalidArgument("scatter: null buffer");
  }
  const size_t es = DataTypeSize(options.type);
  const size_t bytes = options.count * es;
  const size_t piece = PieceElems(options.chunk_bytes, options.type);
  HeaderExchange headers(
      transport,
      MakeCallHeader(CollectiveKind::kScatter, options, options.type, options.count, options.root),
      options);
  std::vector<PeerRequest> requests;
  if (!root) {
    COHORT_RETURN_IF_ERROR(headers.Recv(options.root));
    COHORT_RETURN_IF_ERROR(PostPieces(transport, false, options.root, options.seq, 0, options.recv,
                                      options.count, options.type, piece, &requests));
    COHORT_RETURN_IF_ERROR(headers.Check(options.root));
    COHORT_RETURN_IF_ERROR(WaitAll(&requests, options.deadline, "scatter"));
    return headers.Finish();
  }
  auto* in = static_cast<char*>(const_cast<void*>(options.send));
  for (int k = 1; k < n; ++k) {
    const int r = (rank + k) % n;
    COHORT_RETURN_IF_ERROR(headers.Send(r));
    COHORT_RETURN_IF_ERROR(PostPieces(transport, true, r, options.seq, 0, in + r * bytes,
                                      options.count, options.type, piece, &requests));
  }
  if (bytes > 0 && in + rank * bytes != options.recv)
    std::memmove(options.recv, in + rank * bytes, bytes);
  COHORT_RETURN_IF_ERROR(WaitAll(&requests, options.deadline, "scatter"));
  return headers.Finish();
}

}  // namespace cohort::collective
