// What the agent reads of a replica's use: a cgroup's files as the kernel writes them (in a
// directory of the test's), and the GPU sampler's thread, with a stand-in for NVML where the test
// must control what a sample says and when it ends.
#include "agent/resource_usage.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "tests/testing/temp_dir_test.h"

namespace cohort::agent {
namespace {

using namespace std::chrono_literals;
using ::cohort::testing::WaitUntil;
using ::cohort::testing::WriteFile;

class ResourceUsageTest : public ::cohort::testing::TempDirTest {};

TEST_F(ResourceUsageTest, ACgroupsCpuMemoryAndIoAreReadFromItsFiles) {
  WriteFile(dir_ + "/cpu.stat", "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n");
  WriteFile(dir_ + "/memory.current", "73400320\n");
  WriteFile(dir_ + "/io.stat",
            "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2\n"
            "8:16 rbytes=1000 wbytes=0 rios=1 wios=0\n");
  const CgroupUsage u = ReadCgroupUsage(dir_);
  EXPECT_DOUBLE_EQ(u.cpu_seconds, 2.5);
  EXPECT_DOUBLE_EQ(u.memory_bytes, 73400320);
  EXPECT_DOUBLE_EQ(u.io_read_bytes, 5096);
  EXPECT_DOUBLE_EQ(u.io_write_bytes, 8192);
}

TEST_F(ResourceUsageTest, WhatACgroupLacksIsUnknownNotZero) {
  WriteFile(dir_ + "/cpu.stat", "usage_usec 10\n");  // no memory or io controller
  const CgroupUsage u = ReadCgroupUsage(dir_);
  EXPECT_DOUBLE_EQ(u.cpu_seconds, 10e-6);
  EXPECT_EQ(u.memory_bytes, -1);
  EXPECT_EQ(u.io_read_bytes, -1);
  EXPECT_EQ(u.io_write_bytes, -1);
  const CgroupUsage gone = ReadCgroupUsage(dir_ + "/no-such-cgroup");
  EXPECT_EQ(gone.cpu_seconds, -1);
  EXPECT_EQ(gone.memory_bytes, -1);
}

TEST_F(ResourceUsageTest, WithoutNvmlTheGpuSamplesSayWhy) {
  if (void* nvml = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL); nvml != nullptr) {
    ::dlclose(nvml);
    GTEST_SKIP() << "this machine has NVML: ObservabilityGpu.NvmlSamples reads real GPUs";
  }
  const GpuSamples samples = ReadGpuSamples();
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(samples.status().message().find("libnvidia-ml.so.1"), std::string::npos);
}

TEST_F(ResourceUsageTest, TheSamplerKeepsTheNewestSampleTakenOnItsOwnThread) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> taken{0};
  GpuSampler sampler(10ms, [&]() -> GpuSamples {
    released.wait();  // the first sample hangs, as NVML can on a failing GPU
    const int n = ++taken;
    return std::vector<GpuSample>{GpuSample{.index = 0,
                                            .uuid = "GPU-0",
                                            .utilization = static_cast<double>(n),
                                            .memory_used_bytes = 1e9,
                                            .memory_total_bytes = 8e9,
                                            .problem = "",
                                            .read = true}};
  });
  // Whoever asks meanwhile is not held up, and is told there is no sample yet.
  auto before = sampler.Latest();
  release.set_value();  // before any ASSERT, which would leave the sampler's thread waiting
  EXPECT_FALSE(before->ok());
  if (!before->ok()) {
    EXPECT_NE(before->status().message().find("not taken yet"), std::string::npos);
  }
  ASSERT_TRUE(WaitUntil([&] { return taken.load() >= 3; }, 10s, 5ms));
  auto after = sampler.Latest();
  ASSERT_TRUE(after->ok()) << after->status().ToString();
  ASSERT_EQ((*after)->size(), 1u);
  EXPECT_GE((**after)[0].utilization, 2);  // a newer sample than the first
  EXPECT_EQ((**after)[0].uuid, "GPU-0");
}

TEST_F(ResourceUsageTest, ASamplerStopsAtOnceThoughItsIntervalIsLong) {
  std::atomic<int> taken{0};
  {
    GpuSampler sampler(1h, [&]() -> GpuSamples {
      ++taken;
      return Unavailable("NVML (libnvidia-ml.so.1) is not installed on this node");
    });
    ASSERT_TRUE(WaitUntil([&] { return taken.load() == 1; }, 10s, 5ms));
    EXPECT_EQ(sampler.Latest()->status().message(),
              "NVML (libnvidia-ml.so.1) is not installed on this node");
  }  // the destructor wakes the thread from its hour's wait and joins it
  EXPECT_EQ(taken.load(), 1);
}

// A sample that never returns (NVML on a GPU that fell off the bus) does not hold up the agent's
// exit: the sampler is destroyed, its thread left to the sample.
TEST_F(ResourceUsageTest, ASamplerStuckInNvmlDoesNotHoldUpItsDestruction) {
  auto release = std::make_shared<std::promise<void>>();
  auto entered = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  std::future<void> inside = entered->get_future();
  {
    GpuSampler sampler(10ms, [released, entered]() -> GpuSamples {
      entered->set_value();
      released.wait();
      return Unavailable("never reached in time");
    });
    ASSERT_EQ(inside.wait_for(10s), std::future_status::ready);
  }                      // returns after kStopWait, not never
  release->set_value();  // the thread left behind ends now, on what it holds
}

}  // namespace
}  // namespace cohort::agent
