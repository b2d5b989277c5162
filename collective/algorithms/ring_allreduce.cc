#include "collective/algorithms/ring_allreduce.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "collective/algorithms/pairwise_agreement.h"
#include "collective/algorithms/stalled_call_check.h"
#include "collective/kernels/reduce.h"

namespace cohort::collective {

Status RingAllreduce(Transport& transport, const AllreduceOptions& options) {
  const int n = options.num_workers;
  const int rank = transport.rank();
  COHORT_RETURN_IF_ERROR(CheckAllreduceWorker(rank, options, "ring all-reduce"));
  // An empty call still exchanges headers: a worker with data must not wait for one without.
  if (n == 1) return Status::Ok();
  const size_t es = DataTypeSize(options.type);
  auto* data = static_cast<char*>(options.data);

  // Segment i holds count/n elements, the first count%n segments one more.
  const std::vector<size_t> seg_offset = BlockOffsets(options.count, n);
  auto seg_elems = [&](int i) { return seg_offset[i + 1] - seg_offset[i]; };
  const size_t max_seg = seg_elems(0);
  // Step s's header and pieces use steps from 1 + s * step_stride: the same on every worker
  // whatever its call, so that workers whose calls differ still find each other's headers. A
  // segment goes in at most step_stride pieces (larger ones than chunk_bytes only for segments of
  // billions of pieces), as whole elements, their size in a 32-bit header field.
  const auto step_stride =
      std::max<uint32_t>(1, (kMaxDataStep - 1) / static_cast<uint32_t>(2 * (n - 1)));
  const size_t piece_elems =
      std::max<size_t>({1, std::min<size_t>(options.chunk_bytes, UINT32_MAX) / es,
                        (max_seg + step_stride - 1) / step_stride});
  const size_t piece_bytes = piece_elems * es;
  const size_t pieces_per_step = (max_seg + piece_elems - 1) / piece_elems;
  const int right = (rank + 1) % n;
  const int left = (rank - 1 + n) % n;
  // Reduce-scatter pieces land in a ring of kSlots piece buffers and are summed into place as
  // soon as they arrive, while the next ones travel: the summand is still in cache when it is
  // added (a whole-segment temporary went cold at large sizes), and the buffer stays small.
  constexpr size_t kSlots = 4;
  const size_t slots = std::min(kSlots, std::max<size_t>(1, pieces_per_step));
  std::vector<char> tmp(slots * std::min(piece_elems, max_seg) * es);
  const size_t slot_elems = std::min(piece_elems, max_seg);

  PairwiseAgreement agreement(transport, options, "ring all-reduce");
  std::vector<Request> recvs;

  // One ring step: send segment `send_idx` to the right, receive segment `recv_idx` from the left
  // (through the slots and reduce, or straight into place for the all-gather). Each segment
  // travels behind the sender's header, its first piece inline when small (pairwise_agreement.h);
  // once this worker knows of a disagreement it moves headers only.
  auto step = [&](uint32_t step_base, int send_idx, int recv_idx, bool reduce) -> Status {
    const size_t recv_n = seg_elems(recv_idx);
    const size_t recv_pieces = (recv_n + piece_elems - 1) / piece_elems;
    auto piece_len = [&](size_t k) { return std::min(piece_elems, recv_n - k * piece_elems); };
    auto piece_dst = [&](size_t k) {
      return reduce ? tmp.data() + (k % slots) * slot_elems * es
                    : data + (seg_offset[recv_idx] + k * piece_elems) * es;
    };
    COHORT_ASSIGN_OR_RETURN(Request header, agreement.ExpectHeader(left, step_base));
    COHORT_RETURN_IF_ERROR(agreement.SendPieces(
        right, step_base, ConstBytes{data + seg_offset[send_idx] * es, seg_elems(send_idx) * es},
        piece_bytes));
    const MutableBytes first_piece{piece_dst(0), recv_pieces == 0 ? 0 : piece_len(0) * es};
    COHORT_ASSIGN_OR_RETURN(
        const bool taken,
        agreement.TakePieces(left, step_base, header, recv_n * es, piece_bytes, first_piece));
    if (!taken) return agreement.Finish();
    const size_t inline_bytes = agreement.InlineBytes(left, recv_n * es, piece_bytes);
    auto post_recv = [&](size_t k) -> Status {
      const size_t skip = k == 0 ? inline_bytes : 0;
      const size_t bytes = piece_len(k) * es - skip;
      if (bytes == 0) {
        recvs[k] = Request::Done();
        return Status::Ok();
      }
      StatusOr<Request> posted =
          transport.Irecv(left, MakeTag(options.seq, step_base + static_cast<uint32_t>(k)),
                          MutableBytes{piece_dst(k) + skip, bytes});
      if (!posted.ok()) {
        return posted.status().WithContext("ring all-reduce: receiving from " +
                                           agreement.PeerName(left));
      }
      recvs[k] = std::move(*posted);
      return Status::Ok();
    };
    recvs.clear();
    recvs.resize(recv_pieces);
    const size_t first_recvs = reduce ? std::min(slots, recv_pieces) : recv_pieces;
    for (size_t k = 0; k < first_recvs; ++k) COHORT_RETURN_IF_ERROR(post_recv(k));
    for (size_t k = 0; k < recv_pieces; ++k) {
      COHORT_RETURN_IF_ERROR(WaitChecked(recvs[k], options.deadline, options.stall_check, [&] {
        return "ring all-reduce: receiving from " + agreement.PeerName(left);
      }));
      if (reduce) {
        ReduceInto(options.type, options.op, data + (seg_offset[recv_idx] + k * piece_elems) * es,
                   piece_dst(k), piece_len(k));
        if (k + slots < recv_pieces) COHORT_RETURN_IF_ERROR(post_recv(k + slots));
      }
    }
    return agreement.Finish();
  };

  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = (rank - s + n) % n;
    const int recv_idx = (rank - s - 1 + 2 * n) % n;
    COHORT_RETURN_IF_ERROR(step(1 + s * step_stride, send_idx, recv_idx, true));
  }
  const int owned = (rank + 1) % n;
  if (options.op == ReduceOp::kAvg && !agreement.disagreement_known()) {
    ScaleForAverage(options.type, data + seg_offset[owned] * es, seg_elems(owned), n);
  }
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = (rank + 1 - s + n) % n;
    const int recv_idx = (rank - s + n) % n;
    COHORT_RETURN_IF_ERROR(step(1 + (n - 1 + s) * step_stride, send_idx, recv_idx, false));
  }
  return agreement.Verdict();
}

}  // namespace cohort::collective
