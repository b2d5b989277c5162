// Vertex AI CustomJob files read into a JobSpec (see vertex_job.h), walked with YamlReader so that
// every error names the file, the line and the field path, and no yaml-cpp exception escapes.
#include "common/vertex_job.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <iterator>
#include <utility>

#include "common/job_spec.h"
#include "common/yaml_reader.h"

namespace cohort {
namespace {

// The Vertex pool index of each role (DESIGN.md "Jobs").
constexpr Role kPoolRoles[] = {Role::kChief, Role::kWorker, Role::kParameterServer,
                               Role::kEvaluator};
constexpr int kMaxReplicas = 100000;

// What a CustomJob says of a past run (as `gcloud ai custom-jobs describe` writes it): accepted
// and left alone, since they ask for nothing.
constexpr std::string_view kOutputOnlyKeys[] = {
    "name",       "state", "createTime",    "startTime",    "endTime",
    "updateTime", "error", "webAccessUris", "satisfiesPzs", "satisfiesPzi"};

class VertexReader {
 public:
  explicit VertexReader(std::string_view source) : r_(source) {}

  StatusOr<VertexJobConversion> Read(const YAML::Node& root) {
    if (!root.IsMap()) return r_.Error(root, "", "expected a mapping, got " + r_.KindName(root));
    JobSpec spec;
    spec.name_prefix = "custom-job";
    if (YamlReader::Has(root, "jobSpec")) {
      // A whole CustomJob.
      for (const auto& kv : root) {
        if (!kv.first.IsScalar()) return r_.Error(kv.first, "", "keys must be strings");
        const std::string& key = kv.first.Scalar();
        if (key == "jobSpec" || key == "displayName" || IsOutputOnly(key)) continue;
        if (key == "labels" || key == "encryptionSpec") {
          Note(key, "ignored (no counterpart in Cohort)");
          continue;
        }
        return r_.Error(kv.first, key, "unknown key of a Vertex CustomJob");
      }
      if (YamlReader::Has(root, "displayName")) {
        COHORT_ASSIGN_OR_RETURN(std::string display, r_.String(root["displayName"], "displayName"));
        spec.name_prefix = NamePrefix(display);
      }
      COHORT_RETURN_IF_ERROR(ReadJobSpec(root["jobSpec"], "jobSpec", &spec));
    } else {
      COHORT_RETURN_IF_ERROR(ReadJobSpec(root, "", &spec));
    }
    if (Status valid = ValidateJobSpec(spec); !valid.ok()) {
      return valid.WithContext(r_.source() + " as a Cohort job");
    }
    VertexJobConversion conversion;
    conversion.yaml = JobSpecToYaml(spec);
    conversion.notes = std::move(notes_);
    return conversion;
  }

 private:
  static bool IsOutputOnly(std::string_view key) {
    return std::find(std::begin(kOutputOnlyKeys), std::end(kOutputOnlyKeys), key) !=
           std::end(kOutputOnlyKeys);
  }

  // A job name prefix from a display name: the characters a name cannot hold become '-'.
  static std::string NamePrefix(const std::string& display) {
    std::string prefix;
    for (char c : display) {
      const bool plain = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      prefix += plain ? c : '-';
    }
    if (prefix.empty() || !std::isalpha(static_cast<unsigned char>(prefix.front()))) {
      prefix = "job-" + prefix;
    }
    if (prefix.size() > kMaxNamePrefixLength) prefix.resize(kMaxNamePrefixLength);
    return prefix;
  }

  void Note(const std::string& path, const std::string& what) {
    notes_.push_back("Vertex " + path + ": " + what);
  }

