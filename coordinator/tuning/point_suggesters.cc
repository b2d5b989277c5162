#include "coordinator/tuning/point_suggesters.h"

#include <unordered_set>

namespace cohort::coordinator::tuning {

StatusOr<std::optional<Assignment>> TriedPointSuggester::Suggest(
    const std::vector<TrialObservation>& completed, const std::vector<Assignment>& pending) {
  COHORT_ASSIGN_OR_RETURN(std::vector<Assignment> tried,
                          TriedAssignments(space_.spec(), completed, pending));
  return Next(tried);
}

StatusOr<std::optional<Assignment>> GridSuggester::Next(
    const std::vector<Assignment>& tried) const {
  const std::optional<uint64_t> size = space_.finite_size();
  if (!size) return InvalidArgument("grid search needs a finite space (no double parameters)");
  std::unordered_set<std::string> seen;
  for (const auto& a : tried) seen.insert(space_.Key(a));
  // Every seen key is a grid point, so at most seen.size() + 1 points are visited.
  for (uint64_t i = 0; i < *size; ++i) {
    Assignment a = space_.GridPoint(i);
    if (seen.count(space_.Key(a)) == 0) return std::optional<Assignment>(std::move(a));
  }
  return std::optional<Assignment>();
}

std::optional<Assignment> RandomSuggester::Draw(const SearchSpace& space, uint64_t seed, uint64_t n,
                                                const std::vector<Assignment>& seen) {
  TuningRng rng = TuningRng::ForTrial(seed, n);
  const std::optional<uint64_t> size = space.finite_size();
  if (!size) return space.Sample(&rng);  // continuous: repeats have probability zero
  std::unordered_set<std::string> keys;
  for (const auto& a : seen) keys.insert(space.Key(a));
  if (keys.size() >= *size) return std::nullopt;
  for (int attempt = 0; attempt < 64; ++attempt) {
    Assignment a = space.Sample(&rng);
    if (keys.count(space.Key(a)) == 0) return a;
  }
  // A nearly exhausted finite space: walk the grid from a random point to the next unseen one.
  uint64_t start = rng.UniformInt(*size);
  for (uint64_t k = 0; k < *size; ++k) {
    Assignment a = space.GridPoint((start + k) % *size);
    if (keys.count(space.Key(a)) == 0) return a;
  }
  return std::nullopt;
}

StatusOr<std::optional<Assignment>> RandomSuggester::Next(
    const std::vector<Assignment>& tried) const {
  return Draw(space_, space_.spec().seed, tried.size(), tried);
}

}  // namespace cohort::coordinator::tuning
