// digits-trainer: trains the digits MLP on one rank of a Cohort job (or alone). Flags are the
// hyperparameters; the cluster comes from the environment the agent injects (RANK, WORLD_SIZE,
// AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, COHORT_RESTORE_CHECKPOINT, CLOUD_ML_HP_METRIC_FILE,
// CLOUD_ML_TRIAL_ID, and the collective's COHORT_* variables). See trainer.h for the algorithm.
//
// Exit codes: 0 trained; 1 a permanent error (bad data, bad checkpoint, file errors);
// 2 bad flags or environment; 143 stopped by SIGTERM/SIGINT after a checkpoint, a lost peer, or an
// injected failure: all retryable, so the agent restarts the replica from the newest checkpoint.
#include <algorithm>
#include <boost/program_options.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "common/build_version.h"
#include "common/config.h"
#include "common/logging.h"
#include "examples/digits_trainer/collective_gradient_averager.h"
#include "examples/digits_trainer/digits_dataset.h"
#include "examples/digits_trainer/ps_trainer.h"
#include "examples/digits_trainer/trainer.h"

namespace {

namespace po = boost::program_options;
using cohort::StatusCode;
using namespace cohort::examples;

constexpr int kExitRetryable = 143;

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// Study trials pass `--<parameter id>=<value>` and ids are often snake_case: "--batch_size=64"
// reaches --batch-size, "--learning_rate=0.1" and "--learning-rate" reach --lr.
std::vector<std::string> NormalizeFlags(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      const size_t end = std::min(arg.find('='), arg.size());
      std::replace(arg.begin() + 2, arg.begin() + static_cast<std::ptrdiff_t>(end), '_', '-');
      if (arg.compare(0, end, "--learning-rate") == 0) arg.replace(0, end, "--lr");
    }
    args.push_back(std::move(arg));
  }
  return args;
}

int ExitCodeFor(const cohort::Status& status) {
  switch (status.code()) {
    case StatusCode::kCancelled:         // stopped by a signal, after the checkpoint
    case StatusCode::kAborted:           // a poisoned communicator or an injected failure
    case StatusCode::kUnavailable:       // a peer is gone
    case StatusCode::kDeadlineExceeded:  // a peer stopped answering
      return kExitRetryable;
    default:
      return 1;
  }
}

