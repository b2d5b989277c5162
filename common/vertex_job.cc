// Vertex AI CustomJob files read into a JobSpec, and HyperparameterTuningJob files into a study
// file (see vertex_job.h), walked with YamlReader so that every error names the file, the line
// and the field path, and no yaml-cpp exception escapes.
#include "common/vertex_job.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <iterator>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "common/job_spec.h"
#include "common/nearest_name.h"
#include "common/study_spec.h"
#include "common/yaml_reader.h"

namespace cohort {
namespace {

// The Vertex pool index of each role (DESIGN.md "Jobs").
constexpr Role kPoolRoles[] = {Role::kChief, Role::kWorker, Role::kParameterServer,
                               Role::kEvaluator};
constexpr int kMaxCount = 100000;  // replicas of a pool, trials of a study

// What a CustomJob says of a past run (as `gcloud ai custom-jobs describe` writes it): accepted
// and left alone, since they ask for nothing.
constexpr std::string_view kOutputOnlyKeys[] = {
    "name",       "state", "createTime",    "startTime",    "endTime",
    "updateTime", "error", "webAccessUris", "satisfiesPzs", "satisfiesPzi"};

// What a pythonPackageSpec pool runs, as `python3 -c kPackageLauncher MODULE PACKAGE... -- ARG...`:
// pip installs the packages (without their dependencies: no index is reached) into the attempt's
// directory, which goes on PYTHONPATH after what the agent put there, then the process becomes
// `python3 -m MODULE ARG...` (exec: the same pid, its signals and exit code the job's). A failed
// install exits with pip's status, its output in the replica's log.
constexpr const char* kPackageLauncher =
    "import os, subprocess, sys\n"
    "module = sys.argv[1]\n"
    "cut = sys.argv.index('--')\n"
    "packages, args = sys.argv[2:cut], sys.argv[cut + 1:]\n"
    "target = os.path.join(os.environ.get('COHORT_ATTEMPT_DIR') or os.getcwd(), "
    "'python-packages')\n"
    "done = subprocess.run([sys.executable, '-m', 'pip', 'install', '--no-index', '--no-deps', "
    "'--no-build-isolation', '--disable-pip-version-check', '--no-warn-script-location', "
    "'--upgrade', '--target', target] + packages)\n"
    "if done.returncode != 0:\n"
    "    sys.exit(done.returncode)\n"
    "path = os.environ.get('PYTHONPATH')\n"
    "os.environ['PYTHONPATH'] = path + os.pathsep + target if path else target\n"
    "os.execv(sys.executable, [sys.executable, '-m', module] + args)\n";

// Vertex's prebuilt training images (us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-1:latest,
// and the older gcr.io/cloud-aiplatform/training/...), which no node here has.
bool IsVertexTrainingImage(const std::string& image) {
  return image.find("/vertex-ai/training/") != std::string::npos ||
         image.find("/cloud-aiplatform/training/") != std::string::npos;
}

class VertexReader {
 public:
  explicit VertexReader(std::string_view source) : r_(source) {}

  StatusOr<VertexConversion> ReadCustomJob(const YAML::Node& root) {
    if (!root.IsMap()) return r_.Error(root, "", "expected a mapping, got " + r_.KindName(root));
    JobSpec spec;
    spec.name_prefix = "custom-job";
    if (YamlReader::Has(root, "jobSpec")) {
      // A whole CustomJob.
      for (const auto& kv : root) {
        if (!kv.first.IsScalar()) return r_.Error(kv.first, "", "keys must be strings");
        const std::string& key = kv.first.Scalar();
        if (key == "jobSpec" || key == "displayName" || IsOutputOnly(key)) continue;
        if (key == "labels") {
          COHORT_RETURN_IF_ERROR(ReadLabels(kv.second, &spec.labels));
          continue;
        }
        if (key == "encryptionSpec") {
          Note(key, "ignored (no counterpart in Cohort)");
          continue;
        }
        return r_.Error(
            kv.first, key,
            UnknownKey(key, "CustomJob", {"jobSpec", "displayName", "labels", "encryptionSpec"}));
      }
      if (YamlReader::Has(root, "displayName")) {
        COHORT_ASSIGN_OR_RETURN(std::string display, r_.String(root["displayName"], "displayName"));
        spec.name_prefix = NamePrefix(display, kMaxNamePrefixLength);
      }
      COHORT_RETURN_IF_ERROR(ReadJobSpec(root["jobSpec"], "jobSpec", &spec));
    } else {
      COHORT_RETURN_IF_ERROR(ReadJobSpec(root, "", &spec));
    }
    if (Status valid = ValidateJobSpec(spec); !valid.ok()) {
      return valid.WithContext(r_.source() + " as a Cohort job");
    }
    VertexConversion conversion;
    conversion.yaml = JobSpecToYaml(spec);
    conversion.notes = std::move(notes_);
    return conversion;
  }

