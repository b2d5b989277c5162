// What InspectScriptCheckpoints lists of a script's own checkpoints (`cohort checkpoint`): which
// entries count as checkpoints, their sizes, order and verdicts, and those set aside under
// .cohort-torn/. Which bytes are torn, and the agent's renames, are tested through the agent's
// pass (tests/agent/torn_checkpoints_test.cc).
#include "common/script_checkpoints.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/checkpoint.h"
#include "tests/testing/checkpoint_bytes.h"
#include "tests/testing/temp_dir_test.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
namespace ct = cohort::testing;

class ScriptCheckpointsTest : public ct::TempDirTest {
 protected:
  // Writes `bytes` at `rel`, modified `second` seconds after the epoch (order by age).
  void Write(const std::string& rel, const std::string& bytes, int second) {
    fs::path p = fs::path(dir_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    Age(rel, second);
  }
  void Age(const std::string& rel, int second) {
    const struct timespec times[2] = {{second, 0}, {second, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, (dir_ + "/" + rel).c_str(), times, AT_SYMLINK_NOFOLLOW), 0)
        << rel;
  }
  static std::vector<std::string> Paths(const std::vector<ScriptCheckpoint>& checkpoints) {
    std::vector<std::string> out;
    for (const auto& c : checkpoints) out.push_back(c.path);
    return out;
  }
};

TEST_F(ScriptCheckpointsTest, FilesNamedAsCheckpointsArchivesAndStepFoldersAreListedOldestFirst) {
  const std::string whole = ct::Zip("archive/data.pkl", std::string(3000, 'x'));
  Write("epoch_2.pt", whole, 200);
  Write("epoch_1.pt", whole, 100);
  Write("model_state", whole, 150);  // a torch.save archive without an extension
  Write("weights.safetensors", ct::Safetensors(8), 160);
  Write("train.log", "epoch 1 done\n", 300);  // not a checkpoint
  Write("config.json", "{}", 310);
  Write("runs/exp1/last.ckpt", whole, 250);  // a plain folder is walked into
  Write("checkpoint-10/model.safetensors", ct::Safetensors(4), 400);
  Write("checkpoint-10/trainer_state.json", "{\"global_step\": 10}", 400);
  Age("checkpoint-10", 400);
  // Cohort's own checkpoint and LATEST are InspectCheckpoints's, not listed here.
  CheckpointWriter writer(dir_, 5);
  ASSERT_TRUE(writer.AddFile("model.bin", "weights").ok());
  ASSERT_TRUE(writer.Commit().ok());

  const ScriptCheckpointInventory inventory = InspectScriptCheckpoints(dir_ + "/");
  EXPECT_EQ(Paths(inventory.checkpoints),
            (std::vector<std::string>{"epoch_1.pt", "model_state", "weights.safetensors",
                                      "epoch_2.pt", "runs/exp1/last.ckpt", "checkpoint-10"}));
  for (const auto& c : inventory.checkpoints) EXPECT_EQ(c.torn, "") << c.path;
  EXPECT_EQ(inventory.checkpoints[0].bytes, whole.size());
  EXPECT_EQ(inventory.checkpoints[0].modified_ms, 100'000);
  EXPECT_FALSE(inventory.checkpoints[0].folder);
  const ScriptCheckpoint& folder = inventory.checkpoints.back();
  EXPECT_TRUE(folder.folder);
  EXPECT_EQ(folder.bytes, ct::Safetensors(4).size() + std::string("{\"global_step\": 10}").size());
  EXPECT_TRUE(inventory.set_aside.empty());
  EXPECT_FALSE(inventory.stopped);
}

TEST_F(ScriptCheckpointsTest, TornOnesSayWhyAndThoseSetAsideAreListedByAttempt) {
  const std::string whole = ct::Zip("archive/data.pkl", std::string(3000, 'x'));
  Write("epoch_1.pt", whole, 100);
  Write("epoch_2.pt", whole.substr(0, whole.size() / 2), 200);
  Write("step_3/optim.pt", "", 300);
  Write(".cohort-torn/attempt-10/epoch_9.pt", whole.substr(0, 100), 50);
  Write(".cohort-torn/attempt-2/run1/checkpoint-7/trainer_state.json", "{\"global", 60);
  Write(".cohort-torn/attempt-2/run1/checkpoint-7/training_args.bin", "args", 60);
  Write(".cohort-torn/notes.txt", "not an attempt folder", 70);

  const ScriptCheckpointInventory inventory = InspectScriptCheckpoints(dir_);
  ASSERT_EQ(Paths(inventory.checkpoints),
            (std::vector<std::string>{"epoch_1.pt", "epoch_2.pt", "step_3"}));
  EXPECT_EQ(inventory.checkpoints[0].torn, "");
  EXPECT_NE(inventory.checkpoints[1].torn.find("torch.save archive (zip) cut short"),
            std::string::npos)
      << inventory.checkpoints[1].torn;
  EXPECT_EQ(inventory.checkpoints[2].torn, "holds optim.pt, an empty file");
  ASSERT_EQ(Paths(inventory.set_aside),
            (std::vector<std::string>{"attempt-2/run1/checkpoint-7", "attempt-10/epoch_9.pt"}));
  EXPECT_NE(inventory.set_aside[0].torn.find("trainer_state.json, written last, does not parse"),
            std::string::npos)
      << inventory.set_aside[0].torn;
  EXPECT_NE(inventory.set_aside[1].torn, "");
}

TEST_F(ScriptCheckpointsTest, TheAgentsScopeJudgesOnlyTheNewestOfEachFolder) {
  const std::string whole = ct::Zip("archive/data.pkl", "x");
  const int files = static_cast<int>(kScriptCheckpointNewestPerFolder) + 3;
  for (int i = 0; i < files; ++i) Write("epoch_" + std::to_string(i) + ".pt", whole, 100 + i);
  Write("notes.txt", "newest of all, not a checkpoint, still one of the newest files", 999);
  auto count = [&](WalkScope scope) {
    UniqueFd top = OpenCheckpointFolder(dir_);
    EXPECT_TRUE(top.ok());
    int visited = 0;
    EXPECT_TRUE(WalkScriptCheckpoints(top.get(), scope,
                                      [&](int, const std::string&, const ScriptCheckpoint& c) {
                                        ++visited;
                                        EXPECT_NE(c.path, "epoch_0.pt");
                                      }));
    return visited;
  };
  EXPECT_EQ(count(WalkScope::kNewest), static_cast<int>(kScriptCheckpointNewestPerFolder) - 1);
  EXPECT_EQ(InspectScriptCheckpoints(dir_).checkpoints.size(), static_cast<size_t>(files));
}

TEST_F(ScriptCheckpointsTest, NoFolderALinkOrAFileListsNothing) {
  EXPECT_TRUE(InspectScriptCheckpoints(dir_ + "/missing").checkpoints.empty());
  EXPECT_TRUE(InspectScriptCheckpoints("").checkpoints.empty());
  Write("real/epoch_1.pt", ct::Zip("a", "b"), 100);
  ASSERT_EQ(::symlink((dir_ + "/real").c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_TRUE(InspectScriptCheckpoints(dir_ + "/link").checkpoints.empty());
  EXPECT_TRUE(InspectScriptCheckpoints(dir_ + "/real/epoch_1.pt").checkpoints.empty());
  EXPECT_EQ(InspectScriptCheckpoints(dir_ + "/real").checkpoints.size(), 1u);
}

}  // namespace
}  // namespace cohort
