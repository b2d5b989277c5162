// Before a replica restarts with nothing else of its job running, sets aside the checkpoints a
// crash left half written in the job's checkpoint directory (README "Failures and restarts";
// examples/torch/README.md).
//
// Why: a stock training script resumes from "the newest checkpoint there", and neither a
// torch.save and a glob nor Hugging Face's Trainer writes atomically: a node lost or a replica
// stopped while rank 0 saves leaves a torn newest checkpoint; the restarted script fails on it with
// every node healthy, and the job fails. Moved out of the way, the script resumes from the
// checkpoint before it.
//
// What a script's checkpoint is, and when it is torn (judged from its bytes; anything that cannot
// be judged is left alone), is common/script_checkpoints.h's: a file, or the step folder it lies
// in (checkpoint-500, step_10, epoch3), which is what a script resumes from. Cohort's own
// checkpoints are left to their MANIFEST check. Each torn one is renamed, under its path in `dir`,
// into `dir`/.cohort-torn/attempt-<K>/ (a name taken there gets "-2", "-3", ...): nothing is
// deleted, and the name a script globs for (epoch_*.pt, checkpoint-*) is gone from where it looks.
// `cohort checkpoint --job` lists what was set aside.
//
// Contract: only safe when no process of the job can still write in `dir`. The agent calls it
// before a replica's attempt >= 1 starts, where the coordinator's launch says that nothing of the
// job's earlier attempts still runs (LaunchReplica.others_stopped: the job is placed whole, as on
// a restart of the whole job or its return after a preemption; or every other replica of it holds
// nothing or is placed but not started, as in a job of one replica, or when the replicas an
// incident took are placed again). Each node of the job makes the pass; what one agent moved,
// another's finds gone. A replica placed with others may start before another node's pass is
// over (which takes milliseconds, against the seconds a Python process takes to import torch).
// It reads only the newest files and step folders of each folder (WalkScope::kNewest): a save cut
// short is among the newest of its folder, since nothing of the job wrote there after it, and
// every node of a big job makes the pass at once on shared storage; an older torn entry (one torn
// before a restart that set nothing aside) stays. It renames within the folders it walked, never
// through a symbolic link; the folders it makes are owned by `run_as` where given. Blocking file
// system calls: call it off the agent's loop.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/replica_user.h"

namespace cohort::agent {

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

}  // namespace cohort::agent
