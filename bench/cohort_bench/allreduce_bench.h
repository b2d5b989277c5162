// `cohort-bench allreduce`: times Communicator::Allreduce over a sweep of sizes and prints
// nccl-tests' columns (size, count, type, time_us, algbw_GBps, busbw_GBps, wrong), or one JSON
// object per size with --json (keys: impl, algo, size, count, type, time_us, algbw_GBps,
// busbw_GBps, wrong, ranks, reducers, transport, iters).
//
// time_us is the mean per call of the slowest worker; algbw = size / time_us;
// busbw = algbw * 2(n-1)/n over the n workers, as nccl-tests computes it for all-reduce.
//
// Ways to run: --transport inproc (workers and reducers as threads over the loopback
// transport), --transport ucx (this process forks every worker and reducer; UCX_TLS from the
// environment), or one rank of a job launched elsewhere: --rank R --bootstrap HOST:PORT
// [--role worker|reducer] (worker 0 serves the bootstrap store at HOST:PORT).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "collective/types.h"

namespace cohort::bench {

struct AllreduceBenchOptions {
  collective::Algorithm algo = collective::Algorithm::kReductionServer;
  int workers = 4;
  int reducers = 4;  // forced to 0 for --algo ring
  std::vector<size_t> sizes;
  collective::DataType type = collective::DataType::kF32;
  collective::ReduceOp op = collective::ReduceOp::kSum;
  std::string transport = "ucx";  // ucx | inproc
  int iters = 20;
  int warmup = 5;
  double max_seconds_per_size = 0;  // 0: no cap on iterations
  bool check = false;
  bool json = false;
  // --overlap: consecutive calls overlap as the torch backend runs DDP's buckets
  // (Communicator::StartAllreduce): call i+1 starts before call i's results are collected; the
  // calls alternate between two buffers.
  bool overlap = false;
  // --gap-ms: an idle pause before each call (not with --overlap), as a training step's compute
  // between its all-reduces; each call is then timed alone, from its start to its end.
  int gap_ms = 0;
  // "cpu" (default): host buffers. "cuda": buffers from cudaMalloc on device 0, which the
  // Communicator stages through pinned host memory (needs a build with COHORT_HAVE_CUDA).
  std::string device = "cpu";
  size_t chunk_bytes = 0;  // 0: the communicator picks it by placement
  int window = 4;
  int max_flows = -1;  // -1: the communicator's default
  // --wire-dtype bf16|f16: CommunicatorOptions::wire_dtype (f32 buffers cross to the reducers and
  // back in that type); kF32: off. Sizes and bandwidths stay those of the f32 buffer.
  collective::DataType wire_dtype = collective::DataType::kF32;
  int timeout_ms = 120000;
  // --flight-recorder: where each worker records its calls (common/flight_recorder.h): "off"
  // (nothing), "memory" (a ring of its own in memory), or a directory (a file of its own there,
  // worker-R, as a job's replica has). Empty: the process recorder, COHORT_FLIGHT_RECORDER's.
  // off against a directory is the recorder's overhead.
  std::string flight_recorder;
  // One rank launched externally.
  int rank = -1;
  std::string bootstrap;
  std::string role = "worker";
};

// Parses the arguments after "allreduce". Returns false (after printing why) on bad usage;
// sets *help for --help.
bool ParseAllreduceArgs(const std::vector<std::string>& args, AllreduceBenchOptions* options,
                        bool* help);
void PrintAllreduceUsage();
// Runs the benchmark; returns the process exit code.
int RunAllreduceBench(const AllreduceBenchOptions& options);

}  // namespace cohort::bench
