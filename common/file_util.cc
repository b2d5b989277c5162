#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace cohort {

StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(std::string(what) + " " + path, errno);
  std::string data;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus("reading " + std::string(what) + " " + path, err);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
}

namespace {

// What OpenRegularFile and OpenNoFollow share: `name` in `dir_fd` opened without following a
// link or blocking on a FIFO, kept only when it is a folder (`folder`) or else a regular file.
// None held on failure, with `*error` the errno, or 0 when the entry is of another kind.
UniqueFd OpenKindNoFollow(int dir_fd, const std::string& name, bool folder, struct stat* st,
                          int* error) {
  const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (folder ? O_DIRECTORY : 0);
  UniqueFd fd(::openat(dir_fd, name.c_str(), flags));
  if (!fd.ok() || ::fstat(fd.get(), st) != 0) {
    *error = errno;
    return UniqueFd();
  }
  if (folder ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode)) {
    *error = 0;
    return UniqueFd();
  }
  return fd;
}

}  // namespace

StatusOr<int> OpenRegularFile(const std::string& path, std::string_view what, struct stat* st) {
  const std::string named = std::string(what) + " " + path;
  int error = 0;
  UniqueFd fd = OpenKindNoFollow(AT_FDCWD, path, /*folder=*/false, st, &error);
  if (fd.ok()) return fd.Release();
  if (error == ELOOP) return InvalidArgument(named + " is a symbolic link (not followed)");
  if (error == 0) return InvalidArgument(named + " is not a regular file");
  return ErrnoStatus(named, error);
}

Status ReadAt(int fd, uint64_t offset, uint64_t max, std::string* out, std::string_view what) {
  constexpr uint64_t kChunk = 1 << 20;
  uint64_t got = 0;
  while (got < max) {
    const size_t start = out->size();
    const uint64_t want = std::min(max - got, kChunk);
    out->resize(start + want);
    ssize_t n = ::pread(fd, out->data() + start, want, static_cast<off_t>(offset + got));
    const int err = errno;
    out->resize(start + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n < 0) {
      if (err == EINTR) continue;
      return ErrnoStatus(std::string(what), err);
    }
    if (n == 0) break;
    got += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus("fsync " + dir, err);
  return Status::Ok();
}

Status SyncFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.ok()) return ErrnoStatus("open " + path, errno);
  if (::fsync(fd.get()) != 0) return ErrnoStatus("fsync " + path, errno);
  return fd.Close(path);
}

namespace {

Status Replace(const std::string& path, std::string_view text, mode_t mode, bool durably) {
  const std::string tmp = path + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  if (!fd.ok()) return ErrnoStatus("create " + tmp, errno);
  // The umask may have taken bits that `mode` asks for.
  if (::fchmod(fd.get(), mode) != 0) return ErrnoStatus("chmod " + tmp, errno);
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = ::write(fd.get(), text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("write " + tmp, errno);
    written += static_cast<size_t>(n);
  }
  if (durably && ::fsync(fd.get()) != 0) return ErrnoStatus("fsync " + tmp, errno);
  COHORT_RETURN_IF_ERROR(fd.Close(tmp));
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus("rename " + tmp, errno);
  if (!durably) return Status::Ok();
  const size_t slash = path.rfind('/');
  return SyncDirectory(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));
}

}  // namespace

Status ReplaceFile(const std::string& path, std::string_view text, mode_t mode) {
  return Replace(path, text, mode, /*durably=*/false);
}

Status ReplaceFileDurably(const std::string& path, std::string_view text, mode_t mode) {
  return Replace(path, text, mode, /*durably=*/true);
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd::UniqueFd(UniqueFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

Status UniqueFd::Close(const std::string& path) {
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return ErrnoStatus("close " + path, errno);
  return Status::Ok();
}

int UniqueFd::Release() { return std::exchange(fd_, -1); }

UniqueFd OpenNoFollow(int dir_fd, const std::string& name, bool folder, struct stat* st) {
  int error = 0;
  return OpenKindNoFollow(dir_fd, name, folder, st, &error);
}

}  // namespace cohort
