// Vertex AI CustomJob files as gcloud and the REST API take them, read into Cohort job files: each
// field where it lands, the notes for what has no counterpart, and clear errors for the rest.
#include "common/vertex_job.h"

#include <gtest/gtest.h>

#include <string>

#include "common/job_spec.h"
#include "common/study_spec.h"

namespace cohort {
namespace {

using Convert = StatusOr<VertexConversion> (*)(std::string_view, std::string_view);

// What `convert` makes of `text` (from a file named `source`), read back with `parse`; its notes
// into `notes`.
template <typename Spec>
Spec ReadBack(Convert convert, StatusOr<Spec> (*parse)(std::string_view, std::string_view),
              const std::string& source, const std::string& text, std::vector<std::string>* notes) {
  StatusOr<VertexConversion> converted = convert(text, source);
  EXPECT_TRUE(converted.ok()) << converted.status().ToString();
  if (!converted.ok()) return {};
  if (notes != nullptr) *notes = converted->notes;
  StatusOr<Spec> spec = parse(converted->yaml, "converted");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString() << "\n" << converted->yaml;
  return spec.ok() ? *spec : Spec{};
}

// Why `convert` refuses `text` (from a file named `source`).
std::string Refusal(Convert convert, const std::string& source, const std::string& text) {
  StatusOr<VertexConversion> converted = convert(text, source);
  EXPECT_FALSE(converted.ok()) << converted->yaml;
  EXPECT_EQ(converted.status().code(), StatusCode::kInvalidArgument);
  return converted.status().message();
}

JobSpec Converted(const std::string& text, std::vector<std::string>* notes = nullptr) {
  return ReadBack<JobSpec>(ConvertVertexCustomJob, ParseJobSpec, "config.yaml", text, notes);
}

std::string Error(const std::string& text) {
  return Refusal(ConvertVertexCustomJob, "config.yaml", text);
}

StudySpec Study(const std::string& text, std::vector<std::string>* notes = nullptr) {
  return ReadBack<StudySpec>(ConvertVertexTuningJob, ParseStudySpec, "hp.yaml", text, notes);
}

std::string StudyError(const std::string& text) {
  return Refusal(ConvertVertexTuningJob, "hp.yaml", text);
}

bool Mentions(const std::vector<std::string>& notes, const std::string& text) {
  for (const std::string& note : notes) {
    if (note.find(text) != std::string::npos) return true;
  }
  return false;
}

// Vertex restarts a worker alone unless restartJobOnWorkerRestart says otherwise; Cohort, where the
// file leaves it unset, restarts a job of one all-reduce group whole, and says so in a note. A
// parameter-server job, or a file that sets it, gets what it says and no note.
TEST(VertexJobTest, AnUnsetRestartJobOnWorkerRestartIsCohortsDefaultAndNoted) {
  const std::string pool = "    replicaCount: 1\n    containerSpec: {imageUri: /srv/images/t}\n";
  const std::string ddp = "workerPoolSpecs:\n  - machineSpec: {machineType: n1}\n" + pool +
                          "  - machineSpec: {machineType: n1}\n" + pool;
  std::vector<std::string> notes;
  JobSpec spec = Converted(ddp, &notes);
  EXPECT_EQ(spec.scheduling.restart_job_on_worker_restart, std::nullopt);
  EXPECT_TRUE(spec.RestartsWholeJob());
  EXPECT_TRUE(Mentions(notes,
                       "scheduling.restartJobOnWorkerRestart: unset: a replica's restart "
                       "restarts the whole job"))
      << ::testing::PrintToString(notes);
  notes.clear();
  spec = Converted(ddp + "scheduling: {restartJobOnWorkerRestart: false}\n", &notes);
  EXPECT_FALSE(spec.RestartsWholeJob());
  EXPECT_FALSE(Mentions(notes, "restartJobOnWorkerRestart")) << ::testing::PrintToString(notes);
  notes.clear();
  spec = Converted(ddp + "  - machineSpec: {machineType: n1}\n" + pool, &notes);
  ASSERT_EQ(spec.pools.size(), 3u);
  EXPECT_EQ(spec.pools[2].role, Role::kParameterServer);
  EXPECT_FALSE(spec.RestartsWholeJob());
  EXPECT_FALSE(Mentions(notes, "restartJobOnWorkerRestart")) << ::testing::PrintToString(notes);
}

// A machine type brings CPUs and memory with its GPUs; the converted file leaves both out, so that
// the coordinator's queue gives its defaults per GPU (coordinator/queue_config.h), and says so.
TEST(VertexJobTest, AMachineTypesCpusAndMemoryAreLeftToTheQueuesDefaultsPerGpu) {
  StatusOr<VertexConversion> converted = ConvertVertexCustomJob(
      "workerPoolSpecs:\n  - machineSpec: {machineType: a2-highgpu-8g, acceleratorCount: 8}\n"
      "    replicaCount: 1\n    containerSpec: {imageUri: /srv/images/trainer}\n",
      "config.yaml");
  ASSERT_TRUE(converted.ok()) << converted.status().ToString();
  EXPECT_EQ(converted->yaml.find("cpus"), std::string::npos) << converted->yaml;
  EXPECT_EQ(converted->yaml.find("memory_mb"), std::string::npos) << converted->yaml;
  EXPECT_TRUE(Mentions(converted->notes,
                       "machineType: ignored 'a2-highgpu-8g' (the pool asks GPUs by count; its "
                       "CPUs and memory are the coordinator queue's defaults per GPU, or a Cohort "
                       "job file's resources)"))
      << ::testing::PrintToString(converted->notes);
  // Read back, the file leaves them unset: what the coordinator fills in.
  const JobSpec spec = Converted(
      "workerPoolSpecs:\n  - machineSpec: {acceleratorCount: 8}\n"
      "    replicaCount: 1\n    containerSpec: {imageUri: /srv/images/trainer}\n");
  ASSERT_EQ(spec.pools.size(), 1u);
  EXPECT_EQ(spec.pools[0].resources.gpus, 8);
  EXPECT_FALSE(spec.pools[0].resources.cpus_given);
  EXPECT_FALSE(spec.pools[0].resources.memory_given);
}

// Vertex's GPU kinds ask for nodes of that kind by GKE's label; a TPU is refused; a pool of no
// GPUs, or a kind Vertex has no NVIDIA name for, is noted and runs anywhere.
TEST(VertexJobTest, AnAcceleratorTypeIsANodeSelectorOnGkesLabel) {
  const auto selector = [](const std::string& machine, std::vector<std::string>* notes) {
    const JobSpec spec =
        Converted("workerPoolSpecs:\n  - machineSpec: " + machine +
                      "\n    replicaCount: 1\n    containerSpec: {imageUri: /srv/images/trainer}\n",
                  notes);
    return spec.pools.empty() ? NodeLabels{{"no", "pool"}} : spec.pools[0].node_selector;
  };
  std::vector<std::string> notes;
  EXPECT_EQ(selector("{acceleratorType: NVIDIA_H100_80GB, acceleratorCount: 8}", &notes),
            (NodeLabels{{kAcceleratorLabel, "nvidia-h100-80gb"}}));
  EXPECT_EQ(selector("{acceleratorType: NVIDIA_H100_MEGA_80GB, acceleratorCount: 8}", &notes),
            (NodeLabels{{kAcceleratorLabel, "nvidia-h100-80gb"}}));
  EXPECT_EQ(selector("{acceleratorType: NVIDIA_L4, acceleratorCount: 1}", &notes),
            (NodeLabels{{kAcceleratorLabel, "nvidia-l4"}}));
  EXPECT_EQ(selector("{acceleratorType: NVIDIA_H200_141GB, acceleratorCount: 8}", &notes),
            (NodeLabels{{kAcceleratorLabel, "nvidia-h200-141gb"}}));

  notes.clear();
  EXPECT_TRUE(
      selector("{machineType: n1-standard-4, acceleratorType: NVIDIA_TESLA_T4}", &notes).empty());
  EXPECT_TRUE(Mentions(notes,
                       "acceleratorType: ignored 'NVIDIA_TESLA_T4' (the pool asks for no "
                       "GPUs)"))
      << ::testing::PrintToString(notes);
  notes.clear();
  EXPECT_TRUE(
      selector("{acceleratorType: ACCELERATOR_TYPE_UNSPECIFIED, acceleratorCount: 1}", &notes)
          .empty());
  EXPECT_FALSE(Mentions(notes, "acceleratorType")) << ::testing::PrintToString(notes);
  EXPECT_TRUE(selector("{acceleratorType: AMD_MI300X, acceleratorCount: 1}", &notes).empty());
  EXPECT_TRUE(Mentions(notes,
                       "acceleratorType: ignored 'AMD_MI300X' (not an NVIDIA GPU of "
                       "Vertex's)"))
      << ::testing::PrintToString(notes);

  const std::string tpu = Error(
      "workerPoolSpecs:\n  - machineSpec: {machineType: cloud-tpu, acceleratorType: TPU_V3, "
      "acceleratorCount: 8}\n    replicaCount: 1\n    containerSpec: {imageUri: /srv/t}\n");
  EXPECT_NE(tpu.find("workerPoolSpecs[0].machineSpec.acceleratorType: 'TPU_V3' is a TPU; Cohort "
                     "places NVIDIA GPUs"),
            std::string::npos)
      << tpu;
}

// The config of `gcloud ai custom-jobs create --config`, as Google's documentation writes one:
// chief, workers and Vertex's Reduction Server, an image whose ENTRYPOINT runs the trainer.
TEST(VertexJobTest, AGcloudConfigBecomesTheSamePoolsAndScheduling) {
  const std::string config = R"(
workerPoolSpecs:
  - machineSpec: {machineType: a2-highgpu-1g, acceleratorType: NVIDIA_TESLA_A100, acceleratorCount: 1}
    replicaCount: 1
    containerSpec:
      imageUri: /srv/images/trainer:latest
      args: [--epochs=10, --batch-size=64]
      env: [{name: LOG_LEVEL, value: debug}, {name: EMPTY}]
    diskSpec: {bootDiskType: pd-ssd, bootDiskSizeGb: 100}
  - machineSpec: {machineType: a2-highgpu-1g, acceleratorType: NVIDIA_TESLA_A100, acceleratorCount: 1}
    replicaCount: 3
    containerSpec:
      imageUri: /srv/images/trainer:latest
      command: [python3, -m, trainer.task]
      args: [--epochs=10]
  - machineSpec: {machineType: n1-highcpu-16}
    replicaCount: 2
    containerSpec: {imageUri: us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest}
scheduling: {timeout: 7200s, restartJobOnWorkerRestart: true}
baseOutputDirectory: {outputUriPrefix: /srv/cohort/runs/mnist}
serviceAccount: trainer@project.iam.gserviceaccount.com
)";
  ASSERT_TRUE(IsVertexCustomJob(config));
  std::vector<std::string> notes;
  JobSpec spec = Converted(config, &notes);
  ASSERT_EQ(spec.pools.size(), 3u);
  const WorkerPoolSpec& chief = spec.pools[0];
  EXPECT_EQ(chief.role, Role::kChief);
  EXPECT_EQ(chief.replicas, 1);
  EXPECT_EQ(chief.resources.gpus, 1);
  ASSERT_TRUE(chief.container.has_value());
  EXPECT_EQ(chief.container->image, "/srv/images/trainer:latest");
  EXPECT_TRUE(chief.container->command.empty());  // the image's ENTRYPOINT runs
  EXPECT_EQ(chief.container->args, (std::vector<std::string>{"--epochs=10", "--batch-size=64"}));
  // Its acceleratorType: only nodes whose GPUs are A100s.
  EXPECT_EQ(chief.node_selector,
            (NodeLabels{{"cloud.google.com/gke-accelerator", "nvidia-tesla-a100"}}));
  EXPECT_EQ(spec.pools[1].node_selector, chief.node_selector);
  EXPECT_TRUE(spec.pools[2].node_selector.empty());
  EXPECT_EQ(chief.container->env,
            (std::map<std::string, std::string>{{"EMPTY", ""}, {"LOG_LEVEL", "debug"}}));
  const WorkerPoolSpec& workers = spec.pools[1];
  EXPECT_EQ(workers.role, Role::kWorker);
  EXPECT_EQ(workers.replicas, 3);
  EXPECT_EQ(workers.container->command,
            (std::vector<std::string>{"python3", "-m", "trainer.task"}));
  const WorkerPoolSpec& reducers = spec.pools[2];
  EXPECT_EQ(reducers.role, Role::kReducer);
  EXPECT_EQ(reducers.builtin, Builtin::kReducer);
  EXPECT_EQ(reducers.replicas, 2);
  EXPECT_FALSE(reducers.container.has_value());
  EXPECT_EQ(spec.scheduling.timeout, std::chrono::seconds(7200));
  EXPECT_EQ(spec.scheduling.restart_job_on_worker_restart, true);
  EXPECT_EQ(spec.output_dir, "/srv/cohort/runs/mnist");
  EXPECT_EQ(spec.name_prefix, "custom-job");
  EXPECT_TRUE(spec.name.empty());
  // Each field without a counterpart is named once.
  EXPECT_TRUE(
      Mentions(notes, "workerPoolSpecs[0].machineSpec.machineType: ignored 'a2-highgpu-1g'"));
  EXPECT_TRUE(Mentions(notes,
                       "workerPoolSpecs[0].machineSpec.acceleratorType: only nodes labelled "
                       "cloud.google.com/gke-accelerator=nvidia-tesla-a100 (agents label"));
  EXPECT_TRUE(Mentions(notes, "workerPoolSpecs[0].diskSpec"));
  EXPECT_TRUE(Mentions(notes, "workerPoolSpecs[2].containerSpec.imageUri"));
  EXPECT_TRUE(Mentions(notes, "serviceAccount: ignored"));
  EXPECT_FALSE(Mentions(notes, "acceleratorCount"));
  EXPECT_EQ(notes.size(), 8u);
}

// A whole CustomJob as the REST API and `gcloud ai custom-jobs describe --format=json` write it:
// int64 counts as strings, a display name, output-only fields, a gs:// output directory, a
// placeholder pool skipping the parameter servers, an evaluator, labels.
TEST(VertexJobTest, ADescribedCustomJobInJsonIsTakenWholeItsOutputFieldsLeftAlone) {
  const std::string described = R"json({
  "name": "projects/1/locations/us-central1/customJobs/2",
  "displayName": "mnist resnet (v2)",
  "state": "JOB_STATE_SUCCEEDED",
  "createTime": "2026-11-30T10:00:00Z",
  "labels": {"team": "vision", "owner": "jürgen"},
  "jobSpec": {
    "workerPoolSpecs": [
      {"replicaCount": "1", "machineSpec": {"acceleratorCount": 2},
       "containerSpec": {"imageUri": "trainer", "command": ["python3", "task.py"]}},
      {},
      {},
      {"replicaCount": "1", "containerSpec": {"imageUri": "trainer", "args": ["--eval"]}}
    ],
    "scheduling": {"timeout": "1.5s", "disableRetries": true, "maxWaitDuration": "600s"},
    "baseOutputDirectory": {"outputUriPrefix": "gs://bucket/mnist"}
  }
})json";
  ASSERT_TRUE(IsVertexCustomJob(described));
  std::vector<std::string> notes;
  JobSpec spec = Converted(described, &notes);
  EXPECT_EQ(spec.name_prefix, "mnist-resnet--v2-");
  ASSERT_EQ(spec.pools.size(), 2u);
  EXPECT_EQ(spec.pools[0].resources.gpus, 2);
  EXPECT_EQ(spec.pools[1].role, Role::kEvaluator);
  EXPECT_EQ(spec.pools[1].container->args, (std::vector<std::string>{"--eval"}));
  EXPECT_EQ(spec.scheduling.timeout, std::chrono::seconds(2));  // rounded up
  EXPECT_EQ(spec.scheduling.max_restarts, 0);
  EXPECT_TRUE(spec.output_dir.empty());
  EXPECT_TRUE(Mentions(notes, "'gs://bucket/mnist' is not a path on the nodes"));
  // Its labels are the job's, but for one Cohort's label syntax cannot hold.
  EXPECT_EQ(spec.labels, (NodeLabels{{"team", "vision"}}));
  EXPECT_TRUE(Mentions(notes, "labels.owner: left out: label value 'jürgen'")) << notes[0];
  EXPECT_TRUE(Mentions(notes,
                       "maxWaitDuration: ignored, as Vertex ignores it without strategy "
                       "FLEX_START"));
  EXPECT_EQ(spec.scheduling.max_wait.count(), 0);
  EXPECT_FALSE(Mentions(notes, "state"));
  EXPECT_FALSE(Mentions(notes, "createTime"));
}