// The parameter-server mode (ps_trainer.h): the model and the optimizer live on the job's
// parameter servers.
int RunParameterServerMode(const TrainerOptions& options, const std::string& optimizer,
                           int staleness, const Dataset& train, const Dataset& test) {
  auto ps = cohort::collective::ps::PsWorker::FromEnvironment();
  if (!ps.ok()) {
    spdlog::error("{}", ps.status().ToString());
    return ps.status().code() == StatusCode::kInvalidArgument ? 2 : kExitRetryable;
  }
  PsTrainerOptions po;
  po.base = options;
  po.optimizer = *cohort::collective::ps::ParseOptimizerKind(optimizer);
  po.staleness = staleness;
  PsTrainer trainer(po, train, test, ps->get());
  auto result = trainer.Run();
  if (!result.ok()) {
    spdlog::error("{}", result.status().ToString());
    return result.status().code() == StatusCode::kInvalidArgument ? 2
                                                                  : ExitCodeFor(result.status());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  cohort::InitLogging("digits-trainer", Env("LOG_LEVEL").empty() ? "info" : Env("LOG_LEVEL"));
  TrainerOptions options;
  std::string optimizer = "momentum";
  std::string data_path = kDefaultDigitsPath;
  uint64_t split_seed = 42;
  std::string mode = "auto";
  int staleness = -1;
  po::options_description flags("Options");
  auto add = flags.add_options();
  add("help,h", "show this help and exit");
  add("version", "print the version and exit");
  add("epochs", po::value(&options.epochs)->default_value(options.epochs),
      "passes over the training set");
  add("lr", po::value(&options.learning_rate)->default_value(options.learning_rate, "0.05"),
      "learning rate");
  add("hidden", po::value(&options.hidden)->default_value(options.hidden), "hidden units");
  add("batch-size", po::value(&options.batch_size)->default_value(options.batch_size),
      "global batch size (split across ranks)");
  add("optimizer", po::value(&optimizer)->default_value(optimizer),
      "sgd | momentum | adam (adam: parameter-server mode only)");
  add("mode", po::value(&mode)->default_value(mode),
      "auto | allreduce | ps (auto: ps when the job has parameter servers, COHORT_PS_ADDRS)");
  add("staleness", po::value(&staleness)->default_value(staleness),
      "parameter-server mode: -1 asynchronous, s >= 0 bounded staleness (0: synchronous)");
  add("momentum", po::value(&options.momentum)->default_value(options.momentum, "0.9"),
      "momentum coefficient");
  add("seed", po::value(&options.seed)->default_value(options.seed),
      "initialisation and data-order seed");
  add("checkpoint-every", po::value(&options.checkpoint_every)->default_value(0),
      "steps between checkpoints into AIP_CHECKPOINT_DIR (0: none)");
  add("keep-checkpoints", po::value(&options.keep_checkpoints)->default_value(3),
      "checkpoints kept");
  add("data", po::value(&data_path)->default_value(data_path), "digits.csv.gz");
  add("split-seed", po::value(&split_seed)->default_value(split_seed), "train/test split seed");
  add("model-dir", po::value(&options.model_dir), "overrides AIP_MODEL_DIR");
  add("checkpoint-dir", po::value(&options.checkpoint_dir), "overrides AIP_CHECKPOINT_DIR");
  add("restore", po::value(&options.restore_from), "overrides COHORT_RESTORE_CHECKPOINT");
  add("metric-file", po::value(&options.metric_file), "overrides CLOUD_ML_HP_METRIC_FILE");
  add("metric-tag", po::value(&options.metric_tag)->default_value(options.metric_tag),
      "hypertune metric name");
  add("epoch-pause-ms", po::value(&options.epoch_pause_ms)->default_value(0),
      "allreduce mode: pause this long after each epoch (a run slow enough to watch; the model "
      "is unchanged)");
  add("fail-at-step", po::value(&options.fail_at_step)->default_value(0),
      "fault injection: exit 143 after this step, on the first attempt only "
      "(COHORT_RESTART_COUNT unset or 0)");
  const std::vector<std::string> args = NormalizeFlags(argc, argv);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(flags).run(), vm);
    po::notify(vm);
  } catch (po::error& e) {
    std::cerr << "digits-trainer: " << cohort::FlagErrorText(e) << " (--help lists the flags)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "digits-trainer: " << e.what() << " (--help lists the flags)\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout
        << "usage: digits-trainer [options]\n"
           "Cohort's example trainer: a data-parallel MLP on the digits data set, all-reduced "
           "through\nCohort's collectives or trained through its parameter servers.\n\n"
        << flags << "\n";
    return 0;
  }
  if (vm.count("version")) {
    std::cout << "digits-trainer " << cohort::CohortBuildVersion() << "\n";
    return 0;
  }
  if (mode != "auto" && mode != "allreduce" && mode != "ps") {
    std::cerr << "digits-trainer: --mode must be auto, allreduce or ps, got " << mode << "\n";
    return 2;
  }
  const bool ps_mode = mode == "ps" || (mode == "auto" && !Env("COHORT_PS_ADDRS").empty());
  if (ps_mode && options.epoch_pause_ms != 0) {
    std::cerr << "digits-trainer: --epoch-pause-ms applies to allreduce mode only\n";
    return 2;
  }
  if (optimizer == "sgd") {
    options.optimizer = Optimizer::kSgd;
  } else if (optimizer == "momentum") {
    options.optimizer = Optimizer::kMomentum;
  } else if (optimizer != "adam" || !ps_mode) {
    std::cerr << "digits-trainer: --optimizer must be sgd or momentum"
              << (ps_mode ? " or adam" : " (adam runs on parameter servers: --mode=ps)") << ", got "
              << optimizer << "\n";
    return 2;
  }
  if (!vm.count("model-dir")) options.model_dir = Env("AIP_MODEL_DIR");
  if (!vm.count("checkpoint-dir")) options.checkpoint_dir = Env("AIP_CHECKPOINT_DIR");
  if (!vm.count("restore")) options.restore_from = Env("COHORT_RESTORE_CHECKPOINT");
  if (!vm.count("metric-file")) options.metric_file = Env("CLOUD_ML_HP_METRIC_FILE");
  options.trial_id = Env("CLOUD_ML_TRIAL_ID");
  // A restarted replica must get past the injected failure, from whatever checkpoint it has.
  const std::string restart_count = Env("COHORT_RESTART_COUNT");
  if (!restart_count.empty() && restart_count != "0") options.fail_at_step = 0;
  options.stop_requested = &g_stop;

  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  // Only the training roles run it; an evaluator or reducer pool running it would train a model
  // of its own and overwrite the chief's outputs.
  if (const std::string role = Env("COHORT_ROLE");
      !role.empty() && role != "chief" && role != "worker") {
    spdlog::error("digits-trainer runs as the chief or a worker, not as role '{}'", role);
    return 2;
  }

  auto data = LoadDigits(data_path);
  if (!data.ok()) {
    spdlog::error("{}", data.status().ToString());
    return 1;
  }
  Dataset train, test;
  SplitTrainTest(*data, 0.2, split_seed, &train, &test);

  if (ps_mode) return RunParameterServerMode(options, optimizer, staleness, train, test);

  auto averager = MakeGradientAveragerFromEnvironment();
  if (!averager.ok()) {
    spdlog::error("{}", averager.status().ToString());
    return averager.status().code() == StatusCode::kInvalidArgument ? 2 : kExitRetryable;
  }
  Trainer trainer(options, train, test, averager->get());
  if (auto valid = trainer.ValidateOptions(); !valid.ok()) {
    spdlog::error("{}", valid.ToString());
    return 2;
  }
  auto result = trainer.Run();
  if (!result.ok()) {
    spdlog::error("{}", result.status().ToString());
    return ExitCodeFor(result.status());
  }
  return 0;
}
