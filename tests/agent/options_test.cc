// The cohort-agent command line and config file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/agent_options.h"
#include "agent/inventory.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

StatusOr<AgentFlags> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "cohort-agent");
  return ParseAgentFlags(static_cast<int>(args.size()), args.data());
}

TEST(AgentFlagsTest, CommandLine) {
  auto flags =
      Parse({"--coordinator", "tcp://127.0.0.1:7401", "--node-id", "n1", "--gpus", "2", "--cpus",
             "6", "--memory-mb", "2048", "--work-dir", "/tmp/w", "--builtin-dir", "/opt/cohort/bin",
             "--grace-period", "5s", "--attempt-retention", "2d", "--insecure"});
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(flags->config.coordinator, "tcp://127.0.0.1:7401");
  EXPECT_EQ(flags->config.node_id, "n1");
  EXPECT_EQ(flags->config.work_dir, "/tmp/w");
  EXPECT_EQ(flags->config.builtin_dir, "/opt/cohort/bin");
  EXPECT_EQ(flags->config.grace_period, std::chrono::seconds(5));
  EXPECT_EQ(flags->config.attempt_retention, std::chrono::hours(48));
  EXPECT_TRUE(flags->config.security.insecure);
  // The route to a loopback coordinator starts at a loopback address.
  EXPECT_EQ(flags->config.advertise_address, "127.0.0.1");
  auto inventory = BuildInventory(*flags);
  ASSERT_TRUE(inventory.ok());
  EXPECT_EQ(inventory->gpus.size(), 2u);
  EXPECT_EQ(inventory->cpus, 6);
  EXPECT_EQ(inventory->memory_mb, 2048);
}

TEST(AgentFlagsTest, DefaultsAndConfigFile) {
  testing::TempDir dir;
  std::string config = dir.path() + "/agent.conf";
  testing::WriteFile(config,
                     "# sample\ncoordinator = tcp://10.0.0.1:7401\ngpus = 1\n"
                     "grace-period = 45s\ninsecure = true\nnode-id = from-file\n");
  auto flags = Parse(
      {"--config", config.c_str(), "--node-id", "from-flag", "--advertise-address", "10.0.0.9"});
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(flags->config.coordinator, "tcp://10.0.0.1:7401");
  EXPECT_EQ(flags->config.node_id, "from-flag");  // the command line wins
  EXPECT_EQ(flags->gpus, "1");
  EXPECT_EQ(flags->config.grace_period, std::chrono::seconds(45));
  EXPECT_TRUE(flags->config.security.insecure);
  EXPECT_EQ(flags->config.advertise_address, "10.0.0.9");
  EXPECT_EQ(flags->config.work_dir, "/var/lib/cohort-agent");
  // The install's bin dir (CMake's CMAKE_INSTALL_FULL_BINDIR), never a build tree's layout.
  EXPECT_EQ(flags->config.builtin_dir.rfind('/', 0), 0u) << flags->config.builtin_dir;
  EXPECT_EQ(flags->config.builtin_dir.find("/collective"), std::string::npos);

  auto plain = Parse({"--coordinator", "tcp://127.0.0.1:7401"});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->config.node_id.empty());  // the hostname
  EXPECT_EQ(plain->gpus, "auto");
  EXPECT_EQ(plain->cgroups, "auto");
  EXPECT_EQ(plain->config.grace_period, std::chrono::seconds(30));
  EXPECT_EQ(plain->config.attempt_retention, std::chrono::hours(7 * 24));
  EXPECT_FALSE(plain->config.security.insecure);
  EXPECT_FALSE(LoadSecurity(*plain).ok());  // CURVE without key files
}

TEST(AgentFlagsTest, UsersMapOwnersToAccountsFromTheFileAndTheCommandLine) {
  testing::TempDir dir;
  std::string config = dir.path() + "/agent.conf";
  testing::WriteFile(config,
                     "coordinator = tcp://10.0.0.1:7401\nusers = alice=ualice, bob=bob\n"
                     "allow-root-users = ops, admin\n");
  auto flags = Parse({"--config", config.c_str(), "--users", "carol=ucarol"});
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(flags->config.users.users,
            (std::map<std::string, std::string>{
                {"alice", "ualice"}, {"bob", "bob"}, {"carol", "ucarol"}}));
  EXPECT_EQ(flags->config.users.allow_root_users, (std::vector<std::string>{"ops", "admin"}));
  EXPECT_FALSE(flags->config.users.allow_root);
  auto bad = Parse({"--coordinator", "tcp://h:1", "--users", "alice"});
  EXPECT_NE(bad.status().message().find("--users"), std::string::npos) << bad.status().ToString();
}

