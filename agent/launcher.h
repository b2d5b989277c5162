// Launcher: how the agent starts one replica attempt and later signals, kills and forgets it.
// ProcessLauncher (agent/process_launcher.h) forks and execs a command in its own session and,
// where cgroup v2 is writable, its own cgroup; issue 7's OCI launcher implements the same
// interface for containers. The agent decides which launcher a LaunchReplica goes to.
//
// Reaping: the agent owns waitpid(). It polls each ReplicaProcess's pid() and hands the wait
// status to OnExited(); a ReplicaProcess never calls waitpid() itself, so an agent that reaps
// every child (a subreaper) can do so without stealing exit statuses.
//
// Starting: Launch returns once the attempt's main process exists, before it has executed the
// command; whether it did is learnt later by polling PollLaunch() (never blocking), as the exit
// is learnt by polling waitpid(). launch_error() is empty until PollLaunch() says kFailed.
//
// Preparing: Launch runs on the agent loop, so it must return soon. Work that may take long and
// needs nothing of the loop's (an OCI image layout's unpack, writing a container's config,
// removing a container a crashed agent left) goes in Prepare, which the agent runs on a thread
// of its own before Launch (agent/replica_manager.h): the loop keeps heartbeating meanwhile.
//
// Never waiting: every method of a ReplicaProcess runs on the agent loop and returns at once.
// One that needs an external command (a container runtime's kill, state or delete) runs it off
// the loop (agent/runtime_commands.h) and learns its outcome by polling: AnyAlive() then says
// true until a command has shown that nothing is left; Signal() delivers in the order called.
//
// Thread safety: Launch and everything of a ReplicaProcess run on the agent loop only. Prepare
// and CancelPrepares may run on any thread, at the same time as each other, as Launch and as
// other Prepares; an implementation guards what they share.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/handoff.h"
#include "agent/replica_user.h"
#include "common/status.h"

namespace cohort::agent {

// How a replica's main process ended. exit_code is the status for a normal exit and 128+signal
// for a death by signal (as a shell reports it; the coordinator's retry rules use these numbers).
struct ExitInfo {
  int exit_code = -1;
  int signal = 0;
  // Processes of the attempt the kernel's OOM killer ended (its cgroup's count, read at the exit;
  // 0 where there is no cgroup with the memory controller). The main process need not be one:
  // a DataLoader worker killed for memory makes its parent exit 1.
  int64_t oom_kills = 0;

  static ExitInfo FromWaitStatus(int wait_status);
  // "exited with code 3", "killed by signal 9 (SIGKILL)".
  std::string Describe() const;
};

// Everything a launcher needs; the agent has already rendered the environment, the working
// directory and the log path.
struct LaunchRequest {
  std::string job;
  std::string replica;
  int attempt = 0;
  std::vector<std::string> argv;           // argv[0]: an absolute path, a path relative to
                                           // working_dir, or a name looked up on env's PATH
  std::map<std::string, std::string> env;  // the whole environment of the replica
  std::string working_dir;                 // exists before Launch is called
  std::string log_path;                    // stdout and stderr are appended here
  std::vector<int> gpus;
  // How CUDA_VISIBLE_DEVICES names each of `gpus` (agent/inventory.h's VisibleGpuNames: a MIG
  // device by its UUID), and the device nodes a container of them needs (GpuDeviceNodes); empty:
  // by index, /dev/nvidia<index>.
  std::vector<std::string> visible_gpus;
  std::vector<std::string> gpu_device_nodes;
  // Its CPUs: its weight when the node's CPUs are contended (cgroup v2 cpu.weight, v1
  // cpu.shares, in proportion; a Kubernetes CPU request), and with cpu_quota also the most CPU
  // time it may take (CFS quota: cpus' worth a period; a Kubernetes CPU limit). 0: neither.
  int cpus = 0;
  bool cpu_quota = false;
  // The CPUs its processes run on (agent/inventory.h's GpuLocalCpus), ascending; empty: wherever
  // the agent may. Best effort for processes: a CPU the kernel no longer lets the agent use
  // leaves the replica unbound rather than unstarted.
  std::vector<int> cpu_affinity;
  int64_t memory_mb = 0;  // 0: no memory limit
  std::string image;      // container launchers only
  // Container launchers only: the job's container.command and container.args apart, which
  // ContainerArgv (agent/oci_launcher.h) lays over the image's ENTRYPOINT and CMD as Kubernetes
  // does; nullopt where the coordinator sent neither apart (an older one: then a non-empty argv,
  // the two joined, is the whole command).
  struct ContainerCommand {
    std::vector<std::string> command;
    std::vector<std::string> args;
  };
  std::optional<ContainerCommand> container_command;
  // The account the replica runs as (agent/replica_user.h); nullopt: the agent's own. The
  // working dir and output dirs are already the account's.
  std::optional<RunAs> run_as;
  // Whether a launcher that gives replicas a PID namespace (agent/process_launcher.h) gives this
  // one one: container runtimes, which make their own, are launched without.
  bool pid_namespace = true;
  // Container launchers only: the agent's sitecustomize directory (agent/python_site.h), which
  // runc/crun containers get bind-mounted read-only and first on PYTHONPATH (above the image's or
  // the job's) unless the environment says COHORT_PYTHON_STACKS=0; empty: none.
  std::string python_site;
};

// How an exec's stdin comes (agent/exec_in_replica.h, agent/exec_session.h): from /dev/null
// (`cohort exec`), streamed from its client (`cohort exec -i`), or a terminal's (`-it`).
enum class ExecStdio { kNone, kStream, kTerminal };

// One launched attempt: its main process plus everything it spawned.
class ReplicaProcess {
 public:
  virtual ~ReplicaProcess() = default;

