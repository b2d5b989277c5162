// Vertex AI CustomJob and HyperparameterTuningJob files, as Cohort job and study files.
//
// CustomJob: the config that `gcloud ai custom-jobs create
// --config` takes (a CustomJobSpec: workerPoolSpecs, scheduling, baseOutputDirectory, ...) or a
// whole CustomJob as the REST API and `gcloud ai custom-jobs describe --format=json` write it
// (displayName, jobSpec, ...), in YAML or JSON. `cohort submit` takes either unchanged: the
// coordinator stores the job file this makes (README "Vertex AI job files").
//
// What each field becomes:
//   - workerPoolSpecs[i] is the pool of index i (DESIGN.md "Jobs"): the chief, workers, parameter
//     servers or reducers, evaluators; an empty entry (`{}`) skips its index, as in Vertex. A
//     single mapping in place of the list is pool 0, as gcloud reads it.
//   - replicaCount (a number, or a decimal string as REST writes int64) is replicas (1 where
//     absent); machineSpec.acceleratorCount is resources.gpus, and machineSpec.acceleratorType
//     (NVIDIA_H100_80GB) a node_selector on GKE's kAcceleratorLabel (nvidia-h100-80gb), which
//     agents give nodes of the NVIDIA GPUs they recognise: the pool runs only on GPUs of that
//     kind, as on Vertex (H100 Mega asks for H100s; a TPU is refused), with a note.
//   - containerSpec {imageUri, command, args, env: [{name, value}]} is container {image, command,
//     args, env}; the image is what the node's container runtime takes (an OCI layout or root
//     filesystem path for runc/crun, an image name for docker/podman). In pool 2, Vertex's
//     Reduction Server image (".../reductionserver:...") is Cohort's own reducer (builtin:
//     reducer).
//   - pythonPackageSpec {executorImageUri, packageUris, pythonModule, args, env} (a "training
//     application package") runs as on Vertex: each replica installs the packages with pip, then
//     runs `python3 -m pythonModule args`. The packages are paths on the nodes (or file:// URIs;
//     a gs:// one is refused, saying so) installed without their dependencies, since no package
//     index is reached (a note says the image must have them), into the attempt's directory. A
//     Vertex prebuilt executor image (.../vertex-ai/training/..., .../cloud-aiplatform/
//     training/...) is the node's own python3, as a process, with a note; any other image is a
//     container of that image.
//   - scheduling.timeout ("7200s", "1.5s") is the timeout (rounded up to whole seconds);
//     restartJobOnWorkerRestart the same (unset, Cohort's default by the job's shape, not Vertex's
//     false: see JobSpec::RestartsWholeJob); disableRetries: true is max_restarts 0.
//   - baseOutputDirectory.outputUriPrefix is output_dir when it is a path on the node (a gcsfuse
//     "/gcs/..." path is one); a gs:// URI cannot be, so the job writes under the coordinator's
//     output root instead, with a note saying so.
//   - displayName is the job's name prefix (characters a job name cannot hold become '-'; none:
//     "custom-job"): the coordinator adds a unique suffix, as Vertex gives each job an id.
//   - labels are the job's labels (a HyperparameterTuningJob's: each trial job's); one that
//     Cohort's label syntax cannot hold is left out with a note.
// Fields without a counterpart here (machineType, diskSpec, nfsMounts,
// serviceAccount, network, tensorboard, ...) are accepted and each named in a note, which
// the coordinator returns as a warning of the submit; the output-only fields of a described job
// (state, createTime, error, ...) are accepted without one. Any other key is an error naming it,
// as in the job file.
//
// HyperparameterTuningJob (`cohort tune`): the config of `gcloud ai hp-tuning-jobs create
// --config` (studySpec, trialJobSpec), or a whole HyperparameterTuningJob (displayName,
// maxTrialCount, parallelTrialCount, maxFailedTrialCount, studySpec, trialJobSpec, ...):
//   - displayName is the study's name (required: gcloud takes it as --display-name);
//     maxTrialCount (default 1, as gcloud's), parallelTrialCount and maxFailedTrialCount the
//     trial budgets;
//   - studySpec.metrics (exactly one) is the metric; parameters[] (parameterId with one of
//     doubleValueSpec/integerValueSpec {minValue, maxValue}, categoricalValueSpec/
//     discreteValueSpec {values}, scaleType UNIT_LINEAR/LOG/REVERSE_LOG_SCALE) the parameters;
//     algorithm GRID_SEARCH, RANDOM_SEARCH or ALGORITHM_UNSPECIFIED (Vertex's Bayesian default)
//     grid, random or bayesian; medianAutomatedStoppingSpec median early stopping;
//   - trialJobSpec is the trial job, read as a CustomJobSpec above. Each trial gets
//     `--<parameterId>=<value>` appended to its args, as on Vertex.
// A trial's objective is its last reported value (Vertex's LAST_MEASUREMENT; Vertex defaults to
// the best, so a note says so unless the file asks for the last); other stopping specs, default
// values and safety configs are noted; conditionalParameterSpecs and more than one metric are
// refused, saying why.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cohort {

// Whether `text` is YAML (or JSON) whose top-level map has workerPoolSpecs or jobSpec: a Vertex
// CustomJob file, not a Cohort job file (whose keys are snake_case). False for what is not YAML.
bool IsVertexCustomJob(std::string_view text);

struct VertexConversion {
  std::string yaml;                // the Cohort job (or study) file, valid
  std::vector<std::string> notes;  // what had no counterpart, one line a field
};

// The Cohort job file for a Vertex CustomJob file (see above). kInvalidArgument naming `source`,
// the line, column and field path of what is wrong or unsupported.
StatusOr<VertexConversion> ConvertVertexCustomJob(std::string_view text, std::string_view source);

// Whether `text` is YAML (or JSON) whose top-level map has studySpec or trialJobSpec: a Vertex
// HyperparameterTuningJob file.
bool IsVertexTuningJob(std::string_view text);
// The Cohort study file for a Vertex HyperparameterTuningJob file (see above); errors as
// ConvertVertexCustomJob's.
StatusOr<VertexConversion> ConvertVertexTuningJob(std::string_view text, std::string_view source);

// The Cohort job (study) file `text` stands for: a Vertex CustomJob (HyperparameterTuningJob)
// file converted as above, any other text as it is, without notes.
StatusOr<VertexConversion> AsCohortJobFile(std::string_view text, std::string_view source);
// `name` (not empty): the study's name where a tuning file has no displayName, for a caller that
// renames the study after (`cohort tune --name`, SubmitStudy.name).
StatusOr<VertexConversion> AsCohortStudyFile(std::string_view text, std::string_view source,
                                             std::string_view name = {});

}  // namespace cohort