// Labels come from the config file's `label` lines and --label, each KEY=VALUE, checked.
TEST(AgentFlagsTest, LabelsFromTheFileAndTheCommandLine) {
  testing::TempDir dir;
  std::string config = dir.path() + "/agent.conf";
  testing::WriteFile(config,
                     "coordinator = tcp://10.0.0.1:7401\nlabel = gpu=h100\nlabel = zone=b\n");
  auto flags = Parse({"--config", config.c_str(), "--label", "rack=7"});
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(flags->config.labels,
            (std::map<std::string, std::string>{{"gpu", "h100"}, {"rack", "7"}, {"zone", "b"}}));
  auto bad = Parse({"--coordinator", "tcp://h:1", "--label", "gpu h100"});
  EXPECT_NE(bad.status().message().find("--label: expected KEY=VALUE"), std::string::npos)
      << bad.status().ToString();
  auto bad_value = Parse({"--coordinator", "tcp://h:1", "--label", "gpu=h 100"});
  EXPECT_NE(bad_value.status().message().find("--label: label value 'h 100' is not valid"),
            std::string::npos)
      << bad_value.status().ToString();
}

// NVML's model, count and memory become nvidia.com/gpu.product, .count and .memory, as GPU
// feature discovery labels Kubernetes nodes: not for declared GPUs, several models, or over the
// admin's own label.
TEST(GpuLabelsTest, TheGpuModelIsALabelUnlessTheAdminGaveOne) {
  const GpuDevice h100{0, "NVIDIA H100 80GB HBM3", 81559, "GPU-1", -1, {}, {}};
  NodeLabels labels = {{"zone", "b"}};
  AddGpuLabels({h100, GpuDevice{1, h100.model, 81559, "GPU-2", -1, {}, {}}}, &labels);
  EXPECT_EQ(labels, (NodeLabels{{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                                {"nvidia.com/gpu.count", "2"},
                                {"nvidia.com/gpu.memory", "81559"},
                                {"cloud.google.com/gke-accelerator", "nvidia-h100-80gb"},
                                {"zone", "b"}}));
  NodeLabels admin = {{"nvidia.com/gpu.product", "h100"}};
  AddGpuLabels({h100}, &admin);
  EXPECT_EQ(admin.at("nvidia.com/gpu.product"), "h100");
  EXPECT_EQ(admin.at("nvidia.com/gpu.count"), "1");
  NodeLabels none;
  AddGpuLabels(DeclaredGpus(2), &none);
  AddGpuLabels({h100, GpuDevice{1, "NVIDIA A100-SXM4-80GB", 81920, "GPU-3", -1, {}, {}}}, &none);
  AddGpuLabels({}, &none);
  EXPECT_TRUE(none.empty());
}

// The character devices of /dev/infiniband that verbs, rdma_cm and umad users open, from a fake
// /dev (no RDMA NIC here); a subnet manager port, a directory or a plain file is none of them.
TEST(RdmaTest, TheNodesRdmaDevicesAreTheVerbsCmAndUmadNodesAndLabelIt) {
  testing::TempDir dev;
  std::filesystem::create_directories(dev.path() + "/infiniband/by-path");
  bool made = true;
  for (const auto& [name, minor] : std::vector<std::pair<std::string, int>>{
           {"uverbs1", 193}, {"uverbs0", 192}, {"umad0", 0}, {"issm0", 64}}) {
    made &= ::mknod((dev.path() + "/infiniband/" + name).c_str(), S_IFCHR | 0666,
                    makedev(231, minor)) == 0;
  }
  made &=
      ::mknod((dev.path() + "/infiniband/rdma_cm").c_str(), S_IFCHR | 0666, makedev(10, 58)) == 0;
  if (!made) GTEST_SKIP() << "mknod is not permitted here";
  testing::WriteFile(dev.path() + "/infiniband/uverbs9", "not a device");
  EXPECT_EQ(RdmaDevices(dev.path()),
            (std::vector<std::string>{"infiniband/rdma_cm", "infiniband/umad0",
                                      "infiniband/uverbs0", "infiniband/uverbs1"}));
  EXPECT_TRUE(RdmaDevices(dev.path() + "/none").empty());

  NodeLabels labels = {{"feature.node.kubernetes.io/rdma.capable", "false"}};
  AddRdmaLabels(RdmaDevices(dev.path()), &labels);
  EXPECT_EQ(labels, (NodeLabels{{"feature.node.kubernetes.io/rdma.available", "true"},
                                {"feature.node.kubernetes.io/rdma.capable", "false"}}));
  NodeLabels verbs_only;
  AddRdmaLabels({"infiniband/uverbs0"}, &verbs_only);
  EXPECT_EQ(verbs_only, (NodeLabels{{"feature.node.kubernetes.io/rdma.capable", "true"}}));
  NodeLabels none;
  AddRdmaLabels({"infiniband/rdma_cm"}, &none);
  AddRdmaLabels({}, &none);
  EXPECT_TRUE(none.empty());
}

// MIG devices are GPUs of their own model, as GPU feature discovery's single strategy labels
// them, and of no GKE kind (a Vertex job's acceleratorType asks for whole GPUs).
TEST(GpuLabelsTest, MigDevicesAreLabelledAsGpuFeatureDiscoverysSingleStrategy) {
  GpuDevice slice{0, "NVIDIA A100-SXM4-80GB MIG 1g.10gb", 9728, "MIG-1", 0, {}, {}};
  slice.mig = GpuDevice::Mig{0, 0, 1, 0};
  NodeLabels labels;
  AddGpuLabels({slice, slice}, &labels);
  EXPECT_EQ(labels, (NodeLabels{{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"},
                                {"nvidia.com/gpu.count", "2"},
                                {"nvidia.com/gpu.memory", "9728"},
                                {"nvidia.com/mig.strategy", "single"}}));
}

// NVML's names of the GPUs GKE (and so Vertex's acceleratorType) names, with their memory as NVML
// reports it; others get no kind.
TEST(GpuLabelsTest, TheKindGkeNamesIsReadFromTheModelsWords) {
  EXPECT_EQ(GkeAcceleratorKind("NVIDIA H100 80GB HBM3", 81559), "nvidia-h100-80gb");
  EXPECT_EQ(GkeAcceleratorKind("NVIDIA H100 PCIe", 81559), "nvidia-h100-80gb");
  EXPECT_EQ(GkeAcceleratorKind("NVIDIA H100 NVL", 95830), "");
  EXPECT_EQ(GkeAcceleratorKind("NVIDIA H200", 143771), "nvidia-h200-141gb");
  EXPECT_EQ(GkeAcceleratorKind("NVIDIA A100-SXM4-40GB", 40960), "nvidia-tesla-a100");
  EXPECT_EQ(GkeAcceleratorKind("NVIDIA A100-SXM4-80GB", 81920), "nvidia-a100-80gb");
  EXPECT_EQ(GkeAcceleratorKind("NVIDIA A100 80GB PCIe", 81920), "nvidia-a100-80gb");
  EXPECT_EQ(GkeAcceleratorKind("NVIDIA L4", 23034), "nvidia-l4");
  EXPECT_EQ(GkeAcceleratorKind("NVIDIA L40S", 46068), "");
  EXPECT_EQ(GkeAcceleratorKind("Tesla T4", 15360), "nvidia-tesla-t4");
  EXPECT_EQ(GkeAcceleratorKind("Tesla V100-SXM2-16GB", 16384), "nvidia-tesla-v100");
  EXPECT_EQ(GkeAcceleratorKind("Tesla P100-PCIE-16GB", 16384), "nvidia-tesla-p100");
  EXPECT_EQ(GkeAcceleratorKind("Tesla P4", 7611), "nvidia-tesla-p4");
  EXPECT_EQ(GkeAcceleratorKind("Tesla P40", 24451), "");
  EXPECT_EQ(GkeAcceleratorKind("Tesla K80", 11441), "nvidia-tesla-k80");
  EXPECT_EQ(GkeAcceleratorKind("NVIDIA B200", 183359), "nvidia-b200");
  EXPECT_EQ(GkeAcceleratorKind("NVIDIA GB200", 189471), "nvidia-gb200");
  EXPECT_EQ(GkeAcceleratorKind("declared", 0), "");
}

TEST(AgentFlagsTest, ErrorsNameTheFlag) {
  auto no_coordinator = Parse({"--gpus", "1"});
  EXPECT_NE(no_coordinator.status().message().find("--coordinator"), std::string::npos);
  auto bad_gpus = Parse({"--coordinator", "tcp://h:1", "--gpus", "many"});
  EXPECT_NE(bad_gpus.status().message().find("--gpus"), std::string::npos);
  auto bad_grace = Parse({"--coordinator", "tcp://h:1", "--grace-period", "soon"});
  EXPECT_NE(bad_grace.status().message().find("--grace-period"), std::string::npos);
  auto bad_cgroups = Parse({"--coordinator", "tcp://h:1", "--cgroups", "v1"});
  EXPECT_NE(bad_cgroups.status().message().find("--cgroups"), std::string::npos);
  auto relative_root = Parse({"--coordinator", "tcp://h:1", "--cgroup-root", "sys/fs/cgroup"});
  EXPECT_NE(relative_root.status().message().find("--cgroup-root"), std::string::npos);
  auto bad_node = Parse({"--coordinator", "tcp://h:1", "--node-id", "gpu\x01"});
  EXPECT_EQ(bad_node.status().message(), "--node-id: 'gpu ' is not printable UTF-8");
  auto bad_address =
      Parse({"--coordinator", "tcp://h:1", "--advertise-address", std::string(256, 'a').c_str()});
  EXPECT_NE(bad_address.status().message().find("--advertise-address"), std::string::npos);
  auto unknown = Parse({"--coordinator", "tcp://h:1", "--colour", "red"});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  auto help = Parse({"--help"});
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(help->help);
  EXPECT_NE(help->usage.find("--advertise-address"), std::string::npos);
}

TEST(AgentFlagsTest, IgnoredXidsAreNumbersOrAll) {
  auto plain = Parse({"--coordinator", "tcp://h:1"});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(plain->config.watch_xids);
  EXPECT_TRUE(plain->config.ignored_xids.empty());
  auto some = Parse({"--coordinator", "tcp://h:1", "--ignore-xids", "94,74"});
  ASSERT_TRUE(some.ok()) << some.status().ToString();
  EXPECT_TRUE(some->config.watch_xids);
  EXPECT_EQ(some->config.ignored_xids, (std::set<uint64_t>{74, 94}));
  auto all = Parse({"--coordinator", "tcp://h:1", "--ignore-xids", "all"});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_FALSE(all->config.watch_xids);
  for (const char* bad : {"94,,74", "xid79", "-1", "79 ", "0"}) {
    auto refused = Parse({"--coordinator", "tcp://h:1", "--ignore-xids", bad});
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().message().rfind(
                  "--ignore-xids: expected Xid numbers separated by commas, or all; '", 0),
              0u)
        << refused.status().message();
  }
}

TEST(AgentFlagsTest, CpuBindingIsGpuByDefaultOrNone) {
  auto plain = Parse({"--coordinator", "tcp://h:1"});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(plain->config.bind_cpus_to_gpus);
  auto none = Parse({"--coordinator", "tcp://h:1", "--cpu-binding", "none"});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->config.bind_cpus_to_gpus);
  auto refused = Parse({"--coordinator", "tcp://h:1", "--cpu-binding", "numa"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "--cpu-binding: expected gpu or none, got 'numa'");
}

TEST(AgentFlagsTest, CpuLimitIsShareByDefaultOrQuota) {
  auto plain = Parse({"--coordinator", "tcp://h:1"});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->config.cpu_quota);
  auto quota = Parse({"--coordinator", "tcp://h:1", "--cpu-limit", "quota"});
  ASSERT_TRUE(quota.ok()) << quota.status().ToString();
  EXPECT_TRUE(quota->config.cpu_quota);
  auto refused = Parse({"--coordinator", "tcp://h:1", "--cpu-limit", "hard"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "--cpu-limit: expected share or quota, got 'hard'");
}

TEST(AgentFlagsTest, ContainersGetRdmaDevicesUnlessOff) {
  auto plain = Parse({"--coordinator", "tcp://h:1"});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(plain->container_rdma);
  auto off = Parse({"--coordinator", "tcp://h:1", "--container-rdma", "off"});
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->container_rdma);
  auto refused = Parse({"--coordinator", "tcp://h:1", "--container-rdma", "on"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "--container-rdma: expected auto or off, got 'on'");
}

// --output-root is compared as text with the coordinator's (normalised the same way there).
TEST(AgentFlagsTest, OutputRootIsAbsoluteAndNormalised) {
  auto root = Parse({"--coordinator", "tcp://h:1", "--output-root", "/mnt/./share//cohort/"});
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(root->config.output_root, "/mnt/share/cohort");
  auto relative = Parse({"--coordinator", "tcp://h:1", "--output-root", "share"});
  EXPECT_EQ(relative.status().message(), "--output-root: expected an absolute path, got 'share'");
}

}  // namespace
}  // namespace cohort::agent
