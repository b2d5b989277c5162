#include "agent/process_launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "agent/proc_scan.h"
#include "common/logging.h"

namespace cohort::agent {

namespace fs = std::filesystem;

ExitInfo ExitInfo::FromWaitStatus(int wait_status) {
  ExitInfo info;
  if (WIFEXITED(wait_status)) {
    info.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    info.signal = WTERMSIG(wait_status);
    info.exit_code = 128 + info.signal;
  }
  return info;
}

std::string ExitInfo::Describe() const {
  if (signal != 0) {
    const char* name = ::strsignal(signal);
    return "killed by signal " + std::to_string(signal) + " (" + (name ? name : "?") + ")";
  }
  if (exit_code < 0) return "still running";
  return "exited with code " + std::to_string(exit_code);
}

namespace {

class ProcessReplica : public ReplicaProcess {
 public:
  ProcessReplica(pid_t pid, std::string cgroup_path, std::string marker, std::string launch_error)
      : pid_(pid),
        cgroup_path_(std::move(cgroup_path)),
        marker_(std::move(marker)),
        launch_error_(std::move(launch_error)) {}

  ~ProcessReplica() override {
    // The agent kills and releases before dropping an attempt; this is the last line of defence.
    if (!exit_ || AnyAlive()) KillAll();
  }

  std::string cgroup_path() const override { return cgroup_path_; }
  pid_t pid() const override { return pid_; }
  void OnExited(int wait_status) override { exit_ = ExitInfo::FromWaitStatus(wait_status); }
  std::optional<ExitInfo> exit_info() const override { return exit_; }
  std::string launch_error() const override { return launch_error_; }

  void Signal(int sig) override {
    if (!group_gone_ && ::kill(-pid_, sig) != 0 && errno == ESRCH) group_gone_ = true;
    if (!cgroup_path_.empty()) {
      CgroupManager::Signal(cgroup_path_, sig);
    } else {
      SignalEach(ProcessesWithEnvEntry(marker_), sig);
    }
  }

  void KillAll() override {
    if (!cgroup_path_.empty()) {
      CgroupManager::Kill(cgroup_path_);
    } else {
      SignalEach(ProcessesWithEnvEntry(marker_), SIGKILL);
    }
    if (!group_gone_ && ::kill(-pid_, SIGKILL) != 0 && errno == ESRCH) group_gone_ = true;
  }

  bool AnyAlive() override {
    if (!exit_) return true;
    if (!cgroup_path_.empty() && !CgroupManager::Procs(cgroup_path_).empty()) return true;
    if (cgroup_path_.empty() && !ProcessesWithEnvEntry(marker_).empty()) return true;
    if (group_gone_) return false;
    if (::kill(-pid_, 0) != 0 && errno == ESRCH) {
      group_gone_ = true;
      return false;
    }
    return GroupHasLiveMembers(pid_);
  }

  void Release() override {
    if (cgroup_path_.empty()) return;
    if (!CgroupManager::Procs(cgroup_path_).empty()) return;
    Status s = CgroupManager::Remove(cgroup_path_);
    if (!s.ok()) {
      spdlog::debug("{}", s.ToString());
      return;
    }
    cgroup_path_.clear();
  }

 private:
  pid_t pid_;
  std::string cgroup_path_;
  std::string marker_;  // COHORT_ATTEMPT_DIR=<working dir>, in every process of the attempt
  std::string launch_error_;
  std::optional<ExitInfo> exit_;
  bool group_gone_ = false;
};

// What the child reports through the close-on-exec pipe when it cannot run the command.
struct ChildError {
  int stage;  // 0: chdir, 1: execve, 2: setgroups, 3: setgid, 4: setuid
  int err;
};

void WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    size -= static_cast<size_t>(n);
  }
}

std::vector<std::string> ExecCandidates(const LaunchRequest& request) {
  const std::string& name = request.argv[0];
  if (name.find('/') != std::string::npos) return {name};
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  if (auto it = request.env.find("PATH"); it != request.env.end()) path = it->second;
  std::vector<std::string> candidates;
  std::string::size_type start = 0;
  while (true) {
    auto end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? end : end - start);
    candidates.push_back((dir.empty() ? "." : dir) + "/" + name);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return candidates;
}

}  // namespace

int ProcessLauncher::SweepLeftovers(const std::string& work_dir) {
  std::string dir = fs::absolute(work_dir).lexically_normal().string();
  if (dir.empty() || dir.back() != '/') dir += '/';
  const std::string prefix = std::string(kAttemptDirVariable) + "=" + dir;
  return KillUntilNoneLeft([&] { return ProcessesWithEnvEntry(prefix, /*prefix=*/true); });
}

