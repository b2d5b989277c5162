// Journal is the coordinator's durable state: an append-only file of records, each
//   [u32 length, little endian][u32 crc32 (zlib) of the payload][payload bytes],
// plus an optional snapshot file in the same framing. The coordinator appends one record per
// changed object and calls Sync() (fdatasync) before it acknowledges the change to anyone.
//
// Recovery (Open):
//  - snapshot records come first, then journal records, in file order;
//  - a torn or corrupt LAST record of the journal (a crash mid-append) is cut off with a warning;
//  - a corrupt record in the MIDDLE stops replay there with an error logged: the records before it
//    are kept, the damaged journal is renamed to journal.corrupt-<ms> for inspection, and the kept
//    records are rewritten as a fresh snapshot so later appends are readable again;
//  - a snapshot that does not verify is an error (it is only ever replaced atomically).
// Compaction (Compact): the caller hands the complete current state as records; they are written
// to snapshot.tmp, fsynced, renamed over snapshot (directory fsynced), then the journal is
// truncated. Payloads must be idempotent upserts: after a crash between the rename and the
// truncation, replaying the old journal on top of the new snapshot yields the same state.
//
// Thread safety: not thread-safe. Ownership: holds the journal's file descriptor.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cohort::coordinator {

struct JournalReplay {
  std::vector<std::string> records;  // snapshot records, then journal records
  bool truncated_tail = false;       // a torn/corrupt last record was cut off
  bool stopped_at_corruption = false;
  std::string corruption;            // what was wrong, when stopped_at_corruption
};

class Journal {
 public:
  // Largest payload accepted (a larger length field reads as corruption).
  static constexpr uint32_t kMaxRecordBytes = 64u << 20;

  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Creates `dir` if needed, replays <dir>/snapshot and <dir>/journal into `replay`.
  static StatusOr<std::unique_ptr<Journal>> Open(const std::string& dir, JournalReplay* replay);

  // Writes one record (not yet durable).
  Status Append(std::string_view payload);
  // Makes every appended record durable (fdatasync); a no-op when nothing is pending.
  Status Sync();
  // Replaces the snapshot with `records` and empties the journal (see the header comment).
  Status Compact(const std::vector<std::string>& records);

  // Records appended since the last snapshot (replayed ones included).
  size_t journal_records() const { return journal_records_; }
  const std::string& dir() const { return dir_; }

  // Frames one record (exposed for tests that build damaged files).
  static std::string Frame(std::string_view payload);

 private:
  Journal(std::string dir, int fd) : dir_(std::move(dir)), fd_(fd) {}
  std::string dir_;
  int fd_ = -1;
  size_t journal_records_ = 0;
  bool dirty_ = false;
};

}  // namespace cohort::coordinator
