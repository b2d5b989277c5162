// Job spec names, durations and validation (see job_spec.h and DESIGN.md "Jobs"); the YAML form
// (parsing and the canonical YAML) is in job_spec_yaml.cc.
#include "common/job_spec.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>

#include "common/yaml_reader.h"

namespace cohort {

namespace {

constexpr int kMaxPools = 4;
constexpr int kMaxReplicas = 1024;
constexpr int kMaxGpus = 64;
constexpr int kMaxCpus = Resources::kMaxCpus;
constexpr int kMaxRestarts = 1000;
constexpr size_t kMaxNameLength = 128;
constexpr size_t kMaxSchedulingNameLength = 64;

bool IsAsciiAlpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

// Well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF). Job files
// are YAML, a Unicode format; bytes that are not UTF-8 could not survive JobSpecToYaml.
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Validation of a built spec. Paths use the spec's own pool order.

// One node_affinity expression (or a preferred term's), at `at`: its key, and the values its
// operator takes.
Status CheckLabelRequirement(const LabelRequirement& req, const std::string& at) {
  if (Status bad = CheckNodeLabel(req.key, ""); !bad.ok()) {
    return InvalidArgument(at + ".key: " + bad.message());
  }
  const bool takes_values = req.op == LabelOp::kIn || req.op == LabelOp::kNotIn;
  const bool takes_integer = req.op == LabelOp::kGt || req.op == LabelOp::kLt;
  const std::string op(NameIn(kLabelOpNames, req.op, "?"));
  if (takes_values && req.values.empty()) {
    return InvalidArgument(at + ".values: " + op + " needs at least one value");
  }
  if (takes_integer && (req.values.size() != 1 || !LabelInteger(req.values[0]))) {
    return InvalidArgument(at + ".values: " + op + " needs exactly one value, an integer");
  }
  if (!takes_values && !takes_integer && !req.values.empty()) {
    return InvalidArgument(at + ".values: " + op + " takes no values");
  }
  if (req.values.size() > kMaxNodeLabels) {
    return InvalidArgument(at + ".values: at most " + std::to_string(kMaxNodeLabels) +
                           " values, got " + std::to_string(req.values.size()));
  }
  for (const std::string& value : req.values) {
    if (Status bad = CheckNodeLabel(req.key, value); !bad.ok()) {
      return InvalidArgument(at + ".values: " + bad.message());
    }
  }
  return Status::Ok();
}

// A node_selector's or a job's labels, at `path`: at most `most`, each CheckNodeLabel's.
Status CheckLabels(const NodeLabels& labels, const std::string& path, size_t most) {
  if (labels.size() > most) {
    return InvalidArgument(path + ": at most " + std::to_string(most) + " labels, got " +
                           std::to_string(labels.size()));
  }
  for (const auto& [key, value] : labels) {
    if (Status bad = CheckNodeLabel(key, value); !bad.ok()) {
      return InvalidArgument(path + "." + key + ": " + bad.message());
    }
  }
  return Status::Ok();
}

Status ValidatePool(const WorkerPoolSpec& pool, const std::string& path) {
  const std::string role(RoleName(pool.role));
  if (pool.role == Role::kChief) {
    if (pool.replicas != 1) {
      return InvalidArgument(path + ".replicas: the chief pool must have exactly 1 replica, got " +
                             std::to_string(pool.replicas));
    }
  } else if (pool.replicas < 1) {
    return InvalidArgument(path + ".replicas: must be at least 1, got " +
                           std::to_string(pool.replicas));
  } else if (pool.replicas > kMaxReplicas) {
    return InvalidArgument(path + ".replicas: must be at most " + std::to_string(kMaxReplicas) +
                           ", got " + std::to_string(pool.replicas));
  }
  COHORT_RETURN_IF_ERROR(CheckLabels(pool.node_selector, path + ".node_selector", kMaxNodeLabels));
  if (pool.node_affinity.size() > kMaxNodeLabels) {
    return InvalidArgument(path + ".node_affinity: at most " + std::to_string(kMaxNodeLabels) +
                           " expressions, got " + std::to_string(pool.node_affinity.size()));
  }
  for (size_t i = 0; i < pool.node_affinity.size(); ++i) {
    COHORT_RETURN_IF_ERROR(CheckLabelRequirement(
        pool.node_affinity[i], path + ".node_affinity[" + std::to_string(i) + "]"));
  }
  if (pool.preferred_node_affinity.size() > kMaxNodeLabels) {
    return InvalidArgument(path + ".preferred_node_affinity: at most " +
                           std::to_string(kMaxNodeLabels) + " terms, got " +
                           std::to_string(pool.preferred_node_affinity.size()));
  }
  for (size_t i = 0; i < pool.preferred_node_affinity.size(); ++i) {
    const NodePreference& term = pool.preferred_node_affinity[i];
    const std::string at = path + ".preferred_node_affinity[" + std::to_string(i) + "]";
    if (term.weight < 1 || term.weight > kMaxPreferenceWeight) {
      return InvalidArgument(at + ".weight: must be in 1.." + std::to_string(kMaxPreferenceWeight) +
                             ", got " + std::to_string(term.weight));
    }
    if (term.requirements.empty() || term.requirements.size() > kMaxNodeLabels) {
      return InvalidArgument(at + ": 1.." + std::to_string(kMaxNodeLabels) +
                             " expressions a term, got " +
                             std::to_string(term.requirements.size()));
    }
    for (size_t j = 0; j < term.requirements.size(); ++j) {
      COHORT_RETURN_IF_ERROR(CheckLabelRequirement(
          term.requirements[j], term.requirements.size() == 1
                                    ? at
                                    : at + ".match_expressions[" + std::to_string(j) + "]"));
    }
  }
  if (pool.min_replicas) {
    if (pool.role != Role::kWorker) {
      return InvalidArgument(path + ".min_replicas: only the worker pool may be elastic, not " +
                             role);
    }
    if (*pool.min_replicas < 0 || *pool.min_replicas > pool.replicas) {
      return InvalidArgument(path + ".min_replicas: must be in 0.." +
                             std::to_string(pool.replicas) + " (its replicas), got " +
                             std::to_string(*pool.min_replicas));
    }
  }

  const Resources& res = pool.resources;
  if (res.gpus < 0 || res.gpus > kMaxGpus) {
    return InvalidArgument(path + ".resources.gpus: must be in 0.." + std::to_string(kMaxGpus) +
                           ", got " + std::to_string(res.gpus));
  }
  if (res.cpus < 0 || res.cpus > kMaxCpus) {
    return InvalidArgument(path + ".resources.cpus: must be in 0.." + std::to_string(kMaxCpus) +
                           ", got " + std::to_string(res.cpus));
  }
  if (res.memory_mb < 0) {
    return InvalidArgument(path + ".resources.memory_mb: must be at least 0, got " +
                           std::to_string(res.memory_mb));
  }

  int kinds =
      (pool.process ? 1 : 0) + (pool.container ? 1 : 0) + (pool.builtin != Builtin::kNone ? 1 : 0);
  if (kinds != 1) {
    return InvalidArgument(path + ": needs exactly one of process, container or builtin, got " +
                           std::to_string(kinds));
  }
  if (pool.builtin != Builtin::kNone) {
    bool matches =
        (pool.builtin == Builtin::kReducer && pool.role == Role::kReducer) ||
        (pool.builtin == Builtin::kParameterServer && pool.role == Role::kParameterServer);
    if (!matches) {
      return InvalidArgument(path + ".builtin: " + std::string(BuiltinName(pool.builtin)) +
                             " is not allowed for role " + role +
                             " (builtin: reducer for role reducer, builtin: parameter_server "
                             "for role parameter_server)");
    }
    if (res.gpus != 0) {
      return InvalidArgument(path + ".resources.gpus: builtin pools run on CPUs only, got " +
                             std::to_string(res.gpus));
    }
  }
  auto check_strings = [&](const std::vector<std::string>& v, const std::string& p,
                           bool required) -> Status {
    if (required && v.empty()) return InvalidArgument(p + ": must not be empty");
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].find('\0') != std::string::npos) {
        return InvalidArgument(p + "[" + std::to_string(i) + "]: contains a NUL byte");
      }
      if (!IsValidUtf8(v[i])) {
        return InvalidArgument(p + "[" + std::to_string(i) + "]: is not valid UTF-8");
      }
    }
    if (required && v[0].empty()) return InvalidArgument(p + "[0]: must not be empty");
    return Status::Ok();
  };
  auto check_env = [&](const std::map<std::string, std::string>& env,
                       const std::string& p) -> Status {
    for (const auto& [k, v] : env) {
      if (!IsValidEnvName(k)) {
        return InvalidArgument(p + "." + k +
                               ": invalid environment variable name (must match "
                               "[A-Za-z_][A-Za-z0-9_]*)");
      }
      if (v.find('\0') != std::string::npos) {
        return InvalidArgument(p + "." + k + ": contains a NUL byte");
      }
      if (!IsValidUtf8(v)) return InvalidArgument(p + "." + k + ": is not valid UTF-8");
    }
    return Status::Ok();
  };
  if (pool.process) {
    COHORT_RETURN_IF_ERROR(check_strings(pool.process->command, path + ".process.command", true));
    COHORT_RETURN_IF_ERROR(check_strings(pool.process->args, path + ".process.args", false));
    COHORT_RETURN_IF_ERROR(check_env(pool.process->env, path + ".process.env"));
  }
  if (pool.container) {
    if (pool.container->image.empty()) {
      return InvalidArgument(path + ".container.image: must not be empty");
    }
    if (!IsValidUtf8(pool.container->image) ||
        pool.container->image.find('\0') != std::string::npos) {
      return InvalidArgument(path + ".container.image: is not valid UTF-8");
    }
    COHORT_RETURN_IF_ERROR(
        check_strings(pool.container->command, path + ".container.command", false));
    COHORT_RETURN_IF_ERROR(check_strings(pool.container->args, path + ".container.args", false));
    COHORT_RETURN_IF_ERROR(check_env(pool.container->env, path + ".container.env"));
  }
  return Status::Ok();
}

}  // namespace

