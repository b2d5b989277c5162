#include "collective/algorithms/round_verdicts.h"

#include <algorithm>
#include <thread>

#include "collective/algorithms/collective_call.h"
#include "collective/algorithms/stalled_call_check.h"

namespace cohort::collective {
namespace {

// How long a worker waits on a chunk before it looks at its verdicts again, while one is due.
constexpr auto kVerdictWatchSlice = std::chrono::milliseconds(10);
// How long a lingering reducer that has told every worker still listens for a header already on
// its way (an overlapped call). Short: over shared memory a worker abandoning the failed call's
// sends waits until the reducer, closing, takes them in (ucx_transport.cc, DrainInputLocked).
constexpr auto kSettle = std::chrono::milliseconds(500);
// How long a reducer that stops lingering waits for its notices to leave.
constexpr auto kNoticeSendWait = std::chrono::seconds(2);
// How often a lingering reducer looks for headers.
constexpr auto kLingerPoll = std::chrono::milliseconds(5);

}  // namespace

std::string ReducerName(int rank, int num_workers) {
  return "reducer " + std::to_string(rank - num_workers);
}

std::string DescribeRound(const RoundHeader& h) {
  auto type_name = [](uint8_t t) {
    return IsValid(static_cast<DataType>(t)) ? std::string(DataTypeName(static_cast<DataType>(t)))
                                             : "type " + std::to_string(t);
  };
  const std::string op = IsValid(static_cast<ReduceOp>(h.op))
                             ? std::string(ReduceOpName(static_cast<ReduceOp>(h.op)))
                             : "op " + std::to_string(h.op);
  return std::to_string(h.count) + " " + type_name(h.type) + " (" + op + ", on the wire as " +
         type_name(h.wire_type) + ", " + std::to_string(h.chunk_bytes) + "-byte chunks, seq " +
         std::to_string(h.seq) + ")";
}

bool SameRoundArguments(const RoundHeader& a, const RoundHeader& b) {
  return a.count == b.count && a.type == b.type && a.op == b.op && a.seq == b.seq &&
         a.chunk_bytes == b.chunk_bytes && a.wire_type == b.wire_type;
}

bool SameCall(const RoundHeader& a, const RoundHeader& b) {
  return SameRoundArguments(a, b) && a.history == b.history;
}

RoundHeader AbortVerdict(int worker, StatusCode code) {
  RoundHeader v;
  v.kind = RoundHeader::kAbort;
  v.worker = static_cast<uint16_t>(worker);
  v.op = static_cast<uint8_t>(code);
  return v;
}

void ReductionServer::SendAborts(uint32_t seq, int lost, StatusCode code) {
  for (int w = 0; w < options_.num_workers; ++w) {
    if (w != lost) SendAbort(w, seq, lost, code);
  }
}

void ReductionServer::SendAbort(int to, uint32_t seq, int lost, StatusCode code) {
  verdicts_.resize(options_.num_workers);
  verdicts_[to] = AbortVerdict(lost, code);  // the same bytes for every round of this failure
  auto send = transport_.IsendNotice(to, MakeTag(seq, kVerdictStep),
                                     ConstBytes{&verdicts_[to], sizeof(RoundHeader)});
  // Waited for as the reducer stops lingering (an abandoned send to a live worker might be
  // withdrawn by closing its endpoint, and the notice with it).
  if (send.ok()) verdict_sends_.push_back(std::move(*send));
}

std::vector<bool> ReductionServer::SendRefusals(const std::vector<RoundHeader>& headers,
                                                const std::vector<bool>& arrived, int about,
                                                StatusCode code) {
  std::vector<bool> told(options_.num_workers, false);
  for (int w = 0; w < options_.num_workers; ++w) {
    if (arrived[w] && headers[w].kind == RoundHeader::kRound) {
      SendAbort(w, headers[w].seq, about, code);
      told[w] = true;
    }
  }
  for (Request& r : verdict_sends_) (void)r.Wait(SteadyClock::now() + options_.poll_interval);
  verdict_sends_.clear();
  return told;
}

void ReductionServer::AnswerStop(int worker) {
  RoundHeader answer;
  answer.kind = RoundHeader::kStop;
  // Best effort: a worker that is already gone needs no answer. A notice: a lingering reducer's
  // transport is poisoned, and the worker still waits for the answer.
  auto send =
      transport_.IsendNotice(worker, MakeTag(0, kHeaderStep), ConstBytes{&answer, sizeof(answer)});
  if (send.ok()) (void)send->Wait(SteadyClock::now() + options_.poll_interval);
}

Status ReductionServer::Linger(int lost, const Status& why, std::vector<bool> told,
                               const std::atomic<bool>& stop) {
  const int n = options_.num_workers;
  const StatusCode code = why.code();
  std::vector<bool> gone(n, false);
  if (lost >= 0 && lost < n) gone[lost] = true;
  const Deadline limit = SteadyClock::now() + options_.failure_linger;
  Deadline settle = Deadline::max();  // set once every other worker has heard
  while (!stop.load() && SteadyClock::now() < limit) {
    bool waiting = false;     // a worker not yet told that may still call
    Request* live = nullptr;  // a receive still posted (polling it drives the transport)
    for (int v = 0; v < n; ++v) {
      if (gone[v] || stopped_[v]) continue;
      // Gone (its launcher ended it too, say), with no receive posted to fail: nothing to tell.
      if (transport_.peer_gone(v)) {
        gone[v] = true;
        continue;
      }
      Request& r = header_reqs_[v];
      if (!r.valid()) {
        // Refused while the transport is poisoned, unless the header is already here.
        auto recv = transport_.Irecv(v, MakeTag(0, kHeaderStep),
                                     MutableBytes{&incoming_[v], sizeof(RoundHeader)});
        if (recv.ok()) r = std::move(*recv);
      }
      if (r.valid() && r.Poll(SteadyClock::now())) {
        const Status got = r.Wait(SteadyClock::now());
        r = Request();
        const RoundHeader& h = incoming_[v];
        if (!got.ok() || h.magic != RoundHeader::kMagic) {
          gone[v] = true;  // gone (or talking nonsense): nothing more to tell it
        } else if (h.kind == RoundHeader::kStop) {
          AnswerStop(v);
          stopped_[v] = true;
        } else {
          SendAbort(v, h.seq, lost, code);
          told[v] = true;
        }
        --v;  // its next header may be here already
        continue;
      }
      if (!told[v]) waiting = true;
      if (r.valid()) live = &r;
    }
    const auto now = SteadyClock::now();
    if (!waiting) {
      if (live == nullptr) break;
      if (settle == Deadline::max()) settle = now + kSettle;
      if (now >= settle) break;
    }
    if (live != nullptr) {
      (void)live->Poll(now + kLingerPoll);
    } else {
      std::this_thread::sleep_for(kLingerPoll);
    }
  }
  const Deadline sent_by = SteadyClock::now() + kNoticeSendWait;
  for (Request& r : verdict_sends_) (void)r.Wait(sent_by);
  verdict_sends_.clear();
  return why;
}

RoundVerdicts::RoundVerdicts(Transport& transport, int num_workers, int num_reducers,
                             const RoundHeader& mine, const AgreementCall& before,
                             StalledCallCheck* stall_check)
    : transport_(transport),
      n_(num_workers),
      mine_(mine),
      before_(before),
      got_(num_reducers),
      recvs_(num_reducers),
      answered_(num_reducers, false),
      pending_(num_reducers),
      stall_check_(stall_check) {}

Status RoundVerdicts::GoneWorker() const {
  const int gone = transport_.gone_peer();
  if (gone < 0 || gone >= n_ || gone == transport_.rank()) return Status::Ok();
  return Unavailable("all-reduce: worker " + std::to_string(gone) +
                     " is gone (this worker's transport lost it)");
}

Status RoundVerdicts::Post() {
  COHORT_RETURN_IF_ERROR(GoneWorker());
  for (size_t r = 0; r < recvs_.size(); ++r) {
    COHORT_ASSIGN_OR_RETURN(recvs_[r],
                            transport_.Irecv(Reducer(r), MakeTag(mine_.seq, kVerdictStep),
                                             MutableBytes{&got_[r], sizeof(RoundHeader)}));
  }
  return Status::Ok();
}

Status RoundVerdicts::Check(Deadline until) {
  for (size_t r = 0; r < recvs_.size(); ++r) {
    if (answered_[r] || !recvs_[r].Poll(until)) continue;
    answered_[r] = true;
    --pending_;
    const std::string reducer = ReducerName(Reducer(r), n_);
    COHORT_RETURN_IF_ERROR(recvs_[r].Wait(until).WithContext("all-reduce: verdict of " + reducer));
    const RoundHeader& v = got_[r];
    if (v.magic != RoundHeader::kMagic ||
        (v.kind != RoundHeader::kAccept && v.kind != RoundHeader::kReject &&
         v.kind != RoundHeader::kAbort)) {
      return DataLoss("all-reduce: malformed verdict from " + reducer);
    }
    if (v.kind == RoundHeader::kReject) {
      // A worker at another place of its sequence (one whose earlier call ended without the
      // others): the stall check may say which calls differ.
      if (v.seq != mine_.seq && stall_check_ != nullptr) {
        COHORT_RETURN_IF_ERROR(stall_check_->Met(v.seq, AgreementCall{.count = v.count,
                                                                      .type = v.type,
                                                                      .op = v.op,
                                                                      .rank = v.worker,
                                                                      .history = v.history}));
      }
      const HistoryClauses h = DescribeHistories(SameRoundArguments(v, mine_), before_);
      return AllreduceDisagreement(
          "all-reduce (" + reducer + ")", "worker " + std::to_string(v.worker),
          DescribeRound(v) + h.theirs, DescribeRound(mine_) + h.mine, h.also);
    }
    if (v.kind == RoundHeader::kAbort) {
      const std::string worker = "worker " + std::to_string(v.worker);
      if (v.op == static_cast<uint8_t>(StatusCode::kUnavailable)) {
        return Unavailable("all-reduce: " + worker + " is gone (" + reducer + " lost it)");
      }
      if (v.op == static_cast<uint8_t>(StatusCode::kDeadlineExceeded)) {
        return DeadlineExceeded("all-reduce: " + worker + " went silent (" + reducer +
                                " timed out waiting for it)");
      }
      if (v.op == static_cast<uint8_t>(StatusCode::kDataLoss)) {
        const bool mine = v.worker == transport_.rank();
        return DataLoss("all-reduce: " + reducer + " could not take " +
                        (mine ? "this worker's" : worker + "'s") +
                        " round header (not one a worker of this build makes: see the reducer's "
                        "log)");
      }
      if (v.op == static_cast<uint8_t>(StatusCode::kResourceExhausted)) {
        return ResourceExhausted("all-reduce: " + reducer +
                                 " refused the round: its chunk buffers would take more memory "
                                 "than the reducer may (lower the chunk size or the window)");
      }
      return Aborted("all-reduce: " + worker + " failed this call at " + reducer);
    }
  }
  return Status::Ok();
}

Status RoundVerdicts::WaitWatching(Request& request, Deadline deadline, const std::string& what) {
  while (!all_answered()) {
    if (request.Poll(std::min(deadline, SteadyClock::now() + kVerdictWatchSlice))) break;
    COHORT_RETURN_IF_ERROR(Check(SteadyClock::now()));
    if (stall_check_ != nullptr) COHORT_RETURN_IF_ERROR(stall_check_->Check());
    if (SteadyClock::now() >= deadline) break;
  }
  Status s = request.Wait(deadline);
  if (!s.ok() && !all_answered()) COHORT_RETURN_IF_ERROR(Check(SteadyClock::now()));
  if (!s.ok()) COHORT_RETURN_IF_ERROR(GoneWorker());
  return s.WithContext(what);
}

Status RoundVerdicts::CheckAll(Deadline deadline) {
  COHORT_RETURN_IF_ERROR(Check(deadline));
  for (size_t r = 0; r < recvs_.size(); ++r) {
    if (!answered_[r]) {
      COHORT_RETURN_IF_ERROR(GoneWorker());
      return DeadlineExceeded("all-reduce: no verdict from " + ReducerName(Reducer(r), n_));
    }
  }
  return Status::Ok();
}

}  // namespace cohort::collective
