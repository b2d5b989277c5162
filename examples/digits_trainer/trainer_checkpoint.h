// Checkpoints of the digits trainer, kept through common/checkpoint.h (DESIGN.md "Checkpoints"):
// a directory ckpt-<step>/ holding trainer_state.bin (trainer_state.h), committed by its MANIFEST,
// so a reader never takes a torn checkpoint.
#pragma once

#include <string>

#include "common/status.h"
#include "examples/digits_trainer/trainer_state.h"

namespace cohort::examples {

inline constexpr const char* kTrainerStateFile = "trainer_state.bin";

// Writes `state` as checkpoint ckpt-<state.step> under `dir` and keeps the newest `keep`.
Status SaveTrainerCheckpoint(const std::string& dir, const TrainerState& state, int keep);

// Loads the trainer state from `path`: a checkpoint directory itself, or a directory of them (the
// newest whose manifest verifies is taken). `*restored` is set to the checkpoint used.
StatusOr<TrainerState> RestoreTrainerCheckpoint(const std::string& path, std::string* restored);

}  // namespace cohort::examples
