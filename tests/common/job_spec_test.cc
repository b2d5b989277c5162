#include "common/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace cohort {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The DESIGN.md example, verbatim.
constexpr char kDesignExample[] = R"(
name: digits_ddp_001            # [A-Za-z][A-Za-z0-9_]{0,127}
output_dir: /srv/cohort/jobs/digits_ddp_001   # optional
worker_pools:
  - role: chief
    replicas: 1
    resources: {gpus: 1, cpus: 2, memory_mb: 4096}
    process:
      command: [/usr/bin/python3, train.py]
      args: [--epochs=5]
      env: {LOG_LEVEL: info}
  - role: worker
    replicas: 2
    resources: {gpus: 1}
    process: {command: [/usr/bin/python3, train.py]}
  - role: reducer
    replicas: 2
    builtin: reducer
scheduling: {timeout: 7d, max_restarts: 3, restart_job_on_worker_restart: false}
)";

// A minimal valid job to which tests append or substitute one thing.
std::string Minimal(const std::string& chief_extra = "", const std::string& tail = "") {
  return "name: j\nworker_pools:\n  - role: chief\n    process: {command: [/bin/true]}\n" +
         chief_extra + tail;
}

// Expects `yaml` to be rejected with an InvalidArgument whose message contains every `parts`.
void ExpectError(const std::string& yaml, const std::vector<std::string>& parts) {
  StatusOr<JobSpec> spec = ParseJobSpec(yaml, "job.yaml");
  ASSERT_FALSE(spec.ok()) << "accepted:\n" << yaml;
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  for (const auto& part : parts) {
    EXPECT_THAT(spec.status().message(), HasSubstr(part)) << yaml;
  }
  EXPECT_THAT(spec.status().message(), HasSubstr("job.yaml"));
}

// ExpectError for each case: the spec make(fragment) fails naming every one of its parts.
void ExpectErrors(const std::function<std::string(const std::string&)>& make,
                  const std::vector<std::pair<std::string, std::vector<std::string>>>& cases) {
  for (const auto& [fragment, parts] : cases) ExpectError(make(fragment), parts);
}

TEST(JobSpecTest, ParsesDesignExample) {
  StatusOr<JobSpec> spec = ParseJobSpec(kDesignExample);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "digits_ddp_001");
  EXPECT_EQ(spec->output_dir, "/srv/cohort/jobs/digits_ddp_001");
  ASSERT_EQ(spec->pools.size(), 3u);
  const WorkerPoolSpec& chief = spec->pools[0];
  EXPECT_EQ(chief.role, Role::kChief);
  EXPECT_EQ(chief.replicas, 1);
  EXPECT_EQ(chief.resources.gpus, 1);
  EXPECT_EQ(chief.resources.cpus, 2);
  EXPECT_EQ(chief.resources.memory_mb, 4096);
  ASSERT_TRUE(chief.process.has_value());
  EXPECT_EQ(chief.process->command, (std::vector<std::string>{"/usr/bin/python3", "train.py"}));
  EXPECT_EQ(chief.process->args, (std::vector<std::string>{"--epochs=5"}));
  EXPECT_EQ(chief.process->env.at("LOG_LEVEL"), "info");
  EXPECT_FALSE(chief.container.has_value());
  EXPECT_EQ(chief.builtin, Builtin::kNone);

  const WorkerPoolSpec& worker = spec->pools[1];
  EXPECT_EQ(worker.role, Role::kWorker);
  EXPECT_EQ(worker.replicas, 2);
  EXPECT_EQ(worker.resources.gpus, 1);
  EXPECT_EQ(worker.resources.cpus, 1);       // default
  EXPECT_EQ(worker.resources.memory_mb, 0);  // default

  const WorkerPoolSpec& reducer = spec->pools[2];
  EXPECT_EQ(reducer.role, Role::kReducer);
  EXPECT_EQ(reducer.builtin, Builtin::kReducer);
  EXPECT_FALSE(reducer.process.has_value());

  EXPECT_EQ(spec->scheduling.timeout, std::chrono::hours(24 * 7));
  EXPECT_EQ(spec->scheduling.max_restarts, 3);
  EXPECT_EQ(spec->scheduling.restart_job_on_worker_restart, false);
  EXPECT_FALSE(spec->RestartsWholeJob()) << "as the job says, though it is one group";
  EXPECT_EQ(spec->TotalReplicas(), 5);
  ASSERT_NE(spec->FindPool(Role::kReducer), nullptr);
  EXPECT_EQ(spec->FindPool(Role::kReducer)->replicas, 2);
  EXPECT_EQ(spec->FindPool(Role::kEvaluator), nullptr);
}

TEST(JobSpecTest, DefaultsForMinimalJob) {
  StatusOr<JobSpec> spec = ParseJobSpec(Minimal());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->output_dir.empty());
  EXPECT_EQ(spec->scheduling.timeout, std::chrono::hours(24 * 7));
  EXPECT_EQ(spec->scheduling.max_restarts, 3);
  EXPECT_EQ(spec->pools[0].replicas, 1);
}

TEST(JobSpecTest, PoolsAreSortedByPoolIndex) {
  StatusOr<JobSpec> spec = ParseJobSpec(R"(
name: sorted
worker_pools:
  - role: evaluator
    process: {command: [eval]}
  - role: parameter_server
    replicas: 3
    builtin: parameter_server
  - role: worker
    replicas: 4
    container: {image: "repo/train:1"}
  - role: chief
    container: {image: "repo/train:1", command: [python3], args: [a.py]}
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->pools.size(), 4u);
  EXPECT_EQ(spec->pools[0].role, Role::kChief);
  EXPECT_EQ(spec->pools[1].role, Role::kWorker);
  EXPECT_EQ(spec->pools[2].role, Role::kParameterServer);
  EXPECT_EQ(spec->pools[3].role, Role::kEvaluator);
  EXPECT_EQ(spec->pools[1].container->image, "repo/train:1");
  EXPECT_EQ(spec->pools[0].container->command, std::vector<std::string>{"python3"});
}

TEST(JobSpecTest, RolesAndPoolIndices) {
  EXPECT_EQ(PoolIndex(Role::kChief), 0);
  EXPECT_EQ(PoolIndex(Role::kWorker), 1);
  EXPECT_EQ(PoolIndex(Role::kParameterServer), 2);
  EXPECT_EQ(PoolIndex(Role::kReducer), 2);
  EXPECT_EQ(PoolIndex(Role::kEvaluator), 3);
  for (Role r :
       {Role::kChief, Role::kWorker, Role::kParameterServer, Role::kReducer, Role::kEvaluator}) {
    StatusOr<Role> back = ParseRole(RoleName(r));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, r);
  }
  EXPECT_FALSE(ParseRole("ps").ok());
  EXPECT_EQ(BuiltinName(Builtin::kNone), "");
  EXPECT_EQ(BuiltinName(Builtin::kReducer), "reducer");
  EXPECT_EQ(BuiltinName(Builtin::kParameterServer), "parameter_server");
}

TEST(JobSpecTest, BuiltinRolesMayAlsoRunUserCode) {
  EXPECT_TRUE(ParseJobSpec(Minimal("", "  - role: reducer\n    process: {command: [r]}\n")).ok());
  EXPECT_TRUE(
      ParseJobSpec(Minimal("", "  - role: parameter_server\n    container: {image: ps}\n")).ok());
}

TEST(JobSpecTest, NameRules) {
  EXPECT_TRUE(ParseJobSpec("name: a\nworker_pools: [{role: chief, process: {command: [x]}}]").ok());
  EXPECT_TRUE(
      ParseJobSpec("name: A_1_b\nworker_pools: [{role: chief, process: {command: [x]}}]").ok());
  // Hyphens are allowed after the first letter (issue 16 part 4).
  EXPECT_TRUE(
      ParseJobSpec("name: my-job-2\nworker_pools: [{role: chief, process: {command: [x]}}]").ok());
  std::string longest(128, 'a');
  EXPECT_TRUE(
      ParseJobSpec("name: " + longest + "\nworker_pools: [{role: chief, process: {command: [x]}}]")
          .ok());
  for (std::string bad : std::vector<std::string>{"1abc", "_abc", "-ab", "a.b", "'a b'", "''",
                                                  std::string(129, 'a')}) {
    ExpectError("name: " + bad + "\nworker_pools: [{role: chief, process: {command: [x]}}]",
                {"name:", "not a valid job name"});
  }
  ExpectError("worker_pools: [{role: chief, process: {command: [x]}}]", {"name: required"});
}

TEST(JobSpecTest, NamePrefix) {
  const std::string pools = "worker_pools: [{role: chief, process: {command: [x]}}]\n";
  auto spec = ParseJobSpec("name_prefix: sweep-lr\n" + pools);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "");
  EXPECT_EQ(spec->name_prefix, "sweep-lr");
  // Canonical YAML keeps the prefix.
  auto again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);
  ExpectError("name: a\nname_prefix: b\n" + pools, {"name", "not both"});
  ExpectError("name_prefix: 9x\n" + pools, {"name_prefix:", "not a valid name prefix"});
  ExpectError("name_prefix: " + std::string(120, 'a') + "\n" + pools,
              {"name_prefix:", "not a valid name prefix"});
  EXPECT_TRUE(ParseJobSpec("name_prefix: " + std::string(119, 'a') + "\n" + pools).ok());
}

TEST(JobSpecTest, WithJobNameReplacesNameAndPrefix) {
  const std::string pools = "worker_pools: [{role: chief, process: {command: [x]}}]\n";
  for (const std::string& head :
       {std::string("name: old\n"), std::string("name_prefix: p\n"), std::string()}) {
    auto text = WithJobName(head + pools, "new-name");
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    auto spec = ParseJobSpec(*text);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString() << "\n" << *text;
    EXPECT_EQ(spec->name, "new-name");
    EXPECT_EQ(spec->name_prefix, "");
  }
  EXPECT_FALSE(WithJobName("- a\n- b\n", "x").ok());
  EXPECT_FALSE(WithJobName("{unclosed", "x").ok());
  ExpectError("name: [a]\nworker_pools: [{role: chief, process: {command: [x]}}]",
              {"name: expected a string"});
}

