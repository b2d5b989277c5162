// The name a user probably meant when they typed one nobody knows: a job file's key, a flag, a
// verb, a config option. NearestName("worker_pool", {"name", "worker_pools"}) == "worker_pools";
// DidYouMean() puts it in the words the error messages end with: " (did you mean
// 'worker_pools'?)", or "" when no name is near enough to be worth saying.
//
// Near: at most one edit (insertion, deletion, substitution, or two neighbours swapped) per three
// characters of the longer name, at least one and at most three, case ignored; or a name that the
// typed text (three characters or more) opens up to a '_', '-' or '.' ("memory" for "memory_mb").
// Of several, the fewest edits wins, then the first given.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cohort {

std::string NearestName(std::string_view typed, const std::vector<std::string_view>& names);
std::string DidYouMean(std::string_view typed, const std::vector<std::string_view>& names);

}  // namespace cohort
