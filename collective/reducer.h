// The reducer process of the Reduction Server all-reduce (algorithms/reduction_server.h): one
// long-lived rank beside the workers that sums the chunks they send it. It joins each generation
// the workers build (generation.h), serves it until the workers stop or fail, and waits for the
// next; cohort-reducer's main runs it from the environment.
//
// Environment (rendered by the agent; see communicator.h for the shared part):
// COHORT_BOOTSTRAP_ADDR, COHORT_NUM_WORKERS (or WORLD_SIZE) workers, COHORT_NUM_REDUCERS,
// COHORT_REDUCER_INDEX, COHORT_COMM_TIMEOUT_MS, COHORT_REDUCER_REJOIN_MS.
//
// Thread safety: one call serves one reducer; it blocks the calling thread.
#pragma once

#include <atomic>
#include <chrono>

#include "collective/bootstrap.h"
#include "collective/communicator.h"
#include "common/status.h"

namespace cohort::collective {

struct ReducerOptions {
  CommunicatorOptions comm;  // transport kind, timeout (round and connect), key prefix
  // After its workers are gone or stopped, how long the reducer waits for them to rebuild (a new
  // generation) before returning. Zero: return at once.
  std::chrono::milliseconds rejoin_timeout{60000};
  // Returns after serving this many generations (0: no limit).
  int max_generations = 0;
};

// Runs reducer `reducer_index` of `num_reducers` until `stop` becomes
// true (returns OK) or no workers come back within rejoin_timeout (returns the status that ended
// the last generation: OK when the workers stopped cleanly). Serves one generation after another,
// each with the workers its chief recorded (generation.h, "Shape"; `num_workers`, the count it was
// started for, where none is recorded), as rank (that generation's workers) + reducer_index.
Status RunReducer(Bootstrap& bootstrap, int num_workers, int num_reducers, int reducer_index,
                  const ReducerOptions& options, const std::atomic<bool>& stop);

// Runs one reducer from the environment (above) until `stop` or its workers are gone for good.
Status RunReducerFromEnvironment(const std::atomic<bool>& stop);

}  // namespace cohort::collective
