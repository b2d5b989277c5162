// ReadingThread runs one attempt's readings of a file that may lie on storage able to hang (the
// job's output storage, typically an NFS export, or any path a job's spec names: a FUSE mount,
// where a hung server blocks stat, open, read and page faults forever) on a thread of its own, so
// that the agent loop never touches that file: were the loop to hang, it would stop heartbeating
// and the coordinator would declare the node lost. The loop asks for a reading (Request) and
// later takes what the newest finished one published; nothing here waits for a reading. It is
// the one mechanism behind MetricFileReader (agent/metric_file_reader.h, the metric file) and
// FlightRecorderPoller (agent/flight_recorder_poller.h, the flight recorder), which each say what
// a reading is and keep what it found.
//
// Readings are numbered from 1; Request returns the number of a reading that starts after the
// call (one asked for while another waits to start is that one), so a reading numbered n or
// later read the file after the request that returned n. A reading that hangs holds only this
// thread: no later reading starts, so its owner keeps showing what the newest finished one found,
// while the heartbeats and every other attempt go on.
//
// A reader of one kind is a ReadingThread (it derives from it, so Request, asked and path are its
// own) constructed with its kind of reading, which publishes into state the reader shares with
// the thread.
//
// Thread safety: Request and asked may be called from any thread; `read` runs on the thread only.
// Lifetime: the destructor stops the thread without waiting (it is detached): a reading stuck in
// a hung mount keeps only the thread and what `read` holds alive until it returns, so neither the
// attempt's end nor the agent's shutdown waits for it. `read` is destroyed on the thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace cohort::agent {

class ReadingThread {
 public:
  // Performs reading `number` of `path` and publishes what it found (under a lock of its
  // owner's); it may block for as long as the storage does. Called on the thread alone, one
  // reading at a time, in order, so it may keep state of its own between readings.
  using Read = std::function<void(uint64_t number)>;

  ReadingThread(const ReadingThread&) = delete;
  ReadingThread& operator=(const ReadingThread&) = delete;

  const std::string& path() const { return path_; }
  // Asks for a reading; returns its number.
  uint64_t Request();
  // The newest reading asked for.
  uint64_t asked() const;

 protected:
  ReadingThread(std::string path, Read read);
  ~ReadingThread();  // a reader is destroyed as itself, never as a ReadingThread

 private:
  struct Shared;
  static void Loop(std::shared_ptr<Shared> s, Read read);
  std::string path_;
  std::shared_ptr<Shared> shared_;
};

// Test seam: `hook` is called with the file's path at the start of every reading of every
// ReadingThread, on its thread; a test holds it there, standing in for a hung storage. Empty: none.
void SetReadingHookForTesting(std::function<void(const std::string& path)> hook);

}  // namespace cohort::agent
