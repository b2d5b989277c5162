// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with Clang's
// thread-safety annotations (common/thread_annotations.h), so members can be marked
// GUARDED_BY(mu_) and Clang proves every access holds mu_ (LevelDB's port::Mutex plays this role).
//
//   Mutex mu_;
//   CondVar cv_;
//   int64_t value_ GUARDED_BY(mu_) = 0;
//   ...
//   MutexLock lock(&mu_);
//   while (value_ < want && SteadyClock::now() < deadline) cv_.WaitUntil(&mu_, deadline);
//
// Thread safety: as std::mutex and std::condition_variable: every wait on one CondVar passes the
// same Mutex, held; it is held again when the wait returns.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.h"

namespace cohort {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu` until notified, `deadline` passes, or a spurious wake-up; callers re-check
  // their condition.
  void WaitUntil(Mutex* mu, std::chrono::steady_clock::time_point deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait_until(lock, deadline);
    lock.release();
  }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace cohort
