// Running one benchmark rank per process on this host: what `cohort-bench allreduce --transport
// ucx` and `cohort-bench ps --transport ucx` do when no --rank is given.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "collective/store_bootstrap.h"
#include "common/status.h"

namespace cohort::bench {

// One rank's way into the job: the bootstrap store it connected to at `address`, and the store
// itself when this rank hosts it (worker 0), kept for the rank's lifetime.
struct RankBootstrap {
  std::unique_ptr<collective::StoreServer> store;
  std::unique_ptr<collective::StoreBootstrap> bootstrap;
};
StatusOr<RankBootstrap> JoinBootstrap(const std::string& address, bool host_store,
                                      std::chrono::milliseconds timeout);

// A TCP port on 127.0.0.1 that was free a moment ago (for the forked ranks' bootstrap store).
int FreeLoopbackPort();

// Forks `ranks` processes; process i runs rank_main(i) and exits with what it returns. Returns 0
// when every process exited 0, else 1.
int RunForkedRanks(int ranks, const std::function<int(int rank_index)>& rank_main);

}  // namespace cohort::bench