TEST(JobSpecTest, OutputDirMustBeAbsolute) {
  EXPECT_TRUE(ParseJobSpec("output_dir: /x/y\n" + Minimal()).ok());
  ExpectError("output_dir: rel/dir\n" + Minimal(), {"output_dir: must be an absolute path"});
}

TEST(JobSpecTest, PoolCountAndRoleRules) {
  ExpectError("name: j\nworker_pools: []\n", {"worker_pools: at least one pool"});
  ExpectError("name: j\n", {"worker_pools: required"});
  ExpectError("name: j\nworker_pools: {role: chief}\n", {"worker_pools: expected a list"});
  ExpectError("name: j\nworker_pools:\n  - role: worker\n    process: {command: [x]}\n",
              {"worker_pools: a chief pool", "required"});
  ExpectError(Minimal("", "  - role: chief\n    process: {command: [x]}\n"),
              {"worker_pools[1].role", "chief appears twice"});
  ExpectError(Minimal("",
                      "  - role: worker\n    process: {command: [x]}\n"
                      "  - role: worker\n    process: {command: [x]}\n"),
              {"worker_pools[2].role", "worker appears twice"});
  ExpectError(Minimal("",
                      "  - role: reducer\n    builtin: reducer\n"
                      "  - role: parameter_server\n    builtin: parameter_server\n"),
              {"worker_pools[2].role", "share pool 2"});
  ExpectError(Minimal("", "  - role: boss\n    process: {command: [x]}\n"),
              {"worker_pools[1].role",
               "unknown role 'boss' (chief, worker, parameter_server, reducer or evaluator)"});
  ExpectError("name: j\nworker_pools:\n  - process: {command: [x]}\n",
              {"worker_pools[0].role: required"});
  // Five pools can only repeat a role; the count check comes first.
  std::string five = Minimal();
  for (const char* role : {"worker", "evaluator", "reducer", "worker"}) {
    five += std::string("  - role: ") + role + "\n    process: {command: [x]}\n";
  }
  ExpectError(five, {"worker_pools: at most 4 pools, got 5"});
}

TEST(JobSpecTest, ReplicaRules) {
  ExpectError(Minimal("    replicas: 2\n"), {"worker_pools[0].replicas", "exactly 1", "got 2"});
  ExpectError(Minimal("", "  - role: worker\n    replicas: 0\n    process: {command: [x]}\n"),
              {"worker_pools[1].replicas: must be at least 1, got 0"});
  ExpectError(Minimal("", "  - role: worker\n    replicas: 1025\n    process: {command: [x]}\n"),
              {"worker_pools[1].replicas: must be at most 1024"});
  EXPECT_TRUE(
      ParseJobSpec(
          Minimal("", "  - role: worker\n    replicas: 1024\n    process: {command: [x]}\n"))
          .ok());
  ExpectError(Minimal("    replicas: two\n"),
              {"worker_pools[0].replicas", "expected an integer", "'two'"});
  ExpectError(Minimal("    replicas: \"1\"\n"),
              {"worker_pools[0].replicas", "expected an integer"});
  ExpectError(Minimal("    replicas: 1.5\n"), {"worker_pools[0].replicas", "expected an integer"});
  ExpectError(Minimal("    replicas: 99999999999999999999\n"),
              {"worker_pools[0].replicas", "out of range"});
}

TEST(JobSpecTest, AnElasticWorkerPoolNamesItsFewestWorkersAndRestartsWhole) {
  auto with_workers = [](const std::string& pool,
                         const std::string& scheduling = "{restart_job_on_worker_restart: true}") {
    return Minimal("",
                   "  - role: worker\n    replicas: 4\n" + pool + "    process: {command: [x]}\n") +
           "scheduling: " + scheduling + "\n";
  };
  StatusOr<JobSpec> spec = ParseJobSpec(with_workers("    min_replicas: 2\n"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->MinWorkers(), 2);
  StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);
  // Zero workers: the chief alone. As many as its replicas: not elastic.
  spec = ParseJobSpec(with_workers("    min_replicas: 0\n"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->MinWorkers(), 0);
  spec = ParseJobSpec(with_workers("    min_replicas: 4\n", "{}"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->MinWorkers(), std::nullopt);
  EXPECT_EQ(ParseJobSpec(Minimal())->MinWorkers(), std::nullopt);

  ExpectError(with_workers("    min_replicas: 5\n"),
              {"worker_pools[1].min_replicas: must be in 0..4 (its replicas), got 5"});
  ExpectError(with_workers("    min_replicas: -1\n"), {"worker_pools[1].min_replicas"});
  ExpectError(with_workers("    min_replicas: two\n"),
              {"worker_pools[1].min_replicas", "expected an integer"});
  ExpectError(with_workers("    min_replicas: 2\n", "{restart_job_on_worker_restart: false}"),
              {"worker_pools[1].min_replicas: an elastic worker pool needs "
               "scheduling.restart_job_on_worker_restart: true"});
  ExpectError(Minimal("    min_replicas: 1\n"),
              {"worker_pools[0].min_replicas: only the worker pool may be elastic, not chief"});
}

TEST(JobSpecTest, ANodeSelectorNamesLabelsAsAgentsGiveThem) {
  auto with_selector = [](const std::string& selector) {
    return Minimal("    node_selector: " + selector + "\n");
  };
  StatusOr<JobSpec> spec =
      ParseJobSpec(with_selector("{gpu: h100, zone: eu-1, rack.row/n: \"7\"}"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->pools[0].node_selector,
            (NodeLabels{{"gpu", "h100"}, {"zone", "eu-1"}, {"rack.row/n", "7"}}));
  StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);
  EXPECT_TRUE(ParseJobSpec(Minimal())->pools[0].node_selector.empty());

  ExpectError(with_selector("{gpu: \"h 100\"}"),
              {"worker_pools[0].node_selector.gpu: label value 'h 100' is not valid"});
  ExpectError(with_selector("{-gpu: h100}"),
              {"worker_pools[0].node_selector.-gpu: label key '-gpu' is not valid"});
  ExpectError(with_selector("{gpu: [h100]}"), {"worker_pools[0].node_selector.gpu", "a string"});
  ExpectError(with_selector("[gpu]"), {"worker_pools[0].node_selector"});

  EXPECT_EQ(ParseNodeLabel("gpu=h100")->second, "h100");
  EXPECT_EQ(ParseNodeLabel("empty=")->second, "");
  EXPECT_THAT(ParseNodeLabel("gpu").status().message(), HasSubstr("expected KEY=VALUE"));
  EXPECT_THAT(ParseNodeLabel("g pu=1").status().message(), HasSubstr("label key"));
  EXPECT_TRUE(LabelsMatch({{"gpu", "h100"}, {"zone", "a"}}, {{"gpu", "h100"}}));
  EXPECT_FALSE(LabelsMatch({{"gpu", "h100"}}, {{"gpu", "h100"}, {"zone", "a"}}));
  EXPECT_FALSE(LabelsMatch({{"gpu", "a100"}}, {{"gpu", "h100"}}));
  EXPECT_EQ(FormatNodeLabels({{"zone", "a"}, {"gpu", "h100"}}), "gpu=h100,zone=a");
  EXPECT_EQ(*ParseNodeLabels("gpu=h100,zone=a,empty="),
            (NodeLabels{{"gpu", "h100"}, {"zone", "a"}, {"empty", ""}}));
  EXPECT_TRUE(ParseNodeLabels("")->empty());
  EXPECT_EQ(ParseNodeLabels("gpu=h100,zone").status().code(), StatusCode::kInvalidArgument);
}

// ParseNodeSelector reads what FormatNodeSelector writes, and kubectl's -l spellings (==, !=,
// spaces); each mistake names its requirement.
TEST(JobSpecTest, ParseNodeSelectorReadsKubernetesSelectorStrings) {
  NodeSelector every_kind;
  every_kind.labels = {{"kind", "gpu"}, {"rack", "r1"}};
  every_kind.requirements = {{"gpu", LabelOp::kIn, {"h100", "h200"}},
                             {"zone", LabelOp::kNotIn, {"b"}},
                             {"ib", LabelOp::kExists, {}},
                             {"maint", LabelOp::kDoesNotExist, {}},
                             {"nvidia.com/gpu.memory", LabelOp::kGt, {"40000"}},
                             {"nvidia.com/gpu.memory", LabelOp::kLt, {"-1"}}};
  const std::string text = FormatNodeSelector(every_kind);
  StatusOr<NodeSelector> parsed = ParseNodeSelector(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, every_kind) << text;
  EXPECT_EQ(FormatNodeSelector(*parsed), text);

  StatusOr<NodeSelector> spelled =
      ParseNodeSelector(" rack == r1 , gpu  in ( h200, h100,h200 ),zone!=b, !maint ");
  ASSERT_TRUE(spelled.ok()) << spelled.status().ToString();
  EXPECT_EQ(FormatNodeSelector(*spelled), "rack=r1,gpu in (h100,h200),zone notin (b),!maint");
  EXPECT_TRUE(spelled->Matches({{"rack", "r1"}, {"gpu", "h100"}}));
  EXPECT_FALSE(spelled->Matches({{"rack", "r1"}, {"gpu", "h100"}, {"zone", "b"}}));
  EXPECT_FALSE(spelled->Matches({{"rack", "r2"}, {"gpu", "h100"}}));
  EXPECT_TRUE(ParseNodeSelector("")->empty());
  EXPECT_TRUE(ParseNodeSelector("  ")->empty());
  EXPECT_EQ(ParseNodeSelector("rack=")->labels, (NodeLabels{{"rack", ""}}));

  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"rack=r1,", "'': an empty requirement"},
           {"gpu in (a", "a '(' without its ')'"},
           {"gpu in a)", "a ')' without its '('"},
           {"gpu in ((a))", "nested parentheses"},
           {"gpu among (a)", "expected KEY in (VALUES) or KEY notin (VALUES)"},
           {"gpu in ()", "no values in the parentheses"},
           {"gpu in (a) x", "expected ')' at the end"},
           {"mem>big", "expected an integer after >"},
           {"rack!r1", "expected =, !=, in, notin, < or >"},
           {"rack=r1,rack=r2", "label 'rack' asked to be both 'r1' and 'r2'"},
           {"-rack", "label key '-rack' is not valid"},
           {"rack=r 1", "label value 'r 1' is not valid"},
           {"!", "label key '' is not valid"}}) {
    StatusOr<NodeSelector> refused = ParseNodeSelector(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find(why), std::string::npos)
        << bad << ": " << refused.status().message();
    EXPECT_EQ(refused.status().message().rfind("selector '" + bad + "'", 0), 0u)
        << refused.status().message();
  }
  // The coordinator matches what clients send against every node: a long one is refused by its
  // length, before it is read (and not quoted back).
  std::string fits = "k0";
  for (int i = 1; fits.size() + 7 <= kMaxNodeSelectorBytes; ++i) fits += ",k" + std::to_string(i);
  StatusOr<NodeSelector> taken = ParseNodeSelector(fits);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_GT(taken->requirements.size(), 500u);
  const std::string too_long = fits + std::string(kMaxNodeSelectorBytes, ' ');
  StatusOr<NodeSelector> refused = ParseNodeSelector(too_long);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "selector: at most 4096 bytes, got " + std::to_string(too_long.size()));
}