// Vertex bounds the wait for resources of FLEX_START jobs alone: maxWaitDuration, 24 hours unless
// given, "0s" no bound. Cohort's scheduling.max_wait is the same bound.
TEST(VertexJobTest, AFlexStartJobWaitsAtMostItsMaxWaitDuration) {
  const std::string pools = "workerPoolSpecs:\n  - containerSpec: {imageUri: x}\n";
  std::vector<std::string> notes;
  JobSpec spec =
      Converted(pools + "scheduling: {strategy: FLEX_START, maxWaitDuration: 1800s}\n", &notes);
  EXPECT_EQ(spec.scheduling.max_wait, std::chrono::minutes(30));
  EXPECT_FALSE(Mentions(notes, "strategy")) << "FLEX_START is what Cohort does";
  EXPECT_EQ(Converted(pools + "scheduling: {strategy: FLEX_START}\n").scheduling.max_wait,
            std::chrono::hours(24));
  EXPECT_EQ(Converted(pools + "scheduling: {strategy: FLEX_START, maxWaitDuration: 0s}\n")
                .scheduling.max_wait.count(),
            0);
  notes.clear();
  spec = Converted(pools + "scheduling: {strategy: SPOT, maxWaitDuration: 600s}\n", &notes);
  EXPECT_EQ(spec.scheduling.max_wait.count(), 0);
  EXPECT_TRUE(Mentions(notes, "scheduling.strategy: ignored"));
  EXPECT_TRUE(Mentions(notes, "scheduling.maxWaitDuration: ignored"));
  EXPECT_NE(Error(pools + "scheduling: {strategy: FLEX_START, maxWaitDuration: 1h}\n")
                .find("maxWaitDuration: '1h' is not a duration such as \"7200s\""),
            std::string::npos);
}

