// The state dir's rules (state_store.h, OpenStateStore): the marker, the lost-database checks and
// the one-time import of an earlier version's journal.
#include "coordinator/state_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "common/file_util.h"
#include "coordinator/sqlite_state_store.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kDatabase = "state.db";
constexpr const char* kMarker = "state-store.id";
constexpr const char* kMarkerHeader = "cohort-state-store";
constexpr const char* kJournal = "journal";
constexpr const char* kSnapshot = "snapshot";
constexpr const char* kImportedSuffix = ".pre-sqlite";
// The journal's framing: [u32 length LE][u32 crc32 LE][payload]; longer lengths are damage.
constexpr uint32_t kMaxJournalRecord = 64u << 20;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string NewStoreId() {
  std::random_device rd;
  char buf[33];
  for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", rd());
  return buf;
}

// ---- marker ---------------------------------------------------------------------------------

std::optional<std::string> ReadMarker(const std::string& path) {
  auto text = ReadFileToString(path, "state store marker");
  if (!text.ok()) return std::nullopt;
  std::istringstream in(*text);
  std::string header, id;
  in >> header >> id;
  if (header != kMarkerHeader || id.empty()) return std::string("(unreadable)");
  return id;
}

Status WriteMarker(const std::string& dir, const std::string& id) {
  std::string path = dir + "/" + kMarker;
  std::string tmp = path + ".tmp";
  std::string text = std::string(kMarkerHeader) + " " + id + "\n" +
                     "# Written when the state database (state.db) was created. While this file\n"
                     "# exists, cohort-coordinator refuses to start without that database.\n";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return ErrnoStatus("open " + tmp, errno);
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  bool synced = n == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  if (!synced && n >= 0) err = errno;
  ::close(fd);
  if (!synced) return ErrnoStatus("write " + tmp, err);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus("rename " + tmp, errno);
  return SyncDirectory(dir);
}

// Job names an earlier coordinator left traces of: logs/<job>/ and jobs/<job>/ (default output
// dirs); studies/<study>/ for studies.
std::set<std::string> Traces(const std::string& dir, const char* sub) {
  std::set<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir + "/" + sub, ec), end; !ec && it != end; it.increment(ec)) {
    out.insert(it->path().filename().string());
  }
  return out;
}

std::string List(const std::set<std::string>& names, size_t at_most = 10) {
  std::string out;
  size_t i = 0;
  for (const auto& n : names) {
    if (i == at_most) {
      out += ", and " + std::to_string(names.size() - at_most) + " more";
      break;
    }
    out += (i++ ? ", " : "") + n;
  }
  return out;
}

// Lines for --accept-damaged-state when the jobs themselves cannot be read.
std::vector<std::string> DroppedFromTraces(const std::string& dir,
                                           const std::set<std::string>& known) {
  std::vector<std::string> out;
  std::set<std::string> jobs = Traces(dir, "logs");
  for (const auto& j : Traces(dir, "jobs")) jobs.insert(j);
  for (const auto& j : jobs) {
    if (known.count(j)) continue;
    out.push_back("job " + j + " dropped: known only from its logs or output dir under " + dir);
  }
  for (const auto& s : Traces(dir, "studies")) {
    if (known.count(s)) continue;
    out.push_back("study " + s + " dropped: known only from its output dir under " + dir);
  }
  for (const auto& line : out) spdlog::error("--accept-damaged-state: {}", line);
  return out;
}

// Moves `path` aside to <path><suffix> (or <path><suffix>-<ms> when that exists).
Status MoveAside(const std::string& path, const std::string& suffix, std::string* moved_to) {
  std::string target = path + suffix;
  if (fs::exists(target)) target += "-" + std::to_string(NowMs());
  if (::rename(path.c_str(), target.c_str()) != 0) return ErrnoStatus("rename " + path, errno);
  if (moved_to) *moved_to = target;
  return Status::Ok();
}

// ---- the earlier version's journal ----------------------------------------------------------

