// OciLauncher runs a replica attempt as a container (issue 7): through an OCI runtime (runc or
// crun) from a bundle it writes itself, or through the docker or podman CLI where the node's
// config says so.
//
// Bundle: <working_dir>/bundle/config.json, whose root is the image: a rootfs directory (a
// directory with bin/ or usr/, or one holding rootfs/), or an OCI image layout (index.json;
// unpacked once per (layout, tag) with umoci into <cache>/). The root is mounted read-only with a
// tmpfs /tmp; the job's output directory (the parent of AIP_MODEL_DIR), the working directory
// and /etc/hosts, /etc/resolv.conf are bind-mounted (docker/podman: the first two); host
// networking (no network namespace: NCCL and UCX want the host's interfaces); CPU, memory and
// pids limits.
//
// The attempt's working directory is mounted at its own path (runc/crun: also the container's
// cwd), so the files the replica's environment names there (the flight recorder the hang
// watchdog reads, the stack dumps, TORCHELASTIC_ERROR_FILE: agent/replica_env.h) are the agent's
// to read as for a process replica; runc/crun containers also get the agent's sitecustomize
// (LaunchRequest::python_site, agent/python_site.h) mounted read-only and first on PYTHONPATH.
//
// Environment: the image's own (its ENV, as the process.env of the config.json beside its rootfs:
// the one umoci unpacked from an image layout, or a bundle's given as the image; a bare root
// filesystem has none), under the replica's (agent/replica_env.h, which wins), with a PATH where
// neither has one; with docker/podman the CLI lays the image's under the --env variables itself.
// So a stock image's PATH (a conda or venv bin first), LD_LIBRARY_PATH and the rest are the
// script's, as under `docker run`. Its WORKDIR (process.cwd) is the container's cwd, so that
// `python trainer/task.py` finds the code the image put there, and writable as under docker: an
// overlay on it whose writes land in the attempt's image-workdir (carried into the next attempt
// on the node with the other working files, agent/working_files.h); where the image lacks the
// directory, image-workdir is mounted there; where the agent's work dir is itself on overlayfs
// (an agent in a container), which cannot hold an upper directory, the WORKDIR stays read-only.
// Without a WORKDIR the cwd is the attempt's working directory. A config.json that is not JSON, or
// whose process.env is not KEY=VALUE strings, or whose cwd is not a plain absolute path, fails the
// launch saying so.
//
// Command (ContainerArgv): Kubernetes' and Vertex's rules over the image's ENTRYPOINT and CMD.
// The job's container.command replaces both; its args alone follow the ENTRYPOINT in place of the
// CMD (an image ENTRYPOINT ["python", "-m", "trainer.task"] given `args: [--epochs=3]`); neither
// runs ENTRYPOINT then CMD, as `docker run IMAGE` does. umoci joins the two in the process.args it
// unpacks, so after unpacking a layout the launcher reads them apart from the image's config blob
// (the manifest umoci.json names) into <bundle>/cohort-image-command.json; a bundle or root
// filesystem given as the image tells them not apart: its process.args count as CMD. docker and
// podman apply the same rules themselves (--entrypoint for a command).
//
// GPUs: only the pinned /dev/nvidiaN nodes plus the control nodes (nvidiactl, nvidia-uvm,
// nvidia-uvm-tools, nvidia-modeset) that exist on the host are created in the container, each
// allowed by a device cgroup rule, and NVIDIA_VISIBLE_DEVICES names the pinned indices. With the
// docker/podman CLI, CDI names (--device nvidia.com/gpu=N) are used when a CDI spec for
// nvidia.com/gpu exists in /etc/cdi or /var/run/cdi, device nodes otherwise.
//
// CPUs: a request's cpus is the container's weight, as a process replica's (agent/cgroup.h's
// CpuWeight: runc's conversion of cgroup v1 shares, 1024 a CPU). On cgroup v1 the bundle gives the
// shares; on v2 it sets cpu.weight itself (linux.resources.unified), since crun converts shares to
// a weight by a curve of its own (1 CPU 100, 2 CPUs 173), which would weigh a crun container
// against the node's process replicas, and larger containers against smaller, out of proportion.
// podman (whose runtime is crun by default) gets --cgroup-conf=cpu.weight=N on v2 for the same
// reason; docker gets --cpu-shares, which its daemon's runc converts as the agent does.
//
// Hybrid cgroups (v1 controllers + cgroup2 at /sys/fs/cgroup/unified): crun refuses to run there,
// runc works. With runtime "auto" the launcher prefers runc on such hosts; when only crun exists
// it runs crun in a private mount namespace with the cgroup2 mount hidden.
//
// The runtime's foreground process (`runc run`, `docker run`) is launched through ProcessLauncher,
// so it has its own process group, log redirection and exit status; the container's processes
// are signalled through `runtime kill` and the container deleted once gone (ContainerReplica,
// agent/container_replica.h).
//
// What runs where (agent/launcher.h): nothing of this launcher runs an external command or
// writes a file on the agent loop.
//  - Prepare (a thread of the agent's, once per attempt, concurrently with other Prepares and
//    with Launch): unpacks an image layout, writes <working_dir>/bundle/config.json (runc/crun)
//    or renders the `docker run` argv, and removes a container of the same id that a crashed
//    agent left (`delete --force` / `rm -f`), waiting for that on the container's lane of the
//    launcher's RuntimeCommands (agent/runtime_commands.h); it keeps the runtime's argv for
//    Launch (or Forget, for an attempt stopped meanwhile), under a mutex.
//  - Launch (the loop): takes that argv and forks the runtime (ProcessLauncher); without a
//    Prepare that succeeded it fails, saying so.
//  - The replica's Signal, KillAll, AnyAlive and Release (the loop) queue `kill`, `state` and
//    `delete` on the container's lane and return at once (agent/container_replica.h).
// Each runtime command is killed after OciOptions::command_timeout. Shutdown: destroying the
// launcher (after the agent's last SIGKILLs were queued) lets the queued commands run for up to
// OciOptions::shutdown_drain, then kills those still running and drops the rest (each logged):
// the agent's exit waits at most that plus about 100 ms for a wedged runtime.
//
// Image layouts are unpacked in Prepare; Launch never sees one not unpacked. One mutex per
// cached image: attempts preparing the same image at once wait for the first, whose result the
// others find in the cache; umoci unpacks into "<bundle>.tmp", renamed to the bundle once
// complete, and a failed or cancelled unpack removes it, so no half-unpacked image is ever taken
// as done (the next Prepare runs umoci again). umoci and the runtime's commands run hidden from
// the agent loop's reaper (agent/captured_command.h). CancelPrepares SIGKILLs the umoci
// processes under way and makes a Prepare waiting for its leftover removal return (kCancelled).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent/launcher.h"
#include "agent/process_launcher.h"
#include "agent/runtime_commands.h"

