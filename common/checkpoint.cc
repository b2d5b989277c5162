#include "common/checkpoint.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "common/file_util.h"

namespace cohort {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr char kManifest[] = "MANIFEST";
constexpr char kLatest[] = "LATEST";
constexpr char kFormat[] = "cohort-checkpoint-1";
constexpr char kPrefix[] = "ckpt-";
constexpr char kTmpSuffix[] = ".tmp";
constexpr size_t kChunk = 1 << 20;
// A manifest names every file of a checkpoint in a line each: this holds a hundred thousand.
constexpr uint64_t kMaxManifestBytes = 16 << 20;

uint32_t Crc32(uint32_t crc, const void* data, size_t n) {
  return static_cast<uint32_t>(crc32_z(crc, static_cast<const Bytef*>(data), n));
}

uint32_t Crc32(std::string_view s) { return Crc32(0, s.data(), s.size()); }

Status FsError(std::string_view what, const std::string& path, const std::error_code& ec) {
  return ErrnoStatus(std::string(what) + " " + path, ec.value());
}

// Writes `bytes` to `path` (created or truncated) and fsyncs it.
Status WriteFileDurably(const std::string& path, std::string_view bytes) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ErrnoStatus("create " + path, errno);
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd.get(), p, std::min(left, kChunk * 64));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + path, errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return ErrnoStatus("fsync " + path, errno);
  return fd.Close(path);
}

// Reads a file, returning its size and CRC; the data itself only when `data` is non-null. Only a
// regular file is read, not through a symbolic link (common/file_util.h: a checkpoint is its
// job's to write, and the agent that looks one up runs as root), and none larger than
// `max_bytes` (kDataLoss says how large it is).
Status ReadAndChecksum(const std::string& path, uint64_t max_bytes, uint64_t* size, uint32_t* crc,
                       std::string* data) {
  struct stat st {};
  COHORT_ASSIGN_OR_RETURN(int opened, OpenRegularFile(path, "file", &st));
  UniqueFd fd(opened);
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return DataLoss(path + " has " + std::to_string(st.st_size) + " bytes, more than the " +
                    std::to_string(max_bytes) + " expected");
  }
  std::string buf(kChunk, '\0');
  *size = 0;
  *crc = 0;
  while (*size <= max_bytes) {  // a file that grows while it is read: a chunk past at most
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read " + path, errno);
    }
    if (n == 0) break;
    *crc = Crc32(*crc, buf.data(), static_cast<size_t>(n));
    *size += static_cast<uint64_t>(n);
    if (data != nullptr) data->append(buf.data(), static_cast<size_t>(n));
  }
  return Status::Ok();
}

// A checkpoint-relative file name: non-empty, relative, no "." or ".." or empty components.
Status CheckFileName(std::string_view name) {
  if (name.empty()) return InvalidArgument("checkpoint file name is empty");
  if (name.find('\0') != std::string_view::npos) {
    return InvalidArgument("checkpoint file name contains a NUL byte");
  }
  if (name.front() == '/') {
    return InvalidArgument("checkpoint file name must be relative: " + std::string(name));
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    std::string_view part = name.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty() || part == "." || part == "..") {
      return InvalidArgument("bad checkpoint file name: " + std::string(name));
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (name == kManifest) return InvalidArgument("MANIFEST is reserved in a checkpoint");
  return Status::Ok();
}

std::string JoinPath(const std::string& dir, std::string_view name) {
  std::string out = dir;
  if (!out.empty() && out.back() != '/') out += '/';
  out += name;
  return out;
}

// The manifest text for `info`: the JSON object plus "manifest_crc32", the CRC-32 of the
// object's compact dump without that key.
StatusOr<std::string> EncodeManifest(const CheckpointInfo& info) {
  try {
    json files = json::array();
    for (const auto& f : info.files) {
      files.push_back({{"name", f.name}, {"size", f.size}, {"crc32", f.crc32}});
    }
    json m = {{"format", kFormat}, {"step", info.step}, {"files", files}};
    uint32_t crc = Crc32(m.dump());
    m["manifest_crc32"] = crc;
    return m.dump(1) + "\n";
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("cannot encode checkpoint manifest: ") + e.what());
  }
}

