#include "collective/types.h"

namespace cohort::collective {

size_t DataTypeSize(DataType type) {
  switch (type) {
    case DataType::kF32:
      return 4;
    case DataType::kF64:
      return 8;
    case DataType::kF16:
      return 2;
    case DataType::kBF16:
      return 2;
    case DataType::kI32:
      return 4;
    case DataType::kI64:
      return 8;
  }
  return 0;
}

std::string_view DataTypeName(DataType type) {
  switch (type) {
    case DataType::kF32:
      return "f32";
    case DataType::kF64:
      return "f64";
    case DataType::kF16:
      return "f16";
    case DataType::kBF16:
      return "bf16";
    case DataType::kI32:
      return "i32";
    case DataType::kI64:
      return "i64";
  }
  return "?";
}

std::optional<DataType> ParseDataType(std::string_view name) {
  for (auto t : {DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16, DataType::kI32,
                 DataType::kI64}) {
    if (DataTypeName(t) == name) return t;
  }
  if (name == "float") return DataType::kF32;
  if (name == "double") return DataType::kF64;
  if (name == "half") return DataType::kF16;
  return std::nullopt;
}

std::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProduct:
      return "product";
  }
  return "?";
}

std::optional<ReduceOp> ParseReduceOp(std::string_view name) {
  for (auto op :
       {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    if (ReduceOpName(op) == name) return op;
  }
  if (name == "prod") return ReduceOp::kProduct;
  return std::nullopt;
}

std::string_view AlgorithmName(Algorithm algo) {
  switch (algo) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kReductionServer:
      return "reduction-server";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kHalvingDoubling:
      return "halving-doubling";
    case Algorithm::kSharedMemory:
      return "shared-memory";
    case Algorithm::kHierarchical:
      return "hierarchical";
  }
  return "?";
}

std::optional<Algorithm> ParseAlgorithm(std::string_view name) {
  for (auto a : {Algorithm::kAuto, Algorithm::kReductionServer, Algorithm::kRing,
                 Algorithm::kHalvingDoubling, Algorithm::kSharedMemory, Algorithm::kHierarchical}) {
    if (AlgorithmName(a) == name) return a;
  }
  if (name == "rs" || name == "reduction_server") return Algorithm::kReductionServer;
  return std::nullopt;
}

bool IsValid(DataType type) { return static_cast<uint8_t>(type) <= 5; }
bool IsValid(ReduceOp op) { return static_cast<uint8_t>(op) <= 4; }

}  // namespace cohort::collective
