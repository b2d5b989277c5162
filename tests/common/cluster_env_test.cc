#include "common/cluster_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace cohort {
namespace {

using nlohmann::json;
using Env = std::map<std::string, std::string>;

// Each variable of `want` has its value in `env` (a variable `env` lacks reads as empty).
void ExpectEnv(const Env& env, const Env& want) {
  for (const auto& [name, value] : want) {
    auto it = env.find(name);
    EXPECT_EQ(it == env.end() ? "" : it->second, value) << name;
  }
}

// `env` sets none of `names`.
void ExpectUnset(const Env& env, std::initializer_list<const char*> names) {
  for (const char* name : names) EXPECT_EQ(env.count(name), 0u) << name;
}

// chief on h0, two workers, two reducers, one evaluator.
ClusterEnvInput ReducerJob(Role role, int index) {
  ClusterEnvInput in;
  in.job_name = "digits";
  in.output_dir = "/srv/jobs/digits";
  in.replicas = {
      {Role::kEvaluator, 0, "h3", 2300}, {Role::kWorker, 1, "h2", 2201},  // out of order on purpose
      {Role::kReducer, 1, "h4", 2401},   {Role::kChief, 0, "h0", 2000},
      {Role::kWorker, 0, "h1", 2200},    {Role::kReducer, 0, "h4", 2400},
  };
  in.role = role;
  in.index = index;
  in.master_port = 29500;
  in.bootstrap_port = 29501;
  return in;
}

ClusterEnvInput PsJob(Role role, int index) {
  ClusterEnvInput in;
  in.job_name = "ps_job";
  in.output_dir = "/out/";
  in.replicas = {
      {Role::kChief, 0, "c", 1000},
      {Role::kWorker, 0, "w0", 1100},
      {Role::kParameterServer, 1, "p1", 1201},
      {Role::kParameterServer, 0, "p0", 1200},
  };
  in.role = role;
  in.index = index;
  in.master_port = 7000;
  in.bootstrap_port = 7001;
  return in;
}

json Parse(const std::map<std::string, std::string>& env, const std::string& key) {
  auto it = env.find(key);
  EXPECT_NE(it, env.end()) << key;
  if (it == env.end()) return json();
  return json::parse(it->second);
}

TEST(ClusterEnvTest, ChiefOfReducerJob) {
  ClusterEnvInput in = ReducerJob(Role::kChief, 0);
  in.gpus = {0, 1};
  auto env = RenderClusterEnv(in);

  json cs = Parse(env, "CLUSTER_SPEC");
  EXPECT_EQ(cs["cluster"]["workerpool0"], json::array({"h0:2000"}));
  EXPECT_EQ(cs["cluster"]["workerpool1"], json::array({"h1:2200", "h2:2201"}));
  EXPECT_EQ(cs["cluster"]["workerpool2"], json::array({"h4:2400", "h4:2401"}));
  EXPECT_EQ(cs["cluster"]["workerpool3"], json::array({"h3:2300"}));
  EXPECT_EQ(cs["environment"], "cloud");
  EXPECT_EQ(cs["task"]["type"], "workerpool0");
  EXPECT_EQ(cs["task"]["index"], 0);
  EXPECT_FALSE(cs["task"].contains("trial"));
  EXPECT_EQ(cs["job"]["name"], "digits");
  EXPECT_FALSE(cs["job"].contains("trial"));

  json tf = Parse(env, "TF_CONFIG");
  EXPECT_EQ(tf["cluster"]["chief"], json::array({"h0:2000"}));
  EXPECT_EQ(tf["cluster"]["worker"], json::array({"h1:2200", "h2:2201"}));
  EXPECT_FALSE(tf["cluster"].contains("ps"));
  EXPECT_FALSE(tf["cluster"].contains("evaluator"));
  EXPECT_EQ(tf["cluster"].size(), 2u);  // reducers are not in TF_CONFIG
  EXPECT_EQ(tf["task"], (json{{"type", "chief"}, {"index", 0}}));
  EXPECT_EQ(tf["environment"], "cloud");

  ExpectEnv(env, {{"MASTER_ADDR", "h0"},
                  {"MASTER_PORT", "29500"},
                  {"WORLD_SIZE", "3"},
                  {"RANK", "0"},
                  {"PET_NODE_RANK", "0"},
                  {"PET_NPROC_PER_NODE", "2"},
                  {"LOCAL_RANK", "0"},
                  {"LOCAL_WORLD_SIZE", "1"},
                  {"AIP_MODEL_DIR", "/srv/jobs/digits/model/"},
                  {"AIP_CHECKPOINT_DIR", "/srv/jobs/digits/checkpoints/"},
                  {"AIP_TENSORBOARD_LOG_DIR", "/srv/jobs/digits/logs/"},
                  {"CLOUD_ML_HP_METRIC_FILE", "/srv/jobs/digits/hp_metrics.jsonl"},
                  {"CUDA_VISIBLE_DEVICES", "0,1"},
                  {"NVIDIA_VISIBLE_DEVICES", "0,1"},
                  {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
                  {"COHORT_JOB", "digits"},
                  {"COHORT_ROLE", "chief"},
                  {"COHORT_REPLICA", "chief-0"},
                  {"COHORT_BOOTSTRAP_ADDR", "h0:29501"},
                  {"COHORT_NUM_REDUCERS", "2"},
                  {"COHORT_NUM_WORKERS", "3"}});
  for (const char* unset : {"CLOUD_ML_TRIAL_ID", "COHORT_REDUCER_INDEX", "COHORT_ARRAY_INDEX",
                            "COHORT_ARRAY_COUNT", "JOB_COMPLETION_INDEX"}) {
    EXPECT_EQ(env.count(unset), 0u) << unset;
  }
  EXPECT_EQ(env["COHORT_PS_ADDRS"], "");
}

TEST(ClusterEnvTest, WorkerRankFollowsIndex) {
  ClusterEnvInput in = ReducerJob(Role::kWorker, 1);
  in.local_rank = 1;
  in.local_world_size = 2;
  in.group_rank = 1;
  in.group_world_size = 2;
  in.attempt = 4;
  in.max_restarts = 5;
  in.cpus = 6;
  in.gpus = {3};
  auto env = RenderClusterEnv(in);
  json cs = Parse(env, "CLUSTER_SPEC");
  EXPECT_EQ(cs["task"]["type"], "workerpool1");
  EXPECT_EQ(cs["task"]["index"], 1);
  json tf = Parse(env, "TF_CONFIG");
  EXPECT_EQ(tf["task"]["type"], "worker");
  EXPECT_EQ(tf["task"]["index"], 1);
  ExpectEnv(env, {{"RANK", "2"},
                  {"WORLD_SIZE", "3"},
                  {"LOCAL_RANK", "1"},
                  {"LOCAL_WORLD_SIZE", "2"},
                  {"GROUP_RANK", "1"},
                  {"GROUP_WORLD_SIZE", "2"},
                  {"ROLE_NAME", "default"},
                  {"ROLE_RANK", "2"},
                  {"ROLE_WORLD_SIZE", "3"},
                  {"TORCHELASTIC_RESTART_COUNT", "4"},
                  {"TORCHELASTIC_MAX_RESTARTS", "5"},
                  {"TORCHELASTIC_RUN_ID", "digits"},
                  {"TORCHELASTIC_USE_AGENT_STORE", "False"},
                  {"PET_NNODES", "3"},
                  {"PET_NODE_RANK", "2"},
                  {"PET_MASTER_ADDR", "h0"},
                  {"PET_MASTER_PORT", "29500"},
                  {"PET_NPROC_PER_NODE", "1"},
                  {"OMP_NUM_THREADS", "6"},
                  {"CUDA_VISIBLE_DEVICES", "3"},
                  {"NVIDIA_VISIBLE_DEVICES", "3"},
                  {"COHORT_REPLICA", "worker-1"},
                  {"COHORT_ROLE", "worker"}});
}

TEST(ClusterEnvTest, ReducerGetsIndexAndNoTfConfigOrRank) {
  auto env = RenderClusterEnv(ReducerJob(Role::kReducer, 1));
  json cs = Parse(env, "CLUSTER_SPEC");
  EXPECT_EQ(cs["task"]["type"], "workerpool2");
  EXPECT_EQ(cs["task"]["index"], 1);
  ExpectUnset(
      env, {"TF_CONFIG", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
            "ROLE_RANK", "TORCHELASTIC_RUN_ID", "OMP_NUM_THREADS", "PET_NNODES", "PET_NODE_RANK"});
  ExpectEnv(env, {{"COHORT_REDUCER_INDEX", "1"},
                  {"COHORT_NUM_REDUCERS", "2"},
                  {"COHORT_NUM_WORKERS", "3"},
                  {"COHORT_REPLICA", "reducer-1"},
                  {"COHORT_BOOTSTRAP_ADDR", "h0:29501"}});
  // A CPU-only replica sees no GPU.
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "void");
}

TEST(ClusterEnvTest, EvaluatorIsNotInTfCluster) {
  auto env = RenderClusterEnv(ReducerJob(Role::kEvaluator, 0));
  json tf = Parse(env, "TF_CONFIG");
  EXPECT_EQ(tf["task"]["type"], "evaluator");
  EXPECT_EQ(tf["task"]["index"], 0);
  EXPECT_FALSE(tf["cluster"].contains("evaluator"));
  EXPECT_EQ(tf["cluster"]["chief"], json::array({"h0:2000"}));
  json cs = Parse(env, "CLUSTER_SPEC");
  EXPECT_EQ(cs["task"]["type"], "workerpool3");
  EXPECT_EQ(env.count("RANK"), 0u);
  EXPECT_EQ(env["MASTER_ADDR"], "h0");
  EXPECT_EQ(env["COHORT_ROLE"], "evaluator");
}

TEST(ClusterEnvTest, ParameterServerJob) {
  auto env = RenderClusterEnv(PsJob(Role::kParameterServer, 1));
  json tf = Parse(env, "TF_CONFIG");
  EXPECT_EQ(tf["cluster"]["ps"], json::array({"p0:1200", "p1:1201"}));
  EXPECT_EQ(tf["cluster"]["chief"], json::array({"c:1000"}));
  EXPECT_EQ(tf["cluster"]["worker"], json::array({"w0:1100"}));
  EXPECT_EQ(tf["task"], (json{{"type", "ps"}, {"index", 1}}));
  json cs = Parse(env, "CLUSTER_SPEC");
  EXPECT_EQ(cs["cluster"]["workerpool2"], json::array({"p0:1200", "p1:1201"}));
  EXPECT_EQ(cs["task"]["type"], "workerpool2");
  EXPECT_EQ(env["COHORT_PS_ADDRS"], "p0:1200,p1:1201");
  EXPECT_EQ(env["COHORT_NUM_REDUCERS"], "0");
  ExpectUnset(env, {"COHORT_REDUCER_INDEX", "RANK"});
  EXPECT_EQ(env["COHORT_NUM_WORKERS"], "2");
  // Trailing slash in output_dir is not doubled.
  EXPECT_EQ(env["AIP_MODEL_DIR"], "/out/model/");

  auto worker_env = RenderClusterEnv(PsJob(Role::kWorker, 0));
  EXPECT_EQ(worker_env["COHORT_PS_ADDRS"], "p0:1200,p1:1201");
  EXPECT_EQ(worker_env["RANK"], "1");
  EXPECT_EQ(worker_env["WORLD_SIZE"], "2");
}

TEST(ClusterEnvTest, TrialAddsTrialEverywhere) {
  ClusterEnvInput in = ReducerJob(Role::kWorker, 0);
  in.trial_id = "3";
  auto env = RenderClusterEnv(in);
  json cs = Parse(env, "CLUSTER_SPEC");
  EXPECT_EQ(cs["task"]["trial"], "3");
  EXPECT_EQ(cs["job"]["trial"], "3");
  json tf = Parse(env, "TF_CONFIG");
  EXPECT_EQ(tf["task"], (json{{"type", "worker"}, {"index", 0}, {"trial", "3"}}));
  ExpectEnv(env, {{"CLOUD_ML_TRIAL_ID", "3"},
                  {"AIP_MODEL_DIR", "/srv/jobs/digits/3/model/"},
                  {"AIP_CHECKPOINT_DIR", "/srv/jobs/digits/3/checkpoints/"},
                  {"AIP_TENSORBOARD_LOG_DIR", "/srv/jobs/digits/3/logs/"},
                  {"CLOUD_ML_HP_METRIC_FILE", "/srv/jobs/digits/3/hp_metrics.jsonl"}});
}

// A task of a job array learns its index as Slurm's and Kubernetes' tasks do, and the count.
TEST(ClusterEnvTest, AnArrayTaskIsGivenItsIndexAndTheArraysCount) {
  ClusterEnvInput in = ReducerJob(Role::kWorker, 0);
  in.array_index = 0;
  in.array_count = 12;
  auto env = RenderClusterEnv(in);
  ExpectEnv(env, {{"COHORT_ARRAY_INDEX", "0"},
                  {"COHORT_ARRAY_COUNT", "12"},
                  {"JOB_COMPLETION_INDEX", "0"},
                  {"RANK", "1"}});
  in.array_index = 11;
  EXPECT_EQ(RenderClusterEnv(in)["JOB_COMPLETION_INDEX"], "11");
}

TEST(ClusterEnvTest, DirHelpers) {
  EXPECT_EQ(ModelDir("/a/b", ""), "/a/b/model/");
  EXPECT_EQ(ModelDir("/a/b/", "7"), "/a/b/7/model/");
  EXPECT_EQ(CheckpointDir("/a", ""), "/a/checkpoints/");
  EXPECT_EQ(TensorboardDir("/a", "t1"), "/a/t1/logs/");
  EXPECT_EQ(ModelDir("/", ""), "/model/");
}

TEST(ClusterEnvTest, ChiefOnlyJobAndIpv6Hosts) {
  ClusterEnvInput in;
  in.job_name = "solo";
  in.replicas = {{Role::kChief, 0, "fd00::1", 4000}};
  in.master_port = 4001;
  in.bootstrap_port = 4002;
  auto env = RenderClusterEnv(in);
  json cs = Parse(env, "CLUSTER_SPEC");
  EXPECT_EQ(cs["cluster"].size(), 1u);
  EXPECT_EQ(cs["cluster"]["workerpool0"], json::array({"[fd00::1]:4000"}));
  json tf = Parse(env, "TF_CONFIG");
  EXPECT_EQ(tf["cluster"], (json{{"chief", {"[fd00::1]:4000"}}}));
  ExpectEnv(env, {{"WORLD_SIZE", "1"},
                  {"MASTER_ADDR", "fd00::1"},
                  {"COHORT_BOOTSTRAP_ADDR", "[fd00::1]:4002"},
                  {"COHORT_NUM_REDUCERS", "0"}});
  // No output dir: no AIP_* variables.
  ExpectUnset(env, {"AIP_MODEL_DIR", "CLOUD_ML_HP_METRIC_FILE"});
}

}  // namespace
}  // namespace cohort
