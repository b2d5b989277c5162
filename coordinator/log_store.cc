#include "coordinator/log_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <vector>

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
  size_t start = out->size();
  out->resize(start + n);
  uint64_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, out->data() + start + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus("read " + path, err);
    }
    if (r == 0) break;
    got += static_cast<uint64_t>(r);
  }
  ::close(fd);
  out->resize(start + got);
  return Status::Ok();
}

}  // namespace

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
                                    uint64_t offset, std::string_view data) {
  uint64_t size = Size(job, replica, attempt);
  if (offset != size || data.empty()) return size;
  std::string path = PathOf(job, replica, attempt);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return Internal("create log dir for " + path + ": " + ec.message());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return ErrnoStatus("open " + path, errno);
  size_t written = 0;
  while (written < data.size()) {
    ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      sizes_.erase(path);  // re-stat next time: a partial write may have landed
      return ErrnoStatus("write " + path, err);
    }
    written += static_cast<size_t>(n);
  }
  ::close(fd);
  sizes_[path] = size + data.size();
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
                                              uint32_t max_bytes) {
  struct Segment {
    std::string header;
    std::string path;
    uint64_t size;
  };
  std::vector<Segment> segments;
  if (attempt >= 0) {
    segments.push_back({"", PathOf(job, replica, attempt), Size(job, replica, attempt)});
  } else {
    for (int a = 0; a <= max_attempt; ++a) {
      std::string path = PathOf(job, replica, a);
      uint64_t size = Size(job, replica, a);
      if (size == 0 && !fs::exists(path)) continue;
      segments.push_back({Header(replica, a), path, size});
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

}  // namespace cohort::coordinator
