// What the tasks of a job array (common/job_spec.h, ArraySpec; coordinator/job_controller.h,
// "Arrays") add up to: how many there are by state, and whether and how the array has ended. One
// rule for everything that judges an array: a job's dependency on it (scheduling.after),
// `cohort arrays` and `cohort status` (wire::ArrayInfo), and the dashboard's /api/arrays. The
// array has ended once every task has: SUCCEEDED when each did, else FAILED when one did, else
// CANCELLED; until then it is ACTIVE.
//
// Thread safety: pure functions of the records given.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/schema/cohort_generated.h"
#include "coordinator/state.h"

namespace cohort::coordinator {

struct ArrayTally {
  std::map<JobState, int> by_state;  // its tasks by state
  int tasks = 0;
  int ended = 0;

  void Add(const JobRecord& task);
  bool finished() const { return tasks > 0 && ended == tasks; }
  // The array's end, once finished().
  JobState Outcome() const;
};

// The array `name` from its tasks (not empty; any order): wire::ArrayInfo. Its indexes are those
// of the tasks given, with the parallelism of the array as submitted.
wire::ArrayInfoT ArrayInfoOf(const std::string& name, const std::vector<const JobRecord*>& tasks);

// Each array of `arrays` (name -> its tasks, not empty) as ArrayInfoOf has it, newest first (by
// its first task's submit order): `cohort arrays`, /api/arrays.
wire::ArrayListT ListArrays(const std::map<std::string, std::vector<const JobRecord*>>& arrays);

}  // namespace cohort::coordinator
