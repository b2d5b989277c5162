// Gather and scatter: one exchange between the root's n blocks and each worker's own block, run
// in one direction or the other.
#include <cstring>
#include <string>
#include <vector>

#include "collective/algorithms/gather.h"
#include "collective/algorithms/scatter.h"

namespace cohort::collective {
namespace {

// Moves block r of the root's buffer `blocks` (elements r * count ..) to or from worker r's
// buffer `own`, straight and in chunk_bytes pieces: towards the root for kGather, from it for
// kScatter. The root copies its own block in place; headers travel the way the data goes.
Status RootExchange(Transport& transport, const CollectiveOptions& options, FlightOp kind,
                    void* own, void* blocks, size_t count, DataType type, int root) {
  const bool to_root = kind == FlightOp::kGather;
  const std::string_view what = FlightOpName(kind);
  COHORT_RETURN_IF_ERROR(CheckCollective(transport, options, what, root));
  const int n = options.num_workers;
  const int rank = transport.rank();
  if (count > 0 && (own == nullptr || (rank == root && blocks == nullptr))) {
    return InvalidArgument(std::string(what) + ": null buffer");
  }
  const size_t bytes = count * DataTypeSize(type);
  const size_t piece = PieceElems(options.chunk_bytes, type);
  HeaderExchange headers(transport, MakeCallHeader(kind, options, type, count, root), options);
  std::vector<PeerRequest> requests;
  if (rank != root) {
    COHORT_RETURN_IF_ERROR(to_root ? headers.Send(root) : headers.Recv(root));
    COHORT_RETURN_IF_ERROR(
        PostPieces(transport, to_root, root, options.seq, 0, own, count, type, piece, &requests));
    if (!to_root) COHORT_RETURN_IF_ERROR(headers.Check(root));
    COHORT_RETURN_IF_ERROR(WaitAll(&requests, options, what));
    return headers.Finish();
  }
  auto* block = static_cast<char*>(blocks);
  if (bytes > 0 && block + rank * bytes != own) {
    if (to_root) {
      std::memmove(block + rank * bytes, own, bytes);
    } else {
      std::memmove(own, block + rank * bytes, bytes);
    }
  }
  // The gathering root receives from every worker in rank order; the scattering root sends to
  // rank+1, rank+2, ... in turn.
  for (int k = 0; k < n; ++k) {
    const int r = to_root ? k : (rank + k) % n;
    if (r == rank) continue;
    COHORT_RETURN_IF_ERROR(to_root ? headers.Recv(r) : headers.Send(r));
    COHORT_RETURN_IF_ERROR(PostPieces(transport, !to_root, r, options.seq, 0, block + r * bytes,
                                      count, type, piece, &requests));
  }
  if (to_root) {
    for (int r = 0; r < n; ++r) {
      if (r != rank) COHORT_RETURN_IF_ERROR(headers.Check(r));
    }
  }
  COHORT_RETURN_IF_ERROR(WaitAll(&requests, options, what));
  return headers.Finish();
}

}  // namespace

Status Gather(Transport& transport, const GatherOptions& options) {
  return RootExchange(transport, options, FlightOp::kGather, const_cast<void*>(options.send),
                      options.recv, options.count, options.type, options.root);
}

Status Scatter(Transport& transport, const ScatterOptions& options) {
  return RootExchange(transport, options, FlightOp::kScatter, options.recv,
                      const_cast<void*>(options.send), options.count, options.type, options.root);
}

}  // namespace cohort::collective
