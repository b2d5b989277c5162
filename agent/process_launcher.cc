#include "agent/process_launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "agent/proc_scan.h"
#include "agent/replica_exec.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/signal_name.h"

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
    const std::string name = SignalName(signal);
    return "killed by signal " + std::to_string(signal) + (name.empty() ? "" : " (" + name + ")");
  }
  if (exit_code < 0) return "still running";
  return "exited with code " + std::to_string(exit_code);
}

namespace {

// Sends `sig` to each of `pids` but `skip` and the members of process group `group` (0: none),
// which had it already. One that ended since it was listed is no error (ESRCH).
void SignalOutsideGroup(const std::vector<pid_t>& pids, pid_t group, pid_t skip, int sig) {
  for (pid_t p : pids) {
    if (p == skip || (group > 0 && ::getpgid(p) == group)) continue;
    ::kill(p, sig);
  }
}

// What a launch's report is read with, and what its failure is told with.
struct StartWatch {
  int report_fd = -1;  // the report pipe's read end, non-blocking; -1 once the launch settled
  int log_fd = -1;     // the attempt's log, where a failure is written; -1 once settled
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds timeout{0};
  std::string command;                 // argv[0]
  std::string working_dir;             // as the request gave it
  std::optional<std::string> account;  // run_as's; nullopt: the agent's own
  std::string init_path;               // cohort-replica-init's when it is the child; else empty
};

// Today's messages for what the child reported (a ChildError) and for a missed deadline.
std::string DescribeChildError(const StartWatch& watch, const ChildError& error) {
  const std::string as = watch.account ? " as " + *watch.account : "";
  const std::string why = std::strerror(error.err);
  switch (error.stage) {
    case ChildError::kChdir:
      return "cannot enter working directory " + watch.working_dir + as + ": " + why;
    case ChildError::kExec:
      return "cannot execute " + watch.command + as + ": " + why;
    case ChildError::kExecInit:
      return "cannot execute " + watch.init_path + as + ": " + why;
    default:
      return "cannot switch to the Unix account " + watch.account.value_or("") + " (" +
             (error.stage == ChildError::kSetgroups ? "setgroups"
              : error.stage == ChildError::kSetgid  ? "setgid"
                                                    : "setuid") +
             "): " + why;
  }
}

std::string DescribeMissedDeadline(const StartWatch& watch, pid_t pid) {
  return (watch.init_path.empty() ? std::string("the replica's process") : watch.init_path) +
         " (pid " + std::to_string(pid) + ") neither executed " + watch.command +
         " nor said why not within " + FormatDuration(watch.timeout) + "; the agent killed it";
}

class ProcessReplica : public ReplicaProcess {
 public:
  // `status_fd`: the read end of the pipe cohort-replica-init writes the command's wait status
  // to; -1 without a PID namespace. The replica owns the descriptors of `start` and `status_fd`.
  ProcessReplica(pid_t pid, std::string cgroup_path, std::string marker, StartWatch start,
                 int status_fd)
      : pid_(pid),
        cgroup_path_(std::move(cgroup_path)),
        marker_(std::move(marker)),
        start_(std::move(start)),
        status_fd_(status_fd) {}

  ~ProcessReplica() override {
    // The agent kills and releases before dropping an attempt; this is the last line of defence.
    if (!exit_ || AnyAlive()) KillAll();
    if (status_fd_ >= 0) ::close(status_fd_);
    CloseStartWatch();
  }

  LaunchState PollLaunch() override {
    if (launch_ != LaunchState::kStarting) return launch_;
    ReadReport();
    if (launch_ == LaunchState::kStarting && std::chrono::steady_clock::now() >= start_.deadline) {
      // Stuck before execve (or init never starts the command). Not yet reaped (OnExited settles
      // the launch), so the pid is still ours; an init takes its namespace along.
      ::kill(pid_, SIGKILL);
      Settle(DescribeMissedDeadline(start_, pid_));
    }
    return launch_;
  }

  std::string cgroup_path() const override { return cgroup_path_; }
  pid_t pid() const override { return pid_; }

  pid_t command_pid() override {
    if (!namespaced() || exit_) return pid_;
    for (pid_t p : Descendants(pid_)) {
      if (NamespacePid(p) == 2) return p;  // init's first child
    }
    return pid_;
  }