StatusOr<CheckpointInfo> DecodeManifest(const std::string& text, const std::string& path) {
  auto bad = [&](const std::string& why) { return DataLoss(path + "/MANIFEST: " + why); };
  CheckpointInfo info;
  info.path = path;
  try {
    json m = json::parse(text);
    if (!m.is_object()) return bad("not a JSON object");
    auto crc_it = m.find("manifest_crc32");
    if (crc_it == m.end() || !crc_it->is_number_unsigned()) return bad("no manifest_crc32");
    uint32_t want = crc_it->get<uint32_t>();
    m.erase("manifest_crc32");
    if (Crc32(m.dump()) != want) return bad("manifest checksum mismatch (corrupted)");
    if (m.value("format", "") != kFormat) return bad("unknown format");
    if (!m.contains("step") || !m["step"].is_number_integer()) return bad("no step");
    info.step = m["step"].get<int64_t>();
    if (!m.contains("files") || !m["files"].is_array()) return bad("no file list");
    for (const auto& f : m["files"]) {
      if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("size") ||
          !f["size"].is_number_unsigned() || !f.contains("crc32") ||
          !f["crc32"].is_number_unsigned()) {
        return bad("malformed file entry");
      }
      CheckpointFile file;
      file.name = f["name"].get<std::string>();
      file.size = f["size"].get<uint64_t>();
      file.crc32 = f["crc32"].get<uint32_t>();
      if (!CheckFileName(file.name).ok()) return bad("bad file name " + file.name);
      info.files.push_back(std::move(file));
    }
  } catch (const json::exception& e) {
    return bad(std::string("unreadable: ") + e.what());
  }
  return info;
}

// Moves `from` to `to` (both in `dir`), then fsyncs `dir`.
Status RenameDurably(const std::string& from, const std::string& to, const std::string& dir) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoStatus("rename " + from + " to " + to, errno);
  }
  return SyncDirectory(dir);
}

// Removes a directory tree so that a crash midway leaves only a *.tmp name behind: rename first.
Status RemoveCheckpointDir(const std::string& dir, const std::string& path,
                           const std::string& name) {
  std::string doomed = path;
  if (!IsStagingName(name)) {
    doomed = JoinPath(dir, name + ".deleting" + kTmpSuffix);
    std::error_code ec;
    fs::remove_all(doomed, ec);
    if (::rename(path.c_str(), doomed.c_str()) != 0) {
      return ErrnoStatus("rename " + path + " to " + doomed, errno);
    }
  }
  std::error_code ec;
  fs::remove_all(doomed, ec);
  if (ec) return FsError("remove", doomed, ec);
  return Status::Ok();
}

struct Candidate {
  int64_t step;
  std::string name;
  std::string path;
};

// Committed checkpoints under `dir`, newest first. Fills `staging` with *.tmp directory names.
StatusOr<std::vector<Candidate>> ListCheckpoints(const std::string& dir,
                                                 std::vector<std::string>* staging) {
  std::vector<Candidate> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return FsError("list", dir, ec);
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::error_code type_ec;
    bool is_dir = it->is_directory(type_ec) && !it->is_symlink(type_ec);
    if (!is_dir) continue;
    if (IsStagingName(name)) {
      if (staging != nullptr) staging->push_back(name);
      continue;
    }
    int64_t step = ParseCheckpointName(name);
    if (step >= 0) out.push_back({step, name, JoinPath(dir, name)});
  }
  if (ec) return FsError("list", dir, ec);
  std::sort(out.begin(), out.end(),
            [](const Candidate& a, const Candidate& b) { return a.step > b.step; });
  return out;
}

// Manifest plus checks of every file: sizes only (quick) or sizes and checksums (full).
StatusOr<CheckpointInfo> CheckCheckpoint(const std::string& path, bool checksums) {
  COHORT_ASSIGN_OR_RETURN(CheckpointInfo info, ReadCheckpointManifest(path));
  for (const auto& f : info.files) {
    std::string file = JoinPath(path, f.name);
    if (!checksums) {
      struct stat st;
      if (::stat(file.c_str(), &st) != 0) {
        return DataLoss(path + ": " + f.name + " is missing (" + std::strerror(errno) + ")");
      }
      if (static_cast<uint64_t>(st.st_size) != f.size) {
        return DataLoss(path + ": " + f.name + " has " + std::to_string(st.st_size) +
                        " bytes, manifest says " + std::to_string(f.size));
      }
      continue;
    }
    uint64_t size = 0;
    uint32_t crc = 0;
    Status st = ReadAndChecksum(file, f.size, &size, &crc, nullptr);
    if (!st.ok()) return DataLoss(path + ": " + f.name + " is unreadable: " + st.message());
    if (size != f.size) {
      return DataLoss(path + ": " + f.name + " has " + std::to_string(size) +
                      " bytes, manifest says " + std::to_string(f.size));
    }
    if (crc != f.crc32) return DataLoss(path + ": " + f.name + " checksum mismatch (corrupted)");
  }
  return info;
}

}  // namespace

