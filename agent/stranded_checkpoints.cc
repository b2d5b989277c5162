#include "agent/stranded_checkpoints.h"

#include <vector>

#include "agent/replica_env.h"
#include "common/script_checkpoints.h"

namespace cohort::agent {

std::string StrandedCheckpointsNote(const std::string& work_dir, const std::string& job,
                                    const std::string& replica, int attempt) {
  for (int earlier = attempt - 1; earlier >= 0; --earlier) {
    const std::string dir = AttemptWorkingDir(work_dir, job, replica, earlier);
    UniqueFd fd = OpenCheckpointFolder(dir);
    if (!fd.ok()) continue;  // never ran here, or swept
    std::vector<std::string> names;
    WalkScriptCheckpoints(fd.get(), WalkScope::kNewest,
                          [&](int, const std::string&, const ScriptCheckpoint& checkpoint) {
                            names.push_back(checkpoint.path);
                          });
    if (names.empty()) return "";
    std::string listed;
    for (size_t i = 0; i < names.size() && i < 3; ++i) listed += (i == 0 ? "" : ", ") + names[i];
    if (names.size() > 3) listed += " and " + std::to_string(names.size() - 3) + " more";
    return "attempt " + std::to_string(earlier) + " left " + listed +
           " in its working directory (" + dir +
           "), and each attempt starts in a new one: a script resumes from what it saves under "
           "$AIP_CHECKPOINT_DIR";
  }
  return "";
}

}  // namespace cohort::agent
