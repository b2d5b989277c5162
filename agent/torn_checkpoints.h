// Before a replica restarts with nothing else of its job running, sets aside the checkpoints a
// crash left half written in the job's checkpoint directory (README "Failures and restarts";
// examples/torch/README.md).
//
// Why: a stock training script resumes from "the newest checkpoint there": torch.save(state,
// f"{dir}/epoch_{n}.pt") and a glob, or Hugging Face's Trainer and get_last_checkpoint. Neither
// writes atomically, so a node lost or a replica stopped while rank 0 saves leaves a torn newest
// checkpoint; the restarted script fails on it with every node healthy, and the job fails. Moved
// out of the way, the script resumes from the checkpoint before it.
//
// Torn means what no reader could load, judged from the bytes (anything it cannot judge is left
// alone):
//   - a torch.save archive, a zip file ("PK\3\4" first), without the end-of-central-directory
//     record that ends every complete zip file;
//   - a .safetensors file shorter than its own header says;
//   - an empty file named as a checkpoint (.pt .pth .ckpt .bin .safetensors .tar);
//   - a Trainer checkpoint folder (checkpoint-<N>) without a trainer_state.json that parses, which
//     Trainer writes last; only where the folder is recognisably Trainer's: it holds
//     training_args.bin, or a sibling checkpoint-<M> holds a trainer_state.json;
//   - in a step folder, a torch.distributed.checkpoint folder: shards (*.distcp) without the
//     .metadata (or __<rank>.metadata) that it renames into place last.
// The unit set aside is a torn file, or, where the torn file lies in a step folder (named
// checkpoint, ckpt, step, global_step, epoch, iter or iteration, then perhaps '-', '_' or '=',
// then a number: checkpoint-500, step_10, epoch3), that whole folder, which is what a script
// resumes from. Cohort's own checkpoints (ckpt-<step> with its MANIFEST, ckpt-<step>.tmp, LATEST:
// common/checkpoint.h) are left to their MANIFEST check. Each is renamed, under its path in
// `dir`, into `dir`/.cohort-torn/attempt-<K>/ (a name taken there gets "-2", "-3", ...): nothing
// is deleted, and the name a script globs for (epoch_*.pt, checkpoint-*) is gone from where it
// looks.
//
// Contract: only safe when no process of the job can still write in `dir`. The agent calls it
// before a replica's attempt >= 1 starts, where the coordinator's launch says that nothing of the
// job's earlier attempts still runs (LaunchReplica.others_stopped: the job is placed whole, as on
// a restart of the whole job or its return after a preemption; or every other replica of it holds
// nothing or is placed but not started, as in a job of one replica, or when the replicas an
// incident took are placed again). Each node of the job makes the pass; what one agent moved,
// another's finds gone. A replica placed with others may start before another node's pass is
// over (which takes milliseconds, against the seconds a Python process takes to import torch).
// It never goes through a symbolic link (openat with O_NOFOLLOW from `dir` down), opens only
// regular files, without blocking, reads of each file a few bytes at its head and its last
// 64 KiB, or a safetensors header (and a trainer_state.json up to 64 MiB), and looks at no more
// than kTornCheckMaxEntries entries, kTornCheckMaxDepth folders deep. It reads only the newest
// kTornCheckNewestPerFolder files and as many step folders of each folder (by modification
// time): a save cut short is among the newest of its folder, since nothing of the job wrote
// there after it, and every node of a big job makes the pass at once on shared storage; an
// older torn entry (one torn before a restart that set nothing aside) stays. The folders it makes
// are owned by `run_as` where given. Blocking file system calls: call it off the agent's loop.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "agent/replica_user.h"

namespace cohort::agent {

inline constexpr int kTornCheckMaxEntries = 20000;
inline constexpr int kTornCheckMaxDepth = 4;
inline constexpr size_t kTornCheckNewestPerFolder = 16;

struct TornCheckpoints {
  std::vector<std::string> set_aside;  // each entry set aside, by its path in `dir`
  // One line per entry set aside (or that could not be), and a line when the walk stopped at its
  // bounds, for the attempt's log.
  std::vector<std::string> notes;
};
// Both empty when nothing was torn or `dir` does not exist (or is "").
TornCheckpoints SetAsideTornCheckpoints(const std::string& dir, int attempt,
                                        const std::optional<RunAs>& run_as);
// What the replica's RUNNING report says of `torn` (its `cohort status` message, and an event):
// "set aside torn checkpoint epoch_2.pt (cohort logs says why)", at most three paths named; ""
// when nothing was set aside.
std::string TornCheckpointsSummary(const TornCheckpoints& torn);

// Why the regular file open at `fd`, named `name`, is torn, or "" (the file rules above).
std::string WhyTornFile(const std::string& name, int fd);

}  // namespace cohort::agent
