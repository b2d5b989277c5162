#include "collective/algorithms/gather.h"

#include <cstring>
#include <vector>

namespace cohort::collective {

Status Gather(Transport& transport, const GatherOptions& options) {
  COHORT_RETURN_IF_ERROR(CheckCollective(transport, options, "gather", options.root));
  const int n = options.num_workers;
  const int rank = transport.rank();
  const bool root = rank == options.root;
  if (options.count > 0 && (options.send == nullptr || (root && options.recv == nullptr))) {
    return InvalidArgument("gather: null buffer");
  }
  const size_t es = DataTypeSize(options.type);
  const size_t bytes = options.count * es;
  const size_t piece = PieceElems(options.chunk_bytes, options.type);
  HeaderExchange headers(
      transport,
      MakeCallHeader(CollectiveKind::kGather, options, options.type, options.count, options.root),
      options);
  std::vector<PeerRequest> requests;
  if (!root) {
    COHORT_RETURN_IF_ERROR(headers.Send(options.root));
    COHORT_RETURN_IF_ERROR(PostPieces(transport, true, options.root, options.seq, 0,
                                      const_cast<void*>(options.send), options.count, options.type,
                                      piece, &requests));
    COHORT_RETURN_IF_ERROR(WaitAll(&requests, options.deadline, "gather"));
    return headers.Finish();
  }
  auto* out = static_cast<char*>(options.recv);
  if (bytes > 0 && out + rank * bytes != options.send)
    std::memmove(out + rank * bytes, options.send, bytes);
  for (int r = 0; r < n; ++r) {
    if (r == rank) continue;
    COHORT_RETURN_IF_ERROR(headers.Recv(r));
    COHORT_RETURN_IF_ERROR(PostPieces(transport, false, r, options.seq, 0, out + r * bytes,
                                      options.count, options.type, piece, &requests));
  }
  for (int r = 0; r < n; ++r) {
    if (r != rank) COHORT_RETURN_IF_ERROR(headers.Check(r));
  }
  COHORT_RETURN_IF_ERROR(WaitAll(&requests, options.deadline, "gather"));
  return headers.Finish();
}

}  // namespace cohort::collective