uint32_t GetU32(const std::string& d, size_t p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(d[p + i])) << (8 * i);
  return v;
}

// The payload of a well-formed record at `pos`, if there is one.
std::optional<std::string_view> FrameAt(const std::string& d, size_t pos) {
  if (d.size() - pos < 8) return std::nullopt;
  uint32_t len = GetU32(d, pos), crc = GetU32(d, pos + 4);
  if (len > kMaxJournalRecord || len > d.size() - pos - 8) return std::nullopt;
  std::string_view payload(d.data() + pos + 8, len);
  uint32_t actual = static_cast<uint32_t>(
      crc32_z(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(payload.data()), len));
  if (actual != crc) return std::nullopt;
  return payload;
}

struct LegacyJournal {
  std::vector<std::string> records;  // snapshot, then journal, in file order
  std::vector<std::string> damage;
  std::string torn_tail;  // a torn last record (a crash mid-append): not damage
};

// Splits one file into records. A bad record followed by a good one later is damage (the scan
// goes on from the good one); a bad record with nothing good after it is a torn tail, which only
// the journal may have.
void ParseLegacyFile(const std::string& path, bool is_snapshot, LegacyJournal& out) {
  auto data = ReadFileToString(path, "journal file");
  if (!data.ok()) {
    out.damage.push_back(path + ": " + data.status().message());
    return;
  }
  const std::string& d = *data;
  size_t pos = 0;
  while (pos < d.size()) {
    if (auto payload = FrameAt(d, pos)) {
      out.records.emplace_back(*payload);
      pos += 8 + payload->size();
      continue;
    }
    size_t next = pos + 1;
    // Payloads are JSON objects: a record can start only where its payload starts with '{'.
    while (next + 8 < d.size() && !(d[next + 8] == '{' && FrameAt(d, next))) ++next;
    if (next + 8 >= d.size()) {
      std::string what = "a torn record at offset " + std::to_string(pos) + " (" +
                         std::to_string(d.size() - pos) + " bytes to the end)";
      if (is_snapshot) {
        out.damage.push_back(path + ": " + what);
      } else {
        out.torn_tail = what;
      }
      return;
    }
    out.damage.push_back(path + ": a damaged record at offset " + std::to_string(pos) + "; " +
                         std::to_string(next - pos) +
                         " bytes skipped to the next good record, at offset " +
                         std::to_string(next));
    pos = next;
  }
}