bool IsValidJobName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength || !IsAsciiAlpha(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return IsAsciiAlpha(c) || IsAsciiDigit(c) || c == '_' || c == '-';
  });
}

bool IsValidSchedulingName(std::string_view name) {
  if (name.empty() || name.size() > kMaxSchedulingNameLength || !IsAsciiAlpha(name[0])) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return IsAsciiAlpha(c) || IsAsciiDigit(c) || c == '_' || c == '-';
  });
}

bool IsValidEnvName(std::string_view name) {
  if (name.empty() || IsAsciiDigit(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsAsciiAlpha(c) || IsAsciiDigit(c) || c == '_'; });
}

// ---------------------------------------------------------------------------------------------

std::string_view RoleName(Role role) { return NameIn(kRoleNames, role, "unknown"); }

StatusOr<Role> ParseRole(std::string_view name) {
  if (std::optional<Role> role = ValueIn(kRoleNames, name)) return *role;
  return InvalidArgument("unknown role " + Quoted(name) + " (" + ChoiceOf(kRoleNames) + ")");
}

int PoolIndex(Role role) {
  switch (role) {
    case Role::kChief:
      return 0;
    case Role::kWorker:
      return 1;
    case Role::kParameterServer:
    case Role::kReducer:
      return 2;
    case Role::kEvaluator:
      return 3;
  }
  return -1;
}

