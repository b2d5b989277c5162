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
// under "<prefix>/<id>/joined/<rank>". It also returns an id only when the store still names it
// after the check, so an id read from a chief's store that died meanwhile is not joined.
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

// The chief: publishes a fresh id and returns it.
StatusOr<std::string> PublishGeneration(Bootstrap& bootstrap, const std::string& prefix);

// Every other rank: waits until the store names a generation `rank` has not joined, records the
// join and returns the id. kCancelled once `stop` (when given) is set; kDeadlineExceeded at
// `deadline`; a bootstrap error other than a timeout as it is.
StatusOr<std::string> AwaitGeneration(Bootstrap& bootstrap, const std::string& prefix, int rank,
                                      Deadline deadline, const std::atomic<bool>* stop = nullptr);

// A UCX transport for `rank` of `size` ranks of `generation` (its keys under GenerationPrefix),
// naming ranks in errors by `rank_name`; TCP sockets with a send buffer of `tcp_send_buffer_bytes`
// (0: UCX's choice; see UcxTransportOptions).
StatusOr<std::unique_ptr<Transport>> OpenGenerationTransport(
    Bootstrap& bootstrap, const std::string& prefix, const std::string& generation, int rank,
    int size, std::chrono::milliseconds connect_timeout, std::function<std::string(int)> rank_name,
    size_t tcp_send_buffer_bytes = 0);

}  // namespace cohort::collective