// Reads the earlier version's snapshot and journal and imports them into a new store.
StatusOr<std::unique_ptr<SqliteStateStore>> ImportJournal(const std::string& dir,
                                                          const std::string& db_path,
                                                          const std::string& store_id,
                                                          const StateStoreOptions& options) {
  LegacyJournal legacy;
  std::string snapshot = dir + "/" + kSnapshot, journal = dir + "/" + kJournal;
  if (fs::exists(snapshot)) ParseLegacyFile(snapshot, true, legacy);
  if (fs::exists(journal)) ParseLegacyFile(journal, false, legacy);
  if (!legacy.torn_tail.empty()) {
    spdlog::warn("journal import: {} ends with {} (a crash mid-append); it is left out", journal,
                 legacy.torn_tail);
  }

  // Job records are whole jobs (the last one of each name wins); study records are a study's
  // events from `first` on, applied in order.
  std::map<std::string, JobRecord> jobs;
  std::vector<std::string> studies;
  std::map<std::string, size_t> study_events;
  std::set<std::string> bad_studies;
  for (size_t i = 0; i < legacy.records.size(); ++i) {
    const std::string& rec = legacy.records[i];
    json j = json::parse(rec, nullptr, false);
    auto text = [&](const char* key) {
      auto it = j.find(key);
      return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    if (j.is_object() && text("kind") == "study") {
      std::string name = text("name");
      auto first_it = j.find("first");
      if (name.empty() || (first_it != j.end() && !first_it->is_number_unsigned())) {
        legacy.damage.push_back("record " + std::to_string(i) +
                                ": a study record without a name or with a bad first event");
        continue;
      }
      size_t first = first_it == j.end() ? 0 : first_it->get<size_t>();
      size_t& known = study_events[name];
      if (bad_studies.count(name)) continue;
      if (first > known || !j["events"].is_array()) {
        legacy.damage.push_back("study " + name + ": its record " + std::to_string(i) +
                                " starts at event " + std::to_string(first) + " but only " +
                                std::to_string(known) + " are known (a lost snapshot?)");
        bad_studies.insert(name);
        continue;
      }
      known = std::max(known, first + j["events"].size());
      studies.push_back(rec);
      continue;
    }
    auto job = JobFromJson(rec);
    if (!job.ok()) {
      legacy.damage.push_back("record " + std::to_string(i) + ": " + job.status().message());
      continue;
    }
    std::string name = job->name;
    jobs[name] = std::move(*job);
  }
  std::vector<std::string> clean_studies;
  for (auto& rec : studies) {  // each an object with a name (above)
    if (!bad_studies.count(json::parse(rec)["name"].get<std::string>())) {
      clean_studies.push_back(rec);
    }
  }
  std::set<std::string> known;
  for (const auto& [name, job] : jobs) known.insert(name);
  for (const auto& [name, n] : study_events) {
    if (!bad_studies.count(name)) known.insert(name);
  }
  std::set<std::string> missing = Traces(dir, "logs");
  for (const auto& j : Traces(dir, "jobs")) missing.insert(j);
  for (auto it = missing.begin(); it != missing.end();) {
    it = known.count(*it) ? missing.erase(it) : std::next(it);
  }
  if (!missing.empty()) {
    legacy.damage.push_back("jobs with logs or output dirs in " + dir +
                            " but no record in the journal (a lost snapshot?): " + List(missing));
  }
  if (!legacy.damage.empty() && !options.accept_damaged_state) {
    return DataLoss("the journal of an earlier version in " + dir +
                    " is damaged: " + legacy.damage.front() +
                    (legacy.damage.size() > 1
                         ? " (and " + std::to_string(legacy.damage.size() - 1) + " more problems)"
                         : std::string()) +
                    ". Nothing was imported and the files are untouched. Restore them from a "
                    "backup, or start with --accept-damaged-state to import what verifies "
                    "(every job dropped is listed)");
  }
  std::vector<std::string> dropped;
  for (const auto& d : legacy.damage) {
    std::string line = "journal import: " + d;
    spdlog::error("--accept-damaged-state: {}", line);
    dropped.push_back(line);
  }
  for (const auto& name : missing) {
    std::string line = "job " + name + " dropped: it has logs or an output dir but no record";
    spdlog::error("--accept-damaged-state: {}", line);
    dropped.push_back(line);
  }
  for (const auto& name : bad_studies) {
    std::string line = "study " + name + " dropped: its journal records are incomplete";
    spdlog::error("--accept-damaged-state: {}", line);
    dropped.push_back(line);
  }

  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteStateStore> store,
                          SqliteStateStore::Open(db_path, options, store_id));
  std::vector<const JobRecord*> ordered;
  for (const auto& [name, job] : jobs) ordered.push_back(&job);
  std::sort(ordered.begin(), ordered.end(),
            [](const JobRecord* a, const JobRecord* b) { return a->seq < b->seq; });
  size_t unfinished = 0;
  for (const JobRecord* j : ordered) unfinished += j->finished() ? 0 : 1;
  StateChanges changes;
  changes.jobs = ordered;
  changes.study_records = clean_studies;
  std::string summary =
      std::to_string(jobs.size()) + " jobs (" + std::to_string(unfinished) + " unfinished) and " +
      std::to_string(study_events.size() - bad_studies.size()) + " studies from " +
      std::to_string(legacy.records.size()) + " journal records";
  COHORT_RETURN_IF_ERROR(
      store
          ->CommitWithMeta(changes,
                           {{"journal_imported", summary + " at " + std::to_string(NowMs())}})
          .WithContext("importing the journal"));
  std::string kept;
  for (const std::string& path : {journal, snapshot}) {
    if (!fs::exists(path)) continue;
    std::string to;
    COHORT_RETURN_IF_ERROR(MoveAside(path, kImportedSuffix, &to));
    kept += (kept.empty() ? "" : ", ") + to;
  }
  COHORT_RETURN_IF_ERROR(SyncDirectory(dir));
  spdlog::info("state store: imported {} into {}; the journal files are kept as {}", summary,
               db_path, kept);
  store->AddDropped(std::move(dropped));
  return store;
}

}  // namespace