std::string_view BuiltinName(Builtin builtin) { return NameIn(kBuiltinNames, builtin, ""); }

std::string_view ProgressSourceName(ProgressSource source) {
  return NameIn(kProgressSourceNames, source, "");
}

std::string_view HangActionName(HangAction action) { return NameIn(kHangActionNames, action, ""); }

std::string_view AfterConditionName(AfterCondition when) {
  return NameIn(kAfterConditionNames, when, "");
}

std::string FormatJobDependency(const JobDependency& dependency) {
  if (dependency.when == AfterCondition::kSucceeded) return dependency.job;
  return dependency.job + ":" + std::string(AfterConditionName(dependency.when));
}

StatusOr<JobDependency> ParseJobDependency(std::string_view text) {
  JobDependency out;
  const size_t colon = text.find(':');
  out.job = std::string(text.substr(0, colon));
  if (!IsValidJobName(out.job)) {
    return InvalidArgument(Quoted(std::string(text)) +
                           " does not start with a job name ([A-Za-z][A-Za-z0-9_-]{0,127}); "
                           "give JOB or JOB:CONDITION");
  }
  if (colon == std::string_view::npos) return out;
  const std::string_view condition = text.substr(colon + 1);
  const std::optional<AfterCondition> when = ValueIn(kAfterConditionNames, condition);
  if (!when) {
    return InvalidArgument(Quoted(std::string(text)) + ": the condition must be " +
                           ChoiceOf(kAfterConditionNames) + ", got " +
                           Quoted(std::string(condition)));
  }
  out.when = *when;
  return out;
}

