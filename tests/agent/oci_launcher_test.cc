// OciLauncher with a real OCI runtime (runc or crun from Debian) and a busybox root filesystem:
// the container sees its environment, its output directory and only its pinned GPUs' device
// nodes (fake nodes made with mknod stand in for /dev/nvidia* on a machine without GPUs).
#include "agent/oci_launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "agent/captured_command.h"
#include "agent/exec_in_replica.h"
#include "agent/runtime_commands.h"
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
    // Fake GPUs 0..3 and a control node, with NVIDIA's major number.
    for (int i = 0; i < 4; ++i) {
      mknod_ok_ &= ::mknod((dir_ / "dev" / ("nvidia" + std::to_string(i))).c_str(), S_IFCHR | 0666,
                           makedev(195, i)) == 0;
    }
    mknod_ok_ &=
        ::mknod((dir_ / "dev" / "nvidiactl").c_str(), S_IFCHR | 0666, makedev(195, 255)) == 0;
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
    request.job = "oci_job_" + std::to_string(::getpid());  // ctest runs instances in parallel
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
            "container " + ContainerId(request.job, request.replica, request.attempt) +
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
  auto process = launcher_->Launch(request);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  int code = Wait(**process);
  (*process)->Release();
  std::string log = ReadFile(dir_ / "work" / "log");
  ASSERT_EQ(code, 0) << "runtime " << launcher_->runtime() << " log:\n" << log;
  EXPECT_NE(log.find("nvidia1"), std::string::npos) << log;
  EXPECT_NE(log.find("nvidia3"), std::string::npos) << log;
  EXPECT_NE(log.find("nvidiactl"), std::string::npos) << log;
  EXPECT_EQ(log.find("nvidia0"), std::string::npos) << log;
  EXPECT_EQ(log.find("nvidia2"), std::string::npos) << log;
  EXPECT_NE(log.find(R"(TF_CONFIG={"task":{"type":"worker","index":0}})"), std::string::npos)
      << log;
  EXPECT_EQ(ReadFile(dir_ / "out" / "model" / "from_container"), "hi\n");
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
      launcher_->RuntimeArgv({"state", ContainerId(request.job, request.replica, request.attempt)});
  launcher_.reset();
  CapturedCommand after = RunCaptured(state);
  EXPECT_NE(after.exit_code, 0) << "the container is still there: " << after.output;
  EXPECT_TRUE(RuntimeSaysGone(after.output)) << after.output;
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
  target.container_exec = (*process)->ExecPrefix();
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

INSTANTIATE_TEST_SUITE_P(Runtimes, OciLauncherTest, ::testing::Values("auto", "runc", "crun"));

}  // namespace
}  // namespace cohort::agent
