// StorageProbe is the coordinator's side of the storage check (common/storage_marker.h): it writes
// the marker under the configured output root with a new random token at start and then every
// `rewrite_every`, in a thread of its own (a hung NFS mount must not stall the coordinator's
// loop), and judges what each agent reports finding there.
//
// Verdicts (JudgeStorage):
//  - "shared": the agent read, at the coordinator's path, the token written last or the one
//    before. Two are accepted because an agent reads every few seconds and an NFS client may
//    serve a file's old content for up to a minute: a rewrite must not make a sharing node flap.
//    The marker found at start counts as the one before, so reports read before a coordinator
//    restart still match.
//  - "not shared: <why>": anything else: the agent found no marker, another token (another
//    filesystem mounted at that path, or a stale copy), a hung mount, or it read another path.
//  - "checking": the agent has not reported yet (it learns the root when it registers), or the
//    probe has not written its first marker yet.
//  - "no output root": none is configured; nothing is checked (every job's output dir is then
//    "not on the checked shared storage").
// Jobs whose output dir lies under the root are placed only on "shared" nodes (scheduler.h
// "Storage").
//
// Thread safety: Judge and root may be called from any thread; the writer is the object's own
// thread. Lifetime: the destructor stops the writer without waiting for a write stuck in a hung
// mount (that thread ends on its own once the write returns).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "coordinator/state.h"

namespace cohort::coordinator {

// What the probe has written so far.
struct StorageTokens {
  std::string current;   // the token of the marker written last; empty: none written yet
  std::string previous;  // the one before (or the one found at start); may be empty
  std::string error;     // the last write's failure; empty when it succeeded
};

// The verdict on `report` (the agent's report; report.reported false: none yet) for output root
// `root` (empty: none configured). Fills shared and verdict; pure.
void JudgeStorage(const std::string& root, const StorageTokens& tokens, NodeStorage& report);

// What a submitter is told about `output_dir` (empty: nothing): that it is not under the checked
// output root `root`, or, with no root configured, that nothing is checked while the cluster has
// more than one node (`nodes`), so a restart on another node would not find its checkpoints.
std::string StorageWarning(const std::string& output_dir, const std::string& root, size_t nodes);

class StorageProbe {
 public:
  static constexpr std::chrono::minutes kRewriteEvery{5};

  // `root` empty: no output root: nothing is written, every node is "no output root".
  explicit StorageProbe(std::string root, std::chrono::milliseconds rewrite_every = kRewriteEvery);
  ~StorageProbe();
  StorageProbe(const StorageProbe&) = delete;
  StorageProbe& operator=(const StorageProbe&) = delete;

  const std::string& root() const { return root_; }
  StorageTokens tokens() const;
  // Judges `storage` against the tokens written so far.
  void Judge(NodeStorage& storage) const;
  // Waits up to `timeout` until `writes` markers have been written or failed; false on timeout.
  bool WaitForWrites(int writes, std::chrono::milliseconds timeout) const;

 private:
  struct Shared;
  std::string root_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace cohort::coordinator
