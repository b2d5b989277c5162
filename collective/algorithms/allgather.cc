#include "collective/algorithms/allgather.h"

#include <cstring>
#include <vector>

namespace cohort::collective {
namespace {

Status RingAllgather(Transport& transport, const AllgatherOptions& options,
                     HeaderExchange& headers) {
  const int n = options.num_workers;
  const int rank = transport.rank();
  const int right = (rank + 1) % n;
  const int left = (rank - 1 + n) % n;
  COHORT_RETURN_IF_ERROR(headers.Recv(left));
  COHORT_RETURN_IF_ERROR(headers.Send(right));
  const size_t es = DataTypeSize(options.type);
  const size_t piece = PieceElems(options.chunk_bytes, options.type);
  const size_t pieces = PieceCount(options.count, piece);
  auto* out = static_cast<char*>(options.recv);
  auto block = [&](int b) { return out + static_cast<size_t>(b) * options.count * es; };
  const auto step_base = [&](int s) { return static_cast<uint32_t>(s * pieces); };
  if (static_cast<uint64_t>(n - 1) * pieces > kMaxDataStep) {
    return InvalidArgument("allgather: too many pieces for one call: raise the chunk size");
  }

  // Step s receives block (rank - s - 1); step s + 1 forwards it piece by piece as it arrives.
  std::vector<PeerRequest> prev_recvs, recvs, sends;
  for (int s = 0; s < n - 1; ++s) {
    const int send_block = (rank - s + n) % n;
    const int recv_block = (rank - s - 1 + 2 * n) % n;
    recvs.clear();
    COHORT_RETURN_IF_ERROR(PostPieces(transport, false, left, options.seq, step_base(s),
                                      block(recv_block), options.count, options.type, piece,
                                      &recvs));
    if (s == 0) COHORT_RETURN_IF_ERROR(headers.Check(left));
    for (size_t k = 0; k < pieces; ++k) {
      if (s > 0) COHORT_RETURN_IF_ERROR(WaitFor(prev_recvs[k], options, "allgather"));
      const size_t elems = std::min(piece, options.count - k * piece);
      COHORT_RETURN_IF_ERROR(
          PostPieces(transport, true, right, options.seq, step_base(s) + static_cast<uint32_t>(k),
                     block(send_block) + k * piece * es, elems, options.type, piece, &sends));
    }
    std::swap(prev_recvs, recvs);
  }
  COHORT_RETURN_IF_ERROR(WaitAll(&prev_recvs, options, "allgather"));
  return WaitAll(&sends, options, "allgather");
}

Status RecursiveDoublingAllgather(Transport& transport, const AllgatherOptions& options,
                                  HeaderExchange& headers) {
  const int n = options.num_workers;
  const int rank = transport.rank();
  for (int mask = 1; mask < n; mask <<= 1) {
    COHORT_RETURN_IF_ERROR(headers.Recv(rank ^ mask));
    COHORT_RETURN_IF_ERROR(headers.Send(rank ^ mask));
  }
  const size_t es = DataTypeSize(options.type);
  const size_t piece = PieceElems(options.chunk_bytes, options.type);
  auto* out = static_cast<char*>(options.recv);
  uint32_t step = 0;
  // Before exchange k a worker holds the 2^k blocks of its aligned group; it swaps them with the
  // partner's group.
  for (int mask = 1; mask < n; mask <<= 1) {
    const int partner = rank ^ mask;
    const size_t mine = static_cast<size_t>(rank & ~(mask - 1)) * options.count;
    const size_t theirs = static_cast<size_t>(partner & ~(mask - 1)) * options.count;
    const size_t elems = static_cast<size_t>(mask) * options.count;
    std::vector<PeerRequest> recvs, sends;
    COHORT_RETURN_IF_ERROR(PostPieces(transport, false, partner, options.seq, step,
                                      out + theirs * es, elems, options.type, piece, &recvs));
    COHORT_RETURN_IF_ERROR(headers.Check(partner));
    COHORT_RETURN_IF_ERROR(PostPieces(transport, true, partner, options.seq, step, out + mine * es,
                                      elems, options.type, piece, &sends));
    step += static_cast<uint32_t>(PieceCount(elems, piece));
    COHORT_RETURN_IF_ERROR(WaitAll(&recvs, options, "allgather"));
    COHORT_RETURN_IF_ERROR(WaitAll(&sends, options, "allgather"));
  }
  return Status::Ok();
}

}  // namespace

AllgatherAlgorithm ChooseAllgatherAlgorithm(const AllgatherOptions& options) {
  if (options.algorithm != AllgatherAlgorithm::kAuto) return options.algorithm;
  const int n = options.num_workers;
  const bool power_of_two = n > 0 && (n & (n - 1)) == 0;
  const size_t bytes = static_cast<size_t>(n) * options.count * DataTypeSize(options.type);
  return power_of_two && bytes <= kRecursiveDoublingMaxBytes
             ? AllgatherAlgorithm::kRecursiveDoubling
             : AllgatherAlgorithm::kRing;
}

Status Allgather(Transport& transport, const AllgatherOptions& options) {
  COHORT_RETURN_IF_ERROR(CheckCollective(transport, options, "allgather"));
  if (options.count > 0 && (options.send == nullptr || options.recv == nullptr)) {
    return InvalidArgument("allgather: null buffer");
  }
  const int n = options.num_workers;
  const AllgatherAlgorithm algorithm = ChooseAllgatherAlgorithm(options);
  if (algorithm == AllgatherAlgorithm::kRecursiveDoubling && (n & (n - 1)) != 0) {
    return InvalidArgument(
        "allgather: recursive doubling needs a power-of-two number of workers, not " +
        std::to_string(n));
  }
  const size_t bytes = options.count * DataTypeSize(options.type);
  char* own = static_cast<char*>(options.recv) + static_cast<size_t>(transport.rank()) * bytes;
  if (bytes > 0 && options.send != own) std::memmove(own, options.send, bytes);
  if (n == 1) return Status::Ok();
  HeaderExchange headers(transport,
                         MakeCallHeader(FlightOp::kAllgather, options, options.type, options.count),
                         options);
  COHORT_RETURN_IF_ERROR(algorithm == AllgatherAlgorithm::kRing
                             ? RingAllgather(transport, options, headers)
                             : RecursiveDoublingAllgather(transport, options, headers));
  return headers.Finish();
}

}  // namespace cohort::collective
