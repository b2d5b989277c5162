// This process's start (common/process_start.h): read from /proc, counted on by its uptime, and a
// forked child's is its own, no earlier than its parent's; its instance is the same all its life
// and a child's is another.
#include "common/process_start.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace cohort {
namespace {

TEST(ProcessStartTest, TheUptimeCountsFromThisProcesssStartAndAChildHasItsOwn) {
  const uint64_t start = ProcessStartTicks();
  ASSERT_GT(start, 0u);
  EXPECT_EQ(ProcessStartTicks(), start);  // read again: the same process
  const int64_t up = ProcessUptimeMs();
  EXPECT_GE(up, 0);
  EXPECT_LT(up, 24LL * 3600 * 1000);  // this test process did not start a day ago
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GE(ProcessUptimeMs(), up + 50);  // the start stays put; the clock moves on

  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const uint64_t own = ProcessStartTicks();
    (void)!::write(pipe_fds[1], &own, sizeof(own));
    ::_exit(0);
  }
  uint64_t child_start = 0;
  EXPECT_EQ(::read(pipe_fds[0], &child_start, sizeof(child_start)),
            static_cast<ssize_t>(sizeof(child_start)));
  ::waitpid(child, nullptr, 0);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  EXPECT_GT(child_start, start);  // started at least 50 ms (5 ticks) after this process
}

TEST(ProcessStartTest, TheInstanceIsThisBootThisPidAndThisStart) {
  const std::string instance = ProcessInstance();
  const std::string expected_tail =
      "/" + std::to_string(::getpid()) + "/" + std::to_string(ProcessStartTicks());
  ASSERT_GT(instance.size(), expected_tail.size());
  EXPECT_TRUE(instance.ends_with(expected_tail)) << instance;
  EXPECT_EQ(instance.size(), 36 + expected_tail.size()) << instance;  // a boot id is a UUID
  EXPECT_EQ(ProcessInstance(), instance);

  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string own = ProcessInstance();
    (void)!::write(pipe_fds[1], own.data(), own.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  char buffer[256] = {};
  const ssize_t n = ::read(pipe_fds[0], buffer, sizeof(buffer));
  ::waitpid(child, nullptr, 0);
  ::close(pipe_fds[0]);
  const std::string child_instance(buffer, n > 0 ? n : 0);
  EXPECT_EQ(child_instance.substr(0, 36), instance.substr(0, 36));  // the same boot
  EXPECT_NE(child_instance, instance);
}

}  // namespace
}  // namespace cohort
