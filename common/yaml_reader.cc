#include "common/yaml_reader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include "common/enum_names.h"
#include "common/nearest_name.h"

namespace cohort {

std::string Quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

Status YamlReader::Error(const YAML::Node& node, const std::string& path,
                         const std::string& what) const {
  std::string m = source_ + Mark(node);
  m += ": " + (path.empty() ? std::string("(document)") : path) + ": " + what;
  return InvalidArgument(std::move(m));
}

std::string YamlReader::Mark(const YAML::Node& node) {
  YAML::Mark mark = node.Mark();
  if (mark.is_null()) return "";
  return ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::string YamlReader::KindName(const YAML::Node& node) {
  static constexpr EnumName<YAML::NodeType::value> kKinds[] = {
      {YAML::NodeType::Null, "null"},
      {YAML::NodeType::Scalar, "a scalar"},
      {YAML::NodeType::Sequence, "a list"},
      {YAML::NodeType::Map, "a mapping"},
      {YAML::NodeType::Undefined, "nothing"}};
  return std::string(NameIn(kKinds, node.Type(), "?"));
}

std::string YamlReader::Join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

bool YamlReader::Has(const YAML::Node& map, const char* key) {
  YAML::Node child = map[key];
  return child.IsDefined() && !child.IsNull();
}

Status YamlReader::CheckMap(const YAML::Node& node, const std::string& path,
                            std::initializer_list<std::string_view> allowed) const {
  if (!node.IsMap()) return Error(node, path, "expected a mapping, got " + KindName(node));
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) return Error(kv.first, path, "keys must be strings");
    const std::string& k = kv.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      return Error(kv.first, Join(path, k),
                   "unknown key" + DidYouMean(k, std::vector<std::string_view>(allowed)));
    }
    if (!seen.insert(k).second) return Error(kv.first, Join(path, k), "duplicate key");
  }
  return Status::Ok();
}

Status YamlReader::CheckUserMap(const YAML::Node& node, const std::string& path) const {
  if (!node.IsMap()) return Error(node, path, "expected a mapping, got " + KindName(node));
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) return Error(kv.first, path, "keys must be strings");
    if (!seen.insert(kv.first.Scalar()).second) {
      return Error(kv.first, Join(path, kv.first.Scalar()), "duplicate key");
    }
  }
  return Status::Ok();
}

StatusOr<std::string> YamlReader::String(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar()) return Error(node, path, "expected a string, got " + KindName(node));
  return node.Scalar();
}

StatusOr<std::string> YamlReader::RequiredString(const YAML::Node& map, const char* key,
                                                 const std::string& path,
                                                 std::string_view hint) const {
  if (!Has(map, key)) {
    return Error(map, path, hint.empty() ? "required" : "required (" + std::string(hint) + ")");
  }
  return String(map[key], path);
}

StatusOr<std::vector<std::string>> YamlReader::StringList(const YAML::Node& node,
                                                          const std::string& path) const {
  if (!node.IsSequence()) {
    return Error(node, path, "expected a list of strings, got " + KindName(node));
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < node.size(); ++i) {
    COHORT_ASSIGN_OR_RETURN(std::string s, String(node[i], path + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(s));
  }
  return out;
}

StatusOr<int64_t> YamlReader::Int(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar() || node.Tag() == "!") {
    return Error(node, path,
                 "expected an integer, got " +
                     (node.IsScalar() ? "string " + Quoted(node.Scalar()) : KindName(node)));
  }
  const std::string& s = node.Scalar();
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  if (begin != end && *begin == '+') ++begin;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec == std::errc::result_out_of_range) return Error(node, path, "integer out of range: " + s);
  if (begin == end || ec != std::errc() || ptr != end) {
    return Error(node, path, "expected an integer, got " + Quoted(s));
  }
  return v;
}

StatusOr<int> YamlReader::SmallInt(const YAML::Node& node, const std::string& path) const {
  COHORT_ASSIGN_OR_RETURN(int64_t v, Int(node, path));
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    return Error(node, path, "out of range");
  }
  return static_cast<int>(v);
}

StatusOr<double> YamlReader::Number(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar() || node.Tag() == "!") {
    return Error(node, path,
                 "expected a number, got " +
                     (node.IsScalar() ? "string " + Quoted(node.Scalar()) : KindName(node)));
  }
  StatusOr<double> v = ParseDoubleText(node.Scalar());
  if (!v.ok()) return Error(node, path, v.status().message());
  return *v;
}

StatusOr<bool> YamlReader::Bool(const YAML::Node& node, const std::string& path) const {
  if (node.IsScalar() && node.Tag() != "!") {
    std::string s = node.Scalar();
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
  }
  return Error(node, path,
               "expected a boolean (true or false), got " +
                   (node.IsScalar() ? Quoted(node.Scalar()) : KindName(node)));
}

StatusOr<double> ParseDoubleText(std::string_view text) {
  std::string_view s = text;
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) {
    return InvalidArgument("expected a finite number, got " + Quoted(text));
  }
  return v;
}

Status YamlExceptionStatus(std::string_view source, const std::exception& e) {
  std::string m(source);
  if (const auto* yaml = dynamic_cast<const YAML::Exception*>(&e)) {
    if (!yaml->mark.is_null()) {
      m += ":" + std::to_string(yaml->mark.line + 1) + ":" + std::to_string(yaml->mark.column + 1);
    }
    return InvalidArgument(m + ": malformed YAML: " + yaml->msg);
  }
  return InvalidArgument(m + ": " + e.what());
}

StatusOr<std::string> EditYamlMap(std::string_view yaml, std::string_view what,
                                  const std::function<Status(YAML::Node&)>& edit) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
    if (!root.IsMap())
      return InvalidArgument("the " + std::string(what) + " is not a YAML map of keys");
    COHORT_RETURN_IF_ERROR(edit(root));
  } catch (const YAML::Exception& e) {
    return InvalidArgument("the " + std::string(what) + " is not valid YAML: " + e.what());
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str());
}

}  // namespace cohort
