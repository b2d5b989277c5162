// Synthetic objectives for the search algorithms (shared by tuning_test and cohort-bench-tuning):
// Branin (2-D, minimum 0.397887) and Hartmann-6 (6-D on the unit cube, minimum -3.32237), both
// minimised, as study specs, plus a sequential study loop.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/study_spec.h"
#include "coordinator/tuning/suggester.h"

namespace cohort::coordinator::tuning::testing {

inline double Branin(const std::vector<double>& x) {
  const double a = 1.0, b = 5.1 / (4 * M_PI * M_PI), c = 5.0 / M_PI, r = 6.0, s = 10.0,
               t = 1.0 / (8 * M_PI);
  const double x1 = x[0], x2 = x[1];
  return a * std::pow(x2 - b * x1 * x1 + c * x1 - r, 2) + s * (1 - t) * std::cos(x1) + s;
}

inline double Hartmann6(const std::vector<double>& x) {
  static const double kAlpha[4] = {1.0, 1.2, 3.0, 3.2};
  static const double kA[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                  {0.05, 10, 17, 0.1, 8, 14},
                                  {3, 3.5, 1.7, 10, 17, 8},
                                  {17, 8, 0.05, 10, 0.1, 14}};
  static const double kP[4][6] = {{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
                                  {0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
                                  {0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
                                  {0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381}};
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 6; ++j) inner += kA[i][j] * (x[j] - kP[i][j]) * (x[j] - kP[i][j]);
    sum += kAlpha[i] * std::exp(-inner);
  }
  return -sum;
}

inline ParameterSpec DoubleParam(const std::string& id, double lo, double hi) {
  ParameterSpec p;
  p.id = id;
  p.type = ParameterType::kDouble;
  p.min = lo;
  p.max = hi;
  return p;
}

inline StudySpec MinimizeStudy(std::vector<ParameterSpec> params, SearchAlgorithm algorithm,
                               uint64_t seed, int max_trials) {
  StudySpec s;
  s.name = "synthetic";
  s.metric_id = "value";
  s.goal = MetricGoal::kMinimize;
  s.parameters = std::move(params);
  s.algorithm = algorithm;
  s.max_trials = max_trials;
  s.parallel_trials = 1;
  s.max_failed_trials = max_trials;
  s.seed = seed;
  s.trial_job.name = "trial";
  WorkerPoolSpec chief;
  chief.process = ProcessSpec{{"/bin/true"}, {}, {}};
  s.trial_job.pools.push_back(chief);
  return s;
}

inline StudySpec BraninStudy(SearchAlgorithm algorithm, uint64_t seed, int trials) {
  return MinimizeStudy({DoubleParam("x1", -5, 10), DoubleParam("x2", 0, 15)}, algorithm, seed,
                       trials);
}

inline StudySpec Hartmann6Study(SearchAlgorithm algorithm, uint64_t seed, int trials) {
  std::vector<ParameterSpec> params;
  for (int i = 0; i < 6; ++i) params.push_back(DoubleParam("x" + std::to_string(i), 0, 1));
  return MinimizeStudy(std::move(params), algorithm, seed, trials);
}

// Runs `trials` sequential trials (batch of `parallel` suggestions made before any of them
// finishes) and returns the best value found, or NaN on an error.
inline double RunStudy(const StudySpec& spec,
                       const std::function<double(const std::vector<double>&)>& objective,
                       int trials, int parallel = 1) {
  StatusOr<std::unique_ptr<Suggester>> suggester = MakeSuggester(spec);
  if (!suggester.ok()) return std::nan("");
  std::vector<TrialObservation> completed;
  double best = std::numeric_limits<double>::infinity();
  while (static_cast<int>(completed.size()) < trials) {
    std::vector<Assignment> pending;
    for (int k = 0; k < parallel && static_cast<int>(completed.size() + pending.size()) < trials;
         ++k) {
      StatusOr<std::optional<Assignment>> a = (*suggester)->Suggest(completed, pending);
      if (!a.ok() || !a->has_value()) return std::nan("");
      pending.push_back(**a);
    }
    for (auto& a : pending) {
      std::vector<double> x;
      for (const auto& v : a) x.push_back(v.number);
      double y = objective(x);
      best = std::min(best, y);
      completed.push_back({std::move(a), y});
    }
  }
  return best;
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace cohort::coordinator::tuning::testing
