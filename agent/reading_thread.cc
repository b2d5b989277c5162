#include "agent/reading_thread.h"

#include <chrono>
#include <thread>
#include <utility>

#include "agent/test_hook.h"
#include "common/mutex.h"

namespace cohort::agent {
namespace {

TestHook<std::string> reading_hook;

}  // namespace

void SetReadingHookForTesting(std::function<void(const std::string& path)> hook) {
  reading_hook.Set(std::move(hook));
}

struct ReadingThread::Shared {
  explicit Shared(std::string file) : path(std::move(file)) {}

  const std::string path;
  Mutex mu;
  CondVar cv;
  bool stop GUARDED_BY(mu) = false;
  uint64_t requested GUARDED_BY(mu) = 0;  // the newest reading asked for
  uint64_t started GUARDED_BY(mu) = 0;    // the newest reading begun
};

// `read` lives on this thread's stack: whatever it holds (an open file, a mapping) is released
// here, never on the loop.
void ReadingThread::Loop(std::shared_ptr<Shared> s, Read read) {
  MutexLock lock(&s->mu);
  while (true) {
    while (!s->stop && s->requested == s->started) {
      s->cv.WaitUntil(&s->mu, std::chrono::steady_clock::now() + std::chrono::hours(1));
    }
    if (s->stop) return;
    const uint64_t number = s->requested;
    s->started = number;
    s->mu.Unlock();
    reading_hook.Run(s->path);
    read(number);
    s->mu.Lock();
  }
}

ReadingThread::ReadingThread(std::string path, Read read)
    : path_(path), shared_(std::make_shared<Shared>(std::move(path))) {
  std::thread(Loop, shared_, std::move(read)).detach();
}

// The thread ends once its reading (if any) returns; nothing waits for it.
ReadingThread::~ReadingThread() {
  MutexLock lock(&shared_->mu);
  shared_->stop = true;
  shared_->cv.NotifyAll();
}

uint64_t ReadingThread::Request() {
  MutexLock lock(&shared_->mu);
  // One asked for and not begun yet serves this request too.
  if (shared_->requested == shared_->started) {
    ++shared_->requested;
    shared_->cv.NotifyAll();
  }
  return shared_->requested;
}

uint64_t ReadingThread::asked() const {
  MutexLock lock(&shared_->mu);
  return shared_->requested;
}

}  // namespace cohort::agent
