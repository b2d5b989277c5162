// The storage check's marker file (README "Storage"). A cluster's job output dirs live under one
// output root, which every node must mount at the same path (an NFS-style shared filesystem) for
// a job restarted on another node to find its checkpoints. The check: the coordinator writes
// <output_root>/.cohort-storage holding a random token, and writes a new token at start and now
// and then (coordinator/storage_probe.h); each agent reads the file at the same path
// (agent/storage_check.h) and reports the token it found. A node that reads the coordinator's
// token sees the same filesystem there.
//
// The file holds "cohort-storage-marker 1\n<token>\n". It is written under a temporary name,
// fsynced and renamed into place, so a reader sees a whole marker, old or new, never a torn one.
// Pure functions plus file reads and writes; no state.
#pragma once

#include <string>

#include "common/status.h"

namespace cohort {

inline constexpr const char* kStorageMarkerName = ".cohort-storage";

// <root>/.cohort-storage
std::string StorageMarkerPath(const std::string& root);

// 32 hex characters from std::random_device.
std::string NewStorageToken();

// Writes the marker holding `token` under `root`, creating `root` (and its parents) when missing.
// Errors name the path and errno's text.
Status WriteStorageMarker(const std::string& root, const std::string& token);

// The token of the marker under `root`. kNotFound naming what is missing ("no directory /x",
// "no storage marker /x/.cohort-storage"); kFailedPrecondition when `root` is not a directory;
// kDataLoss when the file is not a marker; other read errors as the read reports them.
StatusOr<std::string> ReadStorageMarker(const std::string& root);

// Whether `path` is `root` or lies below it, compared lexically after normalisation ("/a/./b/"
// is "/a/b"; "/a/bc" is not under "/a/b"). Both must be absolute; false otherwise. Symbolic
// links are not followed.
bool PathIsUnder(const std::string& path, const std::string& root);

}  // namespace cohort
