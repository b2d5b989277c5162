#include "coordinator/tuning/grid_suggester.h"

#include <unordered_set>

namespace cohort::coordinator::tuning {

StatusOr<std::optional<Assignment>> GridSuggester::Suggest(
    const std::vector<TrialObservation>& completed, const std::vector<Assignment>& pending) {
  const std::optional<uint64_t> size = space_.finite_size();
  if (!size) return InvalidArgument("grid search needs a finite space (no double parameters)");
  std::unordered_set<std::string> seen;
  for (const auto& t : completed) {
    COHORT_RETURN_IF_ERROR(ValidateAssignment(space_.spec(), t.parameters));
    seen.insert(space_.Key(t.parameters));
  }
  for (const auto& a : pending) {
    COHORT_RETURN_IF_ERROR(ValidateAssignment(space_.spec(), a));
    seen.insert(space_.Key(a));
  }
  // Every seen key is a grid point, so at most seen.size() + 1 points are visited.
  for (uint64_t i = 0; i < *size; ++i) {
    Assignment a = space_.GridPoint(i);
    if (seen.count(space_.Key(a)) == 0) return std::optional<Assignment>(std::move(a));
  }
  return std::optional<Assignment>();
}

}  // namespace cohort::coordinator::tuning
