// Study spec parsing and validation: the valid example, then every rule with the field it names.
#include "common/study_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace cohort {
namespace {

using ::testing::HasSubstr;

constexpr char kTrialJob[] = R"(trial_job:
  worker_pools:
    - role: chief
      replicas: 1
      resources: {cpus: 1}
      process: {command: [/usr/bin/python3, train.py], args: [--epochs=2]}
  scheduling: {timeout: 1h, max_restarts: 1}
)";

std::string Study(const std::string& params, const std::string& extra = "",
                  const std::string& algorithm = "bayesian") {
  return "name: digits_lr_study\n"
         "metric: {id: accuracy, goal: maximize}\n"
         "parameters:\n" +
         params + "algorithm: " + algorithm +
         "\n"
         "max_trials: 20\n" +
         extra + kTrialJob;
}

constexpr char kParams[] =
    "  - {id: lr, type: double, min: 0.001, max: 0.5, scale: log}\n"
    "  - {id: hidden, type: integer, min: 16, max: 128, scale: linear}\n"
    "  - {id: optimizer, type: categorical, values: [sgd, momentum]}\n"
    "  - {id: batch_size, type: discrete, values: [64, 16, 32]}\n";

std::string ErrorOf(const std::string& yaml) {
  StatusOr<StudySpec> spec = ParseStudySpec(yaml, "study.yaml");
  EXPECT_FALSE(spec.ok()) << "parsed but should not have:\n" << yaml;
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  return spec.status().message();
}

// An assignment of kParams: lr, hidden, optimizer, batch_size.
Assignment ExampleAssignment(double lr, double hidden, const std::string& optimizer,
                             double batch_size) {
  Assignment a(4);
  a[0].number = lr;
  a[1].number = hidden;
  a[2].category = optimizer;
  a[3].number = batch_size;
  return a;
}

TEST(StudySpecTest, ParsesTheFullExample) {
  StatusOr<StudySpec> spec =
      ParseStudySpec(Study(kParams,
                           "parallel_trials: 3\nmax_failed_trials: 5\n"
                           "early_stopping: {median: true, min_steps: 2}\nseed: 7\n"),
                     "study.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "digits_lr_study");
  EXPECT_EQ(spec->metric_id, "accuracy");
  EXPECT_EQ(spec->goal, MetricGoal::kMaximize);
  ASSERT_EQ(spec->parameters.size(), 4u);
  EXPECT_EQ(spec->parameters[0].type, ParameterType::kDouble);
  EXPECT_EQ(spec->parameters[0].scale, ScaleType::kLog);
  EXPECT_DOUBLE_EQ(spec->parameters[0].min, 0.001);
  EXPECT_EQ(spec->parameters[1].type, ParameterType::kInteger);
  EXPECT_EQ(spec->parameters[2].categories, (std::vector<std::string>{"sgd", "momentum"}));
  EXPECT_EQ(spec->parameters[3].values, (std::vector<double>{16, 32, 64}));  // sorted
  EXPECT_EQ(spec->algorithm, SearchAlgorithm::kBayesian);
  EXPECT_EQ(spec->max_trials, 20);
  EXPECT_EQ(spec->parallel_trials, 3);
  EXPECT_EQ(spec->max_failed_trials, 5);
  ASSERT_TRUE(spec->early_stopping.has_value());
  EXPECT_TRUE(spec->early_stopping->median);
  EXPECT_EQ(spec->early_stopping->min_steps, 2);
  EXPECT_EQ(spec->seed, 7u);
  ASSERT_EQ(spec->trial_job.pools.size(), 1u);
  EXPECT_EQ(spec->trial_job.pools[0].process->command[1], "train.py");
  EXPECT_EQ(spec->trial_job.scheduling.max_restarts, 1);
}

TEST(StudySpecTest, Defaults) {
  StatusOr<StudySpec> spec = ParseStudySpec(Study(kParams));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->parallel_trials, 1);
  EXPECT_EQ(spec->max_failed_trials, 20);  // max_trials
  EXPECT_FALSE(spec->early_stopping.has_value());
  EXPECT_EQ(spec->seed, 0u);
}

