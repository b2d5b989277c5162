#include "coordinator/state_backups.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "common/file_util.h"
#include "coordinator/sqlite_db.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kRetryMs = 60'000;
constexpr const char* kPrefix = "state-";
constexpr const char* kSuffix = ".db";
constexpr const char* kPartialPrefix = ".state-";
constexpr const char* kPartialSuffix = ".db.partial";

// The finished backups in `dir`, oldest first.
std::vector<std::string> Backups(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (StateBackups::TimeOfName(name) && it->is_regular_file(ec)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The worker's part: check, sync, name, prune. Touches only `partial` and the directory.
StateBackupResult FinishCopy(std::string dir, std::string partial, std::string final_name,
                             int keep) {
  StateBackupResult r;
  auto info = CheckStoreCopy(partial);
  Status s = info.status();
  if (s.ok()) s = SyncFile(partial);
  const std::string path = dir + "/" + final_name;
  if (s.ok() && ::rename(partial.c_str(), path.c_str()) != 0) {
    s = ErrnoStatus("rename " + partial + " to " + path, errno);
  }
  if (s.ok()) s = SyncDirectory(dir);
  if (!s.ok()) {
    RemoveDatabaseFiles(partial);
    r.error = s.ToString();
    return r;
  }
  r.ok = true;
  r.path = path;
  r.info = std::move(*info);
  std::error_code ec;
  r.bytes = fs::file_size(path, ec);
  std::vector<std::string> kept = Backups(dir);
  size_t removed = 0;
  for (size_t i = 0; i + keep < kept.size(); ++i, ++removed) {
    if (!fs::remove(dir + "/" + kept[i], ec) && ec) {
      spdlog::warn("state backup: cannot remove the old backup {}/{}: {}", dir, kept[i],
                   ec.message());
    }
  }
  if (removed > 0) {
    if (Status synced = SyncDirectory(dir); !synced.ok()) {
      spdlog::warn("state backup: {}", synced.ToString());
    }
  }
  r.kept = static_cast<int>(kept.size() - removed);
  return r;
}

}  // namespace

std::string StateBackups::FileName(int64_t ms) {
  time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%04d%02d%02dT%02d%02d%02d.%03dZ%s", kPrefix, tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000), kSuffix);
  return buf;
}

std::optional<int64_t> StateBackups::TimeOfName(const std::string& name) {
  // state-YYYYmmddTHHMMSS.mmmZ.db
  if (name.size() != 6 + 15 + 5 + 3 || !name.starts_with(kPrefix) || !name.ends_with(kSuffix)) {
    return std::nullopt;
  }
  int y, mo, d, h, mi, sec, milli;
  char t, dot, z;
  int used = 0;
  if (std::sscanf(name.c_str() + 6, "%4d%2d%2d%c%2d%2d%2d%c%3d%c%n", &y, &mo, &d, &t, &h, &mi, &sec,
                  &dot, &milli, &z, &used) != 10 ||
      used != 20 || t != 'T' || dot != '.' || z != 'Z') {
    return std::nullopt;
  }
  struct tm tm = {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  time_t secs = timegm(&tm);
  if (secs == static_cast<time_t>(-1)) return std::nullopt;
  return static_cast<int64_t>(secs) * 1000 + milli;
}

StateBackups::StateBackups(StateBackupOptions options, int64_t now_ms)
    : options_(std::move(options)) {
  counters_.enabled = enabled();
  if (!enabled()) return;
  std::error_code ec;
  for (fs::directory_iterator it(options_.dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.starts_with(kPartialPrefix) &&
        (name.ends_with(kPartialSuffix) ||
         name.ends_with(std::string(kPartialSuffix) + "-journal"))) {
      spdlog::info("state backup: removing {}/{}, left by a backup that did not end", options_.dir,
                   name);
      fs::remove(it->path(), ec);
    }
  }
  std::vector<std::string> backups = Backups(options_.dir);
  next_due_ms_ = now_ms;
  if (!backups.empty()) {
    int64_t newest = *TimeOfName(backups.back());
    counters_.last_success_ms = newest;
    next_due_ms_ = std::min(newest + options_.every_ms, now_ms + options_.every_ms);
  }
  spdlog::info("state backup: into {} every {} s, keeping {}; {} there now, the next at +{} s",
               options_.dir, options_.every_ms / 1000, options_.keep, backups.size(),
               std::max<int64_t>(0, next_due_ms_ - now_ms) / 1000);
}

StateBackups::~StateBackups() {
  if (copy_) {
    copy_.reset();
    RemoveDatabaseFiles(partial_);
  }
  if (finishing_.valid()) finishing_.wait();
}

void StateBackups::RequestNow() {
  if (enabled()) requested_ = true;
}

void StateBackups::Begin(StateStore& store, int64_t now_ms) {
  started_ms_ = now_ms;
  ++begun_;
  current_requested_ = std::exchange(requested_, false);
  next_due_ms_ = now_ms + options_.every_ms;
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  const std::string name = FileName(now_ms);
  partial_ =
      options_.dir + "/" + kPartialPrefix + name.substr(std::string(kPrefix).size()) + ".partial";
  RemoveDatabaseFiles(partial_);
  auto copy = store.BeginCopy(partial_, options_.pages_per_step);
  if (!copy.ok()) {
    RemoveDatabaseFiles(partial_);
    StateBackupResult r;
    r.error = copy.status().ToString();
    pending_failure_ = std::move(r);
    return;
  }
  copy_ = std::move(*copy);
}

void StateBackups::Ended(StateBackupResult r, int64_t now_ms, std::vector<StateBackupResult>& out) {
  r.started_ms = started_ms_;
  r.ended_ms = now_ms;
  r.requested = current_requested_;
  r.number = begun_;
  if (r.ok) {
    ++counters_.succeeded;
    counters_.last_success_ms = started_ms_;
    counters_.last_bytes = r.bytes;
    counters_.last_duration_ms = now_ms - started_ms_;
  } else {
    ++counters_.failed;
    next_due_ms_ = std::min(next_due_ms_, now_ms + std::min(options_.every_ms, kRetryMs));
  }
  out.push_back(std::move(r));
}

std::vector<StateBackupResult> StateBackups::Step(StateStore& store, int64_t now_ms) {
  std::vector<StateBackupResult> out;
  if (!enabled()) return out;
  if (finishing_.valid() &&
      finishing_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    Ended(finishing_.get(), now_ms, out);
  }
  if (!busy() && (requested_ || now_ms >= next_due_ms_)) Begin(store, now_ms);
  if (pending_failure_) {
    Ended(std::move(*pending_failure_), now_ms, out);
    pending_failure_.reset();
    return out;
  }
  if (copy_) {
    auto done = copy_->Step();
    if (!done.ok() || *done) copy_.reset();
    if (!done.ok()) {
      RemoveDatabaseFiles(partial_);
      StateBackupResult r;
      r.error = done.status().ToString();
      Ended(std::move(r), now_ms, out);
    } else if (*done) {
      finishing_ = std::async(std::launch::async, FinishCopy, options_.dir, partial_,
                              FileName(started_ms_), options_.keep);
    }
  }
  return out;
}

std::vector<StateBackupResult> StateBackups::Finish(StateStore& store, int64_t now_ms) {
  std::vector<StateBackupResult> out;
  while (busy()) {
    if (finishing_.valid()) finishing_.wait();
    for (StateBackupResult& r : Step(store, now_ms)) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace cohort::coordinator