namespace cohort::agent {

struct OciOptions {
  std::string runtime = "auto";     // auto | runc | crun | docker | podman
  std::string device_dir = "/dev";  // where device nodes are looked up (tests: a fake dir)
  // Whether containers get the node's RDMA devices (RdmaDevices(device_dir) in agent/
  // inventory.h), as its process replicas have them (the agent's --container-rdma).
  bool rdma = true;
  std::string cache_dir = "/var/lib/cohort-agent/images";  // unpacked OCI image layouts
  // A runtime command (kill, state, delete, rm) still running after this is killed.
  std::chrono::milliseconds command_timeout{std::chrono::seconds(60)};
  // How long the launcher's destruction lets queued runtime commands finish (see above).
  std::chrono::milliseconds shutdown_drain{std::chrono::seconds(10)};
  // The cgroup version containers are put in: 0, the host's (2 where /sys/fs/cgroup is a cgroup2
  // mount, else 1: v1 or hybrid, where crun has the cgroup2 mount hidden); 1 or 2 (tests). On 2
  // a bundle, or podman's argv, sets cpu.weight itself (see "CPUs").
  int cgroup_version = 0;
  // The agent's part of its container ids (AgentTag of its work dir, agent/work_dir_lock.h): two
  // agents of one host may run the same attempt of the same job name (two clusters, test
  // clusters in parallel), and container ids are the host runtime's. "" for none.
  std::string container_tag;
};

// What an image's config says of its process: its environment (ENV), working directory
// (WORKDIR; "" for none or "/") and command: ENTRYPOINT, then CMD.
struct ImageConfig {
  std::map<std::string, std::string> env;
  std::string cwd;
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
};
// The process.env, process.cwd and process.args of <rootfs>/../config.json when `rootfs` is a
// directory named rootfs beside one (an unpacked image layout, an OCI bundle); nothing otherwise.
// process.args is split into ENTRYPOINT and CMD as <rootfs>/../cohort-image-command.json says
// where that file exists and its two join to process.args (WriteImageCommand); otherwise it is
// all CMD. kFailedPrecondition naming the file when either is a link, not JSON, over 16 MiB, its
// env is not KEY=VALUE strings, its args not strings, or its cwd not an absolute path free of
// ',', ':' and '..'.
StatusOr<ImageConfig> ReadImageConfig(const std::string& rootfs);
// Writes <bundle>/cohort-image-command.json: the ENTRYPOINT and CMD of the image that umoci
// unpacked into `bundle` from the image layout `layout_dir`, read from the layout's blobs (the
// manifest named last in <bundle>/umoci.json, then its config). kFailedPrecondition naming what
// is missing or malformed (a digest that is not algorithm:hex, a blob over 16 MiB or not JSON).
Status WriteImageCommand(const std::string& layout_dir, const std::string& bundle);
// The argv a container runs (see "Command" above): the request's container_command laid over the
// image's ENTRYPOINT and CMD; without one, a non-empty argv (an older coordinator's, the job's
// command and args joined) is the whole command. kInvalidArgument, naming the image, when that
// leaves nothing to run.
StatusOr<std::vector<std::string>> ContainerArgv(const LaunchRequest& request,
                                                 const ImageConfig& image);
// Whether `dir` may hold an overlay's upper directory: not on overlayfs itself (an agent running
// in a container), where the kernel refuses one. A directory statfs cannot read counts as able.
bool CanBeOverlayUpper(const std::string& dir);
// For an image with a WORKDIR: the attempt's image-workdir (the overlay's upper directory, the
// job owner's) and the overlay's work directory, in its working directory.
Status MakeImageWorkdir(const LaunchRequest& request, const ImageConfig& image);

class OciLauncher : public Launcher {
 public:
  // Picks the runtime (see OciOptions::runtime). Fails naming what is missing when no runtime
  // the options allow is installed.
  static StatusOr<std::unique_ptr<OciLauncher>> Create(OciOptions options,
                                                       ProcessLauncher* processes);
  // Shuts the runtime commands down (see "Shutdown" above); the replicas it launched may live
  // on, their commands then refused.
  ~OciLauncher() override;

