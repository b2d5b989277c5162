// OciLauncher with a real OCI runtime (runc or crun from Debian) and a busybox root filesystem:
// the container sees its environment, its output directory and only its pinned GPUs' device
// nodes (fake nodes made with mknod stand in for /dev/nvidia* on a machine without GPUs).
#include "agent/oci_launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "agent/captured_command.h"
#include "agent/exec_in_replica.h"
#include "agent/inventory.h"
#include "agent/python_site.h"
#include "agent/runtime_commands.h"
#include "agent/stack_dump.h"
#include "agent/work_dir_lock.h"
#include "common/stack_where.h"
#include "tests/testing/process.h"

namespace cohort::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using testing::ReadFile;

// Parameter: the runtime to use ("auto" picks runc on hybrid-cgroup hosts such as this one;
// "crun" there exercises the hidden-cgroup2 path).
class OciLauncherTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cohort-oci-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "rootfs" / "bin");
    fs::create_directories(dir_ / "dev");
    fs::create_directories(dir_ / "work");
    options_.container_tag = AgentTag((dir_ / "work").string());
    // Fake GPUs 0..3 and a control node, with NVIDIA's major number.
    for (int i = 0; i < 4; ++i) {
      mknod_ok_ &= ::mknod((dir_ / "dev" / ("nvidia" + std::to_string(i))).c_str(), S_IFCHR | 0666,
                           makedev(195, i)) == 0;
    }
    mknod_ok_ &=
        ::mknod((dir_ / "dev" / "nvidiactl").c_str(), S_IFCHR | 0666, makedev(195, 255)) == 0;
  }

  // A fake RDMA NIC in the fake /dev: a verbs device and the connection manager, with the
  // kernel's numbers for them.
  bool MakeRdmaDevices() {
    fs::create_directories(dir_ / "dev" / "infiniband");
    return ::mknod((dir_ / "dev" / "infiniband" / "uverbs0").c_str(), S_IFCHR | 0666,
                   makedev(231, 192)) == 0 &&
           ::mknod((dir_ / "dev" / "infiniband" / "rdma_cm").c_str(), S_IFCHR | 0666,
                   makedev(10, 58)) == 0;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Skips the test, saying why, when containers cannot run on this machine.
  bool CanRunContainers(std::string* why) {
    if (::geteuid() != 0) {
      *why = "OCI runtimes need root here";
      return false;
    }
    if (!fs::exists("/bin/busybox")) {
      *why = "no static busybox (Debian busybox-static) to build a root filesystem from";
      return false;
    }
    if (!mknod_ok_) {
      *why = "mknod is not permitted here, so fake GPU device nodes cannot be made";
      return false;
    }
    fs::copy_file("/bin/busybox", dir_ / "rootfs" / "bin" / "busybox");
    for (const char* tool : {"sh", "ls", "env", "cat", "sleep", "echo"}) {
      fs::create_symlink("busybox", dir_ / "rootfs" / "bin" / tool);
    }
    options_.device_dir = (dir_ / "dev").string();
    options_.cache_dir = (dir_ / "cache").string();
    options_.runtime = GetParam();
    auto launcher = OciLauncher::Create(options_, &processes_);
    if (!launcher.ok()) {
      *why = launcher.status().message();
      return false;
    }
    launcher_ = std::move(*launcher);
    return true;
  }

  LaunchRequest Request(std::vector<std::string> argv, std::vector<int> gpus) {
    LaunchRequest request;
    request.job = "oci_job";  // the tag, of this process's dir_, keeps parallel tests apart
    request.replica = "worker-0";
    request.attempt = 0;
    request.argv = std::move(argv);
    request.env = {{"AIP_MODEL_DIR", (dir_ / "out" / "model/").string()},
                   {"TF_CONFIG", R"({"task":{"type":"worker","index":0}})"}};
    request.working_dir = (dir_ / "work").string();
    request.log_path = (dir_ / "work" / "log").string();
    request.gpus = std::move(gpus);
    request.image = (dir_ / "rootfs").string();
    return request;
  }

  // As the agent does (Attempt::CollectLeftovers): kill again while anything is alive. The first
  // KillAll may come while the runtime is still creating the container, before `kill` can reach
  // it; the container then starts without its runtime process (seen under load: runc). True once
  // nothing is.
  static bool KillUntilGone(ReplicaProcess& process) {
    return testing::WaitUntil(
        [&] {
          if (!process.AnyAlive()) return true;
          process.KillAll();
          return false;
        },
        20s);
  }

  int Wait(ReplicaProcess& process) {
    int status = 0;
    EXPECT_EQ(::waitpid(process.pid(), &status, 0), process.pid());
    process.OnExited(status);
    return process.exit_info()->exit_code;
  }

  // Launches the prepared `request`, waits for its end and releases it; returns its log, and
  // fails the test unless it exited 0.
  std::string RunToEnd(const LaunchRequest& request) {
    auto process = launcher_->Launch(request);
    if (!process.ok()) {
      ADD_FAILURE() << process.status().ToString();
      return "";
    }
    const int code = Wait(**process);
    (*process)->Release();
    std::string log = ReadFile(dir_ / "work" / "log");
    EXPECT_EQ(code, 0) << "runtime " << launcher_->runtime() << " log:\n" << log;
    return log;
  }

  // Another agent's launcher on this host: its work dir dir_/`work`, whose tag its ids carry.
  struct OtherAgent {
    OciOptions options;
    std::unique_ptr<ProcessLauncher> processes;
    std::unique_ptr<OciLauncher> launcher;  // null where it could not be made (a test failure)
  };
  OtherAgent AnotherAgent(const std::string& work) {
    fs::create_directories(dir_ / work);
    OtherAgent other{options_, std::make_unique<ProcessLauncher>(CgroupManager()), nullptr};
    other.options.container_tag = AgentTag((dir_ / work).string());
    auto launcher = OciLauncher::Create(other.options, other.processes.get());
    EXPECT_TRUE(launcher.ok()) << launcher.status().ToString();
    if (launcher.ok()) other.launcher = std::move(*launcher);
    return other;
  }
  // `request` with its working dir and log in dir_/`work`.
  LaunchRequest In(LaunchRequest request, const std::string& work) {
    fs::create_directories(dir_ / work);
    request.working_dir = (dir_ / work).string();
    request.log_path = (dir_ / work / "log").string();
    return request;
  }
  // The id of `request`'s container under `options`.
  static std::string IdOf(const OciOptions& options, const LaunchRequest& request) {
    return ContainerId(options.container_tag, request.job, request.replica, request.attempt);
  }
  // Whether the runtime says container `id` is running (not still being created, not gone).
  bool Running(const std::string& id) {
    CapturedCommand state = RunCaptured(launcher_->RuntimeArgv({"state", id}));
    return state.exit_code == 0 && state.output.find("\"running\"") != std::string::npos;
  }

  fs::path dir_;
  bool mknod_ok_ = true;
  OciOptions options_;
  ProcessLauncher processes_{CgroupManager()};
  std::unique_ptr<OciLauncher> launcher_;
};

