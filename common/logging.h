// Logging for every Cohort binary: spdlog with one format, to stderr (systemd's journal picks it
// up). COHORT_CHECK is for broken invariants only: it logs at critical level and aborts.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace cohort {

// Sets the process-wide level ("trace", "debug", "info", "warn", "error") and the pattern, naming
// the binary in every line. Unknown levels fall back to info with a warning.
void InitLogging(std::string_view program, std::string_view level = "info");

}  // namespace cohort

#define COHORT_CHECK(cond)                                                      \
  do {                                                                          \
    if (!(cond)) {                                                              \
      spdlog::critical("check failed at {}:{}: {}", __FILE__, __LINE__, #cond); \
      spdlog::default_logger()->flush();                                        \
      std::abort();                                                             \
    }                                                                           \
  } while (0)
