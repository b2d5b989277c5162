// StateStore is where the coordinator keeps what must survive it: every job (with its replicas and
// events) and every study (its spec and its ordered events, from which its trials are rebuilt).
// Nodes are not stored: agents register again. The coordinator loads everything once at start
// (Load) and then commits each pass of its loop as one transaction (Commit: the jobs the pass
// changed and the study records it produced); replies and launches of the pass are sent only once
// Commit returned Ok, so nothing is ever acknowledged that is not durable (group commit).
//
// One implementation today: SqliteStateStore (coordinator/sqlite_state_store.h), a database in
// the state dir. The interface assumes no local files, so that a replicated store (etcd, for a
// highly available coordinator) can implement it: Commit is all-or-nothing, LoadJobs and
// LoadStudies read the last committed state.
//
// Errors: a failed Commit changed nothing in the store; its Status says why (kResourceExhausted
// when the disk is full, kUnavailable for other write failures) and the store stays usable, so
// the next Commit retries. Load refuses damaged state with kDataLoss naming what is damaged,
// unless the store was opened with accept_damaged_state (then it drops what is damaged and lists
// it in StoredState::dropped).
//
// Thread safety: not thread-safe; the coordinator loop calls it.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/state.h"
#include "coordinator/training_metrics.h"

namespace cohort::coordinator {

// What Load finds.
struct StoredState {
  std::vector<JobRecord> jobs;       // in submit order, specs parsed
  std::vector<std::string> studies;  // one full study record each, for StudyController::Replay
  // With accept_damaged_state: one line per job or study dropped (or kept in part) and why.
  std::vector<std::string> dropped;
  // Every training metric stored (coordinator/training_metrics.h), per job in arrival order.
  std::vector<TrainingMetric> training_metrics;
  // Every node an admin cordoned, drained or labelled (NodeRegistry::RestoreSettings).
  std::map<std::string, NodeSettings> node_settings;
  // Each node's newest events (at most kNodeEventsKept), oldest first (NodeRegistry::
  // RestoreEvents).
  std::map<std::string, std::vector<NodeEvent>> node_events;
};

// One pass of the coordinator loop.
struct StateChanges {
  std::vector<const JobRecord*> jobs;      // each stored whole (what did not change is skipped)
  std::vector<std::string> study_records;  // StudyController::TakeJournalRecords(), in order
  std::vector<TrainingMetric> training_metrics;  // stored once each (a resent one is ignored)
  // Node admin settings changed (NodeRegistry::PendingSettings); empty ones remove the node's.
  std::map<std::string, NodeSettings> node_settings;
  // Finished jobs deleted (`cohort delete`, retention): every row of each goes (its job row,
  // spec, replicas, events and training metrics). Applied after `jobs`.
  std::vector<std::string> deleted_jobs;
  // Node events that happened (NodeRegistry::PendingEvents), each stored once; a node's older
  // than its newest kNodeEventsKept go.
  std::vector<std::pair<std::string, NodeEvent>> node_events;
  // Nodes forgotten (`cohort forget`): their events go. Applied before `node_events` (a node
  // forgotten and registered again in one pass keeps only its new history).
  std::vector<std::string> forgotten_nodes;
  bool empty() const {
    return jobs.empty() && study_records.empty() && training_metrics.empty() &&
           node_settings.empty() && deleted_jobs.empty() && node_events.empty() &&
           forgotten_nodes.empty();
  }
};

// A history query (`cohort list --state S --since T --limit N`): newest first.
struct JobQuery {
  std::vector<JobState> states;  // empty: every state
  int64_t created_since_ms = 0;  // 0: any; else jobs submitted at or after
  int64_t ended_since_ms = 0;    // 0: any; else finished jobs that ended at or after
  size_t limit = 0;              // 0: no limit
};

struct JobSummary {
  std::string name;
  uint64_t seq = 0;
  JobState state = JobState::QUEUED;
  std::string message;
  int64_t create_time_ms = 0;
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;
  int restarts = 0;
  int replicas = 0;
  std::string study;
  std::string trial_id;
  std::string owner;  // JobRecord::owner
};

// A copy of the store being written into a new file while the coordinator goes on (a backup:
// coordinator/state_backups.h). Step it between passes, after Commit: the finished copy holds the
// store as of the last Step, every commit before it whole. An unfinished copy leaves its partial
// file for its owner to remove. Must be destroyed before the store it copies.
class StoreCopy {
 public:
  virtual ~StoreCopy() = default;
  // Copies a bounded share more (BeginCopy's pages_per_step): true once complete and its file
  // closed (not yet fsynced).
  virtual StatusOr<bool> Step() = 0;
};

// What a backup copies a pass: 4 MiB of 4 KiB pages, a few milliseconds.
inline constexpr int kStoreCopyPagesPerStep = 1024;

class StateStore {
 public:
  virtual ~StateStore() = default;

