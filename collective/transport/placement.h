// Placement describes where the ranks of a transport run: the host of each rank, and whether ranks
// on one host may also reach each other through shared-memory segments. Every transport provides
// one (Transport::placement), so the Communicator chooses its shared-memory and hierarchical
// algorithms from this description alone, never from the transport's type; the in-process
// transport can fake any placement, which makes those choices testable in one process.
//
// Hosts are opaque names: ranks with equal names share a host (UcxTransport uses HostIdentity()
// of same_host.h: one boot, PID namespace and network namespace).
// Thread safety: a value; immutable once a transport hands it out.
#pragma once

#include <string>
#include <vector>

namespace cohort::collective {

struct Placement {
  std::vector<std::string> hosts;  // by rank
  bool shared_memory = false;      // same-host ranks may map each other's segments

  // Every one of `num_ranks` ranks on one host, "local".
  static Placement OneHost(int num_ranks, bool shared_memory);

  // True when ranks [first, first + count) all run on `rank`'s host (ranks past the end are
  // ignored).
  bool AllOnHostOf(int rank, int first, int count) const;
  // The hosts of ranks [0, num_ranks), in the order of their first rank, each with its ranks in
  // rank order.
  std::vector<std::vector<int>> GroupByHost(int num_ranks) const;
};

}  // namespace cohort::collective
