#include "cli/exec_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <optional>

#include "cli/verb_util.h"
#include "common/exec_limits.h"

namespace cohort::cli {
namespace {

// The signals the session takes in its loop (blocked, then taken with sigtimedwait): no handler
// runs in the middle of a call, and the terminal is always restored.
sigset_t SessionSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGWINCH}) sigaddset(&set, sig);
  return set;
}

// What the process had before the session: the signal mask, stdin's flags and terminal mode.
class SessionSetup {
 public:
  explicit SessionSetup(bool raw) {
    const sigset_t signals = SessionSignals();
    sigprocmask(SIG_BLOCK, &signals, &old_mask_);
    stdin_flags_ = ::fcntl(STDIN_FILENO, F_GETFL);
    if (raw) {
      termios mode{};
      if (::tcgetattr(STDIN_FILENO, &mode) == 0) {
        old_mode_ = mode;
        ::cfmakeraw(&mode);
        ::tcsetattr(STDIN_FILENO, TCSANOW, &mode);
      }
    }
  }
  SessionSetup(const SessionSetup&) = delete;
  SessionSetup& operator=(const SessionSetup&) = delete;
  ~SessionSetup() {
    if (old_mode_) ::tcsetattr(STDIN_FILENO, TCSANOW, &*old_mode_);
    if (stdin_flags_ >= 0) ::fcntl(STDIN_FILENO, F_SETFL, stdin_flags_);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }

 private:
  sigset_t old_mask_;
  int stdin_flags_ = -1;
  std::optional<termios> old_mode_;
};

// This terminal's window (stdout's, else stdin's); 0 x 0 when neither is one.
void WindowSize(int* rows, int* cols) {
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0 &&
      ::ioctl(STDIN_FILENO, TIOCGWINSZ, &size) != 0) {
    size = {};
  }
  *rows = size.ws_row;
  *cols = size.ws_col;
}

// Writes all of `data` to stdout; false when it is closed.
bool WriteAll(const std::vector<uint8_t>& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(STDOUT_FILENO, data.data() + done, data.size() - done);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      pollfd p{STDOUT_FILENO, POLLOUT, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int RunExecSession(CoordinatorClient& client, const std::string& job, const std::string& replica,
                   const std::vector<std::string>& argv, bool tty, std::ostream& err) {
  const bool local_terminal = tty && ::isatty(STDIN_FILENO) == 1;
  std::optional<SessionSetup> setup(std::in_place, local_terminal);
  ::fcntl(STDIN_FILENO, F_SETFL, ::fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);
  const sigset_t signals = SessionSignals();

  wire::ExecSessionIoT step;
  step.job = job;
  step.replica = replica;
  step.argv = argv;
  step.tty = tty;
  if (tty) {
    int rows = 0, cols = 0;
    WindowSize(&rows, &cols);
    step.rows = static_cast<uint16_t>(rows);
    step.cols = static_cast<uint16_t>(cols);
  }
  bool stdin_open = true;
  uint64_t input_pending = 0;
  bool killing = false;
  while (true) {
    // Signals since the last step: a new window, or (without a terminal of ours) the end.
    const timespec now{0, 0};
    for (int sig; (sig = sigtimedwait(&signals, nullptr, &now)) > 0;) {
      if (sig == SIGWINCH) {
        int rows = 0, cols = 0;
        WindowSize(&rows, &cols);
        step.rows = static_cast<uint16_t>(rows);
        step.cols = static_cast<uint16_t>(cols);
      } else {
        step.kill = true;
        killing = true;
      }
    }
    // What stdin has now, while the command keeps up with it.
    if (stdin_open && input_pending < kMaxExecStepBytes && !killing) {
      std::string buffer(kMaxExecStepBytes, '\0');
      const ssize_t n = ::read(STDIN_FILENO, buffer.data(), buffer.size());
      if (n > 0) {
        step.input.assign(buffer.begin(), buffer.begin() + n);
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        stdin_open = false;
        step.input_closed = true;
      }
    }
    auto answer = client.ExecStep(step);
    if (!answer.ok()) {
      setup.reset();  // the terminal as it was, for the message
      return Fail(err, answer.status());
    }
    if (!WriteAll(answer->output)) {  // stdout closed: nothing more can be shown
      step.kill = true;
      killing = true;
    }
    if (!answer->running) {
      if (killing && answer->exit_code == 128 + SIGKILL) return 130;
      return answer->exit_code < 0 ? kExitJobFailed : answer->exit_code;
    }
    // The next step: this session's, with nothing asked again.
    const bool kill = step.kill;
    step = wire::ExecSessionIoT();
    step.job = job;
    step.replica = replica;
    step.session = answer->session;
    step.kill = kill;
    input_pending = answer->input_pending;
  }
}

}  // namespace cohort::cli
