// CUDA reduce kernels and device-buffer staging. Built and run only with COHORT_HAVE_CUDA; skip
// (saying why) on machines without a GPU.
#include <gtest/gtest.h>

#ifdef COHORT_HAVE_CUDA
#include <cuda_runtime.h>

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
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device present (the toolkit is, so the kernels were built)";
  }
};

TEST_P(CudaKernelTest, MatchesTheCpuKernel) {
  const auto [type, op] = GetParam();
  const size_t count = 100003;
  const size_t bytes = count * DataTypeSize(type);
  std::vector<char> a = testing::MakeInput(type, 0, count);
  std::vector<char> b = testing::MakeInput(type, 1, count);
  void* da = nullptr;
  void* db = nullptr;
  ASSERT_EQ(cudaMalloc(&da, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&db, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(LaunchReduceDevice(type, op, da, db, count, nullptr), 0);
  if (op == ReduceOp::kAvg) {
    ASSERT_EQ(LaunchScaleDevice(type, da, count, 2, nullptr), 0);
  }
  std::vector<char> got(bytes);
  ASSERT_EQ(cudaMemcpy(got.data(), da, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  ReduceInto(type, op, a.data(), b.data(), count);
  if (op == ReduceOp::kAvg) ScaleForAverage(type, a.data(), count, 2);
  EXPECT_EQ(std::memcmp(got.data(), a.data(), bytes), 0);
  cudaFree(da);
  cudaFree(db);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypesAndOps, CudaKernelTest,
    ::testing::Combine(::testing::Values(DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16,
                                         DataType::kI32, DataType::kI64),
                       ::testing::Values(ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax)),
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
    if (!s.ok()) failures[r] = s.ToString();
    else if (host[999] != 3.0f) failures[r] = "got " + std::to_string(host[999]);
  });
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}
#else
TEST(CudaKernelTest, NotBuilt) { GTEST_SKIP() << "built without CUDA (COHORT_HAVE_CUDA is off)"; }
#endif

}  // namespace
}  // namespace cohort::collective
