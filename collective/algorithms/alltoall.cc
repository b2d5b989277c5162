#include "collective/algorithms/alltoall.h"

#include <cstring>

namespace cohort::collective {
namespace {

// Both variants: blocks at element offsets send_at/recv_at (num_workers + 1 entries each).
Status Exchange(Transport& transport, const AlltoallOptions& options, FlightOp kind,
                const std::vector<size_t>& send_at, const std::vector<size_t>& recv_at) {
  const int n = options.num_workers;
  const int rank = transport.rank();
  const std::string what(FlightOpName(kind));
  const size_t es = DataTypeSize(options.type);
  const size_t send_total = send_at[n] * es;
  if ((send_total > 0 && options.send == nullptr) || (recv_at[n] > 0 && options.recv == nullptr)) {
    return InvalidArgument(what + ": null buffer");
  }
  // A send buffer that overlaps the receive buffer is read from a copy (blocks arriving early
  // would overwrite blocks not yet sent).
  const char* in = static_cast<const char*>(options.send);
  auto* out = static_cast<char*>(options.recv);
  std::vector<char> copy;
  if (send_total > 0 && in < out + recv_at[n] * es && out < in + send_total) {
    copy.assign(in, in + send_total);
    in = copy.data();
  }
  const size_t piece = PieceElems(options.chunk_bytes, options.type);
  auto block = [&](const std::vector<size_t>& at, int r) { return at[r + 1] - at[r]; };
  const size_t own = block(send_at, rank);
  if (own != block(recv_at, rank)) {
    return InvalidArgument(what + ": this worker sends itself " + std::to_string(own) +
                           " elements but expects " + std::to_string(block(recv_at, rank)));
  }
  // The header to peer j carries the count sent to j (Alltoall: the common count).
  std::vector<std::unique_ptr<HeaderExchange>> headers(n);
  for (int r = 0; r < n; ++r) {
    if (r == rank) continue;
    const size_t announced = kind == FlightOp::kAlltoall ? options.count : block(send_at, r);
    headers[r] = std::make_unique<HeaderExchange>(
        transport, MakeCallHeader(kind, options, options.type, announced), options);
  }
  std::vector<PeerRequest> recvs, sends;
  for (int k = 1; k < n; ++k) {
    const int r = (rank - k + n) % n;
    COHORT_RETURN_IF_ERROR(headers[r]->Recv(r));
    COHORT_RETURN_IF_ERROR(PostPieces(transport, false, r, options.seq, 0, out + recv_at[r] * es,
                                      block(recv_at, r), options.type, piece, &recvs));
  }
  for (int k = 1; k < n; ++k) {
    const int r = (rank + k) % n;
    COHORT_RETURN_IF_ERROR(headers[r]->Send(r));
    COHORT_RETURN_IF_ERROR(PostPieces(transport, true, r, options.seq, 0,
                                      const_cast<char*>(in) + send_at[r] * es, block(send_at, r),
                                      options.type, piece, &sends));
  }
  if (own > 0 && in + send_at[rank] * es != out + recv_at[rank] * es) {
    std::memmove(out + recv_at[rank] * es, in + send_at[rank] * es, own * es);
  }
  for (int k = 1; k < n; ++k) {
    const int r = (rank - k + n) % n;
    const std::optional<uint64_t> expected =
        kind == FlightOp::kAlltoall ? std::nullopt : std::optional<uint64_t>(block(recv_at, r));
    COHORT_RETURN_IF_ERROR(headers[r]->Check(r, expected));
  }
  COHORT_RETURN_IF_ERROR(WaitAll(&recvs, options, what));
  COHORT_RETURN_IF_ERROR(WaitAll(&sends, options, what));
  for (auto& h : headers) {
    if (h) COHORT_RETURN_IF_ERROR(h->Finish());
  }
  return Status::Ok();
}

std::vector<size_t> Offsets(const std::vector<size_t>& counts) {
  std::vector<size_t> at(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i) at[i + 1] = at[i] + counts[i];
  return at;
}

}  // namespace

Status Alltoall(Transport& transport, const AlltoallOptions& options) {
  COHORT_RETURN_IF_ERROR(CheckCollective(transport, options, "alltoall"));
  const std::vector<size_t> at = Offsets(std::vector<size_t>(options.num_workers, options.count));
  return Exchange(transport, options, FlightOp::kAlltoall, at, at);
}

Status AlltoallV(Transport& transport, const AlltoallOptions& options) {
  COHORT_RETURN_IF_ERROR(CheckCollective(transport, options, "alltoallv"));
  const size_t n = static_cast<size_t>(options.num_workers);
  if (options.send_counts.size() != n || options.recv_counts.size() != n) {
    return InvalidArgument("alltoallv: " + std::to_string(options.send_counts.size()) +
                           " send counts and " + std::to_string(options.recv_counts.size()) +
                           " receive counts for " + std::to_string(n) + " workers");
  }
  return Exchange(transport, options, FlightOp::kAlltoallV, Offsets(options.send_counts),
                  Offsets(options.recv_counts));
}

}  // namespace cohort::collective
