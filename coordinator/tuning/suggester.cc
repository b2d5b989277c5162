#include "coordinator/tuning/suggester.h"

#include "coordinator/tuning/bayesian_suggester.h"
#include "coordinator/tuning/grid_suggester.h"
#include "coordinator/tuning/random_suggester.h"

namespace cohort::coordinator::tuning {

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
