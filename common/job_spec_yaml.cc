// The YAML form of a job spec (see job_spec.h and DESIGN.md "Jobs"): parsing, and the canonical
// YAML JobSpecToYaml writes.
//
// Parsing walks the yaml-cpp node tree by hand instead of using YAML::convert so that every error
// names its path ("worker_pools[0].resources.gpus") and the line it is on, unknown keys included.
// yaml-cpp throws; every call into it sits behind a try/catch that turns the exception into a
// Status, so no exception leaves this file.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "common/file_util.h"
#include "common/job_spec.h"
#include "common/yaml_reader.h"

namespace cohort {

namespace {

// YAML walking. Every helper takes the dotted path of the node it reads, for error messages.

using Reader = YamlReader;

// env: a map of name -> scalar (numbers and booleans are kept as their text).
StatusOr<std::map<std::string, std::string>> ReadEnv(const Reader& r, const YAML::Node& node,
                                                     const std::string& path) {
  COHORT_RETURN_IF_ERROR(r.CheckUserMap(node, path));
  std::map<std::string, std::string> out;
  for (const auto& kv : node) {
    std::string name = kv.first.Scalar();
    std::string child = Reader::Join(path, name);
    if (!IsValidEnvName(name)) {
      return r.Error(kv.first, child,
                     "invalid environment variable name (must match [A-Za-z_][A-Za-z0-9_]*)");
    }
    if (!kv.second.IsScalar()) {
      return r.Error(kv.second, child,
                     "expected a string or number, got " + Reader::KindName(kv.second));
    }
    out[name] = kv.second.Scalar();
  }
  return out;
}

// Fields shared by process and container blocks.
template <typename Spec>
Status ReadCommandArgsEnv(const Reader& r, const YAML::Node& node, const std::string& path,
                          Spec* spec) {
  if (Reader::Has(node, "command")) {
    COHORT_ASSIGN_OR_RETURN(spec->command, r.StringList(node["command"], path + ".command"));
  }
  if (Reader::Has(node, "args")) {
    COHORT_ASSIGN_OR_RETURN(spec->args, r.StringList(node["args"], path + ".args"));
  }
  if (Reader::Has(node, "env")) {
    COHORT_ASSIGN_OR_RETURN(spec->env, ReadEnv(r, node["env"], path + ".env"));
  }
  return Status::Ok();
}

// A map of labels (a pool's node_selector, a job's labels): string keys and values, each key once;
// ValidateJobSpec checks their syntax.
StatusOr<NodeLabels> ReadLabels(const Reader& r, const YAML::Node& node, const std::string& path) {
  COHORT_RETURN_IF_ERROR(r.CheckUserMap(node, path));
  NodeLabels labels;
  for (const auto& kv : node) {
    if (!kv.second.IsScalar()) {
      return r.Error(kv.second, Reader::Join(path, kv.first.Scalar()),
                     "expected a string, got " + Reader::KindName(kv.second));
    }
    labels[kv.first.Scalar()] = kv.second.Scalar();
  }
  return labels;
}

// One node_affinity expression: {key: K, operator: In|NotIn|Exists|DoesNotExist, values: [...]},
// its values sorted and distinct (`weighted`: a preferred term, which also has its weight, read
// by the caller).
// `preference_term`: the map is a preferred_node_affinity term, whose other keys the caller reads.
StatusOr<LabelRequirement> ReadLabelRequirement(const Reader& r, const YAML::Node& node,
                                                const std::string& path,
                                                bool preference_term = false) {
  if (!preference_term)
    COHORT_RETURN_IF_ERROR(r.CheckMap(node, path, {"key", "operator", "values"}));
  LabelRequirement req;
  COHORT_ASSIGN_OR_RETURN(req.key, r.RequiredString(node, "key", path + ".key", "a label key"));
  COHORT_ASSIGN_OR_RETURN(
      req.op, r.RequiredEnum(node, "operator", path + ".operator", kLabelOpNames, "operator"));
  if (Reader::Has(node, "values")) {
    COHORT_ASSIGN_OR_RETURN(req.values, r.StringList(node["values"], path + ".values"));
    std::sort(req.values.begin(), req.values.end());
    req.values.erase(std::unique(req.values.begin(), req.values.end()), req.values.end());
  }
  return req;
}

StatusOr<WorkerPoolSpec> ReadPool(const Reader& r, const YAML::Node& node,
                                  const std::string& path) {
  COHORT_RETURN_IF_ERROR(
      r.CheckMap(node, path,
                 {"role", "replicas", "min_replicas", "resources", "node_selector", "node_affinity",
                  "preferred_node_affinity", "one_per_node", "process", "container", "builtin"}));
  WorkerPoolSpec pool;
  if (!Reader::Has(node, "role")) {
    return r.Error(node, path + ".role",
                   "required (chief, worker, parameter_server, reducer or evaluator)");
  }
  COHORT_ASSIGN_OR_RETURN(std::string role_name, r.String(node["role"], path + ".role"));
  StatusOr<Role> role = ParseRole(role_name);
  if (!role.ok()) return r.Error(node["role"], path + ".role", role.status().message());
  pool.role = *role;

  if (Reader::Has(node, "replicas")) {
    COHORT_ASSIGN_OR_RETURN(pool.replicas, r.SmallInt(node["replicas"], path + ".replicas"));
  }
  if (Reader::Has(node, "node_selector")) {
    COHORT_ASSIGN_OR_RETURN(pool.node_selector,
                            ReadLabels(r, node["node_selector"], path + ".node_selector"));
  }
  COHORT_ASSIGN_OR_RETURN(pool.node_affinity,
                          r.List<LabelRequirement>(node, "node_affinity", path,
                                                   [&](const YAML::Node& n, const std::string& at) {
                                                     return ReadLabelRequirement(r, n, at);
                                                   }));
  COHORT_ASSIGN_OR_RETURN(
      pool.preferred_node_affinity,
      r.List<NodePreference>(
          node, "preferred_node_affinity", path,
          [&](const YAML::Node& n, const std::string& at) -> StatusOr<NodePreference> {
            COHORT_RETURN_IF_ERROR(
                r.CheckMap(n, at, {"weight", "key", "operator", "values", "match_expressions"}));
            NodePreference term;
            if (!Reader::Has(n, "match_expressions")) {
              COHORT_ASSIGN_OR_RETURN(LabelRequirement one,
                                      ReadLabelRequirement(r, n, at, /*preference_term=*/true));
              term.requirements.push_back(std::move(one));
            } else if (Reader::Has(n, "key") || Reader::Has(n, "operator") ||
                       Reader::Has(n, "values")) {
              return r.Error(n, at,
                             "give one expression (key, operator, values) or match_expressions, "
                             "not both");
            } else {
              const YAML::Node list = n["match_expressions"];
              if (list.IsSequence() && list.size() > kMaxNodeLabels) {
                return r.Error(list, at + ".match_expressions",
                               "at most " + std::to_string(kMaxNodeLabels) + " expressions, got " +
                                   std::to_string(list.size()));
              }
              COHORT_ASSIGN_OR_RETURN(
                  term.requirements,
                  r.List<LabelRequirement>(n, "match_expressions", at,
                                           [&](const YAML::Node& e, const std::string& eat) {
                                             return ReadLabelRequirement(r, e, eat);
                                           }));
              if (term.requirements.empty()) {
                return r.Error(n["match_expressions"], at + ".match_expressions",
                               "at least one expression");
              }
            }
            if (!Reader::Has(n, "weight")) return r.Error(n, at + ".weight", "required");
            COHORT_ASSIGN_OR_RETURN(term.weight, r.SmallInt(n["weight"], at + ".weight"));
            return term;
          }));
  if (Reader::Has(node, "one_per_node")) {
    COHORT_ASSIGN_OR_RETURN(pool.one_per_node,
                            r.Bool(node["one_per_node"], path + ".one_per_node"));
  }
  if (Reader::Has(node, "min_replicas")) {
    COHORT_ASSIGN_OR_RETURN(pool.min_replicas,
                            r.SmallInt(node["min_replicas"], path + ".min_replicas"));
  }

  pool.resources.cpus_given = pool.resources.memory_given = false;
  if (Reader::Has(node, "resources")) {
    const YAML::Node res = node["resources"];
    std::string rpath = path + ".resources";
    COHORT_RETURN_IF_ERROR(r.CheckMap(res, rpath, {"gpus", "cpus", "memory_mb"}));
    auto small_int = [&](const char* key, int* out) -> Status {
      if (!Reader::Has(res, key)) return Status::Ok();
      COHORT_ASSIGN_OR_RETURN(*out, r.SmallInt(res[key], rpath + "." + key));
      return Status::Ok();
    };
    COHORT_RETURN_IF_ERROR(small_int("gpus", &pool.resources.gpus));
    COHORT_RETURN_IF_ERROR(small_int("cpus", &pool.resources.cpus));
    pool.resources.cpus_given = Reader::Has(res, "cpus");
    if (Reader::Has(res, "memory_mb")) {
      COHORT_ASSIGN_OR_RETURN(pool.resources.memory_mb,
                              r.Int(res["memory_mb"], rpath + ".memory_mb"));
      pool.resources.memory_given = true;
    }
  }

  if (Reader::Has(node, "process")) {
    const YAML::Node p = node["process"];
    std::string ppath = path + ".process";
    COHORT_RETURN_IF_ERROR(r.CheckMap(p, ppath, {"command", "args", "env"}));
    ProcessSpec spec;
    COHORT_RETURN_IF_ERROR(ReadCommandArgsEnv(r, p, ppath, &spec));
    pool.process = std::move(spec);
  }
  if (Reader::Has(node, "container")) {
    const YAML::Node c = node["container"];
    std::string cpath = path + ".container";
    COHORT_RETURN_IF_ERROR(r.CheckMap(c, cpath, {"image", "command", "args", "env"}));
    ContainerSpec spec;
    if (Reader::Has(c, "image")) {
      COHORT_ASSIGN_OR_RETURN(spec.image, r.String(c["image"], cpath + ".image"));
    }
    COHORT_RETURN_IF_ERROR(ReadCommandArgsEnv(r, c, cpath, &spec));
    pool.container = std::move(spec);
  }
  if (Reader::Has(node, "builtin")) {
    COHORT_ASSIGN_OR_RETURN(pool.builtin,
                            r.Enum(node["builtin"], path + ".builtin", kBuiltinNames, "builtin"));
  }
  return pool;
}

// A time limit that is off at 0: a duration of at least 1s, or 0.
StatusOr<std::chrono::milliseconds> ReadLimit(const Reader& r, const YAML::Node& node,
                                              const std::string& path) {
  COHORT_ASSIGN_OR_RETURN(std::string text, r.String(node, path));
  StatusOr<std::chrono::milliseconds> d = ParseDuration(text);
  if (!d.ok()) return r.Error(node, path, d.status().message());
  if (d->count() > 0 && d->count() < 1000) {
    return r.Error(node, path, "must be at least 1s (or 0: off), got " + text);
  }
  return *d;
}

StatusOr<SchedulingSpec> ReadScheduling(const Reader& r, const YAML::Node& node) {
  const std::string path = "scheduling";
  COHORT_RETURN_IF_ERROR(
      r.CheckMap(node, path,
                 {"timeout", "max_restarts", "restart_job_on_worker_restart", "queue", "priority",
                  "hang_timeout", "progress", "hang_action", "finish_grace", "after", "hold",
                  "required_topology", "preferred_topology", "max_wait", "array", "array_index"}));
  SchedulingSpec s;
  if (Reader::Has(node, "timeout")) {
    COHORT_ASSIGN_OR_RETURN(std::string text, r.String(node["timeout"], path + ".timeout"));
    StatusOr<std::chrono::milliseconds> d = ParseDuration(text);
    if (!d.ok()) return r.Error(node["timeout"], path + ".timeout", d.status().message());
    if (d->count() > 0 && d->count() < 1000) {
      return r.Error(node["timeout"], path + ".timeout", "must be at least 1s, got " + text);
    }
    s.timeout = std::chrono::duration_cast<std::chrono::seconds>(*d);
  }
  if (Reader::Has(node, "max_restarts")) {
    COHORT_ASSIGN_OR_RETURN(s.max_restarts,
                            r.SmallInt(node["max_restarts"], path + ".max_restarts"));
  }
  if (Reader::Has(node, "restart_job_on_worker_restart")) {
    COHORT_ASSIGN_OR_RETURN(
        s.restart_job_on_worker_restart,
        r.Bool(node["restart_job_on_worker_restart"], path + ".restart_job_on_worker_restart"));
  }
  for (auto [key, field] : {std::pair{"queue", &s.queue}, std::pair{"priority", &s.priority},
                            std::pair{"required_topology", &s.required_topology}}) {
    if (!Reader::Has(node, key)) continue;
    COHORT_ASSIGN_OR_RETURN(*field, r.String(node[key], path + "." + key));
  }
  if (Reader::Has(node, "preferred_topology")) {
    // One key, or a list of levels.
    const YAML::Node& n = node["preferred_topology"];
    if (n.IsSequence()) {
      COHORT_ASSIGN_OR_RETURN(s.preferred_topology, r.StringList(n, path + ".preferred_topology"));
    } else {
      COHORT_ASSIGN_OR_RETURN(std::string key, r.String(n, path + ".preferred_topology"));
      if (!key.empty()) s.preferred_topology.push_back(std::move(key));
    }
  }
  for (auto [key, field] :
       {std::pair{"hang_timeout", &s.hang_timeout}, std::pair{"max_wait", &s.max_wait}}) {
    if (!Reader::Has(node, key)) continue;
    COHORT_ASSIGN_OR_RETURN(*field, ReadLimit(r, node[key], path + "." + key));
  }
  if (Reader::Has(node, "finish_grace")) {
    const YAML::Node& n = node["finish_grace"];
    COHORT_ASSIGN_OR_RETURN(std::string text, r.String(n, path + ".finish_grace"));
    StatusOr<std::chrono::milliseconds> d = ParseDuration(text);
    if (!d.ok()) return r.Error(n, path + ".finish_grace", d.status().message());
    s.finish_grace = *d;
  }
  if (Reader::Has(node, "progress")) {
    COHORT_ASSIGN_OR_RETURN(s.progress, r.Enum(node["progress"], path + ".progress",
                                               kProgressSourceNames, "progress source"));
  }
  if (Reader::Has(node, "hang_action")) {
    COHORT_ASSIGN_OR_RETURN(s.hang_action, r.Enum(node["hang_action"], path + ".hang_action",
                                                  kHangActionNames, "hang action"));
  }
  if (Reader::Has(node, "after")) {
    COHORT_ASSIGN_OR_RETURN(std::vector<std::string> entries,
                            r.StringList(node["after"], path + ".after"));
    for (size_t i = 0; i < entries.size(); ++i) {
      StatusOr<JobDependency> dependency = ParseJobDependency(entries[i]);
      if (!dependency.ok()) {
        return r.Error(node["after"][i], path + ".after[" + std::to_string(i) + "]",
                       dependency.status().message());
      }
      s.after.push_back(*std::move(dependency));
    }
  }
  if (Reader::Has(node, "hold")) {
    COHORT_ASSIGN_OR_RETURN(s.hold, r.Bool(node["hold"], path + ".hold"));
  }
  if (Reader::Has(node, "array")) {
    COHORT_ASSIGN_OR_RETURN(std::string text, r.String(node["array"], path + ".array"));
    StatusOr<ArraySpec> array = ParseArraySpec(text);
    if (!array.ok()) return r.Error(node["array"], path + ".array", array.status().message());
    s.array = *std::move(array);
  }
  if (Reader::Has(node, "array_index")) {
    COHORT_ASSIGN_OR_RETURN(int index, r.SmallInt(node["array_index"], path + ".array_index"));
    s.array.index = index;
  }
  return s;
}

StatusOr<JobSpec> ReadJob(const Reader& r, const YAML::Node& root) {
  if (!root.IsDefined() || root.IsNull()) {
    return r.Error(root, "", "empty job spec");
  }
  COHORT_RETURN_IF_ERROR(r.CheckMap(
      root, "", {"name", "name_prefix", "output_dir", "labels", "worker_pools", "scheduling"}));
  JobSpec spec;
  if (Reader::Has(root, "name_prefix")) {
    COHORT_ASSIGN_OR_RETURN(spec.name_prefix, r.String(root["name_prefix"], "name_prefix"));
    if (Reader::Has(root, "name")) {
      return r.Error(root["name"], "name", "give name or name_prefix, not both");
    }
  } else {
    if (!Reader::Has(root, "name")) return r.Error(root, "name", "required (or name_prefix)");
    COHORT_ASSIGN_OR_RETURN(spec.name, r.String(root["name"], "name"));
  }
  if (Reader::Has(root, "output_dir")) {
    COHORT_ASSIGN_OR_RETURN(spec.output_dir, r.String(root["output_dir"], "output_dir"));
  }
  if (Reader::Has(root, "labels")) {
    COHORT_ASSIGN_OR_RETURN(spec.labels, ReadLabels(r, root["labels"], "labels"));
  }
  COHORT_ASSIGN_OR_RETURN(
      spec.pools, r.RequiredList<WorkerPoolSpec>(root, "worker_pools", "at least the chief pool",
                                                 [&](const YAML::Node& n, const std::string& p) {
                                                   return ReadPool(r, n, p);
                                                 }));
  if (Reader::Has(root, "scheduling")) {
    COHORT_ASSIGN_OR_RETURN(spec.scheduling, ReadScheduling(r, root["scheduling"]));
  }
  return spec;
}

// Duration text for the canonical YAML: the largest unit that divides it exactly.
std::string FormatSeconds(std::chrono::seconds d) {
  int64_t s = d.count();
  if (s != 0 && s % 86400 == 0) return std::to_string(s / 86400) + "d";
  if (s != 0 && s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s != 0 && s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

void EmitStringList(YAML::Emitter& out, const char* key, const std::vector<std::string>& v) {
  if (v.empty()) return;
  out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const auto& s : v) out << YAML::DoubleQuoted << s;
  out << YAML::EndSeq;
}

void EmitEnv(YAML::Emitter& out, const std::map<std::string, std::string>& env) {
  if (env.empty()) return;
  out << YAML::Key << "env" << YAML::Value << YAML::BeginMap;
  for (const auto& [k, v] : env) out << YAML::Key << k << YAML::Value << YAML::DoubleQuoted << v;
  out << YAML::EndMap;
}

}  // namespace

StatusOr<JobSpec> ParseJobSpec(std::string_view yaml, std::string_view source) {
  Reader reader(source);
  COHORT_ASSIGN_OR_RETURN(JobSpec spec, ReadYamlDocument(yaml, source, [&](const YAML::Node& root) {
                            return ReadJob(reader, root);
                          }));
  // Validate in the file's own order so pool paths match the list the user wrote, then sort.
  Status st = ValidateJobSpec(spec);
  if (!st.ok()) return st.WithContext(source);
  if (spec.IsArrayTask()) {
    spec.labels[std::string(kArrayLabel)] = spec.ArrayName();
    spec.labels[std::string(kArrayIndexLabel)] = std::to_string(*spec.scheduling.array.index);
  }
  std::stable_sort(spec.pools.begin(), spec.pools.end(),
                   [](const WorkerPoolSpec& a, const WorkerPoolSpec& b) {
                     return PoolIndex(a.role) < PoolIndex(b.role);
                   });
  return spec;
}

namespace {

// The job file's scheduling map, made when it has none; kInvalidArgument when it is of another
// kind.
StatusOr<YAML::Node> SchedulingOf(YAML::Node& root) {
  if (root["scheduling"] && !root["scheduling"].IsMap() && !root["scheduling"].IsNull()) {
    return InvalidArgument("the job file's scheduling is not a YAML map of keys");
  }
  return root["scheduling"];
}

}  // namespace

StatusOr<std::string> WithJobName(std::string_view yaml, std::string_view name) {
  return EditYamlMap(yaml, "job file", [&](YAML::Node& root) {
    root.remove("name_prefix");
    root["name"] = std::string(name);
    return Status::Ok();
  });
}

StatusOr<std::string> WithAfter(std::string_view yaml, const std::vector<JobDependency>& after) {
  return EditYamlMap(yaml, "job file", [&](YAML::Node& root) -> Status {
    COHORT_ASSIGN_OR_RETURN(YAML::Node scheduling, SchedulingOf(root));
    std::vector<std::string> entries;
    const YAML::Node listed = scheduling["after"];
    if (listed && listed.IsSequence()) {
      for (const auto& n : listed) entries.push_back(n.Scalar());
    } else if (listed && !listed.IsNull()) {
      return InvalidArgument("the job file's scheduling.after is not a list");
    }
    for (const JobDependency& dependency : after) {
      std::string entry = FormatJobDependency(dependency);
      if (std::find(entries.begin(), entries.end(), entry) == entries.end()) {
        entries.push_back(std::move(entry));
      }
    }
    scheduling["after"] = entries;
    return Status::Ok();
  });
}

StatusOr<std::string> WithHold(std::string_view yaml) {
  return EditYamlMap(yaml, "job file", [&](YAML::Node& root) -> Status {
    COHORT_ASSIGN_OR_RETURN(YAML::Node scheduling, SchedulingOf(root));
    scheduling["hold"] = true;
    return Status::Ok();
  });
}

StatusOr<std::string> WithArray(std::string_view yaml, std::string_view array) {
  return EditYamlMap(yaml, "job file", [&](YAML::Node& root) -> Status {
    COHORT_ASSIGN_OR_RETURN(YAML::Node scheduling, SchedulingOf(root));
    scheduling["array"] = std::string(array);
    return Status::Ok();
  });
}

StatusOr<std::string> WithSchedulingClass(std::string_view yaml, std::string_view priority,
                                          std::string_view queue) {
  return EditYamlMap(yaml, "job file", [&](YAML::Node& root) -> Status {
    COHORT_ASSIGN_OR_RETURN(YAML::Node scheduling, SchedulingOf(root));
    if (!priority.empty()) scheduling["priority"] = std::string(priority);
    if (!queue.empty()) scheduling["queue"] = std::string(queue);
    return Status::Ok();
  });
}

namespace {

// Calls `edit` with the process or container map of every pool in the job file that has one;
// kInvalidArgument when none has, or when worker_pools, one of its entries, or its process or
// container is of another kind. `what` names the edit in errors ("--env").
Status EditCommandPools(YAML::Node& root, std::string_view what,
                        const std::function<Status(YAML::Node&, const std::string&)>& edit) {
  YAML::Node pools = root["worker_pools"];
  if (!pools || !pools.IsSequence()) {
    return InvalidArgument(std::string(what) + ": the job file's worker_pools is not a list");
  }
  size_t edited = 0;
  for (size_t i = 0; i < pools.size(); ++i) {
    YAML::Node pool = pools[i];
    const std::string path = "worker_pools[" + std::to_string(i) + "]";
    if (!pool.IsMap()) {
      return InvalidArgument(std::string(what) + ": the job file's " + path + " is not a map");
    }
    for (const char* kind : {"process", "container"}) {
      YAML::Node runs = pool[kind];
      if (!runs || runs.IsNull()) continue;
      if (!runs.IsMap()) {
        return InvalidArgument(std::string(what) + ": the job file's " + path + "." + kind +
                               " is not a map");
      }
      COHORT_RETURN_IF_ERROR(edit(runs, path + "." + kind));
      ++edited;
    }
  }
  if (edited == 0) {
    return InvalidArgument(std::string(what) +
                           ": no pool of the job file runs a process or a container to take it");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> WithEnv(std::string_view yaml,
                              const std::map<std::string, std::string>& env) {
  for (const auto& [name, value] : env) {
    if (!IsValidEnvName(name)) {
      return InvalidArgument("--env: '" + name +
                             "' is not an environment variable's name (must match "
                             "[A-Za-z_][A-Za-z0-9_]*)");
    }
  }
  return EditYamlMap(yaml, "job file", [&](YAML::Node& root) {
    return EditCommandPools(root, "--env", [&](YAML::Node& runs, const std::string& path) {
      YAML::Node vars = runs["env"];
      if (vars && !vars.IsNull() && !vars.IsMap()) {
        return InvalidArgument("--env: the job file's " + path + ".env is not a map");
      }
      for (const auto& [name, value] : env) vars[name] = value;
      return Status::Ok();
    });
  });
}

StatusOr<std::string> WithArgs(std::string_view yaml, const std::vector<std::string>& args) {
  return EditYamlMap(yaml, "job file", [&](YAML::Node& root) {
    return EditCommandPools(root, "-- ARGS", [&](YAML::Node& runs, const std::string& path) {
      YAML::Node listed = runs["args"];
      if (listed && !listed.IsNull() && !listed.IsSequence()) {
        return InvalidArgument("-- ARGS: the job file's " + path + ".args is not a list");
      }
      for (const std::string& arg : args) listed.push_back(arg);
      return Status::Ok();
    });
  });
}

StatusOr<std::string> WithLabels(std::string_view yaml, const NodeLabels& labels) {
  return EditYamlMap(yaml, "job file", [&](YAML::Node& root) -> Status {
    YAML::Node listed = root["labels"];
    if (listed && !listed.IsNull() && !listed.IsMap()) {
      return InvalidArgument("--label: the job file's labels is not a map");
    }
    for (const auto& [key, value] : labels) listed[key] = value;
    return Status::Ok();
  });
}

StatusOr<std::string> ApplySubmitEdits(std::string_view yaml, const SubmitEdits& edits) {
  std::string text(yaml);
  if (!edits.name.empty()) {
    if (!IsValidJobName(edits.name)) {
      return InvalidArgument("name: '" + edits.name +
                             "' is not a valid job name (must match [A-Za-z][A-Za-z0-9_-]{0,127})");
    }
    COHORT_ASSIGN_OR_RETURN(text, WithJobName(text, edits.name));
  }
  if (!edits.after.empty()) {
    COHORT_ASSIGN_OR_RETURN(text, WithAfter(text, edits.after));
  }
  if (edits.hold) {
    COHORT_ASSIGN_OR_RETURN(text, WithHold(text));
  }
  if (!edits.array.empty()) {
    COHORT_ASSIGN_OR_RETURN(text, WithArray(text, edits.array));
  }
  if (edits.env.size() > kMaxSubmitEditEntries || edits.args.size() > kMaxSubmitEditEntries) {
    return InvalidArgument("env and args: at most " + std::to_string(kMaxSubmitEditEntries) +
                           " entries each");
  }
  if (!edits.env.empty()) {
    COHORT_ASSIGN_OR_RETURN(text, WithEnv(text, edits.env));
  }
  if (!edits.args.empty()) {
    COHORT_ASSIGN_OR_RETURN(text, WithArgs(text, edits.args));
  }
  if (edits.labels.size() > kMaxJobLabels) {
    return InvalidArgument("labels: at most " + std::to_string(kMaxJobLabels) + " labels, got " +
                           std::to_string(edits.labels.size()));
  }
  if (!edits.labels.empty()) {
    COHORT_ASSIGN_OR_RETURN(text, WithLabels(text, edits.labels));
  }
  return text;
}

StatusOr<JobSpec> LoadJobSpec(const std::string& path) {
  COHORT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, "job file"));
  return ParseJobSpec(text, path);
}

namespace {

// `{"k": "v", ...}`, a map of labels, as the value of a key the caller wrote.
void EmitLabels(YAML::Emitter& out, const NodeLabels& labels) {
  out << YAML::Flow << YAML::BeginMap;
  for (const auto& [k, v] : labels) {
    out << YAML::Key << YAML::DoubleQuoted << k << YAML::Value << YAML::DoubleQuoted << v;
  }
  out << YAML::EndMap;
}

// A node_affinity expression's keys, into a map the caller opened.
void EmitLabelRequirement(YAML::Emitter& out, const LabelRequirement& req) {
  out << YAML::Key << "key" << YAML::Value << YAML::DoubleQuoted << req.key;
  out << YAML::Key << "operator" << YAML::Value << std::string(NameIn(kLabelOpNames, req.op, ""));
  if (!req.values.empty()) {
    out << YAML::Key << "values" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const auto& v : req.values) out << YAML::DoubleQuoted << v;
    out << YAML::EndSeq;
  }
}

// `key: [{key, operator, values}, ...]`.
void EmitLabelRequirements(YAML::Emitter& out, const char* key,
                           const std::vector<LabelRequirement>& reqs) {
  out << YAML::Key << key << YAML::Value << YAML::BeginSeq;
  for (const LabelRequirement& req : reqs) {
    out << YAML::Flow << YAML::BeginMap;
    EmitLabelRequirement(out, req);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

}  // namespace

std::string JobSpecToYaml(const JobSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  if (spec.name.empty() && !spec.name_prefix.empty()) {
    out << YAML::Key << "name_prefix" << YAML::Value << YAML::DoubleQuoted << spec.name_prefix;
  } else {
    out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << spec.name;
  }
  if (!spec.output_dir.empty()) {
    out << YAML::Key << "output_dir" << YAML::Value << YAML::DoubleQuoted << spec.output_dir;
  }
  // A task's array labels are the parser's, from its name and scheduling.array_index.
  NodeLabels labels = spec.labels;
  std::erase_if(labels,
                [](const auto& label) { return label.first.starts_with(kReservedLabelPrefix); });
  if (!labels.empty()) {
    out << YAML::Key << "labels" << YAML::Value;
    EmitLabels(out, labels);
  }
  out << YAML::Key << "worker_pools" << YAML::Value << YAML::BeginSeq;
  for (const auto& pool : spec.pools) {
    out << YAML::BeginMap;
    out << YAML::Key << "role" << YAML::Value << std::string(RoleName(pool.role));
    out << YAML::Key << "replicas" << YAML::Value << pool.replicas;
    if (pool.min_replicas) {
      out << YAML::Key << "min_replicas" << YAML::Value << *pool.min_replicas;
    }
    if (!pool.node_selector.empty()) {
      out << YAML::Key << "node_selector" << YAML::Value;
      EmitLabels(out, pool.node_selector);
    }
    if (!pool.node_affinity.empty())
      EmitLabelRequirements(out, "node_affinity", pool.node_affinity);
    if (!pool.preferred_node_affinity.empty()) {
      out << YAML::Key << "preferred_node_affinity" << YAML::Value << YAML::BeginSeq;
      for (const NodePreference& term : pool.preferred_node_affinity) {
        out << YAML::Flow << YAML::BeginMap;
        out << YAML::Key << "weight" << YAML::Value << term.weight;
        if (term.requirements.size() == 1) {
          EmitLabelRequirement(out, term.requirements[0]);
        } else {
          EmitLabelRequirements(out, "match_expressions", term.requirements);
        }
        out << YAML::EndMap;
      }
      out << YAML::EndSeq;
    }
    if (pool.one_per_node) out << YAML::Key << "one_per_node" << YAML::Value << true;
    out << YAML::Key << "resources" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "gpus" << YAML::Value << pool.resources.gpus;
    if (pool.resources.cpus_given) {
      out << YAML::Key << "cpus" << YAML::Value << pool.resources.cpus;
    }
    if (pool.resources.memory_given) {
      out << YAML::Key << "memory_mb" << YAML::Value << pool.resources.memory_mb;
    }
    out << YAML::EndMap;
    if (pool.process) {
      out << YAML::Key << "process" << YAML::Value << YAML::BeginMap;
      EmitStringList(out, "command", pool.process->command);
      EmitStringList(out, "args", pool.process->args);
      EmitEnv(out, pool.process->env);
      out << YAML::EndMap;
    }
    if (pool.container) {
      out << YAML::Key << "container" << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "image" << YAML::Value << YAML::DoubleQuoted << pool.container->image;
      EmitStringList(out, "command", pool.container->command);
      EmitStringList(out, "args", pool.container->args);
      EmitEnv(out, pool.container->env);
      out << YAML::EndMap;
    }
    if (pool.builtin != Builtin::kNone) {
      out << YAML::Key << "builtin" << YAML::Value << std::string(BuiltinName(pool.builtin));
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "scheduling" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "timeout" << YAML::Value << FormatSeconds(spec.scheduling.timeout);
  out << YAML::Key << "max_restarts" << YAML::Value << spec.scheduling.max_restarts;
  if (spec.scheduling.restart_job_on_worker_restart) {
    out << YAML::Key << "restart_job_on_worker_restart" << YAML::Value
        << (*spec.scheduling.restart_job_on_worker_restart ? "true" : "false");
  }
  if (spec.scheduling.queue != SchedulingSpec().queue) {
    out << YAML::Key << "queue" << YAML::Value << spec.scheduling.queue;
  }
  if (spec.scheduling.priority != SchedulingSpec().priority) {
    out << YAML::Key << "priority" << YAML::Value << spec.scheduling.priority;
  }
  if (spec.scheduling.hang_timeout.count() > 0) {
    out << YAML::Key << "hang_timeout" << YAML::Value
        << std::to_string(spec.scheduling.hang_timeout.count()) + "ms";
  }
  if (spec.scheduling.max_wait.count() > 0) {
    out << YAML::Key << "max_wait" << YAML::Value
        << std::to_string(spec.scheduling.max_wait.count()) + "ms";
  }
  if (spec.scheduling.finish_grace != kDefaultFinishGrace) {
    out << YAML::Key << "finish_grace" << YAML::Value
        << std::to_string(spec.scheduling.finish_grace.count()) + "ms";
  }
  out << YAML::Key << "progress" << YAML::Value
      << std::string(ProgressSourceName(spec.scheduling.progress));
  out << YAML::Key << "hang_action" << YAML::Value
      << std::string(HangActionName(spec.scheduling.hang_action));
  if (!spec.scheduling.after.empty()) {
    out << YAML::Key << "after" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const auto& dependency : spec.scheduling.after) out << FormatJobDependency(dependency);
    out << YAML::EndSeq;
  }
  if (spec.scheduling.hold) out << YAML::Key << "hold" << YAML::Value << true;
  if (!spec.scheduling.array.indexes.empty()) {
    out << YAML::Key << "array" << YAML::Value << YAML::DoubleQuoted
        << FormatArraySpec(spec.scheduling.array);
  }
  if (spec.scheduling.array.index) {
    out << YAML::Key << "array_index" << YAML::Value << *spec.scheduling.array.index;
  }
  if (!spec.scheduling.required_topology.empty()) {
    out << YAML::Key << "required_topology" << YAML::Value << spec.scheduling.required_topology;
  }
  if (spec.scheduling.preferred_topology.size() == 1) {
    out << YAML::Key << "preferred_topology" << YAML::Value
        << spec.scheduling.preferred_topology[0];
  } else if (!spec.scheduling.preferred_topology.empty()) {
    out << YAML::Key << "preferred_topology" << YAML::Value << YAML::Flow
        << spec.scheduling.preferred_topology;
  }
  out << YAML::EndMap;
  out << YAML::EndMap;
  std::string text = out.c_str();
  text += "\n";
  return text;
}

}  // namespace cohort
