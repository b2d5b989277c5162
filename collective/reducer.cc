#include "collective/reducer.h"

#include <algorithm>
#include <cstdlib>

#include "collective/algorithms/reduction_server.h"
#include "collective/generation.h"
#include "collective/store_bootstrap.h"
#include "common/env.h"
#include "common/logging.h"

namespace cohort::collective {

Status RunReducer(Bootstrap& bootstrap, int num_workers, int num_reducers, int reducer_index,
                  const ReducerOptions& options, const std::atomic<bool>& stop) {
  if (num_workers < 1 || num_reducers < 1 || reducer_index < 0 || reducer_index >= num_reducers) {
    return InvalidArgument("reducer " + std::to_string(reducer_index) + " of " +
                           std::to_string(num_reducers) + " for " + std::to_string(num_workers) +
                           " workers is not valid");
  }
  // A reducer's rank follows the workers (num_workers + index), whose number is the generation's.
  const std::string member = "reducer" + std::to_string(reducer_index);
  Status last = Status::Ok();
  int served = 0;
  bool first = true;
  while (!stop.load()) {
    const auto wait =
        first ? std::max(options.rejoin_timeout, options.comm.timeout) : options.rejoin_timeout;
    first = false;
    auto generation = AwaitGeneration(bootstrap, options.comm.key_prefix, member,
                                      SteadyClock::now() + wait, &stop);
    if (stop.load()) return Status::Ok();
    if (!generation.ok()) {
      spdlog::info("reducer {}: no workers (re)joined within {}: {}; exiting", reducer_index,
                   FormatDuration(wait), generation.status().ToString());
      return last;
    }
    auto workers = GenerationWorkers(bootstrap, options.comm.key_prefix, *generation,
                                     SteadyClock::now() + options.comm.timeout);
    if (!workers.ok() && workers.status().code() == StatusCode::kNotFound) workers = num_workers;
    if (!workers.ok()) {
      last = workers.status().WithContext("generation " + *generation);
      spdlog::warn("reducer {}: {}; waiting for the next generation", reducer_index,
                   last.ToString());
      continue;
    }
    if (*workers != num_workers) {
      spdlog::info(
          "reducer {}: generation {} has {} workers, not the {} it was started for: a "
          "launcher inside each replica (torchrun --nproc_per_node) started more ranks",
          reducer_index, *generation, *workers, num_workers);
    }
    spdlog::info("reducer {}: joining generation {}", reducer_index, *generation);
    auto transport = OpenCommunicatorTransport(bootstrap, *workers + reducer_index, *workers,
                                               num_reducers, *generation, options.comm);
    if (!transport.ok()) {
      last = transport.status();
      spdlog::warn("reducer {}: {}", reducer_index, last.ToString());
    } else {
      ReductionServerOptions so;
      so.num_workers = *workers;
      so.num_reducers = num_reducers;
      so.round_timeout = options.comm.timeout;
      ReductionServer server(**transport, so);
      last = server.Serve(stop);
      spdlog::info("reducer {}: generation {} ended after {} rounds: {}", reducer_index,
                   *generation, server.rounds(), last.ToString());
      if (last.code() == StatusCode::kCancelled && stop.load()) return Status::Ok();
    }
    if (options.max_generations > 0 && ++served >= options.max_generations) return last;
  }
  return Status::Ok();
}

Status RunReducerFromEnvironment(const std::atomic<bool>& stop) {
  // The agent gives reducers COHORT_NUM_WORKERS (WORLD_SIZE is only set for the training ranks);
  // WORLD_SIZE is accepted for reducers started by hand.
  const char* num_workers = std::getenv("COHORT_NUM_WORKERS");
  COHORT_ASSIGN_OR_RETURN(
      int workers,
      IntFromEnvironment(num_workers && *num_workers ? "COHORT_NUM_WORKERS" : "WORLD_SIZE",
                         std::nullopt));
  COHORT_ASSIGN_OR_RETURN(int reducers, IntFromEnvironment("COHORT_NUM_REDUCERS", std::nullopt));
  COHORT_ASSIGN_OR_RETURN(int index, IntFromEnvironment("COHORT_REDUCER_INDEX", std::nullopt));
  COHORT_ASSIGN_OR_RETURN(int rejoin_ms, IntFromEnvironment("COHORT_REDUCER_REJOIN_MS", 60000));
  ReducerOptions options;
  COHORT_RETURN_IF_ERROR(CommunicatorOptionsFromEnvironment(&options.comm));
  options.rejoin_timeout = std::chrono::milliseconds(rejoin_ms);
  COHORT_ASSIGN_OR_RETURN(JobBootstrap job,
                          BootstrapFromEnvironment(/*serve_store=*/false, options.comm.timeout));
  return RunReducer(*job.client, workers, reducers, index, options, stop);
}

}  // namespace cohort::collective