  // `name`, when not empty, stands for a displayName the file lacks (the caller renames the study
  // after: `cohort tune --name`).
  StatusOr<VertexConversion> ReadTuningJob(const YAML::Node& root, std::string_view name_given) {
    if (!root.IsMap()) return r_.Error(root, "", "expected a mapping, got " + r_.KindName(root));
    std::string name;
    int max_trials = 1, parallel_trials = 1;
    std::optional<int> max_failed_trials;
    NodeLabels labels;  // the tuning job's: each trial job's
    for (const auto& kv : root) {
      if (!kv.first.IsScalar()) return r_.Error(kv.first, "", "keys must be strings");
      const std::string& key = kv.first.Scalar();
      if (key == "studySpec" || key == "trialJobSpec" || key == "trials" || IsOutputOnly(key)) {
        continue;
      }
      if (key == "displayName") {
        COHORT_ASSIGN_OR_RETURN(std::string display, r_.String(kv.second, key));
        name = NamePrefix(display, kMaxStudyName);
      } else if (key == "maxTrialCount") {
        COHORT_ASSIGN_OR_RETURN(max_trials, Count(kv.second, key, kMaxCount));
      } else if (key == "parallelTrialCount") {
        COHORT_ASSIGN_OR_RETURN(parallel_trials, Count(kv.second, key, kMaxCount));
      } else if (key == "maxFailedTrialCount") {
        COHORT_ASSIGN_OR_RETURN(max_failed_trials, Count(kv.second, key, kMaxCount));
      } else if (key == "labels") {
        COHORT_RETURN_IF_ERROR(ReadLabels(kv.second, &labels));
      } else if (key == "encryptionSpec") {
        Note(key, "ignored (no counterpart in Cohort)");
      } else {
        return r_.Error(
            kv.first, key,
            UnknownKey(key, "HyperparameterTuningJob",
                       {"displayName", "studySpec", "trialJobSpec", "maxTrialCount",
                        "parallelTrialCount", "maxFailedTrialCount", "labels", "encryptionSpec"}));
      }
    }
    if (name.empty()) name = name_given;
    if (name.empty()) {
      return r_.Error(root, "displayName",
                      "required: it names the study (gcloud takes it as --display-name; "
                      "`cohort tune --name` may give it instead)");
    }
    if (!YamlReader::Has(root, "maxTrialCount")) {
      Note("maxTrialCount", "absent: one trial, as gcloud's --max-trial-count defaults to");
    }
    if (!YamlReader::Has(root, "studySpec")) return r_.Error(root, "studySpec", "required");
    if (!YamlReader::Has(root, "trialJobSpec")) return r_.Error(root, "trialJobSpec", "required");

    YAML::Emitter out;
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << name;
    COHORT_RETURN_IF_ERROR(EmitStudy(root["studySpec"], "studySpec", out));
    out << YAML::Key << "max_trials" << YAML::Value << max_trials;
    out << YAML::Key << "parallel_trials" << YAML::Value << parallel_trials;
    if (max_failed_trials) {
      out << YAML::Key << "max_failed_trials" << YAML::Value << *max_failed_trials;
    }
    // The trial job: a CustomJobSpec, as the job file it makes without its name.
    JobSpec trial;
    trial.name_prefix = "trial";
    COHORT_RETURN_IF_ERROR(ReadJobSpec(root["trialJobSpec"], "trialJobSpec", &trial));
    trial.labels = std::move(labels);
    if (Status valid = ValidateJobSpec(trial); !valid.ok()) {
      return valid.WithContext(r_.source() + ": trialJobSpec as a Cohort job");
    }
    YAML::Node trial_job = YAML::Load(JobSpecToYaml(trial));
    trial_job.remove("name_prefix");
    out << YAML::Key << "trial_job" << YAML::Value << trial_job;
    out << YAML::EndMap;

    VertexConversion conversion;
    conversion.yaml = out.c_str();
    if (Status valid = ParseStudySpec(conversion.yaml, r_.source() + " as a Cohort study").status();
        !valid.ok()) {
      return valid;
    }
    conversion.notes = std::move(notes_);
    return conversion;
  }

 private:
  static constexpr size_t kMaxStudyName = 100;