// node_affinity takes Kubernetes' matchExpressions (In, NotIn, Exists, DoesNotExist, Gt, Lt); In's
// values are kept sorted and distinct, the canonical YAML round-trips them, and each mistake is
// named.
TEST(JobSpecTest, NodeAffinityTakesKubernetesExpressions) {
  auto with_affinity = [](const std::string& affinity) {
    return Minimal("    node_selector: {kind: gpu}\n    node_affinity: " + affinity + "\n");
  };
  StatusOr<JobSpec> spec = ParseJobSpec(with_affinity(
      "[{key: gpu, operator: In, values: [h200, h100, h200]}, {key: zone, operator: NotIn, "
      "values: [b]}, {key: ib, operator: Exists}, {key: maint, operator: DoesNotExist}]"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const WorkerPoolSpec& pool = spec->pools[0];
  ASSERT_EQ(pool.node_affinity.size(), 4u);
  EXPECT_EQ(pool.node_affinity[0].values, (std::vector<std::string>{"h100", "h200"}));
  EXPECT_EQ(pool.node_affinity[1].op, LabelOp::kNotIn);
  EXPECT_EQ(pool.node_affinity[2].op, LabelOp::kExists);
  EXPECT_EQ(pool.node_affinity[3].op, LabelOp::kDoesNotExist);
  StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);
  const NodeSelector selector = pool.Selector();
  EXPECT_EQ(FormatNodeSelector(selector), "kind=gpu,gpu in (h100,h200),zone notin (b),ib,!maint");
  EXPECT_EQ(NodeSelectorFields(selector), "node_selector, node_affinity");
  EXPECT_TRUE(selector.Matches({{"kind", "gpu"}, {"gpu", "h200"}, {"ib", "1"}}));
  EXPECT_FALSE(selector.Matches({{"kind", "gpu"}, {"gpu", "h200"}}));  // no ib
  EXPECT_FALSE(selector.Matches({{"kind", "gpu"}, {"gpu", "a100"}, {"ib", "1"}}));
  EXPECT_FALSE(selector.Matches({{"kind", "gpu"}, {"gpu", "h100"}, {"ib", "1"}, {"zone", "b"}}));
  EXPECT_FALSE(selector.Matches({{"kind", "gpu"}, {"gpu", "h100"}, {"ib", "1"}, {"maint", ""}}));
  EXPECT_FALSE(selector.Matches({{"gpu", "h100"}, {"ib", "1"}}));  // node_selector's kind

  const std::string at = "worker_pools[0].node_affinity[0]";
  ExpectError(with_affinity("[{key: gpu, operator: Among, values: [a]}]"),
              {at + ".operator: unknown operator 'Among' (In, NotIn, Exists, DoesNotExist, Gt or "
                    "Lt)"});
  ExpectError(with_affinity("[{key: gpu, operator: In}]"),
              {at + ".values: In needs at least one value"});
  ExpectError(with_affinity("[{key: gpu, operator: Exists, values: [a]}]"),
              {at + ".values: Exists takes no values"});
  ExpectError(with_affinity("[{key: -gpu, operator: Exists}]"),
              {at + ".key: label key '-gpu' is not valid"});
  ExpectError(with_affinity("[{key: gpu, operator: In, values: [\"h 100\"]}]"),
              {at + ".values: label value 'h 100' is not valid"});
  ExpectError(with_affinity("[{operator: Exists}]"), {at + ".key: required"});
  ExpectError(with_affinity("[{key: gpu}]"), {at + ".operator: required"});
  ExpectError(with_affinity("[{key: gpu, operator: In, value: [a]}]"), {at, "value"});
  ExpectError(with_affinity("{key: gpu}"), {"worker_pools[0].node_affinity: expected a list"});
  ExpectError(with_affinity("[{key: mem, operator: Gt, values: [big]}]"),
              {at + ".values: Gt needs exactly one value, an integer"});
  ExpectError(with_affinity("[{key: mem, operator: Lt, values: [\"1\", \"2\"]}]"),
              {at + ".values: Lt needs exactly one value, an integer"});

  // Gt and Lt compare integers (GPU feature discovery's nvidia.com/gpu.memory in MiB): a node
  // whose value is not one does not match.
  StatusOr<JobSpec> big = ParseJobSpec(
      Minimal("    node_affinity: [{key: nvidia.com/gpu.memory, operator: Gt, values: "
              "[\"40000\"]}, {key: nvidia.com/gpu.memory, operator: Lt, values: [\"90000\"]}]\n"));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  const NodeSelector memory = big->pools[0].Selector();
  EXPECT_EQ(FormatNodeSelector(memory), "nvidia.com/gpu.memory>40000,nvidia.com/gpu.memory<90000");
  EXPECT_EQ(NodeSelectorFields(memory), "node_affinity");
  EXPECT_TRUE(memory.Matches({{"nvidia.com/gpu.memory", "81559"}}));
  EXPECT_FALSE(memory.Matches({{"nvidia.com/gpu.memory", "40000"}}));
  EXPECT_FALSE(memory.Matches({{"nvidia.com/gpu.memory", "143771"}}));
  EXPECT_FALSE(memory.Matches({{"nvidia.com/gpu.memory", "80GB"}}));
  EXPECT_FALSE(memory.Matches({}));
  EXPECT_EQ(LabelInteger("-3"), -3);
  EXPECT_EQ(LabelInteger(""), std::nullopt);
  EXPECT_EQ(LabelInteger("1.5"), std::nullopt);
}

// scheduling.after names the jobs to run after, each with what it must end as: distinct job
// names, kept in order, round-tripped.
TEST(JobSpecTest, SchedulingAfterNamesJobsAndConditions) {
  auto with_after = [](const std::string& after) {
    return "name: eval\nworker_pools:\n  - role: chief\n    process: {command: [/bin/true]}\n"
           "scheduling: {after: " +
           after + "}\n";
  };
  using Deps = std::vector<JobDependency>;
  const JobDependency train{"train", AfterCondition::kSucceeded};
  const JobDependency prep{"prep", AfterCondition::kSucceeded};
  StatusOr<JobSpec> spec = ParseJobSpec(with_after("[train, prep]"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.after, (Deps{train, prep}));
  StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);

  // JOB:CONDITION, in flow and block lists alike; written back the same way.
  spec = ParseJobSpec(with_after("[train:failed, prep:ended, data:succeeded]"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const Deps conditions{{"train", AfterCondition::kFailed},
                        {"prep", AfterCondition::kEnded},
                        {"data", AfterCondition::kSucceeded}};
  EXPECT_EQ(spec->scheduling.after, conditions);
  EXPECT_NE(JobSpecToYaml(*spec).find("train:failed"), std::string::npos);
  again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);
  spec = ParseJobSpec(
      "name: eval\nworker_pools:\n  - role: chief\n    process: {command: [/bin/true]}\n"
      "scheduling:\n  after:\n    - train:failed\n    - prep:ended\n    - data\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.after, conditions);

  ExpectError(with_after("[train, train]"), {"scheduling.after[1]: job train is named twice"});
  ExpectError(with_after("[train, train:ended]"),
              {"scheduling.after[1]: job train is named twice"});
  ExpectError(with_after("[eval]"), {"scheduling.after[0]: a job cannot run after itself"});
  ExpectError(with_after("[\"9lives\"]"),
              {"scheduling.after[0]", "'9lives' does not start with a job name"});
  ExpectError(
      with_after("[train:done]"),
      {"scheduling.after[0]", "the condition must be succeeded, failed or ended, got 'done'"});
  ExpectError(with_after("[\"train:\"]"), {"scheduling.after[0]", "got ''"});
  ExpectError(with_after("train"), {"scheduling.after", "expected a list"});

  // `cohort submit --after`: added after the file's own, each entry once.
  StatusOr<std::string> more = WithAfter(with_after("[train]"), {prep, train});
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  EXPECT_EQ(ParseJobSpec(*more)->scheduling.after, (Deps{train, prep}));
  more = WithAfter(with_after("[train]"), {{"cleanup", AfterCondition::kEnded}});
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  EXPECT_EQ(ParseJobSpec(*more)->scheduling.after,
            (Deps{train, {"cleanup", AfterCondition::kEnded}}));
  more = WithAfter(with_after("[train]"), {{"train", AfterCondition::kFailed}});
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  EXPECT_EQ(ParseJobSpec(*more).status().code(), StatusCode::kInvalidArgument);  // twice
  StatusOr<std::string> fresh = WithAfter(Minimal(), {prep});
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(ParseJobSpec(*fresh)->scheduling.after, Deps{prep});
  EXPECT_EQ(WithAfter("[1, 2]", {prep}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WithAfter(Minimal() + "scheduling: [a]\n", {prep}).status().code(),
            StatusCode::kInvalidArgument);

  // The CLI's parse of one entry.
  EXPECT_EQ(ParseJobDependency("train:ended")->when, AfterCondition::kEnded);
  EXPECT_EQ(ParseJobDependency("train")->job, "train");
  EXPECT_EQ(ParseJobDependency("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FormatJobDependency({"train", AfterCondition::kFailed}), "train:failed");
  EXPECT_EQ(FormatJobDependency(train), "train");
}

// scheduling.array (Slurm's --array): the text's forms, its limits, its canonical form; a task is
// the array's spec with its index, name, output dir and labels, and round-trips as a task.
TEST(JobSpecTest, AnArraysIndexesAndParallelismAreParsedCheckedAndWrittenBack) {
  StatusOr<ArraySpec> array = ParseArraySpec("0-3%2");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(array->indexes, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(array->parallelism, 2);
  EXPECT_FALSE(array->index.has_value());
  array = ParseArraySpec("10-20:5,1,3,2,3");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(array->indexes, (std::vector<int>{1, 2, 3, 10, 15, 20}));
  EXPECT_EQ(array->parallelism, 0);
  EXPECT_EQ(FormatArraySpec(*array), "1-3,10,15,20");
  EXPECT_EQ(FormatArraySpec(*ParseArraySpec("7")), "7");
  EXPECT_EQ(ParseArraySpec("0-999")->indexes.size(), kMaxArrayTasks);
  // A step past INT_MAX from the last index ends the range, as any step beyond it does.
  EXPECT_EQ(ParseArraySpec("99999-99999:2147483647")->indexes, (std::vector<int>{99999}));
  EXPECT_EQ(ParseArraySpec("5-7:2147483647,6")->indexes, (std::vector<int>{5, 6}));
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "no indexes"},
      {"%4", "no indexes"},
      {"0-9%0", "parallelism after % must be a whole number >= 1"},
      {"0-9%x", "parallelism"},
      {"0-9:0", "step after : must be a whole number >= 1"},
      {"1,,2", "an empty item"},
      {"5-2", "'5-2' ends before it starts"},
      {"-1", "'-1' is not N, N-M or N-M:STEP"},
      {"a-b", "is not N, N-M or N-M:STEP"},
      {"0-1000", "at most 1000 tasks"},
      {"100000", "indexes must be in 0..99999"},
      {"0-99999999999", "is not N, N-M or N-M:STEP"},
  };
  for (const auto& [text, why] : bad) {
    StatusOr<ArraySpec> refused = ParseArraySpec(text);
    ASSERT_FALSE(refused.ok()) << "accepted '" << text << "'";
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(refused.status().message(), HasSubstr(why)) << text;
    EXPECT_THAT(refused.status().message(), HasSubstr("0-99%8")) << text;  // says the form
  }

  // In a job file, and as `cohort submit --array` sets it.
  StatusOr<JobSpec> spec = ParseJobSpec(Minimal("", "scheduling: {array: \"0-3%2\"}\n"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->IsArray());
  EXPECT_FALSE(spec->IsArrayTask());
  EXPECT_EQ(spec->scheduling.array, *ParseArraySpec("0-3%2"));
  StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);
  SubmitEdits edits;
  edits.array = "1,5%1";
  StatusOr<std::string> edited = ApplySubmitEdits(Minimal(), edits);
  ASSERT_TRUE(edited.ok()) << edited.status().ToString();
  EXPECT_EQ(ParseJobSpec(*edited)->scheduling.array, *ParseArraySpec("1,5%1"));
  edits.array = "9-1";
  EXPECT_THAT(ParseJobSpec(*ApplySubmitEdits(Minimal(), edits)).status().message(),
              HasSubstr("scheduling.array"));

  // A task: its name, output dir and labels; written back as a task, its labels the parser's.
  spec = ParseJobSpec(
      "name: sweep\noutput_dir: /out/sweep\nlabels: {team: vision}\nworker_pools:\n"
      "  - role: chief\n    process: {command: [/bin/true]}\nscheduling: {array: \"0-3%2\"}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const JobSpec task = ArrayTask(*spec, 2);
  EXPECT_EQ(task.name, "sweep-2");
  EXPECT_EQ(task.output_dir, "/out/sweep/2");
  EXPECT_TRUE(task.IsArrayTask());
  EXPECT_FALSE(task.IsArray());
  EXPECT_EQ(task.ArrayName(), "sweep");
  EXPECT_EQ(
      task.labels,
      (NodeLabels{{"cohort/array", "sweep"}, {"cohort/array-index", "2"}, {"team", "vision"}}));
  const std::string task_yaml = JobSpecToYaml(task);
  EXPECT_THAT(task_yaml, Not(HasSubstr("cohort/"))) << task_yaml;
  again = ParseJobSpec(task_yaml);
  ASSERT_TRUE(again.ok()) << again.status().ToString() << task_yaml;
  EXPECT_EQ(*again, task);
  // And back from the task to its array (`cohort status ARRAY --spec`), also for an array whose
  // output dir is the default (none given).
  EXPECT_EQ(ArrayOfTask(*again), *spec);
  JobSpec bare = *spec;
  bare.output_dir.clear();
  EXPECT_EQ(ArrayOfTask(ArrayTask(bare, 3)), bare);

  // What is refused: an index of no array or off its set, a task misnamed, a user's cohort/
  // label, a name too long for the tasks' label.
  const std::string chief = "worker_pools:\n  - role: chief\n    process: {command: [/bin/true]}\n";
  ExpectError("name: j-1\n" + chief + "scheduling: {array_index: 1}\n",
              {"scheduling.array_index: only a task of an array has one"});
  ExpectError("name: j-7\n" + chief + "scheduling: {array: \"0-3\", array_index: 7}\n",
              {"scheduling.array_index: 7 is not an index of scheduling.array '0-3'"});
  ExpectError("name: j\n" + chief + "scheduling: {array: \"0-3\", array_index: 1}\n",
              {"name: task 1 of an array is named <array>-1"});
  ExpectError("name: j\nlabels: {cohort/array: j}\n" + chief,
              {"labels: 'cohort/array': keys under cohort/ are Cohort's own"});
  ExpectError("name: " + std::string(64, 'a') + "\n" + chief + "scheduling: {array: \"0-3\"}\n",
              {"name: an array's name is at most 63 characters"});
  ExpectError(
      "name_prefix: " + std::string(60, 'a') + "\n" + chief + "scheduling: {array: \"0-3\"}\n",
      {"name_prefix: an array's name is at most 63 characters"});
  ExpectError(Minimal("", "scheduling: {array: \"0-3%\"}\n"), {"scheduling.array", "parallelism"});
}

// preferred_node_affinity: weighted terms of one expression or of several (match_expressions,
// all of which must hold), checked as node_affinity's are, round-tripped; a node is worth the
// weights of the terms its labels satisfy.
TEST(JobSpecTest, PreferredNodeAffinity) {
  const std::string pool =
      "    preferred_node_affinity:\n"
      "      - {weight: 80, key: gpu, operator: In, values: [h100, h200]}\n"
      "      - {weight: 20, key: zone, operator: NotIn, values: [b]}\n"
      "      - weight: 5\n"
      "        match_expressions:\n"
      "          - {key: gpu, operator: In, values: [a100]}\n"
      "          - {key: zone, operator: In, values: [a]}\n";
  StatusOr<JobSpec> spec = ParseJobSpec(Minimal(pool));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const auto& terms = spec->pools[0].preferred_node_affinity;
  ASSERT_EQ(terms.size(), 3u);
  EXPECT_EQ(terms[0].weight, 80);
  ASSERT_EQ(terms[0].requirements.size(), 1u);
  EXPECT_EQ(terms[0].requirements[0].values, (std::vector<std::string>{"h100", "h200"}));
  ASSERT_EQ(terms[2].requirements.size(), 2u);
  EXPECT_EQ(terms[2].requirements[1].key, "zone");
  StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << JobSpecToYaml(*spec);
  EXPECT_EQ(*again, *spec);
  EXPECT_EQ(PreferenceScore(terms, {{"gpu", "h100"}}), 100);
  EXPECT_EQ(PreferenceScore(terms, {{"gpu", "h100"}, {"zone", "b"}}), 80);
  EXPECT_EQ(PreferenceScore(terms, {{"gpu", "a100"}}), 20);
  EXPECT_EQ(PreferenceScore(terms, {{"gpu", "a100"}, {"zone", "a"}}), 25) << "both expressions";
  EXPECT_EQ(PreferenceScore(terms, {{"gpu", "a100"}, {"zone", "b"}}), 0);

  ExpectError(Minimal("    preferred_node_affinity: [{key: gpu, operator: Exists}]\n"),
              {"worker_pools[0].preferred_node_affinity[0].weight: required"});
  ExpectError(Minimal("    preferred_node_affinity: [{weight: 0, key: gpu, operator: Exists}]\n"),
              {"worker_pools[0].preferred_node_affinity[0].weight: must be in 1..100, got 0"});
  ExpectError(Minimal("    preferred_node_affinity: [{weight: 5, key: gpu, operator: In}]\n"),
              {"worker_pools[0].preferred_node_affinity[0].values: In needs at least one value"});
  ExpectError(Minimal("    preferred_node_affinity: [{weight: 5, key: gpu, op: In}]\n"),
              {"preferred_node_affinity[0].op", "unknown key"});
  ExpectError(Minimal("    preferred_node_affinity: {weight: 5}\n"),
              {"preferred_node_affinity", "expected a list"});
  ExpectError(Minimal("    preferred_node_affinity: [{weight: 5}]\n"),
              {"worker_pools[0].preferred_node_affinity[0].key: required"});
  ExpectError(Minimal("    preferred_node_affinity: [{weight: 5, key: gpu, operator: Exists,\n"
                      "      match_expressions: [{key: zone, operator: Exists}]}]\n"),
              {"worker_pools[0].preferred_node_affinity[0]", "or match_expressions, not both"});
  ExpectError(Minimal("    preferred_node_affinity: [{weight: 5, match_expressions: []}]\n"),
              {"preferred_node_affinity[0].match_expressions: at least one expression"});
  ExpectError(Minimal("    preferred_node_affinity: [{weight: 5, match_expressions: [\n"
                      "      {key: gpu, operator: Exists}, {key: zone, operator: In}]}]\n"),
              {"worker_pools[0].preferred_node_affinity[0].match_expressions[1].values: In needs "
               "at least one value"});
  ExpectError(Minimal("    preferred_node_affinity: [{weight: 5, match_expressions: [\n"
                      "      {key: gpu, operator: Exists, weight: 3}]}]\n"),
              {"match_expressions[0].weight", "unknown key"});
  std::string many = "    preferred_node_affinity: [{weight: 5, match_expressions: [";
  for (int i = 0; i < 40; ++i) many += "{key: k" + std::to_string(i) + ", operator: Exists},";
  many += "]}]\n";
  ExpectError(Minimal(many), {"match_expressions: at most 32 expressions, got 40"});
}

// one_per_node: a pool's replicas each on a node of their own; round-tripped.
TEST(JobSpecTest, OnePerNode) {
  const std::string yaml =
      "name: j\nworker_pools:\n  - role: chief\n    process: {command: [/bin/true]}\n"
      "  - role: reducer\n    replicas: 4\n    one_per_node: true\n    builtin: reducer\n";
  StatusOr<JobSpec> spec = ParseJobSpec(yaml);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_FALSE(spec->pools[0].one_per_node);
  EXPECT_TRUE(spec->pools[1].one_per_node);
  StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);
  ExpectError(Minimal("    one_per_node: maybe\n"), {"worker_pools[0].one_per_node"});
}

// scheduling.hold: submitted SUSPENDED; round-tripped; `cohort submit --hold` sets it.
TEST(JobSpecTest, SchedulingHold) {
  StatusOr<JobSpec> spec = ParseJobSpec(Minimal() + "scheduling: {hold: true}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->scheduling.hold);
  StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->scheduling.hold);
  EXPECT_FALSE(ParseJobSpec(Minimal())->scheduling.hold);
  ExpectError(Minimal() + "scheduling: {hold: later}\n", {"scheduling.hold"});

  for (const std::string& text :
       {Minimal(), Minimal() + "scheduling: {queue: q}\n", Minimal() + "scheduling:\n"}) {
    StatusOr<std::string> held = WithHold(text);
    ASSERT_TRUE(held.ok()) << held.status().ToString();
    StatusOr<JobSpec> parsed = ParseJobSpec(*held);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << *held;
    EXPECT_TRUE(parsed->scheduling.hold) << *held;
  }
  EXPECT_EQ(ParseJobSpec(*WithHold(Minimal() + "scheduling: {queue: q}\n"))->scheduling.queue, "q");
  EXPECT_EQ(WithHold(Minimal() + "scheduling: 3\n").status().code(), StatusCode::kInvalidArgument);
}

// ApplySubmitEdits: the three edits at once, on YAML or on JSON text (the Python client sends a
// dict as JSON); nothing to edit leaves the text as it is; a bad name is named.
TEST(JobSpecTest, ApplySubmitEditsMakesTheEditsOfSubmitsFlags) {
  SubmitEdits edits;
  EXPECT_TRUE(edits.empty());
  EXPECT_EQ(*ApplySubmitEdits("not: [parsed", edits), "not: [parsed");
  edits.name = "renamed";
  edits.after = {{"prep", AfterCondition::kSucceeded}, {"eval", AfterCondition::kEnded}};
  edits.hold = true;
  const std::string json =
      R"({"name_prefix": "p", "worker_pools": [{"role": "chief", "process": {"command": )"
      R"(["/bin/true"]}}], "scheduling": {"after": ["prep"], "max_restarts": 1}})";
  for (const std::string& text : {Minimal(), json}) {
    StatusOr<std::string> edited = ApplySubmitEdits(text, edits);
    ASSERT_TRUE(edited.ok()) << edited.status().ToString();
    StatusOr<JobSpec> spec = ParseJobSpec(*edited);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString() << "\n" << *edited;
    EXPECT_EQ(spec->name, "renamed");
    EXPECT_TRUE(spec->name_prefix.empty());
    EXPECT_EQ(spec->scheduling.after, edits.after);
    EXPECT_TRUE(spec->scheduling.hold);
  }
  EXPECT_EQ(ParseJobSpec(*ApplySubmitEdits(json, edits))->scheduling.max_restarts, 1);
  edits.name = "no spaces";
  StatusOr<std::string> bad = ApplySubmitEdits(Minimal(), edits);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("name: 'no spaces' is not a valid job name"),
            std::string::npos)
      << bad.status().message();
}

// `cohort submit --env K=V -- ARGS`: every pool that runs a command (a process or a container)
// gets the env over its own and the args after its own; a builtin reducer takes neither.
TEST(JobSpecTest, SubmitEnvAndArgsGoToEveryPoolThatRunsACommand) {
  const std::string text =
      "name: j\nworker_pools:\n"
      "  - role: chief\n    process: {command: [/bin/train], args: [--epochs=3], env: {LR: "
      "'0.1', KEEP: kept}}\n"
      "  - role: worker\n    replicas: 2\n    container: {image: /images/trainer}\n"
      "  - role: reducer\n    builtin: reducer\n";
  SubmitEdits edits;
  edits.env = {{"LR", "3e-4"}, {"SEED", "7"}, {"EMPTY", ""}};
  edits.args = {"--lr=3e-4", "a b"};
  EXPECT_FALSE(edits.empty());
  StatusOr<std::string> edited = ApplySubmitEdits(text, edits);
  ASSERT_TRUE(edited.ok()) << edited.status().ToString();
  StatusOr<JobSpec> spec = ParseJobSpec(*edited);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString() << "\n" << *edited;
  const WorkerPoolSpec* chief = spec->FindPool(Role::kChief);
  const WorkerPoolSpec* worker = spec->FindPool(Role::kWorker);
  const WorkerPoolSpec* reducer = spec->FindPool(Role::kReducer);
  ASSERT_TRUE(chief && worker && reducer && chief->process && worker->container);
  EXPECT_EQ(chief->process->env,
            (std::map<std::string, std::string>{
                {"EMPTY", ""}, {"KEEP", "kept"}, {"LR", "3e-4"}, {"SEED", "7"}}));
  EXPECT_EQ(chief->process->args, (std::vector<std::string>{"--epochs=3", "--lr=3e-4", "a b"}));
  EXPECT_EQ(worker->container->env,
            (std::map<std::string, std::string>{{"EMPTY", ""}, {"LR", "3e-4"}, {"SEED", "7"}}));
  EXPECT_EQ(worker->container->args, (std::vector<std::string>{"--lr=3e-4", "a b"}));
  EXPECT_FALSE(reducer->process || reducer->container);

  // What cannot take them is named.
  auto error = [](const StatusOr<std::string>& s) { return s.ok() ? "" : s.status().message(); };
  EXPECT_EQ(error(WithEnv(text, {{"1BAD", "x"}})),
            "--env: '1BAD' is not an environment variable's name (must match "
            "[A-Za-z_][A-Za-z0-9_]*)");
  const std::string reducers_only =
      "name: j\nworker_pools:\n  - role: reducer\n    builtin: reducer\n";
  EXPECT_EQ(error(WithArgs(reducers_only, {"x"})),
            "-- ARGS: no pool of the job file runs a process or a container to take it");
  EXPECT_EQ(error(WithEnv(Minimal().substr(0, Minimal().find("process")) + "process: {command: "
                                                                           "[t], env: [A]}\n",
                          {{"A", "1"}})),
            "--env: the job file's worker_pools[0].process.env is not a map");
  EXPECT_EQ(error(WithArgs("name: j\nworker_pools: 3\n", {"x"})),
            "-- ARGS: the job file's worker_pools is not a list");
  edits.args.assign(kMaxSubmitEditEntries + 1, "x");
  EXPECT_EQ(error(ApplySubmitEdits(text, edits)), "env and args: at most 256 entries each");
}

// `cohort submit --label K=V`: set over the file's labels (on YAML and on JSON text), checked
// when the result is parsed; labels of another kind, or too many, are named.
TEST(JobSpecTest, SubmitLabelsGoOverTheFilesOwn) {
  SubmitEdits edits;
  edits.labels = {{"sweep", "lr"}, {"team", "vision"}};
  EXPECT_FALSE(edits.empty());
  const std::string json =
      R"({"name": "j", "labels": {"team": "speech", "keep": "kept"}, "worker_pools": )"
      R"([{"role": "chief", "process": {"command": ["/bin/true"]}}]})";
  for (const std::string& text : {Minimal(), json}) {
    StatusOr<std::string> edited = ApplySubmitEdits(text, edits);
    ASSERT_TRUE(edited.ok()) << edited.status().ToString();
    StatusOr<JobSpec> spec = ParseJobSpec(*edited);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString() << "\n" << *edited;
    NodeLabels expected = edits.labels;
    if (text == json) expected["keep"] = "kept";
    EXPECT_EQ(spec->labels, expected);
  }
  auto error = [](const StatusOr<std::string>& s) { return s.ok() ? "" : s.status().message(); };
  EXPECT_EQ(error(WithLabels(Minimal() + "labels: [a]\n", edits.labels)),
            "--label: the job file's labels is not a map");
  edits.labels = {{"team", "no spaces"}};
  StatusOr<JobSpec> bad = ParseJobSpec(*ApplySubmitEdits(Minimal(), edits));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("labels.team: label value 'no spaces' is not valid"),
            std::string::npos)
      << bad.status().message();
  edits.labels.clear();
  for (size_t i = 0; i <= kMaxJobLabels; ++i) edits.labels["k" + std::to_string(i)] = "v";
  EXPECT_EQ(error(ApplySubmitEdits(Minimal(), edits)), "labels: at most 64 labels, got 65");
}

// scheduling.required_topology / preferred_topology: a label key, one of the two, round-tripped.
TEST(JobSpecTest, SchedulingTopology) {
  StatusOr<JobSpec> spec = ParseJobSpec(Minimal() + "scheduling: {required_topology: rack}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.TopologyLevels(), std::vector<std::string>{"rack"});
  EXPECT_TRUE(spec->scheduling.preferred_topology.empty());
  StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);
  spec =
      ParseJobSpec(Minimal() + "scheduling: {preferred_topology: topology.kubernetes.io/zone}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.TopologyLevels(),
            std::vector<std::string>{"topology.kubernetes.io/zone"});
  EXPECT_EQ(*ParseJobSpec(JobSpecToYaml(*spec)), *spec);
  EXPECT_TRUE(ParseJobSpec(Minimal())->scheduling.TopologyLevels().empty());
  EXPECT_EQ(ParseJobSpec(Minimal() + "scheduling: {preferred_topology: [rack]}\n")
                ->scheduling.preferred_topology,
            std::vector<std::string>{"rack"});

  // Levels: preferred ones tightest first, then the required one; round-tripped.
  spec = ParseJobSpec(
      Minimal() + "scheduling: {preferred_topology: [nvlink, rack], required_topology: zone}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.TopologyLevels(),
            (std::vector<std::string>{"nvlink", "rack", "zone"}));
  EXPECT_EQ(*ParseJobSpec(JobSpecToYaml(*spec)), *spec) << JobSpecToYaml(*spec);

  ExpectError(Minimal() + "scheduling: {required_topology: \"-rack\"}\n",
              {"scheduling.required_topology: label key '-rack' is not valid"});
  ExpectError(Minimal() + "scheduling: {preferred_topology: [rack, \"-block\"]}\n",
              {"scheduling.preferred_topology[1]: label key '-block' is not valid"});
  ExpectError(Minimal() + "scheduling: {preferred_topology: [rack, rack]}\n",
              {"scheduling.preferred_topology[1]: rack is named twice"});
  ExpectError(Minimal() + "scheduling: {required_topology: rack, preferred_topology: rack}\n",
              {"scheduling.preferred_topology: rack is the required_topology already"});
  ExpectError(Minimal() + "scheduling: {preferred_topology: [a, b, c, d], required_topology: e}\n",
              {"at most 4 topology levels", "got 5"});
  std::string many = "[k0";
  for (int i = 1; i < 20000; ++i) many += ", k" + std::to_string(i);
  ExpectError(Minimal() + "scheduling: {preferred_topology: " + many + "]}\n",
              {"at most 4 topology levels", "got 20000"});
  ExpectError(Minimal() + "scheduling: {preferred_topology: {rack: 1}}\n",
              {"scheduling.preferred_topology"});
}

TEST(JobSpecTest, ProgramKindRules) {
  ExpectError("name: j\nworker_pools:\n  - role: chief\n",
              {"worker_pools[0]: needs exactly one of process, container or builtin, got 0"});
  ExpectError(Minimal("    container: {image: x}\n"),
              {"worker_pools[0]: needs exactly one of process, container or builtin, got 2"});
  ExpectError(Minimal("    builtin: reducer\n"), {"worker_pools[0]", "exactly one", "got 2"});
  ExpectError("name: j\nworker_pools:\n  - role: chief\n    builtin: reducer\n",
              {"worker_pools[0].builtin: reducer is not allowed for role chief"});
  ExpectError(Minimal("", "  - role: worker\n    builtin: parameter_server\n"),
              {"worker_pools[1].builtin", "not allowed for role worker"});
  ExpectError(Minimal("", "  - role: reducer\n    builtin: parameter_server\n"),
              {"worker_pools[1].builtin: parameter_server is not allowed for role reducer"});
  ExpectError(Minimal("", "  - role: parameter_server\n    builtin: reducer\n"),
              {"worker_pools[1].builtin: reducer is not allowed for role parameter_server"});
  ExpectError(Minimal("", "  - role: reducer\n    builtin: magic\n"),
              {"worker_pools[1].builtin", "unknown builtin 'magic' (reducer or parameter_server)"});
  ExpectError(Minimal("", "  - role: reducer\n    builtin: reducer\n    resources: {gpus: 1}\n"),
              {"worker_pools[1].resources.gpus", "CPUs only"});
  ExpectError("name: j\nworker_pools:\n  - role: chief\n    process: {command: []}\n",
              {"worker_pools[0].process.command: must not be empty"});
  ExpectError("name: j\nworker_pools:\n  - role: chief\n    process: {args: [a]}\n",
              {"worker_pools[0].process.command: must not be empty"});
  ExpectError("name: j\nworker_pools:\n  - role: chief\n    process: {command: [\"\"]}\n",
              {"worker_pools[0].process.command[0]: must not be empty"});
  ExpectError("name: j\nworker_pools:\n  - role: chief\n    process: {command: x}\n",
              {"worker_pools[0].process.command: expected a list of strings"});
  ExpectError("name: j\nworker_pools:\n  - role: chief\n    process: {command: [[x]]}\n",
              {"worker_pools[0].process.command[0]: expected a string, got a list"});
  ExpectError(
      "name: j\nworker_pools:\n  - role: chief\n    process: {command: [x], args: [{a: 1}]}\n",
      {"worker_pools[0].process.args[0]: expected a string, got a mapping"});
  ExpectError("name: j\nworker_pools:\n  - role: chief\n    container: {command: [x]}\n",
              {"worker_pools[0].container.image: must not be empty"});
  ExpectError("name: j\nworker_pools:\n  - role: chief\n    process: [x]\n",
              {"worker_pools[0].process: expected a mapping, got a list"});
}

TEST(JobSpecTest, EnvRules) {
  StatusOr<JobSpec> spec = ParseJobSpec(
      "name: j\nworker_pools:\n  - role: chief\n    process:\n      command: [x]\n"
      "      env: {A: 1, _B2: 2.5, C: true, D: \"s p\", E: ''}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const auto& env = spec->pools[0].process->env;
  EXPECT_EQ(env.at("A"), "1");
  EXPECT_EQ(env.at("_B2"), "2.5");
  EXPECT_EQ(env.at("C"), "true");
  EXPECT_EQ(env.at("D"), "s p");
  EXPECT_EQ(env.at("E"), "");
  ExpectError(Minimal("", "  - role: worker\n    process: {command: [x], env: {1A: x}}\n"),
              {"worker_pools[1].process.env.1A", "invalid environment variable name"});
  ExpectError(Minimal("", "  - role: worker\n    process: {command: [x], env: {A-B: x}}\n"),
              {"worker_pools[1].process.env.A-B", "invalid environment variable name"});
  ExpectError(Minimal("", "  - role: worker\n    container: {image: i, env: {A: [1]}}\n"),
              {"worker_pools[1].container.env.A", "expected a string or number, got a list"});
  ExpectError(Minimal("", "  - role: worker\n    process: {command: [x], env: [A]}\n"),
              {"worker_pools[1].process.env", "expected a mapping"});
  ExpectError(Minimal("",
                      "  - role: worker\n    process:\n      command: [x]\n      env:\n"
                      "        A: 1\n        A: 2\n"),
              {"worker_pools[1].process.env.A", "duplicate key"});
}

TEST(JobSpecTest, ResourceRules) {
  auto with_res = [](const std::string& res) { return Minimal("    resources: " + res + "\n"); };
  EXPECT_TRUE(ParseJobSpec(with_res("{gpus: 64, cpus: 1024, memory_mb: 0}")).ok());
  EXPECT_TRUE(ParseJobSpec(with_res("{gpus: 0, cpus: 0}")).ok());
  ExpectErrors(with_res,
               {
                   {"{gpus: 65}", {"worker_pools[0].resources.gpus: must be in 0..64, got 65"}},
                   {"{gpus: -1}", {"worker_pools[0].resources.gpus", "got -1"}},
                   {"{cpus: 1025}", {"worker_pools[0].resources.cpus: must be in 0..1024"}},
                   {"{cpus: -2}", {"worker_pools[0].resources.cpus"}},
                   {"{memory_mb: -1}", {"worker_pools[0].resources.memory_mb: must be at least 0"}},
                   {"{gpus: one}", {"worker_pools[0].resources.gpus: expected an integer"}},
                   {"[1]", {"worker_pools[0].resources: expected a mapping"}},
               });
}

TEST(JobSpecTest, SchedulingRules) {
  auto with_sched = [](const std::string& s) { return Minimal() + "scheduling: " + s + "\n"; };
  StatusOr<JobSpec> spec = ParseJobSpec(
      with_sched("{timeout: 90m, max_restarts: 0, restart_job_on_worker_restart: true}"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.timeout, std::chrono::minutes(90));
  EXPECT_EQ(spec->scheduling.max_restarts, 0);
  EXPECT_EQ(spec->scheduling.restart_job_on_worker_restart, true);
  spec = ParseJobSpec(with_sched("{timeout: 3600}"));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->scheduling.timeout, std::chrono::hours(1));
  EXPECT_TRUE(ParseJobSpec(with_sched("{max_restarts: 1000}")).ok());

  ExpectErrors(with_sched,
               {
                   {"{timeout: 0}", {"scheduling.timeout: must be positive"}},
                   {"{timeout: 0s}", {"scheduling.timeout"}},
                   {"{timeout: 500ms}", {"scheduling.timeout: must be at least 1s"}},
                   {"{timeout: 7 days}", {"scheduling.timeout", "invalid duration"}},
                   {"{timeout: -5s}", {"scheduling.timeout", "negative"}},
                   {"{max_restarts: 1001}", {"scheduling.max_restarts: must be in 0..1000"}},
                   {"{max_restarts: -1}", {"scheduling.max_restarts"}},
                   {"{restart_job_on_worker_restart: maybe}",
                    {"scheduling.restart_job_on_worker_restart: expected a boolean"}},
                   {"[1]", {"scheduling: expected a mapping"}},
               });
}

// Unset, restart_job_on_worker_restart follows the job's shape: the ranks of one all-reduce group
// restart together (a replaced rank cannot rejoin them), a parameter-server job's workers alone.
// What a job file says wins, and what it leaves unset stays unset through its canonical YAML.
TEST(JobSpecTest, AJobThatIsOneCollectiveGroupRestartsWholeUnlessItSaysOtherwise) {
  auto job = [&](std::vector<std::pair<std::string, int>> pools, const std::string& sched = "") {
    std::string yaml = Minimal();
    for (const auto& [role, replicas] : pools) {
      yaml += "  - role: " + role + "\n    replicas: " + std::to_string(replicas) +
              "\n    process: {command: [/bin/true]}\n";
    }
    if (!sched.empty()) yaml += "scheduling: " + sched + "\n";
    StatusOr<JobSpec> spec = ParseJobSpec(yaml);
    EXPECT_TRUE(spec.ok()) << spec.status().ToString() << "\n" << yaml;
    return spec.ok() ? *spec : JobSpec{};
  };
  struct Case {
    std::vector<std::pair<std::string, int>> pools;  // besides the chief
    bool whole;
    std::string rule;  // RestartRule, unset
  };
  const std::string group =
      "the whole job (its ranks are one group: "
      "restart_job_on_worker_restart unset)";
  for (const Case& c : std::vector<Case>{
           // one replica
           {{}, false, "the replica that fell (restart_job_on_worker_restart unset)"},
           // a chief and its evaluator
           {{{"evaluator", 1}},
            false,
            "the replica that fell (restart_job_on_worker_restart unset)"},
           {{{"worker", 1}}, true, group},  // two DDP ranks
           // MultiWorkerMirrored + evaluator
           {{{"worker", 3}, {"evaluator", 1}}, true, group + ", an evaluator alone"},
           {{{"worker", 2}, {"reducer", 2}}, true, group},  // on the Reduction Server
           // workers rejoin alone
           {{{"worker", 2}, {"parameter_server", 2}},
            false,
            "the replica that fell (a parameter-server job: restart_job_on_worker_restart unset)"},
       }) {
    JobSpec spec = job(c.pools);
    SCOPED_TRACE(JobSpecToYaml(spec));
    EXPECT_EQ(spec.scheduling.restart_job_on_worker_restart, std::nullopt);
    EXPECT_EQ(spec.IsOneCollectiveGroup(), c.whole);
    EXPECT_EQ(spec.RestartsWholeJob(), c.whole);
    EXPECT_EQ(spec.RestartRule(), c.rule);
    for (bool said : {false, true}) {
      JobSpec set = job(c.pools, std::string("{restart_job_on_worker_restart: ") +
                                     (said ? "true" : "false") + "}");
      EXPECT_EQ(set.RestartsWholeJob(), said) << "what the job says wins";
      EXPECT_EQ(set.RestartRule(), said ? "the whole job (restart_job_on_worker_restart)"
                                        : "the replica that fell (restart_job_on_worker_restart: "
                                          "false)");
      EXPECT_EQ(ParseJobSpec(JobSpecToYaml(set))->scheduling.restart_job_on_worker_restart, said);
    }
    EXPECT_EQ(JobSpecToYaml(spec).find("restart_job_on_worker_restart"), std::string::npos);
    EXPECT_EQ(ParseJobSpec(JobSpecToYaml(spec))->scheduling.restart_job_on_worker_restart,
              std::nullopt);
  }
  // An elastic worker pool changes its group's size by restarting it whole: unset is whole, and
  // false is refused.
  const std::string elastic =
      "  - role: worker\n    replicas: 4\n    min_replicas: 2\n"
      "    process: {command: [/bin/true]}\n";
  EXPECT_TRUE(ParseJobSpec(Minimal() + elastic)->RestartsWholeJob());
  StatusOr<JobSpec> refused =
      ParseJobSpec(Minimal() + elastic + "scheduling: {restart_job_on_worker_restart: false}\n");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("an elastic worker pool needs scheduling.restart_job_on_worker_restart"));
}

TEST(JobSpecTest, QueueAndPriorityNamesAreCheckedAndRoundTrip) {
  auto with_sched = [](const std::string& s) { return Minimal() + "scheduling: " + s + "\n"; };
  StatusOr<JobSpec> spec = ParseJobSpec(Minimal());
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->scheduling.queue, "default");
  EXPECT_EQ(spec->scheduling.priority, "normal");
  EXPECT_EQ(JobSpecToYaml(*spec).find("queue"), std::string::npos) << "defaults are not written";
  spec = ParseJobSpec(with_sched("{queue: team-a, priority: high}"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.queue, "team-a");
  EXPECT_EQ(spec->scheduling.priority, "high");
  auto again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);
  ExpectError(with_sched("{queue: 'a b'}"), {"scheduling.queue: 'a b' is not a queue name"});
  ExpectError(with_sched("{queue: ''}"), {"scheduling.queue"});
  ExpectError(with_sched("{priority: 9high}"), {"scheduling.priority", "not a priority class"});
  ExpectError(with_sched("{priority: [high]}"), {"scheduling.priority"});
}

TEST(JobSpecTest, HangWatchdogFields) {
  auto with_sched = [](const std::string& s) { return Minimal() + "scheduling: " + s + "\n"; };
  StatusOr<JobSpec> spec = ParseJobSpec(Minimal());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.hang_timeout.count(), 0);  // off unless asked for
  EXPECT_EQ(spec->scheduling.progress, ProgressSource::kCollective);
  EXPECT_EQ(spec->scheduling.hang_action, HangAction::kRestart);

  spec = ParseJobSpec(with_sched("{hang_timeout: 20s, progress: logs, hang_action: fail}"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.hang_timeout, std::chrono::seconds(20));
  EXPECT_EQ(spec->scheduling.progress, ProgressSource::kLogs);
  EXPECT_EQ(spec->scheduling.hang_action, HangAction::kFail);
  StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);
  spec = ParseJobSpec(with_sched("{hang_timeout: 1500ms, progress: metrics}"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.hang_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(spec->scheduling.progress, ProgressSource::kMetrics);
  // progress: gpus watches the GPUs its replicas hold: a job that asks for none is refused.
  const std::string gpus_sched = "scheduling: {hang_timeout: 30m, progress: gpus}\n";
  spec = ParseJobSpec(Minimal("    resources: {gpus: 1}\n", gpus_sched));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.progress, ProgressSource::kGpus);
  again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);
  ExpectError(Minimal("", gpus_sched),
              {"scheduling.progress: gpus watches the GPUs the job's replicas hold, and no pool "
               "asks for any (resources.gpus); use progress: logs or metrics"});

  ExpectError(with_sched("{hang_timeout: 500ms}"),
              {"scheduling.hang_timeout: must be at least 1s"});
  ExpectError(with_sched("{hang_timeout: soon}"), {"scheduling.hang_timeout", "invalid duration"});
  ExpectError(with_sched("{progress: steps}"),
              {"scheduling.progress: unknown progress source 'steps' (collective, metrics, logs or "
               "gpus)"});
  ExpectError(with_sched("{hang_action: ignore}"),
              {"scheduling.hang_action: unknown hang action 'ignore' (restart or fail)"});
}

// A job's labels: node labels' syntax, at most 64, written back as given.
TEST(JobSpecTest, LabelsAreCheckedAndRoundTrip) {
  StatusOr<JobSpec> spec = ParseJobSpec(Minimal() + "labels: {team: vision, sweep: lr-3e-4}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->labels, (NodeLabels{{"sweep", "lr-3e-4"}, {"team", "vision"}}));
  StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *spec);
  EXPECT_EQ(JobSpecToYaml(*ParseJobSpec(Minimal())).find("labels"), std::string::npos);

  ExpectError(Minimal() + "labels: {team: [a]}\n", {"labels.team: expected a string"});
  ExpectError(Minimal() + "labels: {team: a b}\n", {"labels.team: label value 'a b'"});
  ExpectError(Minimal() + "labels: {-x: a}\n", {"labels.-x: label key '-x'"});
  ExpectError(Minimal() + "labels: [team]\n", {"labels: expected a mapping"});
  std::string many = "labels: {";
  for (int i = 0; i <= 64; ++i) many += (i ? ", k" : "k") + std::to_string(i) + ": v";
  ExpectError(Minimal() + many + "}\n", {"labels: at most 64 labels, got 65"});
}

TEST(JobSpecTest, MaxWaitIsOffUnlessGivenAndRoundTrips) {
  auto with_sched = [](const std::string& s) { return Minimal() + "scheduling: " + s + "\n"; };
  StatusOr<JobSpec> spec = ParseJobSpec(Minimal());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.max_wait.count(), 0);
  EXPECT_EQ(JobSpecToYaml(*spec).find("max_wait"), std::string::npos) << "off is not written";

  for (const char* wait : {"1s", "2500ms", "30m", "2d"}) {
    spec = ParseJobSpec(with_sched(std::string("{max_wait: ") + wait + "}"));
    ASSERT_TRUE(spec.ok()) << wait << ": " << spec.status().ToString();
    EXPECT_EQ(spec->scheduling.max_wait, *ParseDuration(wait)) << wait;
    StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(*again, *spec) << wait;
  }
  spec = ParseJobSpec(with_sched("{max_wait: 0s}"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.max_wait.count(), 0);
  ExpectError(with_sched("{max_wait: 500ms}"),
              {"scheduling.max_wait: must be at least 1s (or 0: off), got 500ms"});
  ExpectError(with_sched("{max_wait: -5s}"), {"scheduling.max_wait"});
  ExpectError(with_sched("{max_wait: soon}"), {"scheduling.max_wait", "invalid duration"});
  ExpectError(with_sched("{max_wait: [1s]}"), {"scheduling.max_wait"});

  JobSpec negative = *ParseJobSpec(Minimal());
  negative.scheduling.max_wait = std::chrono::milliseconds(-1);
  Status invalid = ValidateJobSpec(negative);
  EXPECT_NE(invalid.message().find("scheduling.max_wait: must not be negative"), std::string::npos)
      << invalid.ToString();
}

TEST(JobSpecTest, FinishGraceDefaultsTo30sAndRoundTrips) {
  auto with_sched = [](const std::string& s) { return Minimal() + "scheduling: " + s + "\n"; };
  StatusOr<JobSpec> spec = ParseJobSpec(Minimal());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->scheduling.finish_grace, std::chrono::seconds(30));
  EXPECT_EQ(JobSpecToYaml(*spec).find("finish_grace"), std::string::npos)
      << "defaults are not written";

  for (const char* grace : {"0s", "2500ms", "1h"}) {
    spec = ParseJobSpec(with_sched(std::string("{finish_grace: ") + grace + "}"));
    ASSERT_TRUE(spec.ok()) << grace << ": " << spec.status().ToString();
    EXPECT_EQ(spec->scheduling.finish_grace, *ParseDuration(grace)) << grace;
    StatusOr<JobSpec> again = ParseJobSpec(JobSpecToYaml(*spec));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(*again, *spec) << grace;
  }
  ExpectError(with_sched("{finish_grace: 61m}"),
              {"scheduling.finish_grace: must be in 0s..1h, got 3660000ms"});
  ExpectError(with_sched("{finish_grace: -5s}"), {"scheduling.finish_grace"});
  ExpectError(with_sched("{finish_grace: later}"), {"scheduling.finish_grace", "invalid duration"});
  ExpectError(with_sched("{finish_grace: [1s]}"), {"scheduling.finish_grace"});
}

