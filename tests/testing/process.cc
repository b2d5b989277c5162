#include "tests/testing/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace cohort::testing {
namespace {

std::vector<char*> ArgvOf(const std::string& binary, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  return argv;
}

// This process's environment with `extra` (KEY=VALUE) after it, and the envp over those strings
// (valid as long as `strings` is).
std::vector<char*> EnvpWith(const std::vector<std::string>& extra,
                            std::vector<std::string>& strings) {
  strings.clear();
  for (char** e = environ; *e; ++e) strings.emplace_back(*e);
  for (const auto& kv : extra) strings.push_back(kv);
  std::vector<char*> envp;
  for (auto& s : strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  return envp;
}

// In the child after fork: die with the parent, own process group, stdin from /dev/null, stdout
// to `out_fd` and stderr to `err_fd`.
void PrepareChild(int out_fd, int err_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  setpgid(0, 0);
  // Undo signal state inherited from the test runner.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  dup2(open("/dev/null", O_RDONLY), 0);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
}

}  // namespace

TempDir::TempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
  }
  path_ = buffer.data();
}

TempDir::~TempDir() {
  if (std::getenv("COHORT_KEEP_TEST_DIRS") != nullptr) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

int PickFreePort() {
  // 768 ports below Linux's ephemeral range (32768+), above the clusters' replica port blocks
  // (tests/testing/local_cluster.cc, 20000-31999): the kernel never hands one out for a connect
  // or a bind to port 0, and a lock file held until this process exits keeps every other test
  // process off it. Bound once to check that nothing else holds it.
  constexpr int kFirst = 32000, kCount = 768;
  static std::vector<int> held;  // the lock files' descriptors, open until exit
  const int start = static_cast<int>((::getpid() * 7919u + held.size() * 31u) % kCount);
  for (int i = 0; i < kCount; ++i) {
    const int port = kFirst + (start + i) % kCount;
    const std::string lock = "/tmp/cohort-test-port-" + std::to_string(port) + ".lock";
    const int lock_fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lock_fd < 0) continue;
    if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(lock_fd);
      continue;
    }
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    // Without SO_REUSEADDR: a port lingering in TIME_WAIT is passed over, as a daemon that binds
    // without it would fail on it.
    const bool free = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (fd >= 0) close(fd);
    if (!free) {
      ::close(lock_fd);
      continue;
    }
    held.push_back(lock_fd);
    return port;
  }
  throw std::runtime_error("no free TCP port in 32000-32767 on 127.0.0.1");
}

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
               std::chrono::milliseconds interval) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);
  }
}

void WriteFile(const std::string& path, const std::string& content, bool executable) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (executable) chmod(path.c_str(), 0755);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

namespace {

// Live (not zombie) pids in /proc other than this process.
std::vector<pid_t> LivePids() {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == getpid()) continue;
    std::string stat = ReadFile("/proc/" + name + "/stat");
    auto paren = stat.rfind(')');
    if (stat.empty() ||
        (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z')) {
      continue;
    }
    pids.push_back(pid);
  }
  return pids;
}