  void OnExited(int wait_status) override {
    // What the child wrote before it ended is all there is: an error, or the command ran.
    if (launch_ == LaunchState::kStarting) ReadReport();
    if (launch_ == LaunchState::kStarting) Settle("");
    if (status_fd_ >= 0) {
      // What the command's own end was; nothing there when init itself was killed.
      int command_status = 0;
      ssize_t got;
      do {
        got = ::read(status_fd_, &command_status, sizeof(command_status));
      } while (got < 0 && errno == EINTR);
      if (got == static_cast<ssize_t>(sizeof(command_status))) wait_status = command_status;
      ::close(status_fd_);
      status_fd_ = -1;
    }
    exit_ = ExitInfo::FromWaitStatus(wait_status);
    if (!cgroup_path_.empty()) exit_->oom_kills = CgroupManager::OomKills(cgroup_path_);
  }
  std::optional<ExitInfo> exit_info() const override { return exit_; }
  std::string launch_error() const override { return launch_error_; }

  // Each process of the attempt gets `sig` once (a stock trainer takes a second SIGTERM as "exit
  // now, skip the checkpoint"): the command's process group by one kill (init's, forwarding it,
  // in a namespace), then each other process of the attempt (its cgroup's, its namespace's or
  // those carrying its marker) that is not in that group, nor init.
  void Signal(int sig) override {
    if (namespaced()) {
      if (exit_) return;  // the namespace is gone with its init
      if (command_group_ == 0) {
        const pid_t command = command_pid();
        if (command != pid_) command_group_ = command;
      }
      ::kill(pid_, sig);  // init forwards it to the command's group
      SignalOutsideGroup(
          cgroup_path_.empty() ? Descendants(pid_) : CgroupManager::Procs(cgroup_path_),
          command_group_, pid_, sig);
      return;
    }
    if (PollLaunch() == LaunchState::kStarting) {
      // Not executed yet: the child is the attempt's only process, maybe not yet its own group's
      // leader (setsid), so the group would be taken for gone.
      ::kill(pid_, sig);
      return;
    }
    bool group_signalled = false;
    if (!group_gone_) {
      if (::kill(-pid_, sig) == 0) {
        group_signalled = true;
      } else if (errno == ESRCH) {
        group_gone_ = true;
      }
    }
    SignalOutsideGroup(
        cgroup_path_.empty() ? ProcessesWithEnvEntry(marker_) : CgroupManager::Procs(cgroup_path_),
        group_signalled ? pid_ : 0, 0, sig);
  }

  void KillAll() override {
    if (namespaced()) {
      // init's death ends every process of its namespace. Not once reaped: its pid may be reused.
      if (!exit_) ::kill(pid_, SIGKILL);
      if (!cgroup_path_.empty()) CgroupManager::Kill(cgroup_path_);
      return;
    }
    if (!exit_ && PollLaunch() == LaunchState::kStarting) {
      ::kill(pid_, SIGKILL);  // as in Signal(): alone, and maybe not leading its group yet
      return;
    }
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
    // A namespace's init is reaped only after the kernel has ended everything else in it.
    if (namespaced()) return false;
    if (cgroup_path_.empty() && !ProcessesWithEnvEntry(marker_).empty()) return true;
    if (group_gone_) return false;
    if (::kill(-pid_, 0) != 0 && errno == ESRCH) {
      group_gone_ = true;
      return false;
    }
    return GroupHasLiveMembers(pid_);
  }

  Status HandOver(HandedOverAttempt* out) override {
    if (launch_ != LaunchState::kStarted || exit_) {
      return Unavailable("its process has not started, or has ended");
    }
    // init's status pipe stays open in the image the agent re-executes.
    if (status_fd_ >= 0 && ::fcntl(status_fd_, F_SETFD, 0) != 0) {
      return ErrnoStatus("keeping its status pipe open", errno);
    }
    out->pid = pid_;
    out->status_fd = status_fd_;
    out->cgroup = cgroup_path_;
    return Status::Ok();
  }

  // Taken over from an earlier image of the agent: its command runs (its launch settled there).
  void MarkAdopted() { launch_ = LaunchState::kStarted; }

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
  bool namespaced() const { return namespaced_; }

  // Reads what the child has written to the report pipe, without waiting, and settles the launch
  // at EOF (every copy of the write end closed on exec: the command runs) or once a whole
  // ChildError is in. A read error or a report cut short counts as EOF, as it always did.
  void ReadReport() {
    char* into = reinterpret_cast<char*>(&report_);
    while (launch_ == LaunchState::kStarting) {
      ssize_t n = ::read(start_.report_fd, into + report_got_, sizeof(report_) - report_got_);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // nothing yet
      if (n <= 0) {
        Settle("");
      } else if ((report_got_ += static_cast<size_t>(n)) == sizeof(report_)) {
        Settle(DescribeChildError(start_, report_));
      }
    }
  }

