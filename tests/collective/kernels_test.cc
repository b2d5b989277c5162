#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "collective/kernels/half.h"
#include "collective/kernels/reduce.h"
#include "tests/collective/test_util.h"

namespace cohort::collective {
namespace {

TEST(HalfTest, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << h;
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(HalfTest, KnownValuesAndRounding) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7c00)));
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // rounds up to infinity
  EXPECT_EQ(FloatToHalf(1e9f), 0x7c00);
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: rounds to even (1).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0x0000);  // below half the smallest subnormal
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
}

TEST(BFloat16Test, KnownValuesAndRounding) {
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-2.0f), 0xc000);
  // 1 + 2^-8 is a tie: to even (1.0); 1 + 3*2^-8 rounds up.
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(
      std::isnan(BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t b = 0; b < 0x10000; b += 7) {
    const float f = BFloat16ToFloat(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      EXPECT_EQ(FloatToBFloat16(f), b);
    }
  }
}

class ReduceKernelTest : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

TEST_P(ReduceKernelTest, MatchesDoubleReference) {
  const auto [type, op] = GetParam();
  const int n = 5;
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}, size_t{65537}}) {
    std::vector<char> acc = testing::MakeInput(type, 0, count);
    for (int r = 1; r < n; ++r) {
      std::vector<char> in = testing::MakeInput(type, r, count);
      ReduceInto(type, op, acc.data(), in.data(), count);
    }
    if (op == ReduceOp::kAvg) ScaleForAverage(type, acc.data(), count, n);
    EXPECT_EQ(testing::CheckResult(type, op, n, acc.data(), count), "") << "count " << count;
  }
}

TEST_P(ReduceKernelTest, AliasedInputsWork) {
  const auto [type, op] = GetParam();
  std::vector<char> a = testing::MakeInput(type, 3, 33);
  std::vector<char> b = a;
  ReduceInto(type, op, a.data(), a.data(), 33);
  ReduceInto(type, op, b.data(), std::vector<char>(b).data(), 33);
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceKernelTest,
                         ::testing::Combine(::testing::Values(DataType::kF32, DataType::kF64,
                                                              DataType::kF16, DataType::kBF16,
                                                              DataType::kI32, DataType::kI64),
                                            ::testing::Values(ReduceOp::kSum, ReduceOp::kAvg,
                                                              ReduceOp::kMin, ReduceOp::kMax)),
                         [](const auto& info) {
                           return std::string(DataTypeName(std::get<0>(info.param))) + "_" +
                                  std::string(ReduceOpName(std::get<1>(info.param)));
                         });

INSTANTIATE_TEST_SUITE_P(IntegersBitwise, ReduceKernelTest,
                         ::testing::Combine(::testing::Values(DataType::kI32, DataType::kI64),
                                            ::testing::Values(ReduceOp::kBitwiseAnd,
                                                              ReduceOp::kBitwiseOr,
                                                              ReduceOp::kBitwiseXor)),
                         [](const auto& info) {
                           return std::string(DataTypeName(std::get<0>(info.param))) + "_" +
                                  std::string(ReduceOpName(std::get<1>(info.param)));
                         });

