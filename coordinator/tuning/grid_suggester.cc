#include "coordinator/tuning/grid_suggester.h"

#include <unordered_set>

namespace cohort::coordinator::tuning {

StatusOr<std::optional<Assignment>> GridSuggester::Suggest(
    const std::vector<TrialObservation>& completed, const std::vector<Assignment>& pending) {
  const std::optional<uint64_t> size = space_.finite_size();
  if (!size) return InvalidArgument("grid search needs a finite space (no double parameters)");
  COHORT_ASSIGN_OR_RETURN(std::vector<Assignment> tried,
                          TriedAssignments(space_.spec(), completed, pending));
  std::unordered_set<std::string> seen;
  for (const auto& a : tried) seen.insert(space_.Key(a));
  // Every seen key is a grid point, so at most seen.size() + 1 points are visited.
  for (uint64_t i = 0; i < *size; ++i) {
    Assignment a = space_.GridPoint(i);
    if (seen.count(space_.Key(a)) == 0) return std::optional<Assignment>(std::move(a));
  }
  return std::optional<Assignment>();
}

}  // namespace cohort::coordinator::tuning
