#include "coordinator/log_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/file_util.h"

namespace cohort::coordinator {
namespace {
namespace fs = std::filesystem;

std::string Header(const std::string& replica, int attempt) {
  return "==== " + replica + " attempt " + std::to_string(attempt) + " ====\n";
}

// Reads up to `n` bytes of `path` from `offset` into `out`.
Status ReadRange(const std::string& path, uint64_t offset, uint64_t n, std::string* out) {
  if (n == 0) return Status::Ok();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path, errno);
  Status read = ReadAt(fd, offset, n, out, "read " + path);
  ::close(fd);
  return read;
}

// A times record: the chunk's offset in its file and its arrival time, each 8 bytes little-endian.
constexpr uint64_t kTimeRecordSize = 16;

struct TimeRecord {
  uint64_t offset;
  int64_t time_ms;
};

void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}

uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// Appends all of `data` to `path` (created when missing).
Status AppendAll(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return ErrnoStatus("open " + path, errno);
  size_t written = 0;
  while (written < data.size()) {
    ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus("write " + path, err);
    }
    written += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::Ok();
}

// The records of the times file `path` that cover file bytes [lo, hi): the last one at or before
// `lo` (if any), then every one before `hi`. A missing file has none.
StatusOr<std::vector<TimeRecord>> ReadTimes(const std::string& path, uint64_t lo, uint64_t hi) {
  std::vector<TimeRecord> out;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return out;
    return ErrnoStatus("stat " + path, errno);
  }
  const uint64_t count = static_cast<uint64_t>(st.st_size) / kTimeRecordSize;
  std::string bytes;
  auto record = [&](uint64_t i) -> StatusOr<TimeRecord> {
    bytes.clear();
    COHORT_RETURN_IF_ERROR(ReadRange(path, i * kTimeRecordSize, kTimeRecordSize, &bytes));
    if (bytes.size() != kTimeRecordSize) return Internal("short read of " + path);
    return TimeRecord{GetU64(bytes.data()), static_cast<int64_t>(GetU64(bytes.data() + 8))};
  };
  // The first record past `lo` (offsets ascend), then start one before it.
  uint64_t first = 0, last = count;
  while (first < last) {
    uint64_t mid = first + (last - first) / 2;
    COHORT_ASSIGN_OR_RETURN(TimeRecord r, record(mid));
    if (r.offset <= lo) {
      first = mid + 1;
    } else {
      last = mid;
    }
  }
  constexpr uint64_t kBatch = 256;
  for (uint64_t i = first > 0 ? first - 1 : 0; i < count; i += kBatch) {
    bytes.clear();
    uint64_t n = std::min(kBatch, count - i);
    COHORT_RETURN_IF_ERROR(ReadRange(path, i * kTimeRecordSize, n * kTimeRecordSize, &bytes));
    for (uint64_t k = 0; k * kTimeRecordSize + kTimeRecordSize <= bytes.size(); ++k) {
      const char* p = bytes.data() + k * kTimeRecordSize;
      TimeRecord r{GetU64(p), static_cast<int64_t>(GetU64(p + 8))};
      if (r.offset >= hi) return out;
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

std::string LogStore::TimesPathOf(const std::string& job, const std::string& replica,
                                  int attempt) const {
  return root_ + "/" + job + "/" + replica + "/attempt-" + std::to_string(attempt) + ".times";
}

std::string LogStore::PathOf(const std::string& job, const std::string& replica,
                             int attempt) const {
  return root_ + "/" + job + "/" + replica + "/attempt-" + std::to_string(attempt) + ".log";
}

uint64_t LogStore::Size(const std::string& job, const std::string& replica, int attempt) {
  std::string path = PathOf(job, replica, attempt);
  auto it = sizes_.find(path);
  if (it != sizes_.end()) return it->second;
  struct stat st;
  uint64_t size = ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  sizes_[path] = size;
  return size;
}

StatusOr<uint64_t> LogStore::Append(const std::string& job, const std::string& replica, int attempt,
                                    uint64_t offset, std::string_view data, int64_t arrival_ms) {
  uint64_t size = Size(job, replica, attempt);
  if (offset != size || data.empty()) return size;
  std::string path = PathOf(job, replica, attempt);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return Internal("create log dir for " + path + ": " + ec.message());
  if (Status written = AppendAll(path, data); !written.ok()) {
    sizes_.erase(path);  // re-stat next time: a partial write may have landed
    return written;
  }
  sizes_[path] = size + data.size();

  // The bytes are held whatever happens to their time: a lost record only makes them read as
  // arriving with the chunk before.
  std::string times = TimesPathOf(job, replica, attempt);
  if (times_checked_.insert(times).second) {
    // A crash may have left a torn last record: cut it, so that records stay aligned.
    struct stat st;
    if (::stat(times.c_str(), &st) == 0 && st.st_size % kTimeRecordSize != 0 &&
        ::truncate(times.c_str(), st.st_size - st.st_size % kTimeRecordSize) != 0) {
      spdlog::warn("log store: cutting torn record of {}: {}", times, std::strerror(errno));
    }
  }
  char record[kTimeRecordSize];
  PutU64(record, size);
  PutU64(record + 8, static_cast<uint64_t>(arrival_ms));
  if (Status written = AppendAll(times, std::string_view(record, sizeof(record))); !written.ok()) {
    spdlog::warn("log store: arrival time of {} bytes at {} of {} not kept: {}", data.size(), size,
                 path, written.ToString());
  }
  return size + data.size();
}

void LogStore::MarkEof(const std::string& job, const std::string& replica, int attempt) {
  eof_.insert({job, replica, attempt});
}

bool LogStore::Eof(const std::string& job, const std::string& replica, int attempt) const {
  return eof_.count({job, replica, attempt}) > 0;
}

StatusOr<LogStore::ReadResult> LogStore::Read(const std::string& job, const std::string& replica,
                                              int attempt, int max_attempt, uint64_t offset,
                                              uint32_t max_bytes, bool with_times) {
  struct Segment {
    std::string header;
    std::string path;
    uint64_t size;
    std::string times;
  };
  std::vector<Segment> segments;
  if (attempt >= 0) {
    segments.push_back({"", PathOf(job, replica, attempt), Size(job, replica, attempt),
                        TimesPathOf(job, replica, attempt)});
  } else {
    for (int a = 0; a <= max_attempt; ++a) {
      std::string path = PathOf(job, replica, a);
      uint64_t size = Size(job, replica, a);
      if (size == 0 && !fs::exists(path)) continue;
      segments.push_back({Header(replica, a), path, size, TimesPathOf(job, replica, a)});
    }
  }
  ReadResult out;
  uint64_t base = 0;  // start of the current segment in the concatenation
  uint64_t pos = offset;
  uint64_t budget = max_bytes;
  for (const auto& seg : segments) {
    uint64_t hlen = seg.header.size();
    uint64_t seg_len = hlen + seg.size;
    if (budget > 0 && pos < base + seg_len) {
      uint64_t in = pos - base;
      if (with_times && in < hlen) {
        // The header line carries the time of the attempt's first chunk.
        COHORT_ASSIGN_OR_RETURN(auto first, ReadTimes(seg.times, 0, 1));
        if (!first.empty()) out.marks.push_back({pos, first.front().time_ms});
      }
      if (in < hlen) {
        uint64_t n = std::min<uint64_t>(hlen - in, budget);
        out.data.append(seg.header, in, n);
        pos += n;
        budget -= n;
        in += n;
      }
      if (budget > 0 && in >= hlen) {
        uint64_t file_off = in - hlen;
        uint64_t n = std::min<uint64_t>(seg.size - file_off, budget);
        size_t before = out.data.size();
        COHORT_RETURN_IF_ERROR(ReadRange(seg.path, file_off, n, &out.data));
        uint64_t got = out.data.size() - before;
        if (with_times && got > 0) {
          COHORT_ASSIGN_OR_RETURN(auto records, ReadTimes(seg.times, file_off, file_off + got));
          for (const auto& r : records) {
            Mark mark{base + hlen + std::max(r.offset, file_off), r.time_ms};
            if (!out.marks.empty() && out.marks.back().offset == mark.offset) out.marks.pop_back();
            out.marks.push_back(mark);
          }
        }
        pos += got;
        budget -= got;
      }
    }
    base += seg_len;
  }
  out.next_offset = std::max(pos, offset);
  out.at_end = out.next_offset >= base;
  return out;
}

Status LogStore::AppendStacks(const std::string& job, const std::string& replica, int attempt,
                              std::string_view text) {
  std::string path =
      root_ + "/" + job + "/" + replica + "/attempt-" + std::to_string(attempt) + ".stacks";
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return Internal("create log dir for " + path + ": " + ec.message());
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return Internal("write " + path + ": failed");
  return Status::Ok();
}

StatusOr<LogStore::ReadResult> LogStore::ReadStacks(const std::string& job,
                                                    const std::string& replica, int attempt,
                                                    int max_attempt, uint64_t offset,
                                                    uint32_t max_bytes) const {
  std::string all;
  for (int a = attempt >= 0 ? attempt : 0; a <= (attempt >= 0 ? attempt : max_attempt); ++a) {
    std::ifstream in(
        root_ + "/" + job + "/" + replica + "/attempt-" + std::to_string(a) + ".stacks",
        std::ios::binary);
    if (!in) continue;
    std::ostringstream text;
    text << in.rdbuf();
    if (attempt < 0) all += Header(replica, a);
    all += text.str();
  }
  ReadResult out;
  uint64_t from = std::min<uint64_t>(offset, all.size());
  out.data = all.substr(from, max_bytes);
  out.next_offset = from + out.data.size();
  out.at_end = out.next_offset >= all.size();
  return out;
}

Status LogStore::DeleteJob(const std::string& job) {
  const std::string dir = root_ + "/" + job;
  const std::string prefix = dir + "/";
  for (auto it = sizes_.lower_bound(prefix);
       it != sizes_.end() && it->first.rfind(prefix, 0) == 0;) {
    it = sizes_.erase(it);
  }
  for (auto it = times_checked_.lower_bound(prefix);
       it != times_checked_.end() && it->rfind(prefix, 0) == 0;) {
    it = times_checked_.erase(it);
  }
  for (auto it = eof_.begin(); it != eof_.end();) {
    it = std::get<0>(*it) == job ? eof_.erase(it) : std::next(it);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) return ErrnoStatus("cannot remove the logs of job " + job + " (" + dir + ")", ec.value());
  return Status::Ok();
}

}  // namespace cohort::coordinator
