// CUDA reduce kernels for device buffers (built only when COHORT_HAVE_CUDA): the same arithmetic
// as kernels/reduce.h on GPU memory; f16/bf16 compute in float. The header carries no CUDA types
// so host code includes it freely; `stream` is a cudaStream_t (nullptr: the default stream).
//
// Return: 0 on success, else the cudaError_t of the launch (asynchronous: errors of the kernel
// itself surface at the next synchronization).
#pragma once

#include <cstddef>

#include "collective/types.h"

namespace cohort::collective {

int LaunchReduceDevice(DataType type, ReduceOp op, void* inout, const void* in, size_t count,
                       void* stream);
int LaunchScaleDevice(DataType type, void* data, size_t count, int divisor, void* stream);

}  // namespace cohort::collective
