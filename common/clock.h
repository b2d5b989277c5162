// Clock is a daemon's only source of time, so its tests step a ManualClock instead of sleeping
// (the coordinator's event loop, heartbeat checks, job timeouts and starvation limit all read
// it). Times are milliseconds since the Unix epoch: they are journaled and shown to users.
//
// Thread safety: SystemClock is thread-safe; ManualClock is for one test thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace cohort {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() = 0;
};

class SystemClock : public Clock {
 public:
  int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to.
class ManualClock : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : now_ms_(start_ms) {}
  int64_t NowMs() override { return now_ms_; }
  void Advance(std::chrono::milliseconds d) { now_ms_ += d.count(); }
  void Set(int64_t ms) { now_ms_ = ms; }

 private:
  int64_t now_ms_;
};

}  // namespace cohort
