// JoinWith({"a", "b"}, "; ") == "a; b", JoinWithCommas({"a", "b", "c"}) == "a, b, c" and
// JoinFirst({"a", "b", "c", "d"}, 2) == "a, b and 2 more": the lists in the daemons' messages and
// events ("" for none); Counted(1, "replica") == "1 replica", Counted(3, "GPU") == "3 GPUs": the
// counts in them.
#pragma once

#include <cstddef>
#include <cstdint>
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

// `n` and `unit`, plural (an "s" added) unless n is 1.
inline std::string Counted(int64_t n, std::string_view unit) {
  return std::to_string(n) + " " + std::string(unit) + (n == 1 ? "" : "s");
}

}  // namespace cohort