// gcloud reads a single mapping as the one pool, the chief's.
TEST(VertexJobTest, ASinglePoolMappingIsTheChief) {
  JobSpec spec =
      Converted("workerPoolSpecs:\n  replicaCount: 1\n  containerSpec:\n    imageUri: /images/t\n");
  ASSERT_EQ(spec.pools.size(), 1u);
  EXPECT_EQ(spec.pools[0].role, Role::kChief);
  EXPECT_EQ(spec.pools[0].container->image, "/images/t");
}

TEST(VertexJobTest, CohortJobFilesAndNonYamlAreNotVertexFiles) {
  EXPECT_FALSE(IsVertexCustomJob("name: a\nworker_pools: []\n"));
  EXPECT_FALSE(IsVertexCustomJob("{"));
  EXPECT_FALSE(IsVertexCustomJob("- workerPoolSpecs\n"));
  EXPECT_FALSE(IsVertexCustomJob(""));
}

// What cannot be run is refused, naming the file, the line and the field.
TEST(VertexJobTest, WhatCannotRunIsRefusedNamingTheField) {
  EXPECT_NE(Error("workerPoolSpecs:\n  - replicaCount: 1\n    pythonPackageSpec:\n"
                  "      executorImageUri: x\n      packageUris: [gs://b/p.tar.gz]\n"
                  "      pythonModule: trainer.task\n")
                .find("workerPoolSpecs[0].pythonPackageSpec.packageUris[0]: "
                      "'gs://b/p.tar.gz' is not a path on the nodes"),
            std::string::npos);
  EXPECT_NE(Error("workerPoolSpecs:\n  - pythonPackageSpec: {executorImageUri: x, "
                  "packageUris: [/p.tar.gz]}\n")
                .find("pythonPackageSpec.pythonModule: required"),
            std::string::npos);
  EXPECT_NE(Error("workerPoolSpecs:\n  - containerSpec: {imageUri: x}\n    pythonPackageSpec: "
                  "{executorImageUri: x, packageUris: [/p.tar.gz], pythonModule: m}\n")
                .find("workerPoolSpecs[0]: give one of containerSpec and pythonPackageSpec"),
            std::string::npos);
  EXPECT_NE(Error("workerPoolSpecs:\n  - replicaCount: 1\n    containerSpec: {imageUri: x}\n"
                  "    machinSpec: {}\n")
                .find("workerPoolSpecs[0].machinSpec: unknown key"),
            std::string::npos);
  EXPECT_NE(
      Error("workerPoolSpecs:\n  - {}\n  - replicaCount: 2\n    containerSpec: {imageUri: x}\n")
          .find("the first pool (the chief's) is required"),
      std::string::npos);
  EXPECT_NE(Error("workerPoolSpecs:\n  - replicaCount: many\n    containerSpec: {imageUri: x}\n")
                .find("replicaCount: expected a count, got 'many'"),
            std::string::npos);
  EXPECT_NE(Error("workerPoolSpecs:\n  - replicaCount: 2\n    containerSpec: {imageUri: x}\n")
                .find("as a Cohort job"),
            std::string::npos);  // two chiefs: the job file's own rule
  EXPECT_NE(Error("workerPoolSpecs:\n  - containerSpec: {imageUri: x}\n"
                  "scheduling: {timeout: 2h}\n")
                .find("'2h' is not a duration such as \"7200s\""),
            std::string::npos);
  EXPECT_NE(
      Error("workerPoolSpecs:\n  - containerSpec: {imageUri: x, env: [{name: A}, {name: A}]}\n")
          .find("'A' is given twice"),
      std::string::npos);
  EXPECT_NE(Error("workerPoolSpecs: [{}, {}, {}, {}, {}]\n").find("at most 4 pools"),
            std::string::npos);
  EXPECT_NE(Error("jobSpec: {workerPoolSpecs: [{containerSpec: {imageUri: x}}]}\nowner: me\n")
                .find("owner: unknown key of a Vertex CustomJob"),
            std::string::npos);
  EXPECT_NE(
      Error("jobSpec: {workerPoolSpecs: [{containerSpec: {imageUri: x}}]}\ndisplay_name: x\n")
          .find("display_name: unknown key of a Vertex CustomJob (did you mean 'displayName'?)"),
      std::string::npos);
  EXPECT_NE(Error("workerPoolSpecs:\n  - replicaCount: 1\n")
                .find("give one of containerSpec and pythonPackageSpec"),
            std::string::npos);
}

