#include "collective/ps/ps_generation.h"

#include <cstdio>
#include <random>
#include <thread>

#include "collective/transport/ucx/ucx_transport.h"

namespace cohort::collective::ps {

std::string NewGenerationId() {
  std::random_device rd;
  const uint64_t v = (uint64_t{rd()} << 32 | rd()) ^
                     static_cast<uint64_t>(SteadyClock::now().time_since_epoch().count());
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string GenerationKey(const std::string& prefix) { return prefix + "/generation"; }

StatusOr<std::string> AwaitGeneration(Bootstrap& bootstrap, const std::string& prefix, const std::string& previous,
                                      Deadline deadline, const std::atomic<bool>* stop, int rank) {
  std::string stale = previous;
  while (true) {
    if (stop != nullptr && stop->load()) return Cancelled("stopped while waiting for the workers");
    auto g = bootstrap.Get(GenerationKey(prefix), std::min(deadline, SteadyClock::now() + std::chrono::milliseconds(200)));
    if (g.ok() && *g != previous && *g != stale) {
      // UcxTransport's key for this rank's address in that generation (ucx_transport.h).
      auto mine = bootstrap.Get(prefix + "/" + *g + "/addr/" + std::to_string(rank),
                                SteadyClock::now() + std::chrono::milliseconds(1000));
      if (mine.ok()) {
        stale = *g;
      } else {
        // No address of ours: a fresh generation, unless the store that named it died meanwhile
        // (the old chief's): only a live store that still names it confirms it.
        auto again = bootstrap.Get(GenerationKey(prefix), SteadyClock::now() + std::chrono::milliseconds(1000));
        if (again.ok() && *again == *g) return *g;
      }
    }
    if (!g.ok() && g.status().code() != StatusCode::kDeadlineExceeded) return g.status();
    if (SteadyClock::now() >= deadline) {
      return DeadlineExceeded("worker 0 (chief) published no new parameter-server generation in time");
    }
    if (g.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

StatusOr<std::unique_ptr<Transport>> MakePsTransport(Bootstrap& bootstrap, const std::string& prefix,
                                                     const std::string& generation, int rank, int num_workers,
                                                     int num_servers, std::chrono::milliseconds timeout) {
  UcxTransportOptions o;
  o.key_prefix = prefix + "/" + generation;
  o.connect_timeout = timeout;
  o.rank_name = [num_workers](int r) {
    return r < num_workers ? "worker " + std::to_string(r) : "parameter server " + std::to_string(r - num_workers);
  };
  COHORT_ASSIGN_OR_RETURN(auto t, UcxTransport::Create(bootstrap, rank, num_workers + num_servers, o));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace cohort::collective::ps
