// RandomSuggester draws each trial's parameters independently (SearchSpace::Sample) from the
// generator for (seed, n), n the number of trials so far: the same seed gives the same sequence.
// In a finite space it avoids points already tried and is exhausted once all are.
#pragma once

#include <optional>
#include <vector>

#include "coordinator/tuning/search_space.h"
#include "coordinator/tuning/suggester.h"

namespace cohort::coordinator::tuning {

class RandomSuggester : public Suggester {
 public:
  explicit RandomSuggester(const StudySpec& spec) : space_(spec) {}

  StatusOr<std::optional<Assignment>> Suggest(const std::vector<TrialObservation>& completed,
                                              const std::vector<Assignment>& pending) override;

  // The draw for the n-th trial, avoiding `seen` keys in a finite space; nullopt when a finite
  // space has no unseen point left. Shared with the Bayesian search's initial trials.
  static std::optional<Assignment> Draw(const SearchSpace& space, uint64_t seed, uint64_t n,
                                        const std::vector<Assignment>& seen);

 private:
  SearchSpace space_;
};

}  // namespace cohort::coordinator::tuning
