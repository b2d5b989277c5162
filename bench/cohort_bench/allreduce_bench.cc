#include "bench/cohort_bench/allreduce_bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#ifdef COHORT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "bench/cohort_bench/bench_flags.h"
#include "bench/cohort_bench/forked_ranks.h"
#include "bench/common/json_line.h"
#include "bench/common/percentile.h"
#include "bench/common/size_args.h"
#include "collective/communicator.h"
#include "collective/reducer.h"
#ifdef COHORT_HAVE_CUDA
#include "collective/kernels/device_staging.h"
#endif
#include "collective/kernels/reduce.h"
#include "collective/store_bootstrap.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "common/flight_recorder.h"
#include "common/logging.h"

namespace cohort::bench {
namespace {

using collective::Algorithm;
using collective::Communicator;
using collective::DataType;
using collective::ReduceOp;

std::string TypeLabel(DataType t) { return std::string(collective::DataTypeName(t)); }

std::string ImplName(const AllreduceBenchOptions& o) {
  switch (o.algo) {
    case Algorithm::kRing:
      return "cohort-ring";
    case Algorithm::kReductionServer:
      return "cohort-rs";
    case Algorithm::kHalvingDoubling:
      return "cohort-hd";
    case Algorithm::kRecursiveDoubling:
      return "cohort-rd";
    case Algorithm::kSharedMemory:
      return "cohort-shm";
    case Algorithm::kHierarchical:
      return "cohort-hier";
    case Algorithm::kAuto:
      break;
  }
  return "cohort-auto";
}

// "cohort-rs", or "cohort-rs+bf16" with wire compression.
std::string ImplLabel(const AllreduceBenchOptions& o) {
  std::string label = ImplName(o);
  if (o.wire_dtype != DataType::kF32)
    label += "+" + std::string(collective::DataTypeName(o.wire_dtype));
  if (o.gap_ms > 0) label += "+gap" + std::to_string(o.gap_ms) + "ms";
  return o.overlap ? label + "+overlap" : label;
}

// Fills element i with a value whose sum over n ranks is exact in every type (check mode) or a
// small constant (timing).
void Fill(DataType type, void* data, size_t count, int rank, bool check) {
  for (size_t i = 0; i < count; ++i) {
    const double v = check ? static_cast<double>((1 + i % 7) * (rank + 1)) : 0.001;
    collective::SetElementFromDouble(type, data, i, v);
  }
}

// Expected value of element i after the check all-reduce over n workers.
double Expected(ReduceOp op, size_t i, int n) {
  const double base = static_cast<double>(1 + i % 7);
  switch (op) {
    case ReduceOp::kSum:
      return base * n * (n + 1) / 2;
    case ReduceOp::kAvg:
      return base * (n + 1) / 2.0;
    case ReduceOp::kMin:
      return base;
    case ReduceOp::kMax:
      return base * n;
    case ReduceOp::kProduct:
      return std::pow(base, n) * std::tgamma(n + 1.0);  // base^n * n!
    case ReduceOp::kBitwiseAnd:
    case ReduceOp::kBitwiseOr:
    case ReduceOp::kBitwiseXor: {
      const auto b = static_cast<int64_t>(base);
      int64_t acc = b;
      for (int r = 1; r < n; ++r) {
        const int64_t v = b * (r + 1);
        acc = op == ReduceOp::kBitwiseAnd  ? (acc & v)
              : op == ReduceOp::kBitwiseOr ? (acc | v)
                                           : (acc ^ v);
      }
      return static_cast<double>(acc);
    }
  }
  return 0;
}

// The buffer a worker all-reduces: `host` itself, or with --device cuda a cudaMalloc copy of it
// that Upload/Download move `host` into and out of.
class BenchBuffer {
 public:
  BenchBuffer() = default;
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;
  ~BenchBuffer() {
#ifdef COHORT_HAVE_CUDA
    if (device_ != nullptr) cudaFree(device_);
#endif
  }

