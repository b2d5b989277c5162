// cohort-ps: one parameter server. Launched by agents for `builtin: parameter_server` pools,
// runnable by hand (flags and environment in collective/ps/ps_cli.h). Exits 0 when training is
// over or on SIGTERM/SIGINT, 2 on bad flags or environment, 1 on other errors.
#include "collective/daemon_main.h"
#include "collective/ps/ps_cli.h"

constexpr char kUsage[] =
    "usage: cohort-ps [options]\n"
    "One parameter server of a job: holds its shard of the model, applies the workers' pushes and\n"
    "answers their pulls, checkpointing its shard. The agent starts it for `builtin:\n"
    "parameter_server` pools; the defaults come from the environment the agent injects.\n"
    "\n"
    "Options:\n"
    "  -h [ --help ]             show this help and exit\n"
    "  --version                 print the version and exit\n"
    "  --index I                 this server's index (COHORT_PS_INDEX, or COHORT_REPLICA's)\n"
    "  --num-servers S           servers (COHORT_PS_ADDRS' length or COHORT_NUM_PS)\n"
    "  --num-workers N           workers (COHORT_NUM_WORKERS)\n"
    "  --bootstrap HOST:PORT     the job's bootstrap store (COHORT_BOOTSTRAP_ADDR)\n"
    "  --checkpoint-dir DIR      shard checkpoints (AIP_CHECKPOINT_DIR/ps-<index>)\n"
    "  --checkpoint-every STEPS  checkpoint period (default 100)\n"
    "  --keep-checkpoints K      checkpoints kept (default 3)\n"
    "  --restore PATH            resume from this checkpoint\n"
    "  --restore-latest          resume from the newest valid checkpoint\n"
    "  --timeout-ms MS           communication timeout (COHORT_COMM_TIMEOUT_MS, default 60000)\n"
    "  --rejoin-timeout-ms MS    wait for restarted workers (default 60000)\n"
    "  --optimizer sgd|momentum|adam, --lr X, --momentum X, --beta1 X, --beta2 X, --epsilon X,\n"
    "  --staleness S, --rescale X\n"
    "                            the optimizer, instead of the one the chief's InitModel names\n";

int main(int argc, char** argv) {
  return cohort::collective::DaemonMain("cohort-ps", "parameter server", kUsage, argc, argv,
                                        cohort::collective::ps::RunParameterServerMain);
}
