// Inputs shared by the coordinator's tests (one binary): a study spec and the journal framing of
// the coordinator's earlier version.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>

namespace cohort::coordinator {

// A grid study over x in 1..6 whose trials run one chief and are never restarted; `extra` is
// YAML added before trial_job.
inline std::string StudyYaml(const std::string& name, int max_trials, int parallel,
                             const std::string& extra = "") {
  return "name: " + name +
         "\n"
         "metric: {id: score, goal: maximize}\n"
         "parameters:\n"
         "  - {id: x, type: integer, min: 1, max: 6}\n"
         "algorithm: grid\n"
         "max_trials: " +
         std::to_string(max_trials) + "\nparallel_trials: " + std::to_string(parallel) + "\n" +
         extra +
         "trial_job:\n"
         "  worker_pools:\n"
         "    - {role: chief, replicas: 1, resources: {cpus: 1}, process: {command: "
         "[/bin/train]}}\n"
         "  scheduling: {max_restarts: 0}\n";
}

// The journal framing of the coordinator's earlier version, [u32 length][u32 crc32][payload]
// little endian, for tests that write such a journal and check that it is imported.
inline std::string JournalFrame(const std::string& payload) {
  std::string out;
  auto put = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(static_cast<uint32_t>(payload.size()));
  put(static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(payload.data()),
                                  static_cast<uInt>(payload.size()))));
  return out + payload;
}

}  // namespace cohort::coordinator
