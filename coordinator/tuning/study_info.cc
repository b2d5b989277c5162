#include "coordinator/tuning/study_info.h"

#include <charconv>
#include <cmath>
#include <memory>

#include "common/utf8.h"

namespace cohort::coordinator::tuning {

wire::TrialInfoT ToTrialInfo(const Study& study, const Trial& trial) {
  wire::TrialInfoT info;
  info.id = trial.id;
  for (const auto& [k, v] : AssignmentToStrings(study.spec(), trial.parameters)) {
    auto kv = std::make_unique<wire::KeyValueT>();
    kv->key = k;
    kv->value = v;
    info.parameters.push_back(std::move(kv));
  }
  info.state = std::string(TrialStateName(trial.state));
  info.has_final_metric = trial.final_metric.has_value();
  info.final_metric = trial.final_metric.value_or(0.0);
  info.job = trial.job;
  info.steps = static_cast<int64_t>(trial.measurements.size());
  info.message = trial.message;
  return info;
}

wire::StudyInfoT ToStudyInfo(const Study& study, int64_t create_time_ms, int64_t end_time_ms) {
  const StudySpec& spec = study.spec();
  wire::StudyInfoT info;
  info.name = spec.name;
  info.state = std::string(StudyStateName(study.state()));
  info.metric = spec.metric_id;
  info.goal = std::string(MetricGoalName(spec.goal));
  info.algorithm = std::string(SearchAlgorithmName(spec.algorithm));
  info.max_trials = spec.max_trials;
  info.parallel_trials = spec.parallel_trials;
  for (const Trial& t : study.trials()) {
    info.trials.push_back(std::make_unique<wire::TrialInfoT>(ToTrialInfo(study, t)));
  }
  const Trial* best = study.BestTrial();
  info.best_trial = best != nullptr ? best->id : "";
  info.message = study.message();
  info.create_time_ms = create_time_ms;
  info.end_time_ms = end_time_ms;
  return info;
}

StatusOr<std::map<std::string, double>> MeasurementMetrics(const wire::TrialMeasurement& m) {
  std::map<std::string, double> out;
  if (m.metrics() == nullptr) return out;
  for (const wire::KeyValue* kv : *m.metrics()) {
    if (kv == nullptr || kv->key() == nullptr) continue;
    std::string key = kv->key()->str();
    if (ValidUtf8(key) != key) {
      return InvalidArgument("trial measurement: metric '" + ValidUtf8(key, /*printable=*/true) +
                             "': its name is not UTF-8");
    }
    std::string text = kv->value() != nullptr ? kv->value()->str() : "";
    double v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() ||
        !std::isfinite(v)) {
      return InvalidArgument("trial measurement: metric '" + key + "': not a finite number: '" +
                             text + "'");
    }
    out[key] = v;
  }
  return out;
}

}  // namespace cohort::coordinator::tuning
