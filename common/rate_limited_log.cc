#include "common/rate_limited_log.h"

namespace cohort {

RateLimitedLog::RateLimitedLog(spdlog::level::level_enum level, std::string what, int burst,
                               std::chrono::milliseconds period, Clock* clock)
    : level_(level),
      what_(std::move(what)),
      burst_(burst),
      period_ms_(period.count()),
      clock_(clock != nullptr ? clock : &own_clock_),
      period_start_ms_(clock_->NowMs()) {}

bool RateLimitedLog::AdmitLocked() {
  int64_t now = clock_->NowMs();
  if (now - period_start_ms_ >= period_ms_) {
    SummarizeLocked(now);
    period_start_ms_ = now;
    in_period_ = 0;
  }
  if (in_period_ < burst_) {
    ++in_period_;
    ++logged_;
    return true;
  }
  ++left_out_;
  ++suppressed_;
  return false;
}

void RateLimitedLog::SummarizeLocked(int64_t now_ms) {
  if (left_out_ == 0) return;
  double seconds = static_cast<double>(now_ms - period_start_ms_) / 1000.0;
  spdlog::log(level_, "(and {} more {} in the last {:.1f} s, not logged)", left_out_, what_,
              seconds);
  left_out_ = 0;
}

void RateLimitedLog::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = clock_->NowMs();
  if (left_out_ == 0 || now - period_start_ms_ < period_ms_) return;
  SummarizeLocked(now);
  period_start_ms_ = now;
  in_period_ = 0;
}

uint64_t RateLimitedLog::logged() const {
  std::lock_guard<std::mutex> lock(mu_);
  return logged_;
}

uint64_t RateLimitedLog::suppressed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return suppressed_;
}

}  // namespace cohort
