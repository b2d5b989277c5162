#include "agent/metric_file_reader.h"

#include <sys/stat.h>

#include <thread>
#include <utility>

#include "agent/test_hook.h"
#include "common/mutex.h"

namespace cohort::agent {
namespace {

TestHook<std::string> read_hook;

}  // namespace

void SetMetricFileReadHookForTesting(std::function<void(const std::string& path)> hook) {
  read_hook.Set(std::move(hook));
}

struct MetricFileReader::Shared {
  Shared(std::string file, bool tail_lines) : path(std::move(file)), tail(tail_lines) {}
  void Stop() {
    MutexLock lock(&mu);
    stop = true;
    cv.NotifyAll();
  }

  const std::string path;
  const bool tail;
  mutable Mutex mu;
  CondVar cv;
  bool stop GUARDED_BY(mu) = false;
  uint64_t requested GUARDED_BY(mu) = 0;  // the newest reading asked for
  uint64_t started GUARDED_BY(mu) = 0;    // the newest reading begun
  Reading latest GUARDED_BY(mu);
  std::vector<MetricRecord> records GUARDED_BY(mu);  // not taken yet
  Status error GUARDED_BY(mu);
};

void MetricFileReader::ReadLoop(std::shared_ptr<Shared> s) {
  MetricFileTailer tailer(s->path);  // this thread's alone
  MutexLock lock(&s->mu);
  while (true) {
    while (!s->stop && s->requested == s->started) {
      s->cv.WaitUntil(&s->mu, std::chrono::steady_clock::now() + std::chrono::hours(1));
    }
    if (s->stop) return;
    const uint64_t number = s->requested;
    s->started = number;
    s->mu.Unlock();
    read_hook.Run(s->path);
    struct stat st {};
    const int64_t size = ::stat(s->path.c_str(), &st) == 0 ? st.st_size : -1;
    StatusOr<std::vector<MetricRecord>> lines = std::vector<MetricRecord>();
    if (s->tail) lines = tailer.Poll();
    s->mu.Lock();
    if (lines.ok()) {
      for (MetricRecord& r : *lines) s->records.push_back(std::move(r));
      s->error = Status::Ok();
    } else {
      s->error = lines.status();
    }
    s->latest = Reading{number, size};
  }
}

MetricFileReader::MetricFileReader(std::string path, bool tail)
    : path_(path), shared_(std::make_shared<Shared>(std::move(path), tail)) {
  std::thread(ReadLoop, shared_).detach();
}

// The thread ends once its reading (if any) returns; nothing waits for it.
MetricFileReader::~MetricFileReader() { shared_->Stop(); }

uint64_t MetricFileReader::Request() {
  MutexLock lock(&shared_->mu);
  // One asked for and not begun yet serves this request too.
  if (shared_->requested == shared_->started) {
    ++shared_->requested;
    shared_->cv.NotifyAll();
  }
  return shared_->requested;
}

uint64_t MetricFileReader::asked() const {
  MutexLock lock(&shared_->mu);
  return shared_->requested;
}

MetricFileReader::Reading MetricFileReader::Latest() const {
  MutexLock lock(&shared_->mu);
  return shared_->latest;
}

MetricFileReader::Lines MetricFileReader::Take() {
  MutexLock lock(&shared_->mu);
  Lines out;
  out.records = std::move(shared_->records);
  shared_->records.clear();
  out.done = shared_->latest.done;
  out.error = shared_->error;
  return out;
}

}  // namespace cohort::agent
