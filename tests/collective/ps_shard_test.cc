// A parameter server's shard (collective/ps/ps_shard.h) without a server or a transport: which
// parts a server owns, how requests resolve to them, updates, SSP sums and saved state.
#include "collective/ps/ps_shard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace cohort::collective::ps {
namespace {

// Keys 1 (6 f32), 2 (4 f64), 3 (10 f32): 88 bytes, cut into two shards of 44 bytes (key 2 is
// split).
ModelLayout Layout() {
  auto layout = ModelLayout::Create(
      {{1, 6, DataType::kF32}, {2, 4, DataType::kF64}, {3, 10, DataType::kF32}});
  EXPECT_TRUE(layout.ok());
  return *layout;
}

OptimizerConfig Sgd(double lr) {
  OptimizerConfig c;
  c.learning_rate = lr;
  return c;
}

KeySelection Range(uint64_t first, uint32_t n, DataType type, uint64_t bytes) {
  KeySelection s;
  s.type = static_cast<uint8_t>(type);
  s.range = true;
  s.first_key = first;
  s.num_keys = n;
  s.bytes = bytes;
  return s;
}

TEST(ShardTest, EachServerHoldsItsByteRangeOfTheModel) {
  const ModelLayout layout = Layout();
  const std::vector<uint64_t> b = layout.ShardBoundaries(2);
  std::vector<char> model(layout.total_bytes());
  std::iota(model.begin(), model.end(), 0);
  for (int s = 0; s < 2; ++s) {
    Shard shard(2, s);
    ASSERT_TRUE(shard.Init(layout, Sgd(0.1), model.data() + b[s], b[s + 1] - b[s]).ok());
    EXPECT_EQ(shard.owned_bytes(), b[s + 1] - b[s]);
    EXPECT_EQ(shard.num_parts(), 2u) << "key 2 is split between the servers";
    EXPECT_EQ(shard.Values(), std::vector<char>(model.begin() + b[s], model.begin() + b[s + 1]));
  }
  Shard wrong(2, 0);
  EXPECT_EQ(wrong.Init(layout, Sgd(0.1), model.data(), 3).code(), StatusCode::kInvalidArgument);
  OptimizerConfig bad = Sgd(-1);
  EXPECT_FALSE(wrong.Init(layout, bad, nullptr, 0).ok());
}

TEST(ShardTest, ResolveRefusesWhatThisServerCannotServe) {
  const ModelLayout layout = Layout();
  Shard shard(1, 0);
  ASSERT_TRUE(shard.Init(layout, Sgd(0.1), nullptr, 0).ok());
  Shard::Parts parts;
  ASSERT_TRUE(shard.Resolve(Range(1, 1, DataType::kF32, 24), &parts).ok());
  EXPECT_EQ(parts.size(), 1u);

  auto code = [&](const KeySelection& s) { return shard.Resolve(s, &parts); };
  EXPECT_EQ(code(Range(9, 1, DataType::kF32, 24)).code(), StatusCode::kNotFound);
  EXPECT_EQ(code(Range(2, 5, DataType::kF64, 32)).code(), StatusCode::kNotFound);
  EXPECT_EQ(code(Range(1, 1, DataType::kF32, 20)).code(), StatusCode::kInvalidArgument);
  const Status type = code(Range(1, 1, DataType::kF64, 24));
  EXPECT_NE(type.message().find("holds f32"), std::string::npos) << type.ToString();
  KeySelection unknown_type = Range(1, 1, DataType::kF32, 24);
  unknown_type.type = 99;
  EXPECT_EQ(code(unknown_type).code(), StatusCode::kInvalidArgument);
  const uint64_t unsorted[] = {3, 1};
  KeySelection list = Range(0, 0, DataType::kF32, 64);
  list.range = false;
  list.keys = unsorted;
  EXPECT_EQ(code(list).code(), StatusCode::kInvalidArgument);

  // Key 1 lies wholly on server 0 of 2.
  Shard second(2, 1);
  ASSERT_TRUE(second.Init(layout, Sgd(0.1), nullptr, 0).ok());
  const Status elsewhere = second.Resolve(Range(1, 1, DataType::kF32, 24), &parts);
  EXPECT_NE(elsewhere.message().find("not on parameter server 1"), std::string::npos)
      << elsewhere.ToString();
}

TEST(ShardTest, UpdatesApplyAtOnceAndSspSumsApplyPerClock) {
  auto layout = ModelLayout::FromCounts({4}, DataType::kF32);
  ASSERT_TRUE(layout.ok());
  Shard shard(1, 0);
  const std::vector<float> zero(4, 0.0f);
  ASSERT_TRUE(shard.Init(*layout, Sgd(1.0), reinterpret_cast<const char*>(zero.data()), 16).ok());
  Shard::Parts parts;
  ASSERT_TRUE(shard.Resolve(Range(0, 1, DataType::kF32, 16), &parts).ok());
  auto values = [&] {
    std::vector<float> v(4);
    shard.Read(parts, reinterpret_cast<char*>(v.data()));
    return v;
  };
  const std::vector<float> one(4, 1.0f), two(4, 2.0f);
  shard.Update(parts, reinterpret_cast<const char*>(one.data()), 0.5);
  EXPECT_EQ(values(), std::vector<float>(4, -0.5f));

  shard.Accumulate(parts, 0, reinterpret_cast<const char*>(one.data()));
  shard.Accumulate(parts, 0, reinterpret_cast<const char*>(two.data()));
  shard.Accumulate(parts, 1, reinterpret_cast<const char*>(two.data()));
  EXPECT_EQ(values(), std::vector<float>(4, -0.5f)) << "sums wait for their clock to finish";
  shard.ApplyAccumulated(0, 1, 1.0);
  EXPECT_EQ(values(), std::vector<float>(4, -3.5f)) << "clock 0: one update of 1 + 2";
  shard.DropAccumulated();
  shard.ApplyAccumulated(1, 2, 1.0);
  EXPECT_EQ(values(), std::vector<float>(4, -3.5f)) << "clock 1's sum was dropped";
}

TEST(ShardTest, SavedStateRestoresValuesOptimizerStateAndUpdateCounts) {
  const ModelLayout layout = Layout();
  OptimizerConfig adam;
  adam.kind = OptimizerKind::kAdam;
  adam.learning_rate = 0.01;
  Shard shard(2, 1);
  ASSERT_TRUE(shard.Init(layout, adam, nullptr, 0).ok());
  Shard::Parts parts;
  ASSERT_TRUE(shard.Resolve(Range(3, 1, DataType::kF32, 40), &parts).ok());
  const std::vector<float> g(10, 0.25f);
  for (int i = 0; i < 3; ++i) shard.Update(parts, reinterpret_cast<const char*>(g.data()), 1.0);
  const std::string state = shard.SaveState();

  Shard restored(2, 1);
  ASSERT_TRUE(restored.Init(layout, adam, nullptr, 0).ok());
  ASSERT_TRUE(restored.LoadState(state).ok());
  EXPECT_EQ(restored.Values(), shard.Values());
  // The same next update on both: equal only if the moments and Adam's t came back too.
  Shard::Parts restored_parts;
  ASSERT_TRUE(restored.Resolve(Range(3, 1, DataType::kF32, 40), &restored_parts).ok());
  shard.Update(parts, reinterpret_cast<const char*>(g.data()), 1.0);
  restored.Update(restored_parts, reinterpret_cast<const char*>(g.data()), 1.0);
  EXPECT_EQ(restored.Values(), shard.Values());
  EXPECT_EQ(restored.SaveState(), shard.SaveState());

  EXPECT_EQ(restored.LoadState(state.substr(1)).code(), StatusCode::kDataLoss);
  EXPECT_EQ(restored.LoadState(state + "x").code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cohort::collective::ps
