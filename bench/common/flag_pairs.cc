#include "bench/common/flag_pairs.h"

#include <charconv>

namespace cohort::bench {

std::string ParseFlagPairs(int argc, char** argv, int first,
                           const std::map<std::string, FlagTarget>& flags) {
  for (int i = first; i < argc; i += 2) {
    const std::string name = argv[i];
    auto it = flags.find(name);
    if (it == flags.end()) return "unknown flag " + name;
    if (i + 1 >= argc) return name + " needs a value";
    const std::string value = argv[i + 1];
    if (auto* s = std::get_if<std::string*>(&it->second)) {
      **s = value;
      continue;
    }
    int* n = std::get<int*>(it->second);
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), *n);
    if (ec != std::errc() || end != value.data() + value.size()) {
      return name + " takes a whole number, not '" + value + "'";
    }
  }
  return "";
}

bool AsksForHelp(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

}  // namespace cohort::bench
