#include "coordinator/sqlite_state_store.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/study_spec.h"
#include "coordinator/sqlite_rows.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr SchemaStep kSchema[] = {
    {1, R"sql(
CREATE TABLE meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE jobs (
  name TEXT NOT NULL UNIQUE,
  seq INTEGER NOT NULL,
  state INTEGER NOT NULL,
  message TEXT NOT NULL,
  create_time_ms INTEGER NOT NULL,
  queued_since_ms INTEGER NOT NULL,
  start_time_ms INTEGER NOT NULL,
  end_time_ms INTEGER NOT NULL,
  restarts INTEGER NOT NULL,
  output_dir TEXT NOT NULL,
  trial_id TEXT NOT NULL,
  study TEXT NOT NULL,
  master_port INTEGER NOT NULL,
  bootstrap_port INTEGER NOT NULL,
  spec_crc INTEGER NOT NULL,
  row_crc INTEGER NOT NULL
);
CREATE INDEX jobs_by_seq ON jobs (seq);
CREATE INDEX jobs_by_state ON jobs (state, seq);
CREATE INDEX jobs_by_end_time ON jobs (end_time_ms);
CREATE INDEX jobs_by_create_time ON jobs (create_time_ms);
CREATE TABLE job_specs (
  job TEXT PRIMARY KEY,
  spec_yaml TEXT NOT NULL,
  spec_crc INTEGER NOT NULL
);
CREATE TABLE replicas (
  job TEXT NOT NULL,
  name TEXT NOT NULL,
  ord INTEGER NOT NULL,
  role TEXT NOT NULL,
  idx INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  launched INTEGER NOT NULL,
  state INTEGER NOT NULL,
  node_id TEXT NOT NULL,
  last_node TEXT NOT NULL,
  gpus TEXT NOT NULL,
  port INTEGER NOT NULL,
  exit_code INTEGER NOT NULL,
  signal INTEGER NOT NULL,
  message TEXT NOT NULL,
  stop_requested INTEGER NOT NULL,
  state_time_ms INTEGER NOT NULL,
  row_crc INTEGER NOT NULL,
  PRIMARY KEY (job, name)
) WITHOUT ROWID;
CREATE INDEX replicas_by_node ON replicas (node_id);
CREATE TABLE events (
  job TEXT NOT NULL,
  pos INTEGER NOT NULL,
  time_ms INTEGER NOT NULL,
  message TEXT NOT NULL,
  row_crc INTEGER NOT NULL,
  PRIMARY KEY (job, pos)
) WITHOUT ROWID;
CREATE TABLE studies (
  name TEXT PRIMARY KEY,
  spec_yaml TEXT NOT NULL,
  spec_crc INTEGER NOT NULL,
  create_time_ms INTEGER NOT NULL,
  end_time_ms INTEGER NOT NULL,
  row_crc INTEGER NOT NULL
);
CREATE TABLE study_events (
  study TEXT NOT NULL,
  pos INTEGER NOT NULL,
  kind TEXT NOT NULL,
  trial TEXT NOT NULL,
  body TEXT NOT NULL,
  row_crc INTEGER NOT NULL,
  PRIMARY KEY (study, pos)
) WITHOUT ROWID;
CREATE TABLE trials (
  study TEXT NOT NULL,
  trial_id TEXT NOT NULL,
  job TEXT NOT NULL,
  parameters TEXT NOT NULL,
  ended INTEGER NOT NULL,
  succeeded INTEGER NOT NULL,
  message TEXT NOT NULL,
  row_crc INTEGER NOT NULL,
  PRIMARY KEY (study, trial_id)
) WITHOUT ROWID;
CREATE INDEX trials_by_job ON trials (job);
)sql"},
    {2, R"sql(
CREATE TABLE job_metrics (
  job TEXT NOT NULL,
  step INTEGER NOT NULL,
  time_ms INTEGER NOT NULL,
  tag TEXT NOT NULL,
  replica TEXT NOT NULL,
  value TEXT NOT NULL,
  row_crc INTEGER NOT NULL,
  PRIMARY KEY (job, step, time_ms, tag, replica)
) WITHOUT ROWID;
)sql"},
    {3, R"sql(
CREATE TABLE node_admin (
  node_id TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  row_crc INTEGER NOT NULL
) WITHOUT ROWID;
)sql"},
    // Owners (issue 16): '' for jobs and studies stored before, whose row checksums stay valid
    // (an empty owner is not part of the checksum: sqlite_rows.h).
    {4, R"sql(
ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE studies ADD COLUMN owner TEXT NOT NULL DEFAULT '';
)sql"},
    // A replica's cause_signal (torchrun's worker killed first): 0 for replicas stored before,
    // whose row checksums stay valid (a zero is not part of the checksum).
    {5, R"sql(
ALTER TABLE replicas ADD COLUMN cause_signal INTEGER NOT NULL DEFAULT 0;
)sql"},
    // A replica's fenced_until_ms (lost with its node while fencing is on): 0 for replicas stored
    // before, whose row checksums stay valid.
    {6, R"sql(
ALTER TABLE replicas ADD COLUMN fenced_until_ms INTEGER NOT NULL DEFAULT 0;
)sql"},
    // A replica's idle flag (a worker an elastic job runs without): 0 for replicas stored before,
    // whose row checksums stay valid.
    {7, R"sql(
ALTER TABLE replicas ADD COLUMN idle INTEGER NOT NULL DEFAULT 0;
)sql"},
    // A job's suspended_ms (time spent suspended): 0 for jobs stored before, whose row checksums
    // stay valid.
    {8, R"sql(
ALTER TABLE jobs ADD COLUMN suspended_ms INTEGER NOT NULL DEFAULT 0;
)sql"},
    // A node's label edits (`cohort label`): '' for rows stored before, whose row checksums stay
    // valid (no edits are not part of the checksum).
    {9, R"sql(
ALTER TABLE node_admin ADD COLUMN labels TEXT NOT NULL DEFAULT '';
)sql"},
    // A node's GPUs cordoned alone (`cohort cordon NODE --gpu N`): '' for rows stored before,
    // whose row checksums stay valid (none is not part of the checksum).
    {10, R"sql(
ALTER TABLE node_admin ADD COLUMN gpus TEXT NOT NULL DEFAULT '';
)sql"},
    // When a job first ran (JobRecord::first_running_ms): 0 for jobs stored before, whose row
    // checksums stay valid; loaded, such a job takes it from its first "running" event.
    {11, R"sql(
ALTER TABLE jobs ADD COLUMN first_running_ms INTEGER NOT NULL DEFAULT 0;
)sql"},
    // The note kept with a node's cordon (CordonNote: why, by whom, since when): '' and 0 for
    // rows stored before, whose row checksums stay valid (no note is not part of the checksum).
    {12, R"sql(
ALTER TABLE node_admin ADD COLUMN note_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE node_admin ADD COLUMN note_by TEXT NOT NULL DEFAULT '';
ALTER TABLE node_admin ADD COLUMN note_ms INTEGER NOT NULL DEFAULT 0;
)sql"},
    // Each node's newest events (NodeEvent): its history across coordinator restarts.
    {13, R"sql(
CREATE TABLE node_events (
  node_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  time_ms INTEGER NOT NULL,
  text TEXT NOT NULL,
  row_crc INTEGER NOT NULL,
  PRIMARY KEY (node_id, seq)
) WITHOUT ROWID;
)sql"},
};

}  // namespace

