// StudySpec is a hyperparameter-tuning study as its YAML file describes it (DESIGN.md
// "Hyperparameter tuning"; the shape follows Vertex AI's HyperparameterTuningJob): the metric to
// optimise, the parameters and their search space, the search algorithm, trial budgets, optional
// median early stopping, and the job template every trial runs.
//
//   name: digits_lr_study
//   metric: {id: accuracy, goal: maximize}
//   parameters:
//     - {id: lr, type: double, min: 0.001, max: 0.5, scale: log}  # linear | log | reverse_log
//     - {id: hidden, type: integer, min: 16, max: 128}
//     - {id: optimizer, type: categorical, values: [sgd, momentum]}
//     - {id: batch_size, type: discrete, values: [16, 32, 64]}
//   algorithm: bayesian        # grid | random | bayesian
//   max_trials: 20
//   parallel_trials: 3         # default 1
//   max_failed_trials: 5       # the study fails when this many trials failed; default
//                              # max_trials; 0: never fail for failed trials
//   early_stopping: {median: true, min_steps: 2, min_trials: 3}   # optional
//   seed: 7                    # default 0
//   trial_job: {worker_pools: [...], scheduling: {...}, output_dir: ...}   # a job file minus name
//
// ParseStudySpec() parses and validates. Every error names the field ("parameters[1].max: ...",
// "trial_job.worker_pools[0].replicas: ..."), unknown keys included. The trial template is
// checked with the job-spec code (common/job_spec.h) under a placeholder name.
//
// Trials: trial ids are "1", "2", ... ; trial k of study S runs as job "S_trial_k" (TrialJobName)
// built from the template with one `--<id>=<value>` argument per parameter appended to the args of
// every process or container pool (MakeTrialJob). The study name is therefore limited to 100
// characters so that a trial's job name stays within the 128 a job name allows.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/job_spec.h"
#include "common/status.h"

namespace cohort {

enum class ParameterType { kDouble, kInteger, kCategorical, kDiscrete };
inline constexpr EnumName<ParameterType> kParameterTypeNames[] = {
    {ParameterType::kDouble, "double"},
    {ParameterType::kInteger, "integer"},
    {ParameterType::kCategorical, "categorical"},
    {ParameterType::kDiscrete, "discrete"}};
// How a numeric parameter maps onto the unit interval the search works in. kLog spends equal
// effort per decade; kReverseLog is its mirror image, with more resolution near max (Vertex's
// UNIT_REVERSE_LOG_SCALE). Both need min > 0.
enum class ScaleType { kLinear, kLog, kReverseLog };
inline constexpr EnumName<ScaleType> kScaleTypeNames[] = {{ScaleType::kLinear, "linear"},
                                                          {ScaleType::kLog, "log"},
                                                          {ScaleType::kReverseLog, "reverse_log"}};
enum class SearchAlgorithm { kGrid, kRandom, kBayesian };
inline constexpr EnumName<SearchAlgorithm> kSearchAlgorithmNames[] = {
    {SearchAlgorithm::kGrid, "grid"},
    {SearchAlgorithm::kRandom, "random"},
    {SearchAlgorithm::kBayesian, "bayesian"}};
enum class MetricGoal { kMaximize, kMinimize };
inline constexpr EnumName<MetricGoal> kMetricGoalNames[] = {{MetricGoal::kMaximize, "maximize"},
                                                            {MetricGoal::kMinimize, "minimize"}};

std::string_view ScaleTypeName(ScaleType scale);                  // "linear", "log", "reverse_log"
std::string_view SearchAlgorithmName(SearchAlgorithm algorithm);  // "grid", "random", "bayesian"
std::string_view MetricGoalName(MetricGoal goal);                 // "maximize", "minimize"

struct ParameterSpec {
  std::string id;  // [A-Za-z_][A-Za-z0-9_.-]*, becomes the `--id=value` argument
  ParameterType type = ParameterType::kDouble;
  double min = 0;  // kDouble, kInteger (integral values)
  double max = 0;
  ScaleType scale = ScaleType::kLinear;  // kDouble, kInteger, kDiscrete
  std::vector<std::string> categories;   // kCategorical, in file order
  std::vector<double> values;            // kDiscrete, sorted ascending after parsing

  bool operator==(const ParameterSpec&) const = default;
};

struct EarlyStoppingSpec {
  bool median = false;  // Median stopping rule (coordinator/tuning/median_stopping.h)
  int min_steps = 1;    // measurements a trial reports before the rule may stop it
  int min_trials = 3;   // completed trials needed before the rule applies

