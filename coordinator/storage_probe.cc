#include "coordinator/storage_probe.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "common/mutex.h"
#include "common/storage_marker.h"
#include "coordinator/options.h"

namespace cohort::coordinator {

void JudgeStorage(const std::string& root, const StorageTokens& tokens, NodeStorage& s) {
  s.shared = false;
  if (root.empty()) {
    s.verdict = "no output root";
    return;
  }
  if (!s.reported) {
    s.verdict = "checking";
    return;
  }
  const bool known = !s.token.empty() && (s.token == tokens.current || s.token == tokens.previous);
  if (s.root != root) {
    s.verdict = "not shared: the agent checks " + s.root + ", not the output root " + root;
  } else if (known) {
    s.shared = true;
    s.verdict = "shared";
  } else if (tokens.current.empty()) {
    s.verdict = tokens.error.empty()
                    ? "checking"
                    : "not shared: the coordinator cannot write its marker: " + tokens.error;
  } else if (!s.error.empty()) {
    s.verdict = "not shared: " + s.error;
  } else if (s.token.empty()) {
    s.verdict = "not shared: no marker read at " + root;
  } else {
    s.verdict = "not shared: " + root +
                " holds another storage marker than the coordinator's (another filesystem is "
                "mounted there)";
  }
}

std::string StorageWarning(const std::string& output_dir, const std::string& root, size_t nodes) {
  const std::string consequence = "; a restart on another node will not find its checkpoints";
  if (root.empty()) {
    if (nodes < 2) return "";
    return "output dir " + output_dir +
           " is not on checked shared storage (the coordinator has no output_root)" + consequence;
  }
  if (PathIsUnder(output_dir, root)) return "";
  return "output dir " + output_dir + " is not on the checked shared storage (the output root " +
         root + ")" + consequence;
}

struct StorageProbe::Shared {
  mutable Mutex mu;
  mutable CondVar cv;
  bool stop GUARDED_BY(mu) = false;
  StorageTokens tokens GUARDED_BY(mu);
  int writes GUARDED_BY(mu) = 0;  // markers written or failed
};

StorageProbe::StorageProbe(std::string root, std::chrono::milliseconds rewrite_every)
    : root_(std::move(root)), shared_(std::make_shared<Shared>()) {
  if (root_.empty()) return;
  std::thread([shared = shared_, root = root_, rewrite_every] {
    // The marker left by the coordinator before this one: agents may still report its token.
    auto found = ReadStorageMarker(root);
    if (found.ok()) {
      MutexLock lock(&shared->mu);
      shared->tokens.previous = *found;
    }
    bool failing = false;
    while (true) {
      std::string token = NewStorageToken();
      Status written = WriteStorageMarker(root, token);
      if (!written.ok() && !failing) {
        spdlog::error(
            "storage check: {}; no node counts as sharing the output root until it "
            "can be written",
            WithReadOnlyPathHint(written.message()));
      } else if (written.ok() && failing) {
        spdlog::info("storage check: the marker under {} is written again", root);
      }
      failing = !written.ok();
      MutexLock lock(&shared->mu);
      if (written.ok()) {
        if (!shared->tokens.current.empty()) shared->tokens.previous = shared->tokens.current;
        shared->tokens.current = token;
        shared->tokens.error.clear();
      } else {
        shared->tokens.error = written.message();
      }
      ++shared->writes;
      shared->cv.NotifyAll();
      auto next = std::chrono::steady_clock::now() + rewrite_every;
      while (!shared->stop && std::chrono::steady_clock::now() < next) {
        shared->cv.WaitUntil(&shared->mu, next);
      }
      if (shared->stop) return;
    }
  }).detach();
}

StorageProbe::~StorageProbe() {
  MutexLock lock(&shared_->mu);
  shared_->stop = true;
  shared_->cv.NotifyAll();
}

StorageTokens StorageProbe::tokens() const {
  MutexLock lock(&shared_->mu);
  return shared_->tokens;
}

void StorageProbe::Judge(NodeStorage& storage) const { JudgeStorage(root_, tokens(), storage); }

bool StorageProbe::WaitForWrites(int writes, std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(&shared_->mu);
  while (shared_->writes < writes) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    shared_->cv.WaitUntil(&shared_->mu, deadline);
  }
  return true;
}

}  // namespace cohort::coordinator
