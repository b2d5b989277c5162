// LatestFileWriter keeps one file durably at the newest text it was given, writing on a thread of
// its own (ReplaceFileDurably: a temp file, fsync, rename, fsync of the directory), so that a disk
// slow to fsync (replicas writing gigabytes of checkpoints beside it) never stalls its caller: the
// agent's loop, whose heartbeats a stall past --heartbeat-timeout would make its node LOST.
//
// Post(version, text) hands over a version; one that was not begun yet is replaced by a newer
// one (only the newest matters). Last() says how the latest finished write went. Flush() waits
// until what was posted is written (or failed); the destructor flushes, so what was posted before
// a clean exit is on the disk. A crash before a write finishes leaves the file as it was.
//
// Thread safety: Post, Last and Flush may be called from any thread.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/status.h"

namespace cohort::agent {

class LatestFileWriter {
 public:
  LatestFileWriter(std::string path, mode_t mode);
  ~LatestFileWriter();
  LatestFileWriter(const LatestFileWriter&) = delete;
  LatestFileWriter& operator=(const LatestFileWriter&) = delete;

  // Queues `text` as `version` (versions grow), replacing a text not yet begun.
  void Post(uint64_t version, std::string text);

  struct Written {
    uint64_t version = 0;
    Status status;
  };
  // The latest write that finished; nullopt before the first.
  std::optional<Written> Last() const;

  // Returns once nothing waits and nothing is being written.
  void Flush();

  const std::string& path() const { return path_; }

 private:
  void Loop();

  const std::string path_;
  const mode_t mode_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::pair<uint64_t, std::string>> waiting_;  // guarded by mu_
  bool writing_ = false;                                     // guarded by mu_
  bool stopping_ = false;                                    // guarded by mu_
  std::optional<Written> last_;                              // guarded by mu_
  std::thread thread_;
};

}  // namespace cohort::agent