TEST(StudySpecTest, UnknownKeysAreRefusedWithTheirPath) {
  EXPECT_THAT(ErrorOf(Study(kParams, "max_trial: 3\n")), HasSubstr("max_trial: unknown key"));
  EXPECT_THAT(ErrorOf(Study("  - {id: lr, type: double, min: 0.1, max: 1, scael: log}\n")),
              HasSubstr("parameters[0].scael: unknown key"));
  EXPECT_THAT(ErrorOf("name: s\nmetric: {id: a, goal: maximize, gaol: x}\n"),
              HasSubstr("metric.gaol: unknown key"));
  EXPECT_THAT(ErrorOf(Study(kParams, "early_stopping: {median: true, min_step: 2}\n")),
              HasSubstr("early_stopping.min_step: unknown key"));
  // Errors carry the file name and the line.
  EXPECT_THAT(ErrorOf(Study(kParams, "max_trial: 3\n")), HasSubstr("study.yaml:"));
}

TEST(StudySpecTest, RequiredFields) {
  EXPECT_THAT(ErrorOf("metric: {id: a, goal: maximize}\n"), HasSubstr("name: required"));
  EXPECT_THAT(ErrorOf("name: s\nmetric: {id: a}\n"),
              HasSubstr("metric.goal: required (maximize or minimize)"));
  EXPECT_THAT(ErrorOf("name: s\nmetric: {id: a, goal: up}\n"),
              HasSubstr("metric.goal: unknown goal 'up' (maximize or minimize)"));
  EXPECT_THAT(ErrorOf(Study(kParams, "", "genetic")),
              HasSubstr("algorithm: unknown algorithm 'genetic' (grid, random or bayesian)"));
  EXPECT_THAT(ErrorOf(Study("")), HasSubstr("parameters"));
  EXPECT_THAT(ErrorOf(Study("  - {id: lr, min: 0.1, max: 1}\n")),
              HasSubstr("parameters[0].type: required (double, integer, categorical or discrete)"));
  EXPECT_THAT(ErrorOf(Study("  - {id: lr, type: float, min: 0.1, max: 1}\n")),
              HasSubstr("parameters[0].type: unknown type 'float' (double, integer, categorical or "
                        "discrete)"));
  EXPECT_THAT(ErrorOf(Study("  - {id: lr, type: double, min: 0.1}\n")),
              HasSubstr("parameters[0].max: required"));
  EXPECT_THAT(ErrorOf(Study("  - {id: o, type: categorical}\n")),
              HasSubstr("parameters[0].values: required"));
  std::string no_job = "name: s\nmetric: {id: a, goal: minimize}\nparameters:\n" +
                       std::string(kParams) + "algorithm: random\nmax_trials: 2\n";
  EXPECT_THAT(ErrorOf(no_job), HasSubstr("trial_job: required"));
}

TEST(StudySpecTest, GridOverADoubleIsRefusedNamingTheParameter) {
  std::string err =
      ErrorOf(Study("  - {id: hidden, type: integer, min: 1, max: 3}\n"
                    "  - {id: lr, type: double, min: 0.1, max: 1}\n",
                    "", "grid"));
  EXPECT_THAT(err, HasSubstr("parameters[1]"));
  EXPECT_THAT(err, HasSubstr("'lr'"));
  EXPECT_THAT(err, HasSubstr("grid"));
  // Without the double it is fine.
  EXPECT_TRUE(
      ParseStudySpec(Study("  - {id: hidden, type: integer, min: 1, max: 3}\n", "", "grid")).ok());
}

