// RateLimitedLog keeps one kind of log line from flooding the log when a peer misbehaves (garbage
// frames, refused keys, messages for unknown jobs): at most `burst` lines per `period` are
// written; the ones beyond are counted, not formatted, and the first line written after the
// period (or Flush(), for a flood that stopped) says how many were left out:
//   "... (and 1234 more bad frames in the last 5 s, not logged)".
//
// Thread safety: thread-safe (one mutex; the ZAP handler thread and the coordinator loop may
// share one). Lifetime: `clock`, when given, must outlive the object.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include "common/clock.h"

namespace cohort {

class RateLimitedLog {
 public:
  // `what`: the lines' subject in the summary ("bad frames"). `clock`: nullptr for a monotonic
  // clock of its own (tests pass a ManualClock).
  RateLimitedLog(spdlog::level::level_enum level, std::string what, int burst,
                 std::chrono::milliseconds period, Clock* clock = nullptr);

  template <typename... Args>
  void Log(fmt::format_string<Args...> format, Args&&... args) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!AdmitLocked()) return;
    spdlog::log(level_, format, std::forward<Args>(args)...);
  }
  // Writes the summary of what was left out once the period that left it out has passed.
  void Flush();

  uint64_t logged() const;
  uint64_t suppressed() const;  // over the object's lifetime

 private:
  // Starts a new period when the last one is over (writing its summary); true when one more
  // line fits in the current period.
  bool AdmitLocked();
  void SummarizeLocked(int64_t now_ms);

  spdlog::level::level_enum level_;
  std::string what_;
  int burst_;
  int64_t period_ms_;
  MonotonicClock own_clock_;
  Clock* clock_;
  mutable std::mutex mu_;
  int64_t period_start_ms_;
  int in_period_ = 0;
  uint64_t left_out_ = 0;  // in the current period
  uint64_t logged_ = 0;
  uint64_t suppressed_ = 0;
};

}  // namespace cohort