StatusOr<std::unique_ptr<ReplicaProcess>> ProcessLauncher::Launch(const LaunchRequest& request) {
  if (request.argv.empty() || request.argv[0].empty()) {
    return InvalidArgument("replica " + request.replica + " has no command");
  }
  // Everything the child needs is prepared here: after fork it may only call
  // async-signal-safe functions.
  std::vector<std::string> candidates = ExecCandidates(request);
  std::vector<char*> argv;
  for (const auto& arg : request.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::map<std::string, std::string> env = request.env;
  env[kAttemptDirVariable] = fs::absolute(request.working_dir).lexically_normal().string();
  const std::optional<RunAs>& run_as = request.run_as;
  if (run_as) {
    env["USER"] = run_as->account;
    env["LOGNAME"] = run_as->account;
    if (!run_as->home.empty()) env["HOME"] = run_as->home;
  }
  const std::vector<gid_t> groups = run_as ? run_as->groups : std::vector<gid_t>();
  const std::string marker = std::string(kAttemptDirVariable) + "=" + env[kAttemptDirVariable];
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : env) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);

  int log_fd = ::open(request.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return ErrnoStatus("open " + request.log_path, errno);
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    int err = errno;
    ::close(log_fd);
    return ErrnoStatus("open /dev/null", err);
  }
  std::string cgroup_path;
  int cgroup_fd = -1;
  if (cgroups_.available()) {
    auto created =
        cgroups_.Create(request.job + "." + request.replica + "." + std::to_string(request.attempt),
                        request.cpus, request.memory_mb);
    if (created.ok()) {
      cgroup_path = *created;
      cgroup_fd = ::open((cgroup_path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    } else {
      spdlog::warn("{}/{}: no cgroup, relying on the process group: {}", request.job,
                   request.replica, created.status().ToString());
    }
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(log_fd);
    ::close(null_fd);
    if (cgroup_fd >= 0) ::close(cgroup_fd);
    return ErrnoStatus("pipe2", err);
  }
  pid_t parent = ::getpid();
  long open_max = ::sysconf(_SC_OPEN_MAX);
  int max_fd = open_max > 0 && open_max < 65536 ? static_cast<int>(open_max) : 65536;
  const char* working_dir = request.working_dir.c_str();

  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(137);
    if (cgroup_fd >= 0) (void)!::write(cgroup_fd, "0", 1);
    sigset_t all;
    sigemptyset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ChildError error{0, 0};
    if (run_as) {
      // Groups first, then the gid, then the uid: after setuid the others cannot be changed.
      if (::setgroups(groups.size(), groups.data()) != 0) error = {2, errno};
      if (error.err == 0 && ::setgid(run_as->gid) != 0) error = {3, errno};
      if (error.err == 0 && ::setuid(run_as->uid) != 0) error = {4, errno};
      if (error.err != 0) {
        WriteAll(pipe_fds[1], &error, sizeof(error));
        ::_exit(126);
      }
    }
    if (::chdir(working_dir) != 0) {
      error = {0, errno};
      WriteAll(pipe_fds[1], &error, sizeof(error));
      ::_exit(127);
    }
    // Nothing of the agent's leaks into the replica (sockets, other replicas' logs).
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
      // Kernels before 5.11: mark them one by one (bounded; fcntl is async-signal-safe).
      for (int fd = 3; fd < max_fd; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    bool saw_eacces = false;
    int last = ENOENT;
    for (const auto& candidate : candidates) {
      ::execve(candidate.c_str(), argv.data(), envp.data());
      last = errno;
      if (last == EACCES) saw_eacces = true;
      if (last != ENOENT && last != ENOTDIR && last != EACCES) break;
    }
    if (saw_eacces && (last == ENOENT || last == ENOTDIR)) last = EACCES;
    error = {1, last};
    WriteAll(pipe_fds[1], &error, sizeof(error));
    ::_exit(last == EACCES || last == ENOEXEC ? 126 : 127);
  }
  int fork_errno = errno;
  ::close(pipe_fds[1]);
  ::close(null_fd);
  if (cgroup_fd >= 0) ::close(cgroup_fd);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    ::close(log_fd);
    if (!cgroup_path.empty()) (void)CgroupManager::Remove(cgroup_path);
    return ErrnoStatus("fork", fork_errno);
  }
  // EOF means execve succeeded (the pipe closed on exec); a ChildError means it did not.
  ChildError error{0, 0};
  ssize_t got;
  do {
    got = ::read(pipe_fds[0], &error, sizeof(error));
  } while (got < 0 && errno == EINTR);
  ::close(pipe_fds[0]);
  std::string launch_error;
  if (got == static_cast<ssize_t>(sizeof(error))) {
    std::string as = run_as ? " as " + run_as->account : "";
    switch (error.stage) {
      case 0:
        launch_error = "cannot enter working directory " + request.working_dir + as + ": " +
                       std::strerror(error.err);
        break;
      case 1:
        launch_error = "cannot execute " + request.argv[0] + as + ": " + std::strerror(error.err);
        break;
      default:
        launch_error = "cannot switch to the Unix account " + (run_as ? run_as->account : "") +
                       " (" +
                       (error.stage == 2   ? "setgroups"
                        : error.stage == 3 ? "setgid"
                                           : "setuid") +
                       "): " + std::strerror(error.err);
    }
    std::string line = "cohort-agent: " + launch_error + "\n";
    WriteAll(log_fd, line.data(), line.size());
  }
  ::close(log_fd);
  return std::unique_ptr<ReplicaProcess>(std::make_unique<ProcessReplica>(
      pid, std::move(cgroup_path), marker, std::move(launch_error)));
}

}  // namespace cohort::agent
