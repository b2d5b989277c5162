#include "collective/transport/placement.h"

#include <algorithm>

namespace cohort::collective {

Placement Placement::OneHost(int num_ranks, bool shared_memory) {
  Placement p;
  p.hosts.assign(static_cast<size_t>(std::max(0, num_ranks)), "local");
  p.shared_memory = shared_memory;
  return p;
}

bool Placement::AllOnHostOf(int rank, int first, int count) const {
  const int n = static_cast<int>(hosts.size());
  if (rank < 0 || rank >= n) return false;
  for (int r = std::max(first, 0); r < first + count && r < n; ++r) {
    if (hosts[r] != hosts[rank]) return false;
  }
  return true;
}

std::vector<std::vector<int>> Placement::GroupByHost(int num_ranks) const {
  std::vector<std::string> names;
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < num_ranks && r < static_cast<int>(hosts.size()); ++r) {
    const size_t h = std::find(names.begin(), names.end(), hosts[r]) - names.begin();
    if (h == names.size()) {
      names.push_back(hosts[r]);
      groups.emplace_back();
    }
    groups[h].push_back(r);
  }
  return groups;
}

}  // namespace cohort::collective
