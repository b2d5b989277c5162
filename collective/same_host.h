// Facts about processes on one host, shared by the UCX transport (which picks shared memory for
// same-host peers) and the shared-memory all-reduce: who shares this host, and whether a process
// on it is still alive. Shared memory has no failure detection of its own, so a dead same-host
// peer is noticed by PID.
#pragma once

#include <string>

namespace cohort::collective {

// Identity of this host, PID namespace and network namespace: "<boot id>/<pid ns>/<net ns>".
// Ranks with equal identities share the host, can check each other's PIDs, and talk over shared
// memory; ranks in other network namespaces (containers, bench/netns) count as other hosts.
std::string HostIdentity();

// False once process `pid` (in this PID namespace) is gone or a zombie.
bool ProcessAlive(int pid);

}  // namespace cohort::collective
