// A training script's own checkpoints in a job's checkpoint directory, and which of them are torn,
// judged from their bytes: the agent sets the torn ones aside before a restart
// (agent/torn_checkpoints.h), and `cohort checkpoint` lists them all.
//
// Why: a stock script resumes from "the newest checkpoint there" (torch.save into epoch_<N>.pt and
// a glob, or Hugging Face's Trainer and get_last_checkpoint), written in place, not atomically; a
// node lost or a replica stopped while rank 0 saves leaves the newest torn.
//
// A script's checkpoint (the unit listed and judged) is a file named as one (.pt .pth .ckpt .bin
// .safetensors .tar) or holding a torch.save archive (a zip file, "PK\3\4" first), or a step
// folder: named checkpoint, ckpt, step, global_step, epoch, iter or iteration, then perhaps '-',
// '_' or '=', then a number (checkpoint-500, step_10, epoch3), which is what a script resumes
// from, whatever it holds. Other folders are walked into, up to kScriptCheckpointMaxDepth deep.
// Cohort's own checkpoints (ckpt-<step>/ with its MANIFEST, ckpt-<step>.tmp, LATEST:
// common/checkpoint.h) are left to their MANIFEST check, and the folder of those set aside
// (kTornCheckpointsDir) is not walked.
//
// Torn means what no reader could load (anything it cannot judge counts as whole):
//   - a torch.save archive (a zip) without the end-of-central-directory record that ends every
//     complete zip file;
//   - a .safetensors file shorter than its own header says;
//   - an empty file named as a checkpoint;
//   - a Trainer checkpoint folder (checkpoint-<N>) without a trainer_state.json that parses, which
//     Trainer writes last; only where the folder is recognisably Trainer's: it holds
//     training_args.bin, or a sibling checkpoint-<M> holds a trainer_state.json;
//   - a step folder holding a torn file, or torch.distributed.checkpoint shards (*.distcp)
//     without the .metadata (or __<rank>.metadata) that DCP renames into place last.
//
// Safety, as root in a user's folder: it never goes through a symbolic link (openat with
// O_NOFOLLOW from the top folder down), opens only regular files, without blocking, reads of each
// file a few bytes at its head and its last 64 KiB, or a safetensors header (and a
// trainer_state.json up to 64 MiB), and looks at no more than kScriptCheckpointMaxEntries
// entries. Blocking file system calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_util.h"

namespace cohort {

inline constexpr std::string_view kTornCheckpointsDir = ".cohort-torn";
inline constexpr int kScriptCheckpointMaxEntries = 20000;
inline constexpr int kScriptCheckpointMaxDepth = 4;
// With WalkScope::kNewest, how many files and how many step folders of each folder are judged.
inline constexpr size_t kScriptCheckpointNewestPerFolder = 16;

// One of a script's checkpoints: a file, or a step folder.
struct ScriptCheckpoint {
  std::string path;  // under the walked folder: "epoch_2.pt", "run1/checkpoint-500"
  bool folder = false;
  uint64_t bytes = 0;  // a file's size; a step folder's regular files summed (within the bounds)
  int64_t modified_ms = 0;
  std::string torn;  // why no reader could load it; "" when nothing says so
};

enum class WalkScope {
  // Only the newest kScriptCheckpointNewestPerFolder files and as many step folders of each
  // folder, by modification time (the agent's pass: a save cut short is among the newest of its
  // folder, since nothing of the job wrote there after it).
  kNewest,
  kAll,
};

// Called for each checkpoint found, with the folder it lies in (open) and its name there; the
// walk has read that folder's entries, so the callee may rename the checkpoint away.
using ScriptCheckpointVisitor =
    std::function<void(int parent_fd, const std::string& name, const ScriptCheckpoint& checkpoint)>;

// Walks the folder open at `dir_fd`; false when it stopped at kScriptCheckpointMaxEntries.
bool WalkScriptCheckpoints(int dir_fd, WalkScope scope, const ScriptCheckpointVisitor& visit);

// Opens `dir` as a folder, without following a symbolic link, even at `dir` itself (a trailing
// slash is ignored); none held when it is missing, a link, or not a folder.
UniqueFd OpenCheckpointFolder(const std::string& dir);

// What `cohort checkpoint` shows of a script's checkpoints under `dir`.
struct ScriptCheckpointInventory {
  std::vector<ScriptCheckpoint> checkpoints;  // by modification time, then path
  // Those the agent set aside under kTornCheckpointsDir, by path there ("attempt-1/epoch_2.pt").
  std::vector<ScriptCheckpoint> set_aside;
  bool stopped = false;  // a walk stopped at its bounds: some entries were not looked at
};
// Every checkpoint of a script under `dir` (WalkScope::kAll), and those set aside. Empty when
// `dir` cannot be opened as a folder (InspectCheckpoints says why).
ScriptCheckpointInventory InspectScriptCheckpoints(const std::string& dir);

}  // namespace cohort
