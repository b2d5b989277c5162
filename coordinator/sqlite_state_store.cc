#include "coordinator/sqlite_state_store.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/study_spec.h"

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
};

constexpr size_t kProblemsInMessage = 10;

// CRC-32 (zlib) over a row's columns, each framed (integers as 8 bytes, text with its length) so
// that moving bytes between columns changes it.
class RowCrc {
 public:
  RowCrc& Add(int64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i)
      b[i] = static_cast<unsigned char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
    crc_ = crc32(crc_, b, 8);
    return *this;
  }
  RowCrc& Add(std::string_view s) {
    Add(static_cast<int64_t>(s.size()));
    crc_ = crc32_z(crc_, reinterpret_cast<const Bytef*>(s.data()), s.size());
    return *this;
  }
  uint32_t value() const { return static_cast<uint32_t>(crc_); }

 private:
  uLong crc_ = crc32(0L, Z_NULL, 0);
};

uint32_t TextCrc(std::string_view s) {
  return static_cast<uint32_t>(
      crc32_z(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(s.data()), s.size()));
}

uint32_t JobRowCrc(const JobRecord& j, uint32_t spec_crc) {
  return RowCrc()
      .Add(j.name)
      .Add(static_cast<int64_t>(j.seq))
      .Add(static_cast<int64_t>(j.state))
      .Add(j.message)
      .Add(j.create_time_ms)
      .Add(j.queued_since_ms)
      .Add(j.start_time_ms)
      .Add(j.end_time_ms)
      .Add(j.restarts)
      .Add(j.output_dir)
      .Add(j.trial_id)
      .Add(j.study)
      .Add(j.master_port)
      .Add(j.bootstrap_port)
      .Add(spec_crc)
      .value();
}

std::string GpuList(const std::vector<int>& gpus) {
  std::string out;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(gpus[i]);
  }
  return out;
}

std::vector<int> ParseGpuList(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(std::atoi(item.c_str()));
  }
  return out;
}

uint32_t ReplicaRowCrc(const std::string& job, const ReplicaRecord& r, int ord) {
  return RowCrc()
      .Add(job)
      .Add(r.name)
      .Add(ord)
      .Add(RoleName(r.role))
      .Add(r.index)
      .Add(r.attempt)
      .Add(r.launched ? 1 : 0)
      .Add(static_cast<int64_t>(r.state))
      .Add(r.node_id)
      .Add(r.last_node)
      .Add(GpuList(r.gpus))
      .Add(r.port)
      .Add(r.exit_code)
      .Add(r.signal)
      .Add(r.message)
      .Add(r.stop_requested ? 1 : 0)
      .Add(r.state_time_ms)
      .value();
}

uint32_t EventRowCrc(const std::string& job, const JobEventRecord& e) {
  return RowCrc().Add(job).Add(e.time_ms).Add(e.message).value();
}

uint32_t StudyRowCrc(const std::string& name, uint32_t spec_crc, int64_t create_ms,
                     int64_t end_ms) {
  return RowCrc().Add(name).Add(spec_crc).Add(create_ms).Add(end_ms).value();
}

uint32_t StudyEventRowCrc(const std::string& study, int64_t pos, const std::string& body) {
  return RowCrc().Add(study).Add(pos).Add(body).value();
}

uint32_t TrialRowCrc(const std::string& study, const std::string& trial, const std::string& job,
                     const std::string& parameters, int64_t ended, int64_t succeeded,
                     const std::string& message) {
  return RowCrc()
      .Add(study)
      .Add(trial)
      .Add(job)
      .Add(parameters)
      .Add(ended)
      .Add(succeeded)
      .Add(message)
      .value();
}

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr const char* kJobColumns =
    "name, seq, state, message, create_time_ms, queued_since_ms, start_time_ms, end_time_ms, "
    "restarts, output_dir, trial_id, study, master_port, bootstrap_port, spec_crc, row_crc";
constexpr const char* kSpecColumns = "job, spec_yaml, spec_crc";
constexpr const char* kReplicaColumns =
    "job, name, ord, role, idx, attempt, launched, state, node_id, last_node, gpus, port, "
    "exit_code, signal, message, stop_requested, state_time_ms, row_crc";
constexpr const char* kEventColumns = "job, pos, time_ms, message, row_crc";

