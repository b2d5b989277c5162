// cohort-wire-kernels-bench: the host kernels of wire compression (collective/kernels/reduce.h),
// which a worker runs on its whole gradient each call (float32 narrowed to bf16/f16 before
// sending, results widened back) and a reducer on each chunk (widened and summed in float32):
// bytes of float32 a second, on a 64 MiB buffer (larger than the caches, as a DDP bucket is).
//
//   cohort-wire-kernels-bench [--benchmark_repetitions=N ...]   (Google Benchmark's flags)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "collective/kernels/reduce.h"
#include "collective/types.h"

namespace cohort::collective {
namespace {

constexpr size_t kFloats = 16u << 20;  // 64 MiB of float32

struct Buffers {
  std::vector<float> f32 = std::vector<float>(kFloats);
  std::vector<uint16_t> wire = std::vector<uint16_t>(kFloats);
  Buffers() {
    for (size_t i = 0; i < kFloats; ++i) f32[i] = static_cast<float>(i % 1000) * 0.001f - 0.5f;
  }
};

Buffers& Shared() {
  static Buffers buffers;
  return buffers;
}

void Count(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kFloats * sizeof(float));
}

void BM_Narrow(benchmark::State& state, DataType wire) {
  Buffers& b = Shared();
  for (auto _ : state) {
    NarrowFromF32(wire, b.wire.data(), b.f32.data(), kFloats);
    benchmark::ClobberMemory();
  }
  Count(state);
}

void BM_Widen(benchmark::State& state, DataType wire) {
  Buffers& b = Shared();
  NarrowFromF32(wire, b.wire.data(), b.f32.data(), kFloats);
  for (auto _ : state) {
    WidenToF32(wire, b.f32.data(), b.wire.data(), kFloats);
    benchmark::ClobberMemory();
  }
  Count(state);
}

void BM_ReduceWidened(benchmark::State& state, DataType wire) {
  Buffers& b = Shared();
  NarrowFromF32(wire, b.wire.data(), b.f32.data(), kFloats);
  for (auto _ : state) {
    ReduceWidenedInto(wire, ReduceOp::kSum, b.f32.data(), b.wire.data(), kFloats);
    benchmark::ClobberMemory();
  }
  Count(state);
}

BENCHMARK_CAPTURE(BM_Narrow, bf16, DataType::kBF16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Widen, bf16, DataType::kBF16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ReduceWidened, bf16, DataType::kBF16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Narrow, f16, DataType::kF16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Widen, f16, DataType::kF16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ReduceWidened, f16, DataType::kF16)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cohort::collective

BENCHMARK_MAIN();
