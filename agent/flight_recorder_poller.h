// FlightRecorderPoller reads one attempt's flight recorder (common/flight_recorder.h: the file
// COHORT_FLIGHT_RECORDER names, which agent/replica_env.h puts in the attempt's dir unless the
// job's pool env points it elsewhere: NFS, a FUSE mount, anything a spec can name) on a
// ReadingThread (agent/reading_thread.h), so that the agent loop never opens, maps or reads it: a
// hung storage would hang the loop, and a job's spec must never stall the daemon. The loop asks
// for a reading (Request) and takes the newest finished one's snapshot for the hang watchdog's
// progress (agent/progress.h). Nothing here waits for a reading.
//
// A reading opens the file (FlightRecorderReader::Open) if no earlier reading did, and takes a
// Snapshot of it; the open recorder is the thread's, kept from one reading to the next. Readings
// are numbered as ReadingThread says, so `done >= n` says that the recorder was read after the
// request that returned n. A reading that hangs holds only the thread: no later snapshot comes,
// so the probe sees no progress of the replica's collectives (none is seen), while the
// heartbeats and every other attempt go on.
//
// Thread safety: every method may be called from any thread. Lifetime: as ReadingThread's, the
// destructor waits for no reading; the recorder's mapping is released on the thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "agent/reading_thread.h"
#include "common/flight_recorder.h"

namespace cohort::agent {

class FlightRecorderPoller : public ReadingThread {
 public:
  struct Reading {
    uint64_t done = 0;  // readings finished so far (the newest one's number)
    // The newest one's snapshot, handed out by one Take only (a later Take of the same reading
    // has none); none either when that reading found no recorder: the replica has not created
    // its file (yet), or the file is not a recorder.
    std::optional<FlightRecorderSnapshot> snapshot;
  };

  explicit FlightRecorderPoller(std::string path);

  // Request() asks for a reading (ReadingThread); done() >= asked(): every one asked for has
  // finished.
  uint64_t done() const;
  Reading Take();

 private:
  struct Found;  // what the readings published, shared with the thread
  FlightRecorderPoller(std::string path, std::shared_ptr<Found> found);
  // A reading: opens the recorder unless an earlier one did, and snapshots it into `found`.
  static Read ReadInto(std::shared_ptr<Found> found, std::string path);
  std::shared_ptr<Found> found_;
};

}  // namespace cohort::agent