std::string Summarize(const std::vector<std::string>& problems) {
  std::string out;
  for (size_t i = 0; i < problems.size() && i < kProblemsInMessage; ++i) {
    out += (i ? "; " : "") + problems[i];
  }
  if (problems.size() > kProblemsInMessage) {
    out += "; and " + std::to_string(problems.size() - kProblemsInMessage) + " more";
  }
  return out;
}

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
    if (s.ok()) s = store->SetMeta("created_ms", std::to_string(NowMs()));
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
                 "bootstrap_port, spec_crc, row_crc) VALUES "
                 "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) "
                 "ON CONFLICT (name) DO UPDATE SET seq = ?2, state = ?3, message = ?4, "
                 "create_time_ms = ?5, queued_since_ms = ?6, start_time_ms = ?7, "
                 "end_time_ms = ?8, restarts = ?9, output_dir = ?10, trial_id = ?11, "
                 "study = ?12, master_port = ?13, bootstrap_port = ?14, spec_crc = ?15, "
                 "row_crc = ?16"));
  COHORT_ASSIGN_OR_RETURN(
      st->upsert_spec,
      db.Prepare(
          "INSERT OR REPLACE INTO job_specs (job, spec_yaml, spec_crc) VALUES (?1, ?2, ?3)"));
  COHORT_ASSIGN_OR_RETURN(
      st->upsert_replica,
      db.Prepare("INSERT OR REPLACE INTO replicas (job, name, ord, role, idx, attempt, launched, "
                 "state, node_id, last_node, gpus, port, exit_code, signal, message, "
                 "stop_requested, state_time_ms, row_crc) VALUES "
                 "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
                 "?18)"));
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
                 "end_time_ms, row_crc) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
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
  st.Bind(1, key).Bind(2, value);
  return st.Run();
}

void SqliteStateStore::AddDropped(std::vector<std::string> lines) {
  for (auto& l : lines) dropped_before_load_.push_back(std::move(l));
}

// ---- reading --------------------------------------------------------------------------------

void SqliteStateStore::ReadJobRows(SqliteStatement& st, std::map<std::string, ReadJob>& jobs,
                                   std::map<uint64_t, std::string>* order,
                                   std::vector<std::string>& problems) {
  while (true) {
    auto row = st.Step();
    if (!row.ok()) {
      problems.push_back("the jobs table cannot be read to its end: " + row.status().message());
      return;
    }
    if (!*row) return;
    ReadJob& r = jobs[st.Text(0)];
    JobRecord& j = r.job;
    r.has_row = true;
    j.name = st.Text(0);
    j.seq = static_cast<uint64_t>(st.Int(1));
    j.state = static_cast<JobState>(st.Int(2));
    j.message = st.Text(3);
    j.create_time_ms = st.Int(4);
    j.queued_since_ms = st.Int(5);
    j.start_time_ms = st.Int(6);
    j.end_time_ms = st.Int(7);
    j.restarts = static_cast<int>(st.Int(8));
    j.output_dir = st.Text(9);
    j.trial_id = st.Text(10);
    j.study = st.Text(11);
    j.master_port = static_cast<int>(st.Int(12));
    j.bootstrap_port = static_cast<int>(st.Int(13));
    uint32_t spec_crc = static_cast<uint32_t>(st.Int(14));
    uint32_t row_crc = static_cast<uint32_t>(st.Int(15));
    if (order) (*order)[j.seq] = j.name;
    r.image.row_crc = row_crc;
    r.image.spec_crc = spec_crc;
    if (JobRowCrc(j, spec_crc) != row_crc) {
      r.fatal.push_back("its row does not match its checksum (stored " + Hex(row_crc) +
                        ", computed " + Hex(JobRowCrc(j, spec_crc)) + ")");
    }
  }
}

void SqliteStateStore::ReadSpecRows(SqliteStatement& st, std::map<std::string, ReadJob>& jobs,
                                    std::vector<std::string>& problems) {
  while (true) {
    auto row = st.Step();
    if (!row.ok()) {
      problems.push_back("the job_specs table cannot be read to its end: " +
                         row.status().message());
      return;
    }
    if (!*row) return;
    auto it = jobs.find(st.Text(0));
    if (it == jobs.end() || !it->second.has_row) continue;  // a spec alone says nothing
    ReadJob& r = it->second;
    r.has_spec = true;
    r.job.spec_yaml = st.Text(1);
    uint32_t stored = static_cast<uint32_t>(st.Int(2));
    uint32_t actual = TextCrc(r.job.spec_yaml);
    if (actual != stored || stored != r.image.spec_crc) {
      r.fatal.push_back("its spec does not match its checksum (stored " + Hex(stored) +
                        ", computed " + Hex(actual) + ")");
    }
  }
}