  // The launch is settled: the command runs (`error` empty) or it failed, said in the log too.
  void Settle(std::string error) {
    if (!error.empty()) {
      const std::string line = "cohort-agent: " + error + "\n";
      WriteAll(start_.log_fd, line.data(), line.size());
    }
    CloseStartWatch();
    launch_ = error.empty() ? LaunchState::kStarted : LaunchState::kFailed;
    launch_error_ = std::move(error);
  }

  void CloseStartWatch() {
    for (int* fd : {&start_.report_fd, &start_.log_fd}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

  pid_t pid_;
  std::string cgroup_path_;
  std::string marker_;  // COHORT_ATTEMPT_DIR=<working dir>, in every process of the attempt
  StartWatch start_;
  ChildError report_{0, 0};
  size_t report_got_ = 0;  // bytes of report_ read
  LaunchState launch_ = LaunchState::kStarting;
  std::string launch_error_;
  int status_fd_;
  bool namespaced_ = status_fd_ >= 0;
  std::optional<ExitInfo> exit_;
  bool group_gone_ = false;
  // In a namespace: the command's host pid, which leads the process group init signals; 0 until
  // seen. Only compared with process groups, never signalled: it may be stale once it ended.
  pid_t command_group_ = 0;
};

// Everything the child does between fork (or clone) and execve, prepared before: the child may
// only call async-signal-safe functions.
struct ChildPlan {
  int cgroup_fd = -1;
  int null_fd = -1;
  int log_fd = -1;
  int report_fd = -1;               // write end of the ChildError pipe
  int report_read_fd = -1;          // its read end (the agent's), closed in the child
  int status_fd = -1;               // write end of init's status pipe; -1 without a PID namespace
  int hold_fd = -1;                 // tests only: a byte is read from it before the chdir
  const cpu_set_t* cpus = nullptr;  // the CPUs it runs on; nullptr: the agent's
  pid_t parent = 0;
  const RunAs* run_as = nullptr;
  const gid_t* groups = nullptr;
  size_t group_count = 0;
  const char* working_dir = nullptr;
  int max_fd = 65536;
  bool namespaced = false;
  const char* init_path = nullptr;  // executed instead of the command when namespaced
  char* const* init_argv = nullptr;
  const std::vector<std::string>* candidates = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
};

[[noreturn]] void Fail(const ChildPlan& plan, int stage, int err, int code) {
  ChildError error{stage, err};
  WriteAll(plan.report_fd, &error, sizeof(error));
  ::_exit(code);
}

[[noreturn]] void RunChild(const ChildPlan& plan) {
  ::close(plan.report_read_fd);
  ::setsid();
  if (plan.cgroup_fd >= 0) (void)!::write(plan.cgroup_fd, "0", 1);
  sigset_t all;
  sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  if (plan.namespaced) {
    // A /proc of the new namespace, so that /proc/<getpid()> is the replica's own, as tools
    // expect; best effort: the host's otherwise. Slave, not private: nothing mounted here goes
    // back to the host, but what the host mounts later (an automounted data set or home, an NFS
    // export mounted by the admin) still reaches the replica.
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) == 0) {
      (void)::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
    }
  }
  // Best effort (LaunchRequest::cpu_affinity): a set the kernel refuses leaves it unbound.
  if (plan.cpus != nullptr) (void)::sched_setaffinity(0, sizeof(cpu_set_t), plan.cpus);
  ::dup2(plan.null_fd, 0);
  ::dup2(plan.log_fd, 1);
  ::dup2(plan.log_fd, 2);
  if (plan.run_as) {
    // Groups first, then the gid, then the uid: after setuid the others cannot be changed.
    // Raw system calls: glibc's wrappers apply credentials to every thread it knows of, and a
    // child made by clone() (not fork) still lists the agent's threads, so they wait forever for
    // threads it does not have. This child has one thread; the kernel calls change just it.
    if (::syscall(SYS_setgroups, plan.group_count, plan.groups) != 0)
      Fail(plan, ChildError::kSetgroups, errno, 126);
    if (::syscall(SYS_setgid, plan.run_as->gid) != 0) Fail(plan, ChildError::kSetgid, errno, 126);
    if (::syscall(SYS_setuid, plan.run_as->uid) != 0) Fail(plan, ChildError::kSetuid, errno, 126);
  }
  // Die with the agent (its launching thread: the agent loop's, which lives as long as the
  // agent). Set after the account switch, which clears it, and kept across execve. Then make
  // sure the agent did not die before: in a new PID namespace getppid() says 0, so there the
  // report pipe tells (POLLERR once the agent's read end is closed).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (plan.namespaced) {
    pollfd p{plan.report_fd, 0, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & POLLERR)) ::_exit(137);
  } else if (::getppid() != plan.parent) {
    ::_exit(137);
  }
  if (plan.hold_fd >= 0) {  // ProcessLauncher::HoldChildrenBeforeExecForTesting
    char byte;
    while (::read(plan.hold_fd, &byte, 1) < 0 && errno == EINTR) {
    }
  }
  if (::chdir(plan.working_dir) != 0) Fail(plan, ChildError::kChdir, errno, 127);
  // Nothing of the agent's leaks into the replica (sockets, other replicas' logs).
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    // Kernels before 5.11: mark them one by one (bounded; fcntl is async-signal-safe).
    for (int fd = 3; fd < plan.max_fd; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  if (!plan.namespaced) ExecCommand(*plan.candidates, plan.argv, plan.envp, plan.report_fd);
  ::fcntl(plan.report_fd, F_SETFD, 0);
  ::fcntl(plan.status_fd, F_SETFD, 0);
  ::execve(plan.init_path, plan.init_argv, plan.envp);
  Fail(plan, ChildError::kExecInit, errno, 127);
}

