// Study spec parsing and validation (see study_spec.h and DESIGN.md "Hyperparameter tuning").
//
// Like job_spec.cc, the yaml-cpp tree is walked by hand so that every error names its path and
// line; yaml-cpp's exceptions are caught here and never leave this file. The trial template is
// handed to ParseJobSpec (with a placeholder name) and its errors are re-rooted under "trial_job.".
#include "common/study_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <set>

#include "common/file_util.h"
#include "common/yaml_reader.h"

namespace cohort {

namespace {

constexpr size_t kMaxStudyNameLength = 100;
constexpr int kMaxTrials = 100000;
constexpr int kMaxParameters = 64;
constexpr int kMaxValues = 10000;
constexpr char kTemplateSource[] = "trial_job";
constexpr char kPlaceholderName[] = "trial";

bool IsAlpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool IsValidStudyName(std::string_view name) {
  if (name.empty() || name.size() > kMaxStudyNameLength || !IsAlpha(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsAlpha(c) || IsDigit(c) || c == '_' || c == '-'; });
}

// Parameter ids become `--id=value` flags: [A-Za-z_][A-Za-z0-9_.-]*.
bool IsValidParameterId(std::string_view id) {
  if (id.empty() || id.size() > 128 || !(IsAlpha(id[0]) || id[0] == '_')) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return IsAlpha(c) || IsDigit(c) || c == '_' || c == '.' || c == '-';
  });
}

bool IsValidMetricId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return IsAlpha(c) || IsDigit(c) || c == '_' || c == '.' || c == '-' || c == '/';
  });
}

using Reader = YamlReader;

StatusOr<ParameterSpec> ReadParameter(const Reader& r, const YAML::Node& node,
                                      const std::string& path) {
  COHORT_RETURN_IF_ERROR(r.CheckMap(node, path, {"id", "type", "min", "max", "scale", "values"}));
  ParameterSpec p;
  COHORT_ASSIGN_OR_RETURN(p.id, r.RequiredString(node, "id", path + ".id"));
  COHORT_ASSIGN_OR_RETURN(
      p.type, r.RequiredEnum(node, "type", path + ".type", kParameterTypeNames, "type"));
  const std::string type(NameIn(kParameterTypeNames, p.type, "?"));
  const bool numeric_range = p.type == ParameterType::kDouble || p.type == ParameterType::kInteger;
  const bool has_values =
      p.type == ParameterType::kCategorical || p.type == ParameterType::kDiscrete;
  for (const char* key : {"min", "max"}) {
    std::string kpath = path + "." + key;
    if (!numeric_range) {
      if (Reader::Has(node, key)) {
        return r.Error(node[key], kpath, "not allowed for a " + type + " parameter (use values)");
      }
      continue;
    }
    if (!Reader::Has(node, key))
      return r.Error(node, kpath, "required for a " + type + " parameter");
    COHORT_ASSIGN_OR_RETURN(double v, r.Number(node[key], kpath));
    if (p.type == ParameterType::kInteger && !IsIntegral(v)) {
      return r.Error(node[key], kpath,
                     "must be an integer for an integer parameter, got " + node[key].Scalar());
    }
    (std::string_view(key) == "min" ? p.min : p.max) = v;
  }
  if (Reader::Has(node, "scale")) {
    if (p.type == ParameterType::kCategorical) {
      return r.Error(node["scale"], path + ".scale", "not allowed for a categorical parameter");
    }
    COHORT_ASSIGN_OR_RETURN(p.scale,
                            r.Enum(node["scale"], path + ".scale", kScaleTypeNames, "scale"));
  }
  if (!has_values) {
    if (Reader::Has(node, "values")) {
      return r.Error(node["values"], path + ".values",
                     "not allowed for a " + type + " parameter (use min and max)");
    }
    return p;
  }
  std::string vpath = path + ".values";
  if (!Reader::Has(node, "values"))
    return r.Error(node, vpath, "required for a " + type + " parameter");
  const YAML::Node values = node["values"];
  if (!values.IsSequence()) {
    return r.Error(values, vpath, "expected a list, got " + Reader::KindName(values));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    std::string ipath = vpath + "[" + std::to_string(i) + "]";
    if (p.type == ParameterType::kCategorical) {
      COHORT_ASSIGN_OR_RETURN(std::string v, r.String(values[i], ipath));
      p.categories.push_back(std::move(v));
    } else {
      COHORT_ASSIGN_OR_RETURN(double v, r.Number(values[i], ipath));
      p.values.push_back(v);
    }
  }
  std::sort(p.values.begin(), p.values.end());
  return p;
}