void SqliteStateStore::ReadReplicaRows(SqliteStatement& st, std::map<std::string, ReadJob>& jobs,
                                       std::vector<std::string>& problems) {
  while (true) {
    auto row = st.Step();
    if (!row.ok()) {
      problems.push_back("the replicas table cannot be read to its end: " + row.status().message());
      return;
    }
    if (!*row) return;
    std::string job = st.Text(0);
    ReadJob& r = jobs[job];
    ReplicaRecord rep;
    rep.name = st.Text(1);
    int ord = static_cast<int>(st.Int(2));
    auto role = ParseRole(st.Text(3));
    rep.index = static_cast<int>(st.Int(4));
    rep.attempt = static_cast<int>(st.Int(5));
    rep.launched = st.Int(6) != 0;
    rep.state = static_cast<ReplicaState>(st.Int(7));
    rep.node_id = st.Text(8);
    rep.last_node = st.Text(9);
    rep.gpus = ParseGpuList(st.Text(10));
    rep.port = static_cast<int>(st.Int(11));
    rep.exit_code = static_cast<int>(st.Int(12));
    rep.signal = static_cast<int>(st.Int(13));
    rep.message = st.Text(14);
    rep.stop_requested = st.Int(15) != 0;
    rep.state_time_ms = st.Int(16);
    uint32_t crc = static_cast<uint32_t>(st.Int(17));
    if (role.ok()) rep.role = *role;
    if (!role.ok() || ReplicaRowCrc(job, rep, ord) != crc) {
      r.fatal.push_back("replica " + rep.name + " does not match its checksum");
      continue;
    }
    if (ord != static_cast<int>(r.job.replicas.size())) {
      r.fatal.push_back("replica " + rep.name + " is stored at place " + std::to_string(ord) +
                        " but " + std::to_string(r.job.replicas.size()) +
                        " replicas come before it");
    }
    r.image.replicas[rep.name] = crc;
    r.job.replicas.push_back(std::move(rep));
  }
}

void SqliteStateStore::ReadEventRows(SqliteStatement& st, std::map<std::string, ReadJob>& jobs,
                                     std::vector<std::string>& problems) {
  std::string current;
  int64_t next_pos = 0;
  while (true) {
    auto row = st.Step();
    if (!row.ok()) {
      problems.push_back("the events table cannot be read to its end: " + row.status().message());
      return;
    }
    if (!*row) return;
    std::string job = st.Text(0);
    ReadJob& r = jobs[job];
    int64_t pos = st.Int(1);
    JobEventRecord e{st.Int(2), st.Text(3)};
    uint32_t crc = static_cast<uint32_t>(st.Int(4));
    if (job != current) {
      current = job;
      r.image.event_base = pos;
      next_pos = pos;
    }
    if (pos != next_pos) {
      r.partial.push_back("events " + std::to_string(next_pos) + " to " + std::to_string(pos - 1) +
                          " are missing");
    }
    next_pos = pos + 1;
    if (EventRowCrc(job, e) != crc) {
      r.partial.push_back("event " + std::to_string(pos) + " does not match its checksum");
      continue;
    }
    r.image.events.push_back(crc);
    r.job.events.push_back(std::move(e));
  }
}

