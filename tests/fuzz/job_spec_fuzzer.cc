// Fuzz target: arbitrary text as a job file. ParseJobSpec must return a spec or an error, never
// crash; an accepted spec must survive the canonical YAML round trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = cohort::ParseJobSpec(text, "fuzz");
  if (spec.ok()) {
    auto again = cohort::ParseJobSpec(cohort::JobSpecToYaml(*spec), "fuzz round trip");
    if (!again.ok()) std::abort();
  }
  return 0;
}