StatusOr<EarlyStoppingSpec> ReadEarlyStopping(const Reader& r, const YAML::Node& node) {
  const std::string path = "early_stopping";
  COHORT_RETURN_IF_ERROR(r.CheckMap(node, path, {"median", "min_steps", "min_trials"}));
  EarlyStoppingSpec e;
  if (Reader::Has(node, "median")) {
    COHORT_ASSIGN_OR_RETURN(e.median, r.Bool(node["median"], path + ".median"));
  }
  if (Reader::Has(node, "min_steps")) {
    COHORT_ASSIGN_OR_RETURN(e.min_steps, r.SmallInt(node["min_steps"], path + ".min_steps"));
  }
  if (Reader::Has(node, "min_trials")) {
    COHORT_ASSIGN_OR_RETURN(e.min_trials, r.SmallInt(node["min_trials"], path + ".min_trials"));
  }
  return e;
}

// Re-roots a ParseJobSpec error ("trial_job[:L:C]: worker_pools[0].x: what") under the study's
// trial_job key: "<source>:L:C: trial_job.worker_pools[0].x: what", with the line of the
// trial_job block in the study file (template lines do not map back one to one).
Status RerootTemplateError(const Reader& r, const YAML::Node& node, const Status& st) {
  std::string_view m = st.message();
  if (m.substr(0, sizeof(kTemplateSource) - 1) == kTemplateSource) {
    m.remove_prefix(sizeof(kTemplateSource) - 1);
    // Optional ":line:col".
    while (!m.empty() && m[0] == ':' && m.size() > 1 && IsDigit(m[1])) {
      m.remove_prefix(1);
      while (!m.empty() && IsDigit(m[0])) m.remove_prefix(1);
    }
    if (m.substr(0, 2) == ": ") m.remove_prefix(2);
  }
  std::string rest(m);
  if (rest.rfind("(document): ", 0) == 0) rest = rest.substr(12);
  std::string out = r.source() + Reader::Mark(node) + ": trial_job";
  if (rest.rfind("malformed YAML", 0) == 0) {
    out += ": " + rest;
  } else {
    out += "." + rest;
  }
  return Status(st.code(), std::move(out));
}

StatusOr<JobSpec> ReadTrialJob(const Reader& r, const YAML::Node& node) {
  if (!node.IsMap()) {
    return r.Error(
        node, "trial_job",
        "expected a mapping (a job file without its name), got " + Reader::KindName(node));
  }
  if (node["name"].IsDefined()) {
    return r.Error(node["name"], "trial_job.name",
                   "not allowed: each trial's job is named <study>_trial_<id>");
  }
  YAML::Node copy = YAML::Clone(node);
  copy["name"] = kPlaceholderName;
  YAML::Emitter out;
  out << copy;
  if (!out.good()) return r.Error(node, "trial_job", "cannot re-emit: " + out.GetLastError());
  StatusOr<JobSpec> job = ParseJobSpec(out.c_str(), kTemplateSource);
  if (!job.ok()) return RerootTemplateError(r, node, job.status());
  return job;
}

