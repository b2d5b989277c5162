// MetricFileReader reads one attempt's $CLOUD_ML_HP_METRIC_FILE on a thread of its own, so that
// the agent loop never touches the job's output storage (typically an NFS export, where a hung
// server blocks stat, open and read forever; the loop would stop heartbeating and the
// coordinator would declare the node lost). The loop asks for a reading (Request) and later takes
// what the newest finished one found: the file's size for the hang watchdog's progress
// (agent/progress.h) and, when tailing (the chief of a tuning trial), its new lines in file order
// for the MetricForwarder (agent/metric_forwarder.h; common/hypertune.h's MetricFileTailer
// parses them). Nothing here waits for a reading.
//
// A reading is a stat of the file and, when tailing, one MetricFileTailer::Poll. Readings are
// numbered from 1; Request returns the number of a reading that starts after the call (one
// asked for while another waits to start is that one), so `done >= n` says that the file was read
// after the request that returned n. A reading that hangs holds only this thread: no later
// reading completes, so the progress probe sees the file as not growing (which is what the
// replica's output storage shows) and the forwarder sends nothing more, while the heartbeats
// and every other attempt go on.
//
// Thread safety: every method may be called from any thread. Lifetime: the destructor stops the
// thread without waiting (it is detached): a reading stuck in a hung mount keeps only the
// thread and its state alive until it returns, so neither the attempt's end nor the agent's
// shutdown waits for it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/hypertune.h"
#include "common/status.h"

namespace cohort::agent {

class MetricFileReader {
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
  ~MetricFileReader();
  MetricFileReader(const MetricFileReader&) = delete;
  MetricFileReader& operator=(const MetricFileReader&) = delete;

  const std::string& path() const { return path_; }
  // Asks for a reading; returns its number.
  uint64_t Request();
  // The newest reading asked for (Latest().done >= asked(): every one asked for has finished).
  uint64_t asked() const;
  Reading Latest() const;
  Lines Take();

 private:
  struct Shared;
  static void ReadLoop(std::shared_ptr<Shared> s);
  std::string path_;
  std::shared_ptr<Shared> shared_;
};

// Test seam: `hook` is called with the file's path at the start of every reading, on the
// reader's thread; a test holds it there, standing in for a hung output storage. Empty: none.
void SetMetricFileReadHookForTesting(std::function<void(const std::string& path)> hook);

}  // namespace cohort::agent