  // Everything Launch(request) needs (see above): an error names the image, the bundle or the
  // runtime. Thread-safe.
  Status Prepare(const LaunchRequest& request) override;
  void CancelPrepares() override;
  // Drops the runtime argv Prepare kept for the request's container.
  void Forget(const LaunchRequest& request) override;
  StatusOr<std::unique_ptr<ReplicaProcess>> Launch(const LaunchRequest& request) override;
  // A container an earlier image of this agent launched (agent/handoff.h): its runtime's
  // foreground process, still this process's child, and the container it runs.
  StatusOr<std::unique_ptr<ReplicaProcess>> Adopt(const HandedOverAttempt& handed) override;

  // Force-deletes every container of this agent's (its id begins "cohort-<container_tag>-") the
  // runtime lists, except those in `keep` (a live restart's, agent/handoff.h): an agent killed
  // with SIGKILL leaves its containers running (the runtime's foreground process dies with it, the
  // container does not), their GPUs then handed out again by the coordinator. Other agents'
  // containers are never touched; without a tag nothing is (its own cannot be told apart).
  // Blocking (the runtime's list, then a delete per container): call it at the agent's start,
  // before its loop. Returns how many were removed; the list command's failure names it.
  StatusOr<int> SweepLeftovers(const std::set<std::string>& keep);

