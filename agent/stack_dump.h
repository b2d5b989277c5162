// Stack dumps of a replica attempt, for the coordinator's hang watchdog (DumpStacks in the wire
// schema): what every process of the attempt is doing while it is stuck.
//
//  - Python stacks: a Python process that imported cohort.collective or cohort.torch registered
//    faulthandler on kStackDumpSignal (python/cohort/_stack_dump.py), writing to
//    <dir>/python-<pid>.txt, where <dir> is COHORT_STACK_DUMP_DIR of its environment (the agent
//    sets it, with COHORT_STACK_DUMP_SIGNAL, agent/replica_env.h). Only a process whose file
//    exists is signalled (a process that did not register would be killed by the signal); what
//    the file gains within `python_wait` is its dump. faulthandler writes a dump in many small
//    writes, so a file is read once it grew and then stayed `python_quiet` unchanged.
//  - Native stacks: eu-stack -p PID (elfutils), or where it is missing gdb -batch -p PID
//    ("thread apply all bt"), each given at most `native_timeout`. Either must be allowed to
//    ptrace the replica (the agent runs as root, or Yama's ptrace_scope is 0).
// The processes are the attempt's command (ReplicaProcess::command_pid(), not a PID namespace's
// init) and its descendants (at most kMaxProcesses), by host pid; a Python file is named by the
// pid in the process's own namespace (NamespacePid, agent/proc_scan.h).
//
// TakeStackDump blocks for up to a few seconds: the agent calls it on a thread of its own.
// Thread safety: the function keeps no state.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

namespace cohort::agent {

// The signal cohort's Python package registers faulthandler on (a real-time one, which training
// code does not use for anything else, unlike SIGUSR1/SIGUSR2).
int StackDumpSignal();

struct StackDumpOptions {
  std::chrono::milliseconds python_wait{2000};
  std::chrono::milliseconds python_quiet{200};
  std::chrono::milliseconds native_timeout{10000};
  static constexpr int kMaxProcesses = 8;
};

// The stacks of `main_pid` and its descendants as text: a header naming `reason`, then per
// process its command line, Python stacks (when registered) and native stacks, or why they could
// not be taken.
std::string TakeStackDump(pid_t main_pid, const std::string& python_dir, const std::string& reason,
                          const StackDumpOptions& options = {});

}  // namespace cohort::agent
