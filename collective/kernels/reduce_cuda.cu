#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "collective/kernels/reduce_cuda.h"
#include "collective/kernels/reduce_ops.h"

namespace cohort::collective {
namespace {

// __half and __nv_bfloat16 are reduced in float and rounded back once per element, as the CPU
// kernels do.
struct HalfElement {
  using Stored = __half;
  using Compute = float;
  __device__ static float Load(__half v) { return __half2float(v); }
  __device__ static __half Store(float v) { return __float2half_rn(v); }
};
struct BFloat16Element {
  using Stored = __nv_bfloat16;
  using Compute = float;
  __device__ static float Load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 Store(float v) { return __float2bfloat16_rn(v); }
};

// The device element of a DataTypeConstant handed over by kernels::WithDataType.
template <typename Constant>
using DeviceElement = kernels::Element<Constant, HalfElement, BFloat16Element>;

template <typename E, typename Op>
__global__ void ReduceKernel(typename E::Stored* __restrict__ inout,
                             const typename E::Stored* __restrict__ in, size_t count) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    inout[i] = E::Store(Op::Apply(E::Load(inout[i]), E::Load(in[i])));
  }
}

// Integers divide with truncation toward zero; f16/bf16 divide in float.
template <typename E>
__global__ void ScaleKernel(typename E::Stored* data, size_t count, int divisor) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    data[i] = E::Store(E::Load(data[i]) / static_cast<typename E::Compute>(divisor));
  }
}

void Grid(size_t count, int* blocks, int* threads) {
  *threads = 256;
  size_t b = (count + 255) / 256;
  *blocks = static_cast<int>(b > 4096 ? 4096 : (b == 0 ? 1 : b));
}

}  // namespace

int LaunchReduceDevice(DataType type, ReduceOp op, void* inout, const void* in, size_t count,
                       void* stream) {
  if (count == 0) return 0;
  int blocks, threads;
  Grid(count, &blocks, &threads);
  auto s = static_cast<cudaStream_t>(stream);
  bool known = false;
  kernels::WithDataType(type, [&](auto t) {
    using E = DeviceElement<decltype(t)>;
    auto* d = static_cast<typename E::Stored*>(inout);
    const auto* src = static_cast<const typename E::Stored*>(in);
    known = kernels::WithReduceOp<typename E::Compute>(op, [&](auto o) {
      ReduceKernel<E, decltype(o)><<<blocks, threads, 0, s>>>(d, src, count);
    });
  });
  if (!known) return static_cast<int>(cudaErrorInvalidValue);
  return static_cast<int>(cudaGetLastError());
}

int LaunchScaleDevice(DataType type, void* data, size_t count, int divisor, void* stream) {
  if (count == 0 || divisor == 1) return 0;
  int blocks, threads;
  Grid(count, &blocks, &threads);
  auto s = static_cast<cudaStream_t>(stream);
  const bool known = kernels::WithDataType(type, [&](auto t) {
    using E = DeviceElement<decltype(t)>;
    ScaleKernel<E>
        <<<blocks, threads, 0, s>>>(static_cast<typename E::Stored*>(data), count, divisor);
  });
  if (!known) return static_cast<int>(cudaErrorInvalidValue);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace cohort::collective
