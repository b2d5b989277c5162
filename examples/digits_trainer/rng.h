// Rng is the trainer's only source of randomness: a 64-bit Mersenne Twister with its own integer
// and float helpers, because the standard distributions differ between library implementations
// and a checkpointed run must replay the same numbers anywhere. Its state round-trips through
// SaveState()/LoadState(), so a resumed run continues the exact sequence.
//
// Thread safety: none; one Rng per trainer.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"

namespace cohort::examples {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  // Uniform in [0, n), unbiased (rejection sampling); n > 0.
  uint64_t UniformInt(uint64_t n);
  // Uniform in [lo, hi) with 53 bits of resolution.
  double Uniform(double lo, double hi);
  // Fisher-Yates shuffle of `values` driven by UniformInt.
  void Shuffle(std::vector<uint32_t>& values);

  // The engine state as text (the standard's operator<< format, portable across libraries).
  std::string SaveState() const;
  Status LoadState(const std::string& state);

 private:
  std::mt19937_64 engine_;
};

}  // namespace cohort::examples
