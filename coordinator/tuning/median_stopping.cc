#include "coordinator/tuning/median_stopping.h"

#include <algorithm>
#include <cstdio>

namespace cohort::coordinator::tuning {

StoppingDecision MedianStoppingRule::Evaluate(
    const std::vector<std::vector<Measurement>>& completed,
    const std::vector<Measurement>& trial) const {
  StoppingDecision d;
  if (!spec_.median || trial.empty() || static_cast<int>(trial.size()) < spec_.min_steps) {
    return d;
  }
  const bool maximize = goal_ == MetricGoal::kMaximize;
  int64_t step = trial.front().step;
  d.best = trial.front().value;
  for (const auto& m : trial) {
    step = std::max(step, m.step);
    d.best = maximize ? std::max(d.best, m.value) : std::min(d.best, m.value);
  }
  std::vector<double> averages;
  for (const auto& series : completed) {
    double sum = 0;
    int count = 0;
    for (const auto& m : series) {
      if (m.step <= step) {
        sum += m.value;
        ++count;
      }
    }
    if (count > 0) averages.push_back(sum / count);
  }
  if (averages.empty() || static_cast<int>(averages.size()) < spec_.min_trials) return d;
  std::sort(averages.begin(), averages.end());
  const size_t n = averages.size();
  d.median = n % 2 == 1 ? averages[n / 2] : 0.5 * (averages[n / 2 - 1] + averages[n / 2]);
  d.compared = static_cast<int>(n);
  d.stop = maximize ? d.best < d.median : d.best > d.median;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "median stopping at step %lld: best %.6g is %s the median %.6g of %d completed "
                "trials' running averages",
                static_cast<long long>(step), d.best, d.stop ? "worse than" : "not worse than",
                d.median, d.compared);
  d.reason = buf;
  return d;
}

}  // namespace cohort::coordinator::tuning
