#include "common/nearest_name.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace cohort {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Optimal string alignment distance: Levenshtein's edits plus a swap of two neighbours.
size_t EditDistance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

// `name` begins with `typed` and goes on after a separator: "memory" of "memory_mb".
bool OpensUpTo(const std::string& typed, const std::string& name) {
  if (typed.size() < 3 || name.size() <= typed.size()) return false;
  const char next = name[typed.size()];
  return name.compare(0, typed.size(), typed) == 0 && (next == '_' || next == '-' || next == '.');
}

}  // namespace

std::string NearestName(std::string_view typed, const std::vector<std::string_view>& names) {
  // Long texts are nobody's typo of a short name; the bound keeps the table small too.
  constexpr size_t kLongest = 64;
  if (typed.empty() || typed.size() > kLongest) return "";
  const std::string t = Lower(typed);
  std::string_view best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (std::string_view name : names) {
    if (name.empty() || name.size() > kLongest) continue;
    const std::string n = Lower(name);  // "GPUs" for "gpus": 0 edits, the nearest of all
    const size_t allowed = std::clamp<size_t>(std::max(t.size(), n.size()) / 3, 1, 3);
    size_t distance = EditDistance(t, n);
    if (distance > allowed) {
      if (!OpensUpTo(t, n)) continue;
      distance = allowed + 1;  // after every real near miss
    }
    if (distance < best_distance) {
      best_distance = distance;
      best = name;
    }
  }
  return std::string(best);
}

std::string DidYouMean(std::string_view typed, const std::vector<std::string_view>& names) {
  const std::string nearest = NearestName(typed, names);
  return nearest.empty() ? "" : " (did you mean '" + nearest + "'?)";
}

}  // namespace cohort
