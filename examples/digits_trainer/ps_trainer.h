// PsTrainer trains the digits MLP against parameter servers (collective/ps): the parameter-server
// mode of digits-trainer, chosen when the job has a `parameter_server` pool.
//
// The model lives on the servers, one key per tensor (W1, b1, W2, b2). Each step a rank pulls the
// parameters, computes the gradient of its contiguous share of the global batch (the same shuffled
// order on every rank, from the seed and the epoch), scales it so the servers' default rescale
// (1/world) turns the sum of the pushes into the mean over the global batch, pushes it, and
// advances its clock. The optimizer (sgd, momentum, adam) runs on the servers; the chief sends its
// settings and the initial parameters with InitModel.
//   staleness < 0: asynchronous (every push is its own update);
//   staleness s >= 0: bounded staleness; 0 is synchronous and matches single-process training
//                     with the mean gradient.
// Restart: the servers checkpoint their shards; a restarted job resumes at the step (clock) the
// servers report from InitModel.
//
// Files: the chief writes the hypertune metric line each epoch and, at the end, model.bin and
// metrics.json (same formats as Trainer, trainer.h), after a barrier so every push has landed; it
// then tells the servers that training is over.
#pragma once

#include <string>

#include "collective/ps/ps_optimizer.h"
#include "collective/ps/ps_worker.h"
#include "examples/digits_trainer/trainer.h"

namespace cohort::examples {

struct PsTrainerOptions {
  TrainerOptions base;  // epochs, lr, hidden, batch size, momentum, seed, files, log, stop
  collective::ps::OptimizerKind optimizer = collective::ps::OptimizerKind::kMomentum;
  int staleness = -1;
};

class PsTrainer {
 public:
  // `ps` must outlive the trainer.
  PsTrainer(PsTrainerOptions options, const Dataset& train, const Dataset& test,
            collective::ps::PsWorker* ps);
  StatusOr<TrainResult> Run();

 private:
  void Log(const char* format, ...) const __attribute__((format(printf, 2, 3)));

  PsTrainerOptions options_;
  const Dataset& train_;
  const Dataset& test_;
  collective::ps::PsWorker* ps_;
};

}  // namespace cohort::examples