// A pythonPackageSpec, as Vertex's "training application package" docs write one: its packages
// installed and its module run with its args, on the node's python3 for a Vertex prebuilt image,
// in the executor image otherwise.
TEST(VertexJobTest, APythonPackageRunsItsModuleAfterInstallingThePackages) {
  std::vector<std::string> notes;
  JobSpec spec = Converted(
      "workerPoolSpecs:\n"
      "  - replicaCount: 1\n"
      "    machineSpec: {machineType: n1-standard-4, acceleratorCount: 1}\n"
      "    pythonPackageSpec:\n"
      "      executorImageUri: us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-1.py310:latest\n"
      "      packageUris: [/shared/pkgs/trainer-0.1.tar.gz, file:///shared/pkgs/utils.whl]\n"
      "      pythonModule: trainer.task\n"
      "      args: [--epochs=3]\n"
      "      env: [{name: MODE, value: fast}]\n"
      "  - replicaCount: 2\n"
      "    pythonPackageSpec:\n"
      "      executorImageUri: /images/trainer\n"
      "      packageUris: [/shared/pkgs/trainer-0.1.tar.gz]\n"
      "      pythonModule: trainer.task\n",
      &notes);
  ASSERT_EQ(spec.pools.size(), 2u);
  const WorkerPoolSpec& chief = spec.pools[0];
  ASSERT_TRUE(chief.process.has_value());
  EXPECT_FALSE(chief.container.has_value());
  ASSERT_EQ(chief.process->command.size(), 7u);
  EXPECT_EQ(chief.process->command[0], "python3");
  EXPECT_EQ(chief.process->command[1], "-c");
  EXPECT_NE(chief.process->command[2].find("'pip', 'install'"), std::string::npos);
  EXPECT_EQ(
      std::vector<std::string>(chief.process->command.begin() + 3, chief.process->command.end()),
      (std::vector<std::string>{"trainer.task", "/shared/pkgs/trainer-0.1.tar.gz",
                                "/shared/pkgs/utils.whl", "--"}));
  EXPECT_EQ(chief.process->args, std::vector<std::string>{"--epochs=3"});
  EXPECT_EQ(chief.process->env.at("MODE"), "fast");
  EXPECT_EQ(chief.resources.gpus, 1);
  const WorkerPoolSpec& workers = spec.pools[1];
  ASSERT_TRUE(workers.container.has_value());
  EXPECT_EQ(workers.container->image, "/images/trainer");
  EXPECT_EQ(workers.container->command.back(), "--");
  EXPECT_TRUE(Mentions(notes,
                       "workerPoolSpecs[0].pythonPackageSpec.executorImageUri: "
                       "'us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-1.py310:latest'"
                       " is a Vertex prebuilt image: the package runs on the node's own "
                       "python3"));
  EXPECT_TRUE(Mentions(notes,
                       "pythonPackageSpec.packageUris: installed with pip without their "
                       "dependencies"));
}

