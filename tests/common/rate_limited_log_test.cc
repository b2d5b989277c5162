// RateLimitedLog: the burst is written, the rest counted and summarized once the period is over;
// and the spec size limit's parsing and message.
#include "common/rate_limited_log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

#include "common/spec_limit.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;

// Routes spdlog's default logger into a string for the test's lifetime.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink->set_pattern("%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::vector<std::string> Lines() const {
    std::vector<std::string> lines;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(RateLimitedLogTest, WritesTheBurstCountsTheRestAndSummarizesAfterThePeriod) {
  CapturedLog captured;
  ManualClock clock;
  RateLimitedLog log(spdlog::level::warn, "bad frames", 3, 10s, &clock);
  for (int i = 0; i < 1000; ++i) log.Log("bad frame {}", i);
  EXPECT_EQ(captured.Lines(),
            (std::vector<std::string>{"bad frame 0", "bad frame 1", "bad frame 2"}));
  EXPECT_EQ(log.logged(), 3u);
  EXPECT_EQ(log.suppressed(), 997u);

  // Nothing is summarized before the period is over.
  clock.Advance(9s);
  log.Flush();
  EXPECT_EQ(captured.Lines().size(), 3u);
  // The next line after the period carries the summary first.
  clock.Advance(1s);
  log.Log("bad frame {}", 1000);
  auto lines = captured.Lines();
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[3], "(and 997 more bad frames in the last 10.0 s, not logged)");
  EXPECT_EQ(lines[4], "bad frame 1000");
}

TEST(RateLimitedLogTest, FlushSummarizesAFloodThatStopped) {
  CapturedLog captured;
  ManualClock clock;
  RateLimitedLog log(spdlog::level::warn, "refused keys", 1, 5s, &clock);
  log.Log("refused {}", "a");
  log.Log("refused {}", "b");
  clock.Advance(6s);
  log.Flush();
  log.Flush();  // once only
  auto lines = captured.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "(and 1 more refused keys in the last 6.0 s, not logged)");
}

TEST(SpecLimitTest, ParsesSizesAndNamesTheLimit) {
  EXPECT_EQ(*ParseByteSize("1048576"), 1048576u);
  EXPECT_EQ(*ParseByteSize("64KiB"), 65536u);
  EXPECT_EQ(*ParseByteSize("1MiB"), 1048576u);
  EXPECT_EQ(*ParseByteSize("2m"), 2u << 20);
  EXPECT_EQ(*ParseByteSize("1G"), 1u << 30);
  EXPECT_EQ(ParseByteSize("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("0").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("12 parsecs").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("99999999999999999999").status().code(), StatusCode::kInvalidArgument);

  EXPECT_TRUE(CheckSpecSize("job spec", 1u << 20, 1u << 20, "x").ok());
  Status over = CheckSpecSize("job spec", 34u << 20, 1u << 20, "the coordinator's --max-spec-size");
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(over.message(),
            "job spec is 34 MiB (35651584 bytes), over the limit of 1 MiB (the coordinator's "
            "--max-spec-size)");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(512), "512 bytes");
}

}  // namespace
}  // namespace cohort
