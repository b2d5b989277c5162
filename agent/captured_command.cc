#include "agent/captured_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace cohort::agent {
namespace {

// posix_spawnp with stdin from /dev/null and stdout/stderr into `out`. 0 or an errno.
int SpawnChild(char* const* args, int out, pid_t* pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  const int rc = ::posix_spawnp(pid, args[0], &actions, nullptr, args, environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc;
}

// Writes "cohort: <what>" to stderr and ends the process with 126 (system calls only).
[[noreturn]] void ChildFail(const char* what) {
  static const char kPrefix[] = "cohort: ";
  (void)!::write(STDERR_FILENO, kPrefix, sizeof(kPrefix) - 1);
  (void)!::write(STDERR_FILENO, what, std::strlen(what));
  (void)!::write(STDERR_FILENO, "\n", 1);
  ::syscall(SYS_exit_group, 126);
  __builtin_unreachable();
}

// What the hidden child sets up before it runs the command (CaptureOptions' env to account).
struct ChildSetup {
  char* const* envp = nullptr;
  const char* working_dir = nullptr;  // null: the agent's
  int cgroup_procs = -1;              // the cgroup's cgroup.procs, open for writing
  bool join_cgroup = false;           // a cgroup was asked for (-1 above: it could not be opened)
  const CaptureOptions::Account* account = nullptr;
  bool terminal = false;  // stdin is a terminal that becomes the command's controlling one
};

// The same, hidden from the agent's reaper (CaptureOptions::hidden_from_reaper): the child is a
// "clone" child (no signal at its exit), which an exec would turn back into an ordinary one, so
// it does not exec: it runs the command as its own child, in a process group of its own, waits
// for it and exits with its status (128 + the signal for a signal). Both are made with the bare
// clone system call and only make system calls (no allocation, no fork handlers: other threads
// of the agent may hold locks), exiting with exit_group itself: libc's _exit may be wrapped (a
// sanitizer's interceptor would then check this copy of the agent's threads for leaks). The
// account is switched by the bare system calls too: libc's setuid would signal the agent's other
// threads, which this copy of the process does not have.
// With a terminal, the child starts a session of its own (so its process group is still its pid)
// and takes the terminal as the session's controlling one, which its command inherits.
int SpawnHiddenChild(char* const* args, int in, int out, const ChildSetup& setup, pid_t* pid) {
  if (::access(args[0], X_OK) != 0) return errno;
  const long child = ::syscall(SYS_clone, 0L, nullptr, nullptr, nullptr, nullptr);
  if (child == 0) {
    if (setup.terminal) {
      ::setsid();
    } else {
      ::setpgid(0, 0);
    }
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    if (setup.terminal && ::ioctl(STDIN_FILENO, TIOCSCTTY, 0) != 0) {
      ChildFail("cannot take the terminal");
    }
    if (setup.join_cgroup && (setup.cgroup_procs < 0 || ::write(setup.cgroup_procs, "0", 1) != 1)) {
      ChildFail("cannot join the replica's cgroup");
    }
    if (setup.working_dir != nullptr && ::chdir(setup.working_dir) != 0) {
      ChildFail("cannot enter the replica's working directory");
    }
    if (const auto* account = setup.account; account != nullptr) {
      if (::syscall(SYS_setgroups, account->groups.size(), account->groups.data()) != 0 ||
          ::syscall(SYS_setresgid, account->gid, account->gid, account->gid) != 0 ||
          ::syscall(SYS_setresuid, account->uid, account->uid, account->uid) != 0) {
        ChildFail("cannot switch to the replica's account");
      }
    }
    // It outlives its exec'ing sibling commands: it must not hold their pipes open.
    ::close_range(3, ~0U, 0);
    const long command =
        ::syscall(SYS_clone, static_cast<long>(SIGCHLD), nullptr, nullptr, nullptr, nullptr);
    if (command == 0) {
      ::execve(args[0], args, setup.envp != nullptr ? setup.envp : environ);
      static const char kFailed[] = ": cannot execute\n";
      (void)!::write(STDERR_FILENO, args[0], std::strlen(args[0]));
      (void)!::write(STDERR_FILENO, kFailed, sizeof(kFailed) - 1);
      ::syscall(SYS_exit_group, 127);
      __builtin_unreachable();
    }
    int status = 0;
    while (command > 0 && ::waitpid(static_cast<pid_t>(command), &status, 0) < 0 &&
           errno == EINTR) {
    }
    ::syscall(SYS_exit_group, command < 0         ? 127
                              : WIFEXITED(status) ? WEXITSTATUS(status)
                                                  : 128 + WTERMSIG(status));
    __builtin_unreachable();
  }
  if (child < 0) return errno;
  *pid = static_cast<pid_t>(child);
  return 0;
}

}  // namespace

int SpawnHidden(const std::vector<std::string>& argv, const CaptureOptions& options, int in_fd,
                int out_fd, bool terminal, pid_t* pid) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  if (options.env != nullptr) {
    for (const auto& e : *options.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  ChildSetup setup;
  setup.envp = options.env != nullptr ? envp.data() : nullptr;
  setup.working_dir = options.working_dir.empty() ? nullptr : options.working_dir.c_str();
  setup.join_cgroup = !options.cgroup.empty();
  if (setup.join_cgroup) {
    setup.cgroup_procs = ::open((options.cgroup + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  }
  setup.account = options.account ? &*options.account : nullptr;
  setup.terminal = terminal;
  const int rc = SpawnHiddenChild(args.data(), in_fd, out_fd, setup, pid);
  if (setup.cgroup_procs >= 0) ::close(setup.cgroup_procs);
  return rc;
}

CapturedCommand RunCaptured(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                            size_t max_output) {
  CaptureOptions options;
  options.timeout = timeout;
  options.max_output = max_output;
  return RunCaptured(argv, options);
}

CapturedCommand RunCaptured(const std::vector<std::string>& argv, const CaptureOptions& options) {
  using Clock = std::chrono::steady_clock;
  CapturedCommand result;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    result.output = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  pid_t pid = -1;
  int rc = 0;
  if (options.hidden_from_reaper) {
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    rc = null_fd < 0 ? errno : SpawnHidden(argv, options, null_fd, fds[1], false, &pid);
    if (null_fd >= 0) ::close(null_fd);
  } else {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    rc = SpawnChild(args.data(), fds[1], &pid);
  }
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    result.output = argv[0] + ": " + std::strerror(rc);
    return result;
  }
  const auto deadline = Clock::now() + options.timeout;
  const int wait_flags = options.hidden_from_reaper ? __WCLONE : 0;
  int status = 0;
  bool reaped = false;
  // The child's exit ends the read as EOF does: a process another thread forked meanwhile (a
  // replica held before its exec) may hold a copy of the pipe's write end, and then no EOF comes
  // until that one goes. ECHILD: the agent's reaper took it.
  auto exited = [&] {
    const pid_t got = ::waitpid(pid, &status, wait_flags | WNOHANG);
    reaped = got == pid || (got < 0 && errno == ECHILD);
    return reaped;
  };
  auto append = [&](const char* data, ssize_t n) {
    if (result.output.size() < options.max_output) result.output.append(data, n);
  };
  while (true) {
    if (options.cancel != nullptr && options.cancel->load()) {
      result.cancelled = true;
      break;
    }
    int wait_ms = -1;
    if (options.timeout.count() > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        result.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(left.count());
    }
    wait_ms = wait_ms < 0 ? 100 : std::min(wait_ms, 100);
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, wait_ms);
    char buffer[4096];
    if (ready <= 0) {  // EINTR, the deadline, a cancel check (both checked above) or an exit
      if (!exited()) continue;
      // Gone: what it wrote is in the pipe.
      ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
      ssize_t n;
      while ((n = ::read(fds[0], buffer, sizeof(buffer))) > 0) append(buffer, n);
      break;
    }
    const ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    append(buffer, n);
  }
  ::close(fds[0]);
  if (result.timed_out || result.cancelled) {
    ::kill(pid, SIGKILL);
    if (options.hidden_from_reaper) ::kill(-pid, SIGKILL);  // its command, in its group
  }
  // The agent may reap every child (a subreaper): ECHILD then means it is already gone. A
  // hidden child is waited for with __WCLONE; the agent's waitpid(-1) never takes it.
  while (!reaped && ::waitpid(pid, &status, wait_flags) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace cohort::agent
