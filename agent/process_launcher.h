// ProcessLauncher runs a replica attempt as a plain process tree: a child in its own session and
// process group, moved into its own cgroup when CgroupManager has one, stdin from /dev/null,
// stdout and stderr appended to the attempt's log file, with a run_as account its groups
// (setgroups), gid and uid (in that order: after setuid nothing can be changed back) and HOME,
// USER, LOGNAME, then chdir to the working directory (as that account) and execve. A failed
// switch makes the child exit 126 with launch_error() naming the account. The child asks for
// SIGKILL when the agent dies (PR_SET_PDEATHSIG, set after the account switch, which would clear
// it), so a crashed agent leaves no replica's main process behind it.
//
// A command that cannot be executed (not found, not executable) makes the child exit 127 or 126,
// and launch_error() plus a line in the log file say why. Launch() returns once the child is
// forked, without waiting for it (the agent loop would stall with it: no heartbeats, no other
// launches); the replica keeps the read end of a close-on-exec report pipe, non-blocking, and
// each PollLaunch() reads what is there: EOF means the command was executed (kStarted), a
// ChildError why it was not (kFailed). Neither within launch_timeout() (30 s) of the fork: the
// child is stuck before execve (a hung chdir on a dead network mount, an NSS lookup that never
// returns, an init that never starts the command), and the poll that finds the deadline past
// SIGKILLs it and says so (kFailed), to be reaped like any other. OnExited() settles the launch:
// what the child wrote before it ended is read there. Before the launch is settled the child is
// the attempt's only process, maybe not yet its own group's leader: Signal() and KillAll() go to
// its pid then.
//
// Two modes, chosen once by the agent at start (agent/agent_options.cc says in its log which):
//
// With a PID namespace (given `replica_init`, the path of cohort-replica-init, where the agent
// may create namespaces: root or CAP_SYS_ADMIN, ProbePidNamespaces()): the child is cloned into
// a new PID and mount namespace (a fresh /proc there; the host's mounts, later ones too, reach it
// as a slave) and, after the same setup, executes cohort-replica-init (agent/replica_init.cc) as
// the namespace's PID 1, which runs the command as its child in a session of its own, forwards
// signals to it, reaps orphans, and exits with the command's status, which it also writes to a
// pipe so that a death by signal is reported as one.
// The kernel then kills everything left in the namespace: a descendant that cleared its
// environment and double-forked dies with its replica on success, failure, stop or restart. pid()
// is init's host pid (the agent's child, waited for and signalled); command_pid() is the
// command's host pid. Signal() goes to init (forwarded to the command's group) and to every
// other process of the namespace (or cgroup) that is not in that group; KillAll() kills init
// (the namespace with it).
// Should the agent be SIGKILLed and PR_SET_PDEATHSIG not fire, init keeps COHORT_ATTEMPT_DIR in
// its environment: SweepLeftovers() at the next start kills it, and the namespace with it.
// LaunchRequest::pid_namespace false (container runtimes, which make their own) uses the other
// mode for that launch.
//
// Without one (not root): killing reaches the process group and every member of the cgroup
// (which also catches descendants that called setsid themselves or daemonized); Signal() goes to
// the group and to each member of the cgroup outside it. The group is signalled until it is seen
// empty, never after, so a recycled process-group id is never hit.
// Without a cgroup either, descendants that left the process group are found by their
// environment: every process of the attempt inherits COHORT_ATTEMPT_DIR=<the absolute working
// directory> (agent/proc_scan.h scans /proc for it), so setsid children and double-forked daemons
// are signalled (once: Signal() skips the group's members) and waited for too. Only a descendant
// that clears or rewrites its environment escapes that; while the agent lives it still is the
// agent's descendant (the daemon is a PR_SET_CHILD_SUBREAPER), and the agent kills its remaining
// descendants when it shuts down; one that outlives a SIGKILLed agent is not found again.
// SweepLeftovers() is for the start of an agent whose predecessor was killed (SIGKILL: its
// replicas' main processes die with it, by PR_SET_PDEATHSIG, but nothing else of them does).
//
// Signal() delivers once to each process (a stock trainer takes a second SIGTERM as "exit now,
// skip the checkpoint"): a process that changes its process group at that very moment may get
// it twice or not at all; one that ends meanwhile is no error.
//
// Thread safety: none; the agent loop calls it. Launch() may run while other threads of the
// process exist (tests): the child calls only async-signal-safe functions before execve. The
// death signal fires when the *thread* that launched exits: launch from a thread that lives as
// long as the process (the agent loop runs on the main thread).
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "agent/cgroup.h"
#include "agent/launcher.h"

namespace cohort::agent {

// The variable naming the attempt's working directory in every process of the attempt.
inline constexpr char kAttemptDirVariable[] = "COHORT_ATTEMPT_DIR";
// The file name of the namespace init, installed beside cohort-agent (found by
// FindBuiltinBinary, agent/replica_env.h).
inline constexpr char kReplicaInitName[] = "cohort-replica-init";

class ProcessLauncher : public Launcher {
 public:
  // SIGKILL to every process whose COHORT_ATTEMPT_DIR lies under `work_dir` (what an earlier
  // agent with this work dir left behind), until none is left, except those of the attempts
  // whose working dirs are `keep_dirs` (handed over by a live restart, agent/handoff.h). Returns
  // how many it killed.
  static int SweepLeftovers(const std::string& work_dir,
                            const std::set<std::string>& keep_dirs = {});

  // OK when this process may create PID (and mount) namespaces; else why not (EPERM: not root).
  static Status ProbePidNamespaces();

  // `cgroups` may be unavailable; then only process groups bound the replica. `replica_init`:
  // cohort-replica-init's path, to give each replica a PID namespace (the caller probed that it
  // may); empty: none.
  explicit ProcessLauncher(CgroupManager cgroups, std::string replica_init = "")
      : cgroups_(std::move(cgroups)), replica_init_(std::move(replica_init)) {}

  StatusOr<std::unique_ptr<ReplicaProcess>> Launch(const LaunchRequest& request) override;
  // A process an earlier image of this agent launched (agent/handoff.h): still this process's
  // child, its status pipe (in a PID namespace) still open at the descriptor handed over.
  StatusOr<std::unique_ptr<ReplicaProcess>> Adopt(const HandedOverAttempt& handed) override;

  const CgroupManager& cgroups() const { return cgroups_; }
  bool pid_namespaces() const { return !replica_init_.empty(); }

  // How long after Launch() a child may take to execute the command (or say why it cannot)
  // before a PollLaunch() kills it.
  std::chrono::milliseconds launch_timeout() const { return launch_timeout_; }
  void set_launch_timeout(std::chrono::milliseconds timeout) { launch_timeout_ = timeout; }

  // Tests only: each child launched from now on reads one byte from `fd` (a pipe's read end the
  // test writes to) before it enters its working directory, where a hung chdir would stall it;
  // -1 (the default): none.
  void HoldChildrenBeforeExecForTesting(int fd) { hold_fd_ = fd; }

 private:
  CgroupManager cgroups_;
  std::string replica_init_;
  std::chrono::milliseconds launch_timeout_{std::chrono::seconds(30)};
  int hold_fd_ = -1;
};

}  // namespace cohort::agent