  bool operator==(const EarlyStoppingSpec&) const = default;
};

struct StudySpec {
  std::string name;
  std::string metric_id;
  MetricGoal goal = MetricGoal::kMaximize;
  std::vector<ParameterSpec> parameters;  // file order; ids unique
  SearchAlgorithm algorithm = SearchAlgorithm::kRandom;
  int max_trials = 1;
  int parallel_trials = 1;
  int max_failed_trials = 0;  // after parsing: the file's value, or max_trials when absent
  std::optional<EarlyStoppingSpec> early_stopping;
  uint64_t seed = 0;
  JobSpec trial_job;  // validated under the placeholder name "trial"

  const ParameterSpec* FindParameter(std::string_view id) const;

  bool operator==(const StudySpec&) const = default;
};

// One parameter's value in a trial. Numeric kinds (double, integer, discrete) use `number`
// (integral for kInteger, one of `values` for kDiscrete); kCategorical uses `category`.
struct ParameterValue {
  double number = 0;
  std::string category;

  bool operator==(const ParameterValue&) const = default;
};

// A trial's parameters, one value per StudySpec::parameters entry, in the same order.
using Assignment = std::vector<ParameterValue>;

// Parses YAML text and validates it. `source` names the input in errors ("study.yaml").
StatusOr<StudySpec> ParseStudySpec(std::string_view yaml, std::string_view source = "study spec");
StatusOr<StudySpec> LoadStudySpec(const std::string& path);
// Every rule on an already-built spec (ParseStudySpec calls it; the trial template is checked by
// ValidateJobSpec with errors under "trial_job.").
Status ValidateStudySpec(const StudySpec& spec);
// The study file's YAML text with its name set to `name`: `cohort tune --name`, and
// SubmitStudy.name, which the coordinator applies (after making a Vertex AI tuning file the study
// file it becomes). kInvalidArgument naming the field when `name` is not a valid study name or the
// text is not a YAML map.
StatusOr<std::string> WithStudyName(std::string_view yaml, std::string_view name);
// The study file's YAML text with the edits' env set and args appended in every pool of its
// trial_job that runs a command, and its labels set in the trial_job's labels: `cohort tune FILE
// --env K=V --label K=V -- ARGS`, as ApplySubmitEdits makes them in a job file
// (common/job_spec.h), each trial running with them. Their name, after and hold are not read.
// kInvalidArgument naming the field, the trial_job's fields under "trial_job.".
StatusOr<std::string> WithTrialJobEdits(std::string_view yaml, const SubmitEdits& edits);

// The shortest text that reads back to exactly `v` (how bounds and values are written).
std::string FormatDouble(double v);
// True for a finite whole number a double holds exactly (|v| < 9e15).
bool IsIntegral(double v);

// How many values `param` takes on a grid: the integers of its range, its categories, its
// values; nullopt for a continuous (kDouble) one or an empty integer range (max < min).
std::optional<uint64_t> GridCount(const ParameterSpec& param);

// Number of grid points (the product of every parameter's count), or nullopt when a parameter is
// continuous (kDouble) or the product exceeds `limit`.
std::optional<uint64_t> GridSize(const StudySpec& spec, uint64_t limit = uint64_t{1} << 40);

// The text a value has on a trial's command line and in the wire's KeyValue: integers without a
// fraction, doubles and discrete values in the shortest form that reads back exactly.
std::string FormatParameterValue(const ParameterSpec& param, const ParameterValue& value);
// The reverse, checking that the value lies in the parameter's space.
StatusOr<ParameterValue> ParseParameterValue(const ParameterSpec& param, std::string_view text);
// An assignment from id -> text pairs (every parameter exactly once), e.g. from the journal.
StatusOr<Assignment> ParseAssignment(const StudySpec& spec,
                                     const std::map<std::string, std::string>& values);
// Checks that an assignment has one in-space value per parameter.
Status ValidateAssignment(const StudySpec& spec, const Assignment& assignment);
// id -> text, in the spec's parameter order.
std::vector<std::pair<std::string, std::string>> AssignmentToStrings(const StudySpec& spec,
                                                                     const Assignment& assignment);

// "digits_lr_study_trial_3".
std::string TrialJobName(std::string_view study, std::string_view trial_id);
// The job a trial runs: the template, named TrialJobName, with `--id=value` appended to the args
// of every pool that has a process or a container (builtin pools are left alone). When the
// template has an output_dir the trial keeps it (cluster env adds the trial id below it).
StatusOr<JobSpec> MakeTrialJob(const StudySpec& spec, std::string_view trial_id,
                               const Assignment& assignment);

}  // namespace cohort
