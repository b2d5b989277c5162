#include "coordinator/sqlite_db.h"

#include <sqlite3.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace cohort::coordinator {

// ---- statement ------------------------------------------------------------------------------

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_), stmt_(other.stmt_) {
  other.stmt_ = nullptr;
}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
  if (this != &other) {
    if (stmt_) sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = other.stmt_;
    other.stmt_ = nullptr;
  }
  return *this;
}

SqliteStatement::~SqliteStatement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

SqliteStatement& SqliteStatement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, std::string_view text) {
  sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return *this;
}

StatusOr<bool> SqliteStatement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Status s = db_->Error(rc, std::string("running \"") + sqlite3_sql(stmt_) + "\"");
  sqlite3_reset(stmt_);
  return s;
}

Status SqliteStatement::Run() {
  while (true) {
    auto row = Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
  }
  Reset();
  return Status::Ok();
}

void SqliteStatement::Reset() { sqlite3_reset(stmt_); }

int64_t SqliteStatement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string SqliteStatement::Text(int column) const {
  const unsigned char* p = sqlite3_column_text(stmt_, column);
  if (p == nullptr) return std::string();
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

// ---- database -------------------------------------------------------------------------------

StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path, bool create) {
  if (!create && !std::filesystem::exists(path)) {
    return NotFound("no database at " + path);
  }
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  std::unique_ptr<SqliteDb> db(new SqliteDb(path, raw));
  if (rc != SQLITE_OK) {
    return raw ? db->Error(rc, "opening the database")
               : Unavailable("opening the database " + path + ": out of memory");
  }
  sqlite3_extended_result_codes(raw, 1);
  return db;
}

SqliteDb::~SqliteDb() {
  if (db_) sqlite3_close_v2(db_);
}

Status SqliteDb::Exec(std::string_view sql) {
  std::string text(sql);
  char* message = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
  sqlite3_free(message);
  if (rc != SQLITE_OK) return Error(rc, "running \"" + text + "\"");
  return Status::Ok();
}

StatusOr<SqliteStatement> SqliteDb::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing \"" + std::string(sql) + "\"");
  return SqliteStatement(this, stmt);
}

StatusOr<int64_t> SqliteDb::QueryInt(std::string_view sql) {
  COHORT_ASSIGN_OR_RETURN(SqliteStatement st, Prepare(sql));
  COHORT_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return NotFound("no row from \"" + std::string(sql) + "\"");
  return st.Int(0);
}

StatusOr<std::string> SqliteDb::QueryText(std::string_view sql) {
  COHORT_ASSIGN_OR_RETURN(SqliteStatement st, Prepare(sql));
  COHORT_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return NotFound("no row from \"" + std::string(sql) + "\"");
  return st.Text(0);
}

bool SqliteDb::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

void SqliteDb::RollbackIfOpen() {
  if (in_transaction()) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

Status SqliteDb::Error(int rc, std::string_view what) const {
  int primary = rc & 0xff;
  int os_error = 0;
  if (primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN) {
    os_error = sqlite3_system_errno(db_);
  }
  std::string message =
      std::string(what) + " on " + path_ + ": " + (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
  if (os_error != 0) message += " (" + std::string(std::strerror(os_error)) + ")";
  if (primary == SQLITE_FULL || os_error == ENOSPC || os_error == EDQUOT) {
    return ResourceExhausted("the disk is full: " + message);
  }
  switch (primary) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return DataLoss(message);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Unavailable(message +
                         " (another process holds the database: a second "
                         "cohort-coordinator on this state dir?)");
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_PROTOCOL:
      return Unavailable(message);
    case SQLITE_TOOBIG:
      return ResourceExhausted(message);
    default:
      return Internal(message);
  }
}

// ---- copy -----------------------------------------------------------------------------------

StatusOr<std::unique_ptr<SqliteCopy>> SqliteCopy::Begin(SqliteDb& source, const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    return AlreadyExists("copying the database " + source.path() + ": " + path + " exists already");
  }
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> dest, SqliteDb::Open(path, true));
  sqlite3_backup* backup = sqlite3_backup_init(dest->handle(), "main", source.handle(), "main");
  if (backup == nullptr) {
    return dest->Error(sqlite3_errcode(dest->handle()), "copying the database " + source.path());
  }
  return std::unique_ptr<SqliteCopy>(new SqliteCopy(source.path(), std::move(dest), backup));
}

SqliteCopy::~SqliteCopy() {
  if (backup_) sqlite3_backup_finish(backup_);
}

StatusOr<bool> SqliteCopy::Step(int pages) {
  if (backup_ == nullptr) return true;
  int rc = sqlite3_backup_step(backup_, pages);
  if (rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return false;
  int finished = sqlite3_backup_finish(backup_);
  backup_ = nullptr;
  if (rc != SQLITE_DONE) return dest_->Error(rc, "copying " + source_path_ + " into the copy");
  if (finished != SQLITE_OK) return dest_->Error(finished, "finishing the copy");
  // The copy has the source's header, WAL mode included: make it one self-contained file.
  COHORT_ASSIGN_OR_RETURN(std::string mode, dest_->QueryText("PRAGMA journal_mode = DELETE"));
  if (mode != "delete") {
    return Internal("the copy " + dest_->path() + " kept journal mode " + mode);
  }
  dest_.reset();
  return true;
}

void RemoveDatabaseFiles(const std::string& path) {
  std::error_code ec;
  for (const char* end : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + end, ec);
}

// ---- schema ---------------------------------------------------------------------------------

Status MigrateSchema(SqliteDb& db, std::span<const SchemaStep> steps) {
  COHORT_ASSIGN_OR_RETURN(int64_t version, db.QueryInt("PRAGMA user_version"));
  int latest = steps.empty() ? 0 : steps.back().version;
  if (version > latest) {
    return FailedPrecondition("the database " + db.path() + " has schema version " +
                              std::to_string(version) + ", newer than this program knows (" +
                              std::to_string(latest) +
                              "): it was written by a newer cohort-coordinator");
  }
  for (const SchemaStep& step : steps) {
    if (step.version <= version) continue;
    COHORT_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
    Status s = db.Exec(step.sql);
    if (s.ok()) s = db.Exec("PRAGMA user_version = " + std::to_string(step.version));
    if (s.ok()) s = db.Exec("COMMIT");
    if (!s.ok()) {
      db.RollbackIfOpen();
      return s.WithContext("migrating the schema from version " + std::to_string(version) + " to " +
                           std::to_string(step.version));
    }
    version = step.version;
  }
  return Status::Ok();
}

}  // namespace cohort::coordinator
