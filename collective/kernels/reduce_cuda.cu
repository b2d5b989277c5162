#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "collective/kernels/reduce_cuda.h"

namespace cohort::collective {
namespace {

template <typename T>
__device__ float ToF(T v) {
  return static_cast<float>(v);
}
template <>
__device__ float ToF<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ float ToF<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T>
__device__ T FromF(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __half FromF<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __nv_bfloat16 FromF<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename T>
struct Compute {
  using type = T;
};
template <>
struct Compute<__half> {
  using type = float;
};
template <>
struct Compute<__nv_bfloat16> {
  using type = float;
};

template <typename T, int kOp>
__global__ void ReduceKernel(T* __restrict__ inout, const T* __restrict__ in, size_t count) {
  using C = typename Compute<T>::type;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    C a, b;
    if constexpr (sizeof(C) != sizeof(T) || std::is_same_v<T, __half> ||
                  std::is_same_v<T, __nv_bfloat16>) {
      a = ToF(inout[i]);
      b = ToF(in[i]);
    } else {
      a = inout[i];
      b = in[i];
    }
    C r;
    if constexpr (kOp == 0) {
      r = a + b;
    } else if constexpr (kOp == 1) {
      r = b < a ? b : a;
    } else if constexpr (kOp == 2) {
      r = a < b ? b : a;
    } else if constexpr (std::is_integral_v<C>) {
      // Modulo 2^bits, as the CPU kernel (signed overflow would be undefined).
      using U = std::make_unsigned_t<C>;
      r = static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      r = a * b;
    }
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      inout[i] = FromF<T>(r);
    } else {
      inout[i] = r;
    }
  }
}

template <typename T>
__global__ void ScaleKernel(T* data, size_t count, int divisor) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      data[i] = FromF<T>(ToF(data[i]) / static_cast<float>(divisor));
    } else {
      data[i] = data[i] / static_cast<T>(divisor);
    }
  }
}

void Grid(size_t count, int* blocks, int* threads) {
  *threads = 256;
  size_t b = (count + 255) / 256;
  *blocks = static_cast<int>(b > 4096 ? 4096 : (b == 0 ? 1 : b));
}

template <typename T>
int Launch(ReduceOp op, void* inout, const void* in, size_t count, cudaStream_t stream) {
  int blocks, threads;
  Grid(count, &blocks, &threads);
  auto* d = static_cast<T*>(inout);
  auto* s = static_cast<const T*>(in);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      ReduceKernel<T, 0><<<blocks, threads, 0, stream>>>(d, s, count);
      break;
    case ReduceOp::kMin:
      ReduceKernel<T, 1><<<blocks, threads, 0, stream>>>(d, s, count);
      break;
    case ReduceOp::kMax:
      ReduceKernel<T, 2><<<blocks, threads, 0, stream>>>(d, s, count);
      break;
    case ReduceOp::kProduct:
      ReduceKernel<T, 3><<<blocks, threads, 0, stream>>>(d, s, count);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int LaunchScale(void* data, size_t count, int divisor, cudaStream_t stream) {
  int blocks, threads;
  Grid(count, &blocks, &threads);
  ScaleKernel<T><<<blocks, threads, 0, stream>>>(static_cast<T*>(data), count, divisor);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int LaunchReduceDevice(DataType type, ReduceOp op, void* inout, const void* in, size_t count,
                       void* stream) {
  if (count == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case DataType::kF32:
      return Launch<float>(op, inout, in, count, s);
    case DataType::kF64:
      return Launch<double>(op, inout, in, count, s);
    case DataType::kF16:
      return Launch<__half>(op, inout, in, count, s);
    case DataType::kBF16:
      return Launch<__nv_bfloat16>(op, inout, in, count, s);
    case DataType::kI32:
      return Launch<int32_t>(op, inout, in, count, s);
    case DataType::kI64:
      return Launch<int64_t>(op, inout, in, count, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

int LaunchScaleDevice(DataType type, void* data, size_t count, int divisor, void* stream) {
  if (count == 0 || divisor == 1) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case DataType::kF32:
      return LaunchScale<float>(data, count, divisor, s);
    case DataType::kF64:
      return LaunchScale<double>(data, count, divisor, s);
    case DataType::kF16:
      return LaunchScale<__half>(data, count, divisor, s);
    case DataType::kBF16:
      return LaunchScale<__nv_bfloat16>(data, count, divisor, s);
    case DataType::kI32:
      return LaunchScale<int32_t>(data, count, divisor, s);
    case DataType::kI64:
      return LaunchScale<int64_t>(data, count, divisor, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace cohort::collective
