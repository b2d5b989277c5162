// Renders the environment a replica's process sees, exactly as the managed services do, so stock
// PyTorch DDP and TensorFlow multi-worker code runs unchanged (DESIGN.md "Jobs"): CLUSTER_SPEC,
// TF_CONFIG, MASTER_ADDR/PORT, WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, AIP_* dirs,
// CLOUD_ML_TRIAL_ID, CLOUD_ML_HP_METRIC_FILE, the GPU visibility variables, and Cohort's own
// variables that the collective library reads (COHORT_BOOTSTRAP_ADDR, COHORT_NUM_REDUCERS,
// COHORT_REDUCER_INDEX, COHORT_PS_ADDRS). The coordinator renders it (it knows every placement);
// the agent adds COHORT_RESTORE_CHECKPOINT and COHORT_RESTART_COUNT at (re)start.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/job_spec.h"

namespace cohort {

// Where one replica of the job runs: the host other replicas reach it at and the port it owns.
struct ReplicaEndpoint {
  Role role = Role::kChief;
  int index = 0;
  std::string host;
  int port = 0;
};

struct ClusterEnvInput {
  std::string job_name;
  std::string trial_id;                   // empty unless the job is a study trial
  std::string output_dir;                 // the job's base output dir (AIP_* dirs live under it)
  std::vector<ReplicaEndpoint> replicas;  // every replica of the job
  Role role = Role::kChief;               // the replica being rendered
  int index = 0;
  int local_rank = 0;        // its rank among the job's training replicas on its node
  int local_world_size = 1;  // how many training replicas of the job its node runs
  std::vector<int> gpus;     // node-local GPU indices pinned to it
  int master_port = 0;       // torch's MASTER_PORT, on the chief's host
  int bootstrap_port = 0;    // collective bootstrap store, on the chief's host
};

// The variables to inject (the pool's own env from the job file is merged on top by the caller).
// Shapes:
//  CLUSTER_SPEC = {"cluster":{"workerpool0":["h:p"],"workerpool1":[...],...},
//                  "environment":"cloud","task":{"type":"workerpool1","index":0,"trial":"3"},
//                  "job":{"name":...}}
//  TF_CONFIG    = {"cluster":{"chief":[...],"worker":[...],"ps":[...]},
//                  "task":{"type":"worker","index":0,"trial":"3"},"environment":"cloud"}
//                  (evaluators are not in "cluster"; reducers are not in TF_CONFIG's cluster)
//  RANK: chief 0, worker i -> i+1; WORLD_SIZE = chief + workers. Not set for other roles.
//  Also: LOCAL_RANK and LOCAL_WORLD_SIZE (training roles only, torchrun's contract),
//  AIP_MODEL_DIR/AIP_CHECKPOINT_DIR/AIP_TENSORBOARD_LOG_DIR (when output_dir is set),
//  CLOUD_ML_TRIAL_ID (trials only), CLOUD_ML_HP_METRIC_FILE =
//  <output_dir>[/<trial_id>]/hp_metrics.jsonl, the visibility of `gpus`
//  (common/gpu_visibility.h), COHORT_JOB, COHORT_ROLE, COHORT_REPLICA
//  ("worker-1"), COHORT_BOOTSTRAP_ADDR (chief host:bootstrap_port), COHORT_NUM_WORKERS
//  (= chief + workers, every role), COHORT_NUM_REDUCERS, COHORT_REDUCER_INDEX (reducers only),
//  COHORT_PS_ADDRS (comma-separated host:port of the parameter servers by index, "" when none).
//  Reducers get no TF_CONFIG. Details in cluster_env.cc.
std::map<std::string, std::string> RenderClusterEnv(const ClusterEnvInput& input);

// <output_dir>[/<trial_id>]/{model,checkpoints,logs}/ with the trailing slash, as Vertex.
std::string ModelDir(const std::string& output_dir, const std::string& trial_id);
std::string CheckpointDir(const std::string& output_dir, const std::string& trial_id);
std::string TensorboardDir(const std::string& output_dir, const std::string& trial_id);

}  // namespace cohort