TEST_P(OciLauncherTest, BundleConfigPinsOnlyRequestedGpusAndMountsOutput) {
  options_.device_dir = (dir_ / "dev").string();
  auto launcher = OciLauncher::Create(options_, &processes_);
  if (!launcher.ok()) GTEST_SKIP() << "no OCI runtime: " << launcher.status().message();
  if (!mknod_ok_) GTEST_SKIP() << "mknod is not permitted here";
  auto config = (*launcher)->BundleConfig(Request({"/bin/true"}, {1, 3}), "/rootfs");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto json = nlohmann::json::parse(*config);
  std::vector<std::string> paths;
  for (const auto& device : json["linux"]["devices"]) paths.push_back(device["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{"/dev/nvidia1", "/dev/nvidia3", "/dev/nvidiactl"}));
  // Deny everything, then allow exactly those three nodes.
  const auto& rules = json["linux"]["resources"]["devices"];
  ASSERT_EQ(rules.size(), 4u);
  EXPECT_FALSE(rules[0]["allow"].get<bool>());
  EXPECT_EQ(rules[1]["minor"], 1);
  EXPECT_EQ(rules[2]["minor"], 3);
  EXPECT_EQ(json["linux"]["resources"]["pids"]["limit"], kReplicaPidsLimit);
  bool output_mounted = false;
  for (const auto& mount : json["mounts"]) {
    output_mounted |= mount["destination"] == (dir_ / "out").string();
  }
  EXPECT_TRUE(output_mounted);
  bool visible = false;
  for (const auto& var : json["process"]["env"]) visible |= var == "NVIDIA_VISIBLE_DEVICES=1,3";
  EXPECT_TRUE(visible);
  EXPECT_FALSE(json["linux"]["namespaces"].dump().find("network") != std::string::npos)
      << "containers use host networking";
}

// A container's cpus weigh as a process replica's: cgroup v1 shares, or on cgroup v2 the bundle's
// own cpu.weight (crun would convert shares by a curve of its own: 3 CPUs 240, not 118); a quota
// only with cpu_quota, on either.
TEST_P(OciLauncherTest, BundleConfigWeighsCpusAsProcessReplicasOnEitherCgroupVersion) {
  options_.device_dir = (dir_ / "dev").string();
  options_.runtime = GetParam();
  auto resources = [&](int version, bool quota) {
    options_.cgroup_version = version;
    auto launcher = OciLauncher::Create(options_, &processes_);
    if (!launcher.ok()) return nlohmann::json();
    LaunchRequest request = Request({"/bin/true"}, {});
    request.cpus = 3;
    request.cpu_quota = quota;
    auto config = (*launcher)->BundleConfig(request, "/rootfs");
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return config.ok() ? nlohmann::json::parse(*config)["linux"]["resources"] : nlohmann::json();
  };
  const nlohmann::json v1 = resources(1, false);
  if (v1.is_null()) GTEST_SKIP() << "no OCI runtime " << GetParam();
  EXPECT_EQ(v1["cpu"], nlohmann::json({{"shares", 3072}})) << v1.dump();
  EXPECT_FALSE(v1.contains("unified")) << v1.dump();
  const nlohmann::json v2 = resources(2, false);
  EXPECT_EQ(v2["unified"], nlohmann::json({{"cpu.weight", "118"}})) << v2.dump();
  EXPECT_FALSE(v2.contains("cpu")) << v2.dump();
  const nlohmann::json capped = resources(2, true);
  EXPECT_EQ(capped["unified"], nlohmann::json({{"cpu.weight", "118"}})) << capped.dump();
  EXPECT_EQ(capped["cpu"], nlohmann::json({{"quota", 300000}, {"period", 100000}}))
      << capped.dump();
  EXPECT_EQ(resources(1, true)["cpu"],
            nlohmann::json({{"shares", 3072}, {"quota", 300000}, {"period", 100000}}));
}

// podman's runtime (crun by default) converts --cpu-shares by its own curve too: on cgroup v2 it
// is given the weight (--cgroup-conf); docker's runc converts shares as the agent does. Only the
// argv is built, so stand-ins for the two CLIs (first on PATH) do.
TEST(OciCliTest, PodmanOnCgroupV2IsGivenTheCpuWeightDockerTheShares) {
  testing::TempDir bin;
  for (const char* cli : {"docker", "podman"}) {
    testing::WriteFile(bin.Join(cli), "#!/bin/sh\nexit 1\n", /*executable=*/true);
  }
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (bin.path() + ":" + path).c_str(), 1);
  ProcessLauncher processes{CgroupManager()};
  auto flags = [&](const std::string& runtime, int version) {
    OciOptions options;
    options.runtime = runtime;
    options.cgroup_version = version;
    std::vector<std::string> cpu;
    auto launcher = OciLauncher::Create(options, &processes);
    EXPECT_TRUE(launcher.ok()) << launcher.status().ToString();
    if (!launcher.ok()) return cpu;
    LaunchRequest request;
    request.job = "j";
    request.replica = "chief-0";
    request.image = "python:3.11";
    request.argv = {"true"};
    request.cpus = 3;
    for (const std::string& a : (*launcher)->CliRunArgv(request, "cid")) {
      if (a.starts_with("--cpu") || a.starts_with("--cgroup-conf")) cpu.push_back(a);
    }
    return cpu;
  };
  EXPECT_EQ(flags("docker", 2), std::vector<std::string>{"--cpu-shares=3072"});
  EXPECT_EQ(flags("docker", 1), std::vector<std::string>{"--cpu-shares=3072"});
  EXPECT_EQ(flags("podman", 2), std::vector<std::string>{"--cgroup-conf=cpu.weight=118"});
  EXPECT_EQ(flags("podman", 1), std::vector<std::string>{"--cpu-shares=3072"});
  ::setenv("PATH", path.c_str(), 1);
}

// JSON carries only UTF-8: a request holding other bytes (the agent's own work dir, say) fails the
// launch with an error saying so, where writing the config threw and ended the agent.
TEST_P(OciLauncherTest, AConfigThatCannotBeJsonFailsTheLaunchNotTheAgent) {
  options_.device_dir = (dir_ / "dev").string();
  auto launcher = OciLauncher::Create(options_, &processes_);
  if (!launcher.ok()) GTEST_SKIP() << "no OCI runtime: " << launcher.status().message();
  LaunchRequest request = Request({"/bin/true"}, {});
  request.env["DATA"] = "/srv/caf\xe9";
  auto config = (*launcher)->BundleConfig(request, "/rootfs");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(config.status().message().find("the container's OCI config cannot be written"),
            std::string::npos)
      << config.status().ToString();
}

// A container gets the node's RDMA devices, with or without GPUs, as a process replica has them;
// none with --container-rdma off. So NCCL's IB transport and UCX inside find the NIC.
TEST_P(OciLauncherTest, AContainerGetsTheNodesRdmaDevices) {
  options_.device_dir = (dir_ / "dev").string();
  options_.runtime = GetParam();
  if (!mknod_ok_ || !MakeRdmaDevices()) GTEST_SKIP() << "mknod is not permitted here";
  auto launcher = OciLauncher::Create(options_, &processes_);
  if (!launcher.ok()) GTEST_SKIP() << "no OCI runtime: " << launcher.status().message();
  auto paths_of = [&](const LaunchRequest& request) {
    auto config = (*launcher)->BundleConfig(request, "/rootfs");
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    std::vector<std::string> paths;
    if (!config.ok()) return paths;
    auto json = nlohmann::json::parse(*config);
    for (const auto& device : json["linux"]["devices"]) paths.push_back(device["path"]);
    int allowed = 0;
    for (const auto& rule : json["linux"]["resources"]["devices"]) allowed += rule["allow"] == true;
    EXPECT_EQ(allowed, static_cast<int>(paths.size()));
    return paths;
  };
  EXPECT_EQ(paths_of(Request({"/bin/true"}, {})),
            (std::vector<std::string>{"/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0"}));
  EXPECT_EQ(paths_of(Request({"/bin/true"}, {2})),
            (std::vector<std::string>{"/dev/nvidia2", "/dev/nvidiactl", "/dev/infiniband/rdma_cm",
                                      "/dev/infiniband/uverbs0"}));
  std::string joined;
  for (const auto& a : (*launcher)->CliRunArgv(Request({"true"}, {}), "cid")) joined += a + " ";
  EXPECT_NE(joined.find("--device=" + options_.device_dir +
                        "/infiniband/uverbs0:/dev/infiniband/uverbs0 "),
            std::string::npos)
      << joined;

  options_.rdma = false;
  auto without = OciLauncher::Create(options_, &processes_);
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  auto config = (*without)->BundleConfig(Request({"/bin/true"}, {}), "/rootfs");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->find("infiniband"), std::string::npos) << *config;
  joined.clear();
  for (const auto& a : (*without)->CliRunArgv(Request({"true"}, {}), "cid")) joined += a + " ";
  EXPECT_EQ(joined.find("infiniband"), std::string::npos) << joined;
}

