// Reading the job environment the agent injects (RANK, WORLD_SIZE, COHORT_*): one integer parser
// for every program that reads it, with errors that name the variable.
#pragma once

#include <optional>

#include "common/status.h"

namespace cohort {

// The non-negative integer in environment variable `name`; `fallback` when it is unset or empty
// (kInvalidArgument "environment variable NAME is not set" when there is no fallback), and
// kInvalidArgument naming the variable and its text when it is not a non-negative integer.
StatusOr<int> IntFromEnvironment(const char* name, std::optional<int> fallback);

}  // namespace cohort
