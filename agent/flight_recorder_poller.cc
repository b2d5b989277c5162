#include "agent/flight_recorder_poller.h"

#include <cstdint>
#include <utility>

#include "common/mutex.h"

namespace cohort::agent {
namespace {

// How far a file of this attempt may seem to predate the launch by the wall clock (the clock
// stepped between the two readings) and still count as this attempt's.
constexpr int64_t kWallClockSlackNs = 1'000'000'000;

}  // namespace

struct FlightRecorderPoller::Found {
  mutable Mutex mu;
  Reading latest GUARDED_BY(mu);
};

FlightRecorderPoller::FlightRecorderPoller(std::string path, int64_t not_before_ns)
    : FlightRecorderPoller(std::move(path), not_before_ns, std::make_shared<Found>()) {}

FlightRecorderPoller::FlightRecorderPoller(std::string path, int64_t not_before_ns,
                                           std::shared_ptr<Found> found)
    : ReadingThread(path, ReadInto(found, path, not_before_ns)), found_(std::move(found)) {}

std::string FlightRecorderPoller::FilePath(const std::string& path, int file) {
  return file == 0 ? path : path + "." + std::to_string(file);
}

ReadingThread::Read FlightRecorderPoller::ReadInto(std::shared_ptr<Found> found, std::string path,
                                                   int64_t not_before_ns) {
  // The readers are the thread's (by file), each opened once and kept while its snapshots succeed.
  using Readers = std::vector<std::unique_ptr<FlightRecorderFileReader>>;
  // The launch by this host's wall clock: a file another host set up (storage the attempts share)
  // has an anchor on that host's monotonic clock, which says nothing here; its wall clock does.
  const int64_t not_before_wall_ns =
      FlightWallClockNs() - (FlightClockNs() - not_before_ns) - kWallClockSlackNs;
  return [found = std::move(found), path = std::move(path), not_before_ns, not_before_wall_ns,
          readers = std::make_shared<Readers>()](uint64_t number) {
    std::vector<FileSnapshot> snapshots;
    for (int file = 0; file <= kFlightRecorderMaxSiblings; ++file) {
      if (readers->size() <= static_cast<size_t>(file)) readers->resize(file + 1);
      std::unique_ptr<FlightRecorderFileReader>& reader = (*readers)[file];
      if (!reader) {
        auto opened = FlightRecorderFileReader::Open(FilePath(path, file));
        if (opened.status().code() == StatusCode::kNotFound) break;  // no file after it either
        if (!opened.ok()) continue;  // being set up, or not a recorder: tried again next reading
        reader = std::move(*opened);
      }
      auto taken = reader->Snapshot();
      if (!taken.ok()) {
        reader.reset();  // emptied or rewritten under it: opened anew by the next reading
        continue;
      }
      if (taken->anchor_monotonic_ns < not_before_ns ||
          taken->anchor_wall_ns < not_before_wall_ns) {
        continue;  // an earlier attempt's, on this host or another
      }
      snapshots.push_back(FileSnapshot{file, std::move(*taken)});
    }
    MutexLock lock(&found->mu);
    found->latest = Reading{number, std::move(snapshots)};
  };
}

uint64_t FlightRecorderPoller::done() const {
  MutexLock lock(&found_->mu);
  return found_->latest.done;
}

FlightRecorderPoller::Reading FlightRecorderPoller::Take() {
  MutexLock lock(&found_->mu);
  Reading out{found_->latest.done, std::move(found_->latest.snapshots)};
  found_->latest.snapshots.clear();
  return out;
}

}  // namespace cohort::agent