void SqliteStateStore::FinishJob(const std::string& name, ReadJob& r) {
  JobRecord& j = r.job;
  if (!r.has_row) {
    r.fatal.push_back("its row is missing or unreadable (" + std::to_string(j.replicas.size()) +
                      " replica rows and " + std::to_string(j.events.size()) + " events remain)");
    j.name = name;
    return;
  }
  if (!r.has_spec) r.fatal.push_back("its spec is missing or unreadable");
  if (!r.fatal.empty()) return;
  auto spec = ParseJobSpec(j.spec_yaml, "stored spec of job " + name);
  if (!spec.ok()) {
    r.fatal.push_back("its spec does not parse: " + spec.status().message());
    return;
  }
  j.spec = std::move(*spec);
  std::vector<ReplicaRecord> expected = MakeReplicas(j.spec);
  bool same = expected.size() == j.replicas.size();
  for (size_t i = 0; same && i < expected.size(); ++i) {
    same = expected[i].name == j.replicas[i].name && expected[i].role == j.replicas[i].role;
  }
  if (!same) {
    std::string want, have;
    for (const auto& e : expected) want += (want.empty() ? "" : ", ") + e.name;
    for (const auto& h : j.replicas) have += (have.empty() ? "" : ", ") + h.name;
    r.fatal.push_back("its replicas (" + have + ") are not those its spec makes (" + want + ")");
    return;
  }
  FillDemands(j);
}

SqliteStateStore::ReadAllResult SqliteStateStore::ReadAll() {
  ReadAllResult all;
  // PRAGMA integrity_check: "ok", or one row per problem.
  {
    auto st = db_->Prepare("PRAGMA integrity_check(100)");
    if (!st.ok()) {
      all.problems.push_back("integrity check: " + st.status().message());
    } else {
      while (true) {
        auto row = st->Step();
        if (!row.ok()) {
          all.problems.push_back("integrity check: " + row.status().message());
          break;
        }
        if (!*row) break;
        std::string line = st->Text(0);
        if (line != "ok") all.problems.push_back("integrity check: " + line);
      }
    }
  }
  auto scan = [&](const std::string& sql, auto&& read) {
    auto st = db_->Prepare(sql);
    if (!st.ok()) {
      all.problems.push_back(st.status().message());
      return;
    }
    read(*st);
  };
  scan(std::string("SELECT ") + kJobColumns + " FROM jobs",
       [&](SqliteStatement& st) { ReadJobRows(st, all.jobs, &all.order, all.problems); });
  scan(std::string("SELECT ") + kSpecColumns + " FROM job_specs",
       [&](SqliteStatement& st) { ReadSpecRows(st, all.jobs, all.problems); });
  scan(std::string("SELECT ") + kReplicaColumns + " FROM replicas ORDER BY job, ord",
       [&](SqliteStatement& st) { ReadReplicaRows(st, all.jobs, all.problems); });
  scan(std::string("SELECT ") + kEventColumns + " FROM events ORDER BY job, pos",
       [&](SqliteStatement& st) { ReadEventRows(st, all.jobs, all.problems); });
  for (auto& [name, r] : all.jobs) FinishJob(name, r);

  // Studies: the header row, then the events in order.
  scan("SELECT name, spec_yaml, spec_crc, create_time_ms, end_time_ms, row_crc FROM studies",
       [&](SqliteStatement& st) {
         while (true) {
           auto row = st.Step();
           if (!row.ok()) {
             all.problems.push_back("the studies table cannot be read to its end: " +
                                    row.status().message());
             return;
           }
           if (!*row) return;
           ReadStudy& s = all.studies[st.Text(0)];
           s.has_row = true;
           std::string name = st.Text(0), spec = st.Text(1);
           uint32_t spec_crc = static_cast<uint32_t>(st.Int(2));
           int64_t create_ms = st.Int(3), end_ms = st.Int(4);
           uint32_t crc = static_cast<uint32_t>(st.Int(5));
           if (StudyRowCrc(name, spec_crc, create_ms, end_ms) != crc) {
             s.fatal.push_back("its row does not match its checksum");
           }
           if (TextCrc(spec) != spec_crc) s.fatal.push_back("its spec does not match its checksum");
           s.image.row_crc = crc;
           s.record = json{{"kind", "study"},        {"name", name},
                           {"spec_yaml", spec},      {"create_time_ms", create_ms},
                           {"end_time_ms", end_ms},  {"first", 0},
                           {"events", json::array()}}
                          .dump();
         }
       });
  std::map<std::string, json> events;
  scan("SELECT study, pos, body, row_crc FROM study_events ORDER BY study, pos",
       [&](SqliteStatement& st) {
         while (true) {
           auto row = st.Step();
           if (!row.ok()) {
             all.problems.push_back("the study_events table cannot be read to its end: " +
                                    row.status().message());
             return;
           }
           if (!*row) return;
           std::string study = st.Text(0), body = st.Text(2);
           int64_t pos = st.Int(1);
           ReadStudy& s = all.studies[study];
           json& list = events[study];
           if (!list.is_array()) list = json::array();
           if (pos != s.image.events) {
             s.fatal.push_back("events " + std::to_string(s.image.events) + " to " +
                               std::to_string(pos - 1) + " are missing");
           }
           s.image.events = pos + 1;
           json e = json::parse(body, nullptr, false);
           if (StudyEventRowCrc(study, pos, body) != static_cast<uint32_t>(st.Int(3)) ||
               e.is_discarded()) {
             s.fatal.push_back("event " + std::to_string(pos) + " does not match its checksum");
             continue;
           }
           list.push_back(std::move(e));
         }
       });
  scan("SELECT study, trial_id, job, parameters, ended, succeeded, message, row_crc FROM trials",
       [&](SqliteStatement& st) {
         while (true) {
           auto row = st.Step();
           if (!row.ok()) {
             all.problems.push_back("the trials table cannot be read to its end: " +
                                    row.status().message());
             return;
           }
           if (!*row) return;
           if (TrialRowCrc(st.Text(0), st.Text(1), st.Text(2), st.Text(3), st.Int(4), st.Int(5),
                           st.Text(6)) != static_cast<uint32_t>(st.Int(7))) {
             all.studies[st.Text(0)].fatal.push_back("trial " + st.Text(1) +
                                                     " does not match its checksum");
           }
         }
       });
  for (auto& [name, s] : all.studies) {
    if (!s.has_row) {
      s.fatal.push_back("its row is missing (" + std::to_string(s.image.events) +
                        " events remain)");
      continue;
    }
    json j = json::parse(s.record);
    j["events"] = std::move(events[name]);
    if (!j["events"].is_array()) j["events"] = json::array();
    s.record = j.dump();
  }
  return all;
}

