// cohort-ps: one parameter server. Launched by agents for `builtin: parameter_server` pools,
// runnable by hand (flags and environment in collective/ps/ps_cli.h). Exits 0 when training is
// over or on SIGTERM/SIGINT, 2 on bad flags or environment, 1 on other errors.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "collective/ps/ps_cli.h"
#include "common/logging.h"
#include "common/version.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }
}  // namespace

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
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return std::fputs(kUsage, stdout) < 0;
    if (arg == "--version") return std::puts("cohort-ps " COHORT_VERSION) < 0;
  }
  const char* level = std::getenv("COHORT_LOG_LEVEL");
  cohort::InitLogging("cohort-ps", level != nullptr ? level : "info");
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::vector<std::string> args(argv + 1, argv + argc);
  cohort::Status status = cohort::collective::ps::RunParameterServerMain(args, g_stop);
  if (!status.ok()) {
    spdlog::error("parameter server failed: {}", status.ToString());
    return status.code() == cohort::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
