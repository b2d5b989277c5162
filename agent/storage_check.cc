#include "agent/storage_check.h"

#include <thread>

#include "common/logging.h"
#include "common/mutex.h"
#include "common/storage_marker.h"

namespace cohort::agent {

using SteadyClock = std::chrono::steady_clock;

struct StorageCheck::Shared {
  std::string own_root;
  std::chrono::milliseconds every{0};
  std::chrono::milliseconds hung_after{0};
  mutable Mutex mu;
  CondVar cv;
  bool stop GUARDED_BY(mu) = false;
  std::string coordinator_root GUARDED_BY(mu);
  uint64_t root_version GUARDED_BY(mu) = 0;  // bumped by each new coordinator root
  std::optional<wire::StorageReportT> report GUARDED_BY(mu);
  bool reading GUARDED_BY(mu) = false;
  std::string reading_root GUARDED_BY(mu);
  SteadyClock::time_point read_started GUARDED_BY(mu);
};

void StorageCheck::ReadLoop(std::shared_ptr<Shared> s) {
  uint64_t seen_version = 0;
  MutexLock lock(&s->mu);
  while (!s->stop) {
    std::string root = s->own_root.empty() ? s->coordinator_root : s->own_root;
    // Nothing to read while the coordinator names no root (unless the agent has its own, which
    // it reads once the coordinator has answered: before, there is nobody to report to).
    if (root.empty() || s->root_version == 0) {
      s->report.reset();
      s->cv.WaitUntil(&s->mu, SteadyClock::now() + std::chrono::hours(1));
      continue;
    }
    seen_version = s->root_version;
    s->reading = true;
    s->reading_root = root;
    s->read_started = SteadyClock::now();
    s->mu.Unlock();
    auto token = ReadStorageMarker(root);
    s->mu.Lock();
    s->reading = false;
    wire::StorageReportT report;
    report.root = root;
    if (token.ok()) {
      report.token = *token;
    } else {
      report.error = token.status().message();
    }
    if (!s->report || s->report->error != report.error || s->report->root != report.root) {
      if (report.error.empty()) {
        spdlog::info("storage check: read the coordinator's marker under {}", root);
      } else {
        spdlog::warn("storage check: {}", report.error);
      }
    }
    s->report = std::move(report);
    auto next = SteadyClock::now() + s->every;
    while (!s->stop && s->root_version == seen_version && SteadyClock::now() < next) {
      s->cv.WaitUntil(&s->mu, next);
    }
  }
}

StorageCheck::StorageCheck(std::string own_root, std::chrono::milliseconds every,
                           std::chrono::milliseconds hung_after)
    : shared_(std::make_shared<Shared>()) {
  shared_->own_root = std::move(own_root);
  shared_->every = every;
  shared_->hung_after = hung_after;
  std::thread(ReadLoop, shared_).detach();
}

StorageCheck::~StorageCheck() {
  MutexLock lock(&shared_->mu);
  shared_->stop = true;
  shared_->cv.NotifyAll();
}

void StorageCheck::SetCoordinatorRoot(const std::string& root) {
  MutexLock lock(&shared_->mu);
  if (shared_->root_version > 0 && root == shared_->coordinator_root) return;
  shared_->coordinator_root = root;
  ++shared_->root_version;
  shared_->cv.NotifyAll();
}

std::optional<wire::StorageReportT> StorageCheck::Report() const {
  MutexLock lock(&shared_->mu);
  if (shared_->reading && SteadyClock::now() - shared_->read_started >= shared_->hung_after) {
    wire::StorageReportT hung;
    hung.root = shared_->reading_root;
    hung.error = shared_->reading_root + " did not answer within " +
                 std::to_string(shared_->hung_after.count()) + " ms (a hung mount?)";
    return hung;
  }
  return shared_->report;
}

}  // namespace cohort::agent
