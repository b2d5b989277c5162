#include "coordinator/tuning/suggester.h"

#include "coordinator/tuning/bayesian_suggester.h"
#include "coordinator/tuning/point_suggesters.h"

namespace cohort::coordinator::tuning {

StatusOr<std::vector<Assignment>> TriedAssignments(const StudySpec& spec,
                                                   const std::vector<TrialObservation>& completed,
                                                   const std::vector<Assignment>& pending) {
  std::vector<Assignment> tried;
  tried.reserve(completed.size() + pending.size());
  for (const auto& t : completed) {
    COHORT_RETURN_IF_ERROR(ValidateAssignment(spec, t.parameters));
    tried.push_back(t.parameters);
  }
  for (const auto& a : pending) {
    COHORT_RETURN_IF_ERROR(ValidateAssignment(spec, a));
    tried.push_back(a);
  }
  return tried;
}

StatusOr<std::unique_ptr<Suggester>> MakeSuggester(const StudySpec& spec) {
  COHORT_RETURN_IF_ERROR(ValidateStudySpec(spec));
  switch (spec.algorithm) {
    case SearchAlgorithm::kGrid:
      return std::unique_ptr<Suggester>(new GridSuggester(spec));
    case SearchAlgorithm::kRandom:
      return std::unique_ptr<Suggester>(new RandomSuggester(spec));
    case SearchAlgorithm::kBayesian:
      return std::unique_ptr<Suggester>(new BayesianSuggester(spec));
  }
  return InvalidArgument("algorithm: unknown");
}

}  // namespace cohort::coordinator::tuning
