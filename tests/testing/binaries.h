// Paths of the programs a test runs as processes. cohort_process_test() (tests/CMakeLists.txt)
// defines each macro for the targets listed in its BINARIES that exist in this tree; a macro
// that is not defined is "", and a test that needs that program skips, saying which
// (MissingBinary).
#pragma once

#include <string>
#include <vector>

#include "tests/testing/process.h"

#ifndef COHORT_COORDINATOR_BIN
#define COHORT_COORDINATOR_BIN ""
#endif
#ifndef COHORT_AGENT_BIN
#define COHORT_AGENT_BIN ""
#endif
#ifndef COHORT_CLI_BIN
#define COHORT_CLI_BIN ""
#endif
#ifndef COHORT_TRAINER_BIN
#define COHORT_TRAINER_BIN ""
#endif
#ifndef COHORT_REDUCER_BIN
#define COHORT_REDUCER_BIN ""
#endif
#ifndef COHORT_PS_BIN
#define COHORT_PS_BIN ""
#endif

namespace cohort::testing {

// "" when every path names an existing file; else a sentence naming the first that does not, for
// GTEST_SKIP().
inline std::string MissingBinary(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    if (path.empty() || !FileExists(path)) return "not built in this tree: '" + path + "'";
  }
  return "";
}

}  // namespace cohort::testing
