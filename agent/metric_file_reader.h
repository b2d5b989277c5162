// MetricFileReader reads one attempt's $CLOUD_ML_HP_METRIC_FILE on a ReadingThread
// (agent/reading_thread.h), so that the agent loop never touches the job's output storage
// (typically an NFS export, where a hung server blocks stat, open and read forever). The loop
// asks for a reading (Request) and later takes what the newest finished one found: the file's
// size for the hang watchdog's progress (agent/progress.h) and, when tailing (the chief of a
// tuning trial), its new lines in file order for the MetricForwarder (agent/metric_forwarder.h;
// common/hypertune.h's MetricFileTailer parses them). Nothing here waits for a reading.
//
// A reading is a stat of the file and, when tailing, one MetricFileTailer::Poll; they are
// numbered as ReadingThread says, so `done >= n` says that the file was read after the request
// that returned n. A reading that hangs holds only the thread: no later reading completes, so the
// progress probe sees the file as not growing (which is what the replica's output storage shows)
// and the forwarder sends nothing more, while the heartbeats and every other attempt go on.
//
// Thread safety: every method may be called from any thread. Lifetime: as ReadingThread's, the
// destructor waits for no reading (SetReadingHookForTesting, there, holds readings in tests).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/reading_thread.h"
#include "common/hypertune.h"
#include "common/status.h"

namespace cohort::agent {

class MetricFileReader : public ReadingThread {
 public:
  // What the newest finished reading found.
  struct Reading {
    uint64_t done = 0;  // readings finished so far (the newest one's number)
    int64_t size = -1;  // the file's size then; -1: absent (or no reading yet)
  };
  // The lines read since the previous Take, and the readings finished when they were taken: every
  // line of readings 1..done is in (this Take's or an earlier one's).
  struct Lines {
    std::vector<MetricRecord> records;
    uint64_t done = 0;
    Status error;  // the newest reading's error (it read nothing); OK when it read the file
  };

  // tail: also read the file's new lines (else only its size).
  MetricFileReader(std::string path, bool tail);

  // Request() asks for a reading (ReadingThread); Latest().done >= asked(): every one asked for
  // has finished.
  Reading Latest() const;
  Lines Take();

 private:
  struct Found;  // what the readings published, shared with the thread
  MetricFileReader(std::string path, bool tail, std::shared_ptr<Found> found);
  // A reading: a stat of the file and, when tailing, its new lines, published into `found`.
  static Read ReadInto(std::shared_ptr<Found> found, std::string path, bool tail);
  std::shared_ptr<Found> found_;
};

}  // namespace cohort::agent