StatusOr<StudySpec> ReadStudy(const Reader& r, const YAML::Node& root) {
  if (!root.IsDefined() || root.IsNull()) return r.Error(root, "", "empty study spec");
  COHORT_RETURN_IF_ERROR(
      r.CheckMap(root, "",
                 {"name", "metric", "parameters", "algorithm", "max_trials", "parallel_trials",
                  "max_failed_trials", "early_stopping", "seed", "trial_job"}));
  StudySpec spec;
  if (!Reader::Has(root, "name")) return r.Error(root, "name", "required");
  COHORT_ASSIGN_OR_RETURN(spec.name, r.String(root["name"], "name"));

  if (!Reader::Has(root, "metric")) {
    return r.Error(root, "metric", "required ({id: NAME, goal: maximize|minimize})");
  }
  const YAML::Node metric = root["metric"];
  COHORT_RETURN_IF_ERROR(r.CheckMap(metric, "metric", {"id", "goal"}));
  COHORT_ASSIGN_OR_RETURN(spec.metric_id, r.RequiredString(metric, "id", "metric.id"));
  COHORT_ASSIGN_OR_RETURN(spec.goal,
                          r.RequiredEnum(metric, "goal", "metric.goal", kMetricGoalNames, "goal"));

  COHORT_ASSIGN_OR_RETURN(spec.parameters, r.RequiredList<ParameterSpec>(
                                               root, "parameters", "at least one parameter",
                                               [&](const YAML::Node& n, const std::string& p) {
                                                 return ReadParameter(r, n, p);
                                               }));

  COHORT_ASSIGN_OR_RETURN(spec.algorithm, r.RequiredEnum(root, "algorithm", "algorithm",
                                                         kSearchAlgorithmNames, "algorithm"));

  if (!Reader::Has(root, "max_trials")) return r.Error(root, "max_trials", "required");
  COHORT_ASSIGN_OR_RETURN(spec.max_trials, r.SmallInt(root["max_trials"], "max_trials"));
  if (Reader::Has(root, "parallel_trials")) {
    COHORT_ASSIGN_OR_RETURN(spec.parallel_trials,
                            r.SmallInt(root["parallel_trials"], "parallel_trials"));
  }
  spec.max_failed_trials = spec.max_trials;
  if (Reader::Has(root, "max_failed_trials")) {
    COHORT_ASSIGN_OR_RETURN(spec.max_failed_trials,
                            r.SmallInt(root["max_failed_trials"], "max_failed_trials"));
  }
  if (Reader::Has(root, "early_stopping")) {
    COHORT_ASSIGN_OR_RETURN(spec.early_stopping, ReadEarlyStopping(r, root["early_stopping"]));
  }
  if (Reader::Has(root, "seed")) {
    COHORT_ASSIGN_OR_RETURN(int64_t seed, r.Int(root["seed"], "seed"));
    if (seed < 0) return r.Error(root["seed"], "seed", "must not be negative");
    spec.seed = static_cast<uint64_t>(seed);
  }
  if (!Reader::Has(root, "trial_job")) {
    return r.Error(root, "trial_job", "required (a job spec without its name)");
  }
  COHORT_ASSIGN_OR_RETURN(spec.trial_job, ReadTrialJob(r, root["trial_job"]));
  return spec;
}