int64_t ParseCheckpointName(std::string_view name) {
  std::string_view prefix(kPrefix);
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) return -1;
  std::string_view digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  if (digits.size() > 1 && digits[0] == '0') return -1;  // one spelling per step
  int64_t step = -1;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return -1;
  return step;
}

bool IsStagingName(std::string_view name) {
  std::string_view prefix(kPrefix);
  std::string_view suffix(kTmpSuffix);
  return name.size() > prefix.size() + suffix.size() && name.substr(0, prefix.size()) == prefix &&
         name.substr(name.size() - suffix.size()) == suffix;
}

std::string CheckpointDirName(int64_t step) { return kPrefix + std::to_string(step); }

// ---------------------------------------------------------------------------------------------
// CheckpointWriter

CheckpointWriter::CheckpointWriter(std::string dir, int64_t step)
    : dir_(std::move(dir)), step_(step) {
  if (step_ < 0) {
    status_ = InvalidArgument("checkpoint step must be >= 0, got " + std::to_string(step_));
    return;
  }
  staging_ = JoinPath(dir_, CheckpointDirName(step_) + kTmpSuffix);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    status_ = FsError("create checkpoint directory", dir_, ec);
    return;
  }
  fs::remove_all(staging_, ec);  // left by a crash of an earlier attempt at this step
  if (ec) {
    status_ = FsError("remove stale", staging_, ec);
    return;
  }
  if (::mkdir(staging_.c_str(), 0755) != 0) {
    status_ = ErrnoStatus("mkdir " + staging_, errno);
  }
}

CheckpointWriter::~CheckpointWriter() {
  if (!committed_ && !staging_.empty()) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
}

Status CheckpointWriter::AddFile(std::string_view name, std::string_view bytes) {
  COHORT_RETURN_IF_ERROR(status_);
  if (committed_) return FailedPrecondition("checkpoint " + staging_ + " is already committed");
  COHORT_RETURN_IF_ERROR(CheckFileName(name));
  std::string path = JoinPath(staging_, name);
  size_t slash = name.rfind('/');
  if (slash != std::string_view::npos) {
    std::error_code ec;
    fs::create_directories(JoinPath(staging_, name.substr(0, slash)), ec);
    if (ec) return FsError("create directory for", path, ec);
  }
  COHORT_RETURN_IF_ERROR(WriteFileDurably(path, bytes));
  added_[std::string(name)] = {bytes.size(), Crc32(bytes)};
  return Status::Ok();
}