  // metric, parameters, algorithm and early_stopping of the study file, from a Vertex StudySpec.
  Status EmitStudy(const YAML::Node& node, const std::string& path, YAML::Emitter& out) {
    COHORT_RETURN_IF_ERROR(r_.CheckMap(
        node, path,
        {"metrics", "parameters", "algorithm", "observationNoise", "measurementSelectionType",
         "decayCurveStoppingSpec", "medianAutomatedStoppingSpec", "convexAutomatedStoppingSpec",
         "convexStopConfig", "studyStoppingConfig"}));
    const std::string metrics_path = path + ".metrics";
    if (!YamlReader::Has(node, "metrics") || !node["metrics"].IsSequence() ||
        node["metrics"].size() != 1) {
      return r_.Error(YamlReader::Has(node, "metrics") ? node["metrics"] : node, metrics_path,
                      "one metric is required (Cohort studies optimise one)");
    }
    const YAML::Node metric = node["metrics"][0];
    const std::string metric_path = metrics_path + "[0]";
    COHORT_RETURN_IF_ERROR(r_.CheckMap(metric, metric_path, {"metricId", "goal", "safetyConfig"}));
    COHORT_ASSIGN_OR_RETURN(std::string metric_id,
                            r_.RequiredString(metric, "metricId", metric_path + ".metricId"));
    COHORT_ASSIGN_OR_RETURN(std::string goal,
                            r_.RequiredString(metric, "goal", metric_path + ".goal"));
    if (goal != "MAXIMIZE" && goal != "MINIMIZE") {
      return r_.Error(metric["goal"], metric_path + ".goal",
                      Quoted(goal) + " is not MAXIMIZE or MINIMIZE");
    }
    if (YamlReader::Has(metric, "safetyConfig")) {
      Note(metric_path + ".safetyConfig", "ignored (no counterpart in Cohort)");
    }
    out << YAML::Key << "metric" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "id" << YAML::Value << YAML::DoubleQuoted << metric_id;
    out << YAML::Key << "goal" << YAML::Value << (goal == "MAXIMIZE" ? "maximize" : "minimize");
    out << YAML::EndMap;

    const std::string params_path = path + ".parameters";
    if (!YamlReader::Has(node, "parameters") || !node["parameters"].IsSequence()) {
      return r_.Error(node, params_path, "required (a list)");
    }
    out << YAML::Key << "parameters" << YAML::Value << YAML::BeginSeq;
    for (size_t i = 0; i < node["parameters"].size(); ++i) {
      COHORT_RETURN_IF_ERROR(
          EmitParameter(node["parameters"][i], params_path + "[" + std::to_string(i) + "]", out));
    }
    out << YAML::EndSeq;

    std::string algorithm = "ALGORITHM_UNSPECIFIED";
    if (YamlReader::Has(node, "algorithm")) {
      COHORT_ASSIGN_OR_RETURN(algorithm, r_.String(node["algorithm"], path + ".algorithm"));
    }
    const char* ours = algorithm == "GRID_SEARCH"             ? "grid"
                       : algorithm == "RANDOM_SEARCH"         ? "random"
                       : algorithm == "ALGORITHM_UNSPECIFIED" ? "bayesian"  // Vertex's default
                                                              : nullptr;
    if (ours == nullptr) {
      return r_.Error(
          node["algorithm"], path + ".algorithm",
          Quoted(algorithm) + " is not GRID_SEARCH, RANDOM_SEARCH or ALGORITHM_UNSPECIFIED");
    }
    out << YAML::Key << "algorithm" << YAML::Value << ours;

    if (YamlReader::Has(node, "medianAutomatedStoppingSpec")) {
      const YAML::Node median = node["medianAutomatedStoppingSpec"];
      const std::string at = path + ".medianAutomatedStoppingSpec";
      COHORT_RETURN_IF_ERROR(r_.CheckMap(median, at, {"useElapsedDuration"}));
      if (YamlReader::Has(median, "useElapsedDuration")) {
        COHORT_ASSIGN_OR_RETURN(bool elapsed,
                                r_.Bool(median["useElapsedDuration"], at + ".useElapsedDuration"));
        if (elapsed) Note(at + ".useElapsedDuration", "ignored (trials are compared by step)");
      }
      out << YAML::Key << "early_stopping" << YAML::Value << YAML::Flow << YAML::BeginMap
          << YAML::Key << "median" << YAML::Value << true << YAML::EndMap;
    }
    for (const char* key : {"decayCurveStoppingSpec", "convexAutomatedStoppingSpec",
                            "convexStopConfig", "studyStoppingConfig", "observationNoise"}) {
      if (YamlReader::Has(node, key)) {
        Note(path + "." + key,
             "ignored (Cohort's early stopping is the median rule: medianAutomatedStoppingSpec)");
      }
    }
    std::string selection = "BEST_MEASUREMENT";  // Vertex's default
    if (YamlReader::Has(node, "measurementSelectionType")) {
      COHORT_ASSIGN_OR_RETURN(selection, r_.String(node["measurementSelectionType"],
                                                   path + ".measurementSelectionType"));
    }
    if (selection != "LAST_MEASUREMENT") {
      Note(path + ".measurementSelectionType",
           Quoted(selection) +
               ": a Cohort trial's objective is its last reported value (LAST_MEASUREMENT)");
    }
    return Status::Ok();
  }

  // A number: plain, or the decimal string REST writes for an int64.
  StatusOr<double> Number(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) {
      return r_.Error(node, path, "expected a number, got " + r_.KindName(node));
    }
    StatusOr<double> value = ParseDoubleText(node.Scalar());
    if (!value.ok()) return r_.Error(node, path, value.status().message());
    return *value;
  }

