// The digits data set (1797 8x8 grey-level images of handwritten digits, the UCI "optdigits" test
// set as scikit-learn ships it): loading from digits.csv.gz and the fixed-seed train/test split.
// Pixels (0..16) are scaled to [0, 1].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace cohort::examples {

inline constexpr int kDigitsFeatures = 64;
inline constexpr int kDigitsClasses = 10;
// Where Debian's python3-sklearn installs the file.
inline constexpr const char* kDefaultDigitsPath =
    "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

struct Dataset {
  std::vector<float> features;  // size() * kDigitsFeatures, row-major
  std::vector<int> labels;      // 0..9
  size_t size() const { return labels.size(); }
  const float* row(size_t i) const { return features.data() + i * kDigitsFeatures; }
};

// Reads a gzip'd (or plain: zlib reads both) CSV with 64 pixel columns then the label per line.
// Every malformed line is an error naming its line number.
StatusOr<Dataset> LoadDigits(const std::string& path);

// Shuffles the examples with `seed` (independent of the training seed, so every run and every
// trial of a study sees the same test set) and puts the last `test_fraction` of them in `test`.
void SplitTrainTest(const Dataset& all, double test_fraction, uint64_t seed, Dataset* train,
                    Dataset* test);

}  // namespace cohort::examples
