// What an agent is told to launch: the cluster environment of one replica as LaunchPlan renders
// it from the coordinator's records (no sockets).
#include "coordinator/launch_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

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

TEST(LaunchPlanTest, OneGpuTrainingReplicasSharingANodeSeeTheirGpusInLocalRankOrder) {
  JobRecord job = Job(1);
  // chief-0 and worker-0 on node a (GPUs 3 and 1), worker-1 on b, the reducer on a.
  auto place = [&](const std::string& name, const std::string& node, std::vector<int> gpus) {
    ReplicaRecord* r = job.FindReplica(name);
    r->node_id = node;
    r->gpus = std::move(gpus);
    r->port = 30000;
  };
  place("chief-0", "a", {3});
  place("worker-0", "a", {1});
  place("worker-1", "b", {0});
  place("reducer-0", "a", {});
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

}  // namespace
}  // namespace cohort::coordinator
