// Fnv1a: the 64-bit FNV-1a hash, for short fingerprints that must be the same in every process
// and build (a shape of scheduling demand, an all-reduce's tensor list, a transport's name), where
// std::hash promises nothing across processes. Not for hash tables under hostile input.
#pragma once

#include <cstdint>
#include <string_view>

namespace cohort {

class Fnv1a {
 public:
  // Mixes in one whole word (a count, an enum), as one step.
  Fnv1a& Add(uint64_t word) {
    value_ = (value_ ^ word) * kPrime;
    return *this;
  }
  // Mixes in every byte of `bytes`, one step each.
  Fnv1a& Add(std::string_view bytes) {
    for (unsigned char c : bytes) Add(uint64_t{c});
    return *this;
  }
  uint64_t value() const { return value_; }

 private:
  static constexpr uint64_t kPrime = 1099511628211ull;
  uint64_t value_ = 1469598103934665603ull;
};

}  // namespace cohort
