// The p-quantile (p in [0, 1]) of a bench's samples, nearest rank; 0 for none. Header only: the
// benches that use it link different parts of bench/common.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace cohort::bench {

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace cohort::bench
