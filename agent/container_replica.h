// ContainerReplica: one container attempt of OciLauncher (agent/oci_launcher.h): the runtime's
// foreground process (`runc run`, `docker run`), launched by ProcessLauncher, which gives it its
// process group, log and exit status, plus the container the runtime manages.
//
// What runs where: every method runs on the agent loop and returns at once. What needs the
// runtime's CLI is queued on the container's lane of RuntimeCommands (agent/runtime_commands.h),
// which runs it on a thread of its own, in the order queued:
//  - Signal(sig) (and KillAll, with SIGKILL) signals the foreground process's group at once and
//    queues `runtime kill` for every process of the container: a SIGTERM's kill runs before the
//    SIGKILL's that follows it after the grace;
//  - AnyAlive(), once the foreground process is gone, queues `runc state` (one at a time) and
//    says "alive" until one of them has found the container gone (not there, or not running);
//    that is final. A state query that timed out or was cancelled proves nothing and is asked
//    again. The docker/podman CLI's container goes with its `run` (--rm): nothing to query;
//  - Release() queues `delete --force` / `rm -f` once: after the kills and the state query that
//    found the container gone, so it never deletes a running container; a container id names
//    its attempt (ContainerId), so it never deletes another attempt's container.
// A failed kill or delete is logged with the runtime's output, except where that says the
// container is already gone. Destroying the replica leaves its queued commands to run.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "agent/launcher.h"
#include "agent/runtime_commands.h"

namespace cohort::agent {

class ContainerReplica : public ReplicaProcess {
 public:
  // `runtime`: the argv that runs the runtime, to which a command's arguments are appended;
  // `cli`: docker or podman (else runc or crun).
  ContainerReplica(std::unique_ptr<ReplicaProcess> runtime_process, std::string id,
                   std::vector<std::string> runtime, bool cli,
                   std::shared_ptr<RuntimeCommands> commands);

  pid_t pid() const override { return inner_->pid(); }
  void OnExited(int wait_status) override { inner_->OnExited(wait_status); }
  std::optional<ExitInfo> exit_info() const override { return inner_->exit_info(); }
  LaunchState PollLaunch() override { return inner_->PollLaunch(); }
  std::string launch_error() const override { return inner_->launch_error(); }
  void Signal(int sig) override;
  void KillAll() override;
  bool AnyAlive() override;
  void Release() override;
  std::vector<std::string> ExecPrefix(ExecStdio stdio) const override;
  // The runtime's foreground process's (ProcessLauncher's), marked a container's: the container
  // launcher of the re-executed agent adopts it (OciLauncher::Adopt).
  Status HandOver(HandedOverAttempt* out) override;

 private:
  // What the commands' completions (on a lane's thread) share with the replica.
  struct Shared {
    std::string id;
    std::atomic<bool> gone{false};          // a state query found the container gone
    std::atomic<bool> state_queued{false};  // a state query is queued or running
  };
  // Queues `runtime args...`; a failure is logged naming `what`.
  void Queue(const std::vector<std::string>& args, const std::string& what);
  std::vector<std::string> Argv(const std::vector<std::string>& args) const;

  std::unique_ptr<ReplicaProcess> inner_;
  std::shared_ptr<Shared> shared_;
  std::vector<std::string> runtime_;
  bool cli_;
  std::shared_ptr<RuntimeCommands> commands_;
  bool released_ = false;
};

}  // namespace cohort::agent
