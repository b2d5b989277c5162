#include "examples/digits_trainer/trainer_checkpoint.h"

#include <filesystem>

#include "common/checkpoint.h"

namespace cohort::examples {

Status SaveTrainerCheckpoint(const std::string& dir, const TrainerState& state, int keep) {
  CheckpointWriter writer(dir, state.step);
  COHORT_RETURN_IF_ERROR(writer.AddFile(kTrainerStateFile, SerializeTrainerState(state)));
  auto committed = writer.Commit();
  if (!committed.ok()) return committed.status();
  return RetainLatest(dir, keep);
}

StatusOr<TrainerState> RestoreTrainerCheckpoint(const std::string& path, std::string* restored) {
  std::string checkpoint = path;
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(path) / "MANIFEST", ec)) {
    // A directory of checkpoints: take the newest one that verifies.
    COHORT_ASSIGN_OR_RETURN(CheckpointInfo latest, FindLatestValidCheckpoint(path));
    checkpoint = latest.path;
  }
  auto bytes = ReadCheckpointFile(checkpoint, kTrainerStateFile);
  if (!bytes.ok()) return bytes.status().WithContext("restoring " + checkpoint);
  auto state = ParseTrainerState(*bytes);
  if (!state.ok()) return state.status().WithContext("restoring " + checkpoint);
  if (restored != nullptr) *restored = checkpoint;
  return state;
}

}  // namespace cohort::examples
