#include "collective/ps/ps_clock_table.h"

#include <algorithm>
#include <climits>
#include <string>

#include "collective/bootstrap.h"

namespace cohort::collective::ps {

ClockTable::ClockTable(int num_workers, std::chrono::milliseconds poll_interval)
    : poll_interval_(poll_interval) {
  StartGeneration(std::max(1, num_workers));
}

void ClockTable::StartGeneration(int num_workers) {
  MutexLock lock(&mu_);
  clocks_.assign(num_workers, applied_);
  left_.assign(num_workers, false);
  barriers_.assign(num_workers, 0);
}

void ClockTable::ResetTo(int64_t clock) {
  MutexLock lock(&mu_);
  applied_ = clock;
  std::fill(clocks_.begin(), clocks_.end(), clock);
}

int64_t ClockTable::MinClockLocked() const {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    hi = std::max(hi, clocks_[w]);
    if (!left_[w]) lo = std::min(lo, clocks_[w]);
  }
  return lo == INT64_MAX ? hi : lo;  // everyone left: every pushed clock is final
}

bool ClockTable::Tick(int worker) {
  bool finished;
  {
    MutexLock lock(&mu_);
    ++clocks_[worker];
    finished = MinClockLocked() > applied_;
  }
  cv_.NotifyAll();
  return finished;
}

bool ClockTable::Leave(int worker) {
  bool finished;
  {
    MutexLock lock(&mu_);
    left_[worker] = true;
    finished = MinClockLocked() > applied_;
  }
  cv_.NotifyAll();
  return finished;
}

std::pair<int64_t, int64_t> ClockTable::Unapplied() const {
  MutexLock lock(&mu_);
  return {applied_, MinClockLocked()};
}

void ClockTable::SetApplied(int64_t clock) {
  {
    MutexLock lock(&mu_);
    applied_ = clock;
  }
  cv_.NotifyAll();
}

int64_t ClockTable::applied() const {
  MutexLock lock(&mu_);
  return applied_;
}

std::pair<int64_t, int64_t> ClockTable::ClockAndApplied(int worker) const {
  MutexLock lock(&mu_);
  return {clocks_[worker], applied_};
}

int64_t ClockTable::max_read_gap() const {
  MutexLock lock(&mu_);
  return max_read_gap_;
}

void ClockTable::WaitLocked(Deadline deadline) {
  cv_.WaitUntil(&mu_, std::min(deadline, SteadyClock::now() + poll_interval_));
}

Status ClockTable::WaitReadable(int worker, int64_t staleness, std::chrono::milliseconds timeout,
                                const Cancelled& cancelled) {
  MutexLock lock(&mu_);
  const int64_t c = clocks_[worker];
  const Deadline deadline = SteadyClock::now() + timeout;
  while (applied_ < c - staleness) {
    if (cancelled()) return Aborted("the server stopped while a read waited for slow workers");
    if (SteadyClock::now() >= deadline) {
      size_t slowest = 0;
      for (size_t w = 0; w < clocks_.size(); ++w) {
        if (!left_[w] && clocks_[w] < clocks_[slowest]) slowest = w;
      }
      return DeadlineExceeded(
          "worker " + std::to_string(worker) + " at clock " + std::to_string(c) + " waited " +
          FormatDuration(timeout) + " for worker " + std::to_string(slowest) + " (clock " +
          std::to_string(clocks_[slowest]) + ") to reach clock " + std::to_string(c - staleness));
    }
    WaitLocked(deadline);
  }
  max_read_gap_ = std::max(max_read_gap_, c - MinClockLocked());
  return Status::Ok();
}

bool ClockTable::AllLeftLocked() const {
  return std::all_of(left_.begin(), left_.end(), [](bool b) { return b; });
}

Status ClockTable::WaitAllLeft(Deadline deadline, const Cancelled& cancelled) {
  MutexLock lock(&mu_);
  while (!AllLeftLocked()) {
    if (cancelled()) return Aborted("the generation ended before every worker said goodbye");
    if (SteadyClock::now() >= deadline) {
      return DeadlineExceeded("not every worker said goodbye in time");
    }
    WaitLocked(deadline);
  }
  return Status::Ok();
}

bool ClockTable::BarrierPassedLocked(int64_t count) const {
  for (size_t w = 0; w < barriers_.size(); ++w) {
    if (!left_[w] && barriers_[w] < count) return false;
  }
  return true;
}

Status ClockTable::Barrier(int worker, Deadline deadline, const Cancelled& cancelled) {
  MutexLock lock(&mu_);
  const int64_t mine = ++barriers_[worker];
  cv_.NotifyAll();
  while (!BarrierPassedLocked(mine)) {
    if (cancelled()) return Aborted("the generation ended during a barrier");
    if (SteadyClock::now() >= deadline) {
      return DeadlineExceeded("not every worker reached the barrier in time");
    }
    WaitLocked(deadline);
  }
  return Status::Ok();
}

void ClockTable::Notify() { cv_.NotifyAll(); }

}  // namespace cohort::collective::ps
