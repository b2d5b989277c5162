// NVML as the agent reads it (agent/nvml.h): a GPU's identity, use and health, through the
// stand-in library tests/agent/fake_nvml.cc (this machine has no NVIDIA driver; on one that has,
// ResourceUsageTest.WithNvmlEveryGpuIsSampledAndExposed reads real GPUs), loaded by path as the
// agent loads libnvidia-ml.so.1; and the GPU sampler's health verdicts (agent/resource_usage.h).
#include "agent/nvml.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>

#include "agent/resource_usage.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir_test.h"

namespace cohort::agent {
namespace {

using namespace std::chrono_literals;
using ::cohort::testing::ScopedEnv;
using ::cohort::testing::WaitUntil;
using ::cohort::testing::WriteFile;

class NvmlTest : public ::cohort::testing::TempDirTest {
 protected:
  // The GPUs the stand-in reports, one line each (fake_nvml.cc says how).
  void SetGpus(const std::string& lines) { WriteFile(state_, lines); }
  // The driver reports Xid events: "GPU XID" lines (fake_nvml.cc).
  void AddXids(const std::string& lines) {
    std::ofstream(state_ + ".xids", std::ios::app) << lines;
  }
  // Until `sampler`'s Xid watch runs (it opens NVML on a thread of its own), a verdict taken
  // does not wait for it: an application's Xid (GPU 0's 31, which leaves it in service) that
  // the watch counts says it runs.
  void WaitForTheXidWatch(const GpuSampler& sampler) {
    AddXids("0 31\n");
    ASSERT_TRUE(WaitUntil(
        [&] {
          return sampler.XidCounts().count({0, 31}) == 1;
        },
        std::chrono::seconds(10), std::chrono::milliseconds(1)));
  }
  std::unique_ptr<Nvml> Open() {
    auto nvml = Nvml::Open(COHORT_FAKE_NVML_LIB);
    EXPECT_TRUE(nvml.ok()) << nvml.status().ToString();
    return nvml.ok() ? std::move(*nvml) : nullptr;
  }