// ...and the key meant, where one is near (common/nearest_name.h).
TEST(JobSpecTest, UnknownKeysNameTheirPath) {
  ExpectError(Minimal("    resorces: {gpus: 1}\n"),
              {"worker_pools[0].resorces: unknown key (did you mean 'resources'?)"});
  ExpectError("nmae: j\n" + Minimal(), {"nmae: unknown key (did you mean 'name'?)"});
  ExpectError(Minimal("    resources: {gpu: 1}\n"),
              {"worker_pools[0].resources.gpu: unknown key (did you mean 'gpus'?)"});
  ExpectError(Minimal("    resources: {memory: 4096}\n"),
              {"resources.memory: unknown key (did you mean 'memory_mb'?)"});
  ExpectError("name: j\nworker_pools:\n  - role: chief\n    process: {command: [x], cmd: y}\n",
              {"worker_pools[0].process.cmd: unknown key"});
  ExpectError("name: j\nworker_pools:\n  - role: chief\n    container: {image: x, tag: y}\n",
              {"worker_pools[0].container.tag: unknown key"});
  ExpectError(Minimal() + "scheduling: {timeout: 1h, retries: 2}\n",
              {"scheduling.retries: unknown key"});
  ExpectError("name: j\nname: k\n" + Minimal().substr(8), {"job.yaml:2:1: name: duplicate key"});
}

