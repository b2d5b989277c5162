// TuningRng is the random source of the search algorithms: xoshiro256** seeded through SplitMix64,
// with its own uniform, integer and normal draws so that a seed gives the same suggestions on
// every platform and standard library (std:: distributions are implementation-defined).
//
// Thread safety: none; each suggestion makes its own generator (see ForTrial).
#pragma once

#include <cstdint>

namespace cohort::coordinator::tuning {

class TuningRng {
 public:
  explicit TuningRng(uint64_t seed);
  // The generator for the `index`-th suggestion of a study seeded with `seed` (a fixed mix of
  // both).
  static TuningRng ForTrial(uint64_t seed, uint64_t index, uint64_t stream = 0);

  uint64_t Next();
  double Uniform();  // [0, 1)
  double Uniform(double lo, double hi);
  uint64_t UniformInt(uint64_t n);  // [0, n); n > 0
  double Normal();                  // standard normal (Box-Muller)

 private:
  uint64_t s_[4];
};

}  // namespace cohort::coordinator::tuning
