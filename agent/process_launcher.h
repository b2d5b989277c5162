// ProcessLauncher runs a replica attempt as a plain process tree: fork, then in the child setsid()
// (its own session and process group), a move into its own cgroup when CgroupManager has one,
// stdin from /dev/null, stdout and stderr appended to the attempt's log file, with a run_as
// account its groups (setgroups), gid and uid (in that order: after setuid nothing can be
// changed back) and HOME, USER, LOGNAME, then chdir to the working directory (as that account)
// and execve. A failed switch makes the child exit 126 with launch_error() naming the account. The
// child also asks for SIGKILL when the agent dies (PR_SET_PDEATHSIG), so a crashed agent leaves no
// replica behind it.
//
// A command that cannot be executed (not found, not executable) makes the child exit 127 or 126,
// and launch_error() plus a line in the log file say why.
//
// Killing reaches every descendant: the process group, and every member of the cgroup (which
// also catches descendants that called setsid themselves or daemonized). The group is signalled
// until it is seen empty, never after, so a recycled process-group id is never hit.
//
// Without a cgroup, descendants that left the process group are found by their environment:
// every process of the attempt inherits COHORT_ATTEMPT_DIR=<the absolute working directory>
// (agent/proc_scan.h scans /proc for it), so setsid children and double-forked daemons are
// signalled and waited for too. Only a descendant that clears or rewrites its environment
// escapes that; while the agent lives it still is the agent's descendant (the daemon is a
// PR_SET_CHILD_SUBREAPER), and the agent kills its remaining descendants when it shuts down.
// SweepLeftovers() is for the start of an agent whose predecessor was killed (SIGKILL: its
// replicas' main processes die with it, by PR_SET_PDEATHSIG, but nothing else of them does).
//
// Thread safety: none; the agent loop calls it. Launch() may run while other threads of the
// process exist (tests): the child calls only async-signal-safe functions before execve.
#pragma once

#include <memory>
#include <string>

#include "agent/cgroup.h"
#include "agent/launcher.h"

namespace cohort::agent {

// The variable naming the attempt's working directory in every process of the attempt.
inline constexpr char kAttemptDirVariable[] = "COHORT_ATTEMPT_DIR";

class ProcessLauncher : public Launcher {
 public:
  // SIGKILL to every process whose COHORT_ATTEMPT_DIR lies under `work_dir` (what an earlier
  // agent with this work dir left behind), until none is left. Returns how many it killed.
  static int SweepLeftovers(const std::string& work_dir);

  // `cgroups` may be unavailable; then only process groups bound the replica.
  explicit ProcessLauncher(CgroupManager cgroups) : cgroups_(std::move(cgroups)) {}

  StatusOr<std::unique_ptr<ReplicaProcess>> Launch(const LaunchRequest& request) override;

  const CgroupManager& cgroups() const { return cgroups_; }

 private:
  CgroupManager cgroups_;
};

}  // namespace cohort::agent