// Each parameter's count of grid values (what GridSize multiplies and SearchSpace::GridPoint
// divides by): a double and an empty integer range have none.
TEST(StudySpecTest, GridCountPerParameterType) {
  ParameterSpec p;
  p.type = ParameterType::kInteger;
  p.min = -2;
  p.max = 3;
  EXPECT_EQ(GridCount(p), 6u);
  p.max = -3;
  EXPECT_EQ(GridCount(p), std::nullopt);
  p.type = ParameterType::kCategorical;
  p.categories = {"a", "b", "c"};
  EXPECT_EQ(GridCount(p), 3u);
  p.type = ParameterType::kDiscrete;
  p.values = {0.5, 1};
  EXPECT_EQ(GridCount(p), 2u);
  p.values.clear();
  EXPECT_EQ(GridCount(p), 0u);
  p.type = ParameterType::kDouble;
  p.min = 0;
  p.max = 1;
  EXPECT_EQ(GridCount(p), std::nullopt);

  StudySpec spec;
  spec.parameters = {p};
  EXPECT_EQ(GridSize(spec), std::nullopt);
  spec.parameters[0].type = ParameterType::kCategorical;  // 3 categories
  spec.parameters.push_back(spec.parameters[0]);
  EXPECT_EQ(GridSize(spec), 9u);
  EXPECT_EQ(GridSize(spec, 8), std::nullopt);  // over the limit
}

// Each case: one parameters list (a Study with it fails) and what its error says.
struct ParamsCase {
  std::string params;
  std::string error;
};

void ExpectParamsErrors(const std::vector<ParamsCase>& cases) {
  for (const ParamsCase& c : cases) {
    EXPECT_THAT(ErrorOf(Study(c.params)), HasSubstr(c.error)) << c.params;
  }
}

TEST(StudySpecTest, RangesAndScales) {
  ExpectParamsErrors({
      {"  - {id: lr, type: double, min: 1, max: 1}\n",
       "parameters[0].max: must be greater than min"},
      {"  - {id: lr, type: double, min: 2, max: 1}\n",
       "parameters[0].max: must be greater than min"},
      {"  - {id: lr, type: double, min: 0, max: 1, scale: log}\n",
       "parameters[0].min: the log scale needs min > 0"},
      {"  - {id: lr, type: double, min: -1, max: 1, scale: reverse_log}\n",
       "parameters[0].min: the reverse_log scale needs min > 0"},
      {"  - {id: b, type: discrete, values: [0, 1], scale: log}\n",
       "parameters[0].values: the log scale needs every value > 0"},
      {"  - {id: lr, type: double, min: 0.1, max: 1, scale: cubic}\n",
       "parameters[0].scale: unknown scale 'cubic' (linear, log or reverse_log)"},
      {"  - {id: h, type: integer, min: 1.5, max: 4}\n", "parameters[0].min: must be an integer"},
      {"  - {id: h, type: integer, min: 1, max: ten}\n",
       "parameters[0].max: expected a finite number"},
      {"  - {id: o, type: categorical, values: [a], scale: log}\n",
       "parameters[0].scale: not allowed"},
      {"  - {id: o, type: categorical, values: [a], min: 1}\n", "parameters[0].min: not allowed"},
      {"  - {id: lr, type: double, min: 0.1, max: 1, values: [1]}\n",
       "parameters[0].values: not allowed"},
  });
}

TEST(StudySpecTest, ValuesMustBeNonEmptyAndUnique) {
  ExpectParamsErrors({
      {"  - {id: o, type: categorical, values: []}\n", "parameters[0].values: must not be empty"},
      {"  - {id: b, type: discrete, values: []}\n", "parameters[0].values: must not be empty"},
      {"  - {id: o, type: categorical, values: [sgd, adam, sgd]}\n",
       "parameters[0].values[2]: duplicate value 'sgd'"},
      {"  - {id: b, type: discrete, values: [16, 32, 16.0]}\n",
       "parameters[0].values: duplicate value 16"},
      {"  - {id: b, type: discrete, values: [16, big]}\n", "parameters[0].values[1]"},
  });
}

TEST(StudySpecTest, ParameterIdsAreValidAndUnique) {
  ExpectParamsErrors({
      {"  - {id: lr, type: double, min: 0.1, max: 1}\n"
       "  - {id: lr, type: integer, min: 1, max: 4}\n",
       "parameters[1].id: duplicate id 'lr'"},
      {"  - {id: 'a b', type: double, min: 0.1, max: 1}\n",
       "parameters[0].id: 'a b' is not a valid parameter id"},
  });
  // Hyphens are fine: trainers take --batch-size.
  EXPECT_TRUE(ParseStudySpec(Study("  - {id: batch-size, type: discrete, values: [8]}\n")).ok());
}

