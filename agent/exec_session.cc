#include "agent/exec_session.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <variant>

namespace cohort::agent {
namespace {

constexpr int kPumpPollMs = 50;  // how soon a pump notices its command's exit at the latest

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void SetWindow(int master, int rows, int cols) {
  winsize size{};
  size.ws_row = static_cast<unsigned short>(rows > 0 ? rows : 24);
  size.ws_col = static_cast<unsigned short>(cols > 0 ? cols : 80);
  ::ioctl(master, TIOCSWINSZ, &size);
}

Status Errno(const std::string& what) { return Internal(what + ": " + std::strerror(errno)); }

}  // namespace

struct ExecSessions::Session {
  std::string attempt_key;
  int64_t last_step_ms = 0;
  std::optional<wire::ExecOutputT> held;  // the step waiting for its answer
  int64_t hold_until_ms = 0;

  // The command's side: its hidden child, the fd its output is read from (the pty's master, or
  // its stdout pipe) and the one its input is written to (the master again, or its stdin pipe).
  pid_t pid = -1;
  bool tty = false;
  int out_fd = -1;
  int in_fd = -1;
  int wake_fd = -1;  // an eventfd: the loop tells the pump something changed
  std::thread pump;

  // Shared by the loop and the pump.
  std::mutex mu;
  std::string output;
  std::string input;  // not written yet
  bool close_input = false;
  bool kill = false;
  int rows = 0, cols = 0;  // a window to set, 0: none
  bool ended = false;
  int exit_code = -1;

  void Wake() const {
    if (wake_fd >= 0) (void)!::eventfd_write(wake_fd, 1);
  }

  // The pump: moves input in and output out until the command has exited, then reads what it
  // left (the pty or pipe may stay open in its children; what is there now is read, no more).
  void Pump() {
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);  // a closed stdin is EPIPE here
    bool killed = false;
    bool eof_sent = false;
    bool output_open = true;
    char buffer[16384];
    auto read_some = [&] {
      const ssize_t n = ::read(out_fd, buffer, sizeof(buffer));
      if (n > 0) {
        std::lock_guard<std::mutex> lock(mu);
        output.append(buffer, static_cast<size_t>(n));
        return true;
      }
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) output_open = false;  // EIO: no slave
      return false;
    };
    while (true) {
      bool want_read = false, want_write = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (kill && !killed) {
          ::kill(-pid, SIGKILL);
          ::kill(pid, SIGKILL);
          killed = true;
        }
        if (rows > 0 && tty) SetWindow(out_fd, rows, cols);
        rows = cols = 0;
        if (close_input && input.empty() && !tty && in_fd >= 0) {  // once what came is written
          ::close(in_fd);
          in_fd = -1;
        } else if (close_input && input.empty() && tty && !eof_sent) {
          input = "\x04";  // the terminal's end of input (^D), for a reader in canonical mode
          eof_sent = true;
        }
        want_read = output_open && output.size() < kExecSessionBufferBytes;
        want_write = !input.empty() && in_fd >= 0;
      }
      pollfd fds[3];
      nfds_t n = 0;
      fds[n++] = {wake_fd, POLLIN, 0};
      const nfds_t out_at = n;
      if (want_read) fds[n++] = {out_fd, POLLIN, 0};
      const nfds_t in_at = n;
      if (want_write) fds[n++] = {in_fd, POLLOUT, 0};
      ::poll(fds, n, kPumpPollMs);
      if (fds[0].revents != 0) {
        eventfd_t ignored;
        (void)!::eventfd_read(wake_fd, &ignored);
      }
      if (want_read && fds[out_at].revents != 0) read_some();
      if (want_write && fds[in_at].revents != 0) {
        std::lock_guard<std::mutex> lock(mu);
        const ssize_t wrote = ::write(in_fd, input.data(), input.size());
        if (wrote > 0) {
          input.erase(0, static_cast<size_t>(wrote));
        } else if (wrote < 0 && errno != EAGAIN && errno != EINTR) {
          input.clear();  // EPIPE: the command closed its stdin; what it never reads is dropped
          if (!tty) {
            ::close(in_fd);
            in_fd = -1;
          }
        }
      }
      int status = 0;
      const pid_t got = ::waitpid(pid, &status, __WCLONE | WNOHANG);
      if (got != pid && !(got < 0 && errno == ECHILD)) continue;
      while (output_open && read_some()) {
        std::lock_guard<std::mutex> lock(mu);
        if (output.size() >= kExecSessionBufferBytes) break;
      }
      std::lock_guard<std::mutex> lock(mu);
      ended = true;
      exit_code =
          got == pid ? (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) : -1;
      return;
    }
  }

  void Kill() {
    {
      std::lock_guard<std::mutex> lock(mu);
      kill = true;
    }
    Wake();
  }

  // Kills the command (when still running) and waits for the pump; closes every fd.
  void Close() {
    if (pump.joinable()) {
      Kill();
      pump.join();
    }
    for (int* fd : {&out_fd, &in_fd, &wake_fd}) {
      if (*fd >= 0 && (fd == &out_fd || *fd != out_fd)) ::close(*fd);
    }
    out_fd = in_fd = wake_fd = -1;
  }
};

ExecSessions::ExecSessions(size_t max_sessions) : max_sessions_(max_sessions) {}

ExecSessions::~ExecSessions() {
  for (auto& [id, session] : sessions_) session->Kill();
  for (auto& [id, session] : sessions_) session->Close();
}

