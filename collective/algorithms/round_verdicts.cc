#include "collective/algorithms/round_verdicts.h"

#include <algorithm>

namespace cohort::collective {
namespace {

// How long a worker waits on a chunk before it looks at its verdicts again, while one is due.
constexpr auto kVerdictWatchSlice = std::chrono::milliseconds(10);

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

bool SameCall(const RoundHeader& a, const RoundHeader& b) {
  return a.count == b.count && a.type == b.type && a.op == b.op && a.seq == b.seq &&
         a.chunk_bytes == b.chunk_bytes && a.wire_type == b.wire_type;
}

RoundHeader AbortVerdict(int worker, StatusCode code) {
  RoundHeader v;
  v.kind = RoundHeader::kAbort;
  v.worker = static_cast<uint16_t>(worker);
  v.op = static_cast<uint8_t>(code);
  return v;
}

RoundVerdicts::RoundVerdicts(Transport& transport, int num_workers, int num_reducers,
                             const RoundHeader& mine)
    : transport_(transport),
      n_(num_workers),
      mine_(mine),
      got_(num_reducers),
      recvs_(num_reducers),
      answered_(num_reducers, false),
      pending_(num_reducers) {}

Status RoundVerdicts::Post() {
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
      return InvalidArgument("all-reduce: the workers disagree (" + reducer + "): worker " +
                             std::to_string(v.worker) + " called " + DescribeRound(v) +
                             ", this worker " + DescribeRound(mine_) +
                             " (every worker must make the same all-reduce calls, in the same "
                             "order)");
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
      return Aborted("all-reduce: " + worker + " failed this call at " + reducer);
    }
  }
  return Status::Ok();
}

Status RoundVerdicts::WaitWatching(Request& request, Deadline deadline, const std::string& what) {
  while (!all_answered()) {
    if (request.Poll(std::min(deadline, SteadyClock::now() + kVerdictWatchSlice))) break;
    COHORT_RETURN_IF_ERROR(Check(SteadyClock::now()));
    if (SteadyClock::now() >= deadline) break;
  }
  Status s = request.Wait(deadline);
  if (!s.ok() && !all_answered()) COHORT_RETURN_IF_ERROR(Check(SteadyClock::now()));
  return s.WithContext(what);
}

Status RoundVerdicts::CheckAll(Deadline deadline) {
  COHORT_RETURN_IF_ERROR(Check(deadline));
  for (size_t r = 0; r < recvs_.size(); ++r) {
    if (!answered_[r]) {
      return DeadlineExceeded("all-reduce: no verdict from " + ReducerName(Reducer(r), n_));
    }
  }
  return Status::Ok();
}

}  // namespace cohort::collective
