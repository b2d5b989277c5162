// cohort-recorder-bench: what the flight recorder (common/flight_recorder.h) adds to each call,
// measured directly with Google Benchmark: one FlightRecording begun and finished per iteration,
// as the Communicator records each call, in a file under /dev/shm as in a job, against the clock
// reading the call makes anyway (BM_CallRecorded - BM_CallBaseline; CPU time). The recorder's
// share of a small all-reduce is this cost divided by the all-reduce's time (cohort-bench,
// bench/cohort_bench/recorder_overhead.sh prints both from the same run); an end-to-end on/off
// comparison cannot resolve 1% on a 10 us call here, its run-to-run noise is about 1.5 points.
//
//   cohort-recorder-bench [--benchmark_repetitions=N ...]      (Google Benchmark's flags)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "common/flight_recorder.h"
#include "common/status.h"

namespace cohort {
namespace {

constexpr uint32_t kCapacity = 1024;  // the default ring of a process

std::unique_ptr<FlightRecorder> MakeRecorder() {
  std::string path = "/dev/shm/cohort-recorder-bench-" + std::to_string(::getpid());
  auto recorder = FlightRecorder::CreateFile(path, kCapacity, 0, 4);
  ::unlink(path.c_str());
  if (!recorder.ok()) {
    std::fprintf(stderr, "cohort-recorder-bench: %s\n", recorder.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*recorder);
}

FlightRecord AllreduceRecord(uint32_t comm, uint32_t seq) {
  FlightRecord r;
  r.op = FlightOp::kAllreduce;
  r.comm_id = comm;
  r.op_seq = seq;
  r.bytes = 1024;
  r.group_size = 4;
  return r;
}

// What every Communicator call does anyway that the recorder shares: one steady_clock reading
// (the call's deadline).
void BM_CallBaseline(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::chrono::steady_clock::now());
}
BENCHMARK(BM_CallBaseline);

// The same call recorded as the Communicator records it: the start time taken from the deadline's
// reading, Begin (index, slot) and Finish (one clock reading, slot). Its time less the baseline's
// is what the recorder adds to a call.
void RecordCalls(benchmark::State& state, FlightRecorder& recorder) {
  uint32_t comm = recorder.RegisterCommunicator();
  uint32_t seq = 0;
  const Status ok = Status::Ok();
  for (auto _ : state) {
    const auto now = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(now);
    FlightRecord record = AllreduceRecord(comm, ++seq);
    record.start_ns = FlightClockNs(now);
    FlightRecording recording(&recorder, record);
    recording.Finish(ok);
    benchmark::ClobberMemory();
  }
}

void BM_CallRecorded(benchmark::State& state) {
  auto recorder = MakeRecorder();
  RecordCalls(state, *recorder);
}
BENCHMARK(BM_CallRecorded);

// The same while another thread takes whole snapshots without pause (the agent takes one per
// heartbeat: this is far harsher), so the writer's slots are read as it writes them.
void BM_CallRecordedWhileRead(benchmark::State& state) {
  auto recorder = MakeRecorder();
  auto reader = FlightRecorderReader::Attach(*recorder);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> snapshots{0};
  std::thread reading([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      benchmark::DoNotOptimize(reader->Snapshot(64));
      snapshots.fetch_add(1, std::memory_order_relaxed);
    }
  });
  RecordCalls(state, *recorder);
  stop = true;
  reading.join();
  state.counters["snapshots"] = static_cast<double>(snapshots.load());
}
BENCHMARK(BM_CallRecordedWhileRead);

}  // namespace
}  // namespace cohort

BENCHMARK_MAIN();
