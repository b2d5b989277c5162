#include "coordinator/journal.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "common/file_util.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;

uint32_t Crc(std::string_view data) {
  return static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
}

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

Status WriteAll(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + what, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// Writes `data` to path.tmp, fsyncs it, renames it over `path` and fsyncs the directory.
Status WriteFileAtomically(const std::string& dir, const std::string& path, std::string_view data) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return ErrnoStatus("open " + tmp, errno);
  Status s = WriteAll(fd, data, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoStatus("fsync " + tmp, errno);
  ::close(fd);
  COHORT_RETURN_IF_ERROR(s);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus("rename " + tmp, errno);
  return SyncDirectory(dir);
}

struct ParseResult {
  size_t good_bytes = 0;   // bytes of well-formed records from the start
  bool torn_tail = false;  // the rest is one torn/corrupt last record
  bool corrupt_middle = false;
  std::string problem;
};

// Splits `data` into records appended to `out`.
ParseResult ParseRecords(const std::string& data, std::vector<std::string>* out) {
  ParseResult r;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t left = data.size() - pos;
    if (left < 8) {
      r.torn_tail = true;
      r.problem = "a record header of " + std::to_string(left) + " bytes at offset " +
                  std::to_string(pos);
      break;
    }
    uint32_t len = GetU32(data.data() + pos);
    uint32_t crc = GetU32(data.data() + pos + 4);
    if (len > Journal::kMaxRecordBytes || len > left - 8) {
      r.torn_tail = true;
      r.problem = "a record of " + std::to_string(len) + " bytes at offset " +
                  std::to_string(pos) + " that runs past the end (" + std::to_string(left - 8) +
                  " bytes left)";
      break;
    }
    std::string_view payload(data.data() + pos + 8, len);
    if (Crc(payload) != crc) {
      bool last = pos + 8 + len == data.size();
      r.problem = "a checksum mismatch in the record at offset " + std::to_string(pos);
      if (last) {
        r.torn_tail = true;
      } else {
        r.corrupt_middle = true;
      }
      break;
    }
    out->emplace_back(payload);
    pos += 8 + len;
  }
  r.good_bytes = pos;
  return r;
}

}  // namespace

std::string Journal::Frame(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  PutU32(out, static_cast<uint32_t>(payload.size()));
  PutU32(out, Crc(payload));
  out.append(payload);
  return out;
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& dir, JournalReplay* replay) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("create state dir " + dir + ": " + ec.message());
  *replay = JournalReplay{};
  std::string snapshot_path = dir + "/snapshot";
  std::string journal_path = dir + "/journal";

  if (fs::exists(snapshot_path)) {
    COHORT_ASSIGN_OR_RETURN(std::string data, ReadFileToString(snapshot_path, "journal file"));
    ParseResult r = ParseRecords(data, &replay->records);
    if (r.torn_tail || r.corrupt_middle) {
      return DataLoss("snapshot " + snapshot_path + " is damaged: " + r.problem);
    }
  }
  size_t snapshot_records = replay->records.size();

  std::string data;
  if (fs::exists(journal_path)) {
    COHORT_ASSIGN_OR_RETURN(data, ReadFileToString(journal_path, "journal file"));
  }
  ParseResult r = ParseRecords(data, &replay->records);
  size_t journal_records = replay->records.size() - snapshot_records;

  if (r.corrupt_middle) {
    replay->stopped_at_corruption = true;
    replay->corruption = r.problem;
    spdlog::error("journal {}: {}; replay stopped there ({} records kept, later ones dropped)",
                  journal_path, r.problem, replay->records.size());
    std::string aside = journal_path + ".corrupt-" +
                        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count());
    if (::rename(journal_path.c_str(), aside.c_str()) != 0) {
      return ErrnoStatus("rename " + journal_path, errno);
    }
    spdlog::error("journal: the damaged file is kept as {}", aside);
    std::string snapshot;
    for (const auto& rec : replay->records) snapshot += Frame(rec);
    COHORT_RETURN_IF_ERROR(WriteFileAtomically(dir, snapshot_path, snapshot));
    journal_records = 0;
  } else if (r.torn_tail) {
    replay->truncated_tail = true;
    spdlog::warn("journal {}: cutting off a torn last record ({}); {} records kept",
                 journal_path, r.problem, replay->records.size());
    if (::truncate(journal_path.c_str(), static_cast<off_t>(r.good_bytes)) != 0) {
      return ErrnoStatus("truncate " + journal_path, errno);
    }
  }

  bool created = !fs::exists(journal_path);
  int fd = ::open(journal_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return ErrnoStatus("open " + journal_path, errno);
  std::unique_ptr<Journal> journal(new Journal(dir, fd));
  journal->journal_records_ = journal_records;
  if (created || r.torn_tail) {
    if (::fsync(fd) != 0) return ErrnoStatus("fsync " + journal_path, errno);
    COHORT_RETURN_IF_ERROR(SyncDirectory(dir));
  }
  return journal;
}

Status Journal::Append(std::string_view payload) {
  if (payload.size() > kMaxRecordBytes) {
    return ResourceExhausted("journal record of " + std::to_string(payload.size()) +
                             " bytes exceeds the limit");
  }
  COHORT_RETURN_IF_ERROR(WriteAll(fd_, Frame(payload), dir_ + "/journal"));
  ++journal_records_;
  dirty_ = true;
  return Status::Ok();
}

Status Journal::Sync() {
  if (!dirty_) return Status::Ok();
  if (::fdatasync(fd_) != 0) return ErrnoStatus("fdatasync " + dir_ + "/journal", errno);
  dirty_ = false;
  return Status::Ok();
}

Status Journal::Compact(const std::vector<std::string>& records) {
  COHORT_RETURN_IF_ERROR(Sync());
  std::string snapshot;
  for (const auto& rec : records) snapshot += Frame(rec);
  COHORT_RETURN_IF_ERROR(WriteFileAtomically(dir_, dir_ + "/snapshot", snapshot));
  std::string journal_path = dir_ + "/journal";
  if (::ftruncate(fd_, 0) != 0) return ErrnoStatus("ftruncate " + journal_path, errno);
  if (::fsync(fd_) != 0) return ErrnoStatus("fsync " + journal_path, errno);
  journal_records_ = 0;
  return Status::Ok();
}

}  // namespace cohort::coordinator
