// JoinWithCommas({"a", "b", "c"}) == "a, b, c": the lists of names in the daemons' messages and
// events ("" for none).
#pragma once

#include <string>
#include <vector>

namespace cohort {

inline std::string JoinWithCommas(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace cohort
