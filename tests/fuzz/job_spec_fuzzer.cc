// Fuzz target: arbitrary text as a job file, Cohort's or a Vertex AI CustomJob or
// HyperparameterTuningJob file, and as a study file. ParseJobSpec, ParseStudySpec and the Vertex
// conversions must return a spec or an error, never crash; an accepted spec must survive the
// canonical YAML round trip, an accepted study file renamed (`cohort tune --name`) must still be
// one, and a converted Vertex file must be a valid job or study file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/job_spec.h"
#include "common/study_spec.h"
#include "common/vertex_job.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = cohort::ParseJobSpec(text, "fuzz");
  if (spec.ok()) {
    auto again = cohort::ParseJobSpec(cohort::JobSpecToYaml(*spec), "fuzz round trip");
    if (!again.ok()) std::abort();
  }
  if (cohort::ParseStudySpec(text, "fuzz").ok()) {
    auto renamed = cohort::WithStudyName(text, "fuzzed_study");
    if (!renamed.ok() || !cohort::ParseStudySpec(*renamed, "fuzz renamed").ok()) std::abort();
  }
  if (cohort::IsVertexCustomJob(text)) {
    auto converted = cohort::ConvertVertexCustomJob(text, "fuzz");
    if (converted.ok() && !cohort::ParseJobSpec(converted->yaml, "fuzz converted").ok()) {
      std::abort();
    }
  }
  if (cohort::IsVertexTuningJob(text)) {
    auto converted = cohort::ConvertVertexTuningJob(text, "fuzz");
    if (converted.ok() && !cohort::ParseStudySpec(converted->yaml, "fuzz converted").ok()) {
      std::abort();
    }
  }
  return 0;
}