StatusOr<uint64_t> ExecSessions::Open(const std::string& attempt_key, const ExecTarget& target,
                                      pid_t replica_pid, const std::vector<std::string>& argv,
                                      bool tty, int rows, int cols, int64_t now_ms) {
  if (argv.empty()) return InvalidArgument("no command to run");
  if (sessions_.size() >= max_sessions_) {
    return ResourceExhausted(std::to_string(sessions_.size()) +
                             " exec sessions already run on this node; try again when one has "
                             "ended");
  }
  auto session = std::make_unique<Session>();
  session->attempt_key = attempt_key;
  session->last_step_ms = now_ms;
  session->tty = tty;
  auto prepared =
      PrepareExec(target, replica_pid, argv, tty ? ExecStdio::kTerminal : ExecStdio::kStream);
  if (auto* failed = std::get_if<ExecResult>(&prepared)) {
    session->ended = true;
    session->exit_code = failed->exit_code;
    session->output = std::move(failed->output);
  } else {
    const PreparedExec& exec = std::get<PreparedExec>(prepared);
    int child_in = -1, child_out = -1;
    if (tty) {
      const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
      if (master < 0) return Errno("posix_openpt");
      char name[128];
      if (::grantpt(master) != 0 || ::unlockpt(master) != 0 ||
          ::ptsname_r(master, name, sizeof(name)) != 0) {
        Status error = Errno("a pty for the session");
        ::close(master);
        return error;
      }
      const int slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
      if (slave < 0) {
        Status error = Errno(std::string("open ") + name);
        ::close(master);
        return error;
      }
      // The command may run as another account: the terminal is its own, as login's would be.
      if (exec.base.account) (void)!::fchown(slave, exec.base.account->uid, -1);
      SetWindow(master, rows, cols);
      session->out_fd = session->in_fd = master;
      child_in = child_out = slave;
    } else {
      int in_pipe[2], out_pipe[2];
      if (::pipe2(in_pipe, O_CLOEXEC) != 0) return Errno("pipe");
      if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
        Status error = Errno("pipe");
        ::close(in_pipe[0]);
        ::close(in_pipe[1]);
        return error;
      }
      child_in = in_pipe[0];
      child_out = out_pipe[1];
      session->in_fd = in_pipe[1];
      session->out_fd = out_pipe[0];
    }
    session->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    SetNonBlocking(session->out_fd);
    if (session->in_fd != session->out_fd) SetNonBlocking(session->in_fd);
    const CaptureOptions options = exec.Options();
    const int rc = session->wake_fd < 0 ? errno
                                        : SpawnHidden(exec.command, options, child_in, child_out,
                                                      tty, &session->pid);
    ::close(child_in);
    if (child_out != child_in) ::close(child_out);
    if (rc != 0) {
      session->Close();
      return Internal(exec.command.front() + ": " + std::strerror(rc));
    }
    session->pump = std::thread([s = session.get()] { s->Pump(); });
  }
  static thread_local std::mt19937_64 random{std::random_device{}()};
  uint64_t id = 0;
  while (id == 0 || sessions_.count(id) != 0) id = random();
  sessions_[id] = std::move(session);
  return id;
}

Status ExecSessions::Step(uint64_t id, const std::string& attempt_key, const ExecStep& step,
                          wire::ExecOutputT answer, int64_t now_ms) {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->attempt_key != attempt_key) {
    return FailedPrecondition("no exec session " + std::to_string(id) + " of " + attempt_key +
                              " on this node (it ended, or its attempt did)");
  }
  Session& s = *it->second;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.input.size() + step.input.size() > kExecSessionBufferBytes) {
      return ResourceExhausted("the command has not read the " + std::to_string(s.input.size()) +
                               " bytes of input sent to it; send more once it has "
                               "(ExecOutput.input_pending)");
    }
    s.input += step.input;
    s.close_input = s.close_input || step.input_closed;
    s.kill = s.kill || step.kill;
    if (step.rows > 0 && step.cols > 0) {
      s.rows = step.rows;
      s.cols = step.cols;
    }
  }
  s.Wake();
  if (s.held) superseded_.push_back(std::move(*s.held));
  answer.session = id;
  s.held = std::move(answer);
  s.hold_until_ms = now_ms + kExecStepHoldMs;
  s.last_step_ms = now_ms;
  return Status::Ok();
}

std::vector<wire::ExecOutputT> ExecSessions::TakeAnswers(int64_t now_ms) {
  std::vector<wire::ExecOutputT> answers = std::move(superseded_);
  superseded_.clear();
  for (wire::ExecOutputT& answer : answers) answer.running = true;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    Session& s = *it->second;
    if (!s.held) {
      ++it;
      continue;
    }
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.output.empty() && !s.ended && now_ms < s.hold_until_ms) {
        ++it;
        continue;
      }
      wire::ExecOutputT& answer = *s.held;
      const size_t n = std::min(s.output.size(), kMaxExecStepBytes);
      answer.output.assign(s.output.begin(), s.output.begin() + static_cast<ptrdiff_t>(n));
      s.output.erase(0, n);
      last = s.ended && s.output.empty();
      answer.running = !last;
      answer.exit_code = last ? s.exit_code : -1;
      answer.input_pending = s.input.size();
    }
    answers.push_back(std::move(*s.held));
    s.held.reset();
    s.Wake();  // room for more output
    if (last) {
      s.Close();
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
  return answers;
}

size_t ExecSessions::EndIdle(int64_t now_ms) {
  size_t ended = 0;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    Session& s = *it->second;
    if (s.held || now_ms - s.last_step_ms < kExecSessionIdleMs) {
      ++it;
      continue;
    }
    s.Close();
    it = sessions_.erase(it);
    ++ended;
  }
  return ended;
}

void ExecSessions::EndAttempt(const std::string& attempt_key) {
  for (auto& [id, session] : sessions_) {
    if (session->attempt_key == attempt_key) session->Kill();
  }
}

}  // namespace cohort::agent
