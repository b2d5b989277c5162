// Facts about processes on one host, shared by the UCX transport (which picks shared memory for
// same-host peers) and the shared-memory all-reduce: who shares this host, and whether a process
// on it is still alive. Shared memory has no failure detection of its own, so a dead same-host
// peer is noticed by PID.
#pragma once

#include <atomic>
#include <string>

namespace cohort::collective {

// Identity of this host, PID namespace and network namespace: "<boot id>/<pid ns>/<net ns>".
// Ranks with equal identities share the host, can check each other's PIDs, and talk over shared
// memory; ranks in other network namespaces (containers, bench/netns) count as other hosts.
std::string HostIdentity();

// False once process `pid` (in this PID namespace) is gone or a zombie.
bool ProcessAlive(int pid);

// A name a process holds while something of it is open, for same-host peers to check: an abstract
// unix socket bound to "cohort-live/<name>" (per network namespace, like HostIdentity's hosts),
// which the kernel releases when it is closed or its process dies, leaving nothing behind. The
// UCX transport holds one while it is open, so a same-host peer tells a closed (or cancelled)
// transport from a live one even while its process lives on. A child forked without exec does not
// hold its parent's tokens: its copies are closed at the fork (its objects then hold nothing).
class LivenessToken {
 public:
  // Binds the name; a token that could not be bound (the name is taken, say) holds nothing.
  explicit LivenessToken(const std::string& name);
  ~LivenessToken();
  LivenessToken(const LivenessToken&) = delete;
  LivenessToken& operator=(const LivenessToken&) = delete;
  bool held() const { return fd_.load() >= 0; }
  // Gives the name up; idempotent, and safe from any thread.
  void Release();

 private:
  std::atomic<int> fd_{-1};
};

// Whether some process holds `name` (a LivenessToken's), by trying to bind it: true when the name
// is taken. A probe that cannot tell (no socket) says true.
bool LivenessTokenHeld(const std::string& name);

}  // namespace cohort::collective
