#include "collective/kernels/reduce.h"

#include <cstdint>

#include "collective/kernels/half.h"
#include "collective/kernels/reduce_ops.h"

namespace cohort::collective {
namespace {

// f16 and bf16 are stored as 16-bit words and reduced in float, rounding back once per element.
template <float (*kLoad)(uint16_t), uint16_t (*kStore)(float)>
struct Packed16 {
  using Stored = uint16_t;
  using Compute = float;
  static float Load(uint16_t v) { return kLoad(v); }
  static uint16_t Store(float v) { return kStore(v); }
};
using HalfElement = Packed16<HalfToFloat, FloatToHalf>;
using BFloat16Element = Packed16<BFloat16ToFloat, FloatToBFloat16>;

// The host element of a DataTypeConstant handed over by kernels::WithDataType.
template <typename Constant>
using HostElement = kernels::Element<Constant, HalfElement, BFloat16Element>;

template <typename E, typename Op>
void ReduceLoop(typename E::Stored* __restrict__ inout, const typename E::Stored* __restrict__ in,
                size_t count) {
  for (size_t i = 0; i < count; ++i)
    inout[i] = E::Store(Op::Apply(E::Load(inout[i]), E::Load(in[i])));
}

// Separate loop for the aliasing case (inout == in), which min/max and tests can produce.
template <typename E, typename Op>
void ReduceLoopAliased(typename E::Stored* inout, const typename E::Stored* in, size_t count) {
  for (size_t i = 0; i < count; ++i)
    inout[i] = E::Store(Op::Apply(E::Load(inout[i]), E::Load(in[i])));
}

template <typename E>
void ScaleLoop(typename E::Stored* __restrict__ data, size_t count, typename E::Compute divisor) {
  // Multiplying by the reciprocal would differ from a true division in the last bit; divide.
  for (size_t i = 0; i < count; ++i) data[i] = E::Store(E::Load(data[i]) / divisor);
}

template <typename E, typename Op>
void ReduceWidenedLoop(float* __restrict__ acc, const uint16_t* __restrict__ in, size_t count) {
  for (size_t i = 0; i < count; ++i) acc[i] = Op::Apply(acc[i], E::Load(in[i]));
}

// The wire types of compression: bf16, else f16.
template <typename Visit>
void WithWireElement(DataType wire, Visit&& visit) {
  if (wire == DataType::kBF16) return visit(BFloat16Element{});
  return visit(HalfElement{});
}

}  // namespace

void ReduceInto(DataType type, ReduceOp op, void* inout, const void* in, size_t count) {
  kernels::WithDataType(type, [&](auto t) {
    using E = HostElement<decltype(t)>;
    auto* d = static_cast<typename E::Stored*>(inout);
    const auto* s = static_cast<const typename E::Stored*>(in);
    kernels::WithReduceOp<typename E::Compute>(op, [&](auto o) {
      using Op = decltype(o);
      if (inout == in) {
        ReduceLoopAliased<E, Op>(d, s, count);
      } else {
        ReduceLoop<E, Op>(d, s, count);
      }
    });
  });
}

void NarrowFromF32(DataType wire, void* out, const float* in, size_t count) {
  WithWireElement(wire, [&](auto e) {
    auto* o = static_cast<uint16_t*>(out);
    for (size_t i = 0; i < count; ++i) o[i] = decltype(e)::Store(in[i]);
  });
}

void WidenToF32(DataType wire, float* out, const void* in, size_t count) {
  WithWireElement(wire, [&](auto e) {
    const auto* w = static_cast<const uint16_t*>(in);
    for (size_t i = 0; i < count; ++i) out[i] = decltype(e)::Load(w[i]);
  });
}

void ReduceWidenedInto(DataType wire, ReduceOp op, float* acc, const void* in, size_t count) {
  WithWireElement(wire, [&](auto e) {
    kernels::WithReduceOp<float>(op, [&](auto o) {
      ReduceWidenedLoop<decltype(e), decltype(o)>(acc, static_cast<const uint16_t*>(in), count);
    });
  });
}

double ElementAsDouble(DataType type, const void* data, size_t i) {
  double out = 0;
  kernels::WithDataType(type, [&](auto t) {
    using E = HostElement<decltype(t)>;
    out = static_cast<double>(E::Load(static_cast<const typename E::Stored*>(data)[i]));
  });
  return out;
}

void SetElementFromDouble(DataType type, void* data, size_t i, double value) {
  kernels::WithDataType(type, [&](auto t) {
    using E = HostElement<decltype(t)>;
    static_cast<typename E::Stored*>(data)[i] = E::Store(static_cast<typename E::Compute>(value));
  });
}

void ScaleForAverage(DataType type, void* data, size_t count, int divisor) {
  if (divisor == 1) return;
  kernels::WithDataType(type, [&](auto t) {
    using E = HostElement<decltype(t)>;
    ScaleLoop<E>(static_cast<typename E::Stored*>(data), count,
                 static_cast<typename E::Compute>(divisor));
  });
}

}  // namespace cohort::collective
