// YamlReader walks a yaml-cpp document for the job and study parsers (common/job_spec.h,
// common/study_spec.h) and turns every problem into an InvalidArgument naming the source, the
// line and column, and the dotted field path: "job.yaml:5:3: worker_pools[0].resorces: unknown
// key (did you mean 'resources'?)". Scalars are read strictly: a quoted "1" is not an integer, and
// unknown or duplicate keys are errors, so a typo is never silently ignored.
//
// ReadYamlDocument() loads the text and calls `read` on the root, converting every exception
// yaml-cpp throws (malformed YAML, bad conversions) into a Status, so no exception escapes.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "common/enum_names.h"
#include "common/status.h"

namespace cohort {

// 'text', as error messages quote user values.
std::string Quoted(std::string_view text);

class YamlReader {
 public:
  explicit YamlReader(std::string_view source) : source_(source) {}

  const std::string& source() const { return source_; }

  // "<source>:<line>:<col>: <path>: <what>"
  Status Error(const YAML::Node& node, const std::string& path, const std::string& what) const;
  // ":<line>:<col>", or empty when the node has no position.
  static std::string Mark(const YAML::Node& node);
  // "a mapping", "a list", "a scalar", "null", "nothing".
  static std::string KindName(const YAML::Node& node);
  // path + "." + key (just key at the top).
  static std::string Join(const std::string& path, std::string_view key);
  // A present, non-null child.
  static bool Has(const YAML::Node& map, const char* key);

  // A map whose keys are scalars from `allowed`, each at most once; an unknown key's error names
  // the allowed one nearest to it (common/nearest_name.h).
  Status CheckMap(const YAML::Node& node, const std::string& path,
                  std::initializer_list<std::string_view> allowed) const;
  // A map with scalar keys, each at most once, any names (a user's env block).
  Status CheckUserMap(const YAML::Node& node, const std::string& path) const;

  StatusOr<std::string> String(const YAML::Node& node, const std::string& path) const;
  StatusOr<std::vector<std::string>> StringList(const YAML::Node& node,
                                                const std::string& path) const;
  // A plain (unquoted) decimal integer.
  StatusOr<int64_t> Int(const YAML::Node& node, const std::string& path) const;
  // Int within the range of int.
  StatusOr<int> SmallInt(const YAML::Node& node, const std::string& path) const;
  // A plain finite number.
  StatusOr<double> Number(const YAML::Node& node, const std::string& path) const;
  // true/false (also yes/no, on/off), unquoted.
  StatusOr<bool> Bool(const YAML::Node& node, const std::string& path) const;
  // The list under `key` of `map`, each element read by read(element, "key[i]"): "required
  // (<required>)" when it is absent, an error when it is not a list.
  template <typename T, typename ReadOne>
  StatusOr<std::vector<T>> RequiredList(const YAML::Node& map, const char* key,
                                        std::string_view required, ReadOne read) const {
    if (!Has(map, key)) return Error(map, key, "required (" + std::string(required) + ")");
    return List<T>(map, key, "", read);
  }
  // The list under `key` of `map` (which is at `path`), each element read by read(element,
  // "<path>.key[i]"): empty when it is absent, an error when it is not a list.
  template <typename T, typename ReadOne>
  StatusOr<std::vector<T>> List(const YAML::Node& map, const char* key, const std::string& path,
                                ReadOne read) const {
    std::vector<T> out;
    if (!Has(map, key)) return out;
    const YAML::Node list = map[key];
    const std::string at = Join(path, key);
    if (!list.IsSequence()) return Error(list, at, "expected a list, got " + KindName(list));
    for (size_t i = 0; i < list.size(); ++i) {
      StatusOr<T> item = read(list[i], at + "[" + std::to_string(i) + "]");
      if (!item.ok()) return item.status();
      out.push_back(std::move(*item));
    }
    return out;
  }
  // A scalar that names a value in `names` (common/enum_names.h); otherwise an error
  // "unknown <what> 'text' (a, b or c)" listing the table's names.
  template <typename E, size_t N>
  StatusOr<E> Enum(const YAML::Node& node, const std::string& path, const EnumName<E> (&names)[N],
                   std::string_view what) const {
    StatusOr<std::string> text = String(node, path);
    if (!text.ok()) return text.status();
    if (std::optional<E> value = ValueIn(names, *text)) return *value;
    return Error(
        node, path,
        "unknown " + std::string(what) + " " + Quoted(*text) + " (" + ChoiceOf(names) + ")");
  }

  // The scalar under `key` of `map`, read as String() reads it with `path` naming it: "required"
  // (then " (<hint>)" when given) when it is absent.
  StatusOr<std::string> RequiredString(const YAML::Node& map, const char* key,
                                       const std::string& path, std::string_view hint = "") const;
  // The value under `key` of `map` that names one of `names`, read as Enum() reads it: "required
  // (a, b or c)" when it is absent.
  template <typename E, size_t N>
  StatusOr<E> RequiredEnum(const YAML::Node& map, const char* key, const std::string& path,
                           const EnumName<E> (&names)[N], std::string_view what) const {
    if (!Has(map, key)) return Error(map, path, "required (" + ChoiceOf(names) + ")");
    return Enum(map[key], path, names, what);
  }

 private:
  std::string source_;
};

// Text to a finite double ("+1.5" allowed); an error quoting the text otherwise.
StatusOr<double> ParseDoubleText(std::string_view text);

// "<source>:<line>:<col>: malformed YAML: ..." for a yaml-cpp exception.
Status YamlExceptionStatus(std::string_view source, const std::exception& e);

// Loads `yaml` and returns read(root); yaml-cpp's exceptions become InvalidArgument.
template <typename Read>
auto ReadYamlDocument(std::string_view yaml, std::string_view source, Read read)
    -> decltype(read(std::declval<const YAML::Node&>())) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return read(root);
  } catch (const std::exception& e) {
    return YamlExceptionStatus(source, e);
  }
}

// The YAML text of a file whose top-level map `edit` changed, written anew (comments and the
// original layout are not kept): `cohort submit --name` and the like. Text that is not YAML or
// not a map is kInvalidArgument naming `what` ("the job file is not a YAML map of keys"); so is
// what `edit` returns.
StatusOr<std::string> EditYamlMap(std::string_view yaml, std::string_view what,
                                  const std::function<Status(YAML::Node&)>& edit);

}  // namespace cohort
