// Paths of the programs a test runs as processes. cohort_process_test() (tests/CMakeLists.txt)
// defines each macro for the targets listed in its BINARIES that exist in this tree; a macro
// that is not defined is "", and a test that needs that program skips, saying which
// (MissingBinary).
#pragma once

#include <map>
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

// The Python side, defined by a test's target where it runs Python replicas: <build>/python (where
// `import cohort` and `import cohort.torch` find this tree's packages), the torch examples and the
// stock DDP script (examples/torch/ddp_digits.py), the watchdog's test job and the runner that
// makes a DDP replica stall (tests/integration), and whether the cohort torch backend was built
// (1) or why not.
#ifndef COHORT_PYTHON_DIR
#define COHORT_PYTHON_DIR ""
#endif
#ifndef COHORT_TORCH_EXAMPLES_DIR
#define COHORT_TORCH_EXAMPLES_DIR ""
#endif
#ifndef COHORT_TORCH_DDP_SCRIPT
#define COHORT_TORCH_DDP_SCRIPT ""
#endif
#ifndef COHORT_WATCHDOG_JOB
#define COHORT_WATCHDOG_JOB ""
#endif
#ifndef COHORT_DDP_STALL
#define COHORT_DDP_STALL ""
#endif
#ifndef COHORT_TORCH_BACKEND
#define COHORT_TORCH_BACKEND 0
#endif
#ifndef COHORT_TORCH_BACKEND_WHY
#define COHORT_TORCH_BACKEND_WHY "not configured"
#endif

namespace cohort::testing {

// Debian's python3, which has torch, numpy and pyzmq (`python3` on PATH may be a bare one).
inline constexpr const char* kPython = "/usr/bin/python3";

// Why `python` cannot run torch with gloo here ("" when it can): a sentence for GTEST_SKIP(). Asks
// the interpreter once per process and interpreter.
inline std::string TorchMissing(const std::string& python = kPython) {
  static std::map<std::string, std::string> asked;
  if (auto it = asked.find(python); it != asked.end()) return it->second;
  std::string& reason = asked[python];
  if (!FileExists(python)) {
    reason = python + " is not installed";
    return reason;
  }
  RunResult r = RunProcess(
      python, {"-c", "import torch.distributed as d; assert d.is_gloo_available()"}, {}, 60s);
  if (r.exit_code != 0) {
    reason =
        python + " cannot import torch with gloo (install python3-torch: " +
        "scripts/install-deps.sh): " + r.err.substr(r.err.size() > 300 ? r.err.size() - 300 : 0);
  }
  return reason;
}

// "" when every path names an existing file; else a sentence naming the first that does not, for
// GTEST_SKIP().
inline std::string MissingBinary(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    if (path.empty() || !FileExists(path)) return "not built in this tree: '" + path + "'";
  }
  return "";
}

}  // namespace cohort::testing