  // Everything stored, verified. Called once, before the first Commit.
  virtual StatusOr<StoredState> Load() = 0;
  // Stores the pass's changes as one transaction (see the header comment).
  virtual Status Commit(const StateChanges& changes) = 0;

  // The last committed version of the named jobs (names not stored are left out), and of every
  // study: what the coordinator reverts to when a Commit fails.
  virtual StatusOr<std::vector<JobRecord>> LoadJobs(const std::set<std::string>& names) = 0;
  virtual StatusOr<std::vector<std::string>> LoadStudies() = 0;

  virtual StatusOr<std::vector<JobSummary>> ListJobs(const JobQuery& query) = 0;

  // Starts a copy of the store into the new file `path` (StoreCopy), `pages_per_step` database
  // pages each Step.
  virtual StatusOr<std::unique_ptr<StoreCopy>> BeginCopy(const std::string& path,
                                                         int pages_per_step) = 0;

  // "SQLite database /var/lib/cohort/state.db", for logs.
  virtual std::string Describe() const = 0;
};

struct StateStoreOptions {
  // Start even though the state is damaged: drop what does not verify, listing every job dropped.
  bool accept_damaged_state = false;
};

// Opens the store of the state dir `state_dir` (created if missing) under the state dir's rules:
//  - <state_dir>/state.db is the database (SQLite, WAL mode; state.db-wal beside it);
//    <state_dir>/state-store.id is a marker written when the database is created, holding the
//    store's id (also kept inside the database).
//  - A database whose id differs from the marker's was swapped: refused.
//  - No database (missing or empty) while the marker exists: the database was lost; refused. No
//    database and no marker, but logs/ or jobs/ hold entries of earlier jobs: refused as well.
//    (--accept-damaged-state starts empty instead, listing the jobs known from logs/ and jobs/.)
//  - A journal of an earlier version (<state_dir>/journal, snapshot) and no database: imported
//    once, in one transaction; the files are then renamed journal.pre-sqlite and
//    snapshot.pre-sqlite. A journal that does not verify is refused like a damaged database.
//  - Otherwise (an empty state dir) a new store is created.
// Every refusal is kDataLoss (or kFailedPrecondition for a database of a newer schema) with a
// message naming the files and what to do.
StatusOr<std::unique_ptr<StateStore>> OpenStateStore(const std::string& state_dir,
                                                     const StateStoreOptions& options);

// What a copy of a store (a backup) holds, as its own checks say.
struct StoreCopyInfo {
  std::string store_id;
  int64_t schema_version = 0;
  int64_t jobs = 0;
  int64_t studies = 0;
};

// Checks a copy of a store quickly: SQLite's integrity_check, a store id, a schema this program
// can read. kDataLoss naming `path` and what is wrong; kFailedPrecondition for a newer schema.
// Opens the file read-write (it may change its journal files): a file of its own, not a running
// coordinator's database.
StatusOr<StoreCopyInfo> CheckStoreCopy(const std::string& path);

// `cohort-coordinator --restore-state FILE`: makes the copy of a store at `backup` the state dir's
// database. The coordinator must be stopped (a database still held by one is kUnavailable). The
// backup is copied into the state dir (fsynced) and checked there as the coordinator's start will
// load it, every row's CRC and every job's shape (its schema is brought up to date in the copy);
// only then does the current database (with its -wal) move aside, to state.db.replaced-<ms>, and
// the copy take its place, with the marker naming the backup's store. A backup that does not
// verify changes nothing (kDataLoss naming what is wrong). When run as root on a state dir owned
// by another user (systemd's cohort), the new files are given to that user. Returns what it did,
// one line each, for the admin.
StatusOr<std::vector<std::string>> RestoreStateStore(const std::string& state_dir,
                                                     const std::string& backup);

}  // namespace cohort::coordinator