// A container on a MIG device gets its GPU's node and its instances' capability nodes, as the
// agent names them (agent/inventory.h's GpuDeviceNodes), and sees it by its UUID.
TEST_P(OciLauncherTest, AContainerOnAMigDeviceGetsItsGpuAndCapabilityNodes) {
  options_.device_dir = (dir_ / "dev").string();
  options_.runtime = GetParam();
  if (!mknod_ok_) GTEST_SKIP() << "mknod is not permitted here";
  fs::create_directories(dir_ / "dev" / "nvidia-caps");
  ASSERT_EQ(::mknod((dir_ / "dev" / "nvidia-caps" / "nvidia-cap66").c_str(), S_IFCHR | 0444,
                    makedev(238, 66)),
            0);
  auto launcher = OciLauncher::Create(options_, &processes_);
  if (!launcher.ok()) GTEST_SKIP() << "no OCI runtime: " << launcher.status().message();
  LaunchRequest request = Request({"/bin/true"}, {2});
  request.visible_gpus = {"MIG-fake-1-0"};
  request.gpu_device_nodes = {"nvidia1", "nvidia-caps/nvidia-cap66"};
  auto config = (*launcher)->BundleConfig(request, "/rootfs");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto json = nlohmann::json::parse(*config);
  std::vector<std::string> paths;
  for (const auto& device : json["linux"]["devices"]) paths.push_back(device["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{"/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap66",
                                             "/dev/nvidiactl"}));
  bool visible = false;
  for (const auto& var : json["process"]["env"]) {
    visible |= var == "NVIDIA_VISIBLE_DEVICES=MIG-fake-1-0";
  }
  EXPECT_TRUE(visible) << json["process"]["env"];
  std::string joined;
  for (const auto& a : (*launcher)->CliRunArgv(request, "cid")) joined += a + " ";
  EXPECT_NE(joined.find("--env CUDA_VISIBLE_DEVICES=MIG-fake-1-0 "), std::string::npos) << joined;
}

// A job owner's replica runs as the owner's account in the container too: OCI process.user and
// the CLI's --user, with the account's other groups. Without one, root (the container's).
TEST_P(OciLauncherTest, TheContainerProcessRunsAsTheOwnersAccount) {
  options_.device_dir = (dir_ / "dev").string();
  auto launcher = OciLauncher::Create(options_, &processes_);
  if (!launcher.ok()) GTEST_SKIP() << "no OCI runtime: " << launcher.status().message();
  LaunchRequest request = Request({"/bin/true"}, {});
  auto as_root = (*launcher)->BundleConfig(request, "/rootfs");
  ASSERT_TRUE(as_root.ok()) << as_root.status().ToString();
  EXPECT_EQ(nlohmann::json::parse(*as_root)["process"]["user"],
            nlohmann::json({{"uid", 0}, {"gid", 0}}));
  RunAs run_as;
  run_as.user = "alice";
  run_as.account = "ualice";
  run_as.uid = 1234;
  run_as.gid = 1234;
  run_as.groups = {1234, 44, 27};
  request.run_as = run_as;
  auto config = (*launcher)->BundleConfig(request, "/rootfs");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(nlohmann::json::parse(*config)["process"]["user"],
            nlohmann::json({{"uid", 1234}, {"gid", 1234}, {"additionalGids", {44, 27}}}));
  auto argv = (*launcher)->CliRunArgv(request, "cid");
  std::string joined;
  for (const auto& a : argv) joined += a + " ";
  EXPECT_NE(joined.find("--user 1234:1234 --group-add=44 --group-add=27 "), std::string::npos)
      << joined;
}

TEST_P(OciLauncherTest, CliArgvUsesHostNetworkAndPinnedDevices) {
  options_.runtime = "auto";
  options_.device_dir = (dir_ / "dev").string();
  auto launcher = OciLauncher::Create(options_, &processes_);
  if (!launcher.ok()) GTEST_SKIP() << "no OCI runtime: " << launcher.status().message();
  if (!mknod_ok_) GTEST_SKIP() << "mknod is not permitted here";
  auto argv = (*launcher)->CliRunArgv(Request({"python3", "train.py"}, {2}), "cid");
  std::string joined;
  for (const auto& a : argv) joined += a + " ";
  EXPECT_NE(joined.find("--network host"), std::string::npos) << joined;
  EXPECT_NE(joined.find("nvidia2"), std::string::npos) << joined;
  EXPECT_NE(joined.find("--env NVIDIA_VISIBLE_DEVICES=2 "), std::string::npos) << joined;
  EXPECT_EQ(joined.find("nvidia1"), std::string::npos) << joined;
  EXPECT_NE(joined.find("python3 train.py"), std::string::npos) << joined;

  // The agent's hard limits, as the bundle's rlimits (RDMA registration needs the memlock).
  struct rlimit memlock;
  ASSERT_EQ(::getrlimit(RLIMIT_MEMLOCK, &memlock), 0);
  const std::string hard =
      memlock.rlim_max == RLIM_INFINITY ? "-1" : std::to_string(memlock.rlim_max);
  EXPECT_NE(joined.find("--ulimit=memlock=" + hard + ":" + hard + " "), std::string::npos)
      << joined;
  EXPECT_NE(joined.find("--ulimit=nofile="), std::string::npos) << joined;

  // cpus: CPU shares, and a quota only with cpu_quota.
  LaunchRequest shared = Request({"true"}, {});
  shared.cpus = 3;
  auto shares = (*launcher)->CliRunArgv(shared, "cid");
  EXPECT_NE(std::find(shares.begin(), shares.end(), "--cpu-shares=3072"), shares.end());
  EXPECT_EQ(std::find(shares.begin(), shares.end(), "--cpus=3"), shares.end());
  shared.cpu_quota = true;
  auto capped = (*launcher)->CliRunArgv(shared, "cid");
  EXPECT_NE(std::find(capped.begin(), capped.end(), "--cpu-shares=3072"), capped.end());
  EXPECT_NE(std::find(capped.begin(), capped.end(), "--cpus=3"), capped.end());

  // The CLI applies the image's ENTRYPOINT and CMD itself: args alone follow the image name (in
  // place of its CMD); a command is --entrypoint (which clears the CMD) and the rest.
  LaunchRequest args_only = Request({"--epochs=3"}, {});
  args_only.container_command = LaunchRequest::ContainerCommand{{}, {"--epochs=3"}};
  auto with_args = (*launcher)->CliRunArgv(args_only, "cid");
  EXPECT_EQ(std::find(with_args.begin(), with_args.end(), "--entrypoint"), with_args.end());
  ASSERT_GE(with_args.size(), 2u);
  EXPECT_EQ(with_args[with_args.size() - 2], args_only.image);
  EXPECT_EQ(with_args.back(), "--epochs=3");
  LaunchRequest command = Request({"python3", "t.py", "-v"}, {});
  command.container_command = LaunchRequest::ContainerCommand{{"python3", "t.py"}, {"-v"}};
  auto with_command = (*launcher)->CliRunArgv(command, "cid");
  auto entrypoint = std::find(with_command.begin(), with_command.end(), "--entrypoint");
  ASSERT_NE(entrypoint, with_command.end());
  EXPECT_EQ(*(entrypoint + 1), "python3");
  auto image = std::find(with_command.begin(), with_command.end(), command.image);
  ASSERT_NE(image, with_command.end());
  EXPECT_EQ(std::vector<std::string>(image + 1, with_command.end()),
            (std::vector<std::string>{"t.py", "-v"}));
}

