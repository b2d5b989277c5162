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
// after the last contribution. kProduct on integers wraps modulo 2^bits. `op` must reduce `type`
// (CheckReduction in types.h): any other pair leaves inout as it is.
void ReduceInto(DataType type, ReduceOp op, void* inout, const void* in, size_t count);

// data[i] /= divisor (integers divide with truncation toward zero). Used to finish kAvg.
void ScaleForAverage(DataType type, void* data, size_t count, int divisor);

// Wire compression (CommunicatorOptions::wire_dtype): float32 data crosses the network as `wire`
// (kBF16 or kF16) and is reduced in float32. Narrow rounds to nearest even, once per element;
// Widen is exact.
void NarrowFromF32(DataType wire, void* out, const float* in, size_t count);
void WidenToF32(DataType wire, float* out, const void* in, size_t count);
// acc[i] = op(acc[i], widen(in[i])) in float32 (kAvg as a sum).
void ReduceWidenedInto(DataType wire, ReduceOp op, float* acc, const void* in, size_t count);

// Element i of a buffer of `type` as a double, and set from a double (rounded to the type once,
// as the kernels round; integers truncate toward zero). For filling and checking buffers in tests
// and benchmarks, not for hot loops. An unknown type reads 0 and writes nothing.
double ElementAsDouble(DataType type, const void* data, size_t i);
void SetElementFromDouble(DataType type, void* data, size_t i, double value);

}  // namespace cohort::collective
