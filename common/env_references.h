// $(VAR) references in a replica's command and args, expanded from its environment as Kubernetes
// expands them in a container's command and args: `args: [--seed=$(COHORT_ARRAY_INDEX)]`,
// `--out=$(AIP_MODEL_DIR)`, `--resume=$(COHORT_RESTORE_CHECKPOINT)`. The agent expands them at
// each launch with the attempt's final environment (agent/replica_manager.h), so a reference to
// what only the agent knows (the restore checkpoint, the restart count) works too.
//
// Rules, Kubernetes' but for `$$`: `$(NAME)` becomes NAME's value when the environment has NAME,
// and stays as written when it has not (a shell's `$(date)` is left to the shell); `$$(NAME)` is
// the text `$(NAME)`; any other `$`, an unclosed `$(` and `$$` alone stay as written. Kubernetes
// makes every `$$` one `$`; here a shell's `$$` (its pid: `sh -c 'echo $$ > pidfile'`), common in
// job files written before expansion existed, keeps its meaning. Values are not expanded again.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

std::string ExpandEnvReferences(std::string_view text,
                                const std::map<std::string, std::string>& env);
// Each of `args` expanded in place.
void ExpandEnvReferences(std::vector<std::string>& args,
                         const std::map<std::string, std::string>& env);

}  // namespace cohort
