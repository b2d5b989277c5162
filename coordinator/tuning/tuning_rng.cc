#include "coordinator/tuning/tuning_rng.h"

#include <cmath>

namespace cohort::coordinator::tuning {

namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

TuningRng::TuningRng(uint64_t seed) {
  uint64_t state = seed;
  for (uint64_t& s : s_) s = SplitMix64(&state);
}

TuningRng TuningRng::ForTrial(uint64_t seed, uint64_t index, uint64_t stream) {
  uint64_t state = seed;
  uint64_t a = SplitMix64(&state);
  state = a ^ (index * 0xd1b54a32d192ed03ULL);
  uint64_t b = SplitMix64(&state);
  state = b ^ (stream * 0xa0761d6478bd642fULL);
  return TuningRng(SplitMix64(&state));
}

uint64_t TuningRng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double TuningRng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

double TuningRng::Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

uint64_t TuningRng::UniformInt(uint64_t n) {
  // Lemire's multiply-shift; the bias for the small n used here is far below 2^-40.
  return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
}

double TuningRng::Normal() {
  double u1 = Uniform();
  double u2 = Uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace cohort::coordinator::tuning