  // A count: a plain number, or the decimal string REST writes for an int64.
  StatusOr<int> Count(const YAML::Node& node, const std::string& path, int max) const {
    if (!node.IsScalar()) return r_.Error(node, path, "expected a count, got " + r_.KindName(node));
    const std::string& text = node.Scalar();
    if (text.empty() || text.size() > 9 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return r_.Error(node, path, "expected a count, got " + Quoted(text));
    }
    const int value = std::stoi(text);
    if (value > max) {
      return r_.Error(node, path, Quoted(text) + " is over " + std::to_string(max));
    }
    return value;
  }

  // A protobuf Duration as JSON writes it: "<seconds>[.<fraction>]s", rounded up to seconds.
  StatusOr<std::chrono::seconds> Duration(const YAML::Node& node, const std::string& path) const {
    COHORT_ASSIGN_OR_RETURN(std::string text, r_.String(node, path));
    const auto bad = [&] {
      return r_.Error(node, path, Quoted(text) + " is not a duration such as \"7200s\"");
    };
    if (text.size() < 2 || text.back() != 's') return bad();
    const std::string number = text.substr(0, text.size() - 1);
    const size_t dot = number.find('.');
    const std::string whole = number.substr(0, dot);
    const std::string fraction = dot == std::string::npos ? "" : number.substr(dot + 1);
    const auto digits = [](const std::string& s) {
      return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (whole.empty() || whole.size() > 12 || !digits(whole) || !digits(fraction)) return bad();
    int64_t seconds = std::stoll(whole);
    if (fraction.find_first_not_of('0') != std::string::npos) ++seconds;
    if (seconds <= 0) return r_.Error(node, path, "must be positive");
    return std::chrono::seconds(seconds);
  }

  Status ReadJobSpec(const YAML::Node& node, const std::string& path, JobSpec* spec) {
    COHORT_RETURN_IF_ERROR(r_.CheckMap(
        node, path,
        {"workerPoolSpecs", "scheduling", "baseOutputDirectory", "serviceAccount", "network",
         "reservedIpRanges", "pscInterfaceConfig", "protectedArtifactLocationId", "tensorboard",
         "enableWebAccess", "enableDashboardAccess", "experiment", "experimentRun", "models",
         "persistentResourceId"}));
    for (const auto& kv : node) {
      const std::string& key = kv.first.Scalar();
      if (key == "workerPoolSpecs" || key == "scheduling" || key == "baseOutputDirectory") {
        continue;
      }
      Note(YamlReader::Join(path, key), "ignored (no counterpart in Cohort)");
    }
    const std::string pools_path = YamlReader::Join(path, "workerPoolSpecs");
    if (!YamlReader::Has(node, "workerPoolSpecs")) {
      return r_.Error(node, pools_path, "required (the chief's pool at least)");
    }
    const YAML::Node pools = node["workerPoolSpecs"];
    if (pools.IsMap()) {
      COHORT_RETURN_IF_ERROR(ReadPool(pools, pools_path, 0, spec));
    } else if (pools.IsSequence()) {
      if (pools.size() > std::size(kPoolRoles)) {
        return r_.Error(pools, pools_path,
                        "at most 4 pools (chief, workers, parameter servers or reducers, "
                        "evaluators), got " +
                            std::to_string(pools.size()));
      }
      for (size_t i = 0; i < pools.size(); ++i) {
        COHORT_RETURN_IF_ERROR(ReadPool(pools[i], pools_path + "[" + std::to_string(i) + "]",
                                        static_cast<int>(i), spec));
      }
    } else {
      return r_.Error(pools, pools_path, "expected a list, got " + r_.KindName(pools));
    }
    if (spec->pools.empty() || spec->pools.front().role != Role::kChief) {
      return r_.Error(pools, pools_path, "the first pool (the chief's) is required");
    }
    if (YamlReader::Has(node, "scheduling")) {
      COHORT_RETURN_IF_ERROR(
          ReadScheduling(node["scheduling"], YamlReader::Join(path, "scheduling"), spec));
    }
    if (YamlReader::Has(node, "baseOutputDirectory")) {
      const std::string at = YamlReader::Join(path, "baseOutputDirectory");
      const YAML::Node base = node["baseOutputDirectory"];
      COHORT_RETURN_IF_ERROR(r_.CheckMap(base, at, {"outputUriPrefix"}));
      COHORT_ASSIGN_OR_RETURN(std::string prefix,
                              r_.RequiredString(base, "outputUriPrefix", at + ".outputUriPrefix"));
      if (!prefix.empty() && prefix.front() == '/') {
        spec->output_dir = prefix;
      } else {
        Note(at + ".outputUriPrefix",
             Quoted(prefix) +
                 " is not a path on the nodes: the job writes under the coordinator's output "
                 "root (AIP_MODEL_DIR and the rest point there)");
      }
    }
    return Status::Ok();
  }

  Status ReadPool(const YAML::Node& node, const std::string& path, int index, JobSpec* spec) {
    if (node.IsNull() || (node.IsMap() && node.size() == 0)) return Status::Ok();  // skipped
    COHORT_RETURN_IF_ERROR(r_.CheckMap(node, path,
                                       {"containerSpec", "pythonPackageSpec", "machineSpec",
                                        "replicaCount", "nfsMounts", "diskSpec"}));
    WorkerPoolSpec pool;
    pool.role = kPoolRoles[index];
    if (YamlReader::Has(node, "replicaCount")) {
      COHORT_ASSIGN_OR_RETURN(pool.replicas,
                              Count(node["replicaCount"], path + ".replicaCount", kMaxReplicas));
    }
    if (YamlReader::Has(node, "pythonPackageSpec")) {
      return r_.Error(node["pythonPackageSpec"], path + ".pythonPackageSpec",
                      "not supported: Cohort installs no Python packages at launch; build an "
                      "image with the package installed and give containerSpec (command: "
                      "[python3, -m, MODULE])");
    }
    if (!YamlReader::Has(node, "containerSpec")) {
      return r_.Error(node, path + ".containerSpec", "required");
    }
    COHORT_RETURN_IF_ERROR(ReadContainer(node["containerSpec"], path + ".containerSpec", &pool));
    if (YamlReader::Has(node, "machineSpec")) {
      COHORT_RETURN_IF_ERROR(ReadMachine(node["machineSpec"], path + ".machineSpec", &pool));
    }
    for (const char* key : {"nfsMounts", "diskSpec"}) {
      if (YamlReader::Has(node, key)) {
        Note(path + "." + key,
             "ignored (mount shared storage on every node, and point output_root at it)");
      }
    }
    spec->pools.push_back(std::move(pool));
    return Status::Ok();
  }

  Status ReadContainer(const YAML::Node& node, const std::string& path, WorkerPoolSpec* pool) {
    COHORT_RETURN_IF_ERROR(r_.CheckMap(node, path, {"imageUri", "command", "args", "env"}));
    ContainerSpec container;
    COHORT_ASSIGN_OR_RETURN(container.image,
                            r_.RequiredString(node, "imageUri", path + ".imageUri"));
    if (YamlReader::Has(node, "command")) {
      COHORT_ASSIGN_OR_RETURN(container.command, r_.StringList(node["command"], path + ".command"));
    }
    if (YamlReader::Has(node, "args")) {
      COHORT_ASSIGN_OR_RETURN(container.args, r_.StringList(node["args"], path + ".args"));
    }
    if (YamlReader::Has(node, "env")) {
      const YAML::Node env = node["env"];
      if (!env.IsSequence()) {
        return r_.Error(env, path + ".env", "expected a list of {name, value}");
      }
      for (size_t i = 0; i < env.size(); ++i) {
        const std::string at = path + ".env[" + std::to_string(i) + "]";
        COHORT_RETURN_IF_ERROR(r_.CheckMap(env[i], at, {"name", "value"}));
        COHORT_ASSIGN_OR_RETURN(std::string name, r_.RequiredString(env[i], "name", at + ".name"));
        std::string value;
        if (YamlReader::Has(env[i], "value")) {
          COHORT_ASSIGN_OR_RETURN(value, r_.String(env[i]["value"], at + ".value"));
        }
        if (!container.env.emplace(name, value).second) {
          return r_.Error(env[i], at + ".name", Quoted(name) + " is given twice");
        }
      }
    }
    // Vertex's Reduction Server image, in the pool that holds it: Cohort's own reducer.
    if (pool->role == Role::kParameterServer &&
        container.image.find("/reductionserver") != std::string::npos) {
      pool->role = Role::kReducer;
      pool->builtin = Builtin::kReducer;
      Note(path + ".imageUri",
           Quoted(container.image) + " is Vertex's Reduction Server: Cohort's reducer runs");
      return Status::Ok();
    }
    pool->container = std::move(container);
    return Status::Ok();
  }

  Status ReadMachine(const YAML::Node& node, const std::string& path, WorkerPoolSpec* pool) {
    COHORT_RETURN_IF_ERROR(r_.CheckMap(node, path,
                                       {"machineType", "acceleratorType", "acceleratorCount",
                                        "tpuTopology", "reservationAffinity"}));
    if (YamlReader::Has(node, "acceleratorCount")) {
      COHORT_ASSIGN_OR_RETURN(pool->resources.gpus,
                              Count(node["acceleratorCount"], path + ".acceleratorCount", 1024));
    }
    for (const auto& kv : node) {
      const std::string& key = kv.first.Scalar();
      if (key == "acceleratorCount") continue;
      const std::string value = kv.second.IsScalar() ? " " + Quoted(kv.second.Scalar()) : "";
      Note(path + "." + key,
           "ignored" + value +
               " (the pool asks GPUs by count; a node_selector in a Cohort job file picks the "
               "kind, CPUs and memory)");
    }
    return Status::Ok();
  }

  Status ReadScheduling(const YAML::Node& node, const std::string& path, JobSpec* spec) {
    COHORT_RETURN_IF_ERROR(r_.CheckMap(
        node, path,
        {"timeout", "restartJobOnWorkerRestart", "disableRetries", "strategy", "maxWaitDuration"}));
    SchedulingSpec& scheduling = spec->scheduling;
    if (YamlReader::Has(node, "timeout")) {
      COHORT_ASSIGN_OR_RETURN(scheduling.timeout, Duration(node["timeout"], path + ".timeout"));
    }
    if (YamlReader::Has(node, "restartJobOnWorkerRestart")) {
      COHORT_ASSIGN_OR_RETURN(
          scheduling.restart_job_on_worker_restart,
          r_.Bool(node["restartJobOnWorkerRestart"], path + ".restartJobOnWorkerRestart"));
    }
    if (YamlReader::Has(node, "disableRetries")) {
      COHORT_ASSIGN_OR_RETURN(bool disabled,
                              r_.Bool(node["disableRetries"], path + ".disableRetries"));
      if (disabled) scheduling.max_restarts = 0;
    }
    for (const char* key : {"strategy", "maxWaitDuration"}) {
      if (YamlReader::Has(node, key)) {
        Note(path + "." + key, "ignored (the job waits in its queue until it fits)");
      }
    }
    return Status::Ok();
  }

  YamlReader r_;
  std::vector<std::string> notes_;
};

}  // namespace

bool IsVertexCustomJob(std::string_view text) {
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    return root.IsMap() && (root["workerPoolSpecs"] || root["jobSpec"]);
  } catch (const std::exception&) {
    return false;
  }
}

StatusOr<VertexJobConversion> ConvertVertexCustomJob(std::string_view text,
                                                     std::string_view source) {
  VertexReader reader(source);
  return ReadYamlDocument(text, source, [&](const YAML::Node& root) { return reader.Read(root); });
}

}  // namespace cohort
