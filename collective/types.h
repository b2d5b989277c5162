// Element types, reduction operators and algorithm choices shared by every part of the collective
// library (kernels, algorithms, Communicator, C API). Values are stable: the C API and the wire
// header of the Reduction Server carry them as integers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cohort {
class Status;  // common/status.h, which nvcc does not compile: the CUDA kernels include this header
}  // namespace cohort

namespace cohort::collective {

enum class DataType : uint8_t { kF32 = 0, kF64 = 1, kF16 = 2, kBF16 = 3, kI32 = 4, kI64 = 5 };
// The bitwise ops reduce the integer types only (CheckReduction).
enum class ReduceOp : uint8_t {
  kSum = 0,
  kAvg = 1,
  kMin = 2,
  kMax = 3,
  kProduct = 4,
  kBitwiseAnd = 5,
  kBitwiseOr = 6,
  kBitwiseXor = 7,
};
enum class Algorithm : uint8_t {
  kAuto = 0,
  kReductionServer = 1,
  kRing = 2,
  kHalvingDoubling = 3,
  kSharedMemory = 4,
  kHierarchical = 5,
  kRecursiveDoubling = 6,
};

// Bytes per element.
size_t DataTypeSize(DataType type);
// "f32", "f64", "f16", "bf16", "i32", "i64".
std::string_view DataTypeName(DataType type);
std::optional<DataType> ParseDataType(std::string_view name);
// "sum", "avg", "min", "max", "product", "band", "bor", "bxor" (also parsed: "prod").
std::string_view ReduceOpName(ReduceOp op);
std::optional<ReduceOp> ParseReduceOp(std::string_view name);
// "auto", "reduction-server", "ring", "halving-doubling", "shared-memory", "hierarchical",
// "recursive-doubling".
std::string_view AlgorithmName(Algorithm algo);
std::optional<Algorithm> ParseAlgorithm(std::string_view name);
// The algorithms' names as a choice for a message: "auto, reduction-server, ... or
// recursive-doubling".
std::string AlgorithmChoice();

bool IsValid(DataType type);
bool IsValid(ReduceOp op);

// Whether `type` holds integers (i32, i64).
bool IsInteger(DataType type);
// Whether `op` is kBitwiseAnd, kBitwiseOr or kBitwiseXor.
bool IsBitwise(ReduceOp op);
// OK when `op` reduces elements of `type`; otherwise kInvalidArgument starting with `what` that
// names the op and the type: an unknown one, or a bitwise op on a floating-point type.
Status CheckReduction(std::string_view what, DataType type, ReduceOp op);

}  // namespace cohort::collective
