// Atomic, verifiable checkpoints on a local or shared file system (DESIGN.md "Agents and
// containers", Checkpoints). Used by the agent (restore on restart), the parameter server (shard
// checkpoints) and the example training programs.
//
// Layout of a checkpoint directory `dir`:
//   dir/ckpt-<step>/          a committed checkpoint: the files plus MANIFEST
//   dir/ckpt-<step>.tmp/      being written, or left by a crash: ignored by readers
//   dir/LATEST                "ckpt-<step>\n": the last commit (informational; see below)
//
// Commit protocol (CheckpointWriter::Commit): every file is written into ckpt-<step>.tmp/ and
// fsynced; the directories are fsynced; MANIFEST (JSON: format, step, each file's name, size and
// CRC-32, and a CRC-32 of the manifest itself) is written and fsynced last; the directory is
// renamed to ckpt-<step> and its parent fsynced; then LATEST moves by atomic rename
// (LATEST.ckpt-<step>.tmp written, fsynced, renamed over LATEST, directory fsynced). A crash at
// any point leaves either the previous state or a complete new checkpoint, never a torn one that
// verifies.
//
// Reading: FindLatestValidCheckpoint picks the committed checkpoint with the highest step whose
// MANIFEST verifies (every file present with its size and checksum), skipping torn or corrupted
// ones and logging each skip and why. It does not trust LATEST: a crash between the directory
// rename and the LATEST rename leaves a newer valid checkpoint that LATEST does not name yet, and
// a corrupted newest checkpoint must be skipped whatever LATEST says. LATEST is for people and
// tools (`cat LATEST`).
//
// Committing a step that already exists replaces it (the old directory is first renamed aside to
// a .tmp name, so a crash in between loses at most that one step, never an older checkpoint).
//
// Thread safety: a CheckpointWriter is used by one thread. Different steps may be written
// concurrently. RetainLatest removes *.tmp directories, so do not run it while a writer in
// another thread or process has an uncommitted checkpoint in the same directory.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cohort {

struct CheckpointFile {
  std::string name;  // relative path inside the checkpoint, '/'-separated
  uint64_t size = 0;
  uint32_t crc32 = 0;  // zlib CRC-32 of the contents

  bool operator==(const CheckpointFile&) const = default;
};

struct CheckpointInfo {
  int64_t step = -1;
  std::string path;                   // dir/ckpt-<step>
  std::vector<CheckpointFile> files;  // sorted by name; MANIFEST itself not included
  // FindLatestValidCheckpoint only: the newer checkpoints it skipped, each with why.
  std::vector<std::string> skipped;
};

// Writes one checkpoint. Write files with AddFile(), or write them yourself under path() (sub-
// directories allowed), then Commit(). A writer destroyed without a successful Commit removes its
// staging directory. Construction cannot fail: an error (cannot create the directory, negative
// step) is kept in status() and returned by AddFile() and Commit().
class CheckpointWriter {
 public:
  CheckpointWriter(std::string dir, int64_t step);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The staging directory (dir/ckpt-<step>.tmp) files go into before Commit().
  const std::string& path() const { return staging_; }
  int64_t step() const { return step_; }
  Status status() const { return status_; }

  // Writes and fsyncs `name` (relative, no "..", not "MANIFEST") with `bytes`, replacing any
  // earlier file of that name.
  Status AddFile(std::string_view name, std::string_view bytes);

  // Makes the checkpoint durable and visible as described above. At most once.
  StatusOr<CheckpointInfo> Commit();

 private:
  std::string dir_;
  int64_t step_;
  std::string staging_;
  Status status_;
  bool committed_ = false;
  // Files written through AddFile, already fsynced: name -> (size, crc32).
  std::map<std::string, std::pair<uint64_t, uint32_t>> added_;
};

// "ckpt-<step>".
std::string CheckpointDirName(int64_t step);
// "ckpt-<digits>" (no leading zero) -> step; -1 when `name` is not a committed checkpoint's name.
int64_t ParseCheckpointName(std::string_view name);
// Whether `name` is a staging directory's: "ckpt-...tmp", being written or left by a crash.
bool IsStagingName(std::string_view name);

// The newest committed checkpoint under `dir` that verifies. kNotFound when there is none (no
// directory, no checkpoints, or every one is torn or corrupted: the message lists the skips).
StatusOr<CheckpointInfo> FindLatestValidCheckpoint(const std::string& dir);

// Checks a checkpoint directory against its MANIFEST: every file present, with the recorded size
// and checksum, and the manifest's own checksum. kDataLoss naming the first problem.
Status VerifyCheckpoint(const std::string& path);

// Parses and checks MANIFEST only (no file data read). kDataLoss when it is missing or corrupt.
StatusOr<CheckpointInfo> ReadCheckpointManifest(const std::string& path);

// One ckpt-* directory under a checkpoint directory, as InspectCheckpoints reports it.
struct CheckpointEntry {
  std::string name;    // ckpt-<step>, or ckpt-<step>.tmp for a staging directory
  int64_t step = -1;   // from MANIFEST; -1 when it cannot be read
  size_t files = 0;    // files listed in MANIFEST
  uint64_t bytes = 0;  // their sizes summed
  bool valid = false;  // VerifyCheckpoint passed
  std::string error;   // why it is not valid
};

// What a checkpoint directory holds and what a restart would restore from it.
struct CheckpointInventory {
  std::vector<CheckpointEntry> checkpoints;  // by step, then name
  std::string restore;  // FindLatestValidCheckpoint's path; "" when there is none
};

// Every ckpt-* directory under `dir`, each verified (staging directories are listed, never
// valid), and the checkpoint FindLatestValidCheckpoint picks. kNotFound when `dir` does not exist,
// kFailedPrecondition when it cannot be listed otherwise; the message reads "cannot list DIR: why".
StatusOr<CheckpointInventory> InspectCheckpoints(const std::string& dir);

// Keeps the newest `keep` complete checkpoints (manifest valid, files present with their sizes;
// checksums are not read, to keep this cheap) and removes every other ckpt-* directory under
// `dir`: older ones, torn ones, and stale *.tmp staging directories. keep >= 1.
Status RetainLatest(const std::string& dir, int keep);

// Reads `name` from the checkpoint at `checkpoint_path`, checking it against the manifest
// (kNotFound if not listed, kDataLoss if its size or checksum is wrong).
StatusOr<std::string> ReadCheckpointFile(const std::string& checkpoint_path, std::string_view name);

}  // namespace cohort
