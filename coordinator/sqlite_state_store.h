// SqliteStateStore is the StateStore (coordinator/state_store.h has the contract) in one SQLite
// database file.
//
// Tables (the schema's version is PRAGMA user_version; Open migrates older databases):
//   meta(key, value)             store_id (also in the state dir's marker), created_ms,
//                                journal_imported (what an upgrade imported)
//   jobs                         one row per job: state, times, restarts, ports, study, spec_crc;
//                                indexed by state, by end time, by submit time and by seq
//   job_specs(job, spec_yaml, spec_crc)   the spec, written once (job rows change often)
//   replicas(job, name, ord, ...)         one row per replica; ord is its place in the job
//   events(job, pos, time_ms, message)    pos counts from the job's first event ever (a job keeps
//                                         its latest 1000)
//   studies(name, spec_yaml, spec_crc, create_time_ms, end_time_ms)
//   study_events(study, pos, kind, trial, body)   a study's history, pos from 0; body is the
//                                                 event as StudyController writes it
//   trials(study, trial_id, job, parameters, ended, succeeded, message)   kept from the events
//   node_admin(node_id, state, labels, gpus)   what an admin set on a node: its cordon or drain
//                                ("", "cordoned", "draining"), its label edits ("gpu=h100,zone-",
//                                common/node_label_edits.h) and its GPUs cordoned alone ("3,5");
//                                a damaged row is dropped at Load with an error logged
//   job_metrics(job, step, time_ms, tag, replica, value)   training metrics
//                                (coordinator/training_metrics.h); value as shortest round-trip
//                                text; a row that fails its CRC is dropped at Load with an error
//                                logged (training metrics never stop a start); a damaged database
//                                salvaged with --accept-damaged-state keeps none
// Every row carries a CRC-32 of its columns (row_crc) and every spec a CRC-32 of its text
// (spec_crc). Load verifies them, runs PRAGMA integrity_check, and checks each job's shape (its
// replicas are those its spec makes; its events are contiguous) and each study's (events
// contiguous from 0). Studies are loaded as one full record each, rebuilt from study_events.
//
// Writing: WAL mode with synchronous=FULL (a Commit is on disk when it returns Ok) and exclusive
// locking (the WAL index lives in this process's memory: reading needs no free disk space, and a
// second process opening the database is refused as busy). Commit writes only what changed: the
// store remembers the CRC of every row it holds and compares.
//
// Damage: without accept_damaged_state, Load returns kDataLoss naming the problems (the first ten
// and a count). With it, what verifies is kept (a job with a damaged row, spec or replica is
// dropped; a damaged event is dropped from its job; a damaged study is dropped), each drop is
// logged and listed, the damaged file is renamed <path>.damaged-<ms> (its WAL too), and a new
// database holding what was kept, with the same store id, takes its place.
//
// Thread safety: not thread-safe. Ownership: holds the database connection.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/sqlite_db.h"
#include "coordinator/state_store.h"

namespace cohort::coordinator {

class SqliteStateStore : public StateStore {
 public:
  // The schema, step by step (MigrateSchema).
  static std::span<const SchemaStep> Schema();

  // Opens the database at `path`, sets it up (WAL, synchronous=FULL, exclusive locking) and
  // migrates its schema. A missing or empty database is created with `new_store_id` when that is
  // not empty, else it is kNotFound. A file that is not a database is kDataLoss.
  static StatusOr<std::unique_ptr<SqliteStateStore>> Open(const std::string& path,
                                                          const StateStoreOptions& options,
                                                          const std::string& new_store_id);

  StatusOr<StoredState> Load() override;
  Status Commit(const StateChanges& changes) override;
  // Commit that also sets `meta` values in the same transaction.
  Status CommitWithMeta(const StateChanges& changes,
                        const std::map<std::string, std::string>& meta);
  StatusOr<std::vector<JobRecord>> LoadJobs(const std::set<std::string>& names) override;
  StatusOr<std::vector<std::string>> LoadStudies() override;
  StatusOr<std::vector<JobSummary>> ListJobs(const JobQuery& query) override;
  // A copy through this store's own connection (SqliteCopy).
  StatusOr<std::unique_ptr<StoreCopy>> BeginCopy(const std::string& path,
                                                 int pages_per_step) override;
  std::string Describe() const override { return "SQLite database " + path_; }

  const std::string& store_id() const { return store_id_; }
  // A value of the meta table ("" when absent).
  StatusOr<std::string> Meta(const std::string& key);
  Status SetMeta(const std::string& key, const std::string& value);
  // Lines Load adds to StoredState::dropped (what the state dir's rules dropped before opening).
  void AddDropped(std::vector<std::string> lines);