Status ValidateParameter(const ParameterSpec& p, const std::string& path,
                         SearchAlgorithm algorithm) {
  if (!IsValidParameterId(p.id)) {
    return InvalidArgument(path + ".id: " + Quoted(p.id) +
                           " is not a valid parameter id (must match [A-Za-z_][A-Za-z0-9_.-]*)");
  }
  const std::string what = "parameter " + Quoted(p.id);
  switch (p.type) {
    case ParameterType::kDouble:
    case ParameterType::kInteger:
      if (!std::isfinite(p.min) || !std::isfinite(p.max)) {
        return InvalidArgument(path + ": min and max must be finite");
      }
      if (p.type == ParameterType::kInteger && (!IsIntegral(p.min) || !IsIntegral(p.max))) {
        return InvalidArgument(path + ".min: an integer parameter needs integral min and max");
      }
      if (!(p.min < p.max)) {
        return InvalidArgument(path + ".max: must be greater than min (" + FormatDouble(p.min) +
                               "), got " + FormatDouble(p.max));
      }
      if (p.scale != ScaleType::kLinear && p.min <= 0) {
        return InvalidArgument(path + ".min: the " + std::string(ScaleTypeName(p.scale)) +
                               " scale needs min > 0, got " + FormatDouble(p.min));
      }
      if (p.type == ParameterType::kDouble && algorithm == SearchAlgorithm::kGrid) {
        return InvalidArgument(path + ".type: grid search cannot enumerate double " + what +
                               " (use integer, discrete or categorical, or another algorithm)");
      }
      if (p.type == ParameterType::kInteger && p.max - p.min > 1e9) {
        return InvalidArgument(path + ".max: integer range too large (at most 1e9 values)");
      }
      break;
    case ParameterType::kCategorical: {
      if (p.categories.empty()) return InvalidArgument(path + ".values: must not be empty");
      if (p.categories.size() > static_cast<size_t>(kMaxValues)) {
        return InvalidArgument(path + ".values: at most " + std::to_string(kMaxValues) + " values");
      }
      std::set<std::string> seen;
      for (size_t i = 0; i < p.categories.size(); ++i) {
        if (!seen.insert(p.categories[i]).second) {
          return InvalidArgument(path + ".values[" + std::to_string(i) + "]: duplicate value " +
                                 Quoted(p.categories[i]));
        }
        if (p.categories[i].empty() || p.categories[i].find('\0') != std::string::npos) {
          return InvalidArgument(path + ".values[" + std::to_string(i) +
                                 "]: must be a non-empty string without NUL bytes");
        }
      }
      break;
    }
    case ParameterType::kDiscrete: {
      if (p.values.empty()) return InvalidArgument(path + ".values: must not be empty");
      if (p.values.size() > static_cast<size_t>(kMaxValues)) {
        return InvalidArgument(path + ".values: at most " + std::to_string(kMaxValues) + " values");
      }
      for (size_t i = 0; i < p.values.size(); ++i) {
        if (!std::isfinite(p.values[i])) {
          return InvalidArgument(path + ".values: values must be finite");
        }
        if (i > 0 && p.values[i] == p.values[i - 1]) {
          return InvalidArgument(path + ".values: duplicate value " + FormatDouble(p.values[i]));
        }
      }
      if (p.scale != ScaleType::kLinear && p.values.front() <= 0) {
        return InvalidArgument(path + ".values: the " + std::string(ScaleTypeName(p.scale)) +
                               " scale needs every value > 0, got " +
                               FormatDouble(p.values.front()));
      }
      break;
    }
  }
  return Status::Ok();
}

}  // namespace

std::string FormatDouble(double v) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return std::to_string(v);
  return std::string(buf, ptr);
}

bool IsIntegral(double v) { return std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 9e15; }

std::string_view ScaleTypeName(ScaleType scale) { return NameIn(kScaleTypeNames, scale, "?"); }

std::string_view SearchAlgorithmName(SearchAlgorithm algorithm) {
  return NameIn(kSearchAlgorithmNames, algorithm, "?");
}

std::string_view MetricGoalName(MetricGoal goal) { return NameIn(kMetricGoalNames, goal, "?"); }

