// SqliteDb and SqliteStatement: a thin RAII layer over the SQLite C API for the coordinator's state
// store (coordinator/sqlite_state_store.h), plus versioned schema migration.
//
// Errors: every failure becomes a Status naming what was being done, the database file and
// SQLite's own message (with the OS error when there is one). A full disk (SQLITE_FULL, or an I/O
// error whose errno is ENOSPC or EDQUOT) is kResourceExhausted; a database locked by another
// process, a failed open, read or write is kUnavailable; a file that is not a database or fails to
// verify is kDataLoss; anything else kInternal.
//
// Thread safety: a SqliteDb and its statements are used by one thread at a time.
// Lifetime: statements must be destroyed before the database they were prepared on.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

struct sqlite3;
struct sqlite3_backup;
struct sqlite3_stmt;

namespace cohort::coordinator {

class SqliteDb;

class SqliteStatement {
 public:
  SqliteStatement() = default;
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&& other) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement();

  // Parameters are 1-based, as in SQL's ?1, ?2, ...; text is copied.
  SqliteStatement& Bind(int index, int64_t value);
  SqliteStatement& Bind(int index, std::string_view text);

  // Advances one row: true when a row is available, false when the statement is done.
  StatusOr<bool> Step();
  // Runs a statement that returns no rows to completion, then resets it for the next use.
  Status Run();
  // Binds `args` to ?1, ?2, ... in order (each as Bind does), then Run().
  template <typename... Args>
  Status RunWith(const Args&... args) {
    int index = 0;
    (Bind(++index, args), ...);
    return Run();
  }
  // Makes the statement ready to run again (bindings are kept until rebound).
  void Reset();

  int64_t Int(int column) const;
  std::string Text(int column) const;

 private:
  friend class SqliteDb;
  SqliteStatement(SqliteDb* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  SqliteDb* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

class SqliteDb {
 public:
  // Opens `path` read-write, creating an empty file when `create` (else a missing file is
  // kNotFound).
  static StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path, bool create);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs one or more statements that return no rows.
  Status Exec(std::string_view sql);
  StatusOr<SqliteStatement> Prepare(std::string_view sql);
  // The first column of the first row of `sql` as an integer / as text (a query without rows is
  // kNotFound).
  StatusOr<int64_t> QueryInt(std::string_view sql);
  StatusOr<std::string> QueryText(std::string_view sql);

  // Rolls back the open transaction, if any (after a failed write SQLite may or may not have done
  // so already).
  void RollbackIfOpen();
  bool in_transaction() const;

  // The Status for SQLite result code `rc` (see the header comment); `what` says what failed.
  Status Error(int rc, std::string_view what) const;

  const std::string& path() const { return path_; }
  sqlite3* handle() { return db_; }

 private:
  SqliteDb(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  std::string path_;
  sqlite3* db_ = nullptr;
};

// SqliteCopy copies a database, page by page, into a new file while the source connection goes
// on being used (SQLite's online backup): what the source connection writes between steps is
// written into the copy as well, so a finished copy is the database as of its last step, whole and
// consistent. The copy is left in rollback-journal mode (one self-contained file, no -wal beside
// it) and is not fsynced: the caller syncs and renames it.
//
// Errors: as SqliteDb's; a write to the copy that fails names the copy's file (a full disk there
// is kResourceExhausted). Thread safety: only on the source's thread, between its transactions.
// Lifetime: must be destroyed before the source connection. An unfinished copy leaves its
// partial file for the caller to remove.
class SqliteCopy {
 public:
  // Starts copying `source` into `path`, which must not exist yet (kAlreadyExists).
  static StatusOr<std::unique_ptr<SqliteCopy>> Begin(SqliteDb& source, const std::string& path);
  ~SqliteCopy();
  SqliteCopy(const SqliteCopy&) = delete;
  SqliteCopy& operator=(const SqliteCopy&) = delete;

  // Copies up to `pages` more pages (-1: all that are left): true once the copy is complete and
  // its file closed. A source busy with a transaction of its own is not an error: the step copies
  // nothing and says false.
  StatusOr<bool> Step(int pages);

 private:
  SqliteCopy(std::string source_path, std::unique_ptr<SqliteDb> dest, sqlite3_backup* backup)
      : source_path_(std::move(source_path)), dest_(std::move(dest)), backup_(backup) {}
  std::string source_path_;
  std::unique_ptr<SqliteDb> dest_;
  sqlite3_backup* backup_ = nullptr;
};

// Removes the database file `path` and its journals (-wal, -shm, -journal), whichever exist;
// errors are ignored (for a partial copy or a failed restore's leftovers).
void RemoveDatabaseFiles(const std::string& path);

// One step of a schema: the SQL that takes the database from version - 1 to `version`.
struct SchemaStep {
  int version = 0;
  const char* sql = "";
};

// Brings the database to the last step's version (PRAGMA user_version): each step missing runs
// in its own transaction together with its version bump, so an interrupted migration leaves the
// database at the last completed version. A database newer than the last step is refused
// (kFailedPrecondition naming both versions). Steps must be sorted by version, from 1.
Status MigrateSchema(SqliteDb& db, std::span<const SchemaStep> steps);

}  // namespace cohort::coordinator
