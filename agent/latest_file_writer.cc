#include "agent/latest_file_writer.h"

#include <utility>

#include "common/file_util.h"

namespace cohort::agent {

LatestFileWriter::LatestFileWriter(std::string path, mode_t mode)
    : path_(std::move(path)), mode_(mode), thread_([this] { Loop(); }) {}

LatestFileWriter::~LatestFileWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;  // what waits is still written: Loop leaves only once none does
  }
  cv_.notify_all();
  thread_.join();
}

void LatestFileWriter::Post(uint64_t version, std::string text) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.emplace(version, std::move(text));
  }
  cv_.notify_all();
}

std::optional<LatestFileWriter::Written> LatestFileWriter::Last() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

void LatestFileWriter::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !waiting_ && !writing_; });
}

void LatestFileWriter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return waiting_ || stopping_; });
    if (!waiting_) return;  // stopping, and nothing left to write
    auto [version, text] = std::move(*waiting_);
    waiting_.reset();
    writing_ = true;
    lock.unlock();
    Status status = ReplaceFileDurably(path_, text, mode_);
    lock.lock();
    writing_ = false;
    last_ = Written{version, std::move(status)};
    cv_.notify_all();  // a Flush waiting for this write
  }
}

}  // namespace cohort::agent
