#include "coordinator/launch_plan.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "common/cluster_env.h"

namespace cohort::coordinator {
namespace {

// A chief or worker that runs (an elastic job's idle workers do not).
bool Trains(const ReplicaRecord& r) {
  return (r.role == Role::kChief || r.role == Role::kWorker) && !r.idle;
}

// Whether the replicas on `node_id` are each a torchrun node of their own (MigNodes).
bool OwnTorchNodes(const std::string& node_id, const MigNodes& mig_nodes) {
  return mig_nodes && mig_nodes(node_id);
}

// torchrun's GROUP_RANK of `r`'s node, and GROUP_WORLD_SIZE: the nodes running training replicas,
// in the order of the lowest RANK each runs.
std::pair<int, int> NodeGroup(const JobRecord& job, const ReplicaRecord& r,
                              const MigNodes& mig_nodes) {
  std::map<std::string, bool> own;  // node -> OwnTorchNodes, asked once a node
  // The torchrun node of `x`: its node, or on a node of MIG devices itself alone.
  auto torch_node = [&](const ReplicaRecord& x) {
    auto [it, added] = own.try_emplace(x.node_id);
    if (added) it->second = OwnTorchNodes(x.node_id, mig_nodes);
    return it->second ? x.node_id + "\n" + x.name : x.node_id;
  };
  std::map<std::string, int> lowest_rank;  // torchrun node -> lowest RANK on it
  for (const auto& other : job.replicas) {
    if (!Trains(other)) continue;
    auto [it, added] = lowest_rank.emplace(torch_node(other), TorchRank(other.role, other.index));
    if (!added) it->second = std::min(it->second, TorchRank(other.role, other.index));
  }
  auto mine = lowest_rank.find(torch_node(r));
  if (mine == lowest_rank.end()) return {0, static_cast<int>(lowest_rank.size())};
  int group = 0;
  for (const auto& [node, rank] : lowest_rank) group += rank < mine->second ? 1 : 0;
  return {group, static_cast<int>(lowest_rank.size())};
}

}  // namespace

std::vector<int> VisibleGpus(const JobRecord& job, const ReplicaRecord& r,
                             const MigNodes& mig_nodes) {
  if (!Trains(r) || r.gpus.size() != 1 || OwnTorchNodes(r.node_id, mig_nodes)) return r.gpus;
  std::vector<int> shared;  // in local-rank order
  for (const auto& other : job.replicas) {
    if (!Trains(other) || other.node_id != r.node_id) continue;
    if (other.gpus.size() != 1) return r.gpus;
    shared.push_back(other.gpus[0]);
  }
  return shared;
}

wire::LaunchReplicaT PlanLaunch(const JobRecord& job, const ReplicaRecord& r,
                                const std::function<std::string(const std::string&)>& address_of,
                                const MigNodes& mig_nodes) {
  const WorkerPoolSpec& pool = job.PoolOf(r);
  ClusterEnvInput in;
  in.job_name = job.name;
  in.trial_id = job.trial_id;
  if (const ArraySpec& array = job.spec.scheduling.array; array.index) {
    in.array_index = *array.index;
    in.array_count = static_cast<int>(array.indexes.size());
  }
  in.output_dir = job.output_dir;
  in.role = r.role;
  in.index = r.index;
  in.master_port = job.master_port;
  in.bootstrap_port = job.bootstrap_port;
  int local_rank = 0;
  const bool own_torch_node = OwnTorchNodes(r.node_id, mig_nodes);
  for (const auto& other : job.replicas) {
    if (other.idle) continue;  // not in this placement: not in the cluster it sees
    in.replicas.push_back(
        ReplicaEndpoint{other.role, other.index, address_of(other.node_id), other.port});
    if (&other == &r) continue;
    bool beside = Trains(other) && !own_torch_node && other.node_id == r.node_id;
    if (beside) ++in.local_world_size;  // starts at 1: r itself
    if (beside && &other < &r) ++local_rank;
  }
  in.local_rank = local_rank;
  std::tie(in.group_rank, in.group_world_size) = NodeGroup(job, r, mig_nodes);
  in.attempt = r.attempt;
  in.max_restarts = job.spec.scheduling.max_restarts;
  in.cpus = pool.resources.cpus;
  std::vector<int> gpus = VisibleGpus(job, r, mig_nodes);
  in.gpus = gpus;
  std::map<std::string, std::string> env = RenderClusterEnv(in);

  wire::LaunchReplicaT launch;
  launch.job = job.name;
  launch.job_created_ms = job.create_time_ms;
  launch.replica = r.name;
  launch.role = std::string(RoleName(r.role));
  launch.index = r.index;
  launch.attempt = r.attempt;
  if (pool.process) {
    launch.command = pool.process->command;
    launch.command.insert(launch.command.end(), pool.process->args.begin(),
                          pool.process->args.end());
    for (const auto& [k, v] : pool.process->env) env[k] = v;
  } else if (pool.container) {
    launch.container = std::make_unique<wire::ContainerSpecT>();
    launch.container->image = pool.container->image;
    launch.container->command = pool.container->command;
    launch.container->args = pool.container->args;
    launch.command = pool.container->command;
    launch.command.insert(launch.command.end(), pool.container->args.begin(),
                          pool.container->args.end());
    for (const auto& [k, v] : pool.container->env) env[k] = v;
  }
  for (const auto& [k, v] : env) {
    auto kv = std::make_unique<wire::KeyValueT>();
    kv->key = k;
    kv->value = v;
    launch.env.push_back(std::move(kv));
  }
  launch.gpus = gpus;
  launch.cpus = pool.resources.cpus;
  launch.memory_mb = pool.resources.memory_mb;
  launch.builtin = std::string(BuiltinName(pool.builtin));
  launch.checkpoint_dir = CheckpointDir(job.output_dir, job.trial_id);
  launch.owner = job.owner;
  return launch;
}

wire::StopReplicaT PlanStop(const std::string& job, const std::string& replica, int attempt,
                            const std::string& reason, int grace_ms) {
  wire::StopReplicaT stop;
  stop.job = job;
  stop.replica = replica;
  stop.attempt = attempt;
  stop.grace_ms = grace_ms;
  stop.reason = reason;
  return stop;
}

}  // namespace cohort::coordinator
