#include "collective/algorithms/broadcast.h"

#include <vector>

namespace cohort::collective {

Status Broadcast(Transport& transport, const BroadcastOptions& options) {
  COHORT_RETURN_IF_ERROR(CheckCollective(transport, options, "broadcast", options.root));
  if (options.count > 0 && options.data == nullptr)
    return InvalidArgument("broadcast: null buffer");
  const int n = options.num_workers;
  if (n == 1) return Status::Ok();
  // Virtual ranks: the root is 0.
  const int vr = (transport.rank() - options.root + n) % n;
  auto real = [&](int v) { return (v + options.root) % n; };
  int parent = -1;
  std::vector<int> children;
  if (options.count * DataTypeSize(options.type) <= options.chunk_bytes) {
    // Binomial tree: the parent clears the lowest set bit; children add each lower bit, farthest
    // first.
    int low = n;  // the root may add every bit
    if (vr > 0) {
      low = vr & -vr;
      parent = vr - low;
    }
    for (int mask = 1; mask < low; mask <<= 1) {
      if (vr + mask < n) children.insert(children.begin(), vr + mask);
    }
  } else {
    if (vr > 0) parent = vr - 1;
    if (vr + 1 < n) children.push_back(vr + 1);
  }

  HeaderExchange headers(
      transport,
      MakeCallHeader(FlightOp::kBroadcast, options, options.type, options.count, options.root),
      options);
  if (parent >= 0) COHORT_RETURN_IF_ERROR(headers.Recv(real(parent)));
  for (int c : children) COHORT_RETURN_IF_ERROR(headers.Send(real(c)));
  const size_t piece = PieceElems(options.chunk_bytes, options.type);
  const size_t pieces = PieceCount(options.count, piece);
  const size_t es = DataTypeSize(options.type);
  std::vector<PeerRequest> recvs;
  if (parent >= 0) {
    COHORT_RETURN_IF_ERROR(PostPieces(transport, false, real(parent), options.seq, 0, options.data,
                                      options.count, options.type, piece, &recvs));
    COHORT_RETURN_IF_ERROR(headers.Check(real(parent)));
  }
  std::vector<PeerRequest> sends;
  auto* data = static_cast<char*>(options.data);
  for (size_t k = 0; k < pieces; ++k) {
    if (parent >= 0) COHORT_RETURN_IF_ERROR(WaitFor(recvs[k], options, "broadcast"));
    const size_t elems = std::min(piece, options.count - k * piece);
    for (int c : children) {
      COHORT_RETURN_IF_ERROR(PostPieces(transport, true, real(c), options.seq,
                                        static_cast<uint32_t>(k), data + k * piece * es, elems,
                                        options.type, piece, &sends));
    }
  }
  COHORT_RETURN_IF_ERROR(WaitAll(&sends, options, "broadcast"));
  return headers.Finish();
}

}  // namespace cohort::collective
