// LogStore keeps replica output as the agents stream it: one file per attempt,
// <root>/<job>/<replica>/attempt-<n>.log. A chunk is stored only when its offset equals the bytes
// already held, so re-sent chunks are harmless and nothing is stored twice; the caller acks with
// the size held and the agent continues from there. Files are written, not fsynced: a coordinator
// crash loses nothing the kernel accepted; a host crash may lose the tail, which the agent resends
// only if it has not been acked (an accepted trade-off for log volume).
//
// Reads serve one attempt, or (attempt -1) every attempt 0..max_attempt that has a file,
// concatenated, each preceded by the line "==== <replica> attempt <n> ====\n"; offsets are into
// that concatenation.
//
// Arrival times: each stored chunk also appends a record (its offset in the file, the time it was
// stored) to <root>/<job>/<replica>/attempt-<n>.times, beside the log and as durable as it (written
// after the bytes, not fsynced). A read asked for times returns marks: from each mark's offset up
// to the next mark, the bytes arrived at the mark's time; an attempt's header line carries the
// time of its first chunk. Bytes whose record was lost (a crash between the two writes) or that
// were stored before times were kept read as arriving with the mark before them, or with none.
//
// Names must already be validated by the caller (known job, known replica): they become paths.
// Thread safety: not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/status.h"

namespace cohort::coordinator {

class LogStore {
 public:
  explicit LogStore(std::string root) : root_(std::move(root)) {}

  // Stores `data` at `offset` when offset == size held, as arrived at `arrival_ms` (ms since the
  // epoch); returns the size held afterwards.
  StatusOr<uint64_t> Append(const std::string& job, const std::string& replica, int attempt,
                            uint64_t offset, std::string_view data, int64_t arrival_ms);
  uint64_t Size(const std::string& job, const std::string& replica, int attempt);
  void MarkEof(const std::string& job, const std::string& replica, int attempt);
  bool Eof(const std::string& job, const std::string& replica, int attempt) const;

  struct Mark {
    uint64_t offset = 0;  // into the read's offsets (the concatenation for attempt -1)
    int64_t time_ms = 0;
    bool operator==(const Mark& o) const { return offset == o.offset && time_ms == o.time_ms; }
  };
  struct ReadResult {
    std::string data;
    uint64_t next_offset = 0;
    bool at_end = false;  // next_offset is the end of what is held
    // With `with_times`: ascending, the first at or before the read's offset when one is known,
    // none at or past next_offset.
    std::vector<Mark> marks;
  };
  // attempt >= 0: that attempt's file; attempt -1: attempts 0..max_attempt concatenated.
  StatusOr<ReadResult> Read(const std::string& job, const std::string& replica, int attempt,
                            int max_attempt, uint64_t offset, uint32_t max_bytes,
                            bool with_times = false);

  std::string PathOf(const std::string& job, const std::string& replica, int attempt) const;
  std::string TimesPathOf(const std::string& job, const std::string& replica, int attempt) const;

  // Stack dumps of an attempt (DumpStacks/StackDump in the wire schema):
  // <root>/<job>/<replica>/attempt-<n>.stacks, each dump appended whole.
  Status AppendStacks(const std::string& job, const std::string& replica, int attempt,
                      std::string_view text);
  // Read like Read(): one attempt's dumps, or (attempt -1) those of attempts 0..max_attempt that
  // have any, each after the header line.
  StatusOr<ReadResult> ReadStacks(const std::string& job, const std::string& replica, int attempt,
                                  int max_attempt, uint64_t offset, uint32_t max_bytes) const;

  // Removes everything held of `job` (<root>/<job>/: every replica's logs, times and stack
  // dumps) and forgets it. Nothing held is not an error.
  Status DeleteJob(const std::string& job);

 private:
  std::string root_;
  std::map<std::string, uint64_t> sizes_;  // path -> bytes held
  std::set<std::tuple<std::string, std::string, int>> eof_;
  std::set<std::string> times_checked_;  // times files cut to whole records since start
};

}  // namespace cohort::coordinator