TEST_P(OciLauncherTest, UnknownRuntimeAndBadImageAreClearErrors) {
  options_.runtime = "lxc";
  EXPECT_EQ(OciLauncher::Create(options_, &processes_).status().code(),
            StatusCode::kInvalidArgument);
  options_.runtime = "auto";
  auto launcher = OciLauncher::Create(options_, &processes_);
  if (!launcher.ok()) GTEST_SKIP() << "no OCI runtime: " << launcher.status().message();
  LaunchRequest request = Request({"/bin/true"}, {});
  request.image = (dir_ / "work").string();  // exists, but is not a root filesystem
  Status prepared = (*launcher)->Prepare(request);
  ASSERT_FALSE(prepared.ok());
  EXPECT_NE(prepared.message().find("neither a root filesystem"), std::string::npos)
      << prepared.ToString();
  // Launch runs only what Prepare made ready.
  auto launched = (*launcher)->Launch(request);
  ASSERT_FALSE(launched.ok());
  EXPECT_EQ(launched.status().message(),
            "container " +
                ContainerId(options_.container_tag, request.job, request.replica, request.attempt) +
                ": not prepared (Prepare did not run or failed)");
}

TEST_P(OciLauncherTest, ContainerSeesEnvOutputDirAndOnlyPinnedGpus) {
  std::string why;
  if (!CanRunContainers(&why)) GTEST_SKIP() << why;
  LaunchRequest request =
      Request({"/bin/sh", "-c",
               "ls /dev; echo TF_CONFIG=$TF_CONFIG; echo hi > \"$AIP_MODEL_DIR/from_container\""},
              {1, 3});
  ASSERT_TRUE(launcher_->Prepare(request).ok());
  // Prepare wrote the bundle, off the loop.
  EXPECT_NE(ReadFile(dir_ / "work" / "bundle" / "config.json").find("NVIDIA_VISIBLE_DEVICES=1,3"),
            std::string::npos);
  const std::string log = RunToEnd(request);
  EXPECT_NE(log.find("nvidia1"), std::string::npos) << log;
  EXPECT_NE(log.find("nvidia3"), std::string::npos) << log;
  EXPECT_NE(log.find("nvidiactl"), std::string::npos) << log;
  EXPECT_EQ(log.find("nvidia0"), std::string::npos) << log;
  EXPECT_EQ(log.find("nvidia2"), std::string::npos) << log;
  EXPECT_NE(log.find(R"(TF_CONFIG={"task":{"type":"worker","index":0}})"), std::string::npos)
      << log;
  EXPECT_EQ(ReadFile(dir_ / "out" / "model" / "from_container"), "hi\n");
}

// The runtime is the agent's child: the CPUs near the replica's GPUs reach the container's
// process through it, with no cpuset in the bundle (which a host without that cgroup controller
// would refuse).
TEST_P(OciLauncherTest, TheContainerRunsOnTheCpusItIsGiven) {
  std::string why;
  if (!CanRunContainers(&why)) GTEST_SKIP() << why;
  const std::vector<int> own = OwnCpus();
  ASSERT_FALSE(own.empty());
  const int last = own.back();
  LaunchRequest request =
      Request({"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"}, {});
  request.cpu_affinity = {last};
  ASSERT_TRUE(launcher_->Prepare(request).ok());
  EXPECT_EQ(ReadFile(dir_ / "work" / "bundle" / "config.json").find("\"cpus\""), std::string::npos);
  const std::string log = RunToEnd(request);
  EXPECT_NE(log.find("Cpus_allowed_list:\t" + std::to_string(last) + "\n"), std::string::npos)
      << "runtime " << launcher_->runtime() << " log:\n"
      << log;
}

// A replica's cpus is its weight when the node's CPUs are contended (shares: cgroup v1's
// cpu.shares, v2's cpu.weight as runtimes convert it) and, only with a CPU quota, also a cap: the
// container reads its own cgroup's controls (v1 here, where the cpu controller is; v2 elsewhere).
TEST_P(OciLauncherTest, AContainersCpusAreItsShareAndACapOnlyWithAQuota) {
  std::string why;
  if (!CanRunContainers(&why)) GTEST_SKIP() << why;
  auto controls = [&](bool quota) {
    LaunchRequest request = Request({}, {});
    request.replica = quota ? "worker-1" : "worker-0";
    const std::string cgroup =
        "cohort/" + ContainerId(options_.container_tag, request.job, request.replica, 0);
    request.argv = {"/bin/sh", "-c",
                    "cd /sys/fs/cgroup/cpu/" + cgroup +
                        " 2>/dev/null && echo v1 $(cat "
                        "cpu.shares cpu.cfs_quota_us); cd /sys/fs/cgroup/" +
                        cgroup + " 2>/dev/null && echo v2 $(cat cpu.weight cpu.max); true"};
    request.cpus = 3;
    request.cpu_quota = quota;
    EXPECT_TRUE(launcher_->Prepare(request).ok());
    return RunToEnd(request);
  };
  const std::string shared = controls(false);
  const std::string capped = controls(true);
  if (shared.find("v1 ") == std::string::npos && shared.find("v2 ") == std::string::npos) {
    GTEST_SKIP() << "runtime " << launcher_->runtime()
                 << " put the container where no cpu controller is; it said:\n"
                 << shared;
  }
  // 3 CPUs: 3072 shares, weight 118 (1 + (3072 - 2) * 9999 / 262142); no quota, or 300 ms a 100.
  EXPECT_TRUE(shared.find("v1 3072 -1\n") != std::string::npos ||
              shared.find("v2 118 max 100000\n") != std::string::npos)
      << "runtime " << launcher_->runtime() << " log:\n"
      << shared;
  EXPECT_TRUE(capped.find("v1 3072 300000\n") != std::string::npos ||
              capped.find("v2 118 300000 100000\n") != std::string::npos)
      << "runtime " << launcher_->runtime() << " log:\n"
      << capped;
}

// In a real container the RDMA devices are there, with the host's numbers.
TEST_P(OciLauncherTest, TheContainerSeesTheNodesRdmaDevices) {
  std::string why;
  if (!CanRunContainers(&why)) GTEST_SKIP() << why;
  if (!MakeRdmaDevices()) GTEST_SKIP() << "mknod is not permitted here";
  LaunchRequest request = Request({"/bin/sh", "-c", "ls -l /dev/infiniband"}, {});
  ASSERT_TRUE(launcher_->Prepare(request).ok());
  const std::string log = RunToEnd(request);
  EXPECT_NE(log.find("231, 192"), std::string::npos) << "runtime " << launcher_->runtime() << ":\n"
                                                     << log;
  EXPECT_NE(log.find(" 10,  58"), std::string::npos) << log;
  EXPECT_NE(log.find("uverbs0"), std::string::npos) << log;
  EXPECT_NE(log.find("rdma_cm"), std::string::npos) << log;
}

TEST_P(OciLauncherTest, KillAllStopsTheContainerAndReleaseDeletesIt) {
  std::string why;
  if (!CanRunContainers(&why)) GTEST_SKIP() << why;
  LaunchRequest request = Request({"/bin/sh", "-c", "sleep 300 & sleep 300"}, {});
  ASSERT_TRUE(launcher_->Prepare(request).ok());
  auto process = launcher_->Launch(request);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  ASSERT_TRUE(testing::WaitUntil([&] { return (*process)->AnyAlive(); }, 20s))
      << "the container never ran: " << ReadFile(dir_ / "work" / "log");
  (*process)->KillAll();
  int code = Wait(**process);
  EXPECT_NE(code, 0);
  EXPECT_TRUE(KillUntilGone(**process));
  (*process)->Release();
  // The delete runs off the caller's thread; destroying the launcher lets it finish.
  const std::vector<std::string> state =
      launcher_->RuntimeArgv({"state", ContainerId(options_.container_tag, request.job,
                                                   request.replica, request.attempt)});
  launcher_.reset();
  CapturedCommand after = RunCaptured(state);
  EXPECT_NE(after.exit_code, 0) << "the container is still there: " << after.output;
  EXPECT_TRUE(RuntimeSaysGone(after.output)) << after.output;
}

