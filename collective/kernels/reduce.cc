#include "collective/kernels/reduce.h"

#include <cstdint>
#include <type_traits>

#include "collective/kernels/half.h"

namespace cohort::collective {
namespace {

struct Sum {
  template <typename T>
  static T Apply(T a, T b) {
    return a + b;
  }
};
struct Min {
  template <typename T>
  static T Apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  template <typename T>
  static T Apply(T a, T b) {
    return a < b ? b : a;
  }
};
struct Product {
  // Integers multiply modulo 2^bits (unsigned arithmetic: signed overflow would be undefined).
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};

template <typename T, typename Op>
void ReduceLoop(T* __restrict__ inout, const T* __restrict__ in, size_t count) {
  for (size_t i = 0; i < count; ++i) inout[i] = Op::Apply(inout[i], in[i]);
}

// Separate loop for the aliasing case (inout == in), which min/max and tests can produce.
template <typename T, typename Op>
void ReduceLoopAliased(T* inout, const T* in, size_t count) {
  for (size_t i = 0; i < count; ++i) inout[i] = Op::Apply(inout[i], in[i]);
}

template <typename Op>
void ReduceHalfLoop(uint16_t* __restrict__ inout, const uint16_t* __restrict__ in, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    inout[i] = FloatToHalf(Op::Apply(HalfToFloat(inout[i]), HalfToFloat(in[i])));
  }
}

template <typename Op>
void ReduceBFloat16Loop(uint16_t* __restrict__ inout, const uint16_t* __restrict__ in,
                        size_t count) {
  for (size_t i = 0; i < count; ++i) {
    inout[i] = FloatToBFloat16(Op::Apply(BFloat16ToFloat(inout[i]), BFloat16ToFloat(in[i])));
  }
}

template <typename Op>
void ReduceTyped(DataType type, void* inout, const void* in, size_t count) {
  if (inout == in) {
    switch (type) {
      case DataType::kF32:
        return ReduceLoopAliased<float, Op>(static_cast<float*>(inout),
                                            static_cast<const float*>(in), count);
      case DataType::kF64:
        return ReduceLoopAliased<double, Op>(static_cast<double*>(inout),
                                             static_cast<const double*>(in), count);
      case DataType::kI32:
        return ReduceLoopAliased<int32_t, Op>(static_cast<int32_t*>(inout),
                                              static_cast<const int32_t*>(in), count);
      case DataType::kI64:
        return ReduceLoopAliased<int64_t, Op>(static_cast<int64_t*>(inout),
                                              static_cast<const int64_t*>(in), count);
      case DataType::kF16: {
        auto* p = static_cast<uint16_t*>(inout);
        for (size_t i = 0; i < count; ++i)
          p[i] = FloatToHalf(Op::Apply(HalfToFloat(p[i]), HalfToFloat(p[i])));
        return;
      }
      case DataType::kBF16: {
        auto* p = static_cast<uint16_t*>(inout);
        for (size_t i = 0; i < count; ++i)
          p[i] = FloatToBFloat16(Op::Apply(BFloat16ToFloat(p[i]), BFloat16ToFloat(p[i])));
        return;
      }
    }
    return;
  }
  switch (type) {
    case DataType::kF32:
      return ReduceLoop<float, Op>(static_cast<float*>(inout), static_cast<const float*>(in),
                                   count);
    case DataType::kF64:
      return ReduceLoop<double, Op>(static_cast<double*>(inout), static_cast<const double*>(in),
                                    count);
    case DataType::kI32:
      return ReduceLoop<int32_t, Op>(static_cast<int32_t*>(inout), static_cast<const int32_t*>(in),
                                     count);
    case DataType::kI64:
      return ReduceLoop<int64_t, Op>(static_cast<int64_t*>(inout), static_cast<const int64_t*>(in),
                                     count);
    case DataType::kF16:
      return ReduceHalfLoop<Op>(static_cast<uint16_t*>(inout), static_cast<const uint16_t*>(in),
                                count);
    case DataType::kBF16:
      return ReduceBFloat16Loop<Op>(static_cast<uint16_t*>(inout), static_cast<const uint16_t*>(in),
                                    count);
  }
}

template <typename T>
void ScaleLoop(T* __restrict__ data, size_t count, T divisor) {
  for (size_t i = 0; i < count; ++i) data[i] = data[i] / divisor;
}

template <typename Op, float (*Widen)(uint16_t)>
void ReduceWidenedLoop(float* __restrict__ acc, const uint16_t* __restrict__ in, size_t count) {
  for (size_t i = 0; i < count; ++i) acc[i] = Op::Apply(acc[i], Widen(in[i]));
}

template <typename Op>
void ReduceWidenedTyped(DataType wire, float* acc, const void* in, size_t count) {
  const auto* w = static_cast<const uint16_t*>(in);
  if (wire == DataType::kBF16) return ReduceWidenedLoop<Op, BFloat16ToFloat>(acc, w, count);
  return ReduceWidenedLoop<Op, HalfToFloat>(acc, w, count);
}

}  // namespace