  // The main process, a child of the agent (a PID namespace's init, where the replica has one).
  virtual pid_t pid() const = 0;
  // The host pid of the process running the replica's command: pid(), or init's child.
  virtual pid_t command_pid() { return pid(); }
  // Called once by the agent with the waitpid() status of pid().
  virtual void OnExited(int wait_status) = 0;
  virtual std::optional<ExitInfo> exit_info() const = 0;
  // Whether the command was started: kStarting until the main process has executed it
  // (kStarted) or failed to (kFailed: launch_error() says why, and the process exits 127 or
  // 126, or was killed), then that for good. Never blocks; the agent loop polls it until it is
  // settled, which it is at the latest once OnExited() was called.
  enum class LaunchState { kStarting, kStarted, kFailed };
  virtual LaunchState PollLaunch() = 0;
  // Why the attempt failed before the command ran (an exec error, a launch deadline missed);
  // empty unless PollLaunch() returned kFailed.
  virtual std::string launch_error() const = 0;
  // Sends `sig` to every process of the attempt (process group and cgroup), main exited or not.
  virtual void Signal(int sig) = 0;
  // SIGKILL to every process of the attempt.
  virtual void KillAll() = 0;
  // True while any process of the attempt remains (zombies awaiting reaping do not count).
  virtual bool AnyAlive() = 0;
  // Frees what the attempt held (its cgroup, its container). Call once AnyAlive() is false;
  // safe to repeat.
  virtual void Release() = 0;
  // The attempt's cgroup directory (its usage is read there); empty when it has none.
  virtual std::string cgroup_path() const { return {}; }
  // The argv, to which a command is appended, that runs that command inside the attempt's
  // container (`runc exec ID`; agent/exec_in_replica.h), its stdin as `stdio` says (the
  // runtime's flags for it: `docker exec -i -t ID`); empty: the attempt is processes on the node.
  virtual std::vector<std::string> ExecPrefix(ExecStdio /*stdio*/) const { return {}; }
  // A live restart (agent/handoff.h): fills in what the re-executed agent adopts this process by
  // (its pid, cgroup and the descriptor of its init's status pipe, which from now on survives an
  // execve), or says why it cannot be handed over. Called on a started process not yet exited.
  virtual Status HandOver(HandedOverAttempt* out) {
    (void)out;
    return FailedPrecondition("its launcher cannot hand it over to a restarted agent");
  }
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  // What Launch(request) needs done first that may take long (unpacking its image, writing its
  // bundle). The agent runs it off its loop before Launch, once per container attempt and for a
  // restart's checkpoint lookup (agent/replica_manager.h); `request` is Launch's, its env
  // rendered. Two attempts may prepare the same thing at once: the implementation does it once.
  // An error fails the attempt before it starts (nothing to clean up); the message names what
  // could not be prepared. A launcher may refuse a Launch not prepared. Default: nothing.
  virtual Status Prepare(const LaunchRequest& request) {
    (void)request;
    return Status::Ok();
  }
  // The agent is going away: every Prepare under way returns soon with an error (kCancelled),
  // and later ones at once. The launcher must outlive the Prepare calls under way.
  virtual void CancelPrepares() {}
  // The agent will not Launch `request` after all (its attempt was stopped while it prepared):
  // drops what Prepare kept for it. Called on the agent loop once that Prepare has returned, OK
  // or not. Default: nothing.
  virtual void Forget(const LaunchRequest& request) { (void)request; }
  // Starts the attempt (its Prepare done and OK) and returns without waiting for the command to
  // be executed (see "Starting" above). An error means nothing runs (nothing to clean up); a
  // command that cannot be executed still yields a process, whose PollLaunch() comes to say
  // kFailed and which exits 127 (or 126) or is killed.
  virtual StatusOr<std::unique_ptr<ReplicaProcess>> Launch(const LaunchRequest& request) = 0;
  // A live restart: takes on the process an earlier image of this agent launched and handed over
  // (ReplicaProcess::HandOver), started, as Launch's would be. An error when it cannot (the pid is
  // not this process's child). Default: none can be.
  virtual StatusOr<std::unique_ptr<ReplicaProcess>> Adopt(const HandedOverAttempt& handed) {
    (void)handed;
    return FailedPrecondition("this launcher cannot adopt a replica");
  }
};

}  // namespace cohort::agent
