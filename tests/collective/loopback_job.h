// RunLoopbackJob: a whole job in one process for the collective tests: `workers` Communicators and
// `reducers` reducers on threads over one loopback fabric and an in-memory bootstrap.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "collective/reducer.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "tests/collective/test_util.h"

namespace cohort::collective::testing {

// What each worker of a loopback job runs: body(its Communicator, its failures).
using WorkerBody = std::function<void(Communicator&, std::vector<std::string>*)>;

// The options of a loopback job's Communicators: each call bounded by `timeout`, buffers
// pipelined in `chunk_bytes` pieces with `window` of them in flight.
inline CommunicatorOptions LoopbackOptions(std::chrono::milliseconds timeout, size_t chunk_bytes,
                                           int window = CommunicatorOptions{}.window) {
  CommunicatorOptions options;
  options.timeout = timeout;
  options.chunk_bytes = chunk_bytes;
  options.window = window;
  return options;
}

// How a loopback job's fabric behaves: sends of at most `eager_limit` bytes complete at once
// (LoopbackFabric::SetEagerLimit); `placement` (one per rank, workers first), the hosts the ranks
// report, shared memory among them allowed or not (default: all on one host, talking as across
// hosts).
struct FabricOptions {
  size_t eager_limit = 0;
  std::optional<Placement> placement;
};

// Each worker builds its Communicator from `options` (made loopback here) and runs
// body(comm, &its failures). Every failure lands in `failures` as "rank R: ...": a worker's
// Create error, what its body recorded, and a reducer's error ("reducer I: ...") unless
// `reducer_status` (one slot per reducer) takes the reducers' outcomes instead. Once every
// worker's Communicator is gone the reducers are told to stop: those that still wait for a round
// (workers that failed send no stop) end with kCancelled.
inline void RunLoopbackJob(int workers, int reducers, CommunicatorOptions options,
                           const WorkerBody& body, std::vector<std::string>* failures,
                           std::vector<Status>* reducer_status = nullptr,
                           const FabricOptions& fabric_options = {}) {
  LoopbackFabric fabric(fabric_options.placement
                            ? *fabric_options.placement
                            : Placement::OneHost(workers + reducers, /*shared_memory=*/false));
  fabric.SetEagerLimit(fabric_options.eager_limit);
  InMemoryBootstrap bootstrap;
  std::mutex mu;
  options.transport = CommunicatorOptions::TransportKind::kLoopback;
  options.loopback_fabric = &fabric;
  std::atomic<bool> stop{false};
  std::atomic<int> workers_left{workers};
  RunRanks(workers + reducers, [&](int r) {
    std::vector<std::string> local;
    if (r < workers) {
      {
        auto comm = Communicator::Create(bootstrap, r, workers, reducers, options);
        if (!comm.ok()) {
          local.push_back("create: " + comm.status().ToString());
        } else {
          body(**comm, &local);
        }
      }
      if (--workers_left == 0) stop = true;
    } else {
      ReducerOptions ro;
      ro.comm = options;
      ro.rejoin_timeout = std::chrono::milliseconds(0);
      ro.max_generations = 1;
      Status s = RunReducer(bootstrap, workers, reducers, r - workers, ro, stop);
      if (reducer_status != nullptr) {
        std::lock_guard<std::mutex> lock(mu);
        (*reducer_status)[r - workers] = s;
      } else if (!s.ok()) {
        local.push_back("reducer " + std::to_string(r - workers) + ": " + s.ToString());
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    for (auto& f : local) failures->push_back("rank " + std::to_string(r) + ": " + f);
  });
}

}  // namespace cohort::collective::testing
