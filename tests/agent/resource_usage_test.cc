// What the agent reads of a replica's use: a cgroup's files as the kernel writes them (in a
// directory of the test's), and the GPU sampler's thread, with a stand-in for NVML where the test
// must control what a sample says and when it ends.
#include "agent/resource_usage.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "agent/http_service.h"
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
    GTEST_SKIP() << "this machine has NVML: WithNvmlEveryGpuIsSampledAndExposed reads its GPUs";
  }
  const GpuSamples samples = ReadGpuSamples();
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(samples.status().message().find("libnvidia-ml.so.1"), std::string::npos);
}

// On a machine with the NVIDIA driver (the lent GPU machine; this one has none): what the agent's
// sampler reads of real GPUs, and the agent's /metrics lines for them.
TEST_F(ResourceUsageTest, WithNvmlEveryGpuIsSampledAndExposed) {
  void* nvml = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr)
    GTEST_SKIP() << "needs the NVIDIA driver's libnvidia-ml.so.1: " << ::dlerror();
  ::dlclose(nvml);
  const GpuSamples samples = ReadGpuSamples();
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  ASSERT_FALSE(samples->empty()) << "NVML loaded but counted no GPU";
  for (size_t i = 0; i < samples->size(); ++i) {
    const GpuSample& g = (*samples)[i];
    SCOPED_TRACE("GPU " + std::to_string(g.index) + " " + g.uuid);
    EXPECT_EQ(g.index, static_cast<int>(i));
    EXPECT_EQ(g.uuid.rfind("GPU-", 0), 0u);
    EXPECT_TRUE(g.read) << g.problem;
    EXPECT_EQ(g.problem, "") << "an idle lent GPU is fit for work";
    EXPECT_GE(g.utilization, 0);
    EXPECT_LE(g.utilization, 100);
    EXPECT_GT(g.memory_total_bytes, 1e9);
    EXPECT_GE(g.memory_used_bytes, 0);
    EXPECT_LE(g.memory_used_bytes, g.memory_total_bytes);
  }
  AgentSnapshot snapshot;
  snapshot.node_id = "gpu-node";
  snapshot.cgroups = true;  // (no attempt has one to read): any "No samples" below is the GPUs'
  snapshot.attempts.push_back(
      AttemptView{.job = "train", .replica = "chief-0", .cgroup = "", .gpus = {0}});
  snapshot.gpus = std::make_shared<const GpuSamples>(samples);
  const std::string text = AgentHttp::RenderMetrics(snapshot);
  const std::string gpu0 = "{node=\"gpu-node\",gpu=\"0\",uuid=\"" + (*samples)[0].uuid +
                           "\",job=\"train\",replica=\"chief-0\"}";
  for (const char* name : {"cohort_gpu_utilization_percent", "cohort_gpu_memory_used_bytes",
                           "cohort_gpu_memory_total_bytes", "cohort_gpu_healthy"}) {
    EXPECT_NE(text.find(std::string(name) + gpu0 + " "), std::string::npos) << name << "\n" << text;
  }
  EXPECT_NE(text.find("cohort_gpu_healthy" + gpu0 + " 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("No samples"), std::string::npos) << text;
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
