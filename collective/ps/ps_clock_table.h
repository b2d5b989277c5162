// ClockTable is the parameter server's bounded-staleness (SSP) bookkeeping for one generation of
// workers: each worker's clock (iterations finished), who has said goodbye, barrier counts, and
// the applied clock (every clock below it is applied to the shard). It holds no parameters: the
// server asks it which clocks are finished (Unapplied), applies them, and reports SetApplied.
//
// Rules: a worker that left no longer holds anyone back; the slowest present worker's clock is
// the finished one (when everyone left, the fastest's: every pushed clock is final). A read by a
// worker at clock c waits until applied >= c - staleness.
//
// Waits poll `cancelled` every poll interval and give up at their deadline; Notify wakes them at
// once (the server calls it when its generation fails).
// Thread safety: thread-safe; one mutex guards everything.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "collective/transport/transport.h"
#include "common/mutex.h"
#include "common/status.h"

namespace cohort::collective::ps {

class ClockTable {
 public:
  // Called between polls of a wait: true ends the wait with kAborted.
  using Cancelled = std::function<bool()>;

  ClockTable(int num_workers, std::chrono::milliseconds poll_interval);

  // A new generation of `num_workers`: every worker starts at the applied clock, present, with no
  // barriers passed.
  void StartGeneration(int num_workers) EXCLUDES(mu_);
  // Sets the applied clock and every worker's clock to `clock` (a restored or reset model).
  void ResetTo(int64_t clock) EXCLUDES(mu_);

  // `worker` finished a clock. True when that finished a clock for everyone (Unapplied is
  // non-empty).
  bool Tick(int worker) EXCLUDES(mu_);
  // `worker` leaves the generation. True when that finished a clock for everyone.
  bool Leave(int worker) EXCLUDES(mu_);

  // The clocks finished by everyone and not yet applied: [first, second).
  std::pair<int64_t, int64_t> Unapplied() const EXCLUDES(mu_);
  // Every clock below `clock` is applied; wakes waiting reads.
  void SetApplied(int64_t clock) EXCLUDES(mu_);

  int64_t applied() const EXCLUDES(mu_);
  // `worker`'s clock and the applied clock, read together.
  std::pair<int64_t, int64_t> ClockAndApplied(int worker) const EXCLUDES(mu_);
  // Largest (reader's clock - slowest present worker's clock) seen by WaitReadable.
  int64_t max_read_gap() const EXCLUDES(mu_);

  // Waits until a read by `worker` may proceed under `staleness` (applied >= clock - staleness),
  // then records its read gap. kDeadlineExceeded after `timeout` names the slowest worker.
  Status WaitReadable(int worker, int64_t staleness, std::chrono::milliseconds timeout,
                      const Cancelled& cancelled) EXCLUDES(mu_);
  // Waits until every worker has left (goodbye is a barrier).
  Status WaitAllLeft(Deadline deadline, const Cancelled& cancelled) EXCLUDES(mu_);
  // Counts a barrier by `worker` and waits until every present worker has passed as many.
  Status Barrier(int worker, Deadline deadline, const Cancelled& cancelled) EXCLUDES(mu_);

  // Wakes every wait so it re-checks `cancelled`.
  void Notify();

 private:
  int64_t MinClockLocked() const REQUIRES(mu_);
  bool AllLeftLocked() const REQUIRES(mu_);
  bool BarrierPassedLocked(int64_t count) const REQUIRES(mu_);
  // Waits for a notification, the next poll or `deadline`, whichever is first.
  void WaitLocked(Deadline deadline) REQUIRES(mu_);

  const std::chrono::milliseconds poll_interval_;
  mutable Mutex mu_;
  CondVar cv_;
  std::vector<int64_t> clocks_ GUARDED_BY(mu_);
  std::vector<bool> left_ GUARDED_BY(mu_);
  std::vector<int64_t> barriers_ GUARDED_BY(mu_);
  int64_t applied_ GUARDED_BY(mu_) = 0;
  int64_t max_read_gap_ GUARDED_BY(mu_) = 0;
};

}  // namespace cohort::collective::ps