// Container ids are the host runtime's: two agents of one host (two clusters, test clusters in
// parallel) may run the same attempt of the same job name. Each agent's ids carry its work dir's
// tag, so the second one's removal of a leftover of its own never reaches the first's container.
TEST_P(OciLauncherTest, TwoAgentsOfOneHostRunTheSameAttemptOfAJobSideBySide) {
  std::string why;
  if (!CanRunContainers(&why)) GTEST_SKIP() << why;
  const LaunchRequest first_request = Request({"/bin/sh", "-c", "sleep 300"}, {});
  const std::string first_id = IdOf(options_, first_request);
  EXPECT_EQ(first_id.rfind("cohort-" + options_.container_tag + "-", 0), 0u) << first_id;
  ASSERT_TRUE(launcher_->Prepare(first_request).ok());
  auto first = launcher_->Launch(first_request);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(testing::WaitUntil([&] { return Running(first_id); }, 20s))
      << "the container never ran: " << ReadFile(dir_ / "work" / "log");

  OtherAgent other = AnotherAgent("work2");
  ASSERT_TRUE(other.launcher);
  // The same job, replica and attempt.
  const LaunchRequest second_request = In(first_request, "work2");
  const std::string second_id = IdOf(other.options, second_request);
  EXPECT_NE(first_id, second_id);
  ASSERT_TRUE(other.launcher->Prepare(second_request).ok());
  auto second = other.launcher->Launch(second_request);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(testing::WaitUntil([&] { return Running(second_id); }, 20s))
      << "the second container never ran: " << ReadFile(dir_ / "work2" / "log");
  // The first one's runtime process and container live on.
  int status = 0;
  EXPECT_EQ(::waitpid((*first)->pid(), &status, WNOHANG), 0)
      << "the first container's runtime ended: " << ReadFile(dir_ / "work" / "log");
  EXPECT_TRUE(Running(first_id)) << RunCaptured(launcher_->RuntimeArgv({"list"})).output;

  for (auto* process : {&**first, &**second}) {
    process->KillAll();
    Wait(*process);
    EXPECT_TRUE(KillUntilGone(*process));
    process->Release();
  }
}

// An agent killed with SIGKILL takes its runtime's foreground processes with it, not their
// containers: they run on, holding GPUs the coordinator hands out again. Its next start removes
// them, and only them: not those a live restart handed over, not another agent's.
TEST_P(OciLauncherTest, AStartRemovesTheContainersAKilledRunLeftAndNoOthers) {
  std::string why;
  if (!CanRunContainers(&why)) GTEST_SKIP() << why;
  auto launch = [&](OciLauncher& launcher, const OciOptions& options, LaunchRequest request) {
    EXPECT_TRUE(launcher.Prepare(request).ok());
    auto process = launcher.Launch(request);
    EXPECT_TRUE(process.ok()) << process.status().ToString();
    if (!process.ok()) return std::unique_ptr<ReplicaProcess>();
    EXPECT_TRUE(testing::WaitUntil([&] { return Running(IdOf(options, request)); }, 20s))
        << "the container never ran: " << ReadFile(request.log_path);
    return std::move(*process);
  };
  LaunchRequest left_request = Request({"/bin/sh", "-c", "sleep 300"}, {});
  LaunchRequest kept_request = In(left_request, "work-kept");
  kept_request.replica = "worker-1";
  const LaunchRequest other_request = In(left_request, "work2");  // another agent's, the same
  OtherAgent other_agent = AnotherAgent("work2");
  ASSERT_TRUE(other_agent.launcher);

  std::unique_ptr<ReplicaProcess> left = launch(*launcher_, options_, left_request);
  std::unique_ptr<ReplicaProcess> kept = launch(*launcher_, options_, kept_request);
  std::unique_ptr<ReplicaProcess> other =
      launch(*other_agent.launcher, other_agent.options, other_request);
  ASSERT_TRUE(left && kept && other);
  const std::string left_id = IdOf(options_, left_request), kept_id = IdOf(options_, kept_request),
                    other_id = IdOf(other_agent.options, other_request);

  // The agent's death, as far as this container goes: its runtime process is SIGKILLed.
  ASSERT_EQ(::kill(left->pid(), SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(left->pid(), &status, 0), left->pid());
  left->OnExited(status);
  ASSERT_TRUE(testing::WaitUntil([&] { return Running(left_id); }, 5s))
      << "the container did not outlive its runtime process, which this test is about";

  auto next_start = OciLauncher::Create(options_, &processes_);
  ASSERT_TRUE(next_start.ok()) << next_start.status().ToString();
  StatusOr<int> swept = (*next_start)->SweepLeftovers({kept_id});
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 1);
  CapturedCommand gone = RunCaptured(launcher_->RuntimeArgv({"state", left_id}));
  EXPECT_TRUE(gone.exit_code != 0 && RuntimeSaysGone(gone.output)) << gone.output;
  EXPECT_TRUE(Running(kept_id));
  EXPECT_TRUE(Running(other_id));
  // Without a tag it cannot tell its own: it removes nothing.
  OciOptions untagged = options_;
  untagged.container_tag = "";
  auto older = OciLauncher::Create(untagged, &processes_);
  ASSERT_TRUE(older.ok());
  EXPECT_EQ(*(*older)->SweepLeftovers({}), 0);
  EXPECT_TRUE(Running(kept_id));

  left->Release();
  for (ReplicaProcess* process : {kept.get(), other.get()}) {
    process->KillAll();
    Wait(*process);
    EXPECT_TRUE(KillUntilGone(*process));
    process->Release();
  }
}

// A container id carries its agent's tag and is safe for every runtime.
TEST(ContainerIdTest, TheIdCarriesTheAgentsTagAndIsSafeForEveryRuntime) {
  const std::string tag = AgentTag("/var/lib/cohort-agent");
  EXPECT_EQ(ContainerId(tag, "train job", "worker/0", 2),
            "cohort-" + tag + "-train_job-worker_0-2");
  EXPECT_EQ(ContainerId("", "train", "chief-0", 0), "cohort-train-chief-0-0");
}

// `cohort exec` in a container replica goes through the runtime's exec (agent/exec_in_replica.h):
// the command sees the container's environment and filesystem, not the node's.
TEST_P(OciLauncherTest, ACommandRunsInsideTheRunningContainer) {
  std::string why;
  if (!CanRunContainers(&why)) GTEST_SKIP() << why;
  LaunchRequest request = Request({"/bin/sh", "-c", "echo ready > /tmp/ready; sleep 300"}, {});
  ASSERT_TRUE(launcher_->Prepare(request).ok());
  auto process = launcher_->Launch(request);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  ExecTarget target;
  target.container_exec = (*process)->ExecPrefix(ExecStdio::kNone);
  ASSERT_FALSE(target.container_exec.empty());
  // Until the container runs its command (the runtime creates it first, then starts it).
  ExecResult ran;
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        ran = RunInReplica(target, (*process)->command_pid(),
                           {"/bin/sh", "-c", "cat /tmp/ready; echo TF_CONFIG=$TF_CONFIG; exit 4"},
                           10s);
        return ran.exit_code == 4;
      },
      20s))
      << ran.exit_code << ": " << ran.output << "; log: " << ReadFile(dir_ / "work" / "log");
  EXPECT_EQ(ran.output, "ready\nTF_CONFIG={\"task\":{\"type\":\"worker\",\"index\":0}}\n");
  (*process)->KillAll();
  Wait(**process);
  EXPECT_TRUE(KillUntilGone(**process));
  (*process)->Release();
}

