#include "collective/algorithms/reduce_scatter.h"

#include <cstring>
#include <vector>

#include "collective/kernels/reduce.h"

namespace cohort::collective {

Status ReduceScatter(Transport& transport, const ReduceScatterOptions& options) {
  COHORT_RETURN_IF_ERROR(CheckCollective(transport, options, "reduce-scatter"));
  COHORT_RETURN_IF_ERROR(CheckReduction("reduce-scatter", options.type, options.op));
  if (options.count > 0 && (options.send == nullptr || options.recv == nullptr)) {
    return InvalidArgument("reduce-scatter: null buffer");
  }
  const int n = options.num_workers;
  const int rank = transport.rank();
  const size_t es = DataTypeSize(options.type);
  const size_t bytes = options.count * es;
  const auto* in = static_cast<const char*>(options.send);
  auto own = [&](int b) { return in + static_cast<size_t>(b) * bytes; };
  if (n == 1) {
    if (bytes > 0 && options.recv != options.send) std::memmove(options.recv, options.send, bytes);
    return Status::Ok();
  }
  const int right = (rank + 1) % n;
  const int left = (rank - 1 + n) % n;
  HeaderExchange headers(transport,
                         MakeCallHeader(FlightOp::kReduceScatter, options, options.type,
                                        options.count, -1, options.op),
                         options);
  COHORT_RETURN_IF_ERROR(headers.Recv(left));
  COHORT_RETURN_IF_ERROR(headers.Send(right));
  const size_t piece = PieceElems(options.chunk_bytes, options.type);
  const size_t pieces = PieceCount(options.count, piece);
  if (static_cast<uint64_t>(n - 1) * pieces > kMaxDataStep) {
    return InvalidArgument("reduce-scatter: too many pieces for one call: raise the chunk size");
  }
  auto tag_step = [&](int s, size_t k) { return static_cast<uint32_t>(s * pieces + k); };
  auto piece_len = [&](size_t k) { return std::min(piece, options.count - k * piece); };
  // Step s receives into buf[s % 2]; its pieces, reduced, are step s + 1's sends, so step s + 2 may
  // receive a piece there only once that send is done.
  std::vector<char> buf[2] = {std::vector<char>(bytes), std::vector<char>(bytes)};
  auto at = [&](int s, size_t k) { return buf[s % 2].data() + k * piece * es; };
  std::vector<PeerRequest> recvs[2], sends[2], first_sends;
  recvs[0].reserve(pieces);
  recvs[1].reserve(pieces);
  for (size_t k = 0; k < pieces; ++k) {
    COHORT_RETURN_IF_ERROR(PostPieces(transport, false, left, options.seq, tag_step(0, k), at(0, k),
                                      piece_len(k), options.type, piece, &recvs[0]));
  }
  COHORT_RETURN_IF_ERROR(headers.Check(left));
  // Step 0 sends this worker's own contribution to block rank - 1.
  const int first_block = (rank - 1 + n) % n;
  COHORT_RETURN_IF_ERROR(PostPieces(transport, true, right, options.seq, tag_step(0, 0),
                                    const_cast<char*>(own(first_block)), options.count,
                                    options.type, piece, &first_sends));
  for (int s = 0; s < n - 1; ++s) {
    const int block = (rank - s - 2 + 2 * n) % n;
    const bool last = s == n - 2;
    std::vector<PeerRequest>& next_recvs = recvs[(s + 1) % 2];
    std::vector<PeerRequest>& my_sends = sends[s % 2];
    std::vector<PeerRequest> posted_recvs;
    if (!last) posted_recvs.reserve(pieces);
    std::vector<PeerRequest> posted_sends;
    if (!last) posted_sends.reserve(pieces);
    for (size_t k = 0; k < pieces; ++k) {
      COHORT_RETURN_IF_ERROR(WaitFor(recvs[s % 2][k], options, "reduce-scatter"));
      ReduceInto(options.type, options.op, at(s, k), own(block) + k * piece * es, piece_len(k));
      if (last) continue;
      COHORT_RETURN_IF_ERROR(PostPieces(transport, true, right, options.seq, tag_step(s + 1, k),
                                        at(s, k), piece_len(k), options.type, piece,
                                        &posted_sends));
      // Step s + 1 receives into the other buffer, whose piece k step s sent (from step s - 1's
      // data).
      if (s >= 1) COHORT_RETURN_IF_ERROR(WaitFor(sends[(s + 1) % 2][k], options, "reduce-scatter"));
      COHORT_RETURN_IF_ERROR(PostPieces(transport, false, left, options.seq, tag_step(s + 1, k),
                                        at(s + 1, k), piece_len(k), options.type, piece,
                                        &posted_recvs));
    }
    // Step s - 1's requests there are done (waited above); a finished Request may be dropped.
    next_recvs = std::move(posted_recvs);
    my_sends = std::move(posted_sends);
  }
  const int final_buf = (n - 2) % 2;
  if (bytes > 0) std::memcpy(options.recv, buf[final_buf].data(), bytes);
  if (options.op == ReduceOp::kAvg) ScaleForAverage(options.type, options.recv, options.count, n);
  // Waiting again for a finished request returns its status at once.
  for (auto* v : {&first_sends, &sends[0], &sends[1]}) {
    COHORT_RETURN_IF_ERROR(WaitAll(v, options, "reduce-scatter"));
  }
  return headers.Finish();
}

}  // namespace cohort::collective
