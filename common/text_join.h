// JoinWith({"a", "b"}, "; ") == "a; b" and JoinWithCommas({"a", "b", "c"}) == "a, b, c": the
// lists in the daemons' messages and events ("" for none).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cohort {

inline std::string JoinWith(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += separator;
    out += p;
  }
  return out;
}

inline std::string JoinWithCommas(const std::vector<std::string>& parts) {
  return JoinWith(parts, ", ");
}

}  // namespace cohort