constexpr char kTrialJobSpec[] =
    "trialJobSpec:\n  workerPoolSpecs:\n    - replicaCount: 1\n"
    "      machineSpec: {acceleratorCount: 1}\n"
    "      containerSpec: {imageUri: /images/trainer, args: [--epochs=3]}\n";

// A HyperparameterTuningJob with every kind of parameter: the study it makes searches the same
// space with the same budgets, and its trials run the trial job with the parameters appended.
TEST(VertexTuningJobTest, EveryParameterKindBudgetAndTheTrialJobCarryOver) {
  const std::string file = std::string(R"(
displayName: mnist lr sweep
maxTrialCount: "6"
parallelTrialCount: 2
maxFailedTrialCount: 1
studySpec:
  metrics: [{metricId: accuracy, goal: MAXIMIZE}]
  parameters:
    - {parameterId: lr, doubleValueSpec: {minValue: 0.001, maxValue: 0.1}, scaleType: UNIT_LOG_SCALE}
    - {parameterId: units, integerValueSpec: {minValue: "16", maxValue: "128"}}
    - {parameterId: optimizer, categoricalValueSpec: {values: [sgd, adam]}}
    - {parameterId: batch_size, discreteValueSpec: {values: [64, 16, 32]}, scaleType: UNIT_LINEAR_SCALE}
  algorithm: RANDOM_SEARCH
  measurementSelectionType: LAST_MEASUREMENT
  medianAutomatedStoppingSpec: {useElapsedDuration: false}
)") + kTrialJobSpec;
  ASSERT_TRUE(IsVertexTuningJob(file));
  EXPECT_FALSE(IsVertexCustomJob(file));
  std::vector<std::string> notes;
  StudySpec study = Study(file, &notes);
  EXPECT_TRUE(notes.empty()) << notes.front();
  EXPECT_EQ(study.name, "mnist-lr-sweep");
  EXPECT_EQ(study.metric_id, "accuracy");
  EXPECT_EQ(study.goal, MetricGoal::kMaximize);
  EXPECT_EQ(study.algorithm, SearchAlgorithm::kRandom);
  EXPECT_EQ(study.max_trials, 6);
  EXPECT_EQ(study.parallel_trials, 2);
  EXPECT_EQ(study.max_failed_trials, 1);
  ASSERT_TRUE(study.early_stopping.has_value());
  EXPECT_TRUE(study.early_stopping->median);
  ASSERT_EQ(study.parameters.size(), 4u);
  EXPECT_EQ(study.parameters[0].type, ParameterType::kDouble);
  EXPECT_EQ(study.parameters[0].min, 0.001);
  EXPECT_EQ(study.parameters[0].max, 0.1);
  EXPECT_EQ(study.parameters[0].scale, ScaleType::kLog);
  EXPECT_EQ(study.parameters[1].type, ParameterType::kInteger);
  EXPECT_EQ(study.parameters[1].min, 16);
  EXPECT_EQ(study.parameters[1].max, 128);
  EXPECT_EQ(study.parameters[2].categories, (std::vector<std::string>{"sgd", "adam"}));
  EXPECT_EQ(study.parameters[3].values, (std::vector<double>{16, 32, 64}));
  ASSERT_EQ(study.trial_job.pools.size(), 1u);
  EXPECT_EQ(study.trial_job.pools[0].resources.gpus, 1);
  // A trial: the parameters follow the job's args, as Vertex passes them.
  StatusOr<JobSpec> trial = MakeTrialJob(study, "1", {{0.01, ""}, {32, ""}, {0, "adam"}, {16, ""}});
  ASSERT_TRUE(trial.ok()) << trial.status().ToString();
  EXPECT_EQ(trial->name, "mnist-lr-sweep_trial_1");
  EXPECT_EQ(trial->pools[0].container->args,
            (std::vector<std::string>{"--epochs=3", "--lr=0.01", "--units=32", "--optimizer=adam",
                                      "--batch_size=16"}));
}

