// Cgroups: the agent's use of cgroup v2, so that a replica's every descendant can be found and
// killed (even one that left the process group with setsid), its CPU weighed, its memory bounded
// and its processes counted (a fork bomb in a replica stops at kReplicaPidsLimit, not at the
// node's pid_max).
//
// CgroupManager::Detect() looks for a cgroup2 mount in /proc/self/mountinfo (the unified
// hierarchy, also in hybrid mode under /sys/fs/cgroup/unified), finds the agent's own cgroup
// (/proc/self/cgroup, line "0::/path") and checks that a child cgroup can be made there. Replica
// cgroups go to <own cgroup>/cohort/<node id>@<agent tag>/<job>.<replica>.<attempt>: the agent's
// level keeps several agents started from one cgroup (tests, a one-host demo, two clusters'
// agents of one node id under one --cgroup-root) out of each other's way, so SweepStale() of one
// never touches another's replicas. The tag (agent/work_dir_lock.h's AgentTag: its work dir's,
// which one running agent holds) is what makes the level the agent's own; the node id is there
// for the people who read the hierarchy. Images older than tags named the level <node id> alone:
// replicas one of them hands over in a live restart keep their cgroups there (the handoff names
// each one's path), and what such a replica left after a later SIGKILL is found at the next start
// by the COHORT_ATTEMPT_DIR it carries (agent/agent_options.h's BuildAgent).
// CPU weights (and quotas), memory and pids limits are written where the cpu, memory and pids
// controllers are enabled for that subtree (enabling them is tried once); without them the cgroup
// still groups and kills processes.
//
// Thread safety: none needed; the object is immutable after Detect().
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace cohort::agent {

// The cgroup v2 cpu.weight of `cpus` CPUs: cgroup v1's cpu.shares (1024 a CPU) converted as runc
// and Kubernetes convert them, 1 + (shares - 2) * 9999 / 262142, so that a process replica and a
// container replica of the same cpus weigh the same. 1 CPU is 39, 3 are 118; at most 10000.
int CpuWeight(int cpus);

// The most processes and threads a replica may have at once, process or container (its cgroup's
// pids.max, the OCI bundle's pids.limit, docker's --pids-limit): far above what training uses
// (data loader workers, NCCL's and UCX's threads), far below a node's pid_max.
inline constexpr int64_t kReplicaPidsLimit = 32768;

class CgroupManager {
 public:
  // An unavailable manager: every replica relies on its process group alone.
  CgroupManager() = default;

  // Finds a writable cgroup v2 hierarchy. Never fails: when there is none, available() is false
  // and reason() says why. `node_id` and `agent_tag` name this agent's level ('/' replaced; no
  // "@<tag>" with an empty tag); `root_override` (--cgroup-root) is used instead of the agent's
  // own cgroup; it must be a directory of a cgroup2 filesystem (else nothing is created in it).
  static CgroupManager Detect(const std::string& node_id, const std::string& agent_tag,
                              const std::string& root_override = "");
  // The cgroup v2 directory this process is in (the cgroup2 mount joined with /proc/self/cgroup's
  // path), where Detect() puts "cohort" without a root override; else why there is none.
  static StatusOr<std::string> OwnDirectory();

  bool available() const { return !base_.empty(); }
  const std::string& reason() const { return reason_; }
  // <own cgroup>/cohort/<node id>@<agent tag>
  const std::string& base() const { return base_; }

  // Kills and removes every replica cgroup left under base() by an earlier run of this agent
  // (one killed with SIGKILL leaves its replicas' descendants behind), except the cgroups in
  // `keep` (those of attempts a live restart handed over, agent/handoff.h). Returns how many.
  int SweepStale(const std::set<std::string>& keep = {}) const;

  // Creates <base>/<name> and writes, where those controllers are enabled, cpu.weight
  // (CpuWeight(cpus)), cpu.max (cpus' worth, only with `cpu_quota`), memory.max (`memory_mb`; 0
  // writes none of them) and pids.max (kReplicaPidsLimit). Returns its path.
  StatusOr<std::string> Create(const std::string& name, int cpus, bool cpu_quota,
                               int64_t memory_mb) const;

  // Helpers on a cgroup directory; all are harmless when it no longer exists.
  static std::vector<pid_t> Procs(const std::string& path);
  // How many of its processes the kernel's OOM killer has ended (memory.events' oom_kill, which
  // counts kills by any OOM, its own memory.max or the host's); 0 without the memory controller.
  static int64_t OomKills(const std::string& path);
  static void Signal(const std::string& path, int sig);
  // cgroup.kill where the kernel has it (5.14+), else SIGKILL to every member.
  static void Kill(const std::string& path);
  // Removes the directory; fails while processes remain.
  static Status Remove(const std::string& path);
  // Kill, then Remove once the kernel has emptied the cgroup (a second at most); fails while
  // processes (or child cgroups) remain.
  static Status KillAndRemove(const std::string& path);

 private:
  std::string base_;
  std::string reason_;
  bool cpu_controller_ = false;
  bool memory_controller_ = false;
  bool pids_controller_ = false;
};

}  // namespace cohort::agent
