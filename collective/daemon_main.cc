#include "collective/daemon_main.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "common/build_version.h"
#include "common/logging.h"

namespace cohort::collective {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

}  // namespace

int DaemonMain(const char* program, const char* what, const char* usage, int argc, char** argv,
               const DaemonRun& run) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") return std::fputs(usage, stdout) < 0;
    if (arg == "--version") {
      const std::string_view version = CohortBuildVersion();
      return std::printf("%s %.*s\n", program, static_cast<int>(version.size()), version.data()) <
             0;
    }
  }
  const char* level = std::getenv("COHORT_LOG_LEVEL");
  InitLogging(program, level != nullptr ? level : "info");
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  const Status status = run(args, g_stop);
  if (status.ok()) return 0;
  spdlog::error("{} failed: {}", what, status.ToString());
  return status.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace cohort::collective