  Status Allocate(const std::string& device, size_t bytes) {
    host.assign(bytes, 0);
    if (device == "cpu") return Status::Ok();
#ifdef COHORT_HAVE_CUDA
    if (collective::CudaDeviceCount() == 0)
      return FailedPrecondition("--device cuda: no CUDA device present");
    if (cudaError_t e = cudaMalloc(&device_, bytes); e != cudaSuccess) {
      device_ = nullptr;
      return ResourceExhausted("cudaMalloc of " + std::to_string(bytes) +
                               " bytes: " + cudaGetErrorString(e));
    }
    return Status::Ok();
#else
    return InvalidArgument("--device " + device + ": cohort-bench was built without CUDA");
#endif
  }
  void* data() { return device_ != nullptr ? device_ : host.data(); }
  Status Upload() {
#ifdef COHORT_HAVE_CUDA
    if (device_ != nullptr)
      return CudaCopy(cudaMemcpy(device_, host.data(), host.size(), cudaMemcpyHostToDevice));
#endif
    return Status::Ok();
  }
  Status Download() {
#ifdef COHORT_HAVE_CUDA
    if (device_ != nullptr)
      return CudaCopy(cudaMemcpy(host.data(), device_, host.size(), cudaMemcpyDeviceToHost));
#endif
    return Status::Ok();
  }

  std::vector<char> host;

