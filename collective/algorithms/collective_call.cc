#include "collective/algorithms/collective_call.h"

#include <algorithm>
#include <memory>

#include "collective/algorithms/stalled_call_check.h"

namespace cohort::collective {

std::string DescribeCollectiveCall(FlightOp kind, uint64_t count, uint8_t type, uint8_t op,
                                   int root) {
  const bool collective = kind >= FlightOp::kBroadcast && kind <= FlightOp::kSend;
  std::string s(collective ? FlightOpName(kind) : "unknown collective");
  if (kind == FlightOp::kBarrier) return s;
  s += " of " + std::to_string(count) + " ";
  s += IsValid(static_cast<DataType>(type)) ? std::string(DataTypeName(static_cast<DataType>(type)))
                                            : "type " + std::to_string(type);
  if (kind == FlightOp::kReduce || kind == FlightOp::kReduceScatter) {
    s += IsValid(static_cast<ReduceOp>(op))
             ? " (" + std::string(ReduceOpName(static_cast<ReduceOp>(op))) + ")"
             : " (op " + std::to_string(op) + ")";
  }
  if (kind == FlightOp::kBroadcast || kind == FlightOp::kScatter)
    s += " from root " + std::to_string(root);
  if (kind == FlightOp::kReduce || kind == FlightOp::kGather)
    s += " to root " + std::to_string(root);
  return s;
}

namespace {

// "allgather of 12 f32", "broadcast of 4 u8 from root 0": the parts of a header that matter for
// its kind.
std::string Describe(const CallHeader& h) {
  const auto kind = static_cast<FlightOp>(h.kind);
  std::string s = DescribeCollectiveCall(kind, h.count, h.type, h.op, h.root);
  if (kind == FlightOp::kSend) s += " with tag " + std::to_string(h.root);
  return s;
}

}  // namespace

CallHeader MakeCallHeader(FlightOp kind, const CollectiveOptions& options, DataType type,
                          size_t count, int root, ReduceOp op) {
  CallHeader h;
  h.kind = static_cast<uint8_t>(kind);
  h.type = static_cast<uint8_t>(type);
  h.op = static_cast<uint8_t>(op);
  h.seq = options.seq;
  h.root = root;
  h.count = count;
  h.history = options.history.digest;
  return h;
}

std::string WorkerName(int rank) { return "worker " + std::to_string(rank); }

std::string DescribeAnyCall(const AgreementCall& c) {
  if (c.collective == 0) return "all-reduce of " + DescribeAllreduceCall(c);
  return DescribeCollectiveCall(static_cast<FlightOp>(c.collective), c.count, c.type, c.op, c.root);
}

HistoryClauses DescribeHistories(bool same_arguments, const AgreementCall& before) {
  if (!same_arguments) return {};
  return HistoryClauses{
      .theirs = " after other calls than this worker's",
      .mine = before.rank < 0 ? " as its first call" : " after " + DescribeAnyCall(before),
      .also =
          "calls that end on every worker without a message between them, such as broadcasts "
          "each from a root of its own, show at the next call that meets"};
}

Status CheckCollective(const Transport& transport, const CollectiveOptions& options,
                       std::string_view what, int root) {
  const int n = options.num_workers;
  if (n <= 0 || transport.rank() >= n || transport.size() < n) {
    return InvalidArgument(std::string(what) + ": transport rank " +
                           std::to_string(transport.rank()) + " is not one of " +
                           std::to_string(n) + " workers");
  }
  if (root < 0 || root >= n) {
    return InvalidArgument(std::string(what) + ": root " + std::to_string(root) +
                           " is not a worker (there are " + std::to_string(n) + ")");
  }
  return Status::Ok();
}

Status HeaderExchange::Send(int peer) {
  COHORT_ASSIGN_OR_RETURN(Request r, transport_.Isend(peer, MakeTag(options_.seq, kCallHeaderStep),
                                                      ConstBytes{&mine_, sizeof(mine_)}));
  sends_.push_back(Posted{peer, std::move(r), nullptr});
  return Status::Ok();
}

Status HeaderExchange::Recv(int peer) {
  auto got = std::make_unique<CallHeader>();
  COHORT_ASSIGN_OR_RETURN(Request r, transport_.Irecv(peer, MakeTag(options_.seq, kCallHeaderStep),
                                                      MutableBytes{got.get(), sizeof(CallHeader)}));
  recvs_.push_back(Posted{peer, std::move(r), std::move(got)});
  return Status::Ok();
}

Status HeaderExchange::Check(int peer, std::optional<uint64_t> expected_count) {
  const std::string what(FlightOpName(static_cast<FlightOp>(mine_.kind)));
  auto it = std::find_if(recvs_.begin(), recvs_.end(),
                         [peer](const Posted& p) { return p.peer == peer; });
  if (it == recvs_.end())
    return Internal(what + ": no header receive posted for " + WorkerName(peer));
  COHORT_RETURN_IF_ERROR(WaitChecked(it->request, options_.deadline, options_.stall_check,
                                     [&] { return what + ": waiting for " + WorkerName(peer); }));
  const CallHeader& got = *it->got;
  if (got.magic != CallHeader::kMagic)
    return DataLoss(what + ": malformed call header from " + WorkerName(peer));
  CallHeader want = mine_;
  if (expected_count) want.count = *expected_count;
  const bool same_arguments = got.kind == want.kind && got.type == want.type && got.op == want.op &&
                              got.root == want.root && got.count == want.count &&
                              got.seq == want.seq;
  if (!same_arguments || got.history != want.history) {
    const HistoryClauses h = DescribeHistories(same_arguments, options_.history.last);
    return InvalidArgument(what + ": " + WorkerName(peer) + " called " + Describe(got) + h.theirs +
                           ", this worker " + Describe(want) + h.mine +
                           " (every worker must make the same collective calls, in the same " +
                           "order, with matching sizes" + (h.also.empty() ? "" : "; " + h.also) +
                           ")");
  }
  return Status::Ok();
}

Status HeaderExchange::Finish() {
  const std::string what(FlightOpName(static_cast<FlightOp>(mine_.kind)));
  for (auto& p : sends_) {
    COHORT_RETURN_IF_ERROR(WaitChecked(p.request, options_.deadline, options_.stall_check, [&] {
      return what + ": call header to " + WorkerName(p.peer);
    }));
  }
  sends_.clear();
  return Status::Ok();
}

size_t PieceElems(size_t chunk_bytes, DataType type) {
  return std::max<size_t>(1, chunk_bytes / DataTypeSize(type));
}

Status PostPieces(Transport& transport, bool send, int peer, uint32_t seq, uint32_t first_step,
                  void* data, size_t elems, DataType type, size_t piece_elems,
                  std::vector<PeerRequest>* out) {
  const size_t es = DataTypeSize(type);
  const size_t pieces = PieceCount(elems, piece_elems);
  if (first_step + pieces > kMaxDataStep) {
    return InvalidArgument("collective: " + std::to_string(first_step + pieces) + " messages of " +
                           std::to_string(piece_elems * es) +
                           " bytes are too many for one call: raise the chunk size");
  }
  auto* base = static_cast<char*>(data);
  for (size_t k = 0; k < pieces; ++k) {
    const size_t n = std::min(piece_elems, elems - k * piece_elems);
    const Tag tag = MakeTag(seq, first_step + static_cast<uint32_t>(k));
    char* at = base + k * piece_elems * es;
    COHORT_ASSIGN_OR_RETURN(Request r, send ? transport.Isend(peer, tag, ConstBytes{at, n * es})
                                            : transport.Irecv(peer, tag, MutableBytes{at, n * es}));
    out->push_back(PeerRequest{peer, send, std::move(r)});
  }
  return Status::Ok();
}

Status WaitFor(PeerRequest& request, Deadline deadline, std::string_view what,
               StalledCallCheck* check) {
  return WaitChecked(request.request, deadline, check, [&] {
    return std::string(what) + (request.send ? ": sending to " : ": receiving from ") +
           WorkerName(request.peer);
  });
}

Status WaitAll(std::vector<PeerRequest>* requests, Deadline deadline, std::string_view what,
               StalledCallCheck* check) {
  for (auto& r : *requests) COHORT_RETURN_IF_ERROR(WaitFor(r, deadline, what, check));
  requests->clear();
  return Status::Ok();
}

}  // namespace cohort::collective
