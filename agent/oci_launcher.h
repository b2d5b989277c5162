// OciLauncher runs a replica attempt as a container (issue 7): through an OCI runtime (runc or
// crun) from a bundle it writes itself, or through the docker or podman CLI where the node's
// config says so.
//
// Bundle: <working_dir>/bundle/config.json, whose root is the image: a rootfs directory (a
// directory with bin/ or usr/, or one holding rootfs/), or an OCI image layout (index.json;
// unpacked once per (layout, tag) with umoci into <cache>/). The root is mounted read-only with a
// tmpfs /tmp; the job's output directory (the parent of AIP_MODEL_DIR), the working directory
// and /etc/hosts, /etc/resolv.conf are bind-mounted; host networking (no network namespace:
// NCCL and UCX want the host's interfaces); CPU, memory and pids limits.
//
// GPUs: only the pinned /dev/nvidiaN nodes plus the control nodes (nvidiactl, nvidia-uvm,
// nvidia-uvm-tools, nvidia-modeset) that exist on the host are created in the container, each
// allowed by a device cgroup rule, and NVIDIA_VISIBLE_DEVICES names the pinned indices. With the
// docker/podman CLI, CDI names (--device nvidia.com/gpu=N) are used when a CDI spec for
// nvidia.com/gpu exists in /etc/cdi or /var/run/cdi, device nodes otherwise.
//
// Hybrid cgroups (v1 controllers + cgroup2 at /sys/fs/cgroup/unified): crun refuses to run there,
// runc works. With runtime "auto" the launcher prefers runc on such hosts; when only crun exists
// it runs crun in a private mount namespace with the cgroup2 mount hidden.
//
// The runtime's foreground process (`runc run`) is launched through ProcessLauncher, so it has
// its own process group, log redirection and exit status; signals go both to it and, through
// `runtime kill`, to every process of the container; Release() deletes the container.
//
// Image layouts are unpacked in Prepare, off the agent loop (agent/launcher.h); Launch only finds
// the unpacked root and fails naming the image when there is none. One mutex per cached image:
// attempts preparing the same image at once wait for the first, whose result the others find
// in the cache; umoci unpacks into "<bundle>.tmp", renamed to the bundle once complete, and a
// failed or cancelled unpack removes it, so no half-unpacked image is ever taken as done (the
// next Prepare runs umoci again). umoci runs hidden from the agent loop's reaper
// (agent/captured_command.h). CancelPrepares SIGKILLs the umoci processes under way.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/launcher.h"
#include "agent/process_launcher.h"

namespace cohort::agent {

struct OciOptions {
  std::string runtime = "auto";     // auto | runc | crun | docker | podman
  std::string device_dir = "/dev";  // where GPU device nodes are looked up (tests: a fake dir)
  std::string cache_dir = "/var/lib/cohort-agent/images";  // unpacked OCI image layouts
};

class OciLauncher : public Launcher {
 public:
  // Picks the runtime (see OciOptions::runtime). Fails naming what is missing when no runtime
  // the options allow is installed.
  static StatusOr<std::unique_ptr<OciLauncher>> Create(OciOptions options,
                                                       ProcessLauncher* processes);

  // Unpacks request.image when it is an OCI image layout not in the cache yet; nothing to do
  // for a root filesystem directory or the docker/podman CLI. Thread-safe.
  Status Prepare(const LaunchRequest& request) override;
  void CancelPrepares() override;
  StatusOr<std::unique_ptr<ReplicaProcess>> Launch(const LaunchRequest& request) override;

  // The runtime chosen ("runc", "crun", "docker", "podman") and whether crun must hide cgroup2.
  const std::string& runtime() const { return runtime_; }
  bool hide_cgroup2() const { return hide_cgroup2_; }

  // The OCI config.json for a request whose rootfs is `rootfs` (exposed for tests).
  StatusOr<std::string> BundleConfig(const LaunchRequest& request, const std::string& rootfs) const;
  // argv of `docker run`/`podman run` for a request (exposed for tests).
  std::vector<std::string> CliRunArgv(const LaunchRequest& request,
                                      const std::string& container_id) const;
  // argv that runs `runtime args...` (wrapped for crun on hybrid hosts).
  std::vector<std::string> RuntimeArgv(const std::vector<std::string>& args) const;

 private:
  OciLauncher(OciOptions options, ProcessLauncher* processes, std::string runtime,
              std::string runtime_path, bool hide_cgroup2)
      : options_(std::move(options)),
        processes_(processes),
        runtime_(std::move(runtime)),
        runtime_path_(std::move(runtime_path)),
        hide_cgroup2_(hide_cgroup2) {}

  // Where an image's root filesystem is: `rootfs` for a root filesystem directory; for an OCI
  // image layout, `layout` ("<dir>[:<tag>]", as umoci takes it) and the cache `bundle` it is
  // unpacked into (its root: <bundle>/rootfs).
  struct ImageLocation {
    std::string rootfs;
    std::string layout;
    std::string bundle;
  };
  StatusOr<ImageLocation> LocateImage(const std::string& image) const;
  // The root filesystem of an image, unpacked already where it is a layout.
  StatusOr<std::string> ResolveRootfs(const std::string& image) const;
  Status Unpack(const std::string& image, const ImageLocation& location);

  OciOptions options_;
  ProcessLauncher* processes_;
  std::string runtime_;
  std::string runtime_path_;
  bool hide_cgroup2_;
  std::atomic<bool> cancelled_{false};
  std::mutex unpacks_mu_;                                       // guards unpacks_
  std::map<std::string, std::shared_ptr<std::mutex>> unpacks_;  // by bundle: held while unpacking
};

// True when the host mixes cgroup v1 controllers with a cgroup2 mount (hybrid mode).
bool HostHasHybridCgroups();
// A container id for an attempt: "cohort-<job>-<replica>-<attempt>", safe for every runtime.
std::string ContainerId(const std::string& job, const std::string& replica, int attempt);

}  // namespace cohort::agent