 private:
#ifdef COHORT_HAVE_CUDA
  static Status CudaCopy(cudaError_t e) {
    return e == cudaSuccess ? Status::Ok()
                            : Internal(std::string("cudaMemcpy: ") + cudaGetErrorString(e));
  }
#endif
  void* device_ = nullptr;
};

Status MaxAcross(Communicator& comm, double* v) {
  return comm.Allreduce(v, 1, DataType::kF64, ReduceOp::kMax, Algorithm::kRing);
}

void PrintHeader(const AllreduceBenchOptions& o) {
  if (o.json) return;
  const char* tls = std::getenv("UCX_TLS");
  const std::string chunk = o.chunk_bytes == 0 ? "by placement" : std::to_string(o.chunk_bytes);
  std::printf(
      "# cohort-bench allreduce: %s, %d workers, %d reducers, transport %s%s%s%s, %s %s, iters %d, "
      "warmup %d, chunk %s%s%s, flight recorder %s\n",
      std::string(collective::AlgorithmName(o.algo)).c_str(), o.workers, o.reducers,
      o.transport.c_str(), o.transport == "ucx" ? " (UCX_TLS=" : "",
      o.transport == "ucx" ? (tls ? tls : "all") : "", o.transport == "ucx" ? ")" : "",
      TypeLabel(o.type).c_str(), std::string(collective::ReduceOpName(o.op)).c_str(), o.iters,
      o.warmup, chunk.c_str(), o.device == "cpu" ? "" : (", device " + o.device).c_str(),
      o.wire_dtype == DataType::kF32
          ? ""
          : (", wire " + std::string(collective::DataTypeName(o.wire_dtype))).c_str(),
      o.flight_recorder.empty() ? "as COHORT_FLIGHT_RECORDER says" : o.flight_recorder.c_str());
  std::printf("# %12s %12s %6s %12s %11s %11s %8s\n", "size", "count", "type", "time_us",
              "algbw_GBps", "busbw_GBps", "wrong");
  std::fflush(stdout);
}

// This worker's timed calls one by one, in microseconds: a mean far above the median is a few
// stalled calls, not a cost on every call.
struct CallSpread {
  double min_us = 0, median_us = 0, max_us = 0;
};

CallSpread SpreadOf(const std::vector<double>& calls_us) {
  return {Percentile(calls_us, 0), Percentile(calls_us, 0.5), Percentile(calls_us, 1)};
}

void PrintRow(const AllreduceBenchOptions& o, size_t size, size_t count, double time_us, int iters,
              std::optional<int64_t> wrong, const CallSpread& calls) {
  const double algbw = time_us > 0 ? static_cast<double>(size) / (time_us * 1e3) : 0;
  const double busbw = o.workers > 1 ? algbw * 2.0 * (o.workers - 1) / o.workers : algbw;
  if (o.json) {
    const char* tls = std::getenv("UCX_TLS");
    JsonLine line;
    line["impl"] = ImplLabel(o);
    line["algo"] = std::string(collective::AlgorithmName(o.algo));
    line["size"] = size;
    line["count"] = count;
    line["type"] = TypeLabel(o.type);
    line["time_us"] = RoundTo(time_us, 3);
    line["algbw_GBps"] = RoundTo(algbw, 6);
    line["busbw_GBps"] = RoundTo(busbw, 6);
    line["wrong"] = wrong ? JsonLine(*wrong) : JsonLine(nullptr);
    line["ranks"] = o.workers;
    line["reducers"] = o.reducers;
    line["transport"] = o.transport;
    line["ucx_tls"] = tls ? tls : "";
    line["iters"] = iters;
    line["call_us_min"] = RoundTo(calls.min_us, 1);
    line["call_us_median"] = RoundTo(calls.median_us, 1);
    line["call_us_max"] = RoundTo(calls.max_us, 1);
    line["flight_recorder"] = o.flight_recorder.empty() ? "env" : o.flight_recorder;
    if (o.device != "cpu") line["device"] = o.device;
    if (o.wire_dtype != DataType::kF32)
      line["wire"] = std::string(collective::DataTypeName(o.wire_dtype));
    PrintJsonLine(line);
    return;
  }
  std::printf("  %12zu %12zu %6s %12.2f %11.4f %11.4f %8s\n", size, count,
              TypeLabel(o.type).c_str(), time_us, algbw, busbw,
              wrong ? std::to_string(*wrong).c_str() : "N/A");
  std::fflush(stdout);
}

// The timing loop every worker runs; worker 0 prints.
Status RunWorker(Communicator& comm, const AllreduceBenchOptions& o) {
  const size_t es = collective::DataTypeSize(o.type);
  if (comm.rank() == 0) PrintHeader(o);
  for (size_t size : o.sizes) {
    const size_t count = size / es;
    if (count == 0) continue;
    BenchBuffer buf, other;  // `other`: --overlap's second buffer
    COHORT_RETURN_IF_ERROR(buf.Allocate(o.device, count * es));
    Fill(o.type, buf.host.data(), count, comm.rank(), false);
    COHORT_RETURN_IF_ERROR(buf.Upload());
    if (o.overlap) {
      COHORT_RETURN_IF_ERROR(other.Allocate(o.device, count * es));
      Fill(o.type, other.host.data(), count, comm.rank(), false);
      COHORT_RETURN_IF_ERROR(other.Upload());
    }
    // `calls` all-reduces, one after the other (--gap-ms apart) or (--overlap) each started
    // before the one before it is finished. `ends`: when each call (with --overlap, each Finish)
    // returned; `starts`: when each began, with --gap-ms.
    std::vector<collective::SteadyClock::time_point> starts, ends;
    auto run = [&](int calls) -> Status {
      starts.clear();
      ends.clear();
      if (!o.overlap) {
        for (int i = 0; i < calls; ++i) {
          if (o.gap_ms > 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(o.gap_ms));
            starts.push_back(collective::SteadyClock::now());
          }
          COHORT_RETURN_IF_ERROR(comm.Allreduce(buf.data(), count, o.type, o.op, o.algo));
          ends.push_back(collective::SteadyClock::now());
        }
        return Status::Ok();
      }
      collective::PendingAllreduce previous;
      for (int i = 0; i < calls; ++i) {
        COHORT_ASSIGN_OR_RETURN(
            collective::PendingAllreduce next,
            comm.StartAllreduce((i % 2 ? other : buf).data(), count, o.type, o.op, o.algo));
        COHORT_RETURN_IF_ERROR(previous.Finish());
        if (i > 0) ends.push_back(collective::SteadyClock::now());
        previous = std::move(next);
      }
      COHORT_RETURN_IF_ERROR(previous.Finish());
      ends.push_back(collective::SteadyClock::now());
      return Status::Ok();
    };
    auto t0 = collective::SteadyClock::now();
    COHORT_RETURN_IF_ERROR(run(o.warmup));
    double warm_s = std::chrono::duration<double>(collective::SteadyClock::now() - t0).count() /
                    std::max(1, o.warmup);
    COHORT_RETURN_IF_ERROR(MaxAcross(comm, &warm_s));
    int iters = o.iters;
    if (o.max_seconds_per_size > 0 && o.warmup > 0 && warm_s > 0) {
      iters = static_cast<int>(std::clamp(std::floor(o.max_seconds_per_size / warm_s), 1.0,
                                          static_cast<double>(o.iters)));
    }
    t0 = collective::SteadyClock::now();
    COHORT_RETURN_IF_ERROR(run(iters));
    const auto t1 = collective::SteadyClock::now();
    std::vector<double> calls_us;
    double calls_total_us = 0;
    for (size_t i = 0; i < ends.size(); ++i) {
      const auto began = !starts.empty() ? starts[i] : i == 0 ? t0 : ends[i - 1];
      calls_us.push_back(std::chrono::duration<double, std::micro>(ends[i] - began).count());
      calls_total_us += calls_us.back();
    }
    // The wall time over the calls, or with --gap-ms the calls' own time, without the pauses.
    double per_call_us =
        (starts.empty() ? std::chrono::duration<double, std::micro>(t1 - t0).count()
                        : calls_total_us) /
        std::max(1, iters);
    const CallSpread spread = SpreadOf(calls_us);
    COHORT_RETURN_IF_ERROR(MaxAcross(comm, &per_call_us));
    std::optional<int64_t> wrong;
    if (o.check) {
      Fill(o.type, buf.host.data(), count, comm.rank(), true);
      COHORT_RETURN_IF_ERROR(buf.Upload());
      COHORT_RETURN_IF_ERROR(comm.Allreduce(buf.data(), count, o.type, o.op, o.algo));
      COHORT_RETURN_IF_ERROR(buf.Download());
      int64_t bad = 0;
      for (size_t i = 0; i < count; ++i) {
        const double want = Expected(o.op, i, o.workers);
        const double got = collective::ElementAsDouble(o.type, buf.host.data(), i);
        const bool rounded =
            o.type == DataType::kF16 || o.type == DataType::kBF16 || o.wire_dtype != DataType::kF32;
        const double tol = rounded ? std::fabs(want) * 1e-2 : 1e-9 * std::fabs(want);
        if (std::fabs(got - want) > tol) ++bad;
      }
      COHORT_RETURN_IF_ERROR(
          comm.Allreduce(&bad, 1, DataType::kI64, ReduceOp::kSum, Algorithm::kRing));
      wrong = bad;
    }
    if (comm.rank() == 0) PrintRow(o, size, count, per_call_us, iters, wrong, spread);
  }
  return Status::Ok();
}

collective::CommunicatorOptions CommOptions(const AllreduceBenchOptions& o) {
  collective::CommunicatorOptions c;
  c.timeout = std::chrono::milliseconds(o.timeout_ms);
  c.chunk_bytes = o.chunk_bytes;
  c.window = o.window;
  if (o.max_flows >= 0) c.max_flows = o.max_flows;
  c.wire_dtype = o.wire_dtype;
  return c;
}

// Worker `rank`'s recorder under --flight-recorder (nullptr: "off", or the process recorder when
// the flag is absent; ForProcess then reads COHORT_FLIGHT_RECORDER, which main sets to "off" for
// --flight-recorder off).
StatusOr<std::unique_ptr<FlightRecorder>> WorkerRecorder(const AllreduceBenchOptions& o, int rank) {
  if (o.flight_recorder.empty() || o.flight_recorder == "off")
    return std::unique_ptr<FlightRecorder>();
  if (o.flight_recorder == "memory")
    return FlightRecorder::CreateInMemory(kFlightRecorderDefaultCapacity, rank, o.workers);
  return FlightRecorder::CreateFile(o.flight_recorder + "/worker-" + std::to_string(rank),
                                    kFlightRecorderDefaultCapacity, rank, o.workers);
}

// Creates worker `rank`'s communicator with its recorder and runs the sweep.
Status RunRecordedWorker(const AllreduceBenchOptions& o, collective::Bootstrap& bootstrap, int rank,
                         collective::CommunicatorOptions options) {
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<FlightRecorder> recorder, WorkerRecorder(o, rank));
  options.flight_recorder = recorder.get();
  COHORT_ASSIGN_OR_RETURN(auto comm,
                          Communicator::Create(bootstrap, rank, o.workers, o.reducers, options));
  return RunWorker(*comm, o);
}

