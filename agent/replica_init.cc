// cohort-replica-init: PID 1 of a replica's PID namespace (agent/process_launcher.h launches it
// there, already as the replica's account, in its working directory, with its environment and
// log). It starts the replica's command as its only child, in a session of its own, and:
//  - forwards every signal it gets (SIGTERM for a graceful stop or preemption, SIGINT, SIGHUP,
//    SIGUSR1/2, the stack-dump signal, ...) to the command's process group; only SIGCHLD and the
//    synchronous faults (SIGSEGV, SIGBUS, ...) are not forwarded. The command is not PID 1, so a
//    script's default SIGTERM action still ends it;
//  - reaps every process of the namespace that is orphaned onto it;
//  - when the command ends, writes its raw wait status to --status-fd (the agent reports a death
//    by signal as such: PID 1 cannot die of a signal it sends itself) and exits with the
//    command's exit code, or 128+signal. The kernel then SIGKILLs whatever is left in the
//    namespace: nothing of the replica outlives it.
// Outside a PID namespace (run by hand) it makes itself a child subreaper, so it still reaps the
// command's orphans, but nothing kills them when it exits.
//
// Usage: cohort-replica-init [--report-fd N] [--status-fd N] -- COMMAND [ARG...]
// --report-fd: where a failure to execute COMMAND is written as a ChildError
// (agent/replica_exec.h; the agent's launch error). Exit codes of its own: 125 (bad usage or
// fork failure), 126/127 (COMMAND not executable / not found, as a shell says).
//
// It depends on libc and agent/replica_exec only, and is single-threaded: its child may use
// anything before execve.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "agent/replica_exec.h"

extern char** environ;

namespace {

using cohort::agent::ChildError;

int Usage(const char* why) {
  std::fprintf(stderr,
               "cohort-replica-init: %s\nusage: cohort-replica-init [--report-fd N] "
               "[--status-fd N] -- COMMAND [ARG...]\n",
               why);
  return 125;
}

bool ParseFd(const char* text, int* fd) {
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 0 || value > 1 << 20) return false;
  *fd = static_cast<int>(value);
  return ::fcntl(*fd, F_GETFD) >= 0;
}

// The signals init takes with sigwaitinfo: all but the synchronous faults (which are about init
// itself) and the two that cannot be caught.
sigset_t HandledSignals() {
  sigset_t set;
  sigfillset(&set);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT, SIGKILL, SIGSTOP}) {
    sigdelset(&set, sig);
  }
  return set;
}

}  // namespace

int main(int argc, char** argv) {
  int report_fd = -1;
  int status_fd = -1;
  int first = 1;
  for (; first < argc; ++first) {
    std::string arg = argv[first];
    if (arg == "--") {
      ++first;
      break;
    }
    int* target = arg == "--report-fd" ? &report_fd : arg == "--status-fd" ? &status_fd : nullptr;
    if (target == nullptr) return Usage(("unknown argument '" + arg + "'").c_str());
    if (first + 1 >= argc || !ParseFd(argv[first + 1], target)) {
      return Usage((arg + " needs an open file descriptor").c_str());
    }
    ++first;
  }
  if (first >= argc || argv[first][0] == '\0') return Usage("no command given");
  // Neither descriptor may reach the command: the agent waits for EOF on the report pipe.
  for (int fd : {report_fd, status_fd}) {
    if (fd >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  if (::getpid() != 1) ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  const char* path = std::getenv("PATH");
  std::vector<std::string> candidates =
      cohort::agent::ExecCandidates(argv[first], path ? path : "/usr/local/bin:/usr/bin:/bin");
  // Blocked before fork, so nothing arrives between the fork and the wait loop unseen.
  sigset_t handled = HandledSignals();
  sigset_t previous;
  ::sigprocmask(SIG_BLOCK, &handled, &previous);

  pid_t child = ::fork();
  if (child == 0) {
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    ::setsid();
    cohort::agent::ExecCommand(candidates, argv + first, environ, report_fd);
  }
  if (child < 0) {
    ChildError error{ChildError::kExec, errno};
    std::fprintf(stderr, "cohort-replica-init: fork: %s\n", std::strerror(errno));
    if (report_fd >= 0) cohort::agent::WriteAll(report_fd, &error, sizeof(error));
    return 125;
  }
  if (report_fd >= 0) ::close(report_fd);  // EOF for the agent once the command has exec'd

  int status = 0;
  bool done = false;
  while (!done) {
    siginfo_t info;
    int sig = ::sigwaitinfo(&handled, &info);
    if (sig < 0) continue;  // EINTR
    if (sig != SIGCHLD) {
      // The command's group; the command itself where it left that group.
      if (::kill(-child, sig) != 0) ::kill(child, sig);
      continue;
    }
    int wait_status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &wait_status, WNOHANG)) > 0) {
      if (pid == child) {
        status = wait_status;
        done = true;
      }
    }
  }
  if (status_fd >= 0) {
    cohort::agent::WriteAll(status_fd, &status, sizeof(status));
    ::close(status_fd);
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 125;
}
