// cohort-bench-gloo: Gloo's all-reduce (sum, f32) over its TCP transport, as the Gloo peer of
// `cohort-bench allreduce`. One process per rank:
//
//   cohort-bench-gloo --rank R --size N --store DIR --iface-addr IP [--algo ring,...]
//
// Ranks meet through gloo::rendezvous::FileStore in DIR (a fresh, empty directory that every
// rank can see: network namespaces share the file system) and connect a full mesh of TCP pairs
// bound to IP. Algorithms (--algo, a comma list; every listed one is measured per size and the
// fastest is reported, its name in the "algo" column):
//   ring              gloo::AllreduceRing (in place)
//   ring_chunked      gloo::AllreduceRingChunked (in place)
//   halving_doubling  gloo::AllreduceHalvingDoubling (in place)
//   allreduce         gloo::allreduce() with AllreduceOptions::RING (out of place; the API
//                     PyTorch's ProcessGroupGloo uses for dense all-reduce)
//   bcube             gloo::allreduce() with AllreduceOptions::BCUBE (out of place)
// Timing follows nccl-tests: warm-up, barrier, `iters` calls; each rank's mean time per call is
// reduced with MAX. For --check the in-place algorithms get a freshly filled buffer and one more
// call after the timed loop (their buffers grow by a factor n per call while timed).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/peers/peer_bench.h"
#include "gloo/allreduce.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

namespace {

using cohort::bench::PeerOptions;
using cohort::bench::ResultRow;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A reusable all-reduce over `count` floats: run() performs one call.
struct Op {
  std::function<void()> run;
  float* result = nullptr;  // where the sum lands
  bool in_place = true;
};

class GlooBench {
 public:
  GlooBench(std::shared_ptr<gloo::Context> context, const PeerOptions& options)
      : context_(std::move(context)), options_(options) {}

  void Barrier() {
    gloo::BarrierOptions opts(context_);
    opts.setTag(kBarrierTag);
    gloo::barrier(opts);
  }

  double AllreduceMaxDouble(double value) {
    gloo::AllreduceRing<double> op(context_, {&value}, 1, gloo::ReductionFunction<double>::max);
    op.run();
    return value;
  }

  double AllreduceSumDouble(double value) {
    gloo::AllreduceRing<double> op(context_, {&value}, 1, gloo::ReductionFunction<double>::sum);
    op.run();
    return value;
  }

  // Builds the operation for `algo` on `count` elements of input_ / output_.
  Op Make(const std::string& algo, size_t count) {
    Op op;
    const int n = static_cast<int>(count);
    float* data = input_.data();
    if (algo == "ring") {
      auto impl =
          std::make_shared<gloo::AllreduceRing<float>>(context_, std::vector<float*>{data}, n);
      op.run = [impl] { impl->run(); };
      op.result = data;
    } else if (algo == "ring_chunked") {
      auto impl = std::make_shared<gloo::AllreduceRingChunked<float>>(context_,
                                                                      std::vector<float*>{data}, n);
      op.run = [impl] { impl->run(); };
      op.result = data;
    } else if (algo == "halving_doubling") {
      auto impl = std::make_shared<gloo::AllreduceHalvingDoubling<float>>(
          context_, std::vector<float*>{data}, n);
      op.run = [impl] { impl->run(); };
      op.result = data;
    } else if (algo == "allreduce" || algo == "bcube") {
      auto algorithm = algo == "allreduce" ? gloo::AllreduceOptions::Algorithm::RING
                                           : gloo::AllreduceOptions::Algorithm::BCUBE;
      float* out = output_.data();
      auto context = context_;
      // gloo::allreduce() binds the pointers to unbound buffers per call, as ProcessGroupGloo
      // does for each dense all-reduce.
      op.run = [context, algorithm, data, out, count] {
        gloo::AllreduceOptions opts(context);
        opts.setAlgorithm(algorithm);
        opts.setInput(data, count);
        opts.setOutput(out, count);
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        opts.setTag(kAllreduceTag);
        gloo::allreduce(opts);
      };
      op.result = out;
      op.in_place = false;
    } else {
      throw std::invalid_argument("unknown --algo '" + algo + "'");
    }
    return op;
  }