// ---- the state dir's rules ------------------------------------------------------------------

StatusOr<std::unique_ptr<StateStore>> OpenStateStore(const std::string& dir,
                                                     const StateStoreOptions& options) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Unavailable("creating the state dir " + dir + ": " + ec.message());
  const std::string db_path = dir + "/" + kDatabase;
  const std::string marker_path = dir + "/" + kMarker;
  const std::optional<std::string> marker = ReadMarker(marker_path);
  const bool legacy = fs::exists(dir + "/" + kJournal) || fs::exists(dir + "/" + kSnapshot);
  const bool accept = options.accept_damaged_state;

  auto opened = SqliteStateStore::Open(db_path, options, "");
  if (!opened.ok() && opened.status().code() == StatusCode::kDataLoss && !accept) {
    return DataLoss("the state database " + db_path +
                    " cannot be read: " + opened.status().message() +
                    ". The coordinator did not start. Restore it from a backup, or start with "
                    "--accept-damaged-state to start with no jobs (the jobs known from logs/ and "
                    "jobs/ are listed as dropped)");
  }
  if (!opened.ok() && opened.status().code() == StatusCode::kDataLoss) {
    // Not a database at all: nothing in it can be read.
    std::string aside;
    COHORT_RETURN_IF_ERROR(MoveAside(db_path, ".damaged", &aside));
    for (const char* wal : {"-wal", "-shm"}) {
      if (fs::exists(db_path + wal))
        COHORT_RETURN_IF_ERROR(MoveAside(db_path + wal, ".damaged", nullptr));
    }
    spdlog::error("--accept-damaged-state: {} ({}); kept as {}; starting with no jobs",
                  opened.status().message(), db_path, aside);
    std::vector<std::string> dropped = DroppedFromTraces(dir, {});
    COHORT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteStateStore> store,
                            SqliteStateStore::Open(db_path, options, NewStoreId()));
    COHORT_RETURN_IF_ERROR(WriteMarker(dir, store->store_id()));
    store->AddDropped(std::move(dropped));
    return std::unique_ptr<StateStore>(std::move(store));
  }
  if (opened.ok()) {
    std::unique_ptr<SqliteStateStore> store = std::move(*opened);
    if (!marker) {
      spdlog::warn("state store: {} was missing; written again for the store in {}", marker_path,
                   db_path);
      COHORT_RETURN_IF_ERROR(WriteMarker(dir, store->store_id()));
    } else if (*marker != store->store_id()) {
      if (!accept) {
        return DataLoss("the state database " + db_path + " is store " + store->store_id() +
                        " but " + marker_path + " names store " + *marker +
                        ": the database was replaced by another one. Put the right database "
                        "back, or start with --accept-damaged-state to adopt this one");
      }
      spdlog::error(
          "--accept-damaged-state: adopting the database {} (store {}) although {} "
          "named store {}",
          db_path, store->store_id(), marker_path, *marker);
      COHORT_RETURN_IF_ERROR(WriteMarker(dir, store->store_id()));
    }
    if (legacy) {
      COHORT_ASSIGN_OR_RETURN(std::string imported, store->Meta("journal_imported"));
      std::string suffix = imported.empty() ? ".ignored" : kImportedSuffix;
      if (imported.empty() && !accept) {
        return DataLoss("the state dir " + dir + " holds both the database " + db_path +
                        " and a journal that was never imported into it (was an earlier "
                        "version run on this state dir after the upgrade?). Move the one you "
                        "do not want away, or start with --accept-damaged-state to keep the "
                        "database and set the journal aside");
      }
      for (const char* f : {kJournal, kSnapshot}) {
        std::string path = dir + "/" + f;
        if (!fs::exists(path)) continue;
        std::string to;
        COHORT_RETURN_IF_ERROR(MoveAside(path, suffix, &to));
        spdlog::warn(
            "state store: {} set aside as {} ({})", path, to,
            imported.empty() ? "--accept-damaged-state: never imported" : "imported before");
      }
    }
    return std::unique_ptr<StateStore>(std::move(store));
  }
  if (opened.status().code() != StatusCode::kNotFound) return opened.status();

  // No database (missing or empty).
  const bool empty_file = fs::exists(db_path);
  if (legacy) {
    if (marker) {
      return DataLoss("the state dir " + dir + " has a journal of an earlier version and " +
                      marker_path + ", but no database " + db_path +
                      ": refusing to guess which is current. Restore the database, or remove " +
                      marker_path + " to import the journal");
    }
    COHORT_ASSIGN_OR_RETURN(auto store, ImportJournal(dir, db_path, NewStoreId(), options));
    COHORT_RETURN_IF_ERROR(WriteMarker(dir, store->store_id()));
    return std::unique_ptr<StateStore>(std::move(store));
  }
  std::string what = empty_file ? "the state database " + db_path + " is empty"
                                : "there is no state database " + db_path;
  std::vector<std::string> dropped;
  if (marker) {
    if (!accept) {
      return DataLoss(what + ", but " + marker_path + " says store " + *marker +
                      " was created here: its jobs would be lost. Restore " + db_path +
                      " (and state.db-wal) from a backup, or start with --accept-damaged-state "
                      "to start with no jobs");
    }
    spdlog::error("--accept-damaged-state: {} although {} names store {}; starting with no jobs",
                  what, marker_path, *marker);
    dropped = DroppedFromTraces(dir, {});
  } else {
    std::set<std::string> traces = Traces(dir, "logs");
    for (const auto& j : Traces(dir, "jobs")) traces.insert(j);
    for (const auto& s : Traces(dir, "studies")) traces.insert(s);
    if (!traces.empty()) {
      if (!accept) {
        return DataLoss(what + ", but " + dir + " holds logs or output dirs of earlier jobs (" +
                        List(traces) +
                        "): the state of an earlier coordinator is missing. Restore it, or "
                        "start with --accept-damaged-state to start with no jobs");
      }
      spdlog::error("--accept-damaged-state: {}; starting with no jobs", what);
      dropped = DroppedFromTraces(dir, {});
    }
  }
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteStateStore> store,
                          SqliteStateStore::Open(db_path, options, NewStoreId()));
  COHORT_RETURN_IF_ERROR(WriteMarker(dir, store->store_id()));
  spdlog::info("state store: created {} (store {})", db_path, store->store_id());
  store->AddDropped(std::move(dropped));
  return std::unique_ptr<StateStore>(std::move(store));
}

