#include "collective/algorithms/stalled_call_check.h"

#include <algorithm>
#include <utility>

#include "collective/algorithms/collective_call.h"

namespace cohort::collective {
namespace {

constexpr Tag kStallNoticeTag = MakeTag(0, kStallNoticeStep);

// How far call `seq` is ahead of call `base` (negative: behind), across the counter's wrap.
int32_t SeqAhead(uint32_t seq, uint32_t base) { return static_cast<int32_t>(seq - base); }

// "all-reduce of 1000 f32 (sum)", "barrier", "allgather of 8 i64": a call of any collective.
std::string DescribeAnyCall(const AgreementCall& c) {
  if (c.collective == 0) return "all-reduce of " + DescribeAllreduceCall(c);
  return DescribeCollectiveCall(static_cast<FlightOp>(c.collective), c.count, c.type, c.op);
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
    const int32_t ahead = SeqAhead(got.seq, seq);
    if (ahead >= -1 && ahead <= static_cast<int32_t>(kKeepAhead)) kept_[got.seq].push_back(got);
  }
  for (auto it = kept_.begin(); it != kept_.end();) {
    const int32_t ahead = SeqAhead(it->first, seq);
    it = ahead < -1 || ahead > static_cast<int32_t>(kKeepAhead) ? kept_.erase(it) : std::next(it);
  }
  return Status::Ok();
}

StatusOr<std::vector<StallNotice>> StallNotices::Take(uint32_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  COHORT_RETURN_IF_ERROR(TakeInLocked(seq));
  std::vector<StallNotice> mine;
  const auto it = kept_.find(seq);
  if (it != kept_.end()) {
    mine = std::move(it->second);
    kept_.erase(it);
  }
  return mine;
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
  StatusOr<std::vector<StallNotice>> got = notices_.Take(seq_);
  if (!got.ok()) {
    verdict_ = got.status().WithContext(what_);
    return verdict_;
  }
  for (const StallNotice& notice : *got) {
    if (notice.kind == StallNotice::kDisagreement) {
      verdict_ = Disagree(notice.calls[0], notice.calls[1], /*tell_others=*/false);
      return verdict_;
    }
    if (!SameCall(notice.calls[0], mine_)) {
      verdict_ = Disagree(notice.calls[0], mine_, /*tell_others=*/true);
      return verdict_;
    }
  }
  return Status::Ok();
}

Status StalledCallCheck::Disagree(const AgreementCall& a, const AgreementCall& b,
                                  bool tell_others) {
  if (tell_others) {
    StallNotice notice;
    notice.seq = seq_;
    notice.kind = StallNotice::kDisagreement;
    notice.calls[0] = a;
    notice.calls[1] = b;
    for (int i = 0; i < static_cast<int>(workers_.size()); ++i) {
      if (i != me_) notices_.Send(workers_[i], notice);
    }
  }
  const AgreementCall* theirs = !SameCall(a, mine_) ? &a : !SameCall(b, mine_) ? &b : nullptr;
  if (theirs == nullptr) {
    return DataLoss(what_ + ": a stall notice says that two calls differ, and both are " +
                    DescribeAllreduceCall(a) + " as this worker's");
  }
  if (theirs->collective != 0 || mine_.collective != 0) {
    return InvalidArgument(what_ + ": the workers disagree: " + WorkerName(theirs->rank) +
                           " called " + DescribeAnyCall(*theirs) + ", this worker " +
                           DescribeAnyCall(mine_) +
                           " (every worker must make the same collective calls, in the same "
                           "order; these waited for each other)");
  }
  return AllreduceDisagreement(
      what_, WorkerName(theirs->rank), DescribeAllreduceCall(*theirs), DescribeAllreduceCall(mine_),
      "these waited for each other, as calls of different sizes can run different algorithms");
}

}  // namespace cohort::collective