std::span<const SchemaStep> SqliteStateStore::Schema() { return kSchema; }

// ---- open -----------------------------------------------------------------------------------

StatusOr<std::unique_ptr<SqliteStateStore>> SqliteStateStore::Open(
    const std::string& path, const StateStoreOptions& options, const std::string& new_store_id) {
  std::error_code ec;
  bool existed = fs::exists(path, ec) && fs::file_size(path, ec) > 0;
  if (!existed && new_store_id.empty()) return NotFound("no database at " + path);
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db, SqliteDb::Open(path, true));
  // Exclusive locking before the first access: the WAL index is kept in memory (no -shm file).
  COHORT_RETURN_IF_ERROR(db->Exec("PRAGMA locking_mode = EXCLUSIVE"));
  COHORT_ASSIGN_OR_RETURN(std::string mode, db->QueryText("PRAGMA journal_mode = WAL"));
  if (mode != "wal") {
    return Unavailable("the database " + path + " cannot use WAL mode (journal_mode is " + mode +
                       ")");
  }
  COHORT_RETURN_IF_ERROR(db->Exec("PRAGMA synchronous = FULL"));
  COHORT_RETURN_IF_ERROR(db->Exec("PRAGMA journal_size_limit = 67108864"));
  COHORT_RETURN_IF_ERROR(db->Exec("PRAGMA cache_size = -32768"));

  COHORT_ASSIGN_OR_RETURN(int64_t version, db->QueryInt("PRAGMA user_version"));
  COHORT_ASSIGN_OR_RETURN(int64_t tables, db->QueryInt("SELECT COUNT(*) FROM sqlite_schema"));
  bool empty = version == 0 && tables == 0;
  if (empty && new_store_id.empty()) return NotFound("the database " + path + " is empty");

  std::unique_ptr<SqliteStateStore> store(new SqliteStateStore(path, std::move(db), options));
  if (empty) {
    // A new database gets its whole schema and its id in one transaction: a crash leaves it
    // either empty or complete.
    COHORT_RETURN_IF_ERROR(store->db_->Exec("BEGIN IMMEDIATE"));
    Status s;
    for (const SchemaStep& step : kSchema) {
      if (s.ok()) s = store->db_->Exec(step.sql);
    }
    if (s.ok())
      s = store->db_->Exec("PRAGMA user_version = " +
                           std::to_string(kSchema[std::size(kSchema) - 1].version));
    if (s.ok()) s = store->SetMeta("store_id", new_store_id);
    if (s.ok()) s = store->SetMeta("created_ms", std::to_string(rows::NowMs()));
    if (s.ok()) s = store->db_->Exec("COMMIT");
    if (!s.ok()) {
      store->db_->RollbackIfOpen();
      return s.WithContext("creating the state database");
    }
  } else {
    COHORT_RETURN_IF_ERROR(MigrateSchema(*store->db_, kSchema));
  }
  COHORT_ASSIGN_OR_RETURN(store->store_id_, store->Meta("store_id"));
  if (store->store_id_.empty()) {
    return DataLoss("the database " + path + " has no store id (its meta table is damaged)");
  }
  COHORT_RETURN_IF_ERROR(store->Prepare());
  return store;
}

