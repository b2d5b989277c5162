// The Reduction Server's verdicts (reduction_server.h, "Agreement" and "Failures"): what a worker
// learns from each reducer about a round, on the round's verdict tag (seq, kVerdictStep). A
// reducer rejects a round whose workers' calls differ (at once), aborts one in which a worker
// failed (naming that worker, so the others do not blame the reducer or wait out their deadline),
// and accepts one it has served. Internal to the Reduction Server.
#pragma once

#include <string>
#include <vector>

#include "collective/algorithms/reduction_server.h"

namespace cohort::collective {

// "reducer 1" for transport rank num_workers + 1.
std::string ReducerName(int rank, int num_workers);
// "1000 f32 (sum, on the wire as bf16, ..., seq 7)": what workers must agree on in a round.
std::string DescribeRound(const RoundHeader& h);
// True when two workers' headers describe the same call, whatever their calls before it.
bool SameRoundArguments(const RoundHeader& a, const RoundHeader& b);
// True when two workers' headers describe the same call after the same calls.
bool SameCall(const RoundHeader& a, const RoundHeader& b);
// The verdict that aborts a round because worker `worker` failed in it with `code` at the reducer.
RoundHeader AbortVerdict(int worker, StatusCode code);

// A worker's verdicts of one round: one receive per reducer, posted before the round's header
// goes out. Thread safety: one thread at a time.
class RoundVerdicts {
 public:
  // `stall_check` (may be null): WaitWatching also looks at it between slices. `before`: this
  // worker's call before `mine` (CallHistory::last), for a rejection to quote.
  RoundVerdicts(Transport& transport, int num_workers, int num_reducers, const RoundHeader& mine,
                const AgreementCall& before, StalledCallCheck* stall_check);

  // Posts the receives; fails at once, naming it, when this worker's transport already knows a
  // worker to be gone (the call could not complete: a reducer that lingered past
  // failure_linger would no longer tell).
  Status Post();
  bool all_answered() const { return pending_ == 0; }

  // Takes the verdicts that have arrived (waiting until `until` for each still due). A rejection
  // is kInvalidArgument naming the worker that disagrees and both calls; an abort carries the
  // failed worker's code (kUnavailable: gone; kDeadlineExceeded: silent) and names it.
  Status Check(Deadline until);

  // Waits for `request` until `deadline`; while a verdict is due, in slices that look at the
  // verdicts (and the stall check), so a rejected or aborted call fails at once. A verdict also
  // explains a failed request (the reducer that gave it stops serving), or else a worker this
  // worker's transport knows to be gone; other errors of the request get `what`.
  Status WaitWatching(Request& request, Deadline deadline, const std::string& what);

  // Every verdict, each waited for until `deadline`.
  Status CheckAll(Deadline deadline);

 private:
  int Reducer(size_t r) const { return n_ + static_cast<int>(r); }
  // kUnavailable naming a worker this worker's transport knows to be gone; else OK.
  Status GoneWorker() const;

  Transport& transport_;
  const int n_;
  const RoundHeader mine_;
  const AgreementCall before_;
  std::vector<RoundHeader> got_;
  std::vector<Request> recvs_;
  std::vector<bool> answered_;
  int pending_;  // verdicts not yet taken
  StalledCallCheck* const stall_check_;
};

}  // namespace cohort::collective