// ---- restoring a backup ---------------------------------------------------------------------

namespace {

// Copies the regular file `from` to the new file `to` (mode 0600) and fsyncs it.
Status CopyFileSynced(const std::string& from, const std::string& to) {
  struct stat st;
  COHORT_ASSIGN_OR_RETURN(int in_fd, OpenRegularFile(from, "backup", &st));
  UniqueFd in(in_fd);
  UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out.ok()) return ErrnoStatus("create " + to, errno);
  std::string buf(1 << 20, '\0');
  while (true) {
    ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read " + from, errno);
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(out.get(), buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return ErrnoStatus("write " + to, errno);
      done += w;
    }
  }
  if (::fsync(out.get()) != 0) return ErrnoStatus("fsync " + to, errno);
  return out.Close(to);
}

}  // namespace

StatusOr<std::vector<std::string>> RestoreStateStore(const std::string& dir,
                                                     const std::string& backup) {
  std::vector<std::string> said;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Unavailable("creating the state dir " + dir + ": " + ec.message());
  struct stat dir_st;
  if (::stat(dir.c_str(), &dir_st) != 0) return ErrnoStatus("stat " + dir, errno);
  const std::string db_path = dir + "/" + kDatabase;
  const std::string marker_path = dir + "/" + kMarker;

  // A running coordinator holds its database exclusively: reading it is refused as busy.
  if (fs::exists(db_path, ec)) {
    auto held = SqliteDb::Open(db_path, false);
    if (held.ok()) {
      auto read = (*held)->QueryInt("PRAGMA user_version");
      if (!read.ok() && read.status().code() == StatusCode::kUnavailable) {
        return Unavailable("the state database " + db_path +
                           " is in use (is cohort-coordinator running on " + dir +
                           "? stop it first): " + read.status().message());
      }
    }
  }

  const std::string restoring = db_path + ".restoring";
  RemoveDatabaseFiles(restoring);
  Status copied = CopyFileSynced(backup, restoring);
  if (!copied.ok()) {
    RemoveDatabaseFiles(restoring);
    return copied.WithContext("copying the backup into the state dir");
  }
  StoreCopyInfo info;
  {
    auto checked = CheckStoreCopy(restoring);
    Status loaded = checked.status();
    if (checked.ok()) {
      info = *checked;
      // As the coordinator's start will: the schema brought up to date, every row verified.
      auto store = SqliteStateStore::Open(restoring, StateStoreOptions{}, "");
      loaded = store.status();
      if (store.ok()) loaded = (*store)->Load().status();
    }
    if (!loaded.ok()) {
      RemoveDatabaseFiles(restoring);
      return Status(loaded.code(), "the backup " + backup + " was not restored: " +
                                       loaded.message() + ". Nothing in " + dir + " changed");
    }
  }
  said.push_back("checked " + backup + ": store " + info.store_id + ", " +
                 std::to_string(info.jobs) + " jobs, " + std::to_string(info.studies) +
                 " studies, schema version " + std::to_string(info.schema_version));

  if (std::optional<std::string> marker = ReadMarker(marker_path);
      marker && *marker != info.store_id) {
    said.push_back("the state dir held store " + *marker + "; it now holds store " + info.store_id +
                   " (the backup's)");
  }
  if (fs::exists(db_path, ec)) {
    const std::string aside = db_path + ".replaced-" + std::to_string(NowMs());
    for (const char* end : {"", "-wal", "-shm"}) {
      if (!fs::exists(db_path + end, ec)) continue;
      if (::rename((db_path + end).c_str(), (aside + end).c_str()) != 0) {
        Status s = ErrnoStatus("rename " + db_path + end, errno);
        RemoveDatabaseFiles(restoring);
        return s.WithContext("setting the current database aside");
      }
    }
    said.push_back("the database it replaces is kept as " + aside);
  }
  if (::rename(restoring.c_str(), db_path.c_str()) != 0) {
    return ErrnoStatus("rename " + restoring + " to " + db_path, errno);
  }
  COHORT_RETURN_IF_ERROR(SyncDirectory(dir));
  COHORT_RETURN_IF_ERROR(WriteMarker(dir, info.store_id));
  if (::geteuid() == 0 && dir_st.st_uid != 0) {
    // Run as root on the daemon's state dir: the files stay the daemon's.
    for (const std::string& path : {db_path, marker_path}) {
      if (::chown(path.c_str(), dir_st.st_uid, dir_st.st_gid) != 0) {
        return ErrnoStatus("chown " + path, errno);
      }
    }
  }
  said.push_back("restored " + db_path + " from " + backup + "; start cohort-coordinator on " +
                 dir);
  return said;
}

}  // namespace cohort::coordinator
