#include "agent/captured_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace cohort::agent {

CapturedCommand RunCaptured(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                            size_t max_output) {
  using Clock = std::chrono::steady_clock;
  CapturedCommand result;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    result.output = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    result.output = argv[0] + ": " + std::strerror(rc);
    return result;
  }
  const auto deadline = Clock::now() + timeout;
  while (true) {
    int wait_ms = -1;
    if (timeout.count() > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        result.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(left.count());
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, wait_ms);
    if (ready <= 0) continue;  // EINTR, or the deadline (checked above)
    char buffer[4096];
    const ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (result.output.size() < max_output) result.output.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (result.timed_out) ::kill(pid, SIGKILL);
  // The agent may reap every child (a subreaper): ECHILD then means it is already gone.
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace cohort::agent
