// SearchSpace maps a study's parameters onto the unit cube the search algorithms work in, and back.
//
// Encoding (one or more coordinates per parameter, each in [0, 1]):
//  - double: (f(v) - f(min)) / (f(max) - f(min)), f the scale: linear v, log ln v, reverse-log
//    -ln(max + min - v) (more resolution near max);
//  - integer: the same on [min - 0.5, max + 0.5], so each integer owns an equal-width bin and
//    decoding rounds;
//  - discrete: the value's position between the smallest and largest value under its scale
//    (0.5 when there is a single value); decoding takes the nearest value;
//  - categorical: one-hot, one coordinate per category; decoding takes the largest coordinate.
// Decode(Encode(a)) == a for every valid assignment, and Snap (Encode after Decode) moves any point
// of the cube onto the nearest feasible one.
//
// Thread safety: immutable after construction; safe to share.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/study_spec.h"
#include "coordinator/tuning/tuning_rng.h"

namespace cohort::coordinator::tuning {

class SearchSpace {
 public:
  explicit SearchSpace(const StudySpec& spec);

  const StudySpec& spec() const { return spec_; }
  int dims() const { return dims_; }  // encoded coordinates
  // Distinct points when no parameter is a double (and the count fits in 2^40), else nullopt.
  std::optional<uint64_t> finite_size() const { return finite_size_; }

  Eigen::VectorXd Encode(const Assignment& assignment) const;
  Assignment Decode(const Eigen::VectorXd& unit) const;
  Eigen::VectorXd Snap(const Eigen::VectorXd& unit) const { return Encode(Decode(unit)); }

  // A point drawn uniformly: continuous parameters uniformly on their scale, integers, discrete
  // values and categories with equal probability (linear scale) or log-weighted bins.
  Assignment Sample(TuningRng* rng) const;

  // The `index`-th point in grid order (file order, the last parameter varying fastest; integers
  // and discrete values ascending, categories in file order). Requires finite_size().
  Assignment GridPoint(uint64_t index) const;

  // A stable text key for de-duplication ("lr=0.01,hidden=32").
  std::string Key(const Assignment& assignment) const;

  // First encoded coordinate of parameter i, and how many it has.
  int offset(size_t i) const { return offsets_[i]; }
  int width(size_t i) const { return widths_[i]; }
  bool is_categorical(size_t i) const {
    return spec_.parameters[i].type == ParameterType::kCategorical;
  }

 private:
  double ToUnit(size_t i, double value) const;
  double FromUnit(size_t i, double unit) const;

  StudySpec spec_;
  int dims_ = 0;
  std::vector<int> offsets_;
  std::vector<int> widths_;
  std::optional<uint64_t> finite_size_;
};

}  // namespace cohort::coordinator::tuning
