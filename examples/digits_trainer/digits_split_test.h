// A fixture for the digits trainer's tests: the digits dataset split 80/20 with seed 42 (the
// trainer's default) into train_ and test_, or the test skipped, saying why, when the dataset file
// (Debian package python3-sklearn) is missing.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>

#include "examples/digits_trainer/digits_dataset.h"

namespace cohort::examples {

class DigitsSplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kDefaultDigitsPath)) {
      GTEST_SKIP() << kDefaultDigitsPath << " is missing (Debian package python3-sklearn)";
    }
    auto data = LoadDigits(kDefaultDigitsPath);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    SplitTrainTest(*data, 0.2, 42, &train_, &test_);
  }

  Dataset train_, test_;
};

}  // namespace cohort::examples
