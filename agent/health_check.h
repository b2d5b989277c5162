// HealthCheck runs the node's health check, an admin's program (`cohort-agent --health-check`: a
// script of nvidia-smi or dcgmi calls, LBNL's NHC, what Slurm's HealthCheckProgram or a
// Kubernetes node-problem-detector plugin would run), every `every` on a thread of its own, and
// says what its latest run found. The agent sends that with its registration and every heartbeat;
// the coordinator places nothing new on a node whose check fails, while what already runs there
// goes on (a replica that fails there is restarted on another node: coordinator/job_controller.h,
// "Node faults").
//
// The verdict of one run (HealthVerdict): exit status 0 passes, whatever it printed. Any other end
// fails, and the reason is the first non-blank line of its output (stdout and stderr), so that
// `echo "GPU 0: 2 uncorrectable ECC errors"; exit 1` reads as that; with no output, how it ended.
// A run that does not end within `timeout` is killed and fails: a check that hangs (nvidia-smi on
// a GPU that fell off the bus, a hung mount) is itself the symptom. Until the first run ends the
// node counts as failing ("not finished yet"): a node that boots broken takes no work.
// RunNow() asks for a run at once: after a replica failed here, the agent has one run, and says
// it is rechecking (Rechecking(), Heartbeat.health_rechecking) until that run has ended, so that
// the coordinator judges the failure by a verdict taken after it. The program's stdin is /dev/null;
// it runs with the agent's environment.
//
// Thread safety: every method may be called from any thread. The destructor kills a run in
// progress and joins the thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/captured_command.h"
#include "common/status.h"

namespace cohort::agent {

struct HealthCheckOptions {
  std::vector<std::string> argv;  // the program (an absolute path) and its arguments; empty: none
  std::chrono::milliseconds every{60000};
  std::chrono::milliseconds timeout{15000};
};

// "PROGRAM [ARG...]" split at blanks. PROGRAM must be an absolute path to an executable file
// (it runs where no PATH is searched); empty text is no check.
StatusOr<std::vector<std::string>> ParseHealthCheckCommand(const std::string& text);

// The verdict on one run: "" when it exited 0, else why the node fails (at most
// kMaxHealthReasonBytes, printable UTF-8).
std::string HealthVerdict(const CapturedCommand& run, std::chrono::milliseconds timeout);
inline constexpr size_t kMaxHealthReasonBytes = 240;

class HealthCheck {
 public:
  explicit HealthCheck(HealthCheckOptions options);
  ~HealthCheck();
  HealthCheck(const HealthCheck&) = delete;
  HealthCheck& operator=(const HealthCheck&) = delete;

  // Why the node fails its check now; "" when it passes or there is no check.
  std::string Problem() const;
  // Runs the check as soon as the run in progress (if any) has ended; false (nothing to run) when
  // there is no check.
  bool RunNow();
  // A run RunNow() asked for has not ended yet (one that started after the call).
  bool Rechecking() const;
  // Runs that have ended since the start.
  uint64_t runs() const;

 private:
  struct Shared;
  static void Loop(std::shared_ptr<Shared> s);
  std::shared_ptr<Shared> shared_;
  std::unique_ptr<std::thread> thread_;
};

}  // namespace cohort::agent
