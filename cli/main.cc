// cohort: the launcher CLI (cli/cli.h describes the verbs and exit codes).
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "common/logging.h"

int main(int argc, char** argv) {
  // Library warnings (a dropped bad frame, ...) go to stderr; keep them quiet unless asked.
  const char* level = std::getenv("COHORT_LOG_LEVEL");
  cohort::InitLogging("cohort", level ? level : "warn");
  std::vector<std::string> args(argv + 1, argv + argc);
  return cohort::cli::RunCli(args, std::cout, std::cerr);
}
