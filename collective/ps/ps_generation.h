// Transport generations of a parameter-server job (internal to collective/ps). Worker 0 publishes
// a fresh id under "<prefix>/generation" each time the workers (re)build their transport; the
// other workers and the servers wait for an id they have not joined yet. UCX keys live under
// "<prefix>/<generation>", so a rebuilt job never meets stale addresses.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "collective/bootstrap.h"
#include "collective/transport/transport.h"

namespace cohort::collective::ps {

std::string NewGenerationId();
std::string GenerationKey(const std::string& prefix);

// Waits until the generation key holds a value other than `previous` (returns it), `stop` is
// set (kCancelled) or `deadline` passes (kDeadlineExceeded).
//
// A generation in which `rank` already published its transport address was joined by an earlier
// incarnation of this rank (a restarted process reading the old chief's store before the new
// chief replaced it): its peers are gone, and joining would wait out the connect timeout. Such a
// generation is skipped like `previous`.
StatusOr<std::string> AwaitGeneration(Bootstrap& bootstrap, const std::string& prefix, const std::string& previous,
                                      Deadline deadline, const std::atomic<bool>* stop, int rank);

// A UCX transport for rank `rank` of workers + servers in `generation`.
StatusOr<std::unique_ptr<Transport>> MakePsTransport(Bootstrap& bootstrap, const std::string& prefix,
                                                     const std::string& generation, int rank, int num_workers,
                                                     int num_servers, std::chrono::milliseconds timeout);

}  // namespace cohort::collective::ps
