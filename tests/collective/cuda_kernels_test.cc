// CUDA reduce kernels and device-buffer staging. Built and run only with COHORT_HAVE_CUDA; skip
// (saying why) on machines without a GPU.
#include <gtest/gtest.h>

#ifdef COHORT_HAVE_CUDA
#include <cuda_runtime.h>

#include <cstring>
#include <random>

#include "collective/communicator.h"
#include "collective/kernels/device_staging.h"
#include "collective/kernels/reduce.h"
#include "collective/kernels/reduce_cuda.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "tests/collective/test_util.h"
#endif

namespace cohort::collective {
namespace {

#ifdef COHORT_HAVE_CUDA
class CudaKernelTest : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0)
      GTEST_SKIP() << "no CUDA device present (the toolkit is, so the kernels were built)";
  }
};

// Runs the device kernel on copies of `a` and `b` (a op= b, then / divisor for avg) and returns
// the result's bytes.
std::vector<char> RunOnDevice(DataType type, ReduceOp op, const std::vector<char>& a,
                              const std::vector<char>& b, size_t count, int divisor) {
  const size_t bytes = count * DataTypeSize(type);
  void* da = nullptr;
  void* db = nullptr;
  std::vector<char> got(bytes);
  EXPECT_EQ(cudaMalloc(&da, bytes), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&db, bytes), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(LaunchReduceDevice(type, op, da, db, count, nullptr), 0);
  if (op == ReduceOp::kAvg) {
    EXPECT_EQ(LaunchScaleDevice(type, da, count, divisor, nullptr), 0);
  }
  EXPECT_EQ(cudaMemcpy(got.data(), da, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(da);
  cudaFree(db);
  return got;
}

// Random finite values over the type's whole range (subnormals, ties, overflow to infinity
// included); integers stay within +-2^30 so their sums cannot overflow.
std::vector<char> RandomFinite(DataType type, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<char> out(count * DataTypeSize(type));
  for (size_t i = 0; i < count; ++i) {
    uint64_t r = rng();
    switch (type) {
      case DataType::kF16: {
        uint16_t h = static_cast<uint16_t>(r);
        if ((h & 0x7c00u) == 0x7c00u) h &= 0xbfffu;  // exponent all ones (inf/NaN): halve it
        std::memcpy(out.data() + 2 * i, &h, 2);
        break;
      }
      case DataType::kBF16: {
        uint16_t h = static_cast<uint16_t>(r);
        if ((h & 0x7f80u) == 0x7f80u) h &= 0xbfffu;
        std::memcpy(out.data() + 2 * i, &h, 2);
        break;
      }
      case DataType::kF32: {
        uint32_t f = static_cast<uint32_t>(r);
        if ((f & 0x7f800000u) == 0x7f800000u) f &= 0xbfffffffu;
        std::memcpy(out.data() + 4 * i, &f, 4);
        break;
      }
      case DataType::kF64: {
        if ((r & 0x7ff0000000000000ull) == 0x7ff0000000000000ull) r &= 0xbfffffffffffffffull;
        std::memcpy(out.data() + 8 * i, &r, 8);
        break;
      }
      case DataType::kI32: {
        const int32_t v = static_cast<int32_t>(r % (1u << 31)) - (1 << 30);
        std::memcpy(out.data() + 4 * i, &v, 4);
        break;
      }
      case DataType::kI64: {
        const int64_t v = static_cast<int64_t>(r % (1ull << 31)) - (1ll << 30);
        std::memcpy(out.data() + 8 * i, &v, 8);
        break;
      }
    }
  }
  return out;
}

// Bit-for-bit the CPU kernel's result, at counts that take one partial block, many blocks, and
// more elements than the grid has threads (the grid-stride loop goes round three times).
TEST_P(CudaKernelTest, MatchesTheCpuKernel) {
  const auto [type, op] = GetParam();
  for (size_t count : {size_t{1}, size_t{255}, size_t{100003}, size_t{3000017}}) {
    std::vector<char> a = testing::MakeInput(type, 0, count);
    std::vector<char> b = testing::MakeInput(type, 1, count);
    const std::vector<char> got = RunOnDevice(type, op, a, b, count, 2);
    ReduceInto(type, op, a.data(), b.data(), count);
    if (op == ReduceOp::kAvg) ScaleForAverage(type, a.data(), count, 2);
    EXPECT_EQ(std::memcmp(got.data(), a.data(), got.size()), 0) << "count " << count;
  }
}

// Rounding as the CPU kernel rounds: random finite inputs over the whole range, averaged over 3.
TEST_P(CudaKernelTest, RoundsLikeTheCpuKernel) {
  const auto [type, op] = GetParam();
  const size_t count = 1 << 20;
  std::vector<char> a = RandomFinite(type, count, 1);
  const std::vector<char> b = RandomFinite(type, count, 2);
  const std::vector<char> got = RunOnDevice(type, op, a, b, count, 3);
  ReduceInto(type, op, a.data(), b.data(), count);
  if (op == ReduceOp::kAvg) ScaleForAverage(type, a.data(), count, 3);
  const size_t es = DataTypeSize(type);
  size_t differ = 0;
  size_t first = count;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(got.data() + i * es, a.data() + i * es, es) != 0) {
      if (differ++ == 0) first = i;
    }
  }
  EXPECT_EQ(differ, 0u) << "first at element " << first;
}

