#include "agent/flight_recorder_poller.h"

#include <utility>

#include "common/mutex.h"

namespace cohort::agent {

struct FlightRecorderPoller::Found {
  mutable Mutex mu;
  Reading latest GUARDED_BY(mu);
};

FlightRecorderPoller::FlightRecorderPoller(std::string path)
    : FlightRecorderPoller(std::move(path), std::make_shared<Found>()) {}

FlightRecorderPoller::FlightRecorderPoller(std::string path, std::shared_ptr<Found> found)
    : ReadingThread(path, ReadInto(found, path)), found_(std::move(found)) {}

ReadingThread::Read FlightRecorderPoller::ReadInto(std::shared_ptr<Found> found, std::string path) {
  // The recorder is the thread's, opened once and kept while its snapshots succeed.
  return [found = std::move(found), path = std::move(path),
          recorder = std::shared_ptr<FlightRecorderFileReader>()](uint64_t number) mutable {
    if (!recorder) {
      auto opened = FlightRecorderFileReader::Open(path);
      if (opened.ok()) recorder = std::move(*opened);  // else not created yet, or none at all
    }
    std::optional<FlightRecorderSnapshot> snapshot;
    if (recorder) {
      auto taken = recorder->Snapshot();
      if (taken.ok()) {
        snapshot = std::move(*taken);
      } else {
        recorder.reset();  // emptied or rewritten under it: opened anew by the next reading
      }
    }
    MutexLock lock(&found->mu);
    found->latest = Reading{number, std::move(snapshot)};
  };
}

uint64_t FlightRecorderPoller::done() const {
  MutexLock lock(&found_->mu);
  return found_->latest.done;
}

FlightRecorderPoller::Reading FlightRecorderPoller::Take() {
  MutexLock lock(&found_->mu);
  Reading out{found_->latest.done, std::move(found_->latest.snapshot)};
  found_->latest.snapshot.reset();
  return out;
}

}  // namespace cohort::agent
