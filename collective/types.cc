#include "collective/types.h"

#include "common/enum_names.h"
#include "common/status.h"

namespace cohort::collective {
namespace {

constexpr EnumName<DataType> kDataTypeNames[] = {{DataType::kF32, "f32"}, {DataType::kF64, "f64"},
                                                 {DataType::kF16, "f16"}, {DataType::kBF16, "bf16"},
                                                 {DataType::kI32, "i32"}, {DataType::kI64, "i64"}};
// Accepted by ParseDataType besides the names.
constexpr EnumName<DataType> kDataTypeAliases[] = {
    {DataType::kF32, "float"}, {DataType::kF64, "double"}, {DataType::kF16, "half"}};

constexpr EnumName<ReduceOp> kReduceOpNames[] = {
    {ReduceOp::kSum, "sum"},       {ReduceOp::kAvg, "avg"},         {ReduceOp::kMin, "min"},
    {ReduceOp::kMax, "max"},       {ReduceOp::kProduct, "product"}, {ReduceOp::kBitwiseAnd, "band"},
    {ReduceOp::kBitwiseOr, "bor"}, {ReduceOp::kBitwiseXor, "bxor"},
};
constexpr EnumName<ReduceOp> kReduceOpAliases[] = {{ReduceOp::kProduct, "prod"}};

constexpr EnumName<Algorithm> kAlgorithmNames[] = {
    {Algorithm::kAuto, "auto"},
    {Algorithm::kReductionServer, "reduction-server"},
    {Algorithm::kRing, "ring"},
    {Algorithm::kHalvingDoubling, "halving-doubling"},
    {Algorithm::kSharedMemory, "shared-memory"},
    {Algorithm::kHierarchical, "hierarchical"},
    {Algorithm::kRecursiveDoubling, "recursive-doubling"}};
constexpr EnumName<Algorithm> kAlgorithmAliases[] = {
    {Algorithm::kReductionServer, "rs"}, {Algorithm::kReductionServer, "reduction_server"}};

}  // namespace

size_t DataTypeSize(DataType type) {
  // By the enum's values: f32, f64, f16, bf16, i32, i64.
  static constexpr size_t kSizes[] = {4, 8, 2, 2, 4, 8};
  return IsValid(type) ? kSizes[static_cast<uint8_t>(type)] : 0;
}

std::string_view DataTypeName(DataType type) { return NameIn(kDataTypeNames, type, "?"); }

std::optional<DataType> ParseDataType(std::string_view name) {
  if (auto t = ValueIn(kDataTypeNames, name)) return t;
  return ValueIn(kDataTypeAliases, name);
}

std::string_view ReduceOpName(ReduceOp op) { return NameIn(kReduceOpNames, op, "?"); }

std::optional<ReduceOp> ParseReduceOp(std::string_view name) {
  if (auto op = ValueIn(kReduceOpNames, name)) return op;
  return ValueIn(kReduceOpAliases, name);
}

std::string_view AlgorithmName(Algorithm algo) { return NameIn(kAlgorithmNames, algo, "?"); }

std::optional<Algorithm> ParseAlgorithm(std::string_view name) {
  if (auto a = ValueIn(kAlgorithmNames, name)) return a;
  return ValueIn(kAlgorithmAliases, name);
}

std::string AlgorithmChoice() { return ChoiceOf(kAlgorithmNames); }

bool IsValid(DataType type) { return static_cast<uint8_t>(type) <= 5; }
bool IsValid(ReduceOp op) { return static_cast<uint8_t>(op) <= 7; }

bool IsInteger(DataType type) { return type == DataType::kI32 || type == DataType::kI64; }

bool IsBitwise(ReduceOp op) {
  return op == ReduceOp::kBitwiseAnd || op == ReduceOp::kBitwiseOr || op == ReduceOp::kBitwiseXor;
}

Status CheckReduction(std::string_view what, DataType type, ReduceOp op) {
  if (!IsValid(type)) {
    return InvalidArgument(std::string(what) + ": unknown data type " +
                           std::to_string(static_cast<int>(type)));
  }
  if (!IsValid(op)) {
    return InvalidArgument(std::string(what) + ": unknown op " +
                           std::to_string(static_cast<int>(op)));
  }
  if (IsBitwise(op) && !IsInteger(type)) {
    return InvalidArgument(std::string(what) + ": " + std::string(ReduceOpName(op)) +
                           " reduces integers (i32, i64), not " + std::string(DataTypeName(type)));
  }
  return Status::Ok();
}

}  // namespace cohort::collective
