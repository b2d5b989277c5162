#include "collective/algorithms/stalled_call_check.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "collective/algorithms/collective_call.h"

namespace cohort::collective {
namespace {

constexpr Tag kStallNoticeTag = MakeTag(0, kStallNoticeStep);

// How far call `seq` is ahead of call `base` (negative: behind), across the counter's wrap.
int32_t SeqAhead(uint32_t seq, uint32_t base) { return static_cast<int32_t>(seq - base); }

// Whether a notice of call `seq` is kept while the calls taking notices are at `current`.
bool Kept(uint32_t seq, uint32_t current) {
  const int32_t ahead = SeqAhead(seq, current);
  return ahead >= -static_cast<int32_t>(StallNotices::kKeepBehind) &&
         ahead <= static_cast<int32_t>(StallNotices::kKeepAhead);
}

}  // namespace

StallNotices::~StallNotices() {
  const Deadline until = SteadyClock::now() + std::chrono::milliseconds(100);
  std::lock_guard<std::mutex> lock(mu_);
  for (Sent& s : sends_) (void)s.request.Wait(until);
}

void StallNotices::Send(int peer, const StallNotice& notice) {
  auto copy = std::make_unique<StallNotice>(notice);
  std::lock_guard<std::mutex> lock(mu_);
  StatusOr<Request> posted =
      transport_.Isend(peer, kStallNoticeTag, ConstBytes{copy.get(), sizeof(StallNotice)});
  if (posted.ok()) sends_.push_back(Sent{std::move(copy), std::move(*posted)});
}

Status StallNotices::TakeInLocked(uint32_t seq) {
  // Sends that have left free their notices.
  const Deadline now = SteadyClock::now();
  sends_.erase(std::remove_if(sends_.begin(), sends_.end(),
                              [&](Sent& s) {
                                if (!s.request.Poll(now)) return false;
                                (void)s.request.Wait(now);
                                return true;
                              }),
               sends_.end());
  while (true) {
    // Nothing more has come, or the transport failed: then the call fails on its own.
    StatusOr<int> peer = transport_.Probe(kStallNoticeTag, SteadyClock::now());
    if (!peer.ok()) break;
    StallNotice got;
    got.magic = 0;  // a message too short to say them is malformed
    got.kind = 0;
    StatusOr<Request> posted =
        transport_.Irecv(*peer, kStallNoticeTag, MutableBytes{&got, sizeof(got)});
    if (!posted.ok()) break;
    const std::string from = "a stall notice from rank " + std::to_string(*peer);
    COHORT_RETURN_IF_ERROR(
        posted->Wait(SteadyClock::now() + std::chrono::seconds(1)).WithContext(from));
    if (got.magic != StallNotice::kMagic ||
        (got.kind != StallNotice::kCall && got.kind != StallNotice::kDisagreement)) {
      return DataLoss(from + " is malformed");
    }
    if (Kept(got.seq, seq)) kept_[got.seq].push_back(got);
  }
  for (auto it = kept_.begin(); it != kept_.end();)
    it = Kept(it->first, seq) ? std::next(it) : kept_.erase(it);
  return Status::Ok();
}

void StallNotices::Remember(uint32_t seq, const AgreementCall& call) {
  std::lock_guard<std::mutex> lock(mu_);
  made_[seq % kMade] = Made{.seq = seq, .made = true, .call = call};
}

std::optional<AgreementCall> StallNotices::Recall(uint32_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  return RecallLocked(seq);
}

std::optional<AgreementCall> StallNotices::RecallLocked(uint32_t seq) const {
  const Made& m = made_[seq % kMade];
  if (!m.made || m.seq != seq) return std::nullopt;
  return m.call;
}

StatusOr<std::vector<StallNotice>> StallNotices::Take(uint32_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  COHORT_RETURN_IF_ERROR(TakeInLocked(seq));
  std::vector<StallNotice> found;
  for (const auto& [call, notices] : kept_) {
    if (SeqAhead(call, seq) >= 0) continue;  // (the map's order is not the calls' across a wrap)
    const std::optional<AgreementCall> made = RecallLocked(call);
    for (const StallNotice& n : notices) {
      if (n.kind == StallNotice::kDisagreement || (made && !SameCall(n.calls[0], *made)))
        found.push_back(n);
    }
  }
  const auto it = kept_.find(seq);
  if (it != kept_.end()) {
    found.insert(found.end(), it->second.begin(), it->second.end());
    kept_.erase(it);
  }
  return found;
}

void StallNotices::Drain(uint32_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  // A malformed notice is dropped here: no call of its is waiting to fail.
  (void)TakeInLocked(seq);
}

StalledCallCheck::StalledCallCheck(StallNotices& notices, const std::vector<int>& workers,
                                   AgreementCall mine, uint32_t seq, std::string what,
                                   SteadyClock::time_point started)
    : notices_(notices),
      workers_(workers),
      mine_(mine),
      seq_(seq),
      what_(std::move(what)),
      overdue_at_(started + kStalledCallAfter) {
  notices_.Remember(seq_, mine_);
  const auto it = std::find(workers_.begin(), workers_.end(), notices_.rank());
  if (it != workers_.end()) me_ = static_cast<int>(it - workers_.begin());
}

Status StalledCallCheck::Wait(Request& request, Deadline deadline) {
  while (verdict_.ok()) {
    const auto now = SteadyClock::now();
    if (now >= deadline) break;
    const Deadline slice = now < overdue_at_ ? overdue_at_ : now + kStalledCallSlice;
    if (request.Poll(std::min(deadline, slice))) break;
    COHORT_RETURN_IF_ERROR(Check());
  }
  COHORT_RETURN_IF_ERROR(verdict_);
  return request.Wait(deadline);
}

Status StalledCallCheck::Check() {
  if (!verdict_.ok()) return verdict_;
  const auto n = static_cast<int>(workers_.size());
  if (me_ < 0 || n < 2 || SteadyClock::now() < overdue_at_) return Status::Ok();
  if (!announced_) {
    StallNotice notice;
    notice.seq = seq_;
    notice.kind = StallNotice::kCall;
    notice.calls[0] = mine_;
    notices_.Send(workers_[(me_ + 1) % n], notice);
    announced_ = true;
  }
  return Look();
}

Status StalledCallCheck::Look() {
  if (!verdict_.ok()) return verdict_;
  StatusOr<std::vector<StallNotice>> got = notices_.Take(seq_);
  if (!got.ok()) {
    verdict_ = got.status().WithContext(what_);
    return verdict_;
  }
  for (const StallNotice& notice : *got) COHORT_RETURN_IF_ERROR(Consider(notice));
  return Status::Ok();
}

Status StalledCallCheck::AwaitFinding() {
  const auto until = SteadyClock::now() + kStalledCallFindingGrace;
  while (true) {
    COHORT_RETURN_IF_ERROR(Look());
    if (SteadyClock::now() >= until) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status StalledCallCheck::Met(uint32_t seq, const AgreementCall& theirs) {
  if (!verdict_.ok()) return verdict_;
  if (SeqAhead(seq, seq_) > 0) return AwaitFinding();
  StallNotice notice;
  notice.seq = seq;
  notice.kind = StallNotice::kCall;
  notice.calls[0] = theirs;
  return Consider(notice);
}

Status StalledCallCheck::Consider(const StallNotice& notice) {
  if (notice.kind == StallNotice::kDisagreement) {
    if (SameCall(notice.calls[0], notice.calls[1])) {
      verdict_ = DataLoss(what_ + ": a stall notice says that two calls differ, and both are " +
                          DescribeAnyCall(notice.calls[0]));
    } else {
      verdict_ = Disagree(notice.seq, notice.calls[0], notice.calls[1], /*tell_others=*/false);
    }
    return verdict_;
  }
  // An earlier call's is compared with this worker's call then, where it is remembered.
  const std::optional<AgreementCall> made =
      notice.seq == seq_ ? mine_ : notices_.Recall(notice.seq);
  if (made && !SameCall(notice.calls[0], *made))
    verdict_ = Disagree(notice.seq, notice.calls[0], *made, /*tell_others=*/true);
  return verdict_;
}

Status StalledCallCheck::Disagree(uint32_t seq, const AgreementCall& a, const AgreementCall& b,
                                  bool tell_others) {
  if (tell_others) {
    StallNotice notice;
    notice.seq = seq;
    notice.kind = StallNotice::kDisagreement;
    notice.calls[0] = a;
    notice.calls[1] = b;
    for (int w = 0; w < notices_.num_workers(); ++w) {
      if (w != notices_.rank()) notices_.Send(w, notice);
    }
  }
  if (seq != seq_) return DisagreeEarlier(seq, a, b);
  const AgreementCall* theirs = !SameCall(a, mine_) ? &a : &b;
  const HistoryClauses h =
      DescribeHistories(SameArguments(*theirs, mine_), CallBefore(seq_, mine_));
  if (theirs->collective != 0 || mine_.collective != 0) {
    return InvalidArgument(what_ + ": the workers disagree: " + WorkerName(theirs->rank) +
                           " called " + DescribeAnyCall(*theirs) + h.theirs + ", this worker " +
                           DescribeAnyCall(mine_) + h.mine +
                           " (every worker must make the same collective calls, in the same "
                           "order; " +
                           (h.also.empty() ? "these waited for each other" : h.also) + ")");
  }
  return AllreduceDisagreement(
      what_, WorkerName(theirs->rank), DescribeAllreduceCall(*theirs) + h.theirs,
      DescribeAllreduceCall(mine_) + h.mine,
      h.also.empty()
          ? "these waited for each other, as calls of different sizes can run different algorithms"
          : h.also);
}

AgreementCall StalledCallCheck::CallBefore(uint32_t seq, const AgreementCall& call) {
  if (call.history == 0) return AgreementCall{};
  return notices_.Recall(seq - 1).value_or(AgreementCall{});
}

Status StalledCallCheck::DisagreeEarlier(uint32_t seq, const AgreementCall& a,
                                         const AgreementCall& b) {
  const int32_t back = -SeqAhead(seq, seq_);
  const std::string when = std::to_string(back) + (back == 1 ? " call" : " calls") +
                           " before this one (every worker must make the same collective calls, in "
                           "the same order; ";
  const std::optional<AgreementCall> made = notices_.Recall(seq);
  if (!made) {
    return InvalidArgument(what_ + ": the workers disagree: " + WorkerName(a.rank) + " called " +
                           DescribeAnyCall(a) + " and " + WorkerName(b.rank) + " " +
                           DescribeAnyCall(b) + ", " + when + "these waited for each other)");
  }
  const AgreementCall& theirs = SameCall(a, *made) ? b : a;
  const HistoryClauses h = DescribeHistories(SameArguments(theirs, *made), CallBefore(seq, *made));
  return InvalidArgument(what_ + ": the workers disagree: " + WorkerName(theirs.rank) + " called " +
                         DescribeAnyCall(theirs) + h.theirs + " where this worker called " +
                         DescribeAnyCall(*made) + h.mine + ", " + when +
                         (h.also.empty()
                              ? "this worker's part of that call ended without waiting for theirs"
                              : h.also) +
                         ")");
}

}  // namespace cohort::collective