StatusOr<CheckpointInfo> CheckpointWriter::Commit() {
  COHORT_RETURN_IF_ERROR(status_);
  if (committed_) return FailedPrecondition("checkpoint " + staging_ + " is already committed");

  CheckpointInfo info;
  info.step = step_;
  info.path = JoinPath(dir_, CheckpointDirName(step_));

  // 1. Every file: size and checksum, fsynced; then every directory.
  std::vector<std::string> dirs = {staging_};
  std::error_code ec;
  fs::recursive_directory_iterator it(staging_, ec);
  if (ec) return FsError("list", staging_, ec);
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::directory_entry& entry = *it;
    std::string rel = entry.path().lexically_relative(staging_).generic_string();
    std::error_code type_ec;
    if (entry.is_symlink(type_ec)) {
      return InvalidArgument("checkpoint " + staging_ + ": symlinks are not supported: " + rel);
    }
    if (entry.is_directory(type_ec)) {
      dirs.push_back(entry.path().string());
      continue;
    }
    if (!entry.is_regular_file(type_ec)) {
      return InvalidArgument("checkpoint " + staging_ + ": not a regular file: " + rel);
    }
    if (rel == kManifest) {
      return InvalidArgument("checkpoint " + staging_ + ": MANIFEST is reserved");
    }
    CheckpointFile file;
    file.name = rel;
    auto added = added_.find(rel);
    uint64_t disk_size = entry.file_size(type_ec);
    if (added != added_.end() && !type_ec && disk_size == added->second.first) {
      file.size = added->second.first;  // written and fsynced by AddFile
      file.crc32 = added->second.second;
    } else {
      COHORT_RETURN_IF_ERROR(
          ReadAndChecksum(entry.path().string(), UINT64_MAX, &file.size, &file.crc32, nullptr));
      COHORT_RETURN_IF_ERROR(SyncFile(entry.path().string()));
    }
    info.files.push_back(std::move(file));
  }
  if (ec) return FsError("list", staging_, ec);
  std::sort(info.files.begin(), info.files.end(),
            [](const CheckpointFile& a, const CheckpointFile& b) { return a.name < b.name; });
  for (auto d = dirs.rbegin(); d != dirs.rend(); ++d) {
    COHORT_RETURN_IF_ERROR(SyncDirectory(*d));
  }

  // 2. MANIFEST last, fsynced, then the staging directory again (it gained an entry).
  COHORT_ASSIGN_OR_RETURN(std::string manifest, EncodeManifest(info));
  COHORT_RETURN_IF_ERROR(WriteFileDurably(JoinPath(staging_, kManifest), manifest));
  COHORT_RETURN_IF_ERROR(SyncDirectory(staging_));

  // 3. Publish: rename into place (an existing checkpoint of this step is moved aside first).
  std::string aside;
  if (fs::exists(info.path, ec)) {
    aside = JoinPath(dir_, CheckpointDirName(step_) + ".replaced" + kTmpSuffix);
    fs::remove_all(aside, ec);
    COHORT_RETURN_IF_ERROR(RenameDurably(info.path, aside, dir_));
  }
  COHORT_RETURN_IF_ERROR(RenameDurably(staging_, info.path, dir_));
  committed_ = true;
  if (!aside.empty()) fs::remove_all(aside, ec);

  // 4. LATEST, by atomic rename (a temporary name per step, so concurrent commits of different
  // steps do not share one).
  std::string latest_tmp =
      JoinPath(dir_, std::string(kLatest) + "." + CheckpointDirName(step_) + kTmpSuffix);
  COHORT_RETURN_IF_ERROR(WriteFileDurably(latest_tmp, CheckpointDirName(step_) + "\n"));
  COHORT_RETURN_IF_ERROR(RenameDurably(latest_tmp, JoinPath(dir_, kLatest), dir_));
  spdlog::debug("checkpoint {} committed ({} files)", info.path, info.files.size());
  return info;
}

// ---------------------------------------------------------------------------------------------
// Readers

StatusOr<CheckpointInfo> ReadCheckpointManifest(const std::string& path) {
  std::string manifest_path = JoinPath(path, kManifest);
  std::string text;
  uint64_t size = 0;
  uint32_t crc = 0;
  Status st = ReadAndChecksum(manifest_path, kMaxManifestBytes, &size, &crc, &text);
  if (!st.ok()) {
    if (st.code() == StatusCode::kNotFound) {
      struct stat dir_st;
      if (::stat(path.c_str(), &dir_st) != 0) return NotFound("no checkpoint at " + path);
      return DataLoss(path + ": no MANIFEST (torn or uncommitted checkpoint)");
    }
    return DataLoss(path + ": " + st.message());
  }
  COHORT_ASSIGN_OR_RETURN(CheckpointInfo info, DecodeManifest(text, path));
  int64_t dir_step = ParseCheckpointName(fs::path(path).filename().string());
  if (dir_step >= 0 && dir_step != info.step) {
    return DataLoss(path + "/MANIFEST: step " + std::to_string(info.step) +
                    " does not match the directory name");
  }
  return info;
}

Status VerifyCheckpoint(const std::string& path) {
  return CheckCheckpoint(path, /*checksums=*/true).status();
}

StatusOr<CheckpointInfo> FindLatestValidCheckpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("no checkpoint directory " + dir);
  COHORT_ASSIGN_OR_RETURN(std::vector<Candidate> candidates, ListCheckpoints(dir, nullptr));
  std::vector<std::string> skipped;
  for (const Candidate& c : candidates) {
    StatusOr<CheckpointInfo> info = CheckCheckpoint(c.path, /*checksums=*/true);
    if (info.ok()) {
      if (!skipped.empty()) spdlog::warn("using checkpoint {} after skipping newer ones", c.path);
      info->skipped = std::move(skipped);
      return info;
    }
    spdlog::warn("skipping checkpoint: {}", info.status().message());
    skipped.push_back(info.status().message());
  }
  if (candidates.empty()) return NotFound("no checkpoint in " + dir);
  std::string all;
  for (const std::string& s : skipped) all += (all.empty() ? "" : "; ") + s;
  return NotFound("no valid checkpoint in " + dir + " (skipped " + all + ")");
}

