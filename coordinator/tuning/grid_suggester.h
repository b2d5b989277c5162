// GridSuggester walks the full product of the parameters' values in a fixed order (file order, the
// last parameter varying fastest; see SearchSpace::GridPoint) and suggests the first point that no
// completed or pending trial has, so every point is tried exactly once, and failed points are not
// retried. Exhausted after the last point. Needs a study without double parameters.
#pragma once

#include <optional>
#include <vector>

#include "coordinator/tuning/search_space.h"
#include "coordinator/tuning/suggester.h"

namespace cohort::coordinator::tuning {

class GridSuggester : public Suggester {
 public:
  explicit GridSuggester(const StudySpec& spec) : space_(spec) {}

  StatusOr<std::optional<Assignment>> Suggest(const std::vector<TrialObservation>& completed,
                                              const std::vector<Assignment>& pending) override;

 private:
  SearchSpace space_;
};

}  // namespace cohort::coordinator::tuning
