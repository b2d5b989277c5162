#include "common/storage_marker.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "common/file_util.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHeader = "cohort-storage-marker 1\n";

std::string ErrnoText(int err) { return std::strerror(err); }

// The normalised form of an absolute path without a trailing separator ("/" stays "/").
std::string Normal(const std::string& path) {
  std::string out = fs::path(path).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace

std::string StorageMarkerPath(const std::string& root) {
  return (fs::path(root) / kStorageMarkerName).string();
}

std::string NewStorageToken() {
  std::random_device random;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 4; ++i) {
    uint32_t word = random();
    for (int k = 0; k < 8; ++k) {
      token += kHex[word & 0xf];
      word >>= 4;
    }
  }
  return token;
}

Status WriteStorageMarker(const std::string& root, const std::string& token) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return Unavailable("cannot create the output root " + root + ": " + ec.message());
  const std::string path = StorageMarkerPath(root);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("cannot create " + tmp + ": " + ErrnoText(errno));
  const std::string text = std::string(kHeader) + token + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int err = errno;
  if (ok && ::fsync(fd) != 0) {
    ok = false;
    err = errno;
  }
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return Unavailable("cannot write " + tmp + ": " + ErrnoText(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    return Unavailable("cannot rename " + tmp + " to " + path + ": " + ErrnoText(err));
  }
  return SyncDirectory(root);
}

StatusOr<std::string> ReadStorageMarker(const std::string& root) {
  std::error_code ec;
  fs::file_status st = fs::status(root, ec);
  if (!fs::exists(st)) return NotFound("no directory " + root);
  if (!fs::is_directory(st)) return FailedPrecondition(root + " is not a directory");
  const std::string path = StorageMarkerPath(root);
  auto text = ReadFileToString(path, "storage marker");
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return NotFound("no storage marker " + path);
    }
    return text.status();
  }
  const std::string header = kHeader;
  if (text->rfind(header, 0) != 0 || text->size() <= header.size() || text->back() != '\n') {
    return DataLoss(path + " is not a storage marker");
  }
  std::string token = text->substr(header.size(), text->size() - header.size() - 1);
  if (token.empty() || token.find('\n') != std::string::npos) {
    return DataLoss(path + " is not a storage marker");
  }
  return token;
}

bool PathIsUnder(const std::string& path, const std::string& root) {
  if (path.empty() || root.empty() || path[0] != '/' || root[0] != '/') return false;
  const std::string p = Normal(path);
  const std::string r = Normal(root);
  if (r == "/") return true;
  return p == r || (p.size() > r.size() && p.compare(0, r.size(), r) == 0 && p[r.size()] == '/');
}

}  // namespace cohort