const ParameterSpec* StudySpec::FindParameter(std::string_view id) const {
  for (const auto& p : parameters) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

namespace {

Status CheckStudyName(std::string_view name) {
  if (IsValidStudyName(name)) return Status::Ok();
  return InvalidArgument("name: " + Quoted(name) +
                         " is not a valid study name (must match [A-Za-z][A-Za-z0-9_-]{0,99})");
}

}  // namespace

StatusOr<std::string> WithStudyName(std::string_view yaml, std::string_view name) {
  COHORT_RETURN_IF_ERROR(CheckStudyName(name));
  return EditYamlMap(yaml, "study file", [&](YAML::Node& root) {
    root["name"] = std::string(name);
    return Status::Ok();
  });
}

StatusOr<std::string> WithTrialJobEdits(std::string_view yaml, const SubmitEdits& edits) {
  return EditYamlMap(yaml, "study file", [&](YAML::Node& root) -> Status {
    YAML::Node trial_job = root["trial_job"];
    if (!trial_job || !trial_job.IsMap()) {
      return InvalidArgument(
          "trial_job: the study file has no trial job (a map) to take "
          "--env, --label and -- ARGS");
    }
    SubmitEdits trial_edits;
    trial_edits.env = edits.env;
    trial_edits.args = edits.args;
    trial_edits.labels = edits.labels;
    StatusOr<std::string> edited = ApplySubmitEdits(YAML::Dump(trial_job), trial_edits);
    if (!edited.ok()) {
      // The job file's fields named as the study file's.
      std::string message = edited.status().message();
      for (auto [from, to] : {std::pair{"the job file's ", "the study file's trial_job."},
                              std::pair{"of the job file", "of the study file's trial_job"}}) {
        if (size_t at = message.find(from); at != std::string::npos) {
          message.replace(at, std::string_view(from).size(), to);
        }
      }
      return InvalidArgument(message);
    }
    root["trial_job"] = YAML::Load(*edited);
    return Status::Ok();
  });
}

Status ValidateStudySpec(const StudySpec& spec) {
  COHORT_RETURN_IF_ERROR(CheckStudyName(spec.name));
  if (!IsValidMetricId(spec.metric_id)) {
    return InvalidArgument("metric.id: " + Quoted(spec.metric_id) +
                           " is not a valid metric id (letters, digits, _ . - /)");
  }
  if (spec.parameters.empty()) {
    return InvalidArgument("parameters: at least one parameter is required");
  }
  if (spec.parameters.size() > static_cast<size_t>(kMaxParameters)) {
    return InvalidArgument("parameters: at most " + std::to_string(kMaxParameters) +
                           " parameters, got " + std::to_string(spec.parameters.size()));
  }
  std::map<std::string, size_t> ids;
  for (size_t i = 0; i < spec.parameters.size(); ++i) {
    const std::string path = "parameters[" + std::to_string(i) + "]";
    COHORT_RETURN_IF_ERROR(ValidateParameter(spec.parameters[i], path, spec.algorithm));
    auto [it, inserted] = ids.emplace(spec.parameters[i].id, i);
    if (!inserted) {
      return InvalidArgument(path + ".id: duplicate id " + Quoted(spec.parameters[i].id) +
                             " (also parameters[" + std::to_string(it->second) + "])");
    }
  }
  if (spec.max_trials < 1 || spec.max_trials > kMaxTrials) {
    return InvalidArgument("max_trials: must be in 1.." + std::to_string(kMaxTrials) + ", got " +
                           std::to_string(spec.max_trials));
  }
  if (spec.parallel_trials < 1) {
    return InvalidArgument("parallel_trials: must be at least 1, got " +
                           std::to_string(spec.parallel_trials));
  }
  if (spec.parallel_trials > spec.max_trials) {
    return InvalidArgument("parallel_trials: must be at most max_trials (" +
                           std::to_string(spec.max_trials) + "), got " +
                           std::to_string(spec.parallel_trials));
  }
  if (spec.max_failed_trials < 0) {
    return InvalidArgument("max_failed_trials: must not be negative, got " +
                           std::to_string(spec.max_failed_trials));
  }
  if (spec.early_stopping) {
    if (spec.early_stopping->min_steps < 1) {
      return InvalidArgument("early_stopping.min_steps: must be at least 1, got " +
                             std::to_string(spec.early_stopping->min_steps));
    }
    if (spec.early_stopping->min_trials < 1) {
      return InvalidArgument("early_stopping.min_trials: must be at least 1, got " +
                             std::to_string(spec.early_stopping->min_trials));
    }
  }
  if (spec.algorithm == SearchAlgorithm::kGrid && !GridSize(spec).has_value()) {
    return InvalidArgument("parameters: the grid has more than 2^40 points");
  }
  if (spec.trial_job.name != kPlaceholderName) {
    return InvalidArgument("trial_job.name: must be the placeholder '" +
                           std::string(kPlaceholderName) + "'");
  }
  Status st = ValidateJobSpec(spec.trial_job);
  if (!st.ok()) return Status(st.code(), "trial_job." + st.message());
  if (spec.trial_job.scheduling.hold) {
    return InvalidArgument(
        "trial_job.scheduling.hold: a study's trials cannot be held (each would wait for a "
        "`cohort resume`); submit the study when it may run");
  }
  return Status::Ok();
}

StatusOr<StudySpec> ParseStudySpec(std::string_view yaml, std::string_view source) {
  Reader reader(source);
  COHORT_ASSIGN_OR_RETURN(StudySpec spec,
                          ReadYamlDocument(yaml, source, [&](const YAML::Node& root) {
                            return ReadStudy(reader, root);
                          }));
  Status st = ValidateStudySpec(spec);
  if (!st.ok()) return st.WithContext(source);
  return spec;
}

StatusOr<StudySpec> LoadStudySpec(const std::string& path) {
  COHORT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, "study file"));
  return ParseStudySpec(text, path);
}

}  // namespace cohort
