// The searches that look only at which points a study has tried (completed or pending), never at
// their metrics: each is a rule for the next point given the tried ones.
//
// GridSuggester walks the full product of the parameters' values in a fixed order (file order, the
// last parameter varying fastest; see SearchSpace::GridPoint) and suggests the first point that no
// completed or pending trial has, so every point is tried exactly once, and failed points are not
// retried. Exhausted after the last point. Needs a study without double parameters.
//
// RandomSuggester draws each trial's parameters independently (SearchSpace::Sample) from the
// generator for (seed, n), n the number of trials so far: the same seed gives the same sequence.
// In a finite space it avoids points already tried and is exhausted once all are.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "coordinator/tuning/search_space.h"
#include "coordinator/tuning/suggester.h"

namespace cohort::coordinator::tuning {

// Suggest: the tried points (TriedAssignments: validated, completed ones first), then Next.
class TriedPointSuggester : public Suggester {
 public:
  explicit TriedPointSuggester(const StudySpec& spec) : space_(spec) {}

  StatusOr<std::optional<Assignment>> Suggest(const std::vector<TrialObservation>& completed,
                                              const std::vector<Assignment>& pending) final;

 protected:
  // The next point given every tried one; nullopt when the search is exhausted.
  virtual StatusOr<std::optional<Assignment>> Next(const std::vector<Assignment>& tried) const = 0;

  SearchSpace space_;
};

class GridSuggester : public TriedPointSuggester {
 public:
  using TriedPointSuggester::TriedPointSuggester;

 protected:
  StatusOr<std::optional<Assignment>> Next(const std::vector<Assignment>& tried) const override;
};

class RandomSuggester : public TriedPointSuggester {
 public:
  using TriedPointSuggester::TriedPointSuggester;

  // The draw for the n-th trial, avoiding `seen` keys in a finite space; nullopt when a finite
  // space has no unseen point left. Shared with the Bayesian search's initial trials.
  static std::optional<Assignment> Draw(const SearchSpace& space, uint64_t seed, uint64_t n,
                                        const std::vector<Assignment>& seen);

 protected:
  StatusOr<std::optional<Assignment>> Next(const std::vector<Assignment>& tried) const override;
};

}  // namespace cohort::coordinator::tuning