StatusOr<StoredState> SqliteStateStore::Load() {
  ReadAllResult all = ReadAll();
  std::vector<std::string> problems = all.problems;
  for (const auto& [name, r] : all.jobs) {
    for (const auto& p : r.fatal) problems.push_back("job " + name + ": " + p);
    for (const auto& p : r.partial) problems.push_back("job " + name + ": " + p);
  }
  for (const auto& [name, s] : all.studies) {
    for (const auto& p : s.fatal) problems.push_back("study " + name + ": " + p);
  }

  StoredState out;
  out.dropped = dropped_before_load_;
  if (problems.empty()) {
    for (auto& [seq, name] : all.order) {
      ReadJob& r = all.jobs.at(name);
      jobs_[name] = std::move(r.image);
      out.jobs.push_back(std::move(r.job));
    }
    for (auto& [name, s] : all.studies) {
      studies_[name] = s.image;
      out.studies.push_back(std::move(s.record));
    }
    return out;
  }
  if (!options_.accept_damaged_state) {
    return DataLoss("the state database " + path_ + " is damaged (" +
                    std::to_string(problems.size()) + " problem" +
                    (problems.size() == 1 ? "" : "s") + "): " + Summarize(problems) +
                    ". The coordinator did not start. Restore the state dir from a backup, or "
                    "start with --accept-damaged-state to drop what is damaged (every job "
                    "dropped is listed)");
  }
  for (const auto& p : all.problems) {
    std::string line = "state database: " + p;
    spdlog::error("--accept-damaged-state: {}", line);
    out.dropped.push_back(line);
  }
  COHORT_ASSIGN_OR_RETURN(out.jobs, Salvage(all, out.dropped, out.studies));
  return out;
}