  Status EmitParameter(const YAML::Node& node, const std::string& path, YAML::Emitter& out) {
    COHORT_RETURN_IF_ERROR(
        r_.CheckMap(node, path,
                    {"parameterId", "doubleValueSpec", "integerValueSpec", "categoricalValueSpec",
                     "discreteValueSpec", "scaleType", "conditionalParameterSpecs"}));
    if (YamlReader::Has(node, "conditionalParameterSpecs")) {
      return r_.Error(node["conditionalParameterSpecs"], path + ".conditionalParameterSpecs",
                      "not supported: Cohort studies search every parameter in every trial");
    }
    COHORT_ASSIGN_OR_RETURN(std::string id,
                            r_.RequiredString(node, "parameterId", path + ".parameterId"));
    const char* kinds[] = {"doubleValueSpec", "integerValueSpec", "categoricalValueSpec",
                           "discreteValueSpec"};
    const char* kind = nullptr;
    for (const char* k : kinds) {
      if (!YamlReader::Has(node, k)) continue;
      if (kind != nullptr) {
        return r_.Error(node[k], path + "." + k, std::string("given with ") + kind + ": one only");
      }
      kind = k;
    }
    if (kind == nullptr) {
      return r_.Error(node, path,
                      "needs one of doubleValueSpec, integerValueSpec, categoricalValueSpec, "
                      "discreteValueSpec");
    }
    const YAML::Node spec = node[kind];
    const std::string at = path + "." + kind;
    out << YAML::BeginMap << YAML::Key << "id" << YAML::Value << YAML::DoubleQuoted << id;
    const std::string_view which(kind);
    if (which == "doubleValueSpec" || which == "integerValueSpec") {
      COHORT_RETURN_IF_ERROR(r_.CheckMap(spec, at, {"minValue", "maxValue", "defaultValue"}));
      out << YAML::Key << "type" << YAML::Value
          << (which == "doubleValueSpec" ? "double" : "integer");
      for (const auto& [vertex_key, our_key] :
           {std::pair<const char*, const char*>{"minValue", "min"}, {"maxValue", "max"}}) {
        if (!YamlReader::Has(spec, vertex_key)) {
          return r_.Error(spec, at + "." + vertex_key, "required");
        }
        COHORT_ASSIGN_OR_RETURN(double value, Number(spec[vertex_key], at + "." + vertex_key));
        out << YAML::Key << our_key << YAML::Value << FormatDouble(value);
      }
    } else if (which == "categoricalValueSpec") {
      COHORT_RETURN_IF_ERROR(r_.CheckMap(spec, at, {"values", "defaultValue"}));
      COHORT_ASSIGN_OR_RETURN(std::vector<std::string> values,
                              r_.StringList(spec["values"], at + ".values"));
      out << YAML::Key << "type" << YAML::Value << "categorical";
      out << YAML::Key << "values" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (const std::string& value : values) out << YAML::DoubleQuoted << value;
      out << YAML::EndSeq;
    } else {
      COHORT_RETURN_IF_ERROR(r_.CheckMap(spec, at, {"values", "defaultValue"}));
      const YAML::Node values = spec["values"];
      if (!values.IsSequence()) return r_.Error(spec, at + ".values", "required (a list)");
      out << YAML::Key << "type" << YAML::Value << "discrete";
      out << YAML::Key << "values" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (size_t i = 0; i < values.size(); ++i) {
        COHORT_ASSIGN_OR_RETURN(double value,
                                Number(values[i], at + ".values[" + std::to_string(i) + "]"));
        out << FormatDouble(value);
      }
      out << YAML::EndSeq;
    }
    if (YamlReader::Has(spec, "defaultValue")) {
      Note(at + ".defaultValue", "ignored (the search picks every trial's values)");
    }
    if (YamlReader::Has(node, "scaleType")) {
      COHORT_ASSIGN_OR_RETURN(std::string scale, r_.String(node["scaleType"], path + ".scaleType"));
      const char* ours = scale == "UNIT_LINEAR_SCALE" || scale == "SCALE_TYPE_UNSPECIFIED"
                             ? "linear"
                         : scale == "UNIT_LOG_SCALE"         ? "log"
                         : scale == "UNIT_REVERSE_LOG_SCALE" ? "reverse_log"
                                                             : nullptr;
      if (ours == nullptr) {
        return r_.Error(
            node["scaleType"], path + ".scaleType",
            Quoted(scale) + " is not UNIT_LINEAR_SCALE, UNIT_LOG_SCALE or UNIT_REVERSE_LOG_SCALE");
      }
      if (which != "categoricalValueSpec") out << YAML::Key << "scale" << YAML::Value << ours;
    }
    out << YAML::EndMap;
    return Status::Ok();
  }

  // "unknown key of a Vertex <kind>", and the one of `keys` or of the output-only keys `key` is
  // nearest to, when one is near (" (did you mean 'maxTrialCount'?)").
  static std::string UnknownKey(std::string_view key, std::string_view kind,
                                std::initializer_list<std::string_view> keys) {
    std::vector<std::string_view> known(keys);
    known.insert(known.end(), std::begin(kOutputOnlyKeys), std::end(kOutputOnlyKeys));
    return "unknown key of a Vertex " + std::string(kind) + DidYouMean(key, known);
  }

  static bool IsOutputOnly(std::string_view key) {
    return std::find(std::begin(kOutputOnlyKeys), std::end(kOutputOnlyKeys), key) !=
           std::end(kOutputOnlyKeys);
  }

  // A job name prefix (or a study name) from a display name: the characters a name cannot hold
  // become '-'.
  static std::string NamePrefix(const std::string& display, size_t max_length) {
    std::string prefix;
    for (char c : display) {
      const bool plain = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      prefix += plain ? c : '-';
    }
    if (prefix.empty() || !std::isalpha(static_cast<unsigned char>(prefix.front()))) {
      prefix = "job-" + prefix;
    }
    if (prefix.size() > max_length) prefix.resize(max_length);
    return prefix;
  }

