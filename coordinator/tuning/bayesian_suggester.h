// BayesianSuggester: Gaussian-process Bayesian optimisation with expected improvement.
//
// The first max(2, parameters + 1) trials, and any suggestion while fewer than two trials have a
// metric, are random (the same draws RandomSuggester makes for that seed). After that:
//  1. Completed trials are encoded on the unit cube (SearchSpace), metrics turned into a
//     maximisation problem and standardised; a GP (Matérn 5/2 ARD) is fitted by MAP.
//  2. Pending trials, and failed trials, are added with a "constant liar" value, the worst
//     standardised metric seen, under the same hyperparameters. Their predicted variance drops to
//     the noise level and their mean to the lie, so parallel suggestions spread out instead of
//     piling onto the same optimum.
//  3. Expected improvement over the best real metric is evaluated on random candidates plus
//     perturbations of the best trials, all snapped onto feasible points; the best few are refined
//     by a shrinking local random search. In a finite space, points already tried are skipped.
// Deterministic for a given (seed, history).
#pragma once

#include <optional>
#include <vector>

#include "coordinator/tuning/gaussian_process.h"
#include "coordinator/tuning/search_space.h"
#include "coordinator/tuning/suggester.h"

namespace cohort::coordinator::tuning {

struct BayesianOptions {
  int initial_random_trials = -1;  // -1: max(2, parameters + 1)
  int random_candidates = -1;      // -1: min(4000, 1000 + 200 * dims)
  int refine_starts = 5;
  int refine_steps = 40;
  double exploration_xi = 0.01;  // EI margin, in standardised metric units
  GpFitOptions fit;
  // Fewer fit restarts as the data grows (each likelihood evaluation is O(n^3)): fit.restarts up
  // to 100 trials with a metric, 2 up to 250, 1 beyond (bench/RESULTS.md "Tuning").
  bool adaptive_restarts = true;
};

class BayesianSuggester : public Suggester {
 public:
  explicit BayesianSuggester(const StudySpec& spec, BayesianOptions options = {})
      : space_(spec), options_(options) {}

  StatusOr<std::optional<Assignment>> Suggest(const std::vector<TrialObservation>& completed,
                                              const std::vector<Assignment>& pending) override;

 private:
  SearchSpace space_;
  BayesianOptions options_;
};

// Expected improvement of a maximisation over `best` at a point with posterior `mean`, `variance`.
double ExpectedImprovement(double mean, double variance, double best, double xi);

}  // namespace cohort::coordinator::tuning
