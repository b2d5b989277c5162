// Spec writers the integration tests share: YAML texts of jobs and studies as `cohort submit` and
// `cohort tune` read them (DESIGN.md, "Job spec" and "Study spec").
#pragma once

#include <string>

namespace cohort::testing {

// A grid study `name` maximising `score` over one integer parameter x in 1..max_x (a trial each),
// `parallel` trials at once. Each trial is one chief, its output under `output_dir`, never
// restarted; `chief` is the rest of the chief's pool entry (its resources and process, as lines
// indented six spaces).
inline std::string GridStudyYaml(const std::string& name, int max_x, int parallel,
                                 const std::string& output_dir, const std::string& chief) {
  return "name: " + name +
         "\n"
         "metric: {id: score, goal: maximize}\n"
         "parameters:\n"
         "  - {id: x, type: integer, min: 1, max: " +
         std::to_string(max_x) +
         "}\n"
         "algorithm: grid\n"
         "max_trials: " +
         std::to_string(max_x) + "\nparallel_trials: " + std::to_string(parallel) +
         "\n"
         "trial_job:\n"
         "  output_dir: " +
         output_dir +
         "\n"
         "  worker_pools:\n"
         "    - role: chief\n"
         "      replicas: 1\n" +
         chief + "  scheduling: {max_restarts: 0}\n";
}

}  // namespace cohort::testing