void ReduceInto(DataType type, ReduceOp op, void* inout, const void* in, size_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return ReduceTyped<Sum>(type, inout, in, count);
    case ReduceOp::kMin:
      return ReduceTyped<Min>(type, inout, in, count);
    case ReduceOp::kMax:
      return ReduceTyped<Max>(type, inout, in, count);
    case ReduceOp::kProduct:
      return ReduceTyped<Product>(type, inout, in, count);
  }
}

void NarrowFromF32(DataType wire, void* out, const float* in, size_t count) {
  auto* o = static_cast<uint16_t*>(out);
  if (wire == DataType::kBF16) {
    for (size_t i = 0; i < count; ++i) o[i] = FloatToBFloat16(in[i]);
  } else {
    for (size_t i = 0; i < count; ++i) o[i] = FloatToHalf(in[i]);
  }
}

void WidenToF32(DataType wire, float* out, const void* in, size_t count) {
  const auto* w = static_cast<const uint16_t*>(in);
  if (wire == DataType::kBF16) {
    for (size_t i = 0; i < count; ++i) out[i] = BFloat16ToFloat(w[i]);
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = HalfToFloat(w[i]);
  }
}

void ReduceWidenedInto(DataType wire, ReduceOp op, float* acc, const void* in, size_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return ReduceWidenedTyped<Sum>(wire, acc, in, count);
    case ReduceOp::kMin:
      return ReduceWidenedTyped<Min>(wire, acc, in, count);
    case ReduceOp::kMax:
      return ReduceWidenedTyped<Max>(wire, acc, in, count);
    case ReduceOp::kProduct:
      return ReduceWidenedTyped<Product>(wire, acc, in, count);
  }
}

void ScaleForAverage(DataType type, void* data, size_t count, int divisor) {
  if (divisor == 1) return;
  switch (type) {
    case DataType::kF32: {
      // Multiply by the reciprocal would differ from a true division in the last bit; divide.
      return ScaleLoop<float>(static_cast<float*>(data), count, static_cast<float>(divisor));
    }
    case DataType::kF64:
      return ScaleLoop<double>(static_cast<double*>(data), count, static_cast<double>(divisor));
    case DataType::kI32:
      return ScaleLoop<int32_t>(static_cast<int32_t*>(data), count, divisor);
    case DataType::kI64:
      return ScaleLoop<int64_t>(static_cast<int64_t*>(data), count, divisor);
    case DataType::kF16: {
      auto* p = static_cast<uint16_t*>(data);
      const float d = static_cast<float>(divisor);
      for (size_t i = 0; i < count; ++i) p[i] = FloatToHalf(HalfToFloat(p[i]) / d);
      return;
    }
    case DataType::kBF16: {
      auto* p = static_cast<uint16_t*>(data);
      const float d = static_cast<float>(divisor);
      for (size_t i = 0; i < count; ++i) p[i] = FloatToBFloat16(BFloat16ToFloat(p[i]) / d);
      return;
    }
  }
}

}  // namespace cohort::collective
