#include "coordinator/job_array.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>

#include "coordinator/job_usage.h"

namespace cohort::coordinator {

void ArrayTally::Add(const JobRecord& task) {
  ++by_state[task.state];
  ++tasks;
  if (task.finished()) ++ended;
}

JobState ArrayTally::Outcome() const {
  return by_state.contains(JobState::FAILED)      ? JobState::FAILED
         : by_state.contains(JobState::CANCELLED) ? JobState::CANCELLED
                                                  : JobState::SUCCEEDED;
}

wire::ArrayInfoT ArrayInfoOf(const std::string& name, const std::vector<const JobRecord*>& tasks) {
  ArrayTally tally;
  wire::ArrayInfoT info;
  info.name = name;
  info.create_time_ms = std::numeric_limits<int64_t>::max();
  const JobRecord* first = tasks.front();
  int64_t last_end = 0;
  for (const JobRecord* task : tasks) {
    tally.Add(*task);
    if (!task->finished() && !task->waits_for_array_slot) ++info.in_flight;
    if (task->seq < first->seq) first = task;
    info.create_time_ms = std::min(info.create_time_ms, task->create_time_ms);
    if (task->start_time_ms > 0 &&
        (info.start_time_ms == 0 || task->start_time_ms < info.start_time_ms)) {
      info.start_time_ms = task->start_time_ms;
    }
    last_end = std::max(last_end, task->end_time_ms);
  }
  // The indexes of the tasks there are now: a task deleted alone is gone from the text too.
  ArraySpec array = first->spec.scheduling.array;
  array.index.reset();
  array.indexes.clear();
  for (const JobRecord* task : tasks) {
    if (task->spec.scheduling.array.index)
      array.indexes.push_back(*task->spec.scheduling.array.index);
  }
  std::sort(array.indexes.begin(), array.indexes.end());
  info.state = tally.finished() ? wire::EnumNameJobState(tally.Outcome()) : "ACTIVE";
  info.tasks = tally.tasks;
  info.ended = tally.ended;
  info.array = FormatArraySpec(array);
  info.parallelism = array.parallelism;
  for (const auto& [state, count] : tally.by_state) info.by_state.emplace_back(state, count);
  info.owner = first->owner;
  info.queue = JobQueue(*first);
  info.end_time_ms = tally.finished() ? last_end : 0;
  return info;
}

wire::ArrayListT ListArrays(const std::map<std::string, std::vector<const JobRecord*>>& arrays) {
  std::vector<std::pair<uint64_t, const std::string*>> order;  // (first task's seq, name)
  for (const auto& [name, tasks] : arrays) {
    uint64_t seq = std::numeric_limits<uint64_t>::max();
    for (const JobRecord* task : tasks) seq = std::min(seq, task->seq);
    order.emplace_back(seq, &name);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a > b; });
  wire::ArrayListT list;
  for (const auto& [seq, name] : order) {
    list.arrays.push_back(std::make_unique<wire::ArrayInfoT>(ArrayInfoOf(*name, arrays.at(*name))));
  }
  return list;
}

}  // namespace cohort::coordinator
