// Trainer runs data-parallel SGD for the digits MLP on one rank of a job (DESIGN.md "Jobs": the
// chief is rank 0, worker i is rank i+1).
//
// Each global batch of `batch_size` examples (taken in a shuffled order that every rank derives
// from the same seed) is cut into world_size contiguous shards; each rank sums the gradient of its
// shard, the GradientAverager averages the scaled sums, and every rank applies the same update, so
// all replicas hold the same model after every step. The averaged buffer also carries the batch
// loss and a "stop" vote, so a preempted rank (SIGTERM) stops every rank at the same step.
//
// Files: the chief alone writes checkpoints (every `checkpoint_every` steps, newest
// `keep_checkpoints` kept), the hypertune metric lines, and at the end model.bin and metrics.json.
// model.bin: "CDGTMLP1" | u32 inputs (64) | u32 hidden | u32 classes (10) | u32 0
//            | f32 W1[hidden][64] | f32 b1[hidden] | f32 W2[10][hidden] | f32 b2[10]
//            (little-endian)
//
// Determinism: fixed seeds, fixed data order, fixed summation order and an averager that gives
// every rank the same bits make a run resumed from a checkpoint end bit-identical to one that never
// stopped (for the same world size).
//
// Errors: Run() returns kCancelled when a stop was requested (after the chief's checkpoint),
// kAborted for an injected failure (fail_at_step), the averager's Status when a peer is lost, and
// file errors as they come.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/status.h"
#include "examples/digits_trainer/digits_dataset.h"
#include "examples/digits_trainer/gradient_averager.h"

namespace cohort::examples {

enum class Optimizer { kSgd, kMomentum };

struct TrainerOptions {
  int epochs = 10;
  double learning_rate = 0.05;
  int hidden = 64;
  int batch_size = 32;  // global batch, split across ranks
  Optimizer optimizer = Optimizer::kMomentum;
  double momentum = 0.9;
  uint64_t seed = 1;
  int64_t checkpoint_every = 0;  // steps; 0: never
  int keep_checkpoints = 3;

  std::string model_dir;       // AIP_MODEL_DIR; empty: no model files
  std::string checkpoint_dir;  // AIP_CHECKPOINT_DIR; empty: no checkpoints
  std::string restore_from;    // COHORT_RESTORE_CHECKPOINT: a ckpt-<step>/ dir or a dir of them
  std::string metric_file;     // CLOUD_ML_HP_METRIC_FILE; empty: no metric lines
  std::string trial_id;        // CLOUD_ML_TRIAL_ID
  std::string metric_tag = "accuracy";

  // A pause after each epoch's line, for a run slow enough to watch (the demo); the model is the
  // same as without it. Cut short when a stop is requested.
  int epoch_pause_ms = 0;

  int64_t fail_at_step = 0;  // testing: return kAborted right after this step (0: never),
                             // unless the run was restored at or past it
  const std::atomic<bool>* stop_requested = nullptr;  // set by a signal handler; may be null
  std::FILE* log = stdout;                            // progress lines; null: quiet
};

struct TrainResult {
  double test_accuracy = 0.0;
  double train_loss = 0.0;  // mean batch loss of the last epoch
  int64_t steps = 0;
  int64_t restored_step = -1;  // the checkpoint's step when the run was restored, else -1
  std::vector<float> params;
};

class Trainer {
 public:
  // `train`, `test` and `averager` must outlive the trainer.
  Trainer(TrainerOptions options, const Dataset& train, const Dataset& test,
          GradientAverager* averager);

  Status ValidateOptions() const;
  StatusOr<TrainResult> Run();

 private:
  void Log(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  Status WriteMetricLine(double accuracy, int64_t step) const;
  void PauseAfterEpoch() const;
  Status WriteModel(const std::vector<float>& params, const TrainResult& result) const;

  TrainerOptions options_;
  const Dataset& train_;
  const Dataset& test_;
  GradientAverager* averager_;
};

std::string_view OptimizerName(Optimizer optimizer);

// zlib CRC-32 of the parameters' bytes: every rank logs it at the end, so equal models are easy
// to see across replicas' logs.
uint32_t ModelCrc32(const std::vector<float>& params);

// Writes `bytes` to `path` through a temporary file and rename, so readers never see a torn file.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace cohort::examples