namespace {

// A non-negative decimal integer that is all of `text`; nullopt otherwise (or past INT_MAX).
std::optional<int> WholeNumber(std::string_view text) {
  int value = 0;
  if (text.empty() || !IsAsciiDigit(text.front())) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

StatusOr<ArraySpec> ParseArraySpec(std::string_view text) {
  ArraySpec array;
  const auto bad = [&](const std::string& why) {
    return InvalidArgument(Quoted(std::string(text)) + ": " + why +
                           " (give indexes as N, N-M or N-M:STEP, comma-separated, then "
                           "optionally %PARALLELISM: 0-99%8)");
  };
  std::string_view items = text;
  if (const size_t percent = text.find('%'); percent != std::string_view::npos) {
    items = text.substr(0, percent);
    const std::optional<int> limit = WholeNumber(text.substr(percent + 1));
    if (!limit || *limit < 1) return bad("the parallelism after % must be a whole number >= 1");
    array.parallelism = *limit;
  }
  if (items.empty()) return bad("no indexes");
  std::vector<int> indexes;
  while (!items.empty()) {
    const size_t comma = items.find(',');
    const std::string_view item = items.substr(0, comma);
    items = comma == std::string_view::npos ? std::string_view() : items.substr(comma + 1);
    if (item.empty()) return bad("an empty item");
    std::string_view range = item;
    int step = 1;
    if (const size_t colon = item.find(':'); colon != std::string_view::npos) {
      const std::optional<int> s = WholeNumber(item.substr(colon + 1));
      if (!s || *s < 1) return bad("the step after : must be a whole number >= 1");
      step = *s;
      range = item.substr(0, colon);
    }
    const size_t dash = range.find('-');
    const std::optional<int> first = WholeNumber(range.substr(0, dash));
    const std::optional<int> last =
        dash == std::string_view::npos ? first : WholeNumber(range.substr(dash + 1));
    if (!first || !last) return bad(Quoted(std::string(item)) + " is not N, N-M or N-M:STEP");
    if (*last < *first) return bad(Quoted(std::string(item)) + " ends before it starts");
    if (*last > kMaxArrayIndex) {
      return bad("indexes must be in 0.." + std::to_string(kMaxArrayIndex));
    }
    // 64 bits: the step may take it past INT_MAX.
    for (int64_t i = *first; i <= *last; i += step) {
      indexes.push_back(static_cast<int>(i));
      if (indexes.size() > kMaxArrayTasks) {
        return bad("at most " + std::to_string(kMaxArrayTasks) + " tasks");
      }
    }
  }
  std::sort(indexes.begin(), indexes.end());
  indexes.erase(std::unique(indexes.begin(), indexes.end()), indexes.end());
  array.indexes = std::move(indexes);
  return array;
}

std::string FormatArraySpec(const ArraySpec& array) {
  std::string out;
  const std::vector<int>& v = array.indexes;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(v[i]);
    if (j > i) out += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  if (array.parallelism > 0) out += "%" + std::to_string(array.parallelism);
  return out;
}

std::string JobSpec::ArrayName() const {
  if (!scheduling.array.index) return name;
  const std::string suffix = "-" + std::to_string(*scheduling.array.index);
  return name.size() > suffix.size() && name.ends_with(suffix)
             ? name.substr(0, name.size() - suffix.size())
             : name;
}

JobSpec ArrayTask(const JobSpec& array, int index) {
  JobSpec task = array;
  task.name = array.name + "-" + std::to_string(index);
  task.scheduling.array.index = index;
  if (!task.output_dir.empty()) task.output_dir += "/" + std::to_string(index);
  task.labels[std::string(kArrayLabel)] = array.name;
  task.labels[std::string(kArrayIndexLabel)] = std::to_string(index);
  return task;
}

JobSpec ArrayOfTask(const JobSpec& task) {
  JobSpec array = task;
  const std::string suffix = "/" + std::to_string(task.scheduling.array.index.value_or(0));
  array.name = task.ArrayName();
  array.scheduling.array.index.reset();
  if (array.output_dir.ends_with(suffix)) {
    array.output_dir.resize(array.output_dir.size() - suffix.size());
  }
  array.labels.erase(std::string(kArrayLabel));
  array.labels.erase(std::string(kArrayIndexLabel));
  return array;
}

const WorkerPoolSpec* JobSpec::FindPool(Role role) const {
  for (const auto& pool : pools) {
    if (pool.role == role) return &pool;
  }
  return nullptr;
}

namespace {
bool LabelValueChar(char c) {
  return IsAsciiAlpha(c) || IsAsciiDigit(c) || c == '.' || c == '_' || c == '-';
}
}  // namespace

std::string ToNodeLabelValue(std::string_view text) {
  std::string value(text.substr(0, 63));
  for (char& c : value) {
    if (!LabelValueChar(c)) c = '-';
  }
  return value;
}

Status CheckNodeLabel(std::string_view key, std::string_view value) {
  auto key_char = [](char c) { return LabelValueChar(c) || c == '/'; };
  if (key.empty() || key.size() > 63 || !(IsAsciiAlpha(key[0]) || IsAsciiDigit(key[0])) ||
      !std::all_of(key.begin(), key.end(), key_char)) {
    return InvalidArgument("label key " + Quoted(key) +
                           " is not valid (must match [A-Za-z0-9][A-Za-z0-9._/-]{0,62})");
  }
  if (value.size() > 63 || !std::all_of(value.begin(), value.end(), LabelValueChar)) {
    return InvalidArgument("label value " + Quoted(value) +
                           " is not valid (must match [A-Za-z0-9._-]{0,63})");
  }
  return Status::Ok();
}

StatusOr<std::pair<std::string, std::string>> ParseNodeLabel(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    return InvalidArgument("expected KEY=VALUE, got " + Quoted(text));
  }
  std::string key(text.substr(0, eq)), value(text.substr(eq + 1));
  COHORT_RETURN_IF_ERROR(CheckNodeLabel(key, value));
  return std::make_pair(std::move(key), std::move(value));
}

bool LabelsMatch(const NodeLabels& labels, const NodeLabels& selector) {
  for (const auto& [key, value] : selector) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  return true;
}

std::optional<int64_t> LabelInteger(std::string_view value) {
  int64_t out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (value.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return out;
}

namespace {

// Whether `node`'s labels satisfy one node_affinity expression.
bool Holds(const LabelRequirement& req, const NodeLabels& node) {
  auto it = node.find(req.key);
  const bool has = it != node.end();
  switch (req.op) {
    case LabelOp::kExists:
    case LabelOp::kDoesNotExist:
      return has == (req.op == LabelOp::kExists);
    case LabelOp::kGt:
    case LabelOp::kLt: {
      const std::optional<int64_t> value = has ? LabelInteger(it->second) : std::nullopt;
      const std::optional<int64_t> bound =
          req.values.size() == 1 ? LabelInteger(req.values[0]) : std::nullopt;
      if (!value || !bound) return false;
      return req.op == LabelOp::kGt ? *value > *bound : *value < *bound;
    }
    case LabelOp::kIn:
    case LabelOp::kNotIn:
      break;
  }
  const bool listed =
      has && std::find(req.values.begin(), req.values.end(), it->second) != req.values.end();
  return listed == (req.op == LabelOp::kIn);
}

}  // namespace

int PreferenceScore(const std::vector<NodePreference>& preferences, const NodeLabels& node) {
  int score = 0;
  for (const NodePreference& term : preferences) {
    const bool holds = std::all_of(term.requirements.begin(), term.requirements.end(),
                                   [&](const LabelRequirement& r) { return Holds(r, node); });
    if (holds) score += term.weight;
  }
  return score;
}

bool NodeSelector::Matches(const NodeLabels& node) const {
  if (!LabelsMatch(node, labels)) return false;
  return std::all_of(requirements.begin(), requirements.end(),
                     [&](const LabelRequirement& req) { return Holds(req, node); });
}

std::string FormatNodeSelector(const NodeSelector& selector) {
  std::string out = FormatNodeLabels(selector.labels);
  for (const LabelRequirement& req : selector.requirements) {
    out += out.empty() ? "" : ",";
    if (req.op == LabelOp::kExists || req.op == LabelOp::kDoesNotExist) {
      out += (req.op == LabelOp::kDoesNotExist ? "!" : "") + req.key;
      continue;
    }
    if (req.op == LabelOp::kGt || req.op == LabelOp::kLt) {
      out += req.key + (req.op == LabelOp::kGt ? ">" : "<") +
             (req.values.empty() ? "" : req.values[0]);
      continue;
    }
    out += req.key + (req.op == LabelOp::kIn ? " in (" : " notin (");
    for (size_t i = 0; i < req.values.size(); ++i) out += (i ? "," : "") + req.values[i];
    out += ")";
  }
  return out;
}

namespace {

std::string_view TrimSpaces(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

// The selector's requirements: split at the commas outside parentheses.
StatusOr<std::vector<std::string_view>> SelectorTerms(std::string_view text) {
  std::vector<std::string_view> terms;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '(' && ++depth > 1) return InvalidArgument("nested parentheses");
    if (c == ')' && --depth < 0) return InvalidArgument("a ')' without its '('");
    if (c == ',' && depth == 0) {
      terms.push_back(TrimSpaces(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (depth != 0) return InvalidArgument("a '(' without its ')'");
  return terms;
}

// One requirement of ParseNodeSelector, added to `selector`.
Status AddSelectorTerm(std::string_view term, NodeSelector& selector) {
  auto key_of = [](std::string_view key) -> StatusOr<std::string> {
    key = TrimSpaces(key);
    COHORT_RETURN_IF_ERROR(CheckNodeLabel(key, ""));
    return std::string(key);
  };
  auto value_of = [](std::string_view key, std::string_view value) -> StatusOr<std::string> {
    value = TrimSpaces(value);
    COHORT_RETURN_IF_ERROR(CheckNodeLabel(key, value));
    return std::string(value);
  };
  if (term.empty()) return InvalidArgument("an empty requirement");
  if (term.front() == '!' && term.find_first_of("=<>") == std::string_view::npos) {
    COHORT_ASSIGN_OR_RETURN(std::string key, key_of(term.substr(1)));
    selector.requirements.push_back({key, LabelOp::kDoesNotExist, {}});
    return Status::Ok();
  }
  if (const size_t open = term.find('('); open != std::string_view::npos) {
    if (term.back() != ')') return InvalidArgument("expected ')' at the end");
    std::string_view head = TrimSpaces(term.substr(0, open));
    const size_t space = head.rfind(' ');
    const std::string_view word = space == std::string_view::npos ? "" : head.substr(space + 1);
    if (word != "in" && word != "notin") {
      return InvalidArgument("expected KEY in (VALUES) or KEY notin (VALUES)");
    }
    LabelRequirement req;
    COHORT_ASSIGN_OR_RETURN(req.key, key_of(head.substr(0, space)));
    req.op = word == "in" ? LabelOp::kIn : LabelOp::kNotIn;
    std::string_view list = term.substr(open + 1, term.size() - open - 2);
    if (TrimSpaces(list).empty()) return InvalidArgument("no values in the parentheses");
    for (size_t start = 0; start <= list.size();) {
      size_t comma = list.find(',', start);
      if (comma == std::string_view::npos) comma = list.size();
      COHORT_ASSIGN_OR_RETURN(std::string value,
                              value_of(req.key, list.substr(start, comma - start)));
      req.values.push_back(std::move(value));
      start = comma + 1;
    }
    std::sort(req.values.begin(), req.values.end());
    req.values.erase(std::unique(req.values.begin(), req.values.end()), req.values.end());
    selector.requirements.push_back(std::move(req));
    return Status::Ok();
  }
  if (const size_t op = term.find_first_of("!=<>"); op != std::string_view::npos) {
    COHORT_ASSIGN_OR_RETURN(std::string key, key_of(term.substr(0, op)));
    std::string_view rest = term.substr(op);
    if (rest.substr(0, 2) == "!=") {
      COHORT_ASSIGN_OR_RETURN(std::string value, value_of(key, rest.substr(2)));
      selector.requirements.push_back({key, LabelOp::kNotIn, {value}});
      return Status::Ok();
    }
    if (rest.front() == '<' || rest.front() == '>') {
      const std::string_view number = TrimSpaces(rest.substr(1));
      if (!LabelInteger(number)) {
        return InvalidArgument("expected an integer after " + std::string(1, rest.front()));
      }
      selector.requirements.push_back(
          {key, rest.front() == '>' ? LabelOp::kGt : LabelOp::kLt, {std::string(number)}});
      return Status::Ok();
    }
    if (rest.front() != '=') return InvalidArgument("expected =, !=, in, notin, < or >");
    rest.remove_prefix(rest.substr(0, 2) == "==" ? 2 : 1);
    COHORT_ASSIGN_OR_RETURN(std::string value, value_of(key, rest));
    auto [it, added] = selector.labels.emplace(key, value);
    if (!added && it->second != value) {
      return InvalidArgument("label " + Quoted(key) + " asked to be both " + Quoted(it->second) +
                             " and " + Quoted(value));
    }
    return Status::Ok();
  }
  COHORT_ASSIGN_OR_RETURN(std::string key, key_of(term));
  selector.requirements.push_back({key, LabelOp::kExists, {}});
  return Status::Ok();
}

}  // namespace

StatusOr<NodeSelector> ParseNodeSelector(std::string_view text) {
  NodeSelector selector;
  if (text.size() > kMaxNodeSelectorBytes) {
    return InvalidArgument("selector: at most " + std::to_string(kMaxNodeSelectorBytes) +
                           " bytes, got " + std::to_string(text.size()));
  }
  if (TrimSpaces(text).empty()) return selector;
  StatusOr<std::vector<std::string_view>> terms = SelectorTerms(text);
  if (!terms.ok()) {
    return InvalidArgument("selector " + Quoted(text) + ": " + terms.status().message());
  }
  for (std::string_view term : *terms) {
    if (Status added = AddSelectorTerm(term, selector); !added.ok()) {
      return InvalidArgument("selector " + Quoted(text) + ": " + Quoted(term) + ": " +
                             added.message());
    }
  }
  return selector;
}

std::string NodeSelectorFields(const NodeSelector& selector) {
  if (selector.requirements.empty()) return "node_selector";
  return selector.labels.empty() ? "node_affinity" : "node_selector, node_affinity";
}

std::string FormatNodeLabels(const NodeLabels& labels) {
  std::string out;
  for (const auto& [key, value] : labels) out += (out.empty() ? "" : ",") + key + "=" + value;
  return out;
}

StatusOr<NodeLabels> ParseNodeLabels(std::string_view text) {
  NodeLabels labels;
  for (size_t start = 0; start < text.size();) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    COHORT_ASSIGN_OR_RETURN(auto label, ParseNodeLabel(text.substr(start, comma - start)));
    labels[label.first] = label.second;
    start = comma + 1;
  }
  return labels;
}

std::optional<int> JobSpec::MinWorkers() const {
  const WorkerPoolSpec* workers = FindPool(Role::kWorker);
  if (workers == nullptr || !workers->min_replicas || *workers->min_replicas >= workers->replicas) {
    return std::nullopt;
  }
  return workers->min_replicas;
}

bool JobSpec::RestartsWholeJob() const {
  return scheduling.restart_job_on_worker_restart.value_or(IsOneCollectiveGroup());
}

bool JobSpec::IsOneCollectiveGroup() const {
  int ranks = 0;
  for (const auto& pool : pools) {
    if (pool.role == Role::kParameterServer) return false;
    if (pool.role != Role::kEvaluator) ranks += pool.replicas;
  }
  return ranks > 1;
}

std::string JobSpec::RestartReason() const {
  const std::optional<bool>& said = scheduling.restart_job_on_worker_restart;
  if (said.has_value()) {
    return *said ? "restart_job_on_worker_restart" : "restart_job_on_worker_restart: false";
  }
  if (IsOneCollectiveGroup()) return "its ranks are one group: restart_job_on_worker_restart unset";
  if (FindPool(Role::kParameterServer) != nullptr) {
    return "a parameter-server job: restart_job_on_worker_restart unset";
  }
  return "restart_job_on_worker_restart unset";
}

std::string JobSpec::RestartRule() const {
  if (!RestartsWholeJob()) return "the replica that fell (" + RestartReason() + ")";
  std::string rule = "the whole job (" + RestartReason() + ")";
  if (!scheduling.restart_job_on_worker_restart.has_value() &&
      FindPool(Role::kEvaluator) != nullptr) {
    rule += ", an evaluator alone";
  }
  return rule;
}

int JobSpec::TotalReplicas() const {
  int total = 0;
  for (const auto& pool : pools) total += pool.replicas;
  return total;
}

StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  const std::string original(text);
  auto bad = [&](const std::string& why) {
    return InvalidArgument("invalid duration " + Quoted(original) + ": " + why +
                           " (examples: 7d, 12h, 30m, 45s, 1500ms, 1h30m, or bare seconds)");
  };
  // Trim surrounding blanks.
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  if (text.empty()) return bad("empty");
  if (text.front() == '-') return bad("must not be negative");

  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t total_ms = 0;
  bool first = true;
  while (!text.empty()) {
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec == std::errc::result_out_of_range) return bad("too large");
    if (ec != std::errc() || n < 0) return bad("expected a number");
    text.remove_prefix(ptr - text.data());
    std::string_view unit;
    size_t u = 0;
    while (u < text.size() && IsAsciiAlpha(text[u])) ++u;
    unit = text.substr(0, u);
    text.remove_prefix(u);
    int64_t scale_ms = 0;
    if (unit.empty()) {
      if (!first || !text.empty()) return bad("missing unit");
      scale_ms = 1000;  // bare integer: seconds
    } else if (unit == "ms") {
      scale_ms = 1;
    } else if (unit == "s") {
      scale_ms = 1000;
    } else if (unit == "m") {
      scale_ms = 60 * 1000;
    } else if (unit == "h") {
      scale_ms = 3600 * 1000;
    } else if (unit == "d") {
      scale_ms = 86400LL * 1000;
    } else {
      return bad("unknown unit " + Quoted(unit));
    }
    if (n > kMax / scale_ms || total_ms > kMax - n * scale_ms) return bad("too large");
    total_ms += n * scale_ms;
    first = false;
  }
  return std::chrono::milliseconds(total_ms);
}

namespace {

// scheduling.array and scheduling.array_index (see ArraySpec).
Status ValidateArray(const JobSpec& spec) {
  const ArraySpec& a = spec.scheduling.array;
  if (a.indexes.empty()) {
    if (a.index) return InvalidArgument("scheduling.array_index: only a task of an array has one");
    return Status::Ok();
  }
  if (a.indexes.size() > kMaxArrayTasks) {
    return InvalidArgument("scheduling.array: at most " + std::to_string(kMaxArrayTasks) +
                           " tasks, got " + std::to_string(a.indexes.size()));
  }
  if (!std::is_sorted(a.indexes.begin(), a.indexes.end()) ||
      std::adjacent_find(a.indexes.begin(), a.indexes.end()) != a.indexes.end() ||
      a.indexes.front() < 0 || a.indexes.back() > kMaxArrayIndex || a.parallelism < 0) {
    return InvalidArgument("scheduling.array: " + Quoted(FormatArraySpec(a)) +
                           " is not a valid array");
  }
  const std::string longest = "-" + std::to_string(a.indexes.back());
  if (!spec.name_prefix.empty()) {
    // A generated name adds 9 characters; the array's name must stay a label value.
    if (spec.name_prefix.size() + 9 > kMaxArrayNameLength) {
      return InvalidArgument("name_prefix: an array's name is at most " +
                             std::to_string(kMaxArrayNameLength) +
                             " characters (its tasks' label cohort/array), so its prefix at most " +
                             std::to_string(kMaxArrayNameLength - 9));
    }
    if (a.index) return InvalidArgument("scheduling.array_index: a task has a name, not a prefix");
    return Status::Ok();
  }
  if (!a.index) {
    if (spec.name.size() > kMaxArrayNameLength) {
      return InvalidArgument(
          "name: an array's name is at most " + std::to_string(kMaxArrayNameLength) +
          " characters (its tasks' label cohort/array), got " + std::to_string(spec.name.size()));
    }
    if (spec.name.size() + longest.size() > kMaxNameLength) {
      return InvalidArgument("name: too long for its tasks' names (<name>" + longest + ")");
    }
    return Status::Ok();
  }
  if (!std::binary_search(a.indexes.begin(), a.indexes.end(), *a.index)) {
    return InvalidArgument("scheduling.array_index: " + std::to_string(*a.index) +
                           " is not an index of scheduling.array " + Quoted(FormatArraySpec(a)));
  }
  const std::string suffix = "-" + std::to_string(*a.index);
  if (!spec.name.ends_with(suffix) || spec.name.size() == suffix.size() ||
      spec.ArrayName().size() > kMaxArrayNameLength) {
    return InvalidArgument("name: task " + std::to_string(*a.index) +
                           " of an array is named <array>" + suffix + " (an array's name of at " +
                           "most " + std::to_string(kMaxArrayNameLength) + " characters), got " +
                           Quoted(spec.name));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateJobSpec(const JobSpec& spec) {
  if (!spec.name_prefix.empty()) {
    if (!spec.name.empty())
      return InvalidArgument("name_prefix: give name or name_prefix, not both");
    if (!IsValidJobName(spec.name_prefix) || spec.name_prefix.size() > kMaxNamePrefixLength) {
      return InvalidArgument("name_prefix: " + Quoted(spec.name_prefix) +
                             " is not a valid name prefix (must match "
                             "[A-Za-z][A-Za-z0-9_-]{0,118}: a suffix of 9 characters is added)");
    }
  } else if (!IsValidJobName(spec.name)) {
    return InvalidArgument("name: " + Quoted(spec.name) +
                           " is not a valid job name (must match [A-Za-z][A-Za-z0-9_-]{0,127})");
  }
  if (!spec.output_dir.empty() && spec.output_dir.front() != '/') {
    return InvalidArgument("output_dir: must be an absolute path, got " + Quoted(spec.output_dir));
  }
  if (spec.output_dir.find('\0') != std::string::npos) {
    return InvalidArgument("output_dir: contains a NUL byte");
  }
  if (!IsValidUtf8(spec.output_dir)) return InvalidArgument("output_dir: is not valid UTF-8");
  // The labels under kReservedLabelPrefix are the parser's (a task's array labels) alone.
  NodeLabels own = spec.labels;
  if (spec.IsArrayTask()) {
    for (std::string_view key : {kArrayLabel, kArrayIndexLabel}) own.erase(std::string(key));
  }
  for (const auto& [key, value] : own) {
    if (key.starts_with(kReservedLabelPrefix)) {
      return InvalidArgument("labels: " + Quoted(key) + ": keys under " +
                             std::string(kReservedLabelPrefix) +
                             " are Cohort's own (an array task's cohort/array and "
                             "cohort/array-index)");
    }
  }
  COHORT_RETURN_IF_ERROR(CheckLabels(own, "labels", kMaxJobLabels));
  if (spec.pools.empty()) {
    return InvalidArgument("worker_pools: at least one pool (the chief) is required");
  }
  if (spec.pools.size() > static_cast<size_t>(kMaxPools)) {
    return InvalidArgument("worker_pools: at most " + std::to_string(kMaxPools) + " pools, got " +
                           std::to_string(spec.pools.size()));
  }
  std::map<int, size_t> pool_slot;  // pool index -> position in spec.pools
  for (size_t i = 0; i < spec.pools.size(); ++i) {
    const WorkerPoolSpec& pool = spec.pools[i];
    const std::string path = "worker_pools[" + std::to_string(i) + "]";
    int index = PoolIndex(pool.role);
    auto [it, inserted] = pool_slot.emplace(index, i);
    if (!inserted) {
      const WorkerPoolSpec& other = spec.pools[it->second];
      std::string why = other.role == pool.role
                            ? "role " + std::string(RoleName(pool.role)) + " appears twice"
                            : "roles parameter_server and reducer share pool 2; a job has "
                              "one or the other";
      return InvalidArgument(path + ".role: " + why + " (also worker_pools[" +
                             std::to_string(it->second) + "])");
    }
    COHORT_RETURN_IF_ERROR(ValidatePool(pool, path));
  }
  if (pool_slot.count(0) == 0) {
    return InvalidArgument("worker_pools: a chief pool (role: chief) is required");
  }
  const SchedulingSpec& s = spec.scheduling;
  if (spec.MinWorkers() && !spec.RestartsWholeJob()) {
    return InvalidArgument("worker_pools[" + std::to_string(pool_slot[1]) +
                           "].min_replicas: an elastic worker pool needs "
                           "scheduling.restart_job_on_worker_restart: true (every change of its "
                           "size restarts the whole job, as its ranks cannot change their group)");
  }
  if (s.timeout.count() <= 0) {
    return InvalidArgument("scheduling.timeout: must be positive, got " +
                           std::to_string(s.timeout.count()) + "s");
  }
  for (auto [key, limit] :
       {std::pair{"hang_timeout", s.hang_timeout}, std::pair{"max_wait", s.max_wait}}) {
    if (limit.count() < 0) {
      return InvalidArgument(std::string("scheduling.") + key + ": must not be negative, got " +
                             std::to_string(limit.count()) + "ms");
    }
  }
  if (s.progress == ProgressSource::kGpus &&
      std::none_of(spec.pools.begin(), spec.pools.end(),
                   [](const WorkerPoolSpec& pool) { return pool.resources.gpus > 0; })) {
    return InvalidArgument(
        "scheduling.progress: gpus watches the GPUs the job's replicas hold, and no pool asks "
        "for any (resources.gpus); use progress: logs or metrics");
  }
  if (s.finish_grace.count() < 0 || s.finish_grace > kMaxFinishGrace) {
    return InvalidArgument("scheduling.finish_grace: must be in 0s..1h, got " +
                           std::to_string(s.finish_grace.count()) + "ms");
  }
  if (s.after.size() > kMaxAfterJobs) {
    return InvalidArgument("scheduling.after: at most " + std::to_string(kMaxAfterJobs) +
                           " jobs, got " + std::to_string(s.after.size()));
  }
  for (size_t i = 0; i < s.after.size(); ++i) {
    const std::string& name = s.after[i].job;
    if (!IsValidJobName(name)) {
      return InvalidArgument("scheduling.after[" + std::to_string(i) + "]: " + Quoted(name) +
                             " is not a job name ([A-Za-z][A-Za-z0-9_-]{0,127})");
    }
    auto earlier = s.after.begin() + static_cast<std::ptrdiff_t>(i);
    if (std::find_if(s.after.begin(), earlier,
                     [&](const JobDependency& d) { return d.job == name; }) != earlier) {
      return InvalidArgument("scheduling.after[" + std::to_string(i) + "]: job " + name +
                             " is named twice");
    }
    if (name == spec.name) {
      return InvalidArgument("scheduling.after[" + std::to_string(i) +
                             "]: a job cannot run after itself");
    }
  }
  // Counted first: the checks below compare each key with the ones before it.
  if (s.TopologyLevels().size() > kMaxTopologyLevels) {
    return InvalidArgument("scheduling: at most " + std::to_string(kMaxTopologyLevels) +
                           " topology levels (preferred_topology and required_topology), got " +
                           std::to_string(s.TopologyLevels().size()));
  }
  if (!s.required_topology.empty()) {
    if (Status bad = CheckNodeLabel(s.required_topology, ""); !bad.ok()) {
      return InvalidArgument("scheduling.required_topology: " + bad.message());
    }
  }
  for (size_t i = 0; i < s.preferred_topology.size(); ++i) {
    const std::string& key = s.preferred_topology[i];
    const std::string field = s.preferred_topology.size() == 1
                                  ? "scheduling.preferred_topology"
                                  : "scheduling.preferred_topology[" + std::to_string(i) + "]";
    if (Status bad = CheckNodeLabel(key, ""); !bad.ok()) {
      return InvalidArgument(field + ": " + bad.message());
    }
    if (key == s.required_topology) {
      return InvalidArgument(field + ": " + key +
                             " is the required_topology already (a preferred level is a tighter "
                             "one inside it)");
    }
    if (std::find(s.preferred_topology.begin(), s.preferred_topology.begin() + i, key) !=
        s.preferred_topology.begin() + i) {
      return InvalidArgument(field + ": " + key + " is named twice");
    }
  }
  COHORT_RETURN_IF_ERROR(ValidateArray(spec));
  if (s.max_restarts < 0 || s.max_restarts > kMaxRestarts) {
    return InvalidArgument("scheduling.max_restarts: must be in 0.." +
                           std::to_string(kMaxRestarts) + ", got " +
                           std::to_string(s.max_restarts));
  }
  if (!IsValidSchedulingName(s.queue)) {
    return InvalidArgument("scheduling.queue: " + Quoted(s.queue) +
                           " is not a queue name ([A-Za-z][A-Za-z0-9_-]{0,63})");
  }
  if (!IsValidSchedulingName(s.priority)) {
    return InvalidArgument("scheduling.priority: " + Quoted(s.priority) +
                           " is not a priority class name (low, normal, high, or one the "
                           "coordinator defines)");
  }
  return Status::Ok();
}

}  // namespace cohort
