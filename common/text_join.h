// JoinWith({"a", "b"}, "; ") == "a; b", JoinWithCommas({"a", "b", "c"}) == "a, b, c" and
// JoinFirst({"a", "b", "c", "d"}, 2) == "a, b and 2 more": the lists in the daemons' messages and
// events ("" for none).
#pragma once

#include <cstddef>
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

// The first `at_most` of `parts` joined by ", ", and how many more there are.
inline std::string JoinFirst(const std::vector<std::string>& parts, size_t at_most) {
  if (parts.size() <= at_most) return JoinWithCommas(parts);
  const std::vector<std::string> first(parts.begin(),
                                       parts.begin() + static_cast<std::ptrdiff_t>(at_most));
  return JoinWithCommas(first) + " and " + std::to_string(parts.size() - at_most) + " more";
}

}  // namespace cohort
