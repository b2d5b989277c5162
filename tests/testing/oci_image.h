// Busybox OCI image layouts for the tests that run replicas in real containers (an image layout
// made with umoci, run by the agent with runc or crun), and why a host cannot run them.
//
// Thread safety: plain functions.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/testing/process.h"

namespace cohort::testing {

// Why containers cannot run here, or "".
inline std::string WhyNoContainers() {
  namespace fs = std::filesystem;
  if (::geteuid() != 0) return "OCI runtimes need root here";
  if (!fs::exists("/usr/bin/umoci")) return "umoci is not installed (scripts/install-deps.sh)";
  if (!fs::exists("/bin/busybox")) return "no static busybox (Debian busybox-static)";
  if (!fs::exists("/usr/sbin/runc") && !fs::exists("/usr/bin/runc") &&
      !fs::exists("/usr/bin/crun")) {
    return "neither runc nor crun is installed";
  }
  return "";
}

// An image layout `layout`:latest of a static busybox (its sh, and `tools` linked to it) whose
// ENTRYPOINT is `entrypoint` and CMD `cmd`; `work_dir` holds the bundle it is built in.
inline void MakeBusyboxImage(const std::string& work_dir, const std::string& layout,
                             const std::vector<std::string>& tools,
                             const std::vector<std::string>& entrypoint,
                             const std::vector<std::string>& cmd) {
  namespace fs = std::filesystem;
  const std::string tagged = layout + ":latest", bundle = work_dir + "/build";
  auto umoci = [](const std::vector<std::string>& args) {
    RunResult run = RunProcess("/usr/bin/umoci", args);
    ASSERT_EQ(run.exit_code, 0) << "umoci " << args[0] << ": " << run.err;
  };
  ASSERT_NO_FATAL_FAILURE(umoci({"init", "--layout", layout}));
  ASSERT_NO_FATAL_FAILURE(umoci({"new", "--image", tagged}));
  ASSERT_NO_FATAL_FAILURE(umoci({"unpack", "--image", tagged, bundle}));
  fs::create_directories(bundle + "/rootfs/bin");
  fs::copy_file("/bin/busybox", bundle + "/rootfs/bin/busybox");
  fs::create_symlink("busybox", bundle + "/rootfs/bin/sh");
  for (const std::string& tool : tools)
    fs::create_symlink("busybox", bundle + "/rootfs/bin/" + tool);
  ASSERT_NO_FATAL_FAILURE(umoci({"repack", "--image", tagged, bundle}));
  std::vector<std::string> config = {"config", "--image", tagged};
  for (const std::string& arg : entrypoint) {
    config.insert(config.end(), {"--config.entrypoint", arg});
  }
  for (const std::string& arg : cmd) config.insert(config.end(), {"--config.cmd", arg});
  ASSERT_NO_FATAL_FAILURE(umoci(config));
}

// The spec of job `name`: one chief running the image `layout` (no GPU, one CPU), its output dir
// `output_dir`, then `more` (top-level YAML: "scheduling: {max_restarts: 2}\n").
inline std::string OneContainerJob(const std::string& name, const std::string& output_dir,
                                   const std::string& layout, const std::string& more = "") {
  return "name: " + name + "\noutput_dir: " + output_dir +
         "\nworker_pools:\n  - role: chief\n    replicas: 1\n"
         "    resources: {gpus: 0, cpus: 1}\n    container: {image: \"" +
         layout + "\"}\n" + more;
}

}  // namespace cohort::testing