  const std::string state_ = dir_ + "/gpus";
  ScopedEnv env_{"COHORT_FAKE_NVML", state_};
};

TEST_F(NvmlTest, EachGpusIdentityAndUseAreRead) {
  SetGpus(
      "uuid=GPU-a model=NVIDIA_H100_80GB_HBM3 memory_mib=81559 util=37 used_mib=2048\n"
      "uuid=GPU-b model=NVIDIA_H100_80GB_HBM3 memory_mib=81559\n");
  auto nvml = Open();
  ASSERT_NE(nvml, nullptr);
  const auto count = nvml->DeviceCount();
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  ASSERT_EQ(*count, 2u);
  auto id = nvml->Identify(0);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(id->memory_mb, 81559);
  EXPECT_EQ(id->uuid, "GPU-a");
  auto use = nvml->ReadUse(0);
  ASSERT_TRUE(use.ok()) << use.status().ToString();
  EXPECT_EQ(use->utilization, 37);
  EXPECT_EQ(use->memory_used_bytes, 2048.0 * (1 << 20));
  EXPECT_EQ(use->memory_total_bytes, 81559.0 * (1 << 20));
  EXPECT_EQ(use->uuid, "GPU-a");
  EXPECT_EQ(nvml->Problem(0), "");
  EXPECT_EQ(nvml->Problem(1), "");
}

TEST_F(NvmlTest, EachGpusNumaNodeAndNearCpusAreReadWhereNvmlTells) {
  SetGpus(
      "numa=1 cpus=64-66,130\n"  // CPUs past the first 64-bit word of the mask
      "numa=0\n");
  auto nvml = Open();
  ASSERT_NE(nvml, nullptr);
  auto far = nvml->Identify(0);
  ASSERT_TRUE(far.ok()) << far.status().ToString();
  EXPECT_EQ(far->numa_node, 1);
  EXPECT_EQ(far->near_cpus, (std::vector<int>{64, 65, 66, 130}));
  auto near = nvml->Identify(1);
  ASSERT_TRUE(near.ok()) << near.status().ToString();
  EXPECT_EQ(near->numa_node, 0);
  EXPECT_TRUE(near->near_cpus.empty());
}

TEST_F(NvmlTest, WhatTakesAGpuOutOfServiceIsNamed) {
  SetGpus(
      "ecc=2\n"
      "ecc=1\n"
      "remap=pending\n"
      "remap=failed ecc=3\n"
      "remap=unsupported retired_pending=1\n"
      "remap=pending retired_pending=1\n"  // a GPU that remaps rows has no retired pages
      "ecc=-1 remap=unsupported\n"         // ECC off, no row remapping: nothing to say
      "lost=1\n"
      "mig=1\n"
      "mig=unsupported\n");  // a GPU before A100
  auto nvml = Open();
  ASSERT_NE(nvml, nullptr);
  EXPECT_EQ(nvml->Problem(0),
            "2 uncorrectable ECC errors since the driver loaded (it needs a reset)");
  EXPECT_EQ(nvml->Problem(1),
            "1 uncorrectable ECC error since the driver loaded (it needs a reset)");
  EXPECT_EQ(nvml->Problem(2), "a row remapping is pending (it needs a reset)");
  EXPECT_EQ(nvml->Problem(3),
            "3 uncorrectable ECC errors since the driver loaded (it needs a reset); a row "
            "remapping failed (it needs replacing)");
  EXPECT_EQ(nvml->Problem(4), "retired pages are pending (it needs a reset)");
  EXPECT_EQ(nvml->Problem(5), "a row remapping is pending (it needs a reset)");
  EXPECT_EQ(nvml->Problem(6), "");
  EXPECT_EQ(nvml->Problem(7), "NVML cannot reach it: GPU is lost (NVML error 15)");
  EXPECT_FALSE(nvml->ReadUse(7).ok());
  EXPECT_EQ(nvml->Problem(8),
            "MIG mode is on, and this node's GPUs are not all partitioned alike, so Cohort pins "
            "whole GPUs, not MIG devices (turn MIG off: nvidia-smi -i 8 -mig 0; or give every GPU "
            "of the node MIG devices of one profile)");
  EXPECT_EQ(nvml->Problem(8, /*mig_offered=*/true), "");
  EXPECT_EQ(nvml->Problem(9), "");
}

TEST_F(NvmlTest, ASampleKeepsTheGpusItCanReadBesideOneLost) {
  SetGpus("util=50\nlost=1\nremap=pending util=10\n");
  const GpuSamples samples = ReadGpuSamplesFrom(COHORT_FAKE_NVML_LIB);
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  ASSERT_EQ(samples->size(), 3u);
  EXPECT_TRUE((*samples)[0].read);
  EXPECT_EQ((*samples)[0].utilization, 50);
  EXPECT_EQ((*samples)[0].problem, "");
  EXPECT_FALSE((*samples)[1].read);
  EXPECT_EQ((*samples)[1].index, 1);
  EXPECT_EQ((*samples)[1].problem, "NVML cannot reach it: GPU is lost (NVML error 15)");
  EXPECT_TRUE((*samples)[2].read);
  EXPECT_EQ((*samples)[2].utilization, 10);
  EXPECT_EQ((*samples)[2].problem, "a row remapping is pending (it needs a reset)");
}

// A GPU in MIG mode: its MIG devices by slot, each with its name, UUID, memory and instances.
TEST_F(NvmlTest, AGpusMigDevicesAreReadWhereMigIsOn) {
  SetGpus(
      "model=NVIDIA_A100-SXM4-40GB mig=1 mig_devices=1g.5gb:4864,2g.10gb:9856\n"
      "mig=0 mig_devices=1g.5gb:4864\n"
      "mig=unsupported\n"
      "mig=1\n");  // on, no GPU instance made yet
  auto nvml = Open();
  ASSERT_NE(nvml, nullptr);
  const Nvml::Mig mig = nvml->ReadMig(0);
  EXPECT_TRUE(mig.on);
  ASSERT_EQ(mig.devices.size(), 2u);
  EXPECT_EQ(mig.devices[0].slot, 0u);
  EXPECT_EQ(mig.devices[0].name, "NVIDIA A100-SXM4-40GB MIG 1g.5gb");
  EXPECT_EQ(mig.devices[0].uuid, "MIG-fake-0-0");
  EXPECT_EQ(mig.devices[0].memory_mb, 4864);
  EXPECT_EQ(mig.devices[0].gpu_instance, 1);
  EXPECT_EQ(mig.devices[0].compute_instance, 0);
  EXPECT_EQ(mig.devices[1].slot, 1u);
  EXPECT_EQ(mig.devices[1].name, "NVIDIA A100-SXM4-40GB MIG 2g.10gb");
  EXPECT_EQ(mig.devices[1].memory_mb, 9856);
  EXPECT_FALSE(nvml->ReadMig(1).on);
  EXPECT_TRUE(nvml->ReadMig(1).devices.empty());
  EXPECT_FALSE(nvml->ReadMig(2).on);
  EXPECT_TRUE(nvml->ReadMig(3).on);
  EXPECT_TRUE(nvml->ReadMig(3).devices.empty());
  EXPECT_FALSE(nvml->ReadMig(9).on);  // no such GPU
}

// Where the agent offers MIG devices, the samples are theirs, numbered as the inventory numbers
// them, each with its GPU's problems and no use read (NVML measures no utilization of one); an
// Xid of a GPU takes out every MIG device of it.
TEST_F(NvmlTest, MigDevicesAreSampledAsTheAgentOffersThemAndTheirGpusXidsTakeThemOut) {
  SetGpus(
      "mig=1 mig_devices=1g.10gb:9984,1g.10gb:9984\n"
      "mig=1 mig_devices=1g.10gb:9984,1g.10gb:9984 remap=pending\n");
  std::vector<GpuDevice> offered;
  for (int i = 0; i < 4; ++i) {
    const std::string uuid = "MIG-fake-" + std::to_string(i / 2) + "-" + std::to_string(i % 2);
    const GpuDevice::Mig mig{i / 2, i % 2, 1 + i % 2, 0};
    GpuDevice d{i, "Fake GPU MIG 1g.10gb", 9984, uuid, -1, {}, mig};
    offered.push_back(d);
  }
  GpuSampler sampler(
      10ms, [offered] { return ReadGpuSamplesFrom(COHORT_FAKE_NVML_LIB, offered); }, 30s,
      XidWatch{COHORT_FAKE_NVML_LIB, {}});
  ASSERT_TRUE(WaitUntil([&] { return sampler.UnhealthyGpus().size() == 2; }, 10s, 5ms));
  EXPECT_EQ(sampler.UnhealthyGpus(),
            (std::map<int, std::string>{{2, "a row remapping is pending (it needs a reset)"},
                                        {3, "a row remapping is pending (it needs a reset)"}}));
  auto latest = sampler.Latest();
  ASSERT_TRUE(latest->ok());
  ASSERT_EQ((*latest)->size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const GpuSample& g = (**latest)[static_cast<size_t>(i)];
    EXPECT_EQ(g.index, i);
    EXPECT_EQ(g.gpu, i / 2);
    EXPECT_EQ(g.uuid, "MIG-fake-" + std::to_string(i / 2) + "-" + std::to_string(i % 2));
    EXPECT_FALSE(g.read);
  }
  ASSERT_NO_FATAL_FAILURE(WaitForTheXidWatch(sampler));
  AddXids("0 79\n");
  ASSERT_TRUE(sampler.SampleNow());
  ASSERT_TRUE(WaitUntil([&] { return !sampler.Resampling(); }, 10s, 1ms));
  const std::map<int, std::string> unfit = sampler.UnhealthyGpus();
  ASSERT_EQ(unfit.size(), 4u);
  EXPECT_EQ(unfit.at(0).rfind("Xid 79 (GPU has fallen off the bus) at ", 0), 0u) << unfit.at(0);
  EXPECT_EQ(unfit.at(1), unfit.at(0));
  const std::vector<GpuSampler::GpuFault> faults = sampler.TakeGpuFaults();
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(faults[0].gpu, 0);  // the GPU's NVML index: the agent kills its MIG devices' replicas

  // GPU 1 partitioned anew under the running agent: its slices are not those offered.
  SetGpus(
      "mig=1 mig_devices=1g.10gb:9984,1g.10gb:9984\n"
      "mig=1 mig_devices=2g.20gb:19968\n");
  ASSERT_TRUE(sampler.SampleNow());
  ASSERT_TRUE(WaitUntil([&] { return !sampler.Resampling(); }, 10s, 1ms));
  EXPECT_EQ(sampler.UnhealthyGpus().at(3),
            "its GPU 1 no longer has this MIG device (partitioned anew: restart the agent)");
  // Whole GPUs where the agent offers them: a GPU in MIG mode is unfit, saying why.
  const GpuSamples whole = ReadGpuSamplesFrom(COHORT_FAKE_NVML_LIB);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_EQ(whole->size(), 2u);
  EXPECT_EQ((*whole)[1].problem.rfind("MIG mode is on, and this node's GPUs are not all", 0), 0u)
      << (*whole)[1].problem;
}

TEST_F(NvmlTest, ALibraryThatCannotServeSaysWhy) {
  const auto missing = Nvml::Open(dir_ + "/libnvidia-ml.so.1");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("cannot load " + dir_), std::string::npos);
  // The library loads, but the driver is not there (the stand-in without its file).
  const auto no_driver = Nvml::Open(COHORT_FAKE_NVML_LIB);
  ASSERT_FALSE(no_driver.ok());
  EXPECT_EQ(no_driver.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(no_driver.status().message(), "nvmlInit_v2 failed: Driver Not Loaded (9)");
  EXPECT_EQ(ReadGpuSamplesFrom(dir_ + "/libnvidia-ml.so.1").status().message(),
            "NVML (" + dir_ + "/libnvidia-ml.so.1) is not installed on this node");
}

TEST_F(NvmlTest, TheSamplerReportsEachUnfitGpuAndResamplesWhenAsked) {
  SetGpus("util=0\nremap=pending\n");
  GpuSampler sampler(1h, [] { return ReadGpuSamplesFrom(COHORT_FAKE_NVML_LIB); });
  ASSERT_TRUE(WaitUntil([&] { return sampler.Latest()->ok(); }, 10s, 5ms));
  EXPECT_EQ(sampler.UnhealthyGpus(),
            (std::map<int, std::string>{{1, "a row remapping is pending (it needs a reset)"}}));
  EXPECT_FALSE(sampler.Resampling());
  // A replica failed: GPU 0 has met an ECC error since. The hour's wait is cut short.
  SetGpus("ecc=1\nremap=pending\n");
  ASSERT_TRUE(sampler.SampleNow());
  ASSERT_TRUE(WaitUntil([&] { return !sampler.Resampling(); }, 10s, 5ms));
  EXPECT_EQ(sampler.UnhealthyGpus(),
            (std::map<int, std::string>{
                {0, "1 uncorrectable ECC error since the driver loaded (it needs a reset)"},
                {1, "a row remapping is pending (it needs a reset)"}}));
}

// The driver goes away under the agent (upgraded, unloaded): NVML, which read the GPUs, fails.
TEST_F(NvmlTest, NvmlThatFailsAfterReadingTheGpusMakesThemAllUnfit) {
  SetGpus("util=0\nutil=0\n");
  GpuSampler sampler(10ms, [] { return ReadGpuSamplesFrom(COHORT_FAKE_NVML_LIB); });
  ASSERT_TRUE(WaitUntil([&] { return sampler.Latest()->ok(); }, 10s, 5ms));
  EXPECT_TRUE(sampler.UnhealthyGpus().empty());
  std::filesystem::remove(state_);  // the stand-in's driver is gone
  ASSERT_TRUE(WaitUntil([&] { return !sampler.Latest()->ok(); }, 10s, 5ms));
  const std::string why = "NVML fails now: nvmlInit_v2 failed: Driver Not Loaded (9)";
  EXPECT_EQ(sampler.UnhealthyGpus(), (std::map<int, std::string>{{0, why}, {1, why}}));
  SetGpus("util=0\nutil=0\n");
  ASSERT_TRUE(WaitUntil([&] { return sampler.UnhealthyGpus().empty(); }, 10s, 5ms));
}

TEST_F(NvmlTest, WithoutNvmlThereIsNothingToResample) {
  GpuSampler sampler(1h, [] { return GpuSamples(Unavailable("NVML is not installed")); });
  ASSERT_TRUE(WaitUntil(
      [&] { return sampler.Latest()->status().message() == "NVML is not installed"; }, 10s, 5ms));
  EXPECT_FALSE(sampler.SampleNow());
  EXPECT_FALSE(sampler.Resampling());
  EXPECT_TRUE(sampler.UnhealthyGpus().empty());
}

// NVML blocks on a GPU that fell off the bus: a sample that does not return is itself the symptom.
TEST_F(NvmlTest, ASampleThatHangsMakesEveryGpuUnfitUntilItReturns) {
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  auto taken = std::make_shared<std::atomic<int>>(0);
  {
    GpuSampler sampler(
        10ms,
        [released, taken]() -> GpuSamples {
          if (++*taken > 1) released.wait();  // the second sample hangs
          std::vector<GpuSample> gpus(2);
          gpus[1].index = 1;
          return gpus;
        },
        /*hung_after=*/200ms);
    ASSERT_TRUE(WaitUntil([&] { return taken->load() >= 2; }, 10s, 5ms));
    EXPECT_TRUE(sampler.SampleNow());  // a failure meanwhile: its resample is under way
    EXPECT_TRUE(sampler.Resampling());
    ASSERT_TRUE(WaitUntil([&] { return sampler.UnhealthyGpus().size() == 2; }, 10s, 5ms));
    EXPECT_EQ(sampler.UnhealthyGpus().at(1),
              "NVML has not answered a sample for 200ms or more (a GPU may have fallen off the "
              "bus)");
    release->set_value();
    ASSERT_TRUE(WaitUntil([&] { return sampler.UnhealthyGpus().empty(); }, 10s, 5ms));
    ASSERT_TRUE(WaitUntil([&] { return !sampler.Resampling(); }, 10s, 5ms));
  }
}

TEST_F(NvmlTest, XidEventsComeAsTheDriverReportsThem) {
  SetGpus("util=0\nutil=0\nxid_events=0\n");
  auto nvml = Open();
  ASSERT_NE(nvml, nullptr);
  const Status watching = nvml->WatchXids();
  ASSERT_TRUE(watching.ok()) << watching.ToString();
  auto none = nvml->NextXid(10ms);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  AddXids("1 79\n2 48\n-1 999\n");  // GPU 2 reports none: its line is not delivered
  auto first = nvml->NextXid(5s);
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status().ToString();
  EXPECT_EQ((*first)->gpu, 1);
  EXPECT_EQ((*first)->xid, 79u);
  auto second = nvml->NextXid(5s);
  ASSERT_TRUE(second.ok() && second->has_value()) << second.status().ToString();
  EXPECT_EQ((*second)->gpu, -1);
  EXPECT_EQ((*second)->xid, 999u);
  auto after = nvml->NextXid(10ms);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_FALSE(after->has_value());

  SetGpus("xid_events=0\n");
  auto unwatched = Open();
  ASSERT_NE(unwatched, nullptr);
  EXPECT_EQ(unwatched->WatchXids().message(),
            "no GPU's Xid events can be watched (GPU 0 reports no Xid events)");
}

TEST_F(NvmlTest, WhichXidsTakeAGpuOutOfService) {
  for (uint64_t xid : {13, 31, 43, 45, 68, 109}) {
    EXPECT_FALSE(XidTakesGpuOutOfService(xid, {})) << xid;
  }
  for (uint64_t xid : {48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 999, 12345}) {
    EXPECT_TRUE(XidTakesGpuOutOfService(xid, {})) << xid;
  }
  EXPECT_FALSE(XidTakesGpuOutOfService(94, {94, 74}));
  for (uint64_t xid : {62, 79, 95, 119, 120}) EXPECT_TRUE(XidStopsTheGpu(xid)) << xid;
  for (uint64_t xid : {31, 48, 63, 74, 94, 999}) EXPECT_FALSE(XidStopsTheGpu(xid)) << xid;
  EXPECT_EQ(XidName(79), "GPU has fallen off the bus");
  EXPECT_EQ(XidName(12345), "");
}

// A GPU that reports a critical Xid is unfit from then on, in every sample, until the agent
// forgets it (its reload, once the admin reset the GPU); an application's Xid, or one the agent
// ignores, leaves it in service.
TEST_F(NvmlTest, AnXidTakesItsGpuOutOfServiceUntilTheAgentForgetsIt) {
  SetGpus("util=0\nutil=0\nutil=0\nremap=pending\n");
  GpuSampler sampler(
      10ms, [] { return ReadGpuSamplesFrom(COHORT_FAKE_NVML_LIB); }, 30s,
      XidWatch{COHORT_FAKE_NVML_LIB, {94}});
  ASSERT_TRUE(WaitUntil([&] { return sampler.UnhealthyGpus().size() == 1; }, 10s, 5ms));
  ASSERT_NO_FATAL_FAILURE(WaitForTheXidWatch(sampler));
  // A replica failed just after the driver reported them: the verdict waits until the watch has
  // seen every Xid queued then (GPU 2's second one changes nothing).
  AddXids("1 94\n2 119\n3 48\n2 79\n");
  ASSERT_TRUE(sampler.SampleNow());
  ASSERT_TRUE(WaitUntil([&] { return !sampler.Resampling(); }, 10s, 1ms));
  const std::map<int, std::string> unfit = sampler.UnhealthyGpus();
  ASSERT_EQ(unfit.size(), 2u);
  const std::string& gsp = unfit.at(2);
  EXPECT_EQ(gsp.rfind("Xid 119 (GSP RPC timeout) at 20", 0), 0u) << gsp;
  const std::string until = " UTC (it needs a reset, then a reload of the agent)";
  EXPECT_EQ(gsp.substr(gsp.size() - std::min(gsp.size(), until.size())), until) << gsp;
  const std::string& ecc = unfit.at(3);
  EXPECT_EQ(ecc.rfind("a row remapping is pending (it needs a reset); Xid 48 (double-bit ECC "
                      "error) at ",
                      0),
            0u)
      << ecc;
  const auto latest = sampler.Latest();
  ASSERT_TRUE(latest->ok());
  EXPECT_EQ((**latest)[2].problem, gsp);
  EXPECT_EQ((**latest)[0].problem, "");
  // After 119 and 79 nothing runs on GPU 2: what runs there is to be killed. A double-bit ECC
  // error kills only the process that met it (the driver does).
  const std::vector<GpuSampler::GpuFault> faults = sampler.TakeGpuFaults();
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0].gpu, 2);
  EXPECT_EQ(gsp.rfind(faults[0].xid, 0), 0u) << faults[0].xid;
  EXPECT_EQ(faults[1].gpu, 2);
  EXPECT_EQ(faults[1].xid.rfind("Xid 79 (GPU has fallen off the bus) at ", 0), 0u);
  EXPECT_TRUE(sampler.TakeGpuFaults().empty());

  EXPECT_EQ(sampler.ForgetXids(), 2);
  EXPECT_EQ(sampler.UnhealthyGpus(),
            (std::map<int, std::string>{{3, "a row remapping is pending (it needs a reset)"}}));

  // One that names no GPU takes them all.
  AddXids("-1 999\n");
  ASSERT_TRUE(WaitUntil([&] { return sampler.UnhealthyGpus().size() == 4; }, 10s, 5ms));
  EXPECT_EQ(sampler.UnhealthyGpus().at(0).rfind("Xid 999 (an Xid the driver does not know) at ", 0),
            0u);
  EXPECT_TRUE(sampler.TakeGpuFaults().empty());
}

// The real driver, where there is one: every datacenter GPU reports Xid events.
TEST(NvmlDriverTest, TheRealDriversXidEventsCanBeWatched) {
  auto nvml = Nvml::Open();
  if (!nvml.ok() && nvml.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "no NVIDIA driver here: " << nvml.status().message();
  }
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  const Status watching = (*nvml)->WatchXids();
  ASSERT_TRUE(watching.ok()) << watching.ToString();
  const auto next = (*nvml)->NextXid(100ms);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
}

}  // namespace
}  // namespace cohort::agent
