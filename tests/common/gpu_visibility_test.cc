#include "common/gpu_visibility.h"

#include <gtest/gtest.h>

namespace cohort {
namespace {

TEST(GpuVisibilityTest, PinnedGpusAreVisibleInNvmlOrder) {
  std::map<std::string, std::string> env = {{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}, {"HOME", "/h"}};
  SetGpuVisibility({3, 1}, &env);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "3,1");
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "3,1");
  EXPECT_EQ(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
  EXPECT_EQ(env["HOME"], "/h");
  EXPECT_EQ(env.size(), 4u);
}

TEST(GpuVisibilityTest, NoGpusMeansNoneVisibleAndNoneMounted) {
  std::map<std::string, std::string> env = {{"NVIDIA_VISIBLE_DEVICES", "all"}};
  SetGpuVisibility(std::vector<int>{}, &env);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "void");
  EXPECT_EQ(env.count("CUDA_DEVICE_ORDER"), 0u);
}

// The agent's names: a MIG device by its UUID, which CUDA and the NVIDIA container runtime take.
TEST(GpuVisibilityTest, MigDevicesAreVisibleByTheirUuids) {
  std::map<std::string, std::string> env = {{"CUDA_VISIBLE_DEVICES", "0,1"}};
  SetGpuVisibility(std::vector<std::string>{"MIG-a", "MIG-b"}, &env);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "MIG-a,MIG-b");
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "MIG-a,MIG-b");
}

}  // namespace
}  // namespace cohort
