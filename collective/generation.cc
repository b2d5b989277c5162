#include "collective/generation.h"

#include <charconv>
#include <cstdio>
#include <random>
#include <thread>

#include "collective/transport/ucx/ucx_transport.h"

namespace cohort::collective {
namespace {

// How long one look at the generation key may block: waits stay responsive to `stop`.
constexpr auto kPollSlice = std::chrono::milliseconds(200);
// Pause after finding only a stale generation, so a rank does not spin on the store.
constexpr auto kStalePause = std::chrono::milliseconds(20);
// How long to wait for the store's answer when checking one key.
constexpr auto kCheckTimeout = std::chrono::milliseconds(1000);

std::string JoinedKey(const std::string& prefix, const std::string& generation,
                      const std::string& member) {
  return GenerationPrefix(prefix, generation) + "/joined/" + member;
}

std::string WorkersKey(const std::string& prefix, const std::string& generation) {
  return GenerationPrefix(prefix, generation) + "/num_workers";
}

// RoundHeader::worker, the widest use of a worker's index on the wire, has 16 bits.
constexpr int kMaxWorkers = 65535;

}  // namespace

std::string NewGenerationId() {
  std::random_device rd;
  const uint64_t v = (uint64_t{rd()} << 32 | rd()) ^
                     static_cast<uint64_t>(SteadyClock::now().time_since_epoch().count());
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string GenerationKey(const std::string& prefix) { return prefix + "/generation"; }

std::string GenerationPrefix(const std::string& prefix, const std::string& generation) {
  return prefix + "/" + generation;
}

StatusOr<std::string> PublishGeneration(Bootstrap& bootstrap, const std::string& prefix,
                                        int num_workers) {
  std::string generation = NewGenerationId();
  // Before the id: whoever reads the id finds the shape.
  COHORT_RETURN_IF_ERROR(bootstrap.Put(WorkersKey(prefix, generation), std::to_string(num_workers))
                             .WithContext("recording the generation's workers"));
  COHORT_RETURN_IF_ERROR(
      bootstrap.Put(GenerationKey(prefix), generation).WithContext("publishing the generation"));
  return generation;
}

StatusOr<int> GenerationWorkers(Bootstrap& bootstrap, const std::string& prefix,
                                const std::string& generation, Deadline deadline) {
  const std::string key = WorkersKey(prefix, generation);
  COHORT_ASSIGN_OR_RETURN(std::optional<std::string> text, bootstrap.Lookup(key, deadline));
  if (!text.has_value()) return NotFound("the chief recorded no " + key);
  int n = 0;
  const char* end = text->data() + text->size();
  const auto [at, error] = std::from_chars(text->data(), end, n);
  if (error != std::errc() || at != end || n < 1 || n > kMaxWorkers) {
    return DataLoss(key + " holds '" + text->substr(0, 32) + "', not a count of workers (1.." +
                    std::to_string(kMaxWorkers) + ")");
  }
  return n;
}

StatusOr<std::string> AwaitGeneration(Bootstrap& bootstrap, const std::string& prefix,
                                      const std::string& member, Deadline deadline,
                                      const std::atomic<bool>* stop) {
  std::string stale;  // the last id found joined: not asked about again
  while (true) {
    if (stop != nullptr && stop->load()) return Cancelled("stopped while waiting for the workers");
    auto g =
        bootstrap.Get(GenerationKey(prefix), std::min(deadline, SteadyClock::now() + kPollSlice));
    if (!g.ok() && g.status().code() != StatusCode::kDeadlineExceeded) return g.status();
    if (g.ok() && *g != stale) {
      auto joined =
          bootstrap.Lookup(JoinedKey(prefix, *g, member), SteadyClock::now() + kCheckTimeout);
      if (joined.ok() && joined->has_value()) {
        stale = *g;
      } else if (joined.ok()) {
        // Fresh, unless the store that named it died meanwhile (the old chief's): only a live
        // store that still names it confirms it.
        auto again = bootstrap.Get(GenerationKey(prefix), SteadyClock::now() + kCheckTimeout);
        if (again.ok() && *again == *g) {
          COHORT_RETURN_IF_ERROR(bootstrap.Put(JoinedKey(prefix, *g, member), "1")
                                     .WithContext("recording the join of generation " + *g));
          return *g;
        }
      }
    }
    if (SteadyClock::now() >= deadline) {
      return DeadlineExceeded("worker 0 (chief) published no new generation of '" + prefix +
                              "' in time");
    }
    if (g.ok()) std::this_thread::sleep_for(kStalePause);
  }
}

StatusOr<std::unique_ptr<Transport>> OpenGenerationTransport(
    Bootstrap& bootstrap, const std::string& prefix, const std::string& generation, int rank,
    int size, std::chrono::milliseconds connect_timeout, std::function<std::string(int)> rank_name,
    size_t tcp_send_buffer_bytes) {
  UcxTransportOptions o;
  o.key_prefix = GenerationPrefix(prefix, generation);
  o.connect_timeout = connect_timeout;
  o.rank_name = std::move(rank_name);
  o.tcp_send_buffer_bytes = tcp_send_buffer_bytes;
  COHORT_ASSIGN_OR_RETURN(auto t, UcxTransport::Create(bootstrap, rank, size, o));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace cohort::collective