StatusOr<std::vector<JobRecord>> SqliteStateStore::Salvage(ReadAllResult& all,
                                                           std::vector<std::string>& dropped,
                                                           std::vector<std::string>& studies) {
  std::vector<JobRecord> kept;
  for (auto& [seq, name] : all.order) {
    ReadJob& r = all.jobs.at(name);
    if (!r.fatal.empty()) continue;
    if (!r.partial.empty()) {
      std::string line =
          "job " + name + ": kept without its damaged events (" + Summarize(r.partial) + ")";
      spdlog::error("--accept-damaged-state: {}", line);
      dropped.push_back(line);
    }
    kept.push_back(std::move(r.job));
  }
  for (auto& [name, r] : all.jobs) {
    if (r.fatal.empty()) continue;
    std::string line = "job " + name + " dropped: " + Summarize(r.fatal);
    spdlog::error("--accept-damaged-state: {}", line);
    dropped.push_back(line);
  }
  for (auto& [name, s] : all.studies) {
    if (!s.fatal.empty()) {
      std::string line = "study " + name + " dropped: " + Summarize(s.fatal);
      spdlog::error("--accept-damaged-state: {}", line);
      dropped.push_back(line);
      continue;
    }
    studies.push_back(s.record);
  }

  // A new database holding what was kept is built beside the damaged one, then takes its place;
  // the damaged one is kept aside. A crash in between leaves no state.db, which the next start
  // refuses (the marker says there was one) rather than starting empty.
  std::map<std::string, std::string> meta;
  for (const char* key : {"created_ms", "journal_imported"}) {
    auto value = Meta(key);
    if (value.ok() && !value->empty()) meta[key] = *value;
  }
  const std::string aside = path_ + ".damaged-" + std::to_string(NowMs());
  meta["rebuilt_from"] = aside;
  const std::string rebuild = path_ + ".rebuild";
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ec;
    fs::remove(rebuild + suffix, ec);
  }
  {
    COHORT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteStateStore> fresh,
                            Open(rebuild, options_, store_id_));
    StateChanges changes;
    for (const JobRecord& j : kept) changes.jobs.push_back(&j);
    changes.study_records = studies;
    COHORT_RETURN_IF_ERROR(fresh->CommitWithMeta(changes, meta));
  }  // closed: its WAL is checkpointed into the file
  st_.reset();
  db_.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ec;
    if (!fs::exists(path_ + suffix, ec)) continue;
    fs::rename(path_ + suffix, aside + suffix, ec);
    if (ec) return Unavailable("renaming the damaged " + path_ + suffix + ": " + ec.message());
  }
  std::error_code ec;
  fs::rename(rebuild, path_, ec);
  if (ec) return Unavailable("renaming " + rebuild + " to " + path_ + ": " + ec.message());
  spdlog::error("state store: the damaged database is kept as {}", aside);

  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteStateStore> reopened, Open(path_, options_, ""));
  db_ = std::move(reopened->db_);
  st_ = std::move(reopened->st_);
  ReadAllResult again = ReadAll();
  if (!again.problems.empty()) {
    return DataLoss("the rebuilt database " + path_ +
                    " does not verify: " + Summarize(again.problems));
  }
  jobs_.clear();
  studies_.clear();
  for (auto& [name, r] : again.jobs) jobs_[name] = std::move(r.image);
  for (auto& [name, r] : again.studies) studies_[name] = r.image;
  spdlog::warn("state store: rebuilt {} with {} jobs and {} studies; {} dropped", path_,
               kept.size(), studies.size(), dropped.size());
  return kept;
}