int RunNamespaceChild(void* plan) { RunChild(*static_cast<const ChildPlan*>(plan)); }

int ProbeChild(void*) { ::_exit(0); }

// clone() with `flags` and SIGCHLD, the child running `fn(arg)` on a stack of its own (a copy of
// the parent's memory, like fork). Returns the child's pid or -1 (errno).
pid_t CloneChild(int (*fn)(void*), void* arg, int flags, std::vector<char>& stack) {
  return ::clone(fn, stack.data() + stack.size(), flags | SIGCHLD, arg);
}

constexpr int kNamespaceFlags = CLONE_NEWPID | CLONE_NEWNS;

}  // namespace

int ProcessLauncher::SweepLeftovers(const std::string& work_dir,
                                    const std::set<std::string>& keep_dirs) {
  std::string dir = fs::absolute(work_dir).lexically_normal().string();
  if (dir.empty() || dir.back() != '/') dir += '/';
  const std::string prefix = std::string(kAttemptDirVariable) + "=" + dir;
  return KillUntilNoneLeft([&] {
    std::set<pid_t> kept;
    for (const std::string& keep : keep_dirs) {
      const std::string marker =
          std::string(kAttemptDirVariable) + "=" + fs::absolute(keep).lexically_normal().string();
      for (pid_t p : ProcessesWithEnvEntry(marker)) kept.insert(p);
    }
    std::vector<pid_t> found = ProcessesWithEnvEntry(prefix, /*prefix=*/true);
    std::erase_if(found, [&](pid_t p) { return kept.count(p) != 0; });
    return found;
  });
}