  // The runtime chosen ("runc", "crun", "docker", "podman") and whether crun must hide cgroup2.
  const std::string& runtime() const { return runtime_; }
  bool hide_cgroup2() const { return hide_cgroup2_; }
  // How many prepared attempts wait for their Launch or Forget (for tests).
  size_t prepared_count();

  // The OCI config.json for a request whose rootfs is `rootfs`, whose config says `image`: the
  // image's environment under the request's, its WORKDIR the cwd, ContainerArgv the command. The
  // two-argument form reads `image` (ReadImageConfig) itself (exposed for tests).
  StatusOr<std::string> BundleConfig(const LaunchRequest& request, const std::string& rootfs,
                                     ImageConfig image) const;
  StatusOr<std::string> BundleConfig(const LaunchRequest& request, const std::string& rootfs) const;
  // argv of `docker run`/`podman run` for a request (exposed for tests).
  std::vector<std::string> CliRunArgv(const LaunchRequest& request,
                                      const std::string& container_id) const;
  // argv that runs `runtime args...` (wrapped for crun on hybrid hosts).
  std::vector<std::string> RuntimeArgv(const std::vector<std::string>& args) const;

 private:
  OciLauncher(OciOptions options, ProcessLauncher* processes, std::string runtime,
              std::string runtime_path, bool hide_cgroup2, std::string unshare_path)
      : options_(std::move(options)),
        processes_(processes),
        runtime_(std::move(runtime)),
        runtime_path_(std::move(runtime_path)),
        unshare_path_(std::move(unshare_path)),
        hide_cgroup2_(hide_cgroup2),
        commands_(std::make_shared<RuntimeCommands>(options_.command_timeout)) {}

  bool cli() const { return runtime_ == "docker" || runtime_ == "podman"; }
  // The id of the request's container.
  std::string IdOf(const LaunchRequest& request) const;
  // argv of `runtime args...` for the runtime's short commands (RuntimeArgv, or the CLI's).
  std::vector<std::string> RuntimeCommand(const std::vector<std::string>& args) const;
  // Removes a container `id` left by a crashed agent, waiting for it off the loop: whether it is
  // gone (false: the runtime's delete failed, logged); kCancelled at the agent's shutdown.
  StatusOr<bool> RemoveLeftover(const std::string& id);

  // Where an image's root filesystem is: `rootfs` for a root filesystem directory; for an OCI
  // image layout, `layout` ("<dir>[:<tag>]", as umoci takes it), its directory `layout_dir` and
  // the cache `bundle` it is unpacked into (its root: <bundle>/rootfs).
  struct ImageLocation {
    std::string rootfs;
    std::string layout;
    std::string layout_dir;
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
  std::string unshare_path_;
  bool hide_cgroup2_;
  std::shared_ptr<RuntimeCommands> commands_;  // shared with the replicas launched
  std::atomic<bool> cancelled_{false};
  std::mutex prepared_mu_;                                      // guards prepared_
  std::map<std::string, std::vector<std::string>> prepared_;    // by container id: the run argv
  std::mutex unpacks_mu_;                                       // guards unpacks_
  std::map<std::string, std::shared_ptr<std::mutex>> unpacks_;  // by bundle: held while unpacking
};

// True when the host mixes cgroup v1 controllers with a cgroup2 mount (hybrid mode).
bool HostHasHybridCgroups();
// 2 where /sys/fs/cgroup is a cgroup2 mount (the unified hierarchy alone), else 1.
int HostCgroupVersion();
// What every container id of the agent whose tag is `tag` begins with: "cohort-<tag>-" ("cohort-"
// with no tag).
std::string ContainerIdPrefix(const std::string& tag);
// A container id for an attempt: "cohort-<tag>-<job>-<replica>-<attempt>" ("cohort-<job>-..."
// with no tag: the ids of images older than tags), safe for every runtime.
std::string ContainerId(const std::string& tag, const std::string& job, const std::string& replica,
                        int attempt);

}  // namespace cohort::agent
