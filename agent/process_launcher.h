// ProcessLauncher runs a replica attempt as a plain process tree: fork, then in the child setsid()
// (its own session and process group), a move into its own cgroup when CgroupManager has one,
// stdin from /dev/null, stdout and stderr appended to the attempt's log file, chdir to the
// working directory and execve. The child also asks for SIGKILL when the agent dies
// (PR_SET_PDEATHSIG), so a crashed agent leaves no replica behind it.
//
// A command that cannot be executed (not found, not executable) makes the child exit 127 or 126,
// and launch_error() plus a line in the log file say why.
//
// Killing reaches every descendant: the process group, and every member of the cgroup (which
// also catches descendants that called setsid themselves). The group is signalled until it is
// seen empty, never after, so a recycled process-group id is never hit.
//
// Thread safety: none; the agent loop calls it. Launch() may run while other threads of the
// process exist (tests): the child calls only async-signal-safe functions before execve.
#pragma once

#include <memory>

#include "agent/cgroup.h"
#include "agent/launcher.h"

namespace cohort::agent {

class ProcessLauncher : public Launcher {
 public:
  // `cgroups` may be unavailable; then only process groups bound the replica.
  explicit ProcessLauncher(CgroupManager cgroups) : cgroups_(std::move(cgroups)) {}

  StatusOr<std::unique_ptr<ReplicaProcess>> Launch(const LaunchRequest& request) override;

  const CgroupManager& cgroups() const { return cgroups_; }

 private:
  CgroupManager cgroups_;
};

}  // namespace cohort::agent
