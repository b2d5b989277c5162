#include "agent/health_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "common/logging.h"
#include "common/mutex.h"
#include "common/utf8.h"

namespace cohort::agent {

using SteadyClock = std::chrono::steady_clock;

StatusOr<std::vector<std::string>> ParseHealthCheckCommand(const std::string& text) {
  std::vector<std::string> argv;
  std::istringstream in(text);
  for (std::string word; in >> word;) argv.push_back(std::move(word));
  if (argv.empty()) return argv;
  const std::string& program = argv.front();
  if (program.front() != '/') {
    return InvalidArgument("--health-check: the program must be an absolute path, got '" + program +
                           "'");
  }
  struct stat st {};
  if (::stat(program.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      ::access(program.c_str(), X_OK) != 0) {
    return InvalidArgument("--health-check: " + program + " is not an executable file");
  }
  return argv;
}

std::string HealthVerdict(const CapturedCommand& run, std::chrono::milliseconds timeout) {
  if (run.exit_code == 0 && !run.timed_out) return "";
  std::string first;
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b == std::string::npos) continue;
    first = line.substr(b, e - b + 1);
    break;
  }
  std::string how;
  if (run.timed_out) {
    how = "did not finish within " + std::to_string(timeout.count()) + " ms";
  } else if (run.exit_code < 0) {
    how = "could not start";
  } else if (run.exit_code > 128) {
    how = "was killed by signal " + std::to_string(run.exit_code - 128);
  } else {
    how = "exited with code " + std::to_string(run.exit_code);
  }
  // "could not start" has the reason as its output ("ARGV0: why").
  std::string why = first.empty() ? "health check " + how : first + " (health check " + how + ")";
  return TruncateUtf8(ValidUtf8(why, /*printable=*/true), kMaxHealthReasonBytes);
}

struct HealthCheck::Shared {
  HealthCheckOptions options;
  std::atomic<bool> cancel{false};
  mutable Mutex mu;
  CondVar cv;
  bool stop GUARDED_BY(mu) = false;
  uint64_t runs GUARDED_BY(mu) = 0;  // ended
  uint64_t started GUARDED_BY(mu) = 0;
  // RunNow(): rechecking until `runs` reaches it; above `started`, a run is asked for now.
  uint64_t recheck_until GUARDED_BY(mu) = 0;
  std::string problem GUARDED_BY(mu) = "health check has not finished yet";
};

void HealthCheck::Loop(std::shared_ptr<Shared> s) {
  CaptureOptions capture;
  capture.timeout = s->options.timeout;
  capture.max_output = 64 << 10;
  // The agent loop reaps every child: this run's status must not be taken from under it.
  capture.hidden_from_reaper = true;
  capture.cancel = &s->cancel;
  MutexLock lock(&s->mu);
  while (!s->stop) {
    ++s->started;
    s->mu.Unlock();
    CapturedCommand run = RunCaptured(s->options.argv, capture);
    s->mu.Lock();
    if (s->stop) break;
    std::string problem = HealthVerdict(run, s->options.timeout);
    if (problem != s->problem || s->runs == 0) {
      if (problem.empty()) {
        spdlog::info("health check passes{}", s->runs == 0 ? "" : " again: new work may come here");
      } else {
        spdlog::warn("health check fails: {}; nothing new is placed on this node", problem);
      }
    }
    s->problem = std::move(problem);
    ++s->runs;
    s->cv.NotifyAll();
    auto next = SteadyClock::now() + s->options.every;
    while (!s->stop && s->recheck_until <= s->started && SteadyClock::now() < next) {
      s->cv.WaitUntil(&s->mu, next);
    }
  }
}

HealthCheck::HealthCheck(HealthCheckOptions options) : shared_(std::make_shared<Shared>()) {
  shared_->options = std::move(options);
  if (shared_->options.argv.empty()) {
    MutexLock lock(&shared_->mu);
    shared_->problem.clear();
    return;
  }
  thread_ = std::make_unique<std::thread>(Loop, shared_);
}

HealthCheck::~HealthCheck() {
  {
    MutexLock lock(&shared_->mu);
    shared_->stop = true;
    shared_->cv.NotifyAll();
  }
  shared_->cancel = true;  // a run in progress is killed within 100 ms
  if (thread_) thread_->join();
}

std::string HealthCheck::Problem() const {
  MutexLock lock(&shared_->mu);
  return shared_->problem;
}

bool HealthCheck::RunNow() {
  if (!thread_) return false;
  MutexLock lock(&shared_->mu);
  // The run to wait for is the next to start: one in progress began before the call.
  shared_->recheck_until = std::max(shared_->recheck_until, shared_->started + 1);
  shared_->cv.NotifyAll();
  return true;
}

bool HealthCheck::Rechecking() const {
  MutexLock lock(&shared_->mu);
  return shared_->runs < shared_->recheck_until;
}

uint64_t HealthCheck::runs() const {
  MutexLock lock(&shared_->mu);
  return shared_->runs;
}

}  // namespace cohort::agent
