// The main() of collective's daemons, cohort-reducer and cohort-ps: --help and --version, logging
// at COHORT_LOG_LEVEL, SIGTERM/SIGINT as a stop flag, and the exit code of the daemon's run.
//
// Contract: --help (or -h) anywhere prints `usage` on stdout, --version prints "<program>
// <version>"; both exit 0 without running. Otherwise logging starts as `program` at
// COHORT_LOG_LEVEL (default info), SIGTERM and SIGINT set the flag `run` watches, and `run` gets
// the arguments. Exit code: 0 when `run` returns OK; else "<what> failed: <status>" is logged and
// the code is 2 for INVALID_ARGUMENT (bad flags or environment), 1 for any other error.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace cohort::collective {

using DaemonRun =
    std::function<Status(const std::vector<std::string>& args, const std::atomic<bool>& stop)>;

int DaemonMain(const char* program, const char* what, const char* usage, int argc, char** argv,
               const DaemonRun& run);

}  // namespace cohort::collective
