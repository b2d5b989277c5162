// Small file helpers shared by the parsers, the journal and the checkpoint code, so that every
// read and directory sync reports errors the same way (the path, what it is, errno's text).
#pragma once

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

// fsync on a directory, so a rename or create inside it survives a crash.
Status SyncDirectory(const std::string& dir);

}  // namespace cohort
