// Small file helpers shared by the parsers, the journal and the checkpoint code, so that every
// read and directory sync reports errors the same way (the path, what it is, errno's text).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace cohort {

// The whole file. `what` names it in errors: "job file /x.yaml: No such file or directory"
// (kNotFound for ENOENT).
StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view what);

// Appends to `out` up to `max` bytes of the open file `fd` from `offset` (fewer at the end of the
// file; UINT64_MAX reads to the end), retrying interrupted reads. A failed read is errno's status
// with `what` as its context
// ("read /x.log"); what was read before it stays in `out`. The caller keeps and closes `fd`.
Status ReadAt(int fd, uint64_t offset, uint64_t max, std::string* out, std::string_view what);

// Opens `path` read-only as a daemon must open a file that someone else controls (a replica's
// error file, a job's checkpoint or metric file): the last component is never followed as a
// symbolic link, a FIFO never blocks the open, and only a regular file is taken, so a link to
// /dev/zero or to a file the daemon may read and the file's owner may not, or a FIFO, is refused.
// Returns the descriptor (the caller closes it) and fills `st`. kNotFound when there is no such
// file; kInvalidArgument naming what it is instead ("is a symbolic link", "is not a regular
// file"); else errno's status. `what` names the file in errors ("error file /w/j/error.json").
StatusOr<int> OpenRegularFile(const std::string& path, std::string_view what, struct stat* st);

// fsync on a directory, so a rename or create inside it survives a crash.
Status SyncDirectory(const std::string& dir);
// fsync on a file written (and closed) before: its bytes are on the disk once this returns Ok.
Status SyncFile(const std::string& path);

// Writes `text` to `<path>.tmp` with permission bits `mode`, then renames it over `path`: a reader
// sees the old file or the whole new one, never a part (not fsynced: for files that can be made
// again, such as caches). Errors name the file and errno's text.
Status ReplaceFile(const std::string& path, std::string_view text, mode_t mode = 0644);
// ReplaceFile, durably: `<path>.tmp` is fsynced before the rename and the directory after it, so
// once this returns Ok the new file survives a crash or a power cut whole.
Status ReplaceFileDurably(const std::string& path, std::string_view text, mode_t mode = 0644);

// A file descriptor, closed when it goes out of scope; -1 holds none. Close() closes it at once
// and reports the error, which can carry a delayed write error.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept;
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  // Hands the descriptor to the caller, who closes it; holds none after.
  int Release();
  // `path` names the file in the error ("close /x/MANIFEST").
  Status Close(const std::string& path);

 private:
  int fd_;
};

// Opens `name` in the folder open at `dir_fd` (AT_FDCWD: `name` is a path) as OpenRegularFile
// does, without following a symbolic link and without blocking on a FIFO, and keeps it only when
// it is a folder (`folder`), else only when it is a regular file; fills `st`. None held when it
// is missing or something else.
UniqueFd OpenNoFollow(int dir_fd, const std::string& name, bool folder, struct stat* st);

}  // namespace cohort
