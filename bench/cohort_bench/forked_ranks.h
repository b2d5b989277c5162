// Running one benchmark rank per process on this host: what `cohort-bench allreduce --transport
// ucx` and `cohort-bench ps --transport ucx` do when no --rank is given.
#pragma once

#include <functional>

namespace cohort::bench {

// A TCP port on 127.0.0.1 that was free a moment ago (for the forked ranks' bootstrap store).
int FreeLoopbackPort();

// Forks `ranks` processes; process i runs rank_main(i) and exits with what it returns. Returns 0
// when every process exited 0, else 1.
int RunForkedRanks(int ranks, const std::function<int(int rank_index)>& rank_main);

}  // namespace cohort::bench