// gcloud's config (no budgets: one trial, as --max-trial-count defaults to), Vertex's defaults:
// Bayesian search, the best measurement (Cohort takes the last: a note says so).
TEST(VertexTuningJobTest, VertexDefaultsAreTakenAndTheDifferencesNoted) {
  const std::string file = std::string(R"(
displayName: sweep
studySpec:
  metrics: [{metricId: loss, goal: MINIMIZE}]
  parameters: [{parameterId: lr, doubleValueSpec: {minValue: 0.1, maxValue: 1, defaultValue: 0.5}}]
  decayCurveStoppingSpec: {useElapsedDuration: true}
)") + kTrialJobSpec;
  std::vector<std::string> notes;
  StudySpec study = Study(file, &notes);
  EXPECT_EQ(study.algorithm, SearchAlgorithm::kBayesian);
  EXPECT_EQ(study.goal, MetricGoal::kMinimize);
  EXPECT_EQ(study.max_trials, 1);
  EXPECT_FALSE(study.early_stopping.has_value());
  EXPECT_TRUE(Mentions(notes, "maxTrialCount: absent: one trial"));
  EXPECT_TRUE(Mentions(notes,
                       "measurementSelectionType: 'BEST_MEASUREMENT': a Cohort trial's "
                       "objective is its last reported value"));
  EXPECT_TRUE(Mentions(notes, "studySpec.decayCurveStoppingSpec: ignored"));
  EXPECT_TRUE(Mentions(notes, "doubleValueSpec.defaultValue: ignored"));
  EXPECT_EQ(notes.size(), 4u);
}