// A stock image's environment (PATH with its conda bin first, LD_LIBRARY_PATH, ...) is the
// container's, under the replica's: the process.env of the config.json umoci writes beside the
// unpacked rootfs.
TEST_P(OciLauncherTest, TheImagesOwnEnvironmentLiesUnderTheReplicas) {
  auto launcher = OciLauncher::Create(options_, &processes_);
  if (!launcher.ok()) GTEST_SKIP() << "no OCI runtime: " << launcher.status().message();
  fs::create_directories(dir_ / "image" / "rootfs");
  std::ofstream(dir_ / "image" / "config.json")
      << R"({"ociVersion": "1.0.0", "process": {"env": ["PATH=/opt/conda/bin:/usr/bin",)"
      << R"( "LD_LIBRARY_PATH=/usr/local/nvidia/lib64", "TF_CONFIG=image", "EMPTY="]}})";
  auto config =
      (*launcher)->BundleConfig(Request({"/bin/true"}, {}), (dir_ / "image" / "rootfs").string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  std::set<std::string> env;
  const nlohmann::json parsed = nlohmann::json::parse(*config);
  for (const auto& var : parsed["process"]["env"]) env.insert(var.get<std::string>());
  EXPECT_TRUE(env.count("PATH=/opt/conda/bin:/usr/bin")) << *config;
  EXPECT_TRUE(env.count("LD_LIBRARY_PATH=/usr/local/nvidia/lib64")) << *config;
  EXPECT_TRUE(env.count("EMPTY=")) << *config;
  EXPECT_TRUE(env.count(R"(TF_CONFIG={"task":{"type":"worker","index":0}})")) << *config;
  EXPECT_FALSE(env.count("TF_CONFIG=image")) << *config;
  // A bare root filesystem has no environment of its own: the default PATH.
  auto bare = (*launcher)->BundleConfig(Request({"/bin/true"}, {}), (dir_ / "rootfs").string());
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_NE(bare->find("\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\""),
            std::string::npos)
      << *bare;
}

// The agent's sitecustomize (agent/python_site.h) reaches a runc/crun container's Python: mounted
// read-only at its own path and first on PYTHONPATH, above the image's, unless the pool opts out.
// The attempt's working directory, where the flight recorder and stack dumps go, is mounted at its
// own path with docker/podman too.
TEST_P(OciLauncherTest, TheAgentsSitecustomizeGoesFirstOnTheContainersPythonPath) {
  auto launcher = OciLauncher::Create(options_, &processes_);
  if (!launcher.ok()) GTEST_SKIP() << "no OCI runtime: " << launcher.status().message();
  fs::create_directories(dir_ / "image" / "rootfs");
  std::ofstream(dir_ / "image" / "config.json") << R"({"process": {"env": ["PYTHONPATH=/app"]}})";
  const std::string site = (dir_ / "site").string();
  LaunchRequest request = Request({"python3", "train.py"}, {});
  request.python_site = site;
  auto bundle = [&](const LaunchRequest& r) {
    auto config = (*launcher)->BundleConfig(r, (dir_ / "image" / "rootfs").string());
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return config.ok() ? nlohmann::json::parse(*config) : nlohmann::json::object();
  };
  auto env_of = [](const nlohmann::json& config) {
    std::set<std::string> env;
    for (const auto& var : config["process"]["env"]) env.insert(var.get<std::string>());
    return env;
  };
  auto site_mount = [&](const nlohmann::json& config) -> nlohmann::json {
    for (const auto& mount : config["mounts"]) {
      if (mount["destination"] == site) return mount;
    }
    return nullptr;
  };
  const nlohmann::json with = bundle(request);
  EXPECT_TRUE(env_of(with).count("PYTHONPATH=" + site + ":/app")) << with["process"]["env"];
  const nlohmann::json mount = site_mount(with);
  ASSERT_TRUE(mount.is_object()) << with["mounts"];
  EXPECT_EQ(mount["source"], site);
  EXPECT_NE(mount["options"].dump().find("\"ro\""), std::string::npos) << mount;
  request.env["COHORT_PYTHON_STACKS"] = "0";
  const nlohmann::json without = bundle(request);
  EXPECT_TRUE(env_of(without).count("PYTHONPATH=/app")) << without["process"]["env"];
  EXPECT_TRUE(site_mount(without).is_null()) << without["mounts"];

  std::string joined;
  for (const auto& a : (*launcher)->CliRunArgv(request, "cid")) joined += a + " ";
  EXPECT_NE(joined.find("--volume " + request.working_dir + ":" + request.working_dir + " "),
            std::string::npos)
      << joined;
}

// A stock Python script in a real container, which imports nothing of Cohort: the agent's
// sitecustomize registers it, so the agent's stack dump (agent/stack_dump.h) of the container's
// processes has its Python stack, from the file it wrote in the attempt's working directory under
// its own PID namespace's pid, and StackWhere reads where it waits. The root filesystem is the
// busybox one plus Debian's Python, hard-linked from this machine (skipped, saying so, where it
// cannot be).
TEST_P(OciLauncherTest, AStockPythonScriptInAContainerHasItsStacksTaken) {
  std::string why;
  if (!CanRunContainers(&why)) GTEST_SKIP() << why;
  const fs::path python = "/usr/bin/python3.11", stdlib = "/usr/lib/python3.11";
  if (!fs::exists(python) || !fs::exists(stdlib)) GTEST_SKIP() << "no Debian python3.11 here";
  const fs::path root = dir_ / "rootfs";
  std::error_code ec;
  auto link_in = [&](const fs::path& from) {
    fs::create_directories(root / from.relative_path().parent_path(), ec);
    fs::copy(from, root / from.relative_path(),
             fs::copy_options::recursive | fs::copy_options::create_hard_links |
                 fs::copy_options::copy_symlinks | fs::copy_options::skip_existing,
             ec);
    return !ec;
  };
  bool linked = link_in(python) && link_in(stdlib);
  if (fs::exists("/etc/python3.11")) linked = linked && link_in("/etc/python3.11");
  // The interpreter's shared libraries, as ldd lists them.
  // The interpreter's shared libraries and loader, as ldd names them, each a file at that path
  // (symbolic links resolved: the host's /lib may be one to /usr/lib).
  CapturedCommand ldd = RunCaptured({"/usr/bin/ldd", python.string()});
  std::istringstream lines(ldd.output);
  for (std::string line; linked && std::getline(lines, line);) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const fs::path lib = line.substr(slash, line.find(' ', slash) - slash);
    fs::create_directories(root / lib.relative_path().parent_path(), ec);
    if (!ec) fs::create_hard_link(fs::canonical(lib, ec), root / lib.relative_path(), ec);
    linked = !ec;
  }
  if (!linked)
    GTEST_SKIP() << "cannot hard-link Python into the test's root filesystem: " << ec.message();

  fs::create_directories(dir_ / "agent-work");
  auto site = InstallPythonSite((dir_ / "agent-work").string());
  ASSERT_TRUE(site.ok()) << site.status().ToString();
  std::ofstream(dir_ / "work" / "stall.py")
      << "import time\n\ndef wait_for_data():\n    time.sleep(300)\n\nprint('started', "
         "flush=True)\nwait_for_data()\n";
  LaunchRequest request =
      Request({"/usr/bin/python3.11", (dir_ / "work" / "stall.py").string()}, {});
  const std::string stacks = (dir_ / "work" / "stacks").string();
  request.env["COHORT_STACK_DUMP_DIR"] = stacks;
  request.env["COHORT_STACK_DUMP_SIGNAL"] = std::to_string(StackDumpSignal());
  request.python_site = *site;
  ASSERT_TRUE(launcher_->Prepare(request).ok());
  auto process = launcher_->Launch(request);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return ReadFile(dir_ / "work" / "log").find("started") != std::string::npos; }, 30s))
      << "log: " << ReadFile(dir_ / "work" / "log");
  const std::string dump = TakeStackDump((*process)->command_pid(), stacks, "test");
  EXPECT_NE(dump.find("-- Python stacks (faulthandler):"), std::string::npos) << dump;
  // The Python process is the runtime's descendant, not its first process: named by its pid.
  EXPECT_TRUE(std::regex_match(StackWhere(dump),
                               std::regex(R"(pid [0-9]+: in wait_for_data \(stall\.py:4\))")))
      << StackWhere(dump) << "\n"
      << dump;
  (*process)->KillAll();
  Wait(**process);
  EXPECT_TRUE(KillUntilGone(**process));
  (*process)->Release();
}