StatusOr<CheckpointInventory> InspectCheckpoints(const std::string& dir) {
  CheckpointInventory inventory;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    const std::string name = item.path().filename().string();
    if (name.rfind("ckpt-", 0) != 0 || !item.is_directory()) continue;
    CheckpointEntry entry;
    entry.name = name;
    if (name.ends_with(".tmp")) {
      entry.error = "staging directory (uncommitted; ignored)";
    } else if (auto manifest = ReadCheckpointManifest(item.path().string()); manifest.ok()) {
      entry.step = manifest->step;
      entry.files = manifest->files.size();
      for (const auto& f : manifest->files) entry.bytes += f.size;
      const Status verified = VerifyCheckpoint(item.path().string());
      entry.valid = verified.ok();
      if (!verified.ok()) entry.error = verified.message();
    } else {
      entry.error = manifest.status().message();
    }
    inventory.checkpoints.push_back(std::move(entry));
  }
  if (ec) {
    const std::string message = "cannot list " + dir + ": " + ec.message();
    if (ec == std::errc::no_such_file_or_directory) return NotFound(message);
    return FailedPrecondition(message);
  }
  std::sort(inventory.checkpoints.begin(), inventory.checkpoints.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) {
              return a.step != b.step ? a.step < b.step : a.name < b.name;
            });
  auto latest = FindLatestValidCheckpoint(dir);
  if (latest.ok()) inventory.restore = latest->path;
  return inventory;
}

Status RetainLatest(const std::string& dir, int keep) {
  if (keep < 1)
    return InvalidArgument("RetainLatest: keep must be >= 1, got " + std::to_string(keep));
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("no checkpoint directory " + dir);
  std::vector<std::string> staging;
  COHORT_ASSIGN_OR_RETURN(std::vector<Candidate> candidates, ListCheckpoints(dir, &staging));
  Status first_error;
  auto remove = [&](const std::string& name, const std::string& why) {
    spdlog::info("removing {}/{} ({})", dir, name, why);
    Status st = RemoveCheckpointDir(dir, JoinPath(dir, name), name);
    if (!st.ok() && first_error.ok()) first_error = st;
  };
  for (const std::string& name : staging) remove(name, "stale staging directory");
  int kept = 0;
  for (const Candidate& c : candidates) {
    if (kept >= keep) {
      remove(c.name, "older than the newest " + std::to_string(keep));
      continue;
    }
    StatusOr<CheckpointInfo> info = CheckCheckpoint(c.path, /*checksums=*/false);
    if (info.ok()) {
      ++kept;
    } else {
      remove(c.name, info.status().message());
    }
  }
  // LATEST.ckpt-<step>.tmp files left by a crash between writing and renaming LATEST.
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(std::string(kLatest) + ".", 0) == 0 && name.size() > 4 &&
        name.substr(name.size() - 4) == kTmpSuffix) {
      std::error_code rm_ec;
      fs::remove(it->path(), rm_ec);
    }
  }
  if (first_error.ok()) {
    Status st = SyncDirectory(dir);
    if (!st.ok()) first_error = st;
  }
  return first_error;
}

StatusOr<std::string> ReadCheckpointFile(const std::string& checkpoint_path,
                                         std::string_view name) {
  COHORT_ASSIGN_OR_RETURN(CheckpointInfo info, ReadCheckpointManifest(checkpoint_path));
  auto it = std::find_if(info.files.begin(), info.files.end(),
                         [&](const CheckpointFile& f) { return f.name == name; });
  if (it == info.files.end()) {
    return NotFound(checkpoint_path + ": no file " + std::string(name) + " in the manifest");
  }
  std::string data;
  uint64_t size = 0;
  uint32_t crc = 0;
  Status st = ReadAndChecksum(JoinPath(checkpoint_path, name), it->size, &size, &crc, &data);
  if (!st.ok()) return DataLoss(checkpoint_path + ": " + st.message());
  if (size != it->size) {
    return DataLoss(checkpoint_path + ": " + std::string(name) + " has " + std::to_string(size) +
                    " bytes, manifest says " + std::to_string(it->size));
  }
  if (crc != it->crc32) {
    return DataLoss(checkpoint_path + ": " + std::string(name) + " checksum mismatch (corrupted)");
  }
  return data;
}

}  // namespace cohort
