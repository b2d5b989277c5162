#include "collective/algorithms/ring_allreduce.h"

#include <algorithm>
#include <string>
#include <vector>

#include "collective/kernels/reduce.h"

namespace cohort::collective {

Status RingAllreduce(Transport& transport, const AllreduceOptions& options) {
  const int n = options.num_workers;
  const int rank = transport.rank();
  if (n <= 0 || rank >= n) {
    return InvalidArgument("ring all-reduce: rank " + std::to_string(rank) + " is not a worker of " +
                           std::to_string(n));
  }
  if (options.count == 0 || n == 1) return Status::Ok();
  const size_t es = DataTypeSize(options.type);
  auto* data = static_cast<char*>(options.data);

  // Segment i holds count/n elements, the first count%n segments one more.
  std::vector<size_t> seg_offset(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    seg_offset[i + 1] = seg_offset[i] + options.count / n + (static_cast<size_t>(i) < options.count % n ? 1 : 0);
  }
  auto seg_elems = [&](int i) { return seg_offset[i + 1] - seg_offset[i]; };
  const size_t max_seg = seg_elems(0);
  const size_t piece_elems = std::max<size_t>(1, options.chunk_bytes / es);
  const size_t pieces_per_step = (max_seg + piece_elems - 1) / piece_elems;
  const int right = (rank + 1) % n;
  const int left = (rank - 1 + n) % n;
  std::vector<char> tmp(max_seg * es);

  struct Piece {
    Request recv;
    Request send;
    size_t offset;  // elements within the segment
    size_t elems;
  };
  std::vector<Piece> pieces;

  // One ring step: send segment `send_idx` to the right, receive segment `recv_idx` from the left
  // (into tmp and reduce, or straight into place for the all-gather).
  auto step = [&](uint32_t step_base, int send_idx, int recv_idx, bool reduce) -> Status {
    pieces.clear();
    const size_t recv_n = seg_elems(recv_idx);
    const size_t send_n = seg_elems(send_idx);
    const size_t np = std::max((recv_n + piece_elems - 1) / piece_elems,
                               (send_n + piece_elems - 1) / piece_elems);
    pieces.resize(np);
    for (size_t k = 0; k < np; ++k) {
      const Tag tag = MakeTag(options.seq, step_base + static_cast<uint32_t>(k));
      Piece& p = pieces[k];
      p.offset = k * piece_elems;
      p.elems = p.offset < recv_n ? std::min(piece_elems, recv_n - p.offset) : 0;
      if (p.elems > 0) {
        char* dst = reduce ? tmp.data() + p.offset * es
                           : data + (seg_offset[recv_idx] + p.offset) * es;
        COHORT_ASSIGN_OR_RETURN(p.recv, transport.Irecv(left, tag, MutableBytes{dst, p.elems * es}));
      }
      const size_t s_off = k * piece_elems;
      if (s_off < send_n) {
        const size_t s_elems = std::min(piece_elems, send_n - s_off);
        COHORT_ASSIGN_OR_RETURN(
            p.send, transport.Isend(right, tag,
                                    ConstBytes{data + (seg_offset[send_idx] + s_off) * es, s_elems * es}));
      }
    }
    for (auto& p : pieces) {
      if (p.recv.valid()) {
        COHORT_RETURN_IF_ERROR(p.recv.Wait(options.deadline).WithContext(
            "ring all-reduce: receive from rank " + std::to_string(left)));
        if (reduce) {
          ReduceInto(options.type, options.op, data + (seg_offset[recv_idx] + p.offset) * es,
                     tmp.data() + p.offset * es, p.elems);
        }
      }
    }
    for (auto& p : pieces) {
      if (p.send.valid()) {
        COHORT_RETURN_IF_ERROR(p.send.Wait(options.deadline).WithContext(
            "ring all-reduce: send to rank " + std::to_string(right)));
      }
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