TEST(StudySpecTest, TrialBudgets) {
  EXPECT_THAT(ErrorOf(Study(kParams, "parallel_trials: 21\n")),
              HasSubstr("parallel_trials: must be at most max_trials (20), got 21"));
  EXPECT_THAT(ErrorOf(Study(kParams, "parallel_trials: 0\n")),
              HasSubstr("parallel_trials: must be at least 1"));
  std::string zero = Study(kParams);
  zero.replace(zero.find("max_trials: 20"), 14, "max_trials: 0");
  EXPECT_THAT(ErrorOf(zero), HasSubstr("max_trials: must be in 1.."));
  EXPECT_THAT(ErrorOf(Study(kParams, "max_failed_trials: -1\n")),
              HasSubstr("max_failed_trials: must not be negative"));
  EXPECT_THAT(ErrorOf(Study(kParams, "early_stopping: {median: true, min_steps: 0}\n")),
              HasSubstr("early_stopping.min_steps: must be at least 1"));
  EXPECT_THAT(ErrorOf(Study(kParams, "seed: -3\n")), HasSubstr("seed: must not be negative"));
  EXPECT_THAT(ErrorOf(Study(kParams, "parallel_trials: two\n")),
              HasSubstr("parallel_trials: expected an integer"));
}

TEST(StudySpecTest, NameRules) {
  std::string bad = Study(kParams);
  bad.replace(0, std::string("name: digits_lr_study").size(), "name: 9lives");
  EXPECT_THAT(ErrorOf(bad), HasSubstr("name: '9lives' is not a valid study name"));
  std::string long_name = Study(kParams);
  long_name.replace(0, std::string("name: digits_lr_study").size(),
                    "name: s" + std::string(100, 'x'));
  EXPECT_THAT(ErrorOf(long_name), HasSubstr("is not a valid study name"));
}