INSTANTIATE_TEST_SUITE_P(Runtimes, OciLauncherTest, ::testing::Values("auto", "runc", "crun"));

// An overlay's upper directory may be on this machine's disk and on a tmpfs, not on an overlayfs
// (an agent inside a container), whose magic number statfs reports.
TEST(ImageConfigTest, AnOverlayUpperMayNotBeOnOverlayfs) {
  EXPECT_TRUE(CanBeOverlayUpper(fs::temp_directory_path().string()));
  EXPECT_TRUE(CanBeOverlayUpper("/dev/shm"));
  EXPECT_TRUE(CanBeOverlayUpper("/no/such/dir"));  // unknown: the mount itself will say
  if (::geteuid() != 0) GTEST_SKIP() << "mounting an overlayfs needs root";
  const fs::path dir = fs::temp_directory_path() / ("cohort-ovl-" + std::to_string(::getpid()));
  for (const char* sub : {"lower", "upper", "work", "merged"}) fs::create_directories(dir / sub);
  const std::string options = "lowerdir=" + (dir / "lower").string() +
                              ",upperdir=" + (dir / "upper").string() +
                              ",workdir=" + (dir / "work").string();
  if (::mount("overlay", (dir / "merged").c_str(), "overlay", 0, options.c_str()) != 0) {
    fs::remove_all(dir);
    GTEST_SKIP() << "no overlayfs here: " << std::strerror(errno);
  }
  EXPECT_FALSE(CanBeOverlayUpper((dir / "merged").string()));
  ::umount((dir / "merged").c_str());
  fs::remove_all(dir);
}

// What ReadImageConfig makes of config.json files: none, bare roots, and files that say nothing
// usable or are links, each failing with the file named.
TEST(ImageConfigTest, ReadsTheProcessEnvAndCwdAndRefusesWhatIsNotPlain) {
  const fs::path dir =
      fs::temp_directory_path() / ("cohort-image-env-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "rootfs");
  const std::string rootfs = (dir / "rootfs").string();
  auto none = ReadImageConfig(rootfs);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->env.empty());
  EXPECT_EQ(none->cwd, "");
  auto write = [&](const std::string& text) { std::ofstream(dir / "config.json") << text; };
  write(R"({"process": {"env": ["A=1", "B=x=y"], "cwd": "/workspace/app",)"
        R"( "args": ["/opt/nvidia/entrypoint.sh", "python", "-m", "trainer"]}})");
  auto two = ReadImageConfig(rootfs);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->env, (std::map<std::string, std::string>{{"A", "1"}, {"B", "x=y"}}));
  EXPECT_EQ(two->cwd, "/workspace/app");
  // Nothing tells its ENTRYPOINT and CMD apart: all of it is CMD.
  EXPECT_TRUE(two->entrypoint.empty());
  EXPECT_EQ(two->cmd,
            (std::vector<std::string>{"/opt/nvidia/entrypoint.sh", "python", "-m", "trainer"}));
  EXPECT_TRUE(ReadImageConfig(dir.string())->env.empty());  // not named rootfs: no config read
  write(R"({"process": {"cwd": "/"}})");                    // umoci's when the image has no WORKDIR
  EXPECT_EQ(ReadImageConfig(rootfs)->cwd, "");
  for (const char* bad :
       {"{", "[1]", R"({"process": {"env": "A=1"}})", R"({"process": {"env": [5]}})",
        R"({"process": {"env": ["NOEQUALS"]}})", R"({"process": {"env": ["=1"]}})",
        R"({"process": {"cwd": "app"}})", R"({"process": {"cwd": "/a/../etc"}})",
        R"({"process": {"cwd": "/a,upperdir=/x"}})", R"({"process": {"cwd": 7}})",
        R"({"process": {"args": "sh"}})", R"({"process": {"args": ["sh", 1]}})"}) {
    write(bad);
    auto refused = ReadImageConfig(rootfs);
    EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << bad;
    EXPECT_NE(refused.status().message().find((dir / "config.json").string()), std::string::npos)
        << refused.status().message();
  }
  // The agent reads it as root: a link to another file is refused, not followed.
  fs::remove(dir / "config.json");
  fs::create_symlink("/etc/hostname", dir / "config.json");
  EXPECT_EQ(ReadImageConfig(rootfs).status().code(), StatusCode::kFailedPrecondition);
  fs::remove_all(dir);
}

