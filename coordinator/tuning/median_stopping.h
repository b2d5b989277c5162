// MedianStoppingRule: the median early-stopping rule of a study (Vertex's median automated
// stopping; Golovin et al., "Google Vizier", 2017). A running trial is stopped when its best value
// so far is worse than the median, over the completed trials, of their running averages at the
// trial's current step (the mean of each completed trial's measurements up to that step).
//
// The rule applies only once the trial has reported `min_steps` measurements and at least
// `min_trials` completed trials have a measurement at or before its current step; before that it
// never stops anything. "Worse" follows the study's goal (below the median when maximising, above
// it when minimising); equal to the median is not worse.
//
// Thread safety: immutable; a pure function of its arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/study_spec.h"

namespace cohort::coordinator::tuning {

struct Measurement {
  int64_t step = 0;
  double value = 0;
};

struct StoppingDecision {
  bool stop = false;
  double best = 0;     // the trial's best value so far
  double median = 0;   // median of the completed trials' running averages (when compared)
  int compared = 0;    // completed trials that took part; 0: the rule did not apply
  std::string reason;  // for the log and the trial's message
};

class MedianStoppingRule {
 public:
  MedianStoppingRule(MetricGoal goal, const EarlyStoppingSpec& spec) : goal_(goal), spec_(spec) {}

  // `completed`: each completed trial's measurements of the study metric; `trial`: the running
  // trial's measurements so far. Neither needs to be sorted.
  StoppingDecision Evaluate(const std::vector<std::vector<Measurement>>& completed,
                            const std::vector<Measurement>& trial) const;

 private:
  MetricGoal goal_;
  EarlyStoppingSpec spec_;
};

}  // namespace cohort::coordinator::tuning