// Whether an item of `items` (NUL-separated, as /proc's cmdline and environ are) contains
// `needle`.
bool AnyItemContains(const std::string& items, const std::string& needle) {
  size_t start = 0;
  while (start < items.size()) {
    size_t end = items.find('\0', start);
    if (end == std::string::npos) end = items.size();
    if (items.substr(start, end - start).find(needle) != std::string::npos) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

std::vector<pid_t> FindProcessesWithArg(const std::string& needle) {
  std::vector<pid_t> pids;
  for (pid_t pid : LivePids()) {
    if (AnyItemContains(ReadFile("/proc/" + std::to_string(pid) + "/cmdline"), needle)) {
      pids.push_back(pid);
    }
  }
  return pids;
}

std::vector<pid_t> FindProcessesWithEnvOrCwd(const std::string& needle) {
  std::vector<pid_t> found;
  for (pid_t pid : LivePids()) {
    const std::string proc = "/proc/" + std::to_string(pid);
    std::error_code ec;
    std::string cwd = std::filesystem::read_symlink(proc + "/cwd", ec).string();
    if (!ec && cwd.find(needle) != std::string::npos) {
      found.push_back(pid);
      continue;
    }
    if (AnyItemContains(ReadFile(proc + "/environ"), needle)) found.push_back(pid);
  }
  return found;
}

std::string ProcessCommandLine(pid_t pid) {
  std::string cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
  for (char& c : cmdline) {
    if (c == '\0') c = ' ';
  }
  return cmdline;
}

char ProcessState(pid_t pid) {
  // "pid (comm) S ...": the command may hold spaces and parentheses; the state follows the last
  // ')'.
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : 0;
}

int KillProcessesWithArg(const std::string& needle) {
  int killed = 0;
  for (pid_t pid : FindProcessesWithArg(needle)) {
    if (kill(pid, SIGKILL) == 0) ++killed;
  }
  return killed;
}

RunResult RunProcess(const std::string& binary, const std::vector<std::string>& args,
                     const std::vector<std::string>& extra_env, std::chrono::milliseconds timeout) {
  RunResult result;
  char out_template[] = "/tmp/cohort-run-out-XXXXXX";
  char err_template[] = "/tmp/cohort-run-err-XXXXXX";
  int out_fd = mkstemp(out_template);
  int err_fd = mkstemp(err_template);
  if (out_fd < 0 || err_fd < 0) {
    result.err = std::string("mkstemp: ") + std::strerror(errno);
    return result;
  }
  std::vector<std::string> env_strings;
  std::vector<char*> envp = EnvpWith(extra_env, env_strings);
  auto argv = ArgvOf(binary, args);

  pid_t pid = fork();
  if (pid == 0) {
    PrepareChild(out_fd, err_fd);
    execve(binary.c_str(), argv.data(), envp.data());
    dprintf(2, "exec %s: %s\n", binary.c_str(), std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  bool reaped = WaitUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout, 10ms);
  if (!reaped) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    result.err = "(killed after timeout)\n";
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  close(out_fd);
  close(err_fd);
  result.out = ReadFile(out_template);
  result.err += ReadFile(err_template);
  unlink(out_template);
  unlink(err_template);
  return result;
}

DaemonProcess::DaemonProcess(std::string binary, std::vector<std::string> args,
                             std::string log_path, std::vector<std::string> extra_env)
    : binary_(std::move(binary)),
      args_(std::move(args)),
      log_path_(std::move(log_path)),
      extra_env_(std::move(extra_env)) {}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0 && !exit_status_) Kill();
}

bool DaemonProcess::Start() {
  exit_status_.reset();
  int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return false;
  auto argv = ArgvOf(binary_, args_);
  std::vector<std::string> env_strings;
  std::vector<char*> envp = EnvpWith(extra_env_, env_strings);
  pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return false;
  }
  if (pid == 0) {
    PrepareChild(log_fd, log_fd);
    execve(binary_.c_str(), argv.data(), envp.data());
    dprintf(2, "exec %s: %s\n", binary_.c_str(), std::strerror(errno));
    _exit(127);
  }
  close(log_fd);
  pid_ = pid;
  return true;
}

bool DaemonProcess::running() {
  if (pid_ <= 0 || exit_status_) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_status_ = status;
    return false;
  }
  return r == 0;
}

void DaemonProcess::Signal(int signal) {
  if (running()) kill(pid_, signal);
}

std::optional<int> DaemonProcess::Wait(std::chrono::milliseconds timeout) {
  WaitUntil([&] { return !running(); }, timeout, 10ms);
  return exit_status_;
}

void DaemonProcess::Stop(std::chrono::milliseconds grace) {
  if (!running()) return;
  kill(pid_, SIGTERM);
  if (!Wait(grace)) Kill();
  // Anything left in its group (helpers it forked without their own session) goes too.
  kill(-pid_, SIGKILL);
}

void DaemonProcess::Kill() {
  if (pid_ <= 0 || exit_status_) return;
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  int status = 0;
  if (waitpid(pid_, &status, 0) == pid_) exit_status_ = status;
}

std::string DaemonProcess::Log(size_t max_bytes) const {
  std::string log = ReadFile(log_path_);
  if (log.size() > max_bytes) log = "..." + log.substr(log.size() - max_bytes);
  return log;
}

}  // namespace cohort::testing
