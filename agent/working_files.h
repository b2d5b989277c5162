// A replica's working files, carried into its next attempt on the same node.
//
// Why: each attempt of a replica runs in a working directory of its own
// (<work_dir>/<job>/<replica>/attempt-<K>, agent/replica_env.h), which is the attempt's identity
// (its processes carry COHORT_ATTEMPT_DIR) and holds the agent's files for it (stack dumps,
// TORCHELASTIC_ERROR_FILE, the flight recorder, a container's bundle). A script that saves into a
// relative path (torch.save(state, "snapshot.pt"), as the torchrun fault-tolerance tutorial does)
// expects its restart to find the file there: torchrun restarts its workers in the directory they
// ran in, and a Slurm requeue starts in the same folder. So when attempt K starts on a node where
// an earlier attempt of the replica ran, the agent moves everything the script left in the newest
// such attempt's directory (every entry but the agent's own, IsAgentAttemptEntry) into attempt
// K's, before the command runs. An attempt placed on another node starts in an empty directory:
// what only a lost node's disk held is gone with it; a script resumes anywhere only from what it
// saves under $AIP_CHECKPOINT_DIR.
//
// Contract: call it before attempt K's processes start, with no process of an earlier attempt of
// the replica running on this node (the coordinator places an attempt only once the one before
// it ended), attempt K's directory made and empty. Entries are renamed (one file system: nothing
// is copied), a symbolic link as a link; an entry whose name attempt K's directory holds already
// stays. Blocking file system calls: call it off the agent's loop.
#pragma once

#include <string>
#include <vector>

namespace cohort::agent {

struct CarriedFiles {
  int from_attempt = -1;            // the attempt whose files were carried; -1: none here
  std::vector<std::string> moved;   // the entries moved, by name, sorted
  std::vector<std::string> errors;  // "NAME: why" for each entry that could not be moved
};
// Carries into attempt `attempt` (>= 1) of `job`/`replica` what the newest earlier attempt on
// this node left in its working directory (see above).
CarriedFiles CarryWorkingFiles(const std::string& work_dir, const std::string& job,
                               const std::string& replica, int attempt);
// For the attempt's log and the job's events: "carried attempt 0's working files into this
// attempt's (snapshot.pt, train.log), as torchrun restarts a worker where it ran", at most three
// names given, and each error; "" when nothing was carried and nothing failed.
std::string CarriedFilesNote(const CarriedFiles& carried);

}  // namespace cohort::agent