// The ENTRYPOINT and CMD that WriteImageCommand read apart split the config's process.args, as
// long as the two still join to them; a split file that is not plain is refused, named.
TEST(ImageConfigTest, TheImageCommandFileSplitsProcessArgsIntoEntrypointAndCmd) {
  const fs::path dir =
      fs::temp_directory_path() / ("cohort-image-split-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "rootfs");
  const std::string rootfs = (dir / "rootfs").string();
  std::ofstream(dir / "config.json")
      << R"({"process": {"args": ["/opt/nvidia/entrypoint.sh", "python", "-m", "trainer"]}})";
  auto split = [&](const std::string& text) {
    std::ofstream(dir / "cohort-image-command.json", std::ios::trunc) << text;
    return ReadImageConfig(rootfs);
  };
  auto apart =
      split(R"({"entrypoint": ["/opt/nvidia/entrypoint.sh"], "cmd": ["python", "-m", "trainer"]})");
  ASSERT_TRUE(apart.ok()) << apart.status().ToString();
  EXPECT_EQ(apart->entrypoint, (std::vector<std::string>{"/opt/nvidia/entrypoint.sh"}));
  EXPECT_EQ(apart->cmd, (std::vector<std::string>{"python", "-m", "trainer"}));
  // The config was rewritten since: the stale split is not taken.
  auto stale = split(R"({"entrypoint": ["/bin/sh"], "cmd": ["-c", "true"]})");
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_TRUE(stale->entrypoint.empty());
  EXPECT_EQ(stale->cmd.size(), 4u);
  for (const char* bad : {"[]", "{", R"({"entrypoint": "sh"})", R"({"cmd": [1]})"}) {
    auto refused = split(bad);
    EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << bad;
    EXPECT_NE(refused.status().message().find((dir / "cohort-image-command.json").string()),
              std::string::npos)
        << refused.status().message();
  }
  fs::remove(dir / "cohort-image-command.json");
  fs::create_symlink("/etc/hostname", dir / "cohort-image-command.json");
  EXPECT_EQ(ReadImageConfig(rootfs).status().code(), StatusCode::kFailedPrecondition);
  fs::remove_all(dir);
}

// Kubernetes' (and Vertex's) rules: command replaces ENTRYPOINT and CMD, args alone replace CMD,
// neither runs both; an older coordinator's argv (command and args joined) is the whole command.
TEST(ContainerArgvTest, TheJobsCommandAndArgsLieOverTheImagesEntrypointAndCmd) {
  ImageConfig image;
  image.entrypoint = {"python", "-m", "trainer.task"};
  image.cmd = {"--epochs=1"};
  LaunchRequest request;
  request.image = "/images/trainer";
  using Argv = std::vector<std::string>;
  auto argv = [&](std::optional<LaunchRequest::ContainerCommand> given, Argv joined) {
    request.container_command = std::move(given);
    request.argv = std::move(joined);
    StatusOr<Argv> result = ContainerArgv(request, image);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : Argv{};
  };
  EXPECT_EQ(argv(std::nullopt, {}), (Argv{"python", "-m", "trainer.task", "--epochs=1"}));
  EXPECT_EQ(argv(LaunchRequest::ContainerCommand{{}, {"--epochs=5", "--lr=0.1"}},
                 {"--epochs=5", "--lr=0.1"}),
            (Argv{"python", "-m", "trainer.task", "--epochs=5", "--lr=0.1"}));
  EXPECT_EQ(argv(LaunchRequest::ContainerCommand{{"bash", "run.sh"}, {}}, {"bash", "run.sh"}),
            (Argv{"bash", "run.sh"}));  // the image's CMD goes with its ENTRYPOINT
  EXPECT_EQ(
      argv(LaunchRequest::ContainerCommand{{"python3", "t.py"}, {"-v"}}, {"python3", "t.py", "-v"}),
      (Argv{"python3", "t.py", "-v"}));
  EXPECT_EQ(argv(std::nullopt, {"python3", "t.py", "-v"}), (Argv{"python3", "t.py", "-v"}));
  // An image without an ENTRYPOINT: args alone are the command, as under docker.
  image.entrypoint.clear();
  EXPECT_EQ(argv(LaunchRequest::ContainerCommand{{}, {"sh", "-c", "true"}}, {"sh", "-c", "true"}),
            (Argv{"sh", "-c", "true"}));
  image.cmd.clear();
  request.container_command.reset();
  request.argv.clear();
  StatusOr<Argv> nothing = ContainerArgv(request, image);
  EXPECT_EQ(nothing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(nothing.status().message().find("/images/trainer names no ENTRYPOINT or CMD"),
            std::string::npos)
      << nothing.status().message();
}

// With the real umoci: an image made with an ENTRYPOINT and a CMD, unpacked; WriteImageCommand
// reads them apart from the layout's blobs, and a hostile umoci.json or a missing blob is named.
TEST(ImageConfigTest, TheEntrypointAndCmdAreReadApartFromARealLayout) {
  const std::string umoci = "/usr/bin/umoci";
  if (!fs::exists(umoci)) GTEST_SKIP() << "umoci is not installed (scripts/install-deps.sh)";
  const fs::path dir =
      fs::temp_directory_path() / ("cohort-image-layout-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string layout = (dir / "layout").string(), tagged = layout + ":t";
  const std::string bundle = (dir / "bundle").string();
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"init", "--layout", layout},
           {"new", "--image", tagged},
           {"config", "--image", tagged, "--config.entrypoint", "python", "--config.entrypoint",
            "-m", "--config.entrypoint", "trainer.task", "--config.cmd", "--epochs=1"},
           {"unpack", "--rootless", "--image", tagged, bundle}}) {
    auto run = testing::RunProcess(umoci, args);
    ASSERT_EQ(run.exit_code, 0) << "umoci " << args[0] << ": " << run.err;
  }
  ASSERT_TRUE(WriteImageCommand(layout, bundle).ok());
  auto image = ReadImageConfig(bundle + "/rootfs");
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->entrypoint, (std::vector<std::string>{"python", "-m", "trainer.task"}));
  EXPECT_EQ(image->cmd, (std::vector<std::string>{"--epochs=1"}));

  const std::string umoci_json = ReadFile(bundle + "/umoci.json");
  auto hostile = [&](const std::string& from, const std::string& to) {
    std::string text = umoci_json;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << text;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    std::ofstream(bundle + "/umoci.json", std::ios::trunc) << text;
    return WriteImageCommand(layout, bundle);
  };
  Status escapes = hostile("sha256:", "sha256:../../../../etc/");
  EXPECT_EQ(escapes.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(escapes.message().find("is not algorithm:hex"), std::string::npos) << escapes.message();
  Status missing = hostile("sha256:", "sha256:00");
  EXPECT_EQ(missing.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.message().find("lacks the blob sha256:00"), std::string::npos)
      << missing.message();
  for (const char* odd : {R"({"from_descriptor_path": []})", R"({"from_descriptor_path": 1})",
                          R"({"from_descriptor_path": {"descriptor_walk": [7]}})"}) {
    std::ofstream(bundle + "/umoci.json", std::ios::trunc) << odd;
    EXPECT_NE(WriteImageCommand(layout, bundle).message().find("umoci.json names no manifest"),
              std::string::npos)
        << odd;
  }
  fs::remove(bundle + "/umoci.json");
  EXPECT_NE(WriteImageCommand(layout, bundle).message().find("umoci.json is missing"),
            std::string::npos);
  fs::remove_all(dir);
}

// An image's WORKDIR is the container's cwd, with the code the image put there, and writable as
// under docker: the writes land in the attempt's image-workdir; the image itself is untouched. A
// job without a command runs the image's.
TEST_P(OciLauncherTest, TheImagesWorkdirIsTheCwdAndWritesLandInTheAttempt) {
  std::string why;
  if (!CanRunContainers(&why)) GTEST_SKIP() << why;
  // A bundle as the image: its rootfs (the busybox one, moved) and a config naming /app.
  fs::create_directories(dir_ / "image");
  fs::rename(dir_ / "rootfs", dir_ / "image" / "rootfs");
  fs::create_directories(dir_ / "image" / "rootfs" / "app");
  std::ofstream(dir_ / "image" / "rootfs" / "app" / "task.txt") << "code from the image\n";
  // No command in the job: the image's (its ENTRYPOINT and CMD, process.args) runs.
  std::ofstream(dir_ / "image" / "config.json")
      << R"({"process": {"cwd": "/app", "args": ["/bin/sh", "-c",)"
      << R"( "pwd; cat task.txt; echo made > out.txt; cat out.txt"]}})";
  LaunchRequest request = Request({}, {});
  request.image = (dir_ / "image").string();
  Status prepared = launcher_->Prepare(request);
  ASSERT_TRUE(prepared.ok()) << prepared.ToString();
  const std::string log = RunToEnd(request);
  EXPECT_EQ(log, "/app\ncode from the image\nmade\n");
  EXPECT_EQ(ReadFile(dir_ / "work" / "image-workdir" / "out.txt"), "made\n");
  EXPECT_FALSE(fs::exists(dir_ / "image" / "rootfs" / "app" / "out.txt"));

  // A WORKDIR that is a link out of the image's root (to the node's /etc) shows none of the
  // node's files: it counts as missing, and the attempt's image-workdir is mounted there.
  fs::remove_all(dir_ / "image" / "rootfs" / "app");
  fs::create_symlink("/etc", dir_ / "image" / "rootfs" / "app");
  auto config = launcher_->BundleConfig(request, (dir_ / "image" / "rootfs").string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const nlohmann::json parsed = nlohmann::json::parse(*config);
  bool app_mounted = false;
  for (const auto& mount : parsed["mounts"]) {
    if (mount["destination"] != "/app") continue;
    app_mounted = true;
    EXPECT_EQ(mount["type"], "bind") << mount;
    EXPECT_EQ(mount["source"], (dir_ / "work" / "image-workdir").string()) << mount;
  }
  EXPECT_TRUE(app_mounted) << parsed["mounts"];
  // Neither the job nor the image names a command: refused, saying so.
  std::ofstream(dir_ / "image" / "config.json") << R"({"process": {"cwd": "/app"}})";
  auto no_command = launcher_->BundleConfig(request, (dir_ / "image" / "rootfs").string());
  EXPECT_EQ(no_command.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_command.status().message().find("names no ENTRYPOINT or CMD"), std::string::npos)
      << no_command.status().message();
  EXPECT_EQ(parsed["mounts"].dump().find("lowerdir="), std::string::npos)
      << "no overlay of the node's /etc: " << parsed["mounts"];
}

}  // namespace
}  // namespace cohort::agent