TEST(VertexTuningJobTest, WhatCannotRunIsRefusedNamingTheField) {
  const std::string metric = "  metrics: [{metricId: acc, goal: MAXIMIZE}]\n";
  const std::string lr =
      "  parameters: [{parameterId: lr, doubleValueSpec: {minValue: 0.1, "
      "maxValue: 1}}]\n";
  EXPECT_NE(StudyError("studySpec:\n" + metric + lr + kTrialJobSpec)
                .find("displayName: required: it names the study"),
            std::string::npos);
  // A name given with it (`cohort tune --name`) stands for the missing displayName; one in the
  // file is left for the caller to replace.
  StatusOr<VertexConversion> named =
      AsCohortStudyFile("studySpec:\n" + metric + lr + kTrialJobSpec, "hp.yaml", "lr_2");
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  StatusOr<StudySpec> named_study = ParseStudySpec(named->yaml, "converted");
  ASSERT_TRUE(named_study.ok()) << named_study.status().ToString();
  EXPECT_EQ(named_study->name, "lr_2");
  named = AsCohortStudyFile("displayName: s\nstudySpec:\n" + metric + lr + kTrialJobSpec, "hp.yaml",
                            "lr_2");
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(ParseStudySpec(named->yaml, "converted")->name, "s");
  EXPECT_NE(StudyError("displayName: s\nstudySpec:\n  metrics: [{metricId: a, goal: MAXIMIZE}, "
                       "{metricId: b, goal: MINIMIZE}]\n" +
                       lr + kTrialJobSpec)
                .find("studySpec.metrics: one metric is required"),
            std::string::npos);
  EXPECT_NE(StudyError("displayName: s\nstudySpec:\n" + metric +
                       "  parameters: [{parameterId: lr, doubleValueSpec: {minValue: 0.1, "
                       "maxValue: 1}, conditionalParameterSpecs: []}]\n" +
                       kTrialJobSpec)
                .find("studySpec.parameters[0].conditionalParameterSpecs: not supported"),
            std::string::npos);
  EXPECT_NE(StudyError("displayName: s\nstudySpec:\n" + metric + lr + "  algorithm: GRID_SEARCH\n" +
                       kTrialJobSpec)
                .find("as a Cohort study"),
            std::string::npos);  // a grid over a continuous parameter: the study file's own rule
  EXPECT_NE(StudyError("displayName: s\nstudySpec:\n" + metric +
                       "  parameters: [{parameterId: lr, doubleValueSpec: {minValue: 0.1, "
                       "maxValue: 1}, scaleType: UNIT_CUBIC}]\n" +
                       kTrialJobSpec)
                .find("'UNIT_CUBIC' is not UNIT_LINEAR_SCALE"),
            std::string::npos);
  EXPECT_NE(StudyError("displayName: s\nstudySpec:\n" + metric +
                       "  parameters: [{parameterId: lr, doubleValueSpec: {minValue: 0.1, "
                       "maxValue: 1}, integerValueSpec: {minValue: 1, maxValue: 2}}]\n" +
                       kTrialJobSpec)
                .find("integerValueSpec: given with doubleValueSpec: one only"),
            std::string::npos);
  EXPECT_NE(StudyError("displayName: s\nmaxTrials: 3\nstudySpec:\n" + metric + lr + kTrialJobSpec)
                .find("maxTrials: unknown key of a Vertex HyperparameterTuningJob"),
            std::string::npos);
  EXPECT_NE(
      StudyError("displayName: s\nmaxTrialCont: 3\nstudySpec:\n" + metric + lr + kTrialJobSpec)
          .find("maxTrialCont: unknown key of a Vertex HyperparameterTuningJob (did you "
                "mean 'maxTrialCount'?)"),
      std::string::npos);
  EXPECT_NE(StudyError("displayName: s\nstudySpec:\n" + metric + lr +
                       "trialJobSpec: {workerPoolSpecs: [{containerSpec: {imageUri: x}}], "
                       "enableWebAccess: true, bogus: 1}\n")
                .find("trialJobSpec.bogus: unknown key"),
            std::string::npos);
}

}  // namespace
}  // namespace cohort