  // A Vertex `labels` map into `labels`: each the job's label, or, where Cohort's label syntax
  // cannot hold it (Vertex takes international letters), named in a note and left out.
  Status ReadLabels(const YAML::Node& node, NodeLabels* labels) {
    COHORT_RETURN_IF_ERROR(r_.CheckUserMap(node, "labels"));
    for (const auto& kv : node) {
      const std::string& key = kv.first.Scalar();
      COHORT_ASSIGN_OR_RETURN(std::string value, r_.String(kv.second, "labels." + key));
      if (Status bad = CheckNodeLabel(key, value); !bad.ok()) {
        Note("labels." + key, "left out: " + bad.message());
      } else if (labels->size() == kMaxJobLabels) {
        Note("labels." + key, "left out: a job has at most " + std::to_string(kMaxJobLabels));
      } else {
        (*labels)[key] = value;
      }
    }
    return Status::Ok();
  }

  void Note(const std::string& path, const std::string& what) {
    notes_.push_back("Vertex " + path + ": " + what);
  }

  // A count: a plain number, or the decimal string REST writes for an int64.
  StatusOr<int> Count(const YAML::Node& node, const std::string& path, int max) const {
    if (!node.IsScalar()) return r_.Error(node, path, "expected a count, got " + r_.KindName(node));
    const std::string& text = node.Scalar();
    if (text.empty() || text.size() > 9 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return r_.Error(node, path, "expected a count, got " + Quoted(text));
    }
    const int value = std::stoi(text);
    if (value > max) {
      return r_.Error(node, path, Quoted(text) + " is over " + std::to_string(max));
    }
    return value;
  }

