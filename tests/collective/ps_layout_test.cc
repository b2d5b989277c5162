// Key-range sharding: balance by bytes, element-aligned cuts, and one contiguous buffer range
// per server for any sorted key list.
#include "collective/ps/ps_layout.h"

#include <gtest/gtest.h>

#include <random>

#include "collective/ps/ps_optimizer.h"

namespace cohort::collective::ps {
namespace {

TEST(PsLayoutTest, RejectsBadLayouts) {
  EXPECT_EQ(ModelLayout::Create({{2, 4, DataType::kF32}, {2, 4, DataType::kF32}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelLayout::Create({{1, 0, DataType::kF32}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelLayout::Create({{1, 4, DataType::kI32}}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(PsLayoutTest, SerializeRoundTripsAndParseRejectsGarbage) {
  auto l = ModelLayout::Create({{1, 4, DataType::kF32}, {9, 3, DataType::kF64}});
  ASSERT_TRUE(l.ok());
  auto back = ModelLayout::Parse(l->Serialize());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == *l);
  std::string s = l->Serialize();
  s.pop_back();
  EXPECT_EQ(ModelLayout::Parse(s).status().code(), StatusCode::kDataLoss);
}

TEST(PsLayoutTest, ShardsAreBalancedByBytesAndCutOnElements) {
  // One huge key and many small ones of mixed types.
  std::vector<KeySpec> keys = {{0, 1000003, DataType::kF32}};
  for (uint64_t k = 1; k < 50; ++k)
    keys.push_back({k * 10, 100 + k, k % 2 ? DataType::kF64 : DataType::kF32});
  auto l = ModelLayout::Create(keys);
  ASSERT_TRUE(l.ok());
  for (int servers : {1, 2, 3, 5, 8}) {
    auto b = l->ShardBoundaries(servers);
    ASSERT_EQ(b.size(), static_cast<size_t>(servers) + 1);
    EXPECT_EQ(b.front(), 0u);
    EXPECT_EQ(b.back(), l->total_bytes());
    const uint64_t share = l->total_bytes() / servers;
    for (int s = 0; s < servers; ++s) {
      EXPECT_LE(b[s], b[s + 1]);
      // Within one element (8 bytes) of an equal share.
      EXPECT_NEAR(static_cast<double>(b[s + 1] - b[s]), static_cast<double>(share), 16.0)
          << servers << " " << s;
      // Cuts land on element boundaries of the key they split.
      for (size_t i = 0; i < l->num_keys(); ++i) {
        if (b[s] > l->offset(i) && b[s] < l->offset(i) + l->bytes(i)) {
          EXPECT_EQ((b[s] - l->offset(i)) % DataTypeSize(l->keys()[i].type), 0u);
        }
      }
    }
  }
}

TEST(PsLayoutTest, EachServerGetsOneContiguousRangeOfTheCallersBuffer) {
  auto l = ModelLayout::FromCounts({7, 1000, 1, 33, 259, 4, 4096, 2}, DataType::kF32);
  ASSERT_TRUE(l.ok());
  std::mt19937 rng(5);
  for (int servers : {1, 2, 3, 4, 7}) {
    auto b = l->ShardBoundaries(servers);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<size_t> idx;
      for (size_t i = 0; i < l->num_keys(); ++i) {
        if (rng() % 2) idx.push_back(i);
      }
      uint64_t total = 0;
      for (size_t i : idx) total += l->bytes(i);
      auto slices = SplitRequest(*l, b, idx);
      // The slices tile the caller's buffer in order, each on a distinct increasing server, and
      // each slice's bytes equal the sum of that server's parts of its keys.
      uint64_t at = 0;
      int last = -1;
      for (const auto& sl : slices) {
        EXPECT_EQ(sl.buffer_begin, at);
        EXPECT_GT(sl.server, last);
        last = sl.server;
        uint64_t owned = 0;
        for (size_t j = sl.first_key; j < sl.end_key; ++j) {
          KeyPart p = PartOf(*l, idx[j], b[sl.server], b[sl.server + 1]);
          EXPECT_LT(p.begin, p.end);
          owned += p.end - p.begin;
        }
        EXPECT_EQ(owned, sl.buffer_end - sl.buffer_begin);
        at = sl.buffer_end;
      }
      EXPECT_EQ(at, total);
    }
  }
}

TEST(PsOptimizerTest, ConfigValidation) {
  OptimizerConfig c;
  EXPECT_TRUE(c.Validate().ok());
  c.momentum = 1.5;
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseOptimizerKind("adam"), OptimizerKind::kAdam);
  EXPECT_FALSE(ParseOptimizerKind("adagrad").has_value());
}

}  // namespace
}  // namespace cohort::collective::ps
