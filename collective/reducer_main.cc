// cohort-reducer: one Reduction Server reducer. Launched by agents for `builtin: reducer` pools,
// runnable by hand with the same environment (see collective/reducer.h). Serves all-reduce
// rounds until SIGTERM/SIGINT or until its workers are gone and do not come back.
#include <csignal>
#include <cstdio>
#include <string>

#include "collective/reducer.h"
#include "common/logging.h"
#include "common/version.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }
}  // namespace

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
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return std::fputs(kUsage, stdout) < 0;
    if (arg == "--version") return std::puts("cohort-reducer " COHORT_VERSION) < 0;
    std::fprintf(stderr, "cohort-reducer: unknown argument '%s' (see --help)\n", arg.c_str());
    return 2;
  }
  const char* level = std::getenv("COHORT_LOG_LEVEL");
  cohort::InitLogging("cohort-reducer", level != nullptr ? level : "info");
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  cohort::Status status = cohort::collective::RunReducerFromEnvironment(g_stop);
  if (!status.ok()) {
    spdlog::error("reducer failed: {}", status.ToString());
    return 1;
  }
  return 0;
}
