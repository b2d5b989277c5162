// A gtest fixture whose every test gets a fresh temporary directory, `dir_`, removed with all in it
// when the test ends (kept when COHORT_KEEP_TEST_DIRS is set: see TempDir).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/testing/process.h"

namespace cohort::testing {

class TempDirTest : public ::testing::Test {
 protected:
  TempDir tmp_;
  const std::string dir_ = tmp_.path();
};

}  // namespace cohort::testing