// One rank of a job whose bootstrap store is (or will be, on worker 0) at `address`.
int RunOneRank(const AllreduceBenchOptions& o, bool worker, int rank, const std::string& address) {
  const std::string role = worker ? "worker" : "reducer";
  return RunRank(
      role, rank, worker, address, std::chrono::milliseconds(o.timeout_ms),
      [&](collective::StoreBootstrap& bootstrap) {
        if (!worker) {
          collective::ReducerOptions ro;
          ro.comm = CommOptions(o);
          ro.rejoin_timeout = std::chrono::milliseconds(0);
          ro.max_generations = 1;
          std::atomic<bool> stop{false};
          return RankExitCode(
              role, rank, collective::RunReducer(bootstrap, o.workers, o.reducers, rank, ro, stop));
        }
        return RankExitCode(role, rank, RunRecordedWorker(o, bootstrap, rank, CommOptions(o)));
      });
}

int RunThreads(const AllreduceBenchOptions& o) {
  collective::LoopbackFabric fabric(o.workers + o.reducers);
  collective::InMemoryBootstrap bootstrap;
  auto options = CommOptions(o);
  options.transport = collective::CommunicatorOptions::TransportKind::kLoopback;
  options.loopback_fabric = &fabric;
  std::atomic<int> rc{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < o.workers + o.reducers; ++i) {
    threads.emplace_back([&, i] {
      if (i < o.workers) {
        if (RankExitCode("worker", i, RunRecordedWorker(o, bootstrap, i, options)) != 0) rc = 1;
      } else {
        collective::ReducerOptions ro;
        ro.comm = options;
        ro.rejoin_timeout = std::chrono::milliseconds(0);
        ro.max_generations = 1;
        std::atomic<bool> stop{false};
        Status s =
            collective::RunReducer(bootstrap, o.workers, o.reducers, i - o.workers, ro, stop);
        if (RankExitCode("reducer", i - o.workers, s) != 0) rc = 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  return rc.load();
}

}  // namespace

void PrintAllreduceUsage() {
  std::printf(
      "usage: cohort-bench allreduce [--algo "
      "reduction-server|ring|halving-doubling|recursive-doubling|\n"
      "         shared-memory|hierarchical|auto] [--workers N] [--reducers M] [--sizes 1K:256M]\n"
      "         [--dtype f32|f64|f16|bf16|i32|i64] [--op sum|avg|min|max|product|band|bor|bxor]\n"
      "         [--transport ucx|inproc] [--iters N] [--warmup N] [--max-seconds-per-size S]\n"
      "         [--chunk-bytes B] [--window W] [--max-flows F] [--timeout-ms T] [--check] "
      "[--json] [--overlap] [--gap-ms G]\n"
      "         [--device cpu|cuda] [--wire-dtype bf16|f16|f32] [--flight-recorder "
      "off|memory|DIR]\n"
      "         [--rank R --bootstrap HOST:PORT [--role worker|reducer]]\n"
      "Prints nccl-tests' columns: size count type time_us algbw_GBps busbw_GBps wrong.\n"
      "time_us: mean per call of the slowest worker; algbw = size/time; busbw = algbw*2(n-1)/n.\n"
      "--transport inproc runs ranks as threads; ucx forks one process per worker and reducer\n"
      "(UCX_TLS from the environment). With --rank/--bootstrap this process is one rank of a job\n"
      "launched elsewhere (worker 0 serves the bootstrap store at HOST:PORT); --rank is the "
      "worker\n"
      "rank or, with --role reducer, the reducer index. --algo ring ignores --reducers; --algo "
      "auto\n"
      "runs what Communicator picks for the job (Communicator::AutoAlgorithm: shared-memory when\n"
      "every worker shares one host with UCX shared memory allowed; hierarchical when several "
      "hosts\n"
      "have as many workers each (at least two); else recursive-doubling up to 8K, halving-\n"
      "doubling up to 64K among a power-of-two number of workers, else reduction-server with\n"
      "reducers, ring without). --chunk-bytes: the pipeline unit (and shared-memory's slot); by\n"
      "default the communicator picks it (1M when every rank shares the host over shared memory,\n"
      "else 128K).\n"
      "--device cuda: each worker's buffer is cudaMalloc memory on device 0, staged by the\n"
      "communicator through pinned host memory; time_us counts the copies.\n"
      "--wire-dtype bf16|f16: f32 buffers cross to the reducers and back in that type, reduced\n"
      "there in f32 (wire compression; the Reduction Server only); sizes stay the f32 buffer's.\n"
      "--overlap: each call starts before the one before it is finished, as the torch backend\n"
      "runs DDP's buckets (Communicator::StartAllreduce); calls alternate between two buffers.\n"
      "--gap-ms G: each call (warm-up ones too) follows G ms idle, as a training step's compute\n"
      "separates its all-reduces; time_us is then the mean of the calls alone (not --overlap).\n"
      "--flight-recorder: each worker records its calls in a ring of its own, in memory or in\n"
      "DIR/worker-R (a shared-memory file, as in a job), or not at all (off); absent: as\n"
      "COHORT_FLIGHT_RECORDER says. off against DIR measures the recorder's overhead.\n");
}

bool ParseAllreduceArgs(const std::vector<std::string>& args, AllreduceBenchOptions* o,
                        bool* help) {
  std::string sizes = "1K:256M";
  auto set_type = [](DataType* out) {
    return [out](const std::string& v) {
      auto t = collective::ParseDataType(v);
      if (t) *out = *t;
      return t.has_value();
    };
  };
  const std::vector<BenchFlag> own = {
      {"--algo", false,
       [&](const std::string& v) {
         auto algo = collective::ParseAlgorithm(v);
         if (algo) o->algo = *algo;
         return algo.has_value();
       }},
      {"--reducers", false, IntAtLeast(&o->reducers, 0)},
      {"--dtype", false, set_type(&o->type)},
      {"--op", false,
       [&](const std::string& v) {
         auto op = collective::ParseReduceOp(v);
         if (op) o->op = *op;
         return op.has_value();
       }},
      {"--chunk-bytes", false,
       [&](const std::string& v) {
         auto s = ParseByteSize(v);
         if (s && *s >= 1024) o->chunk_bytes = *s;
         return s && *s >= 1024;
       }},
      {"--window", false, IntAtLeast(&o->window, 1)},
      {"--max-flows", false, IntAtLeast(&o->max_flows, 0)},
      {"--device", false,
       [&](const std::string& v) {
#ifndef COHORT_HAVE_CUDA
         if (v == "cuda") {
           std::fprintf(stderr,
                        "cohort-bench: --device cuda: this cohort-bench was built without CUDA\n");
           return false;
         }
#endif
         return OneOf(&o->device, {"cpu", "cuda"})(v);
       }},
      {"--wire-dtype", false,
       [&](const std::string& v) {
         DataType t = DataType::kF32;
         if (!set_type(&t)(v) ||
             (t != DataType::kF32 && t != DataType::kBF16 && t != DataType::kF16)) {
           return false;
         }
         o->wire_dtype = t;
         return true;
       }},
      {"--flight-recorder", false,
       [&](const std::string& v) { return !v.empty() && OneOf(&o->flight_recorder, {})(v); }},
      {"--role", false, OneOf(&o->role, {"worker", "reducer"})},
      {"--overlap", true, [&](const std::string&) { return o->overlap = true; }},
      {"--gap-ms", false, IntAtLeast(&o->gap_ms, 0)},
  };
  std::vector<BenchFlag> flags = SharedFlags(o, &sizes);
  flags.insert(flags.end(), own.begin(), own.end());
  if (!ParseBenchFlags(args, "cohort-bench", flags, help)) return false;
  if (*help) return true;
  if (!CheckSweepAndRank("cohort-bench", sizes, &o->sizes, o->rank, o->bootstrap)) return false;
  if (o->algo == Algorithm::kRing || o->algo == Algorithm::kHalvingDoubling ||
      o->algo == Algorithm::kRecursiveDoubling || o->algo == Algorithm::kSharedMemory ||
      o->algo == Algorithm::kHierarchical) {
    o->reducers = 0;
  }
  if (o->gap_ms > 0 && o->overlap) {
    std::fprintf(stderr, "cohort-bench: --gap-ms pauses between whole calls: not with --overlap\n");
    return false;
  }
  if (o->algo == Algorithm::kReductionServer && o->reducers < 1) {
    std::fprintf(stderr, "cohort-bench: reduction-server needs --reducers >= 1\n");
    return false;
  }
  return true;
}

int RunAllreduceBench(const AllreduceBenchOptions& o) {
  cohort::InitLogging("cohort-bench", "warn");
  // Before any communicator exists (here or in the forked ranks): the process recorder is off.
  if (o.flight_recorder == "off") setenv(kFlightRecorderEnv, "off", 1);
  return RunJob(
      "cohort-bench", o.rank, o.role, o.bootstrap, o.workers, o.reducers, o.transport == "inproc",
      [&] { return RunThreads(o); },
      [&](bool worker, int index, const std::string& address) {
        return RunOneRank(o, worker, index, address);
      });
}

}  // namespace cohort::bench