 private:
  // What the store holds of one job, as CRCs: what Commit compares against.
  struct JobImage {
    uint32_t row_crc = 0;
    uint32_t spec_crc = 0;
    std::map<std::string, uint32_t> replicas;  // name -> row crc
    int64_t event_base = 0;                    // pos of events[0]
    std::vector<uint32_t> events;
  };
  struct StudyImage {
    uint32_t row_crc = 0;
    int64_t events = 0;
  };
  // A job as read back, with what is wrong with it.
  struct ReadJob {
    JobRecord job;
    JobImage image;
    std::vector<std::string> fatal;    // the job cannot be used
    std::vector<std::string> partial;  // events dropped; the job can be kept
    bool has_row = false;
    bool has_spec = false;
  };
  struct ReadStudy {
    std::string record;
    StudyImage image;
    std::vector<std::string> fatal;
    bool has_row = false;
  };
  struct ReadAllResult {
    std::map<uint64_t, std::string> order;  // seq -> name, for submit order
    std::map<std::string, ReadJob> jobs;
    std::map<std::string, ReadStudy> studies;
    std::vector<std::string> problems;  // table-level: integrity_check, unreadable tables
  };

  SqliteStateStore(std::string path, std::unique_ptr<SqliteDb> db, StateStoreOptions options)
      : path_(std::move(path)), db_(std::move(db)), options_(options) {}
  Status Prepare();

  ReadAllResult ReadAll();
  void ReadJobRows(SqliteStatement& st, std::map<std::string, ReadJob>& jobs,
                   std::map<uint64_t, std::string>* order, std::vector<std::string>& problems);
  void ReadSpecRows(SqliteStatement& st, std::map<std::string, ReadJob>& jobs,
                    std::vector<std::string>& problems);
  void ReadReplicaRows(SqliteStatement& st, std::map<std::string, ReadJob>& jobs,
                       std::vector<std::string>& problems);
  void ReadEventRows(SqliteStatement& st, std::map<std::string, ReadJob>& jobs,
                     std::vector<std::string>& problems);
  static void FinishJob(const std::string& name, ReadJob& r);
  // FinishJob for each, on every core when there are many.
  static void FinishJobs(std::map<std::string, ReadJob>& jobs);
  StatusOr<std::vector<JobRecord>> Salvage(ReadAllResult& all, std::vector<std::string>& dropped,
                                           std::vector<std::string>& studies);

  Status WriteJob(const JobRecord& job, std::unordered_map<std::string, JobImage>& pending);
  Status WriteStudyRecord(const std::string& record, std::map<std::string, StudyImage>& pending);
  // coordinator/sqlite_training_metrics.cc
  Status WriteTrainingMetric(const TrainingMetric& m);
  StatusOr<std::vector<TrainingMetric>> ReadTrainingMetrics();
  // coordinator/sqlite_admin_rows.cc: node_admin rows, and a deleted job's rows in every table.
  Status WriteNodeSettings(const std::string& node_id, const NodeSettings& settings);
  StatusOr<std::map<std::string, NodeSettings>> ReadNodeSettings();
  Status DeleteJobRows(const std::string& job);
  // Stores `event` of `node_id` and drops that node's events older than its newest
  // kNodeEventsKept.
  Status WriteNodeEvent(const std::string& node_id, const NodeEvent& event);
  Status DeleteNodeEvents(const std::string& node_id);
  // Each node's events, oldest first; a row that does not verify is dropped (logged).
  StatusOr<std::map<std::string, std::vector<NodeEvent>>> ReadNodeEvents();

  std::string path_;
  std::unique_ptr<SqliteDb> db_;
  StateStoreOptions options_;
  std::string store_id_;
  std::vector<std::string> dropped_before_load_;
  std::unordered_map<std::string, JobImage> jobs_;
  std::map<std::string, StudyImage> studies_;

  // Statements of the write path, prepared once.
  struct Statements {
    SqliteStatement begin, commit;
    SqliteStatement upsert_job, upsert_spec, upsert_replica, delete_replica;
    SqliteStatement upsert_event, delete_events_before, delete_events_from;
    SqliteStatement upsert_study, insert_study_event, insert_trial, select_trial, end_trial;
  };
  std::unique_ptr<Statements> st_;
  std::unique_ptr<SqliteStatement> insert_training_metric_;  // prepared on first use
};

}  // namespace cohort::coordinator
