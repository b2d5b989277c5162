// The flight recorder's stress run as a program of its own, built by ctest with clang++
// -fsanitize=thread (tests/common/CMakeLists.txt): ThreadSanitizer reports any unsynchronised
// access between the writers and the readers, and the readers check every entry they copy.
#include <cstdio>

#include "tests/common/flight_recorder_stress.h"

int main() {
  auto recorder = cohort::FlightRecorder::CreateInMemory(64, 0, 1);
  if (!recorder.ok()) {
    std::fprintf(stderr, "%s\n", recorder.status().ToString().c_str());
    return 1;
  }
  // A small ring, so writers lap the readers and reuse slots while they are being read; one
  // writer (a Communicator), then two (point-to-point or parameter-server requests beside it).
  for (int writers : {1, 2}) {
    cohort::testing::StressResult r =
        cohort::testing::RunFlightRecorderStress(**recorder, writers, 2, 20000);
    std::printf("%d writer(s): %llu operations, %llu snapshots, %llu entries read\n", writers,
                static_cast<unsigned long long>(r.written),
                static_cast<unsigned long long>(r.snapshots),
                static_cast<unsigned long long>(r.entries_read));
    if (!r.error.empty()) {
      std::fprintf(stderr, "reader saw: %s\n", r.error.c_str());
      return 1;
    }
    if (r.snapshots == 0 || r.entries_read == 0) {
      std::fprintf(stderr, "the readers read nothing while the writers ran\n");
      return 1;
    }
  }
  return 0;
}
