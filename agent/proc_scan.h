// ProcScan reads /proc to find the processes of a replica where no cgroup holds them: the live
// members of a process group, the processes whose environment carries an entry (every replica
// process inherits COHORT_ATTEMPT_DIR=<its attempt's working dir>, agent/process_launcher.h),
// and the descendants of a process. "Live" leaves out zombies, which no signal affects.
//
// Each answer is a snapshot: a process may start or end right after it, so callers that kill
// scan again until nothing is found. A process whose environment this user may not read
// (another user's, without root) is not listed by ProcessesWithEnvEntry.
//
// Thread safety: the functions keep no state.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace cohort::agent {

bool GroupHasLiveMembers(pid_t pgid);

// Live processes with `entry` ("NAME=value") in their environment; with `prefix`, with an entry
// that starts with it.
std::vector<pid_t> ProcessesWithEnvEntry(const std::string& entry, bool prefix = false);

// Live processes below `root` (its children, their children, ...), not `root` itself.
std::vector<pid_t> Descendants(pid_t root);

// `pid`'s pid in its own (innermost) PID namespace, from /proc/<pid>/status's NSpid line: what
// getpid() returns there. `pid` itself where the kernel has no NSpid line; 0 when it is gone.
pid_t NamespacePid(pid_t pid);

// Sends `sig` to each of `pids`; returns how many it reached.
int SignalEach(const std::vector<pid_t>& pids, int sig);

// SIGKILL to whatever `find` lists, scanning again until it lists nobody (a process may fork
// while it is being killed; at most 100 rounds). Returns how many distinct processes it killed.
int KillUntilNoneLeft(const std::function<std::vector<pid_t>()>& find);

}  // namespace cohort::agent
