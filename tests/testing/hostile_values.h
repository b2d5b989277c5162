// HostileValues: hostile values for the fields of well-formed messages, the same sequence for a
// seed, for the tests that send a daemon what a broken or hostile peer would (the coordinator's
// from agents and clients, the agent's from a coordinator).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace cohort::testing {

class HostileValues {
 public:
  explicit HostileValues(uint32_t seed) : rng_(seed) {}
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<unsigned>(n)); }
  uint32_t Raw() { return rng_(); }
  // Empty, one of `names` (what exists: a job, a replica, a node; not empty), Boost's
  // placeholders, long, control characters and Latin-1, or random bytes.
  std::string Text(const std::vector<std::string>& names) {
    switch (Pick(8)) {
      case 0:
        return "";
      case 1:
      case 2:
        return names[static_cast<size_t>(Pick(static_cast<int>(names.size())))];
      case 3:
        return "%value% %canonical_option%";
      case 4:
        return std::string(300, 'x');
      case 5:
        return "caf\xe9\x1b[2J\n\t";
      default: {
        std::string bytes(static_cast<size_t>(Pick(24)), '\0');
        for (char& c : bytes) c = static_cast<char>(rng_());
        return bytes;
      }
    }
  }
  int64_t Number() {
    const int64_t values[] = {0, 1, -1, 7, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
    return values[Pick(8)];
  }

 private:
  std::mt19937 rng_;
};

}  // namespace cohort::testing
