// cohort-ps: one parameter server. Launched by agents for `builtin: parameter_server` pools,
// runnable by hand (flags and environment in collective/ps/ps_cli.h). Exits 0 when training is
// over or on SIGTERM/SIGINT, 2 on bad flags or environment, 1 on other errors.
#include <csignal>
#include <cstdlib>

#include "collective/ps/ps_cli.h"
#include "common/logging.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }
}  // namespace

int main(int argc, char** argv) {
  const char* level = std::getenv("COHORT_LOG_LEVEL");
  cohort::InitLogging("cohort-ps", level != nullptr ? level : "info");
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::vector<std::string> args(argv + 1, argv + argc);
  cohort::Status status = cohort::collective::ps::RunParameterServerMain(args, g_stop);
  if (!status.ok()) {
    spdlog::error("parameter server failed: {}", status.ToString());
    return status.code() == cohort::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
