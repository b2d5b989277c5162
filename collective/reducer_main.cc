// cohort-reducer: one Reduction Server reducer. Launched by agents for `builtin: reducer` pools,
// runnable by hand with the same environment (see collective/reducer.h). Serves all-reduce
// rounds until SIGTERM/SIGINT or until its workers are gone and do not come back. Exits 0 then, 2
// on bad arguments or environment, 1 on other errors.
#include <string>
#include <vector>

#include "collective/daemon_main.h"
#include "collective/reducer.h"

constexpr char kUsage[] =
    "usage: cohort-reducer\n"
    "One reducer of a Reduction Server: sums the gradient shards its workers send and returns the\n"
    "sums, until SIGTERM/SIGINT or until its workers are gone and do not come back. The agent\n"
    "starts reducers for `builtin: reducer` pools; by hand, give it the same environment.\n"
    "\n"
    "Options:\n"
    "  -h [ --help ]         show this help and exit\n"
    "  --version             print the version and exit\n"
    "\n"
    "Environment:\n"
    "  COHORT_BOOTSTRAP_ADDR      the job's bootstrap store, HOST:PORT\n"
    "  COHORT_NUM_WORKERS         workers (else WORLD_SIZE)\n"
    "  COHORT_NUM_REDUCERS        reducers in the pool\n"
    "  COHORT_REDUCER_INDEX       this reducer's index, 0-based\n"
    "  COHORT_COMM_TIMEOUT_MS     communication timeout\n"
    "  COHORT_REDUCER_REJOIN_MS   how long to wait for restarted workers (default 60000)\n"
    "  COHORT_LOG_LEVEL           trace, debug, info, warn, error (default info)\n";

int main(int argc, char** argv) {
  return cohort::collective::DaemonMain(
      "cohort-reducer", "reducer", kUsage, argc, argv,
      [](const std::vector<std::string>& args, const std::atomic<bool>& stop) {
        if (!args.empty()) {
          return cohort::InvalidArgument("unknown argument '" + args[0] + "' (see --help)");
        }
        return cohort::collective::RunReducerFromEnvironment(stop);
      });
}
