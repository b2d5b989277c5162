// TrainerState is everything a digits-trainer run needs to continue exactly where it stopped:
// parameters, optimizer state, global step, the random generator and the current epoch's data
// order. A run resumed from it ends with the same model, bit for bit, as one that never stopped.
//
// Serialized form (little-endian; the file "trainer_state.bin" inside a checkpoint):
//   "CDGTST02" | u32 hidden | u32 batch_size | i64 step | f64 epoch_loss_sum | i64 epoch_batches
//   | u32 n + n bytes of RNG state | u32 n + n u32 data order | u64 n + n f32 params
//   | u64 n + n f32 velocity (n = 0 for plain SGD)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cohort::examples {

struct TrainerState {
  int hidden = 0;
  int batch_size = 0;           // the global batch the step count is measured in
  int64_t step = 0;             // optimizer updates applied so far (global, same on all ranks)
  double epoch_loss_sum = 0.0;  // running sum of batch losses in the current epoch
  int64_t epoch_batches = 0;
  std::string rng_state;        // Rng::SaveState() after the last draw
  std::vector<uint32_t> order;  // the current epoch's shuffled training indices
  std::vector<float> params;
  std::vector<float> velocity;  // momentum buffer; empty for SGD

  bool operator==(const TrainerState&) const = default;
};

std::string SerializeTrainerState(const TrainerState& state);
// kDataLoss when the bytes are truncated or not a trainer state.
StatusOr<TrainerState> ParseTrainerState(std::string_view bytes);

}  // namespace cohort::examples