Status SqliteStateStore::Prepare() {
  auto st = std::make_unique<Statements>();
  SqliteDb& db = *db_;
  COHORT_ASSIGN_OR_RETURN(st->begin, db.Prepare("BEGIN IMMEDIATE"));
  COHORT_ASSIGN_OR_RETURN(st->commit, db.Prepare("COMMIT"));
  COHORT_ASSIGN_OR_RETURN(
      st->upsert_job,
      db.Prepare("INSERT INTO jobs (name, seq, state, message, create_time_ms, queued_since_ms, "
                 "start_time_ms, end_time_ms, restarts, output_dir, trial_id, study, master_port, "
                 "bootstrap_port, spec_crc, row_crc, owner, suspended_ms, first_running_ms) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "
                 "?17, ?18, ?19) "
                 "ON CONFLICT (name) DO UPDATE SET seq = ?2, state = ?3, message = ?4, "
                 "create_time_ms = ?5, queued_since_ms = ?6, start_time_ms = ?7, "
                 "end_time_ms = ?8, restarts = ?9, output_dir = ?10, trial_id = ?11, "
                 "study = ?12, master_port = ?13, bootstrap_port = ?14, spec_crc = ?15, "
                 "row_crc = ?16, owner = ?17, suspended_ms = ?18, first_running_ms = ?19"));
  COHORT_ASSIGN_OR_RETURN(
      st->upsert_spec,
      db.Prepare(
          "INSERT OR REPLACE INTO job_specs (job, spec_yaml, spec_crc) VALUES (?1, ?2, ?3)"));
  COHORT_ASSIGN_OR_RETURN(
      st->upsert_replica,
      db.Prepare("INSERT OR REPLACE INTO replicas (job, name, ord, role, idx, attempt, launched, "
                 "state, node_id, last_node, gpus, port, exit_code, signal, message, "
                 "stop_requested, state_time_ms, row_crc, cause_signal, fenced_until_ms, idle) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "
                 "?17, ?18, ?19, ?20, ?21)"));
  COHORT_ASSIGN_OR_RETURN(st->delete_replica,
                          db.Prepare("DELETE FROM replicas WHERE job = ?1 AND name = ?2"));
  COHORT_ASSIGN_OR_RETURN(
      st->upsert_event,
      db.Prepare("INSERT OR REPLACE INTO events (job, pos, time_ms, message, row_crc) VALUES "
                 "(?1, ?2, ?3, ?4, ?5)"));
  COHORT_ASSIGN_OR_RETURN(st->delete_events_before,
                          db.Prepare("DELETE FROM events WHERE job = ?1 AND pos < ?2"));
  COHORT_ASSIGN_OR_RETURN(st->delete_events_from,
                          db.Prepare("DELETE FROM events WHERE job = ?1 AND pos >= ?2"));
  COHORT_ASSIGN_OR_RETURN(
      st->upsert_study,
      db.Prepare("INSERT OR REPLACE INTO studies (name, spec_yaml, spec_crc, create_time_ms, "
                 "end_time_ms, row_crc, owner) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
  COHORT_ASSIGN_OR_RETURN(
      st->insert_study_event,
      db.Prepare("INSERT OR REPLACE INTO study_events (study, pos, kind, trial, body, row_crc) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  COHORT_ASSIGN_OR_RETURN(
      st->insert_trial,
      db.Prepare("INSERT OR REPLACE INTO trials (study, trial_id, job, parameters, ended, "
                 "succeeded, message, row_crc) VALUES (?1, ?2, ?3, ?4, 0, 0, '', ?5)"));
  COHORT_ASSIGN_OR_RETURN(
      st->end_trial,
      db.Prepare("UPDATE trials SET ended = 1, succeeded = ?3, message = ?4, row_crc = ?5 "
                 "WHERE study = ?1 AND trial_id = ?2"));
  COHORT_ASSIGN_OR_RETURN(
      st->select_trial,
      db.Prepare("SELECT job, parameters FROM trials WHERE study = ?1 AND trial_id = ?2"));
  st_ = std::move(st);
  return Status::Ok();
}

// ---- copies ---------------------------------------------------------------------------------

namespace {

class SqliteStoreCopy : public StoreCopy {
 public:
  SqliteStoreCopy(SqliteDb& source, std::unique_ptr<SqliteCopy> copy, int pages_per_step)
      : source_(source), copy_(std::move(copy)), pages_per_step_(pages_per_step) {}
  StatusOr<bool> Step() override {
    if (source_.in_transaction()) return false;  // a pass that failed to commit, not rolled back
    return copy_->Step(pages_per_step_);
  }

 private:
  SqliteDb& source_;
  std::unique_ptr<SqliteCopy> copy_;
  int pages_per_step_;
};

}  // namespace

StatusOr<std::unique_ptr<StoreCopy>> SqliteStateStore::BeginCopy(const std::string& path,
                                                                 int pages_per_step) {
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteCopy> copy, SqliteCopy::Begin(*db_, path));
  return std::unique_ptr<StoreCopy>(new SqliteStoreCopy(*db_, std::move(copy), pages_per_step));
}

StatusOr<StoreCopyInfo> CheckStoreCopy(const std::string& path) {
  auto opened = SqliteDb::Open(path, false);
  if (!opened.ok()) return opened.status();
  SqliteDb& db = **opened;
  auto bad = [&](const Status& s) {
    if (s.code() == StatusCode::kFailedPrecondition) return s;
    return DataLoss(path + " is not a whole copy of a state store: " + s.message());
  };
  auto check = db.QueryText("PRAGMA integrity_check");
  if (!check.ok()) return bad(check.status());
  if (*check != "ok") return bad(DataLoss("integrity_check says: " + *check));
  StoreCopyInfo info;
  auto version = db.QueryInt("PRAGMA user_version");
  if (!version.ok()) return bad(version.status());
  info.schema_version = *version;
  const int latest = kSchema[std::size(kSchema) - 1].version;
  if (info.schema_version > latest) {
    return FailedPrecondition(path + " has schema version " + std::to_string(info.schema_version) +
                              ", newer than this program knows (" + std::to_string(latest) +
                              "): it was written by a newer cohort-coordinator");
  }
  if (info.schema_version < 1) return bad(DataLoss("it has no schema (user_version 0)"));
  auto id = db.QueryText("SELECT value FROM meta WHERE key = 'store_id'");
  if (!id.ok() || id->empty()) return bad(DataLoss("it has no store id"));
  info.store_id = *id;
  auto jobs = db.QueryInt("SELECT COUNT(*) FROM jobs");
  if (!jobs.ok()) return bad(jobs.status());
  info.jobs = *jobs;
  auto studies = db.QueryInt("SELECT COUNT(*) FROM studies");
  if (!studies.ok()) return bad(studies.status());
  info.studies = *studies;
  return info;
}

StatusOr<std::string> SqliteStateStore::Meta(const std::string& key) {
  COHORT_ASSIGN_OR_RETURN(SqliteStatement st,
                          db_->Prepare("SELECT value FROM meta WHERE key = ?1"));
  st.Bind(1, key);
  COHORT_ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? st.Text(0) : std::string();
}

Status SqliteStateStore::SetMeta(const std::string& key, const std::string& value) {
  COHORT_ASSIGN_OR_RETURN(SqliteStatement st,
                          db_->Prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)"));
  return st.RunWith(key, value);
}

void SqliteStateStore::AddDropped(std::vector<std::string> lines) {
  for (auto& l : lines) dropped_before_load_.push_back(std::move(l));
}

// ---- writing --------------------------------------------------------------------------------

Status SqliteStateStore::Commit(const StateChanges& changes) { return CommitWithMeta(changes, {}); }

Status SqliteStateStore::CommitWithMeta(const StateChanges& changes,
                                        const std::map<std::string, std::string>& meta) {
  if (changes.empty() && meta.empty()) return Status::Ok();
  std::unordered_map<std::string, JobImage> pending_jobs;
  std::map<std::string, StudyImage> pending_studies;
  Status s = st_->begin.Run();
  for (auto it = meta.begin(); s.ok() && it != meta.end(); ++it) s = SetMeta(it->first, it->second);
  for (size_t i = 0; s.ok() && i < changes.study_records.size(); ++i) {
    s = WriteStudyRecord(changes.study_records[i], pending_studies);
  }
  for (size_t i = 0; s.ok() && i < changes.jobs.size(); ++i) {
    s = WriteJob(*changes.jobs[i], pending_jobs);
  }
  for (size_t i = 0; s.ok() && i < changes.training_metrics.size(); ++i) {
    s = WriteTrainingMetric(changes.training_metrics[i]);
  }
  for (auto it = changes.node_settings.begin(); s.ok() && it != changes.node_settings.end(); ++it) {
    s = WriteNodeSettings(it->first, it->second);
  }
  for (size_t i = 0; s.ok() && i < changes.deleted_jobs.size(); ++i) {
    s = DeleteJobRows(changes.deleted_jobs[i]);
  }
  for (size_t i = 0; s.ok() && i < changes.forgotten_nodes.size(); ++i) {
    s = DeleteNodeEvents(changes.forgotten_nodes[i]);
  }
  for (size_t i = 0; s.ok() && i < changes.node_events.size(); ++i) {
    s = WriteNodeEvent(changes.node_events[i].first, changes.node_events[i].second);
  }
  if (s.ok()) s = st_->commit.Run();
  if (!s.ok()) {
    db_->RollbackIfOpen();
    return s;
  }
  for (auto& [name, image] : pending_jobs) jobs_[name] = std::move(image);
  for (const std::string& name : changes.deleted_jobs) jobs_.erase(name);
  for (auto& [name, image] : pending_studies) studies_[name] = image;
  return Status::Ok();
}

Status SqliteStateStore::WriteJob(const JobRecord& job,
                                  std::unordered_map<std::string, JobImage>& pending) {
  Statements& st = *st_;
  auto found = jobs_.find(job.name);
  const JobImage* old = found == jobs_.end() ? nullptr : &found->second;
  JobImage image;
  image.spec_crc = rows::TextCrc(job.spec_yaml);
  image.row_crc = rows::JobRowCrc(job, image.spec_crc);
  if (!old || old->spec_crc != image.spec_crc) {
    COHORT_RETURN_IF_ERROR(st.upsert_spec.RunWith(job.name, job.spec_yaml, image.spec_crc));
  }
  if (!old || old->row_crc != image.row_crc) {
    COHORT_RETURN_IF_ERROR(st.upsert_job.RunWith(
        job.name, static_cast<int64_t>(job.seq), static_cast<int64_t>(job.state), job.message,
        job.create_time_ms, job.queued_since_ms, job.start_time_ms, job.end_time_ms, job.restarts,
        job.output_dir, job.trial_id, job.study, job.master_port, job.bootstrap_port,
        image.spec_crc, image.row_crc, job.owner, job.suspended_ms, job.first_running_ms));
  }

  for (size_t i = 0; i < job.replicas.size(); ++i) {
    const ReplicaRecord& r = job.replicas[i];
    uint32_t crc = rows::ReplicaRowCrc(job.name, r, static_cast<int>(i));
    image.replicas[r.name] = crc;
    if (old) {
      auto it = old->replicas.find(r.name);
      if (it != old->replicas.end() && it->second == crc) continue;
    }
    COHORT_RETURN_IF_ERROR(st.upsert_replica.RunWith(
        job.name, r.name, static_cast<int64_t>(i), RoleName(r.role), r.index, r.attempt,
        r.launched ? 1 : 0, static_cast<int64_t>(r.state), r.node_id, r.last_node,
        rows::GpuList(r.gpus), r.port, r.exit_code, r.signal, r.message, r.stop_requested ? 1 : 0,
        r.state_time_ms, crc, r.cause_signal, r.fenced_until_ms, r.idle ? 1 : 0));
  }
  if (old) {
    for (const auto& [name, crc] : old->replicas) {
      if (image.replicas.count(name)) continue;
      COHORT_RETURN_IF_ERROR(st.delete_replica.RunWith(job.name, name));
    }
  }

  // Events: a job keeps its latest ones, so the stored list may have lost some at its front.
  // Align the new list on the stored one (the first stored event equal to the new first one),
  // then write the positions that differ and delete what fell off either end.
  image.events.reserve(job.events.size());
  for (const auto& e : job.events) image.events.push_back(rows::EventRowCrc(job.name, e));
  const size_t n = image.events.size();
  const size_t o = old ? old->events.size() : 0;
  const int64_t base = old ? old->event_base : 0;
  size_t shift = 0;
  if (o > 0 && n > 0 && old->events[0] != image.events[0]) {
    shift = o;
    for (size_t k = 1; k < o; ++k) {
      if (old->events[k] == image.events[0]) {
        shift = k;
        break;
      }
    }
  }
  image.event_base = base + static_cast<int64_t>(shift);
  if (shift > 0) {
    COHORT_RETURN_IF_ERROR(st.delete_events_before.RunWith(job.name, image.event_base));
  }
  for (size_t i = 0; i < n; ++i) {
    size_t j = i + shift;
    if (j < o && old->events[j] == image.events[i]) continue;
    COHORT_RETURN_IF_ERROR(
        st.upsert_event.RunWith(job.name, image.event_base + static_cast<int64_t>(i),
                                job.events[i].time_ms, job.events[i].message, image.events[i]));
  }
  if (o > shift + n) {
    COHORT_RETURN_IF_ERROR(
        st.delete_events_from.RunWith(job.name, image.event_base + static_cast<int64_t>(n)));
  }
  pending[job.name] = std::move(image);
  return Status::Ok();
}

Status SqliteStateStore::WriteStudyRecord(const std::string& record,
                                          std::map<std::string, StudyImage>& pending) {
  json j = json::parse(record, nullptr, false);
  if (!j.is_object() || j.value("kind", "") != "study" || !j.contains("name") ||
      !j["events"].is_array()) {
    return Internal("a study record the store cannot read: " + record.substr(0, 200));
  }
  const std::string name = j.value("name", "");
  const std::string spec = j.value("spec_yaml", "");
  const int64_t create_ms = j.value("create_time_ms", int64_t{0});
  const int64_t end_ms = j.value("end_time_ms", int64_t{0});
  const std::string owner = j.value("owner", "");
  const int64_t first = j.value("first", int64_t{0});

  StudyImage image;
  if (auto p = pending.find(name); p != pending.end()) {
    image = p->second;
  } else if (auto c = studies_.find(name); c != studies_.end()) {
    image = c->second;
  }
  if (first > image.events) {
    return Internal("study " + name + ": a record starting at event " + std::to_string(first) +
                    " but the store holds " + std::to_string(image.events));
  }
  Statements& st = *st_;
  uint32_t spec_crc = rows::TextCrc(spec);
  uint32_t row_crc = rows::StudyRowCrc(name, spec_crc, create_ms, end_ms, owner);
  if (row_crc != image.row_crc) {
    COHORT_RETURN_IF_ERROR(
        st.upsert_study.RunWith(name, spec, spec_crc, create_ms, end_ms, row_crc, owner));
    image.row_crc = row_crc;
  }
  const json& events = j["events"];
  for (size_t i = 0; i < events.size(); ++i) {
    int64_t pos = first + static_cast<int64_t>(i);
    if (pos < image.events) continue;  // already stored (events never change)
    const json& e = events[i];
    std::string body = e.dump(-1, ' ', false, json::error_handler_t::replace);
    std::string kind, trial;
    if (e.contains("trial")) {
      kind = "trial";
      trial = e.value("trial", "");
      std::string params =
          e.contains("parameters")
              ? e["parameters"].dump(-1, ' ', false, json::error_handler_t::replace)
              : "{}";
      std::string job = TrialJobName(name, trial);
      COHORT_RETURN_IF_ERROR(st.insert_trial.RunWith(
          name, trial, job, params, rows::TrialRowCrc(name, trial, job, params, 0, 0, "")));
    } else if (e.contains("measurement")) {
      kind = "measurement";
      trial = e.value("measurement", "");
    } else if (e.contains("ended")) {
      kind = "ended";
      trial = e.value("ended", "");
      // The trial row's CRC covers its job and parameters: read them back.
      SqliteStatement& row = st.select_trial;
      row.Reset();
      row.Bind(1, name).Bind(2, trial);
      COHORT_ASSIGN_OR_RETURN(bool found, row.Step());
      if (found) {
        bool ok = e.value("succeeded", false);
        std::string message = e.value("message", "");
        uint32_t crc =
            rows::TrialRowCrc(name, trial, row.Text(0), row.Text(1), 1, ok ? 1 : 0, message);
        row.Reset();
        COHORT_RETURN_IF_ERROR(st.end_trial.RunWith(name, trial, ok ? 1 : 0, message, crc));
      }
    } else if (e.contains("cancelled")) {
      kind = "cancelled";
    }
    COHORT_RETURN_IF_ERROR(st.insert_study_event.RunWith(name, pos, kind, trial, body,
                                                         rows::StudyEventRowCrc(name, pos, body)));
    image.events = pos + 1;
  }
  pending[name] = image;
  return Status::Ok();
}

// ---- queries --------------------------------------------------------------------------------

StatusOr<std::vector<JobSummary>> SqliteStateStore::ListJobs(const JobQuery& query) {
  std::string sql =
      "SELECT j.name, j.seq, j.state, j.message, j.create_time_ms, j.start_time_ms, "
      "j.end_time_ms, j.restarts, j.study, j.trial_id, "
      "(SELECT COUNT(*) FROM replicas r WHERE r.job = j.name), j.owner FROM jobs j WHERE 1";
  if (!query.states.empty()) {
    sql += " AND j.state IN (";
    for (size_t i = 0; i < query.states.size(); ++i) {
      sql += (i ? ", " : "") + std::to_string(static_cast<int>(query.states[i]));
    }
    sql += ")";
  }
  if (query.created_since_ms > 0) sql += " AND j.create_time_ms >= ?1";
  if (query.ended_since_ms > 0) sql += " AND j.end_time_ms >= ?2";
  sql += " ORDER BY j.seq DESC";
  if (query.limit > 0) sql += " LIMIT ?3";
  COHORT_ASSIGN_OR_RETURN(SqliteStatement st, db_->Prepare(sql));
  if (query.created_since_ms > 0) st.Bind(1, query.created_since_ms);
  if (query.ended_since_ms > 0) st.Bind(2, query.ended_since_ms);
  if (query.limit > 0) st.Bind(3, static_cast<int64_t>(query.limit));
  std::vector<JobSummary> out;
  while (true) {
    COHORT_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    JobSummary s;
    s.name = st.Text(0);
    s.seq = static_cast<uint64_t>(st.Int(1));
    s.state = static_cast<JobState>(st.Int(2));
    s.message = st.Text(3);
    s.create_time_ms = st.Int(4);
    s.start_time_ms = st.Int(5);
    s.end_time_ms = st.Int(6);
    s.restarts = static_cast<int>(st.Int(7));
    s.study = st.Text(8);
    s.trial_id = st.Text(9);
    s.replicas = static_cast<int>(st.Int(10));
    s.owner = st.Text(11);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace cohort::coordinator