  // Measures one algorithm at one size; returns the row (time = max over ranks).
  ResultRow Measure(const std::string& algo, size_t size) {
    const size_t count = size / sizeof(float);
    if (input_.size() < count) {
      input_.resize(count);
      output_.resize(count);
    }
    cohort::bench::FillPattern(input_.data(), count, context_->rank);
    std::memset(output_.data(), 0, count * sizeof(float));
    Op op = Make(algo, count);

    // Warm-up, which also estimates the time per call for --max-seconds-per-size. The
    // estimates are reduced with MAX so that every rank runs the same number of calls.
    double estimate = 0;
    Barrier();
    if (options_.warmup > 0 || options_.max_seconds_per_size > 0) {
      Clock::time_point t0 = Clock::now();
      op.run();
      estimate = AllreduceMaxDouble(Seconds(t0, Clock::now()));
      const int more = cohort::bench::MoreWarmupFor(options_, estimate);
      if (more > 0) {
        t0 = Clock::now();
        for (int i = 0; i < more; ++i) op.run();
        estimate = AllreduceMaxDouble(Seconds(t0, Clock::now()) / more);
      }
    }
    const int iters = cohort::bench::ItersFor(options_, estimate);

    Barrier();
    Clock::time_point t0 = Clock::now();
    for (int i = 0; i < iters; ++i) op.run();
    double local = Seconds(t0, Clock::now()) / iters;
    double slowest = AllreduceMaxDouble(local);

    ResultRow row;
    row.impl = "gloo";
    row.algo = algo;
    row.size = size;
    row.time_us = slowest * 1e6;
    row.nranks = context_->size;
    row.iters = iters;
    if (options_.check) {
      if (op.in_place) {
        cohort::bench::FillPattern(input_.data(), count, context_->rank);
        op.run();
      }
      double wrong = static_cast<double>(cohort::bench::CountWrong(op.result, count, row.nranks));
      row.wrong = static_cast<int64_t>(AllreduceSumDouble(wrong));
    }
    return row;
  }

 private:
  static constexpr uint32_t kBarrierTag = 1;
  static constexpr uint32_t kAllreduceTag = 2;

  std::shared_ptr<gloo::Context> context_;
  const PeerOptions& options_;
  std::vector<float> input_;
  std::vector<float> output_;
};

std::vector<std::string> SplitComma(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

int Run(const PeerOptions& options) {
  int rank = -1;
  int size = -1;
  std::string store_dir;
  std::string iface_addr = "127.0.0.1";
  std::string algos = "ring";
  int timeout_s = 300;
  for (const auto& [flag, value] : options.extra) {
    if (flag == "--rank") rank = std::atoi(value.c_str());
    if (flag == "--size") size = std::atoi(value.c_str());
    if (flag == "--store") store_dir = value;
    if (flag == "--iface-addr") iface_addr = value;
    if (flag == "--algo") algos = value;
    if (flag == "--timeout-s") timeout_s = std::atoi(value.c_str());
  }
  if (rank < 0 || size < 1 || rank >= size || store_dir.empty()) {
    std::fprintf(stderr, "cohort-bench-gloo: --rank R --size N --store DIR are required\n");
    return 2;
  }
  std::vector<std::string> algo_list = SplitComma(algos);
  if (algo_list.empty()) {
    std::fprintf(stderr, "cohort-bench-gloo: --algo is empty\n");
    return 2;
  }

  gloo::transport::tcp::attr attr;
  attr.hostname = iface_addr;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(store_dir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(std::chrono::seconds(timeout_s));
  context->connectFullMesh(store, device);

  GlooBench bench(context, options);
  if (rank == 0) cohort::bench::PrintHeader(options, "gloo (" + algos + ")", size);
  for (size_t bytes : options.sizes) {
    ResultRow best;
    for (const std::string& algo : algo_list) {
      ResultRow row = bench.Measure(algo, bytes);
      if (algo_list.size() > 1 && rank == 0 && !options.json) {
        std::fprintf(stderr, "# gloo %-16s %12zu bytes %12.2f us\n", algo.c_str(), bytes,
                     row.time_us);
      }
      if (best.time_us == 0 || row.time_us < best.time_us) best = row;
      if (row.wrong && *row.wrong != 0) best.wrong = *row.wrong;  // never hide a wrong result
    }
    if (rank == 0) cohort::bench::PrintRow(options, best);
  }
  bench.Barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  std::optional<PeerOptions> options = cohort::bench::ParsePeerOptions(
      argc, argv, {"--rank", "--size", "--store", "--iface-addr", "--algo", "--timeout-s"},
      "\n          --rank R --size N --store DIR [--iface-addr IP] [--timeout-s 300]\n"
      "          [--algo ring|ring_chunked|halving_doubling|allreduce|bcube[,...]]",
      &exit_code);
  if (!options) return exit_code;
  try {
    return Run(*options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cohort-bench-gloo: %s\n", e.what());
    return 1;
  }
}
