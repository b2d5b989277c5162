// CPU reduce kernels: the arithmetic of every all-reduce. Loops are written so GCC vectorizes them
// at -O3 (the kernel file is built with -O3; check with -fopt-info-vec); f16 and bf16 compute in
// float and round back once per element.
//
// Thread safety: pure functions over caller-owned memory. `inout` and `in` may not overlap unless
// equal.
#pragma once

#include <cstddef>

#include "collective/types.h"

namespace cohort::collective {

// inout[i] = op(inout[i], in[i]) for i < count. kAvg reduces as a sum; apply ScaleForAverage once
// after the last contribution.
void ReduceInto(DataType type, ReduceOp op, void* inout, const void* in, size_t count);

// data[i] /= divisor (integers divide with truncation toward zero). Used to finish kAvg.
void ScaleForAverage(DataType type, void* data, size_t count, int divisor);

}  // namespace cohort::collective
