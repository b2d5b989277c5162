// What a study spec says about its trials (see study_spec.h): the grid's size, parameter values as
// text and back, assignments, and the job one trial runs.
#include <algorithm>

#include "common/study_spec.h"
#include "common/yaml_reader.h"

namespace cohort {

std::optional<uint64_t> GridCount(const ParameterSpec& p) {
  switch (p.type) {
    case ParameterType::kDouble:
      return std::nullopt;
    case ParameterType::kInteger:
      if (!(p.max >= p.min)) return std::nullopt;
      return static_cast<uint64_t>(p.max - p.min) + 1;
    case ParameterType::kCategorical:
      return p.categories.size();
    case ParameterType::kDiscrete:
      return p.values.size();
  }
  return std::nullopt;
}

std::optional<uint64_t> GridSize(const StudySpec& spec, uint64_t limit) {
  uint64_t total = 1;
  for (const auto& p : spec.parameters) {
    const std::optional<uint64_t> n = GridCount(p);
    if (!n) return std::nullopt;
    if (*n == 0) return uint64_t{0};
    if (total > limit / *n) return std::nullopt;
    total *= *n;
  }
  return total;
}

std::string FormatParameterValue(const ParameterSpec& param, const ParameterValue& value) {
  switch (param.type) {
    case ParameterType::kCategorical:
      return value.category;
    case ParameterType::kInteger: {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(std::llround(value.number)));
      return buf;
    }
    case ParameterType::kDouble:
    case ParameterType::kDiscrete:
      return FormatDouble(value.number);
  }
  return "";
}

StatusOr<ParameterValue> ParseParameterValue(const ParameterSpec& param, std::string_view text) {
  ParameterValue v;
  const std::string where = param.id + ": ";
  if (param.type == ParameterType::kCategorical) {
    if (std::find(param.categories.begin(), param.categories.end(), text) ==
        param.categories.end()) {
      return InvalidArgument(where + Quoted(text) + " is not one of its values");
    }
    v.category = std::string(text);
    return v;
  }
  StatusOr<double> number = ParseDoubleText(text);
  if (!number.ok()) return number.status().WithContext(param.id);
  v.number = *number;
  StudySpec single;
  single.parameters = {param};
  COHORT_RETURN_IF_ERROR(ValidateAssignment(single, Assignment{v}));
  return v;
}

Status ValidateAssignment(const StudySpec& spec, const Assignment& assignment) {
  if (assignment.size() != spec.parameters.size()) {
    return InvalidArgument("assignment has " + std::to_string(assignment.size()) + " values for " +
                           std::to_string(spec.parameters.size()) + " parameters");
  }
  for (size_t i = 0; i < assignment.size(); ++i) {
    const ParameterSpec& p = spec.parameters[i];
    const ParameterValue& v = assignment[i];
    const std::string where = p.id + ": ";
    switch (p.type) {
      case ParameterType::kCategorical:
        if (std::find(p.categories.begin(), p.categories.end(), v.category) == p.categories.end()) {
          return InvalidArgument(where + Quoted(v.category) + " is not one of its values");
        }
        break;
      case ParameterType::kInteger:
        if (!IsIntegral(v.number)) {
          return InvalidArgument(where + FormatDouble(v.number) + " is not an integer");
        }
        [[fallthrough]];
      case ParameterType::kDouble:
        if (!(v.number >= p.min && v.number <= p.max)) {
          return InvalidArgument(where + FormatDouble(v.number) + " is outside [" +
                                 FormatDouble(p.min) + ", " + FormatDouble(p.max) + "]");
        }
        break;
      case ParameterType::kDiscrete:
        if (!std::binary_search(p.values.begin(), p.values.end(), v.number)) {
          return InvalidArgument(where + FormatDouble(v.number) + " is not one of its values");
        }
        break;
    }
  }
  return Status::Ok();
}

StatusOr<Assignment> ParseAssignment(const StudySpec& spec,
                                     const std::map<std::string, std::string>& values) {
  Assignment out;
  for (const auto& p : spec.parameters) {
    auto it = values.find(p.id);
    if (it == values.end()) return InvalidArgument(p.id + ": missing from the assignment");
    COHORT_ASSIGN_OR_RETURN(ParameterValue v, ParseParameterValue(p, it->second));
    out.push_back(std::move(v));
  }
  for (const auto& [k, v] : values) {
    if (spec.FindParameter(k) == nullptr) return InvalidArgument(k + ": not a study parameter");
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> AssignmentToStrings(const StudySpec& spec,
                                                                     const Assignment& assignment) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < spec.parameters.size() && i < assignment.size(); ++i) {
    out.emplace_back(spec.parameters[i].id,
                     FormatParameterValue(spec.parameters[i], assignment[i]));
  }
  return out;
}

std::string TrialJobName(std::string_view study, std::string_view trial_id) {
  return std::string(study) + "_trial_" + std::string(trial_id);
}

StatusOr<JobSpec> MakeTrialJob(const StudySpec& spec, std::string_view trial_id,
                               const Assignment& assignment) {
  COHORT_RETURN_IF_ERROR(ValidateAssignment(spec, assignment));
  JobSpec job = spec.trial_job;
  job.name = TrialJobName(spec.name, trial_id);
  std::vector<std::string> flags;
  for (const auto& [id, text] : AssignmentToStrings(spec, assignment)) {
    flags.push_back("--" + id + "=" + text);
  }
  for (auto& pool : job.pools) {
    std::vector<std::string>* args = nullptr;
    if (pool.process) args = &pool.process->args;
    if (pool.container) args = &pool.container->args;
    if (args != nullptr) args->insert(args->end(), flags.begin(), flags.end());
  }
  Status st = ValidateJobSpec(job);
  if (!st.ok()) return st.WithContext("trial " + std::string(trial_id));
  return job;
}

}  // namespace cohort
