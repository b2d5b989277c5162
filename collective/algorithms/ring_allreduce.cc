#include "collective/algorithms/ring_allreduce.h"

#include <algorithm>
#include <string>
#include <vector>

#include "collective/kernels/reduce.h"

namespace cohort::collective {

Status RingAllreduce(Transport& transport, const AllreduceOptions& options) {
  const int n = options.num_workers;
  const int rank = transport.rank();
  COHORT_RETURN_IF_ERROR(CheckAllreduceWorker(rank, options, "ring all-reduce"));
  if (options.count == 0 || n == 1) return Status::Ok();
  const size_t es = DataTypeSize(options.type);
  auto* data = static_cast<char*>(options.data);

  // Segment i holds count/n elements, the first count%n segments one more.
  const std::vector<size_t> seg_offset = BlockOffsets(options.count, n);
  auto seg_elems = [&](int i) { return seg_offset[i + 1] - seg_offset[i]; };
  const size_t max_seg = seg_elems(0);
  const size_t piece_elems = std::max<size_t>(1, options.chunk_bytes / es);
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

  std::vector<Request> recvs;
  std::vector<Request> sends;

  // One ring step: send segment `send_idx` to the right, receive segment `recv_idx` from the left
  // (through the slots and reduce, or straight into place for the all-gather).
  auto step = [&](uint32_t step_base, int send_idx, int recv_idx, bool reduce) -> Status {
    const size_t recv_n = seg_elems(recv_idx);
    const size_t send_n = seg_elems(send_idx);
    const size_t recv_pieces = (recv_n + piece_elems - 1) / piece_elems;
    const size_t send_pieces = (send_n + piece_elems - 1) / piece_elems;
    auto piece_tag = [&](size_t k) {
      return MakeTag(options.seq, step_base + static_cast<uint32_t>(k));
    };
    auto piece_len = [&](size_t total, size_t k) {
      return std::min(piece_elems, total - k * piece_elems);
    };
    auto post_recv = [&](size_t k) -> Status {
      char* dst = reduce ? tmp.data() + (k % slots) * slot_elems * es
                         : data + (seg_offset[recv_idx] + k * piece_elems) * es;
      COHORT_ASSIGN_OR_RETURN(
          recvs[k],
          transport.Irecv(left, piece_tag(k), MutableBytes{dst, piece_len(recv_n, k) * es}));
      return Status::Ok();
    };
    recvs.clear();
    recvs.resize(recv_pieces);
    sends.clear();
    sends.resize(send_pieces);
    const size_t first_recvs = reduce ? std::min(slots, recv_pieces) : recv_pieces;
    for (size_t k = 0; k < std::max(first_recvs, send_pieces); ++k) {
      if (k < first_recvs) COHORT_RETURN_IF_ERROR(post_recv(k));
      if (k < send_pieces) {
        COHORT_ASSIGN_OR_RETURN(
            sends[k],
            transport.Isend(right, piece_tag(k),
                            ConstBytes{data + (seg_offset[send_idx] + k * piece_elems) * es,
                                       piece_len(send_n, k) * es}));
      }
    }
    for (size_t k = 0; k < recv_pieces; ++k) {
      COHORT_RETURN_IF_ERROR(
          recvs[k]
              .Wait(options.deadline)
              .WithContext("ring all-reduce: receive from worker " + std::to_string(left)));
      if (reduce) {
        ReduceInto(options.type, options.op, data + (seg_offset[recv_idx] + k * piece_elems) * es,
                   tmp.data() + (k % slots) * slot_elems * es, piece_len(recv_n, k));
        if (k + slots < recv_pieces) COHORT_RETURN_IF_ERROR(post_recv(k + slots));
      }
    }
    for (auto& r : sends) {
      COHORT_RETURN_IF_ERROR(
          r.Wait(options.deadline)
              .WithContext("ring all-reduce: send to worker " + std::to_string(right)));
    }
    return Status::Ok();
  };

  const uint32_t stride = static_cast<uint32_t>(std::max<size_t>(pieces_per_step, 1));
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = (rank - s + n) % n;
    const int recv_idx = (rank - s - 1 + 2 * n) % n;
    COHORT_RETURN_IF_ERROR(step(1 + s * stride, send_idx, recv_idx, true));
  }
  const int owned = (rank + 1) % n;
  if (options.op == ReduceOp::kAvg) {
    ScaleForAverage(options.type, data + seg_offset[owned] * es, seg_elems(owned), n);
  }
  for (int s = 0; s < n - 1; ++s) {
    const int send_idx = (rank + 1 - s + n) % n;
    const int recv_idx = (rank - s + n) % n;
    COHORT_RETURN_IF_ERROR(step(1 + (n - 1 + s) * stride, send_idx, recv_idx, false));
  }
  return Status::Ok();
}

}  // namespace cohort::collective
