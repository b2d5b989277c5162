// The reduce operators and the (DataType, ReduceOp) dispatch shared by the CPU kernels
// (kernels/reduce.cc) and the CUDA kernels (kernels/reduce_cuda.cu), so that both do the same
// arithmetic and each kernel is written once as a template over the element and the operator.
//
// Contract: an operator's Apply(a, b) is a pure function of two values of the compute type (float
// for f16/bf16); kAvg dispatches as kSum (the caller divides once at the end). The bitwise
// operators exist for integer compute types only (CheckReduction in types.h refuses the rest). Each
// backend maps a DataType to its own element type: WithDataType hands the visitor the type as a
// compile-time constant (std::integral_constant<DataType, ...>).
#pragma once

#include <cstdint>
#include <type_traits>

#include "collective/types.h"

#ifdef __CUDACC__
#define COHORT_HOST_DEVICE __host__ __device__
#else
#define COHORT_HOST_DEVICE
#endif

namespace cohort::collective::kernels {

struct Sum {
  template <typename T>
  COHORT_HOST_DEVICE static T Apply(T a, T b) {
    return a + b;
  }
};
struct Min {
  template <typename T>
  COHORT_HOST_DEVICE static T Apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  template <typename T>
  COHORT_HOST_DEVICE static T Apply(T a, T b) {
    return a < b ? b : a;
  }
};
struct Product {
  // Integers multiply modulo 2^bits (unsigned arithmetic: signed overflow would be undefined).
  template <typename T>
  COHORT_HOST_DEVICE static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};

struct BitwiseAnd {
  template <typename T>
  COHORT_HOST_DEVICE static T Apply(T a, T b) {
    return a & b;
  }
};
struct BitwiseOr {
  template <typename T>
  COHORT_HOST_DEVICE static T Apply(T a, T b) {
    return a | b;
  }
};
struct BitwiseXor {
  template <typename T>
  COHORT_HOST_DEVICE static T Apply(T a, T b) {
    return a ^ b;
  }
};

// Calls visit(Sum{}) (for kSum and kAvg), visit(Min{}), visit(Max{}), visit(Product{}) or, where
// Compute (the type reduced in) is an integer, visit(BitwiseAnd{}), visit(BitwiseOr{}) or
// visit(BitwiseXor{}); false (visiting nothing) for any other op.
template <typename Compute, typename Visit>
bool WithReduceOp(ReduceOp op, Visit&& visit) {
  if (op == ReduceOp::kSum || op == ReduceOp::kAvg) {
    visit(Sum{});
  } else if (op == ReduceOp::kMin) {
    visit(Min{});
  } else if (op == ReduceOp::kMax) {
    visit(Max{});
  } else if (op == ReduceOp::kProduct) {
    visit(Product{});
  } else if constexpr (std::is_integral_v<Compute>) {
    if (op == ReduceOp::kBitwiseAnd) {
      visit(BitwiseAnd{});
    } else if (op == ReduceOp::kBitwiseOr) {
      visit(BitwiseOr{});
    } else if (op == ReduceOp::kBitwiseXor) {
      visit(BitwiseXor{});
    } else {
      return false;
    }
  } else {
    return false;
  }
  return true;
}

template <DataType kType>
using DataTypeConstant = std::integral_constant<DataType, kType>;

// An element stored and reduced as itself.
template <typename T>
struct NativeElement {
  using Stored = T;
  using Compute = T;
  COHORT_HOST_DEVICE static T Load(T v) { return v; }
  COHORT_HOST_DEVICE static T Store(T v) { return v; }
};

template <DataType kType, typename F16, typename BF16>
constexpr auto ElementFor() {
  if constexpr (kType == DataType::kF64)
    return NativeElement<double>{};
  else if constexpr (kType == DataType::kI32)
    return NativeElement<int32_t>{};
  else if constexpr (kType == DataType::kI64)
    return NativeElement<int64_t>{};
  else if constexpr (kType == DataType::kF16)
    return F16{};
  else if constexpr (kType == DataType::kBF16)
    return BF16{};
  else
    return NativeElement<float>{};
}

// The element of a DataTypeConstant on a backend whose f16 and bf16 elements are F16 and BF16.
// An element has Stored (the type in memory), Compute (the type reduced in: float for f16/bf16),
// and static Load(Stored) -> Compute and Store(Compute) -> Stored.
template <typename Constant, typename F16, typename BF16>
using Element = decltype(ElementFor<Constant::value, F16, BF16>());

// Calls visit(DataTypeConstant<type>{}) for the one of kTypes that equals `type`; false (visiting
// nothing) when none does.
template <DataType... kTypes, typename Visit>
bool WithDataTypeAmong(DataType type, Visit&& visit) {
  return ((type == kTypes && (visit(DataTypeConstant<kTypes>{}), true)) || ...);
}

// Calls visit(DataTypeConstant<type>{}); false (visiting nothing) for a value outside the enum.
template <typename Visit>
bool WithDataType(DataType type, Visit&& visit) {
  return WithDataTypeAmong<DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16,
                           DataType::kI32, DataType::kI64>(type, visit);
}

}  // namespace cohort::collective::kernels
