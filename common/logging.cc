#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string>

namespace cohort {

void InitLogging(std::string_view program, std::string_view level) {
  auto logger = spdlog::stderr_color_mt(std::string(program));
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %n[%P] %v");
  auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    spdlog::warn("unknown log level '{}', using info", level);
    parsed = spdlog::level::info;
  }
  spdlog::set_level(parsed);
  spdlog::flush_on(spdlog::level::info);
}

}  // namespace cohort
