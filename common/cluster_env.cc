// Cluster environment rendering (see cluster_env.h).
//
// Choices the header leaves open, written down here:
//  - CLUSTER_SPEC lists every replica of every pool (reducers and evaluators included), as Vertex
//    does; "job" is kept small: {"name": <job>} plus "trial" for a study trial.
//  - TF_CONFIG is set for chief, worker, parameter_server ("ps") and evaluator replicas. Its
//    "cluster" holds chief, worker and ps (keys with no replicas are left out); evaluators get
//    task type "evaluator" and are not in "cluster". Reducers get no TF_CONFIG at all: TensorFlow
//    has no task type for them and they never run TensorFlow's own runtime.
//  - WORLD_SIZE, RANK and the rest of torchrun's variables are set only for the training replicas
//    (chief and workers), so that torch.distributed in an evaluator or a reducer does not try to
//    join the group.
//    COHORT_NUM_WORKERS (= chief + workers) is set for every role: reducers need it.
//  - MASTER_ADDR/MASTER_PORT are set for every role (the chief's host and master_port).
//  - The AIP_* dirs and CLOUD_ML_HP_METRIC_FILE are set when output_dir is non-empty;
//    CLOUD_ML_HP_METRIC_FILE = <output_dir>[/<trial_id>]/hp_metrics.jsonl, which the agent tails
//    (JSON lines, as cloudml-hypertune writes them).
//  - host:port uses [host]:port for IPv6 literals.
#include "common/cluster_env.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/enum_names.h"
#include "common/gpu_visibility.h"