INSTANTIATE_TEST_SUITE_P(
    AllTypesAndOps, CudaKernelTest,
    ::testing::Combine(::testing::Values(DataType::kF32, DataType::kF64, DataType::kF16,
                                         DataType::kBF16, DataType::kI32, DataType::kI64),
                       ::testing::Values(ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin,
                                         ReduceOp::kMax, ReduceOp::kProduct)),
    [](const auto& info) {
      return std::string(DataTypeName(std::get<0>(info.param))) + "_" +
             std::string(ReduceOpName(std::get<1>(info.param)));
    });

TEST(CudaStagingTest, DeviceBufferAllreduceStagesThroughHost) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device present";
  LoopbackFabric fabric(2);
  InMemoryBootstrap bootstrap;
  CommunicatorOptions options;
  options.transport = CommunicatorOptions::TransportKind::kLoopback;
  options.loopback_fabric = &fabric;
  std::vector<std::string> failures(2);
  testing::RunRanks(2, [&](int r) {
    cudaSetDevice(0);
    auto comm = Communicator::Create(bootstrap, r, 2, 0, options);
    if (!comm.ok()) {
      failures[r] = comm.status().ToString();
      return;
    }
    std::vector<float> host(1000, static_cast<float>(r + 1));
    float* dev = nullptr;
    cudaMalloc(&dev, 4000);
    cudaMemcpy(dev, host.data(), 4000, cudaMemcpyHostToDevice);
    Status s = (*comm)->Allreduce(dev, 1000, DataType::kF32, ReduceOp::kSum);
    cudaMemcpy(host.data(), dev, 4000, cudaMemcpyDeviceToHost);
    cudaFree(dev);
    if (!s.ok())
      failures[r] = s.ToString();
    else if (host[999] != 3.0f)
      failures[r] = "got " + std::to_string(host[999]);
  });
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}

// Every type and op through the staging path: device buffers of counts 0 to 1M (the pinned
// buffer grows between calls), each at an offset into its allocation with guard bytes around it
// that must come back untouched.
TEST(CudaStagingTest, EveryTypeAndOpOnDeviceBuffers) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device present";
  constexpr int kRanks = 3;
  constexpr size_t kGuard = 64;
  LoopbackFabric fabric(kRanks);
  InMemoryBootstrap bootstrap;
  CommunicatorOptions options;
  options.transport = CommunicatorOptions::TransportKind::kLoopback;
  options.loopback_fabric = &fabric;
  std::vector<std::unique_ptr<Communicator>> comms(kRanks);
  std::vector<std::string> create_failures(kRanks);
  testing::RunRanks(kRanks, [&](int r) {
    auto comm = Communicator::Create(bootstrap, r, kRanks, 0, options);
    if (comm.ok())
      comms[r] = std::move(*comm);
    else
      create_failures[r] = comm.status().ToString();
  });
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(create_failures[r], "") << "rank " << r;
  const auto failures = testing::CheckEveryCase(
      kRanks, {0, 1, 1001, 1 << 20},
      [&](int w, void* data, size_t count, DataType type, ReduceOp op) -> Status {
        const size_t bytes = count * DataTypeSize(type);
        char* dev = nullptr;
        if (cudaMalloc(&dev, bytes + 2 * kGuard) != cudaSuccess)
          return Internal("cudaMalloc failed");
        std::vector<char> guard(kGuard, static_cast<char>(0x5a));
        cudaMemcpy(dev, guard.data(), kGuard, cudaMemcpyHostToDevice);
        cudaMemcpy(dev + kGuard + bytes, guard.data(), kGuard, cudaMemcpyHostToDevice);
        cudaMemcpy(dev + kGuard, data, bytes, cudaMemcpyHostToDevice);
        Status s = comms[w]->Allreduce(dev + kGuard, count, type, op);
        cudaMemcpy(data, dev + kGuard, bytes, cudaMemcpyDeviceToHost);
        std::vector<char> before(kGuard), after(kGuard);
        cudaMemcpy(before.data(), dev, kGuard, cudaMemcpyDeviceToHost);
        cudaMemcpy(after.data(), dev + kGuard + bytes, kGuard, cudaMemcpyDeviceToHost);
        const cudaError_t e = cudaGetLastError();
        cudaFree(dev);
        COHORT_RETURN_IF_ERROR(s);
        if (e != cudaSuccess) return Internal(std::string("CUDA: ") + cudaGetErrorString(e));
        if (before != guard || after != guard) return Internal("bytes around the buffer changed");
        return Status::Ok();
      });
  EXPECT_EQ(failures.size(), 0u) << "first: " << (failures.empty() ? "" : failures.front());
}
#else
TEST(CudaKernelTest, NotBuilt) { GTEST_SKIP() << "built without CUDA (COHORT_HAVE_CUDA is off)"; }
#endif

}  // namespace
}  // namespace cohort::collective
