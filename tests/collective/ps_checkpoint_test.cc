// Shard checkpoint files (collective/ps/ps_checkpoint.h) without a server: what is written is
// read back, the newest valid step is found, and a meta file that does not parse is refused.
#include "collective/ps/ps_checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/checkpoint.h"

namespace cohort::collective::ps {
namespace {

class ShardCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ps_checkpoint_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

ShardCheckpoint Sample(int64_t step) {
  ShardCheckpoint c;
  c.server_index = 1;
  c.num_servers = 3;
  c.optimizer.kind = OptimizerKind::kMomentum;
  c.optimizer.staleness = 2;
  c.optimizer.learning_rate = 0.125;
  c.applied_clock = step;
  c.async_pushes = 99;
  c.step = step;
  auto layout = ModelLayout::FromCounts({5, 7}, DataType::kF64);
  EXPECT_TRUE(layout.ok());
  c.layout = *layout;
  c.state = std::string(200, 's') + std::to_string(step);
  return c;
}

TEST_F(ShardCheckpointTest, WhatIsWrittenIsReadBackAndTheNewestStepWins) {
  auto path2 = WriteShardCheckpoint(dir_.string(), Sample(2));
  ASSERT_TRUE(path2.ok()) << path2.status().ToString();
  ASSERT_TRUE(WriteShardCheckpoint(dir_.string(), Sample(4)).ok());

  auto newest = ReadShardCheckpoint(dir_.string());
  ASSERT_TRUE(newest.ok()) << newest.status().ToString();
  const ShardCheckpoint want = Sample(4);
  EXPECT_EQ(newest->step, 4);
  EXPECT_EQ(newest->server_index, want.server_index);
  EXPECT_EQ(newest->num_servers, want.num_servers);
  EXPECT_EQ(newest->optimizer.kind, want.optimizer.kind);
  EXPECT_EQ(newest->optimizer.staleness, want.optimizer.staleness);
  EXPECT_EQ(newest->optimizer.learning_rate, want.optimizer.learning_rate);
  EXPECT_EQ(newest->applied_clock, want.applied_clock);
  EXPECT_EQ(newest->async_pushes, want.async_pushes);
  EXPECT_TRUE(newest->layout == want.layout);
  EXPECT_EQ(newest->state, want.state);
  EXPECT_EQ(newest->path, (dir_ / "ckpt-4").string());

  auto named = ReadShardCheckpoint(*path2);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(named->step, 2);
  EXPECT_EQ(named->state, Sample(2).state);
}

TEST_F(ShardCheckpointTest, NoCheckpointIsNotFoundAndABadMetaFileIsDataLoss) {
  std::filesystem::create_directories(dir_);
  EXPECT_EQ(ReadShardCheckpoint(dir_.string()).status().code(), StatusCode::kNotFound);

  CheckpointWriter writer(dir_.string(), 1);
  ASSERT_TRUE(writer.AddFile("meta", "not a meta file").ok());
  ASSERT_TRUE(writer.AddFile("shard", "").ok());
  ASSERT_TRUE(writer.Commit().ok());
  const auto bad = ReadShardCheckpoint(dir_.string());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("bad meta file"), std::string::npos)
      << bad.status().ToString();
}

}  // namespace
}  // namespace cohort::collective::ps
