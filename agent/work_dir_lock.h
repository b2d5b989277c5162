// WorkDirLock: one running agent per work dir.
//
// Why: an agent's work dir holds what it alone may touch: its replicas' attempt directories, how
// they ended (.agent-ends.json), a live restart's handoff, and the key of its container ids
// (AgentTag). An agent started on a dir another one runs on (a second unit, a hand-started
// agent beside systemd's, both on the default /var/lib/cohort-agent) would take the first one's
// replicas for leftovers of an earlier run: its start sweeps them (their processes killed, their
// containers force-deleted). So each agent holds an exclusive flock(2) on <work_dir>/.agent.lock
// while it runs, the file saying its pid; a second agent is refused before it touches anything.
//
// Contract: Take() at start, before the handoff is read or anything swept; the lock lasts as long
// as the object, and as the process (the kernel drops it when the process ends, however it ends).
// Its descriptor is closed on exec: a live restart's new image, the same pid, takes the lock
// again (a moment without it, when nothing of the agent runs). Replicas and runtime commands never
// inherit it.
#pragma once

#include <string>

#include "common/file_util.h"
#include "common/status.h"

namespace cohort::agent {

class WorkDirLock {
 public:
  // Makes `work_dir` where missing and locks it. kFailedPrecondition naming the dir and the pid
  // of the agent holding it ("work dir /w is in use by another cohort-agent (pid 412): ...");
  // errno's status naming the file when it cannot be opened or locked.
  static StatusOr<WorkDirLock> Take(const std::string& work_dir);

 private:
  explicit WorkDirLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;  // holds the lock
};

// What tells an agent's host-wide names from those of the other agents of its host: its container
// ids (agent/oci_launcher.h) and its level of replica cgroups (agent/cgroup.h). Both are the
// host's, and two agents of one host (two clusters, test clusters in parallel, even of one node
// id) may run the same attempt of the same job name, where one's start would take the other's
// for leftovers of its own and remove them. 8 hex digits of the FNV-1a of the agent's work dir
// made absolute, which one running agent holds at a time (WorkDirLock): the same across the
// agent's restarts.
std::string AgentTag(const std::string& work_dir);

}  // namespace cohort::agent
