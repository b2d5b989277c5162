// Clock is a daemon's only source of time, so its tests step a ManualClock instead of sleeping:
// the coordinator's event loop, heartbeat checks, job timeouts and starvation limit, and the
// agent's heartbeats, resends, stop deadlines and preemption waits all read it.
//
// SystemClock gives milliseconds since the Unix epoch (the coordinator journals its times and
// shows them to users). MonotonicClock gives milliseconds since an arbitrary origin that never
// jumps (the agent only measures intervals, which a wall-clock step must not stretch).
//
// Thread safety: SystemClock and MonotonicClock are thread-safe; ManualClock is for one test
// thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>

namespace cohort {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() = 0;
};

// A Clock that reads one of std::chrono's clocks.
template <typename StdClock>
class ChronoClock : public Clock {
 public:
  int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(StdClock::now().time_since_epoch())
        .count();
  }
};

using SystemClock = ChronoClock<std::chrono::system_clock>;
using MonotonicClock = ChronoClock<std::chrono::steady_clock>;

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

// `ms_since_epoch` (its whole seconds) as a UTC calendar time, written by std::strftime with
// `format`: "%Y-%m-%dT%H:%M:%SZ" gives "2026-12-02T14:30:05Z". At most 63 characters.
inline std::string FormatUtc(int64_t ms_since_epoch, const char* format) {
  const std::time_t seconds = static_cast<std::time_t>(ms_since_epoch / 1000);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[64] = {0};
  std::strftime(text, sizeof text, format, &utc);
  return text;
}

// Now as a UTC calendar time (FormatUtc of the system clock).
inline std::string FormatUtcNow(const char* format) {
  return FormatUtc(SystemClock().NowMs(), format);
}

}  // namespace cohort
