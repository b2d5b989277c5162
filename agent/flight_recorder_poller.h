// FlightRecorderPoller reads one attempt's flight recorders (common/flight_recorder.h: the file
// COHORT_FLIGHT_RECORDER names, which agent/replica_env.h puts in the attempt's dir unless the
// job's pool env points it elsewhere: NFS, a FUSE mount, anything a spec can name) on a
// ReadingThread (agent/reading_thread.h), so that the agent loop never opens or reads them: a
// hung storage would hang the loop, and a job's spec must never stall the daemon. The loop asks
// for a reading (Request) and takes the newest finished one's snapshots for the hang watchdog's
// progress (agent/progress.h). Nothing here waits for a reading.
//
// One file per rank. A replica may run several ranks that inherit the one path (torchrun inside
// the replica): the first takes "<path>", each other the first of "<path>.1", "<path>.2", ... that
// no live process holds (FlightRecorder::ForProcess), so a fresh attempt's files are numbered from
// 0 without a gap. A reading reads "<path>" and then "<path>.k" for k = 1, 2, ... up to the first
// that does not exist (at most kFlightRecorderMaxSiblings).
//
// A reading opens each file no earlier reading opened (FlightRecorderFileReader::Open) and takes a
// Snapshot of each; the open readers are the thread's, kept from one reading to the next, and one
// whose snapshot fails (the file was emptied or rewritten) is opened anew by the next reading.
// A file whose writer set it up before `not_before_ns` (FlightClockNs) is left over from before
// the attempt (a path on shared storage that an earlier attempt's process used and exited): its
// snapshots are not handed out until a process of this attempt takes the file over. A file set up
// on another host has its anchor on that host's monotonic clock, so the wall clock must say "after
// the launch" too (within a second: this attempt's writers run on this host). Readings are
// numbered as ReadingThread says, so `done >= n` says that the recorders were read after the
// request that returned n. A reading that hangs holds only the thread: no later snapshot comes,
// so the probe sees no progress of the replica's collectives (none is seen), while the heartbeats
// and every other attempt go on.
//
// Thread safety: every method may be called from any thread. Lifetime: as ReadingThread's, the
// destructor waits for no reading; the readers are closed on the thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/reading_thread.h"
#include "common/flight_recorder.h"

namespace cohort::agent {

class FlightRecorderPoller : public ReadingThread {
 public:
  // One rank's file and what a reading saw in it.
  struct FileSnapshot {
    int file = 0;  // 0: "<path>"; k: "<path>.k"
    FlightRecorderSnapshot snapshot;
  };
  struct Reading {
    uint64_t done = 0;  // readings finished so far (the newest one's number)
    // The newest one's snapshots, by file, handed out by one Take only (a later Take of the same
    // reading has none). A file is missing when that reading could not snapshot it: not created
    // (yet), not a recorder, left over from before the attempt, or changing under the reader.
    std::vector<FileSnapshot> snapshots;
  };

  FlightRecorderPoller(std::string path, int64_t not_before_ns);

  // Request() asks for a reading (ReadingThread); done() >= asked(): every one asked for has
  // finished.
  uint64_t done() const;
  Reading Take();

  // The path of file `file` of recorder `path`: "<path>", or "<path>.<file>".
  static std::string FilePath(const std::string& path, int file);

 private:
  struct Found;  // what the readings published, shared with the thread
  FlightRecorderPoller(std::string path, int64_t not_before_ns, std::shared_ptr<Found> found);
  // A reading: opens the recorders no earlier one did, and snapshots them into `found`.
  static Read ReadInto(std::shared_ptr<Found> found, std::string path, int64_t not_before_ns);
  std::shared_ptr<Found> found_;
};

}  // namespace cohort::agent
