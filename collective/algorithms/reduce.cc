#include "collective/algorithms/reduce.h"

#include <cstring>
#include <vector>

#include "collective/kernels/reduce.h"

namespace cohort::collective {
namespace {

constexpr const char* kWhat = "reduce";

// Binomial tree over virtual ranks (the root is 0): a worker receives the partial results of its
// children vr + 1, vr + 2, vr + 4, ... (below its lowest set bit) in that order, adds each to its
// own, and sends the total to its parent vr - lowbit(vr).
Status TreeReduce(Transport& transport, const ReduceOptions& options, HeaderExchange& headers) {
  const int n = options.num_workers;
  const int vr = (transport.rank() - options.root + n) % n;
  auto real = [&](int v) { return (v + options.root) % n; };
  const int low = vr == 0 ? n : (vr & -vr);
  std::vector<int> children;
  for (int mask = 1; mask < low && vr + mask < n; mask <<= 1) children.push_back(vr + mask);
  const size_t es = DataTypeSize(options.type);
  const size_t bytes = options.count * es;
  std::vector<char> own;  // the running result on a worker that is not the root
  char* acc = static_cast<char*>(options.recv);
  if (vr != 0) {
    own.resize(bytes);
    acc = own.data();
  }
  if (bytes > 0 && acc != options.send) std::memmove(acc, options.send, bytes);
  for (int c : children) COHORT_RETURN_IF_ERROR(headers.Recv(real(c)));
  if (vr != 0) COHORT_RETURN_IF_ERROR(headers.Send(real(vr - low)));
  std::vector<std::vector<char>> from(children.size(), std::vector<char>(bytes));
  std::vector<PeerRequest> recvs;
  for (size_t i = 0; i < children.size(); ++i) {
    COHORT_RETURN_IF_ERROR(PostPieces(transport, false, real(children[i]), options.seq, 0,
                                      from[i].data(), options.count, options.type,
                                      options.count + 1, &recvs));
  }
  for (size_t i = 0; i < children.size(); ++i) {
    COHORT_RETURN_IF_ERROR(headers.Check(real(children[i])));
    if (options.count == 0) continue;
    COHORT_RETURN_IF_ERROR(WaitFor(recvs[i], options, kWhat));
    ReduceInto(options.type, options.op, acc, from[i].data(), options.count);
  }
  if (vr == 0) return Status::Ok();
  std::vector<PeerRequest> sends;
  COHORT_RETURN_IF_ERROR(PostPieces(transport, true, real(vr - low), options.seq, 0, acc,
                                    options.count, options.type, options.count + 1, &sends));
  return WaitAll(&sends, options, kWhat);
}

// The chain root+1 -> root+2 -> ... -> root, piece by piece.
Status ChainReduce(Transport& transport, const ReduceOptions& options, HeaderExchange& headers) {
  const int n = options.num_workers;
  const int rank = transport.rank();
  const int pos = (rank - options.root - 1 + 2 * n) % n;  // 0 first ... n-1 the root
  const int prev = pos > 0 ? (rank - 1 + n) % n : -1;
  const int next = pos < n - 1 ? (rank + 1) % n : -1;
  if (prev >= 0) COHORT_RETURN_IF_ERROR(headers.Recv(prev));
  if (next >= 0) COHORT_RETURN_IF_ERROR(headers.Send(next));
  const size_t es = DataTypeSize(options.type);
  const size_t piece = PieceElems(options.chunk_bytes, options.type);
  const size_t pieces = PieceCount(options.count, piece);
  auto piece_len = [&](size_t k) { return std::min(piece, options.count - k * piece); };
  const auto* in = static_cast<const char*>(options.send);
  auto* out = static_cast<char*>(options.recv);
  if (next < 0 && options.count > 0 && out != in) std::memmove(out, in, options.count * es);
  if (prev < 0) {
    // The first worker sends its own contribution as it is.
    std::vector<PeerRequest> sends;
    COHORT_RETURN_IF_ERROR(PostPieces(transport, true, next, options.seq, 0, const_cast<char*>(in),
                                      options.count, options.type, piece, &sends));
    return WaitAll(&sends, options, kWhat);
  }
  // Pieces arrive in a ring of slots; a slot is free again once its piece went on (or, on the
  // root, was added to the result).
  constexpr size_t kSlots = 8;
  const size_t slots = std::min(kSlots, pieces);
  std::vector<char> buf(slots * std::min(piece, options.count) * es);
  auto slot = [&](size_t k) { return buf.data() + (k % slots) * piece * es; };
  std::vector<PeerRequest> recvs(pieces), sends(pieces);
  auto post_recv = [&](size_t k) -> Status {
    std::vector<PeerRequest> one;
    COHORT_RETURN_IF_ERROR(PostPieces(transport, false, prev, options.seq, static_cast<uint32_t>(k),
                                      slot(k), piece_len(k), options.type, piece, &one));
    recvs[k] = std::move(one[0]);
    return Status::Ok();
  };
  for (size_t k = 0; k < slots; ++k) COHORT_RETURN_IF_ERROR(post_recv(k));
  COHORT_RETURN_IF_ERROR(headers.Check(prev));
  for (size_t k = 0; k < pieces; ++k) {
    COHORT_RETURN_IF_ERROR(WaitFor(recvs[k], options, kWhat));
    if (next < 0) {
      // The root: result += partial (the operands commute bit for bit).
      ReduceInto(options.type, options.op, out + k * piece * es, slot(k), piece_len(k));
      if (k + slots < pieces) COHORT_RETURN_IF_ERROR(post_recv(k + slots));
      continue;
    }
    ReduceInto(options.type, options.op, slot(k), in + k * piece * es, piece_len(k));
    std::vector<PeerRequest> one;
    COHORT_RETURN_IF_ERROR(PostPieces(transport, true, next, options.seq, static_cast<uint32_t>(k),
                                      slot(k), piece_len(k), options.type, piece, &one));
    sends[k] = std::move(one[0]);
    // The slot of piece k - 1 takes piece k - 1 + slots once its send is done.
    if (k >= 1 && k - 1 + slots < pieces) {
      COHORT_RETURN_IF_ERROR(WaitFor(sends[k - 1], options, kWhat));
      COHORT_RETURN_IF_ERROR(post_recv(k - 1 + slots));
    }
  }
  if (next >= 0) {
    for (auto& s : sends) COHORT_RETURN_IF_ERROR(WaitFor(s, options, kWhat));
  }
  return Status::Ok();
}

}  // namespace

Status Reduce(Transport& transport, const ReduceOptions& options) {
  COHORT_RETURN_IF_ERROR(CheckCollective(transport, options, kWhat, options.root));
  COHORT_RETURN_IF_ERROR(CheckReduction("reduce", options.type, options.op));
  const bool root = transport.rank() == options.root;
  if (options.count > 0 && (options.send == nullptr || (root && options.recv == nullptr))) {
    return InvalidArgument("reduce: null buffer");
  }
  const int n = options.num_workers;
  const size_t bytes = options.count * DataTypeSize(options.type);
  if (n == 1) {
    if (bytes > 0 && options.recv != options.send) std::memmove(options.recv, options.send, bytes);
    return Status::Ok();
  }
  HeaderExchange headers(transport,
                         MakeCallHeader(FlightOp::kReduce, options, options.type, options.count,
                                        options.root, options.op),
                         options);
  COHORT_RETURN_IF_ERROR(bytes <= options.chunk_bytes ? TreeReduce(transport, options, headers)
                                                      : ChainReduce(transport, options, headers));
  if (root && options.op == ReduceOp::kAvg)
    ScaleForAverage(options.type, options.recv, options.count, n);
  return headers.Finish();
}

}  // namespace cohort::collective
