#include "collective/algorithms/pairwise_agreement.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

namespace cohort::collective {
namespace {

// True when `h` can be what a worker sends: a known type and op, data no larger than its call.
bool WellFormed(const AgreementHeader& h) {
  const auto type = static_cast<DataType>(h.sender.type);
  if (h.magic != AgreementHeader::kMagic || !IsValid(type) ||
      !IsValid(static_cast<ReduceOp>(h.sender.op))) {
    return false;
  }
  const size_t size = DataTypeSize(type);
  if (h.data_bytes % size != 0 || h.data_bytes / size > h.sender.count ||
      h.piece_bytes % size != 0) {
    return false;
  }
  return (h.differ[0].rank < 0) == (h.differ[1].rank < 0);
}

// The pieces `h` announces: how many, and piece k's length (the first one's inline part included).
size_t PieceCount(const AgreementHeader& h) {
  if (h.data_bytes == 0) return 0;
  return h.piece_bytes == 0 ? 1 : (h.data_bytes + h.piece_bytes - 1) / h.piece_bytes;
}
size_t PieceLength(const AgreementHeader& h, size_t k) {
  if (h.piece_bytes == 0) return h.data_bytes;
  return std::min<size_t>(h.piece_bytes, h.data_bytes - k * h.piece_bytes);
}

}  // namespace

PairwiseAgreement::PairwiseAgreement(Transport& transport, const AllreduceOptions& options,
                                     std::string what)
    : transport_(transport),
      options_(options),
      what_(std::move(what)),
      mine_(options.agreement != nullptr ? options.agreement->mine
                                         : AllreduceCallOf(options, transport.rank())),
      inbox_(new char[sizeof(AgreementHeader) + kAgreementInlineBytes]) {
  if (options.agreement != nullptr) {
    differ_[0] = options.agreement->differ[0];
    differ_[1] = options.agreement->differ[1];
  }
}

size_t PairwiseAgreement::InlineBytes(int peer, size_t data_bytes, size_t piece_bytes) const {
  const Placement& placement = transport_.placement();
  const int me = transport_.rank();
  const auto hosts = static_cast<int>(placement.hosts.size());
  const bool same_host = placement.shared_memory && me >= 0 && me < hosts && peer >= 0 &&
                         peer < hosts && placement.hosts[me] == placement.hosts[peer];
  return AgreementInlineBytes(data_bytes, piece_bytes,
                              same_host ? kAgreementInlineBytesSameHost : kAgreementInlineBytes);
}

int PairwiseAgreement::HeaderRank(int peer) const {
  const AgreementSeed* seed = options_.agreement;
  if (seed == nullptr || seed->job_ranks == nullptr) return peer;
  return peer >= 0 && static_cast<size_t>(peer) < seed->job_ranks->size() ? (*seed->job_ranks)[peer]
                                                                          : -1;
}

StatusOr<Request> PairwiseAgreement::PostSend(int peer, uint32_t step, ConstBytes data) {
  StatusOr<Request> posted = transport_.Isend(peer, MakeTag(options_.seq, step), data);
  if (posted.ok()) return posted;
  return posted.status().WithContext(what_ + ": sending to " + PeerName(peer));
}

StatusOr<Request> PairwiseAgreement::PostReceive(int peer, uint32_t step, MutableBytes into) {
  StatusOr<Request> posted = transport_.Irecv(peer, MakeTag(options_.seq, step), into);
  if (posted.ok()) return posted;
  return posted.status().WithContext(what_ + ": receiving from " + PeerName(peer));
}

StatusOr<Request> PairwiseAgreement::PostHeaderReceive(int peer, uint32_t step) {
  return PostReceive(peer, kAgreementHeaderStep + step,
                     MutableBytes{inbox_.get(), sizeof(AgreementHeader) + kAgreementInlineBytes});
}

Status PairwiseAgreement::PostSends(int peer, uint32_t step, ConstBytes data, size_t piece_bytes,
                                    std::vector<PeerRequest>* out) {
  AgreementHeader header;
  header.piece_bytes = static_cast<uint32_t>(piece_bytes);
  header.data_bytes = data.size;
  header.sender = mine_;
  header.differ[0] = differ_[0];
  header.differ[1] = differ_[1];
  const size_t inline_bytes = InlineBytes(peer, data.size, piece_bytes);
  auto& box = outboxes_.emplace_back(new char[sizeof(header) + inline_bytes]);
  std::memcpy(box.get(), &header, sizeof(header));
  const auto* bytes = static_cast<const char*>(data.data);
  if (inline_bytes > 0) std::memcpy(box.get() + sizeof(header), bytes, inline_bytes);
  COHORT_ASSIGN_OR_RETURN(Request sent,
                          PostSend(peer, kAgreementHeaderStep + step,
                                   ConstBytes{box.get(), sizeof(header) + inline_bytes}));
  out->push_back(PeerRequest{HeaderRank(peer), true, std::move(sent)});
  for (size_t k = 0, pieces = PieceCount(header); k < pieces; ++k) {
    const size_t skip = k == 0 ? inline_bytes : 0;
    const size_t length = PieceLength(header, k) - skip;
    if (length == 0) continue;
    const size_t offset = k * header.piece_bytes + skip;
    COHORT_ASSIGN_OR_RETURN(
        sent, PostSend(peer, step + static_cast<uint32_t>(k), ConstBytes{bytes + offset, length}));
    out->push_back(PeerRequest{HeaderRank(peer), true, std::move(sent)});
  }
  return Status::Ok();
}

StatusOr<bool> PairwiseAgreement::Swap(int peer, uint32_t step, ConstBytes send,
                                       MutableBytes into) {
  const bool open = !disagreement_known();
  COHORT_ASSIGN_OR_RETURN(Request header_in, PostHeaderReceive(peer, step));
  std::vector<PeerRequest> sent;
  COHORT_RETURN_IF_ERROR(PostSends(peer, step, open ? send : ConstBytes{}, 0, &sent));
  COHORT_ASSIGN_OR_RETURN(const bool taken, TakeHeader(peer, step, header_in, open, into));
  // The peer takes or drains what was sent: every send completes.
  COHORT_RETURN_IF_ERROR(WaitAll(&sent, options_.deadline, what_, options_.stall_check));
  return taken;
}

Status PairwiseAgreement::Send(int peer, uint32_t step, ConstBytes data) {
  return SendPieces(peer, step, data, 0);
}

Status PairwiseAgreement::SendPieces(int peer, uint32_t step, ConstBytes data, size_t piece_bytes) {
  return PostSends(peer, step, disagreement_known() ? ConstBytes{} : data, piece_bytes, &sends_);
}

StatusOr<Request> PairwiseAgreement::ExpectHeader(int peer, uint32_t step) {
  return PostHeaderReceive(peer, step);
}

StatusOr<bool> PairwiseAgreement::TakePieces(int peer, uint32_t step, Request& header,
                                             size_t expected_bytes, size_t piece_bytes,
                                             MutableBytes first_piece) {
  return TakeHead(peer, step, header, !disagreement_known(), expected_bytes, piece_bytes,
                  first_piece);
}

StatusOr<bool> PairwiseAgreement::Receive(int peer, uint32_t step, MutableBytes into) {
  COHORT_ASSIGN_OR_RETURN(Request header_in, PostHeaderReceive(peer, step));
  return TakeHeader(peer, step, header_in, !disagreement_known(), into);
}

Status PairwiseAgreement::Finish() {
  COHORT_RETURN_IF_ERROR(WaitAll(&sends_, options_.deadline, what_, options_.stall_check));
  outboxes_.clear();
  return Status::Ok();
}

StatusOr<bool> PairwiseAgreement::TakeHeader(int peer, uint32_t step, Request& request, bool open,
                                             MutableBytes into) {
  COHORT_ASSIGN_OR_RETURN(const bool taken,
                          TakeHead(peer, step, request, open, into.size, 0, into));
  const size_t inline_bytes = InlineBytes(peer, into.size, 0);
  if (!taken || into.size == inline_bytes) return taken;
  COHORT_ASSIGN_OR_RETURN(Request in,
                          PostReceive(peer, step,
                                      MutableBytes{static_cast<char*>(into.data) + inline_bytes,
                                                   into.size - inline_bytes}));
  PeerRequest data_in{HeaderRank(peer), false, std::move(in)};
  COHORT_RETURN_IF_ERROR(WaitFor(data_in, options_.deadline, what_, options_.stall_check));
  return true;
}

StatusOr<bool> PairwiseAgreement::TakeHead(int peer, uint32_t step, Request& request, bool open,
                                           size_t expected_bytes, size_t piece_bytes,
                                           MutableBytes first_piece) {
  PeerRequest header_in{HeaderRank(peer), false, std::move(request)};
  COHORT_RETURN_IF_ERROR(WaitFor(header_in, options_.deadline, what_, options_.stall_check));
  AgreementHeader got;
  std::memcpy(&got, inbox_.get(), sizeof(got));
  if (!WellFormed(got) || got.sender.rank != HeaderRank(peer) ||
      PieceCount(got) > kMaxDataStep - step)
    return DataLoss(what_ + ": malformed call header from " + PeerName(peer));
  const bool they_knew = got.differ[0].rank >= 0;
  const bool taken = open && !they_knew && SameCall(got.sender, mine_);
  if (!disagreement_known()) {
    if (they_knew) {
      differ_[0] = got.differ[0];
      differ_[1] = got.differ[1];
    } else if (!SameCall(got.sender, mine_)) {
      differ_[0] = got.sender;
      differ_[1] = mine_;
    }
  }
  if (!taken) {
    COHORT_RETURN_IF_ERROR(Drain(peer, step, got));
    return false;
  }
  if (got.data_bytes != expected_bytes || got.piece_bytes != piece_bytes) {
    return DataLoss(what_ + ": " + PeerName(peer) + " sends " + std::to_string(got.data_bytes) +
                    " bytes in pieces of " + std::to_string(got.piece_bytes) +
                    " where this worker expects " + std::to_string(expected_bytes) +
                    " in pieces of " + std::to_string(piece_bytes) + " for the same call");
  }
  const size_t inline_bytes = InlineBytes(peer, got.data_bytes, got.piece_bytes);
  if (inline_bytes > 0)
    std::memcpy(first_piece.data, inbox_.get() + sizeof(AgreementHeader), inline_bytes);
  return true;
}

Status PairwiseAgreement::Drain(int peer, uint32_t step, const AgreementHeader& got) {
  // What this worker does not take still has to be received, or its send would never complete.
  const size_t inline_bytes = InlineBytes(peer, got.data_bytes, got.piece_bytes);
  const size_t pieces = PieceCount(got);
  if (pieces == 0 || (pieces == 1 && got.data_bytes == inline_bytes)) return Status::Ok();
  const size_t largest = PieceLength(got, 0);
  std::unique_ptr<char[]> scratch(new (std::nothrow) char[largest]);
  if (scratch == nullptr) {
    return ResourceExhausted(what_ + ": no memory to drain the " + std::to_string(largest) +
                             "-byte pieces " + PeerName(peer) + " sent for another call");
  }
  for (size_t k = 0; k < pieces; ++k) {
    const size_t length = PieceLength(got, k) - (k == 0 ? inline_bytes : 0);
    if (length == 0) continue;
    COHORT_ASSIGN_OR_RETURN(Request in, PostReceive(peer, step + static_cast<uint32_t>(k),
                                                    MutableBytes{scratch.get(), length}));
    PeerRequest data_in{HeaderRank(peer), false, std::move(in)};
    COHORT_RETURN_IF_ERROR(WaitFor(data_in, options_.deadline, what_, options_.stall_check));
  }
  return Status::Ok();
}

Status PairwiseAgreement::Verdict() const {
  if (!disagreement_known()) return Status::Ok();
  // The two calls differ, so one of them differs from this worker's.
  const AgreementCall& theirs = SameCall(differ_[0], mine_) ? differ_[1] : differ_[0];
  const HistoryClauses h = DescribeHistories(SameArguments(theirs, mine_), options_.history.last);
  return AllreduceDisagreement(what_, WorkerName(theirs.rank),
                               DescribeAllreduceCall(theirs) + h.theirs,
                               DescribeAllreduceCall(mine_) + h.mine, h.also);
}

}  // namespace cohort::collective
