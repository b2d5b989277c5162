#include "collective/algorithms/recursive_doubling.h"

#include <cstring>
#include <string>
#include <vector>

#include "collective/kernels/reduce.h"

namespace cohort::collective {

Status RecursiveDoublingAllreduce(Transport& transport, const AllreduceOptions& options) {
  const int n = options.num_workers;
  const int rank = transport.rank();
  COHORT_RETURN_IF_ERROR(CheckAllreduceWorker(rank, options, "recursive-doubling all-reduce"));
  if (options.count == 0 || n == 1) return Status::Ok();
  const size_t bytes = options.count * DataTypeSize(options.type);
  auto* data = static_cast<char*>(options.data);
  std::vector<char> theirs(bytes);

  int p = 1, exchanges = 0;
  while (p * 2 <= n) {
    p *= 2;
    ++exchanges;
  }
  const int extra = n - p;  // workers 0, 2, ..., 2 * extra - 2 sit the exchanges out
  // Steps: 1 the fold, 2 .. exchanges + 1 the exchanges, exchanges + 2 the result's way back.
  const uint32_t result_step = static_cast<uint32_t>(exchanges) + 2;
  auto context = [](const char* what, const char* phase, int peer) {
    return std::string("recursive-doubling all-reduce (") + phase + "): " + what + " worker " +
           std::to_string(peer);
  };
  // Waits for a posted send or receive; either error names the peer.
  auto finish = [&](StatusOr<Request>& posted, const char* what, const char* phase, int peer) {
    const Status s = posted.ok() ? posted->Wait(options.deadline) : posted.status();
    return s.WithContext(context(what, phase, peer));
  };
  auto send = [&](int peer, uint32_t step, const char* phase) {
    StatusOr<Request> sent =
        transport.Isend(peer, MakeTag(options.seq, step), ConstBytes{data, bytes});
    return finish(sent, "send to", phase, peer);
  };
  auto receive = [&](int peer, uint32_t step, void* into, const char* phase) {
    StatusOr<Request> received =
        transport.Irecv(peer, MakeTag(options.seq, step), MutableBytes{into, bytes});
    return finish(received, "receive from", phase, peer);
  };
  // data = theirs op data where the partner ranks lower, else data op theirs: both partners of a
  // step evaluate the same expression.
  auto combine = [&](int partner) {
    if (partner < rank) {
      ReduceInto(options.type, options.op, theirs.data(), data, options.count);
      std::memcpy(data, theirs.data(), bytes);
    } else {
      ReduceInto(options.type, options.op, data, theirs.data(), options.count);
    }
  };

  if (rank < 2 * extra) {
    if (rank % 2 == 0) {
      COHORT_RETURN_IF_ERROR(send(rank + 1, 1, "fold"));
      return receive(rank + 1, result_step, data, "result");
    }
    COHORT_RETURN_IF_ERROR(receive(rank - 1, 1, theirs.data(), "fold"));
    combine(rank - 1);
  }
  // Among the p workers left, by their place v among them.
  const int v = rank < 2 * extra ? rank / 2 : rank - extra;
  auto worker_at = [extra](int place) { return place < extra ? 2 * place + 1 : place + extra; };
  uint32_t step = 2;
  for (int distance = 1; distance < p; distance *= 2, ++step) {
    const int partner = worker_at(v ^ distance);
    const Tag tag = MakeTag(options.seq, step);
    StatusOr<Request> received = transport.Irecv(partner, tag, MutableBytes{theirs.data(), bytes});
    if (!received.ok()) return finish(received, "receive from", "exchange", partner);
    StatusOr<Request> sent = transport.Isend(partner, tag, ConstBytes{data, bytes});
    if (!sent.ok()) return finish(sent, "send to", "exchange", partner);
    COHORT_RETURN_IF_ERROR(finish(received, "receive from", "exchange", partner));
    COHORT_RETURN_IF_ERROR(finish(sent, "send to", "exchange", partner));
    combine(partner);
  }
  if (options.op == ReduceOp::kAvg) ScaleForAverage(options.type, data, options.count, n);
  if (rank < 2 * extra) return send(rank - 1, result_step, "result");
  return Status::Ok();
}

}  // namespace cohort::collective
