#include "collective/algorithms/pairwise_agreement.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

namespace cohort::collective {
namespace {

bool SameCall(const AgreementCall& a, const AgreementCall& b) {
  return a.count == b.count && a.type == b.type && a.op == b.op;
}

std::string DescribeCall(const AgreementCall& c) {
  return DescribeAllreduceCall(c.count, c.type, c.op);
}

// True when `h` can be what a worker sends: a known type and op, data no larger than its call.
bool WellFormed(const AgreementHeader& h) {
  const auto type = static_cast<DataType>(h.sender.type);
  if (h.magic != AgreementHeader::kMagic || !IsValid(type) ||
      !IsValid(static_cast<ReduceOp>(h.sender.op))) {
    return false;
  }
  const size_t size = DataTypeSize(type);
  if (h.data_bytes % size != 0 || h.data_bytes / size > h.sender.count) return false;
  return (h.differ[0].rank < 0) == (h.differ[1].rank < 0);
}

}  // namespace

PairwiseAgreement::PairwiseAgreement(Transport& transport, const AllreduceOptions& options,
                                     std::string what)
    : transport_(transport),
      options_(options),
      what_(std::move(what)),
      mine_{options.count, static_cast<uint8_t>(options.type), static_cast<uint8_t>(options.op), 0,
            transport.rank()},
      inbox_(new char[sizeof(AgreementHeader) + kAgreementInlineBytes]) {}

StatusOr<Request> PairwiseAgreement::PostSend(int peer, uint32_t step, ConstBytes data) {
  StatusOr<Request> posted = transport_.Isend(peer, MakeTag(options_.seq, step), data);
  if (posted.ok()) return posted;
  return posted.status().WithContext(what_ + ": sending to " + WorkerName(peer));
}

StatusOr<Request> PairwiseAgreement::PostReceive(int peer, uint32_t step, MutableBytes into) {
  StatusOr<Request> posted = transport_.Irecv(peer, MakeTag(options_.seq, step), into);
  if (posted.ok()) return posted;
  return posted.status().WithContext(what_ + ": receiving from " + WorkerName(peer));
}

StatusOr<Request> PairwiseAgreement::PostHeaderReceive(int peer, uint32_t step) {
  return PostReceive(peer, kAgreementHeaderStep + step,
                     MutableBytes{inbox_.get(), sizeof(AgreementHeader) + kAgreementInlineBytes});
}

Status PairwiseAgreement::PostSends(int peer, uint32_t step, ConstBytes data,
                                    std::vector<PeerRequest>* out) {
  AgreementHeader header;
  header.data_bytes = data.size;
  header.sender = mine_;
  header.differ[0] = differ_[0];
  header.differ[1] = differ_[1];
  const size_t inline_bytes = std::min(data.size, kAgreementInlineBytes);
  auto& box = outboxes_.emplace_back(new char[sizeof(header) + inline_bytes]);
  std::memcpy(box.get(), &header, sizeof(header));
  if (inline_bytes > 0) std::memcpy(box.get() + sizeof(header), data.data, inline_bytes);
  COHORT_ASSIGN_OR_RETURN(Request sent,
                          PostSend(peer, kAgreementHeaderStep + step,
                                   ConstBytes{box.get(), sizeof(header) + inline_bytes}));
  out->push_back(PeerRequest{peer, true, std::move(sent)});
  if (data.size > inline_bytes) {
    COHORT_ASSIGN_OR_RETURN(sent,
                            PostSend(peer, step,
                                     ConstBytes{static_cast<const char*>(data.data) + inline_bytes,
                                                data.size - inline_bytes}));
    out->push_back(PeerRequest{peer, true, std::move(sent)});
  }
  return Status::Ok();
}

StatusOr<bool> PairwiseAgreement::Swap(int peer, uint32_t step, ConstBytes send,
                                       MutableBytes into) {
  const bool open = !disagreement_known();
  COHORT_ASSIGN_OR_RETURN(Request header_in, PostHeaderReceive(peer, step));
  std::vector<PeerRequest> sent;
  COHORT_RETURN_IF_ERROR(PostSends(peer, step, open ? send : ConstBytes{}, &sent));
  COHORT_ASSIGN_OR_RETURN(const bool taken, TakeHeader(peer, step, header_in, open, into));
  // The peer takes or drains what was sent: every send completes.
  COHORT_RETURN_IF_ERROR(WaitAll(&sent, options_.deadline, what_));
  return taken;
}

Status PairwiseAgreement::Send(int peer, uint32_t step, ConstBytes data) {
  return PostSends(peer, step, disagreement_known() ? ConstBytes{} : data, &sends_);
}

StatusOr<bool> PairwiseAgreement::Receive(int peer, uint32_t step, MutableBytes into) {
  COHORT_ASSIGN_OR_RETURN(Request header_in, PostHeaderReceive(peer, step));
  return TakeHeader(peer, step, header_in, !disagreement_known(), into);
}

Status PairwiseAgreement::Finish() {
  COHORT_RETURN_IF_ERROR(WaitAll(&sends_, options_.deadline, what_));
  outboxes_.clear();
  return Status::Ok();
}

StatusOr<bool> PairwiseAgreement::TakeHeader(int peer, uint32_t step, Request& request, bool open,
                                             MutableBytes into) {
  PeerRequest header_in{peer, false, std::move(request)};
  COHORT_RETURN_IF_ERROR(WaitFor(header_in, options_.deadline, what_));
  AgreementHeader got;
  std::memcpy(&got, inbox_.get(), sizeof(got));
  if (!WellFormed(got) || got.sender.rank != peer)
    return DataLoss(what_ + ": malformed call header from " + WorkerName(peer));
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
  const size_t inline_bytes = std::min<size_t>(got.data_bytes, kAgreementInlineBytes);
  const size_t rest = got.data_bytes - inline_bytes;
  if (taken) {
    if (got.data_bytes != into.size) {
      return DataLoss(what_ + ": " + WorkerName(peer) + " sends " + std::to_string(got.data_bytes) +
                      " bytes where this worker expects " + std::to_string(into.size) +
                      " for the same call");
    }
    if (inline_bytes > 0)
      std::memcpy(into.data, inbox_.get() + sizeof(AgreementHeader), inline_bytes);
    into = MutableBytes{static_cast<char*>(into.data) + inline_bytes, rest};
  }
  if (rest == 0) return taken;
  // What this worker does not take still has to be received, or its send would never complete.
  std::unique_ptr<char[]> scratch;
  if (!taken) {
    scratch.reset(new (std::nothrow) char[rest]);
    if (scratch == nullptr) {
      return ResourceExhausted(what_ + ": no memory to drain the " + std::to_string(rest) +
                               " bytes " + WorkerName(peer) + " sent for another call");
    }
    into = MutableBytes{scratch.get(), rest};
  }
  COHORT_ASSIGN_OR_RETURN(Request in, PostReceive(peer, step, into));
  PeerRequest data_in{peer, false, std::move(in)};
  COHORT_RETURN_IF_ERROR(WaitFor(data_in, options_.deadline, what_));
  return taken;
}

Status PairwiseAgreement::Verdict() const {
  if (!disagreement_known()) return Status::Ok();
  // The two calls differ, so one of them differs from this worker's.
  const AgreementCall& theirs = SameCall(differ_[0], mine_) ? differ_[1] : differ_[0];
  return AllreduceDisagreement(what_, WorkerName(theirs.rank), DescribeCall(theirs),
                               DescribeCall(mine_));
}

}  // namespace cohort::collective