  // A protobuf Duration as JSON writes it: "<seconds>[.<fraction>]s", rounded up to seconds.
  StatusOr<std::chrono::seconds> Duration(const YAML::Node& node, const std::string& path) const {
    COHORT_ASSIGN_OR_RETURN(std::string text, r_.String(node, path));
    const auto bad = [&] {
      return r_.Error(node, path, Quoted(text) + " is not a duration such as \"7200s\"");
    };
    if (text.size() < 2 || text.back() != 's') return bad();
    const std::string number = text.substr(0, text.size() - 1);
    const size_t dot = number.find('.');
    const std::string whole = number.substr(0, dot);
    const std::string fraction = dot == std::string::npos ? "" : number.substr(dot + 1);
    const auto digits = [](const std::string& s) {
      return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (whole.empty() || whole.size() > 12 || !digits(whole) || !digits(fraction)) return bad();
    int64_t seconds = std::stoll(whole);
    if (fraction.find_first_not_of('0') != std::string::npos) ++seconds;
    if (seconds <= 0) return r_.Error(node, path, "must be positive");
    return std::chrono::seconds(seconds);
  }

  Status ReadJobSpec(const YAML::Node& node, const std::string& path, JobSpec* spec) {
    COHORT_RETURN_IF_ERROR(r_.CheckMap(
        node, path,
        {"workerPoolSpecs", "scheduling", "baseOutputDirectory", "serviceAccount", "network",
         "reservedIpRanges", "pscInterfaceConfig", "protectedArtifactLocationId", "tensorboard",
         "enableWebAccess", "enableDashboardAccess", "experiment", "experimentRun", "models",
         "persistentResourceId"}));
    for (const auto& kv : node) {
      const std::string& key = kv.first.Scalar();
      if (key == "workerPoolSpecs" || key == "scheduling" || key == "baseOutputDirectory") {
        continue;
      }
      Note(YamlReader::Join(path, key), "ignored (no counterpart in Cohort)");
    }
    const std::string pools_path = YamlReader::Join(path, "workerPoolSpecs");
    if (!YamlReader::Has(node, "workerPoolSpecs")) {
      return r_.Error(node, pools_path, "required (the chief's pool at least)");
    }
    const YAML::Node pools = node["workerPoolSpecs"];
    if (pools.IsMap()) {
      COHORT_RETURN_IF_ERROR(ReadPool(pools, pools_path, 0, spec));
    } else if (pools.IsSequence()) {
      if (pools.size() > std::size(kPoolRoles)) {
        return r_.Error(pools, pools_path,
                        "at most 4 pools (chief, workers, parameter servers or reducers, "
                        "evaluators), got " +
                            std::to_string(pools.size()));
      }
      for (size_t i = 0; i < pools.size(); ++i) {
        COHORT_RETURN_IF_ERROR(ReadPool(pools[i], pools_path + "[" + std::to_string(i) + "]",
                                        static_cast<int>(i), spec));
      }
    } else {
      return r_.Error(pools, pools_path, "expected a list, got " + r_.KindName(pools));
    }
    if (spec->pools.empty() || spec->pools.front().role != Role::kChief) {
      return r_.Error(pools, pools_path, "the first pool (the chief's) is required");
    }
    if (YamlReader::Has(node, "scheduling")) {
      COHORT_RETURN_IF_ERROR(
          ReadScheduling(node["scheduling"], YamlReader::Join(path, "scheduling"), spec));
    }
    if (!spec->scheduling.restart_job_on_worker_restart && spec->IsOneCollectiveGroup()) {
      Note(YamlReader::Join(path, "scheduling.restartJobOnWorkerRestart"),
           "unset: a replica's restart restarts the whole job, whose replicas are one all-reduce "
           "group (Vertex would restart the replica alone; false asks for that)");
    }
    if (YamlReader::Has(node, "baseOutputDirectory")) {
      const std::string at = YamlReader::Join(path, "baseOutputDirectory");
      const YAML::Node base = node["baseOutputDirectory"];
      COHORT_RETURN_IF_ERROR(r_.CheckMap(base, at, {"outputUriPrefix"}));
      COHORT_ASSIGN_OR_RETURN(std::string prefix,
                              r_.RequiredString(base, "outputUriPrefix", at + ".outputUriPrefix"));
      if (!prefix.empty() && prefix.front() == '/') {
        spec->output_dir = prefix;
      } else {
        Note(at + ".outputUriPrefix",
             Quoted(prefix) +
                 " is not a path on the nodes: the job writes under the coordinator's output "
                 "root (AIP_MODEL_DIR and the rest point there)");
      }
    }
    return Status::Ok();
  }

  Status ReadPool(const YAML::Node& node, const std::string& path, int index, JobSpec* spec) {
    if (node.IsNull() || (node.IsMap() && node.size() == 0)) return Status::Ok();  // skipped
    COHORT_RETURN_IF_ERROR(r_.CheckMap(node, path,
                                       {"containerSpec", "pythonPackageSpec", "machineSpec",
                                        "replicaCount", "nfsMounts", "diskSpec"}));
    WorkerPoolSpec pool;
    pool.role = kPoolRoles[index];
    // A machine type brings CPUs and memory with its GPUs: here the queue's defaults per GPU do.
    pool.resources.cpus_given = pool.resources.memory_given = false;
    if (YamlReader::Has(node, "replicaCount")) {
      COHORT_ASSIGN_OR_RETURN(pool.replicas,
                              Count(node["replicaCount"], path + ".replicaCount", kMaxCount));
    }
    const bool has_container = YamlReader::Has(node, "containerSpec");
    const bool has_package = YamlReader::Has(node, "pythonPackageSpec");
    if (has_container == has_package) {
      return r_.Error(node, path, "give one of containerSpec and pythonPackageSpec");
    }
    if (has_package) {
      COHORT_RETURN_IF_ERROR(
          ReadPythonPackage(node["pythonPackageSpec"], path + ".pythonPackageSpec", &pool));
    } else {
      COHORT_RETURN_IF_ERROR(ReadContainer(node["containerSpec"], path + ".containerSpec", &pool));
    }
    if (YamlReader::Has(node, "machineSpec")) {
      COHORT_RETURN_IF_ERROR(ReadMachine(node["machineSpec"], path + ".machineSpec", &pool));
    }
    for (const char* key : {"nfsMounts", "diskSpec"}) {
      if (YamlReader::Has(node, key)) {
        Note(path + "." + key,
             "ignored (mount shared storage on every node, and point output_root at it)");
      }
    }
    spec->pools.push_back(std::move(pool));
    return Status::Ok();
  }

  // A containerSpec's or pythonPackageSpec's env: [{name, value}].
  Status ReadEnv(const YAML::Node& env, const std::string& path,
                 std::map<std::string, std::string>* out) {
    if (!env.IsSequence()) return r_.Error(env, path, "expected a list of {name, value}");
    for (size_t i = 0; i < env.size(); ++i) {
      const std::string at = path + "[" + std::to_string(i) + "]";
      COHORT_RETURN_IF_ERROR(r_.CheckMap(env[i], at, {"name", "value"}));
      COHORT_ASSIGN_OR_RETURN(std::string name, r_.RequiredString(env[i], "name", at + ".name"));
      std::string value;
      if (YamlReader::Has(env[i], "value")) {
        COHORT_ASSIGN_OR_RETURN(value, r_.String(env[i]["value"], at + ".value"));
      }
      if (!out->emplace(name, value).second) {
        return r_.Error(env[i], at + ".name", Quoted(name) + " is given twice");
      }
    }
    return Status::Ok();
  }

  // pythonPackageSpec {executorImageUri, packageUris, pythonModule, args, env}: as Vertex runs it,
  // the packages are installed, then `python3 -m MODULE ARGS` runs (kPackageLauncher).
  Status ReadPythonPackage(const YAML::Node& node, const std::string& path, WorkerPoolSpec* pool) {
    COHORT_RETURN_IF_ERROR(r_.CheckMap(
        node, path, {"executorImageUri", "packageUris", "pythonModule", "args", "env"}));
    COHORT_ASSIGN_OR_RETURN(
        std::string image, r_.RequiredString(node, "executorImageUri", path + ".executorImageUri"));
    COHORT_ASSIGN_OR_RETURN(std::string module,
                            r_.RequiredString(node, "pythonModule", path + ".pythonModule"));
    if (module.empty() || module.front() == '-') {
      return r_.Error(node["pythonModule"], path + ".pythonModule",
                      "expected a module name (trainer.task), got " + Quoted(module));
    }
    if (!YamlReader::Has(node, "packageUris")) {
      return r_.Error(node, path + ".packageUris", "required");
    }
    COHORT_ASSIGN_OR_RETURN(std::vector<std::string> uris,
                            r_.StringList(node["packageUris"], path + ".packageUris"));
    if (uris.empty()) return r_.Error(node["packageUris"], path + ".packageUris", "empty");
    std::vector<std::string> command = {"python3", "-c", kPackageLauncher, module};
    for (size_t i = 0; i < uris.size(); ++i) {
      std::string uri = uris[i];
      if (uri.rfind("file://", 0) == 0) uri.erase(0, std::string_view("file://").size());
      if (uri.empty() || uri.front() != '/' || uri == "--") {
        return r_.Error(node["packageUris"][i], path + ".packageUris[" + std::to_string(i) + "]",
                        Quoted(uris[i]) +
                            " is not a path on the nodes: put the package where every node "
                            "reads it (the shared output root, a gcsfuse /gcs/ path) and give "
                            "that path");
      }
      command.push_back(std::move(uri));
    }
    command.push_back("--");
    std::vector<std::string> args;
    if (YamlReader::Has(node, "args")) {
      COHORT_ASSIGN_OR_RETURN(args, r_.StringList(node["args"], path + ".args"));
    }
    std::map<std::string, std::string> env;
    if (YamlReader::Has(node, "env")) {
      COHORT_RETURN_IF_ERROR(ReadEnv(node["env"], path + ".env", &env));
    }
    Note(path + ".packageUris",
         "installed with pip without their dependencies (the nodes have no package index): the "
         "image, or the nodes, must have those");
    if (IsVertexTrainingImage(image)) {
      // Vertex's prebuilt images hold a Python with the frameworks; here the node's does.
      Note(path + ".executorImageUri",
           Quoted(image) +
               " is a Vertex prebuilt image: the package runs on the node's own "
               "python3, as a process");
      pool->process = ProcessSpec{std::move(command), std::move(args), std::move(env)};
      return Status::Ok();
    }
    pool->container =
        ContainerSpec{std::move(image), std::move(command), std::move(args), std::move(env)};
    return Status::Ok();
  }

  Status ReadContainer(const YAML::Node& node, const std::string& path, WorkerPoolSpec* pool) {
    COHORT_RETURN_IF_ERROR(r_.CheckMap(node, path, {"imageUri", "command", "args", "env"}));
    ContainerSpec container;
    COHORT_ASSIGN_OR_RETURN(container.image,
                            r_.RequiredString(node, "imageUri", path + ".imageUri"));
    if (YamlReader::Has(node, "command")) {
      COHORT_ASSIGN_OR_RETURN(container.command, r_.StringList(node["command"], path + ".command"));
    }
    if (YamlReader::Has(node, "args")) {
      COHORT_ASSIGN_OR_RETURN(container.args, r_.StringList(node["args"], path + ".args"));
    }
    if (YamlReader::Has(node, "env")) {
      COHORT_RETURN_IF_ERROR(ReadEnv(node["env"], path + ".env", &container.env));
    }
    // Vertex's Reduction Server image, in the pool that holds it: Cohort's own reducer.
    if (pool->role == Role::kParameterServer &&
        container.image.find("/reductionserver") != std::string::npos) {
      pool->role = Role::kReducer;
      pool->builtin = Builtin::kReducer;
      Note(path + ".imageUri",
           Quoted(container.image) + " is Vertex's Reduction Server: Cohort's reducer runs");
      return Status::Ok();
    }
    pool->container = std::move(container);
    return Status::Ok();
  }

  Status ReadMachine(const YAML::Node& node, const std::string& path, WorkerPoolSpec* pool) {
    COHORT_RETURN_IF_ERROR(r_.CheckMap(node, path,
                                       {"machineType", "acceleratorType", "acceleratorCount",
                                        "tpuTopology", "reservationAffinity"}));
    if (YamlReader::Has(node, "acceleratorCount")) {
      COHORT_ASSIGN_OR_RETURN(pool->resources.gpus,
                              Count(node["acceleratorCount"], path + ".acceleratorCount", 1024));
    }
    if (YamlReader::Has(node, "acceleratorType")) {
      COHORT_RETURN_IF_ERROR(
          ReadAcceleratorType(node["acceleratorType"], path + ".acceleratorType", pool));
    }
    for (const auto& kv : node) {
      const std::string& key = kv.first.Scalar();
      if (key == "acceleratorCount" || key == "acceleratorType") continue;
      const std::string value = kv.second.IsScalar() ? " " + Quoted(kv.second.Scalar()) : "";
      Note(path + "." + key,
           "ignored" + value +
               " (the pool asks GPUs by count; its CPUs and memory are the coordinator queue's "
               "defaults per GPU, or a Cohort job file's resources)");
    }
    return Status::Ok();
  }

  // Vertex's GPU kind (NVIDIA_H100_80GB) as the node_selector on kAcceleratorLabel GKE gives it
  // (nvidia-h100-80gb): the pool's replicas go only to nodes of that kind, as on Vertex. H100
  // Mega is the H100 of another machine family, so it asks for H100s; a TPU is refused.
  Status ReadAcceleratorType(const YAML::Node& node, const std::string& path,
                             WorkerPoolSpec* pool) {
    COHORT_ASSIGN_OR_RETURN(std::string type, r_.String(node, path));
    if (type.empty() || type == "ACCELERATOR_TYPE_UNSPECIFIED") return Status::Ok();
    if (type.rfind("TPU", 0) == 0) {
      return r_.Error(node, path, Quoted(type) + " is a TPU; Cohort places NVIDIA GPUs");
    }
    const bool named = type.rfind("NVIDIA_", 0) == 0 && type.size() <= 40 &&
                       std::all_of(type.begin(), type.end(), [](char c) {
                         return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
                       });
    if (!named) {
      Note(path, "ignored " + Quoted(type) + " (not an NVIDIA GPU of Vertex's)");
      return Status::Ok();
    }
    if (pool->resources.gpus == 0) {
      Note(path, "ignored " + Quoted(type) + " (the pool asks for no GPUs)");
      return Status::Ok();
    }
    if (type == "NVIDIA_H100_MEGA_80GB") type = "NVIDIA_H100_80GB";
    std::string kind;
    for (char c : type) {
      kind += c == '_' ? '-' : c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    }
    pool->node_selector[kAcceleratorLabel] = kind;
    Note(path, "only nodes labelled " + std::string(kAcceleratorLabel) + "=" + kind +
                   " (agents label nodes of NVIDIA GPUs they recognise so; others need --label)");
    return Status::Ok();
  }

  Status ReadScheduling(const YAML::Node& node, const std::string& path, JobSpec* spec) {
    COHORT_RETURN_IF_ERROR(r_.CheckMap(
        node, path,
        {"timeout", "restartJobOnWorkerRestart", "disableRetries", "strategy", "maxWaitDuration"}));
    SchedulingSpec& scheduling = spec->scheduling;
    if (YamlReader::Has(node, "timeout")) {
      COHORT_ASSIGN_OR_RETURN(scheduling.timeout, Duration(node["timeout"], path + ".timeout"));
    }
    if (YamlReader::Has(node, "restartJobOnWorkerRestart")) {
      COHORT_ASSIGN_OR_RETURN(
          scheduling.restart_job_on_worker_restart,
          r_.Bool(node["restartJobOnWorkerRestart"], path + ".restartJobOnWorkerRestart"));
    }
    if (YamlReader::Has(node, "disableRetries")) {
      COHORT_ASSIGN_OR_RETURN(bool disabled,
                              r_.Bool(node["disableRetries"], path + ".disableRetries"));
      if (disabled) scheduling.max_restarts = 0;
    }
    // Vertex bounds the wait for resources of FLEX_START jobs only: maxWaitDuration, 24 hours
    // unless given, "0s" none. Other strategies pick among Google's capacity kinds; here the job
    // waits in its queue until it fits.
    std::string strategy;
    if (YamlReader::Has(node, "strategy")) {
      COHORT_ASSIGN_OR_RETURN(strategy, r_.String(node["strategy"], path + ".strategy"));
    }
    if (strategy == "FLEX_START") {
      scheduling.max_wait = std::chrono::hours(24);
      if (YamlReader::Has(node, "maxWaitDuration")) {
        const YAML::Node& wait = node["maxWaitDuration"];
        if (wait.IsScalar() && wait.Scalar() == "0s") {
          scheduling.max_wait = std::chrono::milliseconds(0);
        } else {
          COHORT_ASSIGN_OR_RETURN(scheduling.max_wait, Duration(wait, path + ".maxWaitDuration"));
        }
      }
    } else {
      if (!strategy.empty() && strategy != "STRATEGY_UNSPECIFIED") {
        Note(path + ".strategy", "ignored (the job waits in its queue until it fits)");
      }
      if (YamlReader::Has(node, "maxWaitDuration")) {
        Note(path + ".maxWaitDuration",
             "ignored, as Vertex ignores it without strategy FLEX_START (the job waits in its "
             "queue until it fits; scheduling.max_wait in a Cohort job file bounds that)");
      }
    }
    return Status::Ok();
  }

  YamlReader r_;
  std::vector<std::string> notes_;
};

}  // namespace

namespace {

// Whether `text` is YAML whose top-level map has `key` or `other` (a text that names neither, as
// most job files, is not parsed).
bool TopLevelHas(std::string_view text, const char* key, const char* other) {
  if (text.find(key) == std::string_view::npos && text.find(other) == std::string_view::npos) {
    return false;
  }
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    return root.IsMap() && (root[key] || root[other]);
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

bool IsVertexCustomJob(std::string_view text) {
  return TopLevelHas(text, "workerPoolSpecs", "jobSpec");
}

bool IsVertexTuningJob(std::string_view text) {
  return TopLevelHas(text, "studySpec", "trialJobSpec");
}

StatusOr<VertexConversion> ConvertVertexCustomJob(std::string_view text, std::string_view source) {
  VertexReader reader(source);
  return ReadYamlDocument(text, source,
                          [&](const YAML::Node& root) { return reader.ReadCustomJob(root); });
}

namespace {

StatusOr<VertexConversion> ConvertTuningJob(std::string_view text, std::string_view source,
                                            std::string_view name) {
  VertexReader reader(source);
  return ReadYamlDocument(text, source,
                          [&](const YAML::Node& root) { return reader.ReadTuningJob(root, name); });
}

}  // namespace

StatusOr<VertexConversion> ConvertVertexTuningJob(std::string_view text, std::string_view source) {
  return ConvertTuningJob(text, source, {});
}

StatusOr<VertexConversion> AsCohortJobFile(std::string_view text, std::string_view source) {
  if (IsVertexCustomJob(text)) return ConvertVertexCustomJob(text, source);
  return VertexConversion{std::string(text), {}};
}

StatusOr<VertexConversion> AsCohortStudyFile(std::string_view text, std::string_view source,
                                             std::string_view name) {
  if (IsVertexTuningJob(text)) return ConvertTuningJob(text, source, name);
  return VertexConversion{std::string(text), {}};
}

}  // namespace cohort
