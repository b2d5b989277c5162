// Logging for the backend's files that include torch. torch 2.x ships its own fmt, which Debian's
// spdlog headers do not compile against; so those files log whole lines through this seam, and
// only log_line.cc, which includes no torch header, includes spdlog (common/logging.h).
#pragma once

#include <string>

namespace cohort::torch_backend {

void LogInfo(const std::string& line);
void LogWarn(const std::string& line);

}  // namespace cohort::torch_backend
