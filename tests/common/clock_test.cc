// The clocks' calendar formatting: UTC whatever the machine's time zone.
#include "common/clock.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

namespace cohort {
namespace {

TEST(ClockTest, FormatUtcWritesTheUtcTimeWhateverTheTimeZone) {
  const int64_t ms = 1'764'685'805'123;  // 2025-12-02T14:30:05.123Z
  EXPECT_EQ(FormatUtc(ms, "%Y-%m-%dT%H:%M:%SZ"), "2025-12-02T14:30:05Z");
  ::setenv("TZ", "Asia/Kolkata", 1);
  ::tzset();
  EXPECT_EQ(FormatUtc(ms, "%Y-%m-%d %H:%M:%S UTC"), "2025-12-02 14:30:05 UTC");
  ::unsetenv("TZ");
  ::tzset();
  EXPECT_EQ(FormatUtc(0, "%Y-%m-%dT%H:%M:%SZ"), "1970-01-01T00:00:00Z");
  ManualClock clock(ms);
  EXPECT_EQ(FormatUtc(clock.NowMs(), "%H:%M"), "14:30");
  // Now: a time of this century, in the format asked for.
  const std::string now = FormatUtcNow("%Y");
  EXPECT_EQ(now.size(), 4u);
  EXPECT_EQ(now.substr(0, 2), "20");
}

}  // namespace
}  // namespace cohort