// Every bit of the word takes part, the sign bit and the top half of an i64 included.
TEST(BitwiseKernelTest, EveryBitOfTheWordIsReduced) {
  const int64_t a = static_cast<int64_t>(0xF0F0'0000'FFFF'1234ull);
  const int64_t b = static_cast<int64_t>(0x8F00'FFFF'0F0F'4321ull);
  for (auto [op, want] :
       {std::pair{ReduceOp::kBitwiseAnd, a & b}, std::pair{ReduceOp::kBitwiseOr, a | b},
        std::pair{ReduceOp::kBitwiseXor, a ^ b}}) {
    int64_t x[2] = {a, b};
    const int64_t y[2] = {b, a};
    ReduceInto(DataType::kI64, op, x, y, 2);
    EXPECT_EQ(x[0], want) << ReduceOpName(op);
    EXPECT_EQ(x[1], want) << ReduceOpName(op);
    int32_t s[1] = {static_cast<int32_t>(a)};
    const int32_t t[1] = {static_cast<int32_t>(b)};
    ReduceInto(DataType::kI32, op, s, t, 1);
    EXPECT_EQ(s[0], static_cast<int32_t>(want)) << ReduceOpName(op);
  }
}

// The bitwise ops reduce integers only: CheckReduction refuses them on the floating-point types
// naming both, and the kernel leaves such a buffer as it is.
TEST(BitwiseKernelTest, FloatingPointTypesAreRefused) {
  for (DataType type : {DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16}) {
    for (ReduceOp op : {ReduceOp::kBitwiseAnd, ReduceOp::kBitwiseOr, ReduceOp::kBitwiseXor}) {
      const Status s = CheckReduction("all-reduce", type, op);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(s.message(), "all-reduce: " + std::string(ReduceOpName(op)) +
                                 " reduces integers (i32, i64), not " +
                                 std::string(DataTypeName(type)));
    }
    EXPECT_TRUE(CheckReduction("x", type, ReduceOp::kMax).ok());
  }
  for (DataType type : {DataType::kI32, DataType::kI64}) {
    EXPECT_TRUE(CheckReduction("x", type, ReduceOp::kBitwiseXor).ok());
  }
  EXPECT_EQ(CheckReduction("reduce", DataType::kI32, static_cast<ReduceOp>(8)).message(),
            "reduce: unknown op 8");
  EXPECT_EQ(CheckReduction("reduce", static_cast<DataType>(6), ReduceOp::kSum).message(),
            "reduce: unknown data type 6");
  float x[1] = {1.5f};
  const float y[1] = {2.5f};
  ReduceInto(DataType::kF32, ReduceOp::kBitwiseOr, x, y, 1);
  EXPECT_EQ(x[0], 1.5f);
}

TEST(ScaleTest, IntegersTruncateTowardZero) {
  std::vector<int32_t> v = {7, -7, 8, -1};
  ScaleForAverage(DataType::kI32, v.data(), v.size(), 2);
  EXPECT_EQ(v, (std::vector<int32_t>{3, -3, 4, 0}));
}

TEST(TypesTest, NamesRoundTrip) {
  for (auto t : {DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16, DataType::kI32,
                 DataType::kI64}) {
    EXPECT_EQ(ParseDataType(DataTypeName(t)), t);
  }
  for (auto op :
       {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct,
        ReduceOp::kBitwiseAnd, ReduceOp::kBitwiseOr, ReduceOp::kBitwiseXor}) {
    EXPECT_EQ(ParseReduceOp(ReduceOpName(op)), op);
  }
  EXPECT_EQ(ReduceOpName(ReduceOp::kBitwiseXor), "bxor");
  EXPECT_EQ(ParseAlgorithm("reduction-server"), Algorithm::kReductionServer);
  EXPECT_EQ(ParseAlgorithm("ring"), Algorithm::kRing);
  EXPECT_FALSE(ParseDataType("f8").has_value());
  // Aliases parse; names print as the canonical name.
  EXPECT_EQ(ParseDataType("half"), DataType::kF16);
  EXPECT_EQ(ParseReduceOp("prod"), ReduceOp::kProduct);
  EXPECT_EQ(ReduceOpName(ReduceOp::kProduct), "product");
  EXPECT_EQ(ParseAlgorithm("rs"), Algorithm::kReductionServer);
  EXPECT_EQ(AlgorithmName(Algorithm::kHierarchical), "hierarchical");
  EXPECT_EQ(DataTypeSize(DataType::kBF16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kI64), 8u);
  EXPECT_EQ(DataTypeSize(static_cast<DataType>(9)), 0u);
}

}  // namespace
}  // namespace cohort::collective
