// Test helpers for running real Cohort binaries as processes: temp dirs, free ports, a daemon
// process handle, deadline-driven waiting, and /proc scans for leftover processes.
//
// DaemonProcess starts a binary with arguments in its own process group, with stdout and stderr
// appended to a log file, and with PR_SET_PDEATHSIG = SIGKILL so it never outlives the test
// binary. Its destructor kills whatever is left of it (SIGKILL to the group) and reaps it.
//
// Thread safety: none of these classes are thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cohort::testing {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction unless
// COHORT_KEEP_TEST_DIRS is set in the environment.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "cohort-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // path() + "/" + relative
  std::string Join(const std::string& relative) const { return path_ + "/" + relative; }

 private:
  std::string path_;
};

// A TCP port on 127.0.0.1 that is free and stays this process's to bind until it exits: one of
// 32000-32767, which the kernel never picks by itself (below its ephemeral range), reserved
// against the other test processes by a lock file (/tmp/cohort-test-port-N.lock) held until exit.
// Ports handed out by this process are not repeated.
int PickFreePort();

// Polls `condition` every `interval` until it holds or `timeout` passes. True when it held.
bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
               std::chrono::milliseconds interval = 50ms);

// Writes / reads a whole file. ReadFile returns "" when the file cannot be read.
void WriteFile(const std::string& path, const std::string& content, bool executable = false);
std::string ReadFile(const std::string& path);
bool FileExists(const std::string& path);

// Pids of live processes (not zombies) whose command line contains `needle` as one whole
// argument or inside one argument.
std::vector<pid_t> FindProcessesWithArg(const std::string& needle);
// SIGKILLs every process FindProcessesWithArg(needle) finds; returns how many.
int KillProcessesWithArg(const std::string& needle);
// Pids of live processes (not zombies) with `needle` inside one VAR=VALUE entry of their
// environment, or inside their working directory's path. Processes whose /proc entries this user
// cannot read (other users') are never listed.
std::vector<pid_t> FindProcessesWithEnvOrCwd(const std::string& needle);
// A process's command line, arguments joined by spaces ("" once it is gone).
std::string ProcessCommandLine(pid_t pid);
// The state letter of /proc/<pid>/stat ('R', 'S', 'T' stopped, 'Z', ...); 0 when it cannot be read.
char ProcessState(pid_t pid);

struct RunResult {
  int exit_code = -1;  // -1 when killed by a signal or not run
  std::string out;
  std::string err;
};
// Runs a binary to completion with extra environment variables (KEY=VALUE), capturing stdout and
// stderr; SIGKILLs it after `timeout`.
RunResult RunProcess(const std::string& binary, const std::vector<std::string>& args,
                     const std::vector<std::string>& extra_env = {},
                     std::chrono::milliseconds timeout = 30s);

class DaemonProcess {
 public:
  // `extra_env` (KEY=VALUE) is added to this process's environment for it.
  DaemonProcess(std::string binary, std::vector<std::string> args, std::string log_path,
                std::vector<std::string> extra_env = {});
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Forks and execs; false (with the reason in the log) when the binary cannot start.
  bool Start();
  bool running();  // reaps the process when it has exited
  pid_t pid() const { return pid_; }
  // Sends `signal` to the process (not its group: daemons manage their own children).
  void Signal(int signal);
  // Waits up to `timeout` for it to exit; its exit status (waitpid form) or nullopt.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGTERM, wait `grace`, then SIGKILL to its process group; reaps it.
  void Stop(std::chrono::milliseconds grace = 5s);
  // SIGKILL now (as a crash would), and reap.
  void Kill();
  // The log so far, or its last `max_bytes`.
  std::string Log(size_t max_bytes = 8192) const;
  const std::string& log_path() const { return log_path_; }
  // The process's exit status once reaped (waitpid form).
  std::optional<int> exit_status() const { return exit_status_; }

 private:
  std::string binary_;
  std::vector<std::string> args_;
  std::string log_path_;
  std::vector<std::string> extra_env_;
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
};

}  // namespace cohort::testing
