// Renders the environment a replica's process sees, exactly as the managed services do, so stock
// PyTorch DDP and TensorFlow multi-worker code runs unchanged (DESIGN.md "Jobs"): CLUSTER_SPEC,
// TF_CONFIG, MASTER_ADDR/PORT, WORLD_SIZE, RANK and the rest of torchrun's variables, AIP_* dirs,
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
  int array_index = -1;                   // its index when the job is a task of an array
  int array_count = 0;                    // how many tasks that array has
  std::string output_dir;                 // the job's base output dir (AIP_* dirs live under it)
  std::vector<ReplicaEndpoint> replicas;  // every replica of the job
  Role role = Role::kChief;               // the replica being rendered
  int index = 0;
  int local_rank = 0;        // its rank among the job's training replicas on its node
  int local_world_size = 1;  // how many training replicas of the job its node runs
  int group_rank = 0;        // its node's index among the nodes running training replicas
  int group_world_size = 1;  // how many nodes run the job's training replicas
  int attempt = 0;           // how many times it has been restarted
  int max_restarts = 0;      // the job's scheduling.max_restarts
  int cpus = 0;              // the CPUs its pool asks for (0: unbounded)
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
//  Also: the rest of torchrun's contract with its workers (training roles only): LOCAL_RANK,
//  LOCAL_WORLD_SIZE, GROUP_RANK (the node's index, nodes in the order of the lowest RANK each
//  runs: the chief's is 0), GROUP_WORLD_SIZE, ROLE_NAME "default", ROLE_RANK = RANK,
//  ROLE_WORLD_SIZE = WORLD_SIZE (torchrun's one role), TORCHELASTIC_RESTART_COUNT (the attempt),
//  TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID (the job's name) and
//  TORCHELASTIC_USE_AGENT_STORE "False" (rank 0 serves the c10d store, as with env://): so
//  frameworks that look for a torchrun launch (Lightning's TorchElasticEnvironment wants RANK,
//  GROUP_RANK, LOCAL_RANK and LOCAL_WORLD_SIZE) take Cohort's ranks instead of spawning their own.
//  For torchrun run inside a replica, the defaults of its flags as Kubeflow's PyTorchJob sets
//  them: PET_NNODES = WORLD_SIZE, PET_NODE_RANK = RANK (each replica one torchrun node),
//  PET_MASTER_ADDR/PET_MASTER_PORT = MASTER_ADDR/MASTER_PORT (its static rendezvous),
//  PET_NPROC_PER_NODE = the GPUs pinned to it (1 without): a bare `torchrun train.py` joins them.
//  OMP_NUM_THREADS = `cpus` for every role when `cpus` > 0, the replica's share of the node's
//  CPUs (its cgroup's weight, or with the agent's --cpu-limit quota its cap): torch and numpy
//  otherwise start a thread per host core, which contend with the other replicas of a full node
//  (a pool's env may set another value). And:
//  AIP_MODEL_DIR/AIP_CHECKPOINT_DIR/AIP_TENSORBOARD_LOG_DIR (when output_dir is set),
//  CLOUD_ML_TRIAL_ID (trials only), COHORT_ARRAY_INDEX, COHORT_ARRAY_COUNT and Kubernetes' Indexed
//  Job's JOB_COMPLETION_INDEX (tasks of an array only), CLOUD_ML_HP_METRIC_FILE =
//  <output_dir>[/<trial_id>]/hp_metrics.jsonl, the visibility of `gpus`
//  (common/gpu_visibility.h), COHORT_JOB, COHORT_ROLE, COHORT_REPLICA
//  ("worker-1"), COHORT_BOOTSTRAP_ADDR (chief host:bootstrap_port), COHORT_NUM_WORKERS
//  (= chief + workers, every role), COHORT_NUM_REDUCERS, COHORT_REDUCER_INDEX (reducers only),
//  COHORT_PS_ADDRS (comma-separated host:port of the parameter servers by index, "" when none).
//  Reducers get no TF_CONFIG. Details in cluster_env.cc.
std::map<std::string, std::string> RenderClusterEnv(const ClusterEnvInput& input);

// torch's RANK of a training replica: the chief's is 0, worker i's is i + 1.
inline int TorchRank(Role role, int index) { return role == Role::kChief ? 0 : index + 1; }

// <output_dir>[/<trial_id>]/{model,checkpoints,logs}/ with the trailing slash, as Vertex.
std::string ModelDir(const std::string& output_dir, const std::string& trial_id);
std::string CheckpointDir(const std::string& output_dir, const std::string& trial_id);
std::string TensorboardDir(const std::string& output_dir, const std::string& trial_id);

}  // namespace cohort
