// Suggester is a search algorithm of a study (grid, random, Bayesian): given what the study has
// seen, it proposes the next trial's parameters.
//
// Contract: Suggest() is a function of the spec, the seed and its arguments only. The n-th
// suggestion (n = completed.size() + pending.size()) draws from a generator seeded by (seed, n),
// so a coordinator that restarts and replays its journal gets the same suggestions, and random
// search is reproducible from the seed. No sockets, no coordinator state, no clock.
//  - `completed`: finished trials in creation order, each with its final metric (absent when the
//    trial failed, was infeasible or reported nothing).
//  - `pending`: trials created but not finished (running or queued).
// Returns the assignment, or nullopt when the search is exhausted (grid done, or every point of a
// finite space already tried). An assignment that does not fit the spec gives kInvalidArgument.
//
// Thread safety: implementations hold only immutable state; one Suggest call at a time per object
// is still the intended use.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "common/status.h"
#include "common/study_spec.h"

namespace cohort::coordinator::tuning {

struct TrialObservation {
  Assignment parameters;
  std::optional<double> final_metric;
};

class Suggester {
 public:
  virtual ~Suggester() = default;
  virtual StatusOr<std::optional<Assignment>> Suggest(
      const std::vector<TrialObservation>& completed, const std::vector<Assignment>& pending) = 0;
};

// The parameters of every trial so far, completed ones first, each checked against the spec
// (ValidateAssignment's error for the first that does not fit): where every search starts.
StatusOr<std::vector<Assignment>> TriedAssignments(const StudySpec& spec,
                                                   const std::vector<TrialObservation>& completed,
                                                   const std::vector<Assignment>& pending);

// The suggester for spec.algorithm. The spec must be valid (ValidateStudySpec).
StatusOr<std::unique_ptr<Suggester>> MakeSuggester(const StudySpec& spec);

}  // namespace cohort::coordinator::tuning
