// Checkpoints a script left in its own working directory, which its next attempt will not see.
//
// Why: every attempt of a replica starts in a working directory of its own
// (<work_dir>/<job>/<replica>/attempt-<K>, agent/replica_env.h), on whatever node it is placed. A
// script that saves into a relative path (torch.save(state, "snapshot.pt"), as the torchrun
// fault-tolerance tutorial does, or as under Slurm, where a requeued job starts in the same
// shared folder) finds nothing there after a restart and trains from scratch, and nothing says
// why. When a restarted attempt lands on the node of an earlier one, the agent looks into the
// newest earlier attempt's working directory there, and the attempt's log and the job's events say
// what it left: the script resumes only from what it saves under $AIP_CHECKPOINT_DIR.
//
// A checkpoint is what common/script_checkpoints.h calls one (a file named as one or holding a
// torch.save archive, a step folder), among the newest of each folder (WalkScope::kNewest); torn
// or not, it is only named, never moved. Blocking file system calls: call it off the agent's
// loop.
#pragma once

#include <string>

namespace cohort::agent {

// For attempt `attempt` (>= 1) of `job`/`replica`: "attempt 0 left snapshot.pt in its working
// directory (DIR), and each attempt starts in a new one: a script resumes from what it saves under
// $AIP_CHECKPOINT_DIR", at most three names given; "" when no earlier attempt's working directory
// is on this node or it holds no checkpoint.
std::string StrandedCheckpointsNote(const std::string& work_dir, const std::string& job,
                                    const std::string& replica, int attempt);

}  // namespace cohort::agent