namespace cohort {

namespace {

std::string HostPort(const std::string& host, int port) {
  std::string h = host;
  if (h.find(':') != std::string::npos && (h.empty() || h.front() != '[')) h = "[" + h + "]";
  return h + ":" + std::to_string(port);
}

std::string PoolKey(Role role) { return "workerpool" + std::to_string(PoolIndex(role)); }

// TF_CONFIG's name for a role; empty for roles not in TF's cluster.
constexpr EnumName<Role> kTfClusterKeys[] = {
    {Role::kChief, "chief"}, {Role::kWorker, "worker"}, {Role::kParameterServer, "ps"}};
std::string TfClusterKey(Role role) { return std::string(NameIn(kTfClusterKeys, role, "")); }

std::string JoinDir(const std::string& output_dir, const std::string& trial_id,
                    std::string_view leaf) {
  std::string base = output_dir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  if (!trial_id.empty()) {
    if (base != "/") base += "/";
    base += trial_id;
  }
  if (base != "/") base += "/";
  base += leaf;
  return base;
}

}  // namespace

std::string ModelDir(const std::string& output_dir, const std::string& trial_id) {
  return JoinDir(output_dir, trial_id, "model/");
}

std::string CheckpointDir(const std::string& output_dir, const std::string& trial_id) {
  return JoinDir(output_dir, trial_id, "checkpoints/");
}

std::string TensorboardDir(const std::string& output_dir, const std::string& trial_id) {
  return JoinDir(output_dir, trial_id, "logs/");
}

std::map<std::string, std::string> RenderClusterEnv(const ClusterEnvInput& input) {
  using nlohmann::json;
  std::map<std::string, std::string> env;

  // Replicas in a stable order: pool index, then replica index.
  std::vector<ReplicaEndpoint> replicas = input.replicas;
  std::stable_sort(replicas.begin(), replicas.end(),
                   [](const ReplicaEndpoint& a, const ReplicaEndpoint& b) {
                     if (PoolIndex(a.role) != PoolIndex(b.role)) {
                       return PoolIndex(a.role) < PoolIndex(b.role);
                     }
                     return a.index < b.index;
                   });

  const ReplicaEndpoint* chief = nullptr;
  int num_workers = 0;
  int num_reducers = 0;
  std::vector<std::string> ps_addrs;
  for (const auto& r : replicas) {
    switch (r.role) {
      case Role::kChief:
        if (chief == nullptr) chief = &r;
        break;
      case Role::kWorker:
        ++num_workers;
        break;
      case Role::kReducer:
        ++num_reducers;
        break;
      case Role::kParameterServer:
        ps_addrs.push_back(HostPort(r.host, r.port));
        break;
      case Role::kEvaluator:
        break;
    }
  }
  const std::string chief_host = chief != nullptr ? chief->host : std::string();
  const int world_size = (chief != nullptr ? 1 : 0) + num_workers;
  const bool training = input.role == Role::kChief || input.role == Role::kWorker;

  // CLUSTER_SPEC (Vertex shape).
  {
    json cluster = json::object();
    for (const auto& r : replicas) {
      cluster[PoolKey(r.role)].push_back(HostPort(r.host, r.port));
    }
    json task = {{"type", PoolKey(input.role)}, {"index", input.index}};
    json job = {{"name", input.job_name}};
    if (!input.trial_id.empty()) {
      task["trial"] = input.trial_id;
      job["trial"] = input.trial_id;
    }
    json spec = {{"cluster", cluster}, {"environment", "cloud"}, {"task", task}, {"job", job}};
    env["CLUSTER_SPEC"] = spec.dump();
  }

  // TF_CONFIG.
  if (input.role != Role::kReducer) {
    json cluster = json::object();
    for (const auto& r : replicas) {
      std::string key = TfClusterKey(r.role);
      if (!key.empty()) cluster[key].push_back(HostPort(r.host, r.port));
    }
    std::string type = input.role == Role::kEvaluator ? "evaluator" : TfClusterKey(input.role);
    json task = {{"type", type}, {"index", input.index}};
    if (!input.trial_id.empty()) task["trial"] = input.trial_id;
    json tf = {{"cluster", cluster}, {"task", task}, {"environment", "cloud"}};
    env["TF_CONFIG"] = tf.dump();
  }

  // torch.distributed.
  env["MASTER_ADDR"] = chief_host;
  env["MASTER_PORT"] = std::to_string(input.master_port);
  if (training) {
    env["WORLD_SIZE"] = std::to_string(world_size);
    env["RANK"] = std::to_string(TorchRank(input.role, input.index));
    env["LOCAL_RANK"] = std::to_string(input.local_rank);
    env["LOCAL_WORLD_SIZE"] = std::to_string(input.local_world_size);
    env["GROUP_RANK"] = std::to_string(input.group_rank);
    env["GROUP_WORLD_SIZE"] = std::to_string(input.group_world_size);
    env["ROLE_NAME"] = "default";
    env["ROLE_RANK"] = env["RANK"];
    env["ROLE_WORLD_SIZE"] = env["WORLD_SIZE"];
    env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(input.attempt);
    env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(input.max_restarts);
    env["TORCHELASTIC_RUN_ID"] = input.job_name;
    env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
    // What torchrun takes for the flags it is not given (PET_<FLAG>), as Kubeflow's PyTorchJob
    // sets them: a bare `torchrun train.py` in each replica makes one torchrun node of it.
    env["PET_NNODES"] = env["WORLD_SIZE"];
    env["PET_NODE_RANK"] = env["RANK"];
    env["PET_MASTER_ADDR"] = chief_host;
    env["PET_MASTER_PORT"] = env["MASTER_PORT"];
    env["PET_NPROC_PER_NODE"] = std::to_string(std::max<size_t>(1, input.gpus.size()));
  }
  if (input.cpus > 0) env["OMP_NUM_THREADS"] = std::to_string(input.cpus);

  // Output directories and hyperparameter tuning.
  if (!input.output_dir.empty()) {
    env["AIP_MODEL_DIR"] = ModelDir(input.output_dir, input.trial_id);
    env["AIP_CHECKPOINT_DIR"] = CheckpointDir(input.output_dir, input.trial_id);
    env["AIP_TENSORBOARD_LOG_DIR"] = TensorboardDir(input.output_dir, input.trial_id);
    env["CLOUD_ML_HP_METRIC_FILE"] = JoinDir(input.output_dir, input.trial_id, "hp_metrics.jsonl");
  }
  if (!input.trial_id.empty()) env["CLOUD_ML_TRIAL_ID"] = input.trial_id;
  if (input.array_index >= 0) {
    env["COHORT_ARRAY_INDEX"] = std::to_string(input.array_index);
    env["COHORT_ARRAY_COUNT"] = std::to_string(input.array_count);
    env["JOB_COMPLETION_INDEX"] = std::to_string(input.array_index);
  }

  SetGpuVisibility(input.gpus, &env);

  // Cohort's own.
  env["COHORT_JOB"] = input.job_name;
  env["COHORT_ROLE"] = std::string(RoleName(input.role));
  env["COHORT_REPLICA"] = std::string(RoleName(input.role)) + "-" + std::to_string(input.index);
  env["COHORT_BOOTSTRAP_ADDR"] = HostPort(chief_host, input.bootstrap_port);
  env["COHORT_NUM_WORKERS"] = std::to_string(world_size);
  env["COHORT_NUM_REDUCERS"] = std::to_string(num_reducers);
  if (input.role == Role::kReducer) env["COHORT_REDUCER_INDEX"] = std::to_string(input.index);
  std::string ps_list;
  for (size_t i = 0; i < ps_addrs.size(); ++i) {
    if (i > 0) ps_list += ",";
    ps_list += ps_addrs[i];
  }
  env["COHORT_PS_ADDRS"] = ps_list;
  return env;
}

}  // namespace cohort
