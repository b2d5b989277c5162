// The cohort-ps command line (what the binary's main calls; a library function so tests can run
// a server in-process the same way).
//
//   cohort-ps [--index I] [--num-servers S] [--num-workers N] [--bootstrap HOST:PORT]
//             [--checkpoint-dir DIR] [--checkpoint-every STEPS] [--keep-checkpoints K]
//             [--restore PATH | --restore-latest] [--timeout-ms MS] [--rejoin-timeout-ms MS]
//             [--optimizer sgd|momentum|adam --lr X --momentum X --beta1 X --beta2 X --epsilon X
//              --staleness S --rescale X]
//
// Defaults come from the environment the agent injects: COHORT_BOOTSTRAP_ADDR,
// COHORT_NUM_WORKERS, COHORT_PS_ADDRS (its length: servers) or COHORT_NUM_PS, COHORT_PS_INDEX or
// the index in COHORT_REPLICA ("parameter_server-1"), COHORT_COMM_TIMEOUT_MS, and
// AIP_CHECKPOINT_DIR (shards checkpoint into <AIP_CHECKPOINT_DIR>/ps-<index>, every 100 steps
// unless --checkpoint-every says otherwise). A restarted replica (COHORT_RESTART_COUNT > 0) or
// --restore-latest resumes from the newest valid checkpoint in its checkpoint dir.
//
// Optimizer settings normally come from the job: the chief's InitModel carries them (a builtin
// pool has no args). Any optimizer flag given here makes this server use the flags instead.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "common/status.h"

namespace cohort::collective::ps {

// Runs one server until training is over or `stop`. kInvalidArgument for bad flags/environment.
Status RunParameterServerMain(const std::vector<std::string>& args, const std::atomic<bool>& stop);

}  // namespace cohort::collective::ps
