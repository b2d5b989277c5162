// What an agent is told to launch: the cluster environment of one replica as LaunchPlan renders
// it from the coordinator's records (no sockets).
#include "coordinator/launch_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace cohort::coordinator {
namespace {

JobRecord Job(int gpus_per_replica) {
  std::string yaml =
      "name: ddp\nworker_pools:\n"
      "  - role: chief\n    replicas: 1\n    resources: {gpus: " +
      std::to_string(gpus_per_replica) +
      "}\n    process: {command: [/bin/train]}\n"
      "  - role: worker\n    replicas: 2\n    resources: {gpus: " +
      std::to_string(gpus_per_replica) +
      "}\n    process: {command: [/bin/train]}\n"
      "  - role: reducer\n    replicas: 1\n    builtin: reducer\n";
  auto spec = ParseJobSpec(yaml, "test job");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  JobRecord job;
  job.name = "ddp";
  job.spec = std::move(*spec);
  job.output_dir = "/tmp/ddp";
  job.replicas = MakeReplicas(job.spec);
  job.master_port = 29000;
  job.bootstrap_port = 29001;
  return job;
}

std::map<std::string, std::string> Env(const wire::LaunchReplicaT& launch) {
  std::map<std::string, std::string> env;
  for (const auto& kv : launch.env) env[kv->key] = kv->value;
  return env;
}

std::string Address(const std::string& node) { return node + ".example"; }

// Places `job`'s replica `name` on `node` with `gpus`.
void Place(JobRecord& job, const std::string& name, const std::string& node,
           std::vector<int> gpus) {
  ReplicaRecord* r = job.FindReplica(name);
  r->node_id = node;
  r->gpus = std::move(gpus);
  r->port = 30000;
}

TEST(LaunchPlanTest, OneGpuTrainingReplicasSharingANodeSeeTheirGpusInLocalRankOrder) {
  JobRecord job = Job(1);
  // chief-0 and worker-0 on node a (GPUs 3 and 1), worker-1 on b, the reducer on a.
  Place(job, "chief-0", "a", {3});
  Place(job, "worker-0", "a", {1});
  Place(job, "worker-1", "b", {0});
  Place(job, "reducer-0", "a", {});
  auto chief = PlanLaunch(job, *job.FindReplica("chief-0"), Address);
  auto w0 = PlanLaunch(job, *job.FindReplica("worker-0"), Address);
  auto w1 = PlanLaunch(job, *job.FindReplica("worker-1"), Address);
  auto reducer = PlanLaunch(job, *job.FindReplica("reducer-0"), Address);

  EXPECT_EQ(Env(chief)["CUDA_VISIBLE_DEVICES"], "3,1");
  EXPECT_EQ(Env(chief)["LOCAL_RANK"], "0");
  EXPECT_EQ(Env(w0)["CUDA_VISIBLE_DEVICES"], "3,1");
  EXPECT_EQ(Env(w0)["LOCAL_RANK"], "1");  // set_device(1) is GPU 1, its own
  EXPECT_EQ(Env(w0)["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(w0.gpus, (std::vector<int>{3, 1}));
  EXPECT_EQ(Env(w1)["CUDA_VISIBLE_DEVICES"], "0");
  EXPECT_EQ(Env(w1)["LOCAL_RANK"], "0");
  EXPECT_EQ(Env(w1)["LOCAL_WORLD_SIZE"], "1");
  EXPECT_EQ(Env(reducer)["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(Env(chief)["MASTER_ADDR"], "a.example");
  // torchrun's node rank: a is the chief's node.
  EXPECT_EQ(Env(chief)["GROUP_RANK"], "0");
  EXPECT_EQ(Env(w0)["GROUP_RANK"], "0");
  EXPECT_EQ(Env(w1)["GROUP_RANK"], "1");
  EXPECT_EQ(Env(w1)["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(Env(reducer).count("GROUP_RANK"), 0u);
}

// On a node whose GPUs are MIG devices, CUDA runs a process on one of them only: each replica
// there sees its own and is a torchrun node of its own, as a Kubernetes pod on a MIG slice is.
TEST(LaunchPlanTest, ReplicasOnMigDevicesEachSeeTheirOwnAndAreNodesOfTheirOwn) {
  JobRecord job = Job(1);
  Place(job, "chief-0", "mig", {3});
  Place(job, "worker-0", "mig", {1});
  Place(job, "worker-1", "b", {0});
  Place(job, "reducer-0", "b", {});
  const MigNodes mig_nodes = [](const std::string& node) { return node == "mig"; };
  auto env = [&](const std::string& name) {
    return Env(PlanLaunch(job, *job.FindReplica(name), Address, mig_nodes));
  };
  EXPECT_EQ(env("chief-0")["CUDA_VISIBLE_DEVICES"], "3");
  EXPECT_EQ(env("worker-0")["CUDA_VISIBLE_DEVICES"], "1");
  EXPECT_EQ(PlanLaunch(job, *job.FindReplica("worker-0"), Address, mig_nodes).gpus,
            std::vector<int>{1});
  for (const char* name : {"chief-0", "worker-0", "worker-1"}) {
    EXPECT_EQ(env(name)["LOCAL_RANK"], "0") << name;
    EXPECT_EQ(env(name)["LOCAL_WORLD_SIZE"], "1") << name;
    EXPECT_EQ(env(name)["GROUP_WORLD_SIZE"], "3") << name;
  }
  EXPECT_EQ(env("chief-0")["GROUP_RANK"], "0");
  EXPECT_EQ(env("worker-0")["GROUP_RANK"], "1");
  EXPECT_EQ(env("worker-1")["GROUP_RANK"], "2");
}

// torchrun's view of the job (common/cluster_env.h): nodes ranked by the lowest RANK each runs,
// the restart budget and this attempt, and as many OpenMP threads as CPUs asked for unless the
// pool's env says otherwise.
TEST(LaunchPlanTest, TorchrunsNodeRanksRestartsAndThreadsComeFromTheJob) {
  auto spec = ParseJobSpec(
      "name: lit\nscheduling: {max_restarts: 7}\nworker_pools:\n"
      "  - role: chief\n    replicas: 1\n    resources: {cpus: 4}\n"
      "    process: {command: [/bin/train]}\n"
      "  - role: worker\n    replicas: 3\n    resources: {cpus: 2}\n"
      "    process: {command: [/bin/train], env: {OMP_NUM_THREADS: '1'}}\n",
      "test job");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRecord job;
  job.name = "lit";
  job.spec = std::move(*spec);
  job.replicas = MakeReplicas(job.spec);
  // RANK 0 and 2 on z, RANK 1 on a, RANK 3 on m: z, a, m.
  const std::vector<std::pair<std::string, std::string>> placement = {
      {"chief-0", "z"}, {"worker-0", "a"}, {"worker-1", "z"}, {"worker-2", "m"}};
  for (const auto& [name, node] : placement) job.FindReplica(name)->node_id = node;
  job.FindReplica("worker-2")->attempt = 2;
  auto env = [&](const std::string& name) {
    return Env(PlanLaunch(job, *job.FindReplica(name), Address));
  };
  EXPECT_EQ(env("chief-0")["GROUP_RANK"], "0");
  EXPECT_EQ(env("worker-1")["GROUP_RANK"], "0");
  EXPECT_EQ(env("worker-0")["GROUP_RANK"], "1");
  EXPECT_EQ(env("worker-2")["GROUP_RANK"], "2");
  EXPECT_EQ(env("worker-2")["GROUP_WORLD_SIZE"], "3");
  EXPECT_EQ(env("worker-2")["ROLE_RANK"], "3");
  EXPECT_EQ(env("worker-2")["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(env("chief-0")["TORCHELASTIC_RESTART_COUNT"], "0");
  EXPECT_EQ(env("chief-0")["TORCHELASTIC_MAX_RESTARTS"], "7");
  EXPECT_EQ(env("chief-0")["TORCHELASTIC_RUN_ID"], "lit");
  EXPECT_EQ(env("chief-0")["OMP_NUM_THREADS"], "4");
  EXPECT_EQ(env("worker-0")["OMP_NUM_THREADS"], "1");  // the pool's own
}

TEST(LaunchPlanTest, ReplicasOfSeveralGpusSeeOnlyTheirOwn) {
  JobRecord job = Job(2);
  job.FindReplica("chief-0")->node_id = "a";
  job.FindReplica("chief-0")->gpus = {0, 1};
  job.FindReplica("worker-0")->node_id = "a";
  job.FindReplica("worker-0")->gpus = {2, 3};
  auto w0 = PlanLaunch(job, *job.FindReplica("worker-0"), Address);
  EXPECT_EQ(Env(w0)["CUDA_VISIBLE_DEVICES"], "2,3");
  EXPECT_EQ(w0.gpus, (std::vector<int>{2, 3}));
}

TEST(LaunchPlanTest, AContainersCommandAndArgsTravelApartAndJoined) {
  auto spec = ParseJobSpec(
      "name: vertex\nworker_pools:\n"
      "  - role: chief\n    replicas: 1\n"
      "    container: {image: /images/trainer, args: [--epochs=3]}\n"
      "  - role: worker\n    replicas: 1\n"
      "    container: {image: /images/trainer, command: [python, -m, task], args: [--lr=0.1]}\n",
      "test job");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRecord job;
  job.name = "vertex";
  job.spec = std::move(*spec);
  job.replicas = MakeReplicas(job.spec);
  job.FindReplica("chief-0")->node_id = "a";
  job.FindReplica("worker-0")->node_id = "b";

  // Only args: the image's ENTRYPOINT stays (the agent knows it); an older agent gets them joined.
  wire::LaunchReplicaT chief = PlanLaunch(job, *job.FindReplica("chief-0"), Address);
  ASSERT_NE(chief.container, nullptr);
  EXPECT_EQ(chief.container->image, "/images/trainer");
  EXPECT_TRUE(chief.container->command.empty());
  EXPECT_EQ(chief.container->args, (std::vector<std::string>{"--epochs=3"}));
  EXPECT_EQ(chief.command, (std::vector<std::string>{"--epochs=3"}));

  wire::LaunchReplicaT worker = PlanLaunch(job, *job.FindReplica("worker-0"), Address);
  ASSERT_NE(worker.container, nullptr);
  EXPECT_EQ(worker.container->command, (std::vector<std::string>{"python", "-m", "task"}));
  EXPECT_EQ(worker.container->args, (std::vector<std::string>{"--lr=0.1"}));
  EXPECT_EQ(worker.command, (std::vector<std::string>{"python", "-m", "task", "--lr=0.1"}));
}

}  // namespace
}  // namespace cohort::coordinator
