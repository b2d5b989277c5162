#include "python/torch_backend/log_line.h"

#include "common/logging.h"

namespace cohort::torch_backend {

void LogInfo(const std::string& line) { spdlog::info("{}", line); }

void LogWarn(const std::string& line) { spdlog::warn("{}", line); }

}  // namespace cohort::torch_backend