TEST(JobSpecTest, ErrorsCarryLineNumbers) {
  StatusOr<JobSpec> spec = ParseJobSpec(Minimal("    resorces: {gpus: 1}\n"), "job.yaml");
  ASSERT_FALSE(spec.ok());
  // Line 5, column 5: the misspelt key.
  EXPECT_THAT(spec.status().message(), HasSubstr("job.yaml:5:5: worker_pools[0].resorces"));
}

TEST(JobSpecTest, MalformedYamlReportsLineAndColumn) {
  StatusOr<JobSpec> spec = ParseJobSpec("name: j\nworker_pools: [\n  {role: chief\n", "bad.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("bad.yaml:"));
  EXPECT_THAT(spec.status().message(), HasSubstr("malformed YAML"));
  spec = ParseJobSpec("name: j\n  bad: indent\n", "bad.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("bad.yaml:2:"));
  ExpectError("", {"empty job spec"});
  ExpectError("- a\n- b\n", {"expected a mapping"});
  ExpectError("just a string", {"expected a mapping"});
}

TEST(JobSpecTest, ValidateJobSpecOnBuiltSpec) {
  JobSpec spec;
  spec.name = "built";
  WorkerPoolSpec chief;
  chief.process = ProcessSpec{{"/bin/true"}, {}, {}};
  spec.pools.push_back(chief);
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec.scheduling.timeout = std::chrono::seconds(0);
  Status st = ValidateJobSpec(spec);
  EXPECT_THAT(st.message(), HasSubstr("scheduling.timeout"));
  spec.scheduling.timeout = std::chrono::seconds(10);
  spec.pools[0].process->env["bad name"] = "x";
  st = ValidateJobSpec(spec);
  EXPECT_THAT(st.message(), HasSubstr("worker_pools[0].process.env.bad name"));
}

TEST(JobSpecTest, ParseDuration) {
  using std::chrono::milliseconds;
  struct Case {
    const char* text;
    int64_t ms;
  };
  for (const Case& c :
       {Case{"7d", 7LL * 86400 * 1000}, Case{"12h", 12LL * 3600 * 1000},
        Case{"30m", 30LL * 60 * 1000}, Case{"45s", 45000}, Case{"1500ms", 1500}, Case{"10", 10000},
        Case{"0", 0}, Case{"1h30m", 5400000}, Case{" 5s ", 5000}}) {
    StatusOr<milliseconds> d = ParseDuration(c.text);
    ASSERT_TRUE(d.ok()) << c.text << ": " << d.status().ToString();
    EXPECT_EQ(d->count(), c.ms) << c.text;
  }
  for (const char* bad :
       {"", "s", "5x", "-5s", "1.5h", "10 s", "5s3", "99999999999999999999d", "106751991167301d"}) {
    StatusOr<milliseconds> d = ParseDuration(bad);
    EXPECT_FALSE(d.ok()) << bad;
    if (!d.ok()) {
      EXPECT_THAT(d.status().message(), HasSubstr("invalid duration")) << bad;
    }
  }
}

TEST(JobSpecTest, CanonicalYamlRoundTrips) {
  StatusOr<JobSpec> spec = ParseJobSpec(kDesignExample);
  ASSERT_TRUE(spec.ok());
  std::string yaml = JobSpecToYaml(*spec);
  StatusOr<JobSpec> back = ParseJobSpec(yaml, "canonical");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << yaml;
  EXPECT_TRUE(*back == *spec) << yaml;
  EXPECT_EQ(JobSpecToYaml(*back), yaml);  // canonical: a fixed point
}

TEST(JobSpecTest, RoundTripsAwkwardStrings) {
  JobSpec spec;
  spec.name = "awkward";
  spec.output_dir = "/data/with space/#hash";
  WorkerPoolSpec chief;
  chief.process = ProcessSpec{{"/bin/sh", "-c", "echo \"hi\" # not a comment: {x}"},
                              {"null", "~", "true", "123", "", "- dash", "'q'", "a\nb", "é"},
                              {{"EMPTY", ""}, {"NUL_WORD", "null"}, {"NUM", "007"}, {"T", "yes"}}};
  spec.pools.push_back(chief);
  WorkerPoolSpec worker;
  worker.role = Role::kWorker;
  worker.replicas = 3;
  worker.resources = {2, 8, 16384};
  worker.container = ContainerSpec{"registry:5000/img@sha256:abc", {}, {"--flag=[1,2]"}, {}};
  spec.pools.push_back(worker);
  WorkerPoolSpec ps;
  ps.role = Role::kParameterServer;
  ps.replicas = 2;
  ps.resources.cpus = 4;
  ps.builtin = Builtin::kParameterServer;
  spec.pools.push_back(ps);
  WorkerPoolSpec eval;
  eval.role = Role::kEvaluator;
  eval.process = ProcessSpec{{"eval"}, {}, {}};
  spec.pools.push_back(eval);
  spec.scheduling.timeout = std::chrono::seconds(3661);
  spec.scheduling.max_restarts = 0;
  spec.scheduling.restart_job_on_worker_restart = true;
  spec.scheduling.max_wait = std::chrono::minutes(90);
  ASSERT_TRUE(ValidateJobSpec(spec).ok());

  std::string yaml = JobSpecToYaml(spec);
  StatusOr<JobSpec> back = ParseJobSpec(yaml, "canonical");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << yaml;
  EXPECT_TRUE(*back == spec) << yaml;
}

TEST(JobSpecTest, StringsMustBeUtf8) {
  JobSpec spec;
  spec.name = "utf";
  WorkerPoolSpec chief;
  chief.process = ProcessSpec{{"/bin/echo"}, {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"}, {}};
  spec.pools.push_back(chief);
  ASSERT_TRUE(ValidateJobSpec(spec).ok());
  StatusOr<JobSpec> back = ParseJobSpec(JobSpecToYaml(spec));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == spec);
  for (const char* bad : {"\xff", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    spec.pools[0].process->args = {bad};
    EXPECT_THAT(ValidateJobSpec(spec).message(),
                HasSubstr("worker_pools[0].process.args[0]: is not valid UTF-8"));
  }
  spec.pools[0].process->args = {};
  spec.pools[0].process->env["A"] = "\x80";
  EXPECT_THAT(ValidateJobSpec(spec).message(),
              HasSubstr("worker_pools[0].process.env.A: is not valid UTF-8"));
  spec.pools[0].process->env.clear();
  spec.output_dir = "/\xfe";
  EXPECT_THAT(ValidateJobSpec(spec).message(), HasSubstr("output_dir: is not valid UTF-8"));
}

TEST(JobSpecTest, LoadJobSpecFromFile) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("cohort_job_spec_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path file = dir / "job.yaml";
  {
    std::ofstream out(file);
    out << kDesignExample;
  }
  StatusOr<JobSpec> spec = LoadJobSpec(file.string());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "digits_ddp_001");
  {
    std::ofstream out(file);
    out << Minimal("    replicas: 3\n");
  }
  spec = LoadJobSpec(file.string());
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr(file.string()));
  spec = LoadJobSpec((dir / "missing.yaml").string());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cohort
