// TEMPORARY: plain-directory checkpoints until common/checkpoint.h lands.
#include "examples/digits_trainer/trainer_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "examples/digits_trainer/trainer.h"

namespace cohort::examples {

Status SaveTrainerCheckpoint(const std::string& dir, const TrainerState& state, int keep) {
  namespace fs = std::filesystem;
  const fs::path ckpt = fs::path(dir) / ("ckpt-" + std::to_string(state.step));
  std::error_code ec;
  fs::create_directories(ckpt, ec);
  if (ec) return Internal(ec.message());
  COHORT_RETURN_IF_ERROR(
      WriteFileAtomically((ckpt / kTrainerStateFile).string(), SerializeTrainerState(state)));
  std::vector<std::pair<long long, fs::path>> all;
  for (auto& e : fs::directory_iterator(dir)) {
    auto name = e.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0) all.push_back({std::stoll(name.substr(5)), e.path()});
  }
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i + keep < all.size(); ++i) fs::remove_all(all[i].second, ec);
  return Status::Ok();
}

StatusOr<TrainerState> RestoreTrainerCheckpoint(const std::string& path, std::string* restored) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (!fs::exists(p / kTrainerStateFile)) {
    long long best = -1;
    for (auto& e : fs::directory_iterator(p)) {
      auto name = e.path().filename().string();
      if (name.rfind("ckpt-", 0) == 0 && std::stoll(name.substr(5)) > best) {
        best = std::stoll(name.substr(5));
        p = e.path();
      }
    }
  }
  std::ifstream in(p / kTrainerStateFile, std::ios::binary);
  if (!in) return NotFound("no checkpoint in " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  *restored = p.string();
  return ParseTrainerState(ss.str());
}

}  // namespace cohort::examples