// `cohort tune --name`: the same file as another study; the name is checked before it is set.
TEST(StudySpecTest, WithStudyNameRenamesTheStudyOnly) {
  StatusOr<std::string> renamed = WithStudyName(Study(kParams), "lr_again");
  ASSERT_TRUE(renamed.ok()) << renamed.status().ToString();
  StatusOr<StudySpec> spec = ParseStudySpec(*renamed);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString() << "\n" << *renamed;
  EXPECT_EQ(spec->name, "lr_again");
  EXPECT_EQ(spec->parameters.size(), 4u);
  EXPECT_EQ(spec->trial_job.pools[0].process->args, std::vector<std::string>{"--epochs=2"});
  // A file without a name gets one.
  std::string nameless = Study(kParams);
  nameless.erase(0, std::string("name: digits_lr_study\n").size());
  renamed = WithStudyName(nameless, "named");
  ASSERT_TRUE(renamed.ok()) << renamed.status().ToString();
  ASSERT_TRUE(ParseStudySpec(*renamed).ok()) << *renamed;

  StatusOr<std::string> bad = WithStudyName(Study(kParams), "9lives");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("name: '9lives' is not a valid study name"));
  EXPECT_FALSE(WithStudyName(Study(kParams), "s" + std::string(100, 'x')).ok());
  bad = WithStudyName("- a\n- b\n", "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("the study file is not a YAML map of keys"));
  bad = WithStudyName("{unclosed", "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("the study file is not valid YAML"));
}

// `cohort tune --env K=V --label K=V -- ARGS`: every pool of the trial job that runs a command
// gets the env and args, a trial's parameters coming after them, and the trial job the labels;
// a name, after or hold in the edits is not the trial job's to take.
TEST(StudySpecTest, WithTrialJobEditsEditsTheTrialJobOnly) {
  SubmitEdits edits;
  edits.env = {{"DATA", "/data/digits"}};
  edits.args = {"--seed=7", "a b"};
  edits.labels = {{"sweep", "lr"}};
  edits.name = "not_the_trials";
  edits.hold = true;
  StatusOr<std::string> edited = WithTrialJobEdits(Study(kParams), edits);
  ASSERT_TRUE(edited.ok()) << edited.status().ToString();
  StatusOr<StudySpec> spec = ParseStudySpec(*edited);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString() << "\n" << *edited;
  EXPECT_EQ(spec->name, "digits_lr_study");
  EXPECT_EQ(spec->parameters.size(), 4u);
  EXPECT_EQ(spec->trial_job.scheduling.max_restarts, 1);
  EXPECT_FALSE(spec->trial_job.scheduling.hold);
  EXPECT_EQ(spec->trial_job.labels, edits.labels);
  const ProcessSpec& process = *spec->trial_job.pools[0].process;
  EXPECT_EQ(process.args, (std::vector<std::string>{"--epochs=2", "--seed=7", "a b"}));
  EXPECT_EQ(process.env, (std::map<std::string, std::string>{{"DATA", "/data/digits"}}));
  StatusOr<JobSpec> trial = MakeTrialJob(*spec, "3", ExampleAssignment(0.25, 17, "sgd", 16));
  ASSERT_TRUE(trial.ok()) << trial.status().ToString();
  EXPECT_EQ(trial->pools[0].process->args,
            (std::vector<std::string>{"--epochs=2", "--seed=7", "a b", "--lr=0.25", "--hidden=17",
                                      "--optimizer=sgd", "--batch_size=16"}));
  EXPECT_EQ(trial->labels, edits.labels);

  auto error = [](const SubmitEdits& e, const std::string& study) {
    StatusOr<std::string> out = WithTrialJobEdits(study, e);
    return out.ok() ? std::string() : out.status().message();
  };
  SubmitEdits bad_env;
  bad_env.env = {{"1X", "y"}};
  EXPECT_THAT(error(bad_env, Study(kParams)),
              HasSubstr("--env: '1X' is not an environment variable"));
  SubmitEdits args;
  args.args = {"--x"};
  const std::string no_job = "name: s\nmetric: {id: a, goal: maximize}\n";
  EXPECT_THAT(error(args, no_job), HasSubstr("trial_job: the study file has no trial job"));
  const std::string builtin_only =
      "name: s\ntrial_job:\n  worker_pools:\n    - {role: chief, builtin: reducer}\n";
  EXPECT_THAT(error(args, builtin_only),
              HasSubstr("-- ARGS: no pool of the study file's trial_job runs a process"));
  const std::string env_list =
      "name: s\ntrial_job:\n  labels: [a]\n  worker_pools:\n    - {role: chief, process: "
      "{command: [x], env: [A]}}\n";
  SubmitEdits env;
  env.env = {{"B", "1"}};
  EXPECT_THAT(
      error(env, env_list),
      HasSubstr("--env: the study file's trial_job.worker_pools[0].process.env is not a map"));
  SubmitEdits labels;
  labels.labels = {{"team", "x"}};
  EXPECT_THAT(error(labels, env_list),
              HasSubstr("--label: the study file's trial_job.labels is not a map"));
}

TEST(StudySpecTest, TrialTemplateIsValidatedAsAJobUnderTrialJob) {
  auto with_job = [](const std::string& job) {
    return "name: s\nmetric: {id: a, goal: maximize}\nparameters:\n"
           "  - {id: lr, type: double, min: 0.1, max: 1}\n"
           "algorithm: random\nmax_trials: 4\ntrial_job:\n" +
           job;
  };
  EXPECT_THAT(ErrorOf(with_job("  worker_pools:\n    - role: worker\n      replicas: 2\n"
                               "      process: {command: [/bin/true]}\n")),
              HasSubstr("trial_job.worker_pools: a chief pool (role: chief) is required"));
  EXPECT_THAT(ErrorOf(with_job("  worker_pools:\n    - role: chief\n      replicas: 1\n"
                               "      resorces: {gpus: 1}\n"
                               "      process: {command: [/bin/true]}\n")),
              HasSubstr("trial_job.worker_pools[0].resorces: unknown key"));
  EXPECT_THAT(ErrorOf(with_job("  worker_pools:\n    - role: chief\n      replicas: 2\n"
                               "      process: {command: [/bin/true]}\n")),
              HasSubstr("trial_job.worker_pools[0].replicas: the chief pool must have exactly 1"));
  EXPECT_THAT(ErrorOf(with_job("  name: x\n  worker_pools:\n    - role: chief\n"
                               "      process: {command: [/bin/true]}\n")),
              HasSubstr("trial_job.name: not allowed"));
  EXPECT_THAT(ErrorOf(with_job("  worker_pools:\n    - role: chief\n"
                               "      process: {command: [/bin/true]}\n"
                               "  scheduling: {timeout: 3x}\n")),
              HasSubstr("trial_job.scheduling.timeout"));
  EXPECT_THAT(ErrorOf(with_job("  worker_pools:\n    - role: chief\n"
                               "      process: {command: [/bin/true]}\n"
                               "  scheduling: {hold: true}\n")),
              HasSubstr("trial_job.scheduling.hold: a study's trials cannot be held"));
  EXPECT_THAT(ErrorOf(with_job("  [1, 2]\n")), HasSubstr("trial_job: expected a mapping"));
  // The message points at the study file, not at the re-emitted template.
  EXPECT_THAT(ErrorOf(with_job("  worker_pools: []\n")), HasSubstr("study.yaml:"));
}

TEST(StudySpecTest, MalformedYaml) {
  EXPECT_THAT(ErrorOf("name: [unclosed\n"), HasSubstr("malformed YAML"));
  EXPECT_THAT(ErrorOf(""), HasSubstr("empty study spec"));
}

TEST(StudySpecTest, AssignmentsRoundTripThroughText) {
  StatusOr<StudySpec> spec = ParseStudySpec(Study(kParams));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const Assignment a = ExampleAssignment(0.0123, 64, "momentum", 32);
  ASSERT_TRUE(ValidateAssignment(*spec, a).ok());
  auto text = AssignmentToStrings(*spec, a);
  ASSERT_EQ(text.size(), 4u);
  EXPECT_EQ(text[0], (std::pair<std::string, std::string>{"lr", "0.0123"}));
  EXPECT_EQ(text[1].second, "64");
  EXPECT_EQ(text[2].second, "momentum");
  EXPECT_EQ(text[3].second, "32");
  std::map<std::string, std::string> m(text.begin(), text.end());
  StatusOr<Assignment> back = ParseAssignment(*spec, m);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, a);

  m["hidden"] = "7";  // below min
  EXPECT_THAT(ParseAssignment(*spec, m).status().message(), HasSubstr("hidden: 7 is outside"));
  m["hidden"] = "64";
  m["batch_size"] = "48";
  EXPECT_THAT(ParseAssignment(*spec, m).status().message(),
              HasSubstr("batch_size: 48 is not one of its values"));
  m["batch_size"] = "32";
  m["extra"] = "1";
  EXPECT_THAT(ParseAssignment(*spec, m).status().message(), HasSubstr("extra: not a study"));
}

TEST(StudySpecTest, TrialJobGetsNameAndArguments) {
  StatusOr<StudySpec> spec = ParseStudySpec(Study(kParams));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  Assignment a = ExampleAssignment(0.25, 17, "sgd", 16);
  StatusOr<JobSpec> job = MakeTrialJob(*spec, "3", a);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->name, "digits_lr_study_trial_3");
  EXPECT_EQ(job->pools[0].process->args,
            (std::vector<std::string>{"--epochs=2", "--lr=0.25", "--hidden=17", "--optimizer=sgd",
                                      "--batch_size=16"}));
  a[1].number = 17.5;
  EXPECT_FALSE(MakeTrialJob(*spec, "4", a).ok());
}

TEST(StudySpecTest, ExampleStudiesParse) {
  const std::filesystem::path dir = std::filesystem::path(COHORT_SOURCE_DIR) / "examples/studies";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    StatusOr<StudySpec> spec = LoadStudySpec(entry.path().string());
    EXPECT_TRUE(spec.ok()) << entry.path() << ": " << spec.status().ToString();
    ++count;
  }
  EXPECT_GE(count, 1);
}

}  // namespace
}  // namespace cohort
