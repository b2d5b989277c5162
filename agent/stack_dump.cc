#include "agent/stack_dump.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "agent/captured_command.h"
#include "agent/proc_scan.h"
#include "common/clock.h"
#include "common/file_util.h"

namespace cohort::agent {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxOutputPerCommand = 256 << 10;

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string FindTool(const char* name) {
  for (const char* dir : {"/usr/bin/", "/bin/", "/usr/local/bin/"}) {
    std::string path = std::string(dir) + name;
    if (Executable(path)) return path;
  }
  return "";
}

// Runs argv with stdout and stderr captured, killing it at `timeout`; what went wrong is said in
// the text.
std::string Run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  CaptureOptions options;
  options.timeout = timeout;
  options.max_output = kMaxOutputPerCommand;
  // Stacks are taken on a thread of their own beside the agent loop, which reaps every child.
  options.hidden_from_reaper = true;
  CapturedCommand run = RunCaptured(argv, options);
  std::string out = std::move(run.output);
  if (run.exit_code == -1) return out + "\n";  // it did not start
  if (run.timed_out) {
    out += "(" + argv[0] + " killed after " + std::to_string(timeout.count()) + " ms)\n";
  }
  if (out.size() >= kMaxOutputPerCommand) out += "(output cut at 256 KiB)\n";
  return out;
}

// A Python dump file from byte `from`, at most kMaxOutputPerCommand of it. The file is the
// replica's to make in its own directory: only a regular file is read, not through a link
// (common/file_util.h), so a link to /dev/zero or to a file only the agent may read, or a FIFO,
// gives nothing.
std::string ReadDumpFile(const std::string& path, size_t from) {
  struct stat st {};
  StatusOr<int> fd = OpenRegularFile(path, "stack dump file", &st);
  if (!fd.ok()) return "";
  std::string text;
  (void)ReadAt(*fd, from, kMaxOutputPerCommand, &text, "read " + path);
  ::close(*fd);
  if (text.size() >= kMaxOutputPerCommand) text += "\n(cut at 256 KiB)\n";
  return text;
}

// The size of a dump file; -1 when there is none, or it is no regular file (not followed).
int64_t DumpFileSize(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : -1;
}

std::string CommandLine(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  std::string raw = s.str();
  for (char& c : raw) {
    if (c == '\0') c = ' ';
  }
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw.empty() ? "(gone)" : raw;
}

}  // namespace

int StackDumpSignal() { return SIGRTMIN + 4; }

std::string TakeStackDump(pid_t main_pid, const std::string& python_dir, const std::string& reason,
                          const StackDumpOptions& options) {
  std::vector<pid_t> pids = {main_pid};
  for (pid_t p : Descendants(main_pid)) {
    if (static_cast<int>(pids.size()) >= StackDumpOptions::kMaxProcesses) break;
    pids.push_back(p);
  }
  std::string out = "==== stacks taken " + FormatUtcNow("%Y-%m-%dT%H:%M:%SZ") +
                    (reason.empty() ? "" : ": " + reason) + "\n";

  // Python first: the signal is handled while the process runs, before a tracer stops it.
  std::vector<std::pair<std::string, int64_t>> python(pids.size());  // file, size before
  bool signalled = false;
  for (size_t i = 0; i < pids.size(); ++i) {
    if (python_dir.empty()) break;
    // Named by the pid Python sees: in a replica's PID namespace, not the host's.
    std::string file = python_dir + "/python-" + std::to_string(NamespacePid(pids[i])) + ".txt";
    int64_t size = DumpFileSize(file);
    if (size < 0) continue;
    if (::kill(pids[i], StackDumpSignal()) == 0) {
      python[i] = {file, size};
      signalled = true;
    }
  }
  if (signalled) {
    // Until every signalled file grew and none changed for python_quiet, or python_wait: a file
    // read on its first bytes would hold a thread's header without its frames.
    const auto deadline = Clock::now() + options.python_wait;
    std::vector<int64_t> seen(python.size());
    for (size_t i = 0; i < python.size(); ++i) seen[i] = python[i].second;
    auto changed = Clock::now();
    while (Clock::now() < deadline) {
      bool all = true;
      for (size_t i = 0; i < python.size(); ++i) {
        if (python[i].first.empty()) continue;
        const int64_t size = DumpFileSize(python[i].first);
        if (size != seen[i]) {
          seen[i] = size;
          changed = Clock::now();
        }
        if (size <= python[i].second) all = false;
      }
      if (all && Clock::now() - changed >= options.python_quiet) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string eu_stack = FindTool("eu-stack");
  std::string gdb = eu_stack.empty() ? FindTool("gdb") : "";
  for (size_t i = 0; i < pids.size(); ++i) {
    pid_t pid = pids[i];
    out += "\n---- pid " + std::to_string(pid) + ": " + CommandLine(pid) + "\n";
    if (!python[i].first.empty()) {
      std::string text = ReadDumpFile(python[i].first, static_cast<size_t>(python[i].second));
      out += "-- Python stacks (faulthandler):\n";
      out += text.empty() ? "(nothing written within " +
                                std::to_string(options.python_wait.count()) + " ms)\n"
                          : text;
    }
    std::string id = std::to_string(pid);
    if (!eu_stack.empty()) {
      out += "-- native stacks (eu-stack):\n";
      out += Run({eu_stack, "-p", id}, options.native_timeout);
    } else if (!gdb.empty()) {
      out += "-- native stacks (gdb):\n";
      out += Run({gdb, "-batch", "-nx", "-p", id, "-ex", "thread apply all bt"},
                 options.native_timeout);
    } else {
      out += "-- native stacks: neither eu-stack (elfutils) nor gdb is installed\n";
    }
  }
  return out;
}

}  // namespace cohort::agent
