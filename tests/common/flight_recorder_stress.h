// A stress run of the flight recorder shared by its unit test and its TSan check
// (flight_recorder_tsan_main.cc): writer threads record operations whose every field is derived
// from the op's sequence number while reader threads take snapshots and check each entry whole.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common/flight_recorder.h"

namespace cohort::testing {

// The record writer `writer` writes for its `seq`-th operation; CheckStressRecord knows it.
inline FlightRecord StressRecord(uint32_t writer, uint32_t seq) {
  FlightRecord r;
  r.op_seq = seq;
  r.comm_id = writer;
  r.bytes = uint64_t{seq} * 1024 + writer;
  r.peer = static_cast<int32_t>(seq % 7);
  r.group_size = static_cast<int32_t>((seq ^ 0x5a5a) & 0xffff);
  r.op = seq % 2 == 0 ? FlightOp::kAllreduce : FlightOp::kBroadcast;
  r.algorithm = static_cast<uint8_t>(seq % 5 + 1);
  r.dtype = static_cast<uint8_t>(seq % 6 + 1);
  return r;
}

// "" when `e` is a record StressRecord made, whole; else what is wrong.
inline std::string CheckStressRecord(const FlightEntry& e) {
  const FlightRecord& r = e.record;
  FlightRecord want = StressRecord(r.comm_id, r.op_seq);
  if (r.bytes != want.bytes || r.peer != want.peer || r.group_size != want.group_size ||
      r.op != want.op || r.algorithm != want.algorithm || r.dtype != want.dtype) {
    return "entry " + std::to_string(e.index) + " is torn: op_seq " + std::to_string(r.op_seq) +
           " with bytes " + std::to_string(r.bytes);
  }
  if (r.outcome == FlightOutcome::kRunning && r.end_ns != 0)
    return "entry " + std::to_string(e.index) + " runs but has an end time";
  if (r.outcome == FlightOutcome::kOk && r.end_ns < r.start_ns)
    return "entry " + std::to_string(e.index) + " ended before it started";
  if (r.outcome != FlightOutcome::kRunning && r.outcome != FlightOutcome::kOk)
    return "entry " + std::to_string(e.index) + " has outcome " +
           std::string(FlightOutcomeName(r.outcome));
  return "";
}

struct StressResult {
  uint64_t written = 0;    // operations recorded
  uint64_t snapshots = 0;  // snapshots taken
  uint64_t entries_read = 0;
  std::string error;  // the first problem a reader found, or ""
};

// Runs `writers` writer threads (ops_per_writer operations each) and `readers` reader threads
// over `recorder` until the writers are done.
inline StressResult RunFlightRecorderStress(FlightRecorder& recorder, int writers, int readers,
                                            uint32_t ops_per_writer) {
  std::atomic<bool> done{false};
  std::atomic<uint64_t> snapshots{0}, entries_read{0};
  std::atomic<bool> failed{false};
  std::string error;  // written once, by the reader that sets `failed` first
  std::vector<std::thread> threads;
  for (int r = 0; r < readers; ++r) {
    threads.emplace_back([&] {
      auto reader = FlightRecorderReader::Attach(recorder);
      std::vector<uint32_t> last_seq(writers, 0);
      while (!done.load()) {
        FlightRecorderSnapshot s = reader->Snapshot();
        snapshots.fetch_add(1);
        entries_read.fetch_add(s.recent.size());
        uint64_t previous_index = 0;
        for (size_t i = 0; i < s.recent.size(); ++i) {
          std::string problem = CheckStressRecord(s.recent[i]);
          if (problem.empty() && i > 0 && s.recent[i].index <= previous_index)
            problem = "snapshot entries out of order";
          previous_index = s.recent[i].index;
          if (!problem.empty()) {
            if (!failed.exchange(true)) error = problem;
            return;
          }
        }
        for (const auto& c : s.communicators) {
          // A single writer's completed sequence numbers never go back, even for a reader the
          // writer laps (it reads newest first). Several writers claim slots in one order and
          // write them in another, so a lapped reader may miss a newer entry and keep an older.
          if (writers > 1) break;
          if (c.comm_id >= static_cast<uint32_t>(writers) || !c.last_completed_seq) continue;
          if (*c.last_completed_seq < last_seq[c.comm_id]) {
            if (!failed.exchange(true)) error = "last completed sequence number went back";
            return;
          }
          last_seq[c.comm_id] = *c.last_completed_seq;
        }
      }
    });
  }
  std::vector<std::thread> writer_threads;
  for (int w = 0; w < writers; ++w) {
    writer_threads.emplace_back([&recorder, w, ops_per_writer] {
      for (uint32_t seq = 0; seq < ops_per_writer; ++seq) {
        FlightRecord r = StressRecord(static_cast<uint32_t>(w), seq);
        const uint64_t index = recorder.Begin(r);
        recorder.End(index, r, Status::Ok());
      }
    });
  }
  for (auto& t : writer_threads) t.join();
  done.store(true);
  for (auto& t : threads) t.join();
  StressResult result;
  result.written = uint64_t{ops_per_writer} * writers;
  result.snapshots = snapshots.load();
  result.entries_read = entries_read.load();
  result.error = error;
  return result;
}

}  // namespace cohort::testing