StatusOr<std::vector<JobRecord>> SqliteStateStore::LoadJobs(const std::set<std::string>& names) {
  COHORT_ASSIGN_OR_RETURN(
      SqliteStatement job_st,
      db_->Prepare(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE name = ?1"));
  COHORT_ASSIGN_OR_RETURN(
      SqliteStatement spec_st,
      db_->Prepare(std::string("SELECT ") + kSpecColumns + " FROM job_specs WHERE job = ?1"));
  COHORT_ASSIGN_OR_RETURN(SqliteStatement rep_st,
                          db_->Prepare(std::string("SELECT ") + kReplicaColumns +
                                       " FROM replicas WHERE job = ?1 ORDER BY ord"));
  COHORT_ASSIGN_OR_RETURN(SqliteStatement ev_st,
                          db_->Prepare(std::string("SELECT ") + kEventColumns +
                                       " FROM events WHERE job = ?1 ORDER BY pos"));
  std::vector<JobRecord> out;
  for (const std::string& name : names) {
    std::map<std::string, ReadJob> one;
    std::vector<std::string> problems;
    job_st.Reset();
    job_st.Bind(1, name);
    ReadJobRows(job_st, one, nullptr, problems);
    if (one.empty()) continue;
    spec_st.Reset();
    spec_st.Bind(1, name);
    ReadSpecRows(spec_st, one, problems);
    rep_st.Reset();
    rep_st.Bind(1, name);
    ReadReplicaRows(rep_st, one, problems);
    ev_st.Reset();
    ev_st.Bind(1, name);
    ReadEventRows(ev_st, one, problems);
    ReadJob& r = one.begin()->second;
    FinishJob(name, r);
    problems.insert(problems.end(), r.fatal.begin(), r.fatal.end());
    problems.insert(problems.end(), r.partial.begin(), r.partial.end());
    if (!problems.empty()) {
      return DataLoss("job " + name + " as stored in " + path_ + ": " + Summarize(problems));
    }
    jobs_[name] = std::move(r.image);
    out.push_back(std::move(r.job));
  }
  return out;
}

StatusOr<std::vector<std::string>> SqliteStateStore::LoadStudies() {
  COHORT_ASSIGN_OR_RETURN(
      SqliteStatement st,
      db_->Prepare("SELECT name, spec_yaml, create_time_ms, end_time_ms FROM studies"));
  COHORT_ASSIGN_OR_RETURN(
      SqliteStatement ev,
      db_->Prepare("SELECT body FROM study_events WHERE study = ?1 ORDER BY pos"));
  std::vector<std::string> out;
  while (true) {
    COHORT_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    json events = json::array();
    ev.Reset();
    ev.Bind(1, st.Text(0));
    while (true) {
      COHORT_ASSIGN_OR_RETURN(bool erow, ev.Step());
      if (!erow) break;
      events.push_back(json::parse(ev.Text(0), nullptr, false));
    }
    out.push_back(json{{"kind", "study"},
                       {"name", st.Text(0)},
                       {"spec_yaml", st.Text(1)},
                       {"create_time_ms", st.Int(2)},
                       {"end_time_ms", st.Int(3)},
                       {"first", 0},
                       {"events", std::move(events)}}
                      .dump());
  }
  return out;
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
  if (s.ok()) s = st_->commit.Run();
  if (!s.ok()) {
    db_->RollbackIfOpen();
    return s;
  }
  for (auto& [name, image] : pending_jobs) jobs_[name] = std::move(image);
  for (auto& [name, image] : pending_studies) studies_[name] = image;
  return Status::Ok();
}

Status SqliteStateStore::WriteJob(const JobRecord& job,
                                  std::unordered_map<std::string, JobImage>& pending) {
  Statements& st = *st_;
  auto found = jobs_.find(job.name);
  const JobImage* old = found == jobs_.end() ? nullptr : &found->second;
  JobImage image;
  image.spec_crc = TextCrc(job.spec_yaml);
  image.row_crc = JobRowCrc(job, image.spec_crc);
  if (!old || old->spec_crc != image.spec_crc) {
    st.upsert_spec.Bind(1, job.name).Bind(2, job.spec_yaml).Bind(3, image.spec_crc);
    COHORT_RETURN_IF_ERROR(st.upsert_spec.Run());
  }
  if (!old || old->row_crc != image.row_crc) {
    st.upsert_job.Bind(1, job.name)
        .Bind(2, static_cast<int64_t>(job.seq))
        .Bind(3, static_cast<int64_t>(job.state))
        .Bind(4, job.message)
        .Bind(5, job.create_time_ms)
        .Bind(6, job.queued_since_ms)
        .Bind(7, job.start_time_ms)
        .Bind(8, job.end_time_ms)
        .Bind(9, job.restarts)
        .Bind(10, job.output_dir)
        .Bind(11, job.trial_id)
        .Bind(12, job.study)
        .Bind(13, job.master_port)
        .Bind(14, job.bootstrap_port)
        .Bind(15, image.spec_crc)
        .Bind(16, image.row_crc);
    COHORT_RETURN_IF_ERROR(st.upsert_job.Run());
  }

  for (size_t i = 0; i < job.replicas.size(); ++i) {
    const ReplicaRecord& r = job.replicas[i];
    uint32_t crc = ReplicaRowCrc(job.name, r, static_cast<int>(i));
    image.replicas[r.name] = crc;
    if (old) {
      auto it = old->replicas.find(r.name);
      if (it != old->replicas.end() && it->second == crc) continue;
    }
    st.upsert_replica.Bind(1, job.name)
        .Bind(2, r.name)
        .Bind(3, static_cast<int64_t>(i))
        .Bind(4, RoleName(r.role))
        .Bind(5, r.index)
        .Bind(6, r.attempt)
        .Bind(7, r.launched ? 1 : 0)
        .Bind(8, static_cast<int64_t>(r.state))
        .Bind(9, r.node_id)
        .Bind(10, r.last_node)
        .Bind(11, GpuList(r.gpus))
        .Bind(12, r.port)
        .Bind(13, r.exit_code)
        .Bind(14, r.signal)
        .Bind(15, r.message)
        .Bind(16, r.stop_requested ? 1 : 0)
        .Bind(17, r.state_time_ms)
        .Bind(18, crc);
    COHORT_RETURN_IF_ERROR(st.upsert_replica.Run());
  }
  if (old) {
    for (const auto& [name, crc] : old->replicas) {
      if (image.replicas.count(name)) continue;
      st.delete_replica.Bind(1, job.name).Bind(2, name);
      COHORT_RETURN_IF_ERROR(st.delete_replica.Run());
    }
  }

  // Events: a job keeps its latest ones, so the stored list may have lost some at its front.
  // Align the new list on the stored one (the first stored event equal to the new first one),
  // then write the positions that differ and delete what fell off either end.
  image.events.reserve(job.events.size());
  for (const auto& e : job.events) image.events.push_back(EventRowCrc(job.name, e));
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
    st.delete_events_before.Bind(1, job.name).Bind(2, image.event_base);
    COHORT_RETURN_IF_ERROR(st.delete_events_before.Run());
  }
  for (size_t i = 0; i < n; ++i) {
    size_t j = i + shift;
    if (j < o && old->events[j] == image.events[i]) continue;
    st.upsert_event.Bind(1, job.name)
        .Bind(2, image.event_base + static_cast<int64_t>(i))
        .Bind(3, job.events[i].time_ms)
        .Bind(4, job.events[i].message)
        .Bind(5, image.events[i]);
    COHORT_RETURN_IF_ERROR(st.upsert_event.Run());
  }
  if (o > shift + n) {
    st.delete_events_from.Bind(1, job.name).Bind(2, image.event_base + static_cast<int64_t>(n));
    COHORT_RETURN_IF_ERROR(st.delete_events_from.Run());
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
  uint32_t spec_crc = TextCrc(spec);
  uint32_t row_crc = StudyRowCrc(name, spec_crc, create_ms, end_ms);
  if (row_crc != image.row_crc) {
    st.upsert_study.Bind(1, name)
        .Bind(2, spec)
        .Bind(3, spec_crc)
        .Bind(4, create_ms)
        .Bind(5, end_ms)
        .Bind(6, row_crc);
    COHORT_RETURN_IF_ERROR(st.upsert_study.Run());
    image.row_crc = row_crc;
  }
  const json& events = j["events"];
  for (size_t i = 0; i < events.size(); ++i) {
    int64_t pos = first + static_cast<int64_t>(i);
    if (pos < image.events) continue;  // already stored (events never change)
    const json& e = events[i];
    std::string body = e.dump();
    std::string kind, trial;
    if (e.contains("trial")) {
      kind = "trial";
      trial = e.value("trial", "");
      std::string params = e.contains("parameters") ? e["parameters"].dump() : "{}";
      std::string job = TrialJobName(name, trial);
      st.insert_trial.Bind(1, name).Bind(2, trial).Bind(3, job).Bind(4, params).Bind(
          5, TrialRowCrc(name, trial, job, params, 0, 0, ""));
      COHORT_RETURN_IF_ERROR(st.insert_trial.Run());
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
        uint32_t crc = TrialRowCrc(name, trial, row.Text(0), row.Text(1), 1, ok ? 1 : 0, message);
        row.Reset();
        st.end_trial.Bind(1, name).Bind(2, trial).Bind(3, ok ? 1 : 0).Bind(4, message).Bind(5, crc);
        COHORT_RETURN_IF_ERROR(st.end_trial.Run());
      }
    }
    st.insert_study_event.Bind(1, name)
        .Bind(2, pos)
        .Bind(3, kind)
        .Bind(4, trial)
        .Bind(5, body)
        .Bind(6, StudyEventRowCrc(name, pos, body));
    COHORT_RETURN_IF_ERROR(st.insert_study_event.Run());
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
      "(SELECT COUNT(*) FROM replicas r WHERE r.job = j.name) FROM jobs j WHERE 1";
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
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace cohort::coordinator