Status ProcessLauncher::ProbePidNamespaces() {
  std::vector<char> stack(256 << 10);
  pid_t pid = CloneChild(ProbeChild, nullptr, kNamespaceFlags, stack);
  if (pid < 0) return ErrnoStatus("clone(CLONE_NEWPID | CLONE_NEWNS)", errno);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<ReplicaProcess>> ProcessLauncher::Launch(const LaunchRequest& request) {
  if (request.argv.empty() || request.argv[0].empty()) {
    return InvalidArgument("replica " + request.replica + " has no command");
  }
  const bool namespaced = !replica_init_.empty() && request.pid_namespace;
  // Everything the child needs is prepared here: after fork it may only call
  // async-signal-safe functions.
  auto path = request.env.find("PATH");
  std::vector<std::string> candidates = ExecCandidates(
      request.argv[0], path != request.env.end() ? path->second : "/usr/local/bin:/usr/bin:/bin");
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
                        request.cpus, request.cpu_quota, request.memory_mb);
    if (created.ok()) {
      cgroup_path = *created;
      cgroup_fd = ::open((cgroup_path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    } else {
      spdlog::warn("{}/{}: no cgroup, relying on the process group: {}", request.job,
                   request.replica, created.status().ToString());
    }
  }
  int pipe_fds[2];
  int status_fds[2] = {-1, -1};
  bool piped = ::pipe2(pipe_fds, O_CLOEXEC) == 0;
  if (piped && namespaced && ::pipe2(status_fds, O_CLOEXEC) != 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    piped = false;
  }
  if (!piped) {
    int err = errno;
    ::close(log_fd);
    ::close(null_fd);
    if (cgroup_fd >= 0) ::close(cgroup_fd);
    if (!cgroup_path.empty()) (void)CgroupManager::Remove(cgroup_path);
    return ErrnoStatus("pipe2", err);
  }
  // cohort-replica-init --report-fd N --status-fd M -- COMMAND...
  std::vector<std::string> init_args;
  std::vector<char*> init_argv;
  if (namespaced) {
    init_args = {replica_init_,
                 "--report-fd",
                 std::to_string(pipe_fds[1]),
                 "--status-fd",
                 std::to_string(status_fds[1]),
                 "--"};
    for (auto& arg : init_args) init_argv.push_back(arg.data());
    init_argv.insert(init_argv.end(), argv.begin(), argv.end());  // ends with nullptr
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : request.cpu_affinity) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &cpus);
  }
  long open_max = ::sysconf(_SC_OPEN_MAX);
  ChildPlan plan;
  plan.cgroup_fd = cgroup_fd;
  plan.null_fd = null_fd;
  plan.log_fd = log_fd;
  plan.report_fd = pipe_fds[1];
  plan.report_read_fd = pipe_fds[0];
  plan.status_fd = status_fds[1];
  plan.hold_fd = hold_fd_;
  plan.cpus = CPU_COUNT(&cpus) > 0 ? &cpus : nullptr;
  plan.parent = ::getpid();
  plan.run_as = run_as ? &*run_as : nullptr;
  plan.groups = groups.data();
  plan.group_count = groups.size();
  plan.working_dir = request.working_dir.c_str();
  plan.max_fd = open_max > 0 && open_max < 65536 ? static_cast<int>(open_max) : 65536;
  plan.namespaced = namespaced;
  plan.init_path = replica_init_.c_str();
  plan.init_argv = init_argv.data();
  plan.candidates = &candidates;
  plan.argv = argv.data();
  plan.envp = envp.data();

  pid_t pid;
  if (namespaced) {
    std::vector<char> stack(256 << 10);
    pid = CloneChild(RunNamespaceChild, &plan, kNamespaceFlags, stack);
  } else {
    pid = ::fork();
    if (pid == 0) RunChild(plan);
  }
  int fork_errno = errno;
  ::close(pipe_fds[1]);
  if (status_fds[1] >= 0) ::close(status_fds[1]);
  ::close(null_fd);
  if (cgroup_fd >= 0) ::close(cgroup_fd);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    if (status_fds[0] >= 0) ::close(status_fds[0]);
    ::close(log_fd);
    if (!cgroup_path.empty()) (void)CgroupManager::Remove(cgroup_path);
    return ErrnoStatus(namespaced ? "clone" : "fork", fork_errno);
  }
  // Whether the command was executed is read later, without waiting (ProcessReplica::PollLaunch):
  // a child stuck before execve must not stall the agent's loop.
  ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  if (status_fds[0] >= 0) ::fcntl(status_fds[0], F_SETFL, O_NONBLOCK);
  StartWatch start;
  start.report_fd = pipe_fds[0];
  start.log_fd = log_fd;
  start.deadline = std::chrono::steady_clock::now() + launch_timeout_;
  start.timeout = launch_timeout_;
  start.command = request.argv[0];
  start.working_dir = request.working_dir;
  if (run_as) start.account = run_as->account;
  if (namespaced) start.init_path = replica_init_;
  return std::unique_ptr<ReplicaProcess>(std::make_unique<ProcessReplica>(
      pid, std::move(cgroup_path), marker, std::move(start), status_fds[0]));
}

StatusOr<std::unique_ptr<ReplicaProcess>> ProcessLauncher::Adopt(const HandedOverAttempt& handed) {
  // Still this process's child (the pid survives the execve), exited or not: an exit is reaped
  // as any other.
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(handed.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return FailedPrecondition("pid " + std::to_string(handed.pid) +
                              " is not a child of this agent (" + std::strerror(errno) + ")");
  }
  if (handed.status_fd >= 0) {
    // Not inherited by what this image starts; and it must be the pipe it was.
    struct stat st {};
    if (::fstat(handed.status_fd, &st) != 0 || !S_ISFIFO(st.st_mode) ||
        ::fcntl(handed.status_fd, F_SETFD, FD_CLOEXEC) != 0) {
      return FailedPrecondition("descriptor " + std::to_string(handed.status_fd) +
                                " is not the status pipe of its init");
    }
  }
  const std::string marker = std::string(kAttemptDirVariable) + "=" +
                             fs::absolute(handed.working_dir).lexically_normal().string();
  auto replica = std::make_unique<ProcessReplica>(handed.pid, handed.cgroup, marker, StartWatch{},
                                                  handed.status_fd);
  replica->MarkAdopted();
  return std::unique_ptr<ReplicaProcess>(std::move(replica));
}

}  // namespace cohort::agent
