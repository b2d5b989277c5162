// StateBackups keeps copies of the coordinator's state store in a backup directory (--backup-dir,
// README "Backups"): every `every_ms`, and when an admin asks (RequestNow), the loop copies the
// store a few MiB a pass (StateStore::BeginCopy: a consistent copy that never holds a pass up),
// then a worker thread checks the copy (CheckStoreCopy), fsyncs it, renames it to its final name,
// fsyncs the directory and removes the oldest backups beyond `keep`. A backup that fails (a full
// disk, an unwritable or missing directory, a copy that does not check) is reported, counted and
// its partial file removed; the next try is min(every, 1 min) later. A backup never stops or fails
// the coordinator.
//
// Names: state-20261205T171500.123Z.db (the UTC time it began; sorts by time). A copy in progress
// is .state-<time>.db.partial; partial files a crash left are removed at start. Only files of
// these two forms are ever removed from the directory: one directory per coordinator.
// Schedule: the first backup is due `every_ms` after the newest one already in the directory (at
// once when there is none), so that restarts neither multiply backups nor put them off.
//
// Thread safety: one thread (the loop) calls it; the worker touches only the finished copy and the
// directory. Lifetime: must be destroyed before the StateStore it copies (its copy in progress
// reads the store's connection); destruction waits for a worker still finishing.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/state_store.h"

namespace cohort::coordinator {

struct StateBackupOptions {
  std::string dir;  // empty: no backups
  int64_t every_ms = 3'600'000;
  int keep = 24;
  int pages_per_step = kStoreCopyPagesPerStep;
};

// One backup, ended.
struct StateBackupResult {
  bool ok = false;
  std::string path;   // the backup (when ok)
  std::string error;  // why it failed (when not ok)
  uint64_t bytes = 0;
  StoreCopyInfo info;
  int64_t started_ms = 0;
  int64_t ended_ms = 0;
  int kept = 0;            // backups in the directory after it (when ok)
  bool requested = false;  // asked for by RequestNow, not by the schedule
  uint64_t number = 0;     // its place among the backups this object began, from 1
};

// What /metrics shows.
struct StateBackupCounters {
  bool enabled = false;
  uint64_t succeeded = 0;
  uint64_t failed = 0;
  int64_t last_success_ms = 0;  // 0: none since this coordinator started, nor found in the dir
  uint64_t last_bytes = 0;
  int64_t last_duration_ms = 0;
};

class StateBackups {
 public:
  // Reads the directory (newest backup, partial files to remove) when options.dir is set.
  StateBackups(StateBackupOptions options, int64_t now_ms);
  ~StateBackups();
  StateBackups(const StateBackups&) = delete;
  StateBackups& operator=(const StateBackups&) = delete;

  bool enabled() const { return !options_.dir.empty(); }
  const StateBackupOptions& options() const { return options_; }
  // A backup starts at the next Step, or right after the one under way; its result says
  // `requested`. Ignored when not enabled.
  void RequestNow();
  // Moves backups on; call after each pass's Commit. Returns the backups that ended since the last
  // Step (for the loop to log and to answer those who asked).
  std::vector<StateBackupResult> Step(StateStore& store, int64_t now_ms);
  // Waits for the backup under way, if any, to end (tests, shutdown): steps `store` until then.
  std::vector<StateBackupResult> Finish(StateStore& store, int64_t now_ms);

  const StateBackupCounters& counters() const { return counters_; }
  int64_t next_due_ms() const { return next_due_ms_; }
  // How many backups were begun so far: a result whose `number` is greater began after this was
  // read.
  uint64_t begun() const { return begun_; }
  bool busy() const { return copy_ != nullptr || finishing_.valid(); }
  bool copying() const { return copy_ != nullptr; }

  // "state-20261205T171500.123Z.db" for a time in ms since the epoch; and back (nullopt for a name
  // of another form).
  static std::string FileName(int64_t ms);
  static std::optional<int64_t> TimeOfName(const std::string& name);

 private:
  void Begin(StateStore& store, int64_t now_ms);
  void Ended(StateBackupResult result, int64_t now_ms, std::vector<StateBackupResult>& out);

  StateBackupOptions options_;
  int64_t next_due_ms_ = 0;
  bool requested_ = false;
  // The backup under way: copying (copy_), then finishing on the worker (finishing_).
  std::unique_ptr<StoreCopy> copy_;
  std::string partial_;
  int64_t started_ms_ = 0;
  bool current_requested_ = false;
  std::future<StateBackupResult> finishing_;
  std::optional<StateBackupResult> pending_failure_;  // a Begin that failed, told by its Step
  StateBackupCounters counters_;
  uint64_t begun_ = 0;
};

}  // namespace cohort::coordinator
