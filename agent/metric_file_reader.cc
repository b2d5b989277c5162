#include "agent/metric_file_reader.h"

#include <sys/stat.h>

#include <utility>

#include "common/mutex.h"

namespace cohort::agent {

struct MetricFileReader::Found {
  mutable Mutex mu;
  Reading latest GUARDED_BY(mu);
  std::vector<MetricRecord> records GUARDED_BY(mu);  // not taken yet
  Status error GUARDED_BY(mu);
};

MetricFileReader::MetricFileReader(std::string path, bool tail)
    : MetricFileReader(std::move(path), tail, std::make_shared<Found>()) {}

MetricFileReader::MetricFileReader(std::string path, bool tail, std::shared_ptr<Found> found)
    : ReadingThread(path, ReadInto(found, path, tail)), found_(std::move(found)) {}

ReadingThread::Read MetricFileReader::ReadInto(std::shared_ptr<Found> found, std::string path,
                                               bool tail) {
  MetricFileTailer tailer(path);  // the thread's alone, kept from one reading to the next
  return [found = std::move(found), path = std::move(path), tail,
          tailer = std::move(tailer)](uint64_t number) mutable {
    struct stat st {};
    const int64_t size = ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
    StatusOr<std::vector<MetricRecord>> lines = std::vector<MetricRecord>();
    if (tail) lines = tailer.Poll();
    MutexLock lock(&found->mu);
    if (lines.ok()) {
      for (MetricRecord& r : *lines) found->records.push_back(std::move(r));
      found->error = Status::Ok();
    } else {
      found->error = lines.status();
    }
    found->latest = Reading{number, size};
  };
}

MetricFileReader::Reading MetricFileReader::Latest() const {
  MutexLock lock(&found_->mu);
  return found_->latest;
}

MetricFileReader::Lines MetricFileReader::Take() {
  MutexLock lock(&found_->mu);
  Lines out;
  out.records = std::move(found_->records);
  found_->records.clear();
  out.done = found_->latest.done;
  out.error = found_->error;
  return out;
}

}  // namespace cohort::agent
