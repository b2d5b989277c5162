// IEEE binary16 (f16) and bfloat16 (bf16) conversions to and from float, written branch-free so
// the reduce loops that use them vectorize. Rounding is round-to-nearest-even; NaN stays NaN,
// overflow becomes infinity, and f16 subnormals are exact.
#pragma once

#include <bit>
#include <cstdint>

namespace cohort::collective {

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  // Shift exponent+mantissa into float position and rescale by 2^112: handles normals and
  // subnormals in one multiply. Inf/NaN (exponent all ones) get the float exponent forced.
  float f = std::bit_cast<float>(em << 13) * 0x1p112f;
  uint32_t bits = std::bit_cast<uint32_t>(f);
  bits |= (0u - static_cast<uint32_t>(em >= 0x7c00u)) & 0x7f800000u;
  return std::bit_cast<float>(bits | sign);
}

inline uint16_t FloatToHalf(float value) {
  uint32_t f = std::bit_cast<uint32_t>(value);
  const uint32_t sign = f & 0x80000000u;
  f ^= sign;
  // Large: infinity, or a quiet NaN.
  const uint32_t big = 0x7c00u | (static_cast<uint32_t>(f > 0x7f800000u) << 9);
  // Small (result is subnormal or zero): let the FPU round by adding 0.5 (denormal magic).
  const float denorm_magic = 0.5f;
  const uint32_t small = std::bit_cast<uint32_t>(std::bit_cast<float>(f) + denorm_magic) -
                         std::bit_cast<uint32_t>(denorm_magic);
  // Normal: rebias exponent and round to nearest even.
  const uint32_t mant_odd = (f >> 13) & 1u;
  const uint32_t normal = (f + 0xc8000fffu + mant_odd) >> 13;  // 0xc8000fff = ((15-127)<<23)+0xfff
  // Select with masks, not branches, so the loops that call this vectorize.
  const uint32_t is_big = 0u - static_cast<uint32_t>(f >= 0x47800000u);
  const uint32_t is_small = ~is_big & (0u - static_cast<uint32_t>(f < 0x38800000u));
  const uint32_t out = (big & is_big) | (small & is_small) | (normal & ~is_big & ~is_small);
  return static_cast<uint16_t>(out | (sign >> 16));
}

inline float BFloat16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t FloatToBFloat16(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  const bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(is_nan ? nan : rounded);
}

}  // namespace cohort::collective
