// Generations: every build of a job's transport (a Communicator's, the parameter server's) is one
// generation, named by a fresh id that worker 0, the chief, publishes under GenerationKey(prefix)
// each time the workers (re)build. Every other rank waits for an id, and every key of that build
// (transport addresses, shared-memory segments) lives under GenerationPrefix(prefix, id): a
// rebuilt job never meets a stale address, and a long-lived reducer or parameter server can tell
// that the workers rebuilt and join again.
//
// Stale generations, one rule: a generation is stale for a rank once that rank has joined it, in
// this process or in an earlier incarnation (a restarted process reading the old chief's store
// before the new chief replaced the id). AwaitGeneration skips stale ones and records each join
// under "<prefix>/<id>/joined/<member>" (a worker's rank, or a name such as "reducer0" for a rank
// whose number depends on the generation). It also returns an id only when the store still names
// it after the check, so an id read from a chief's store that died meanwhile is not joined.
//
// Shape: the chief records how many workers the generation has ("<prefix>/<id>/num_workers")
// before it publishes the id. A reducer takes its count from there rather than from its own
// environment, so it serves whatever world the workers built: under Cohort one rank per training
// replica, or more where a launcher inside each replica (torchrun --nproc_per_node) started them.
//
// Thread safety: free functions; the Bootstrap is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "collective/bootstrap.h"
#include "collective/transport/transport.h"

namespace cohort::collective {

// 16 hex digits, random.
std::string NewGenerationId();
// Where the chief publishes the current id.
std::string GenerationKey(const std::string& prefix);
// The key namespace of one generation.
std::string GenerationPrefix(const std::string& prefix, const std::string& generation);

// The chief: records the generation's `num_workers`, publishes a fresh id and returns it.
StatusOr<std::string> PublishGeneration(Bootstrap& bootstrap, const std::string& prefix,
                                        int num_workers);

// How many workers the chief recorded for `generation`: kNotFound where it recorded none,
// kDataLoss naming the key where the value is not a count of workers (1..65535).
StatusOr<int> GenerationWorkers(Bootstrap& bootstrap, const std::string& prefix,
                                const std::string& generation, Deadline deadline);

// Every other rank: waits until the store names a generation `member` has not joined, records the
// join and returns the id. kCancelled once `stop` (when given) is set; kDeadlineExceeded at
// `deadline`; a bootstrap error other than a timeout as it is.
StatusOr<std::string> AwaitGeneration(Bootstrap& bootstrap, const std::string& prefix,
                                      const std::string& member, Deadline deadline,
                                      const std::atomic<bool>* stop = nullptr);
// The same for a rank whose number is fixed (a worker's, a parameter server's).
inline StatusOr<std::string> AwaitGeneration(Bootstrap& bootstrap, const std::string& prefix,
                                             int rank, Deadline deadline,
                                             const std::atomic<bool>* stop = nullptr) {
  return AwaitGeneration(bootstrap, prefix, std::to_string(rank), deadline, stop);
}

// A UCX transport for `rank` of `size` ranks of `generation` (its keys under GenerationPrefix),
// naming ranks in errors by `rank_name`; TCP sockets with a send buffer of `tcp_send_buffer_bytes`
// (0: UCX's choice; see UcxTransportOptions).
StatusOr<std::unique_ptr<Transport>> OpenGenerationTransport(
    Bootstrap& bootstrap, const std::string& prefix, const std::string& generation, int rank,
    int size, std::chrono::milliseconds connect_timeout, std::function<std::string(int)> rank_name,
    size_t tcp_send_buffer_bytes = 0);

}  // namespace cohort::collective
