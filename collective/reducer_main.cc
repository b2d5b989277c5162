// cohort-reducer: one Reduction Server reducer. Launched by agents for `builtin: reducer` pools,
// runnable by hand with the same environment (see collective/reducer.h). Serves all-reduce
// rounds until SIGTERM/SIGINT or until its workers are gone and do not come back.
#include <csignal>

#include "collective/reducer.h"
#include "common/logging.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }
}  // namespace

int main(int argc, char** argv) {
  (void)argc;
  (void)argv;
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
