// SetAsideTornCheckpoints on real files in a temporary checkpoint directory: what a crash leaves
// half written (a zip cut short, a short .safetensors file, an empty .pt, a Trainer folder
// without its trainer_state.json) is renamed into .cohort-torn/attempt-<K>/, the unit being the
// step folder that holds it; what is complete, unknown, Cohort's own, behind a symbolic link or
// not a regular file stays where it is. The zips here have the layout of a one-file zip; the
// integration test (tests/integration/torch_ddp_test.cc) cuts real torch.save archives, and one
// test here real torch.distributed.checkpoint saves.
#include "agent/torn_checkpoints.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/script_checkpoints.h"
#include "tests/testing/binaries.h"
#include "tests/testing/checkpoint_bytes.h"
#include "tests/testing/process.h"

namespace cohort::agent {
namespace {

namespace fs = std::filesystem;
namespace ct = cohort::testing;
using namespace std::chrono_literals;

using ct::Safetensors;
using ct::Zip;

class TornCheckpointsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "cohort-torn-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    base_ = pattern;
    dir_ = base_ / "checkpoints";
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(base_); }

  void Write(const std::string& rel, const std::string& bytes) {
    fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
  }
  bool Here(const std::string& rel) const { return fs::exists(fs::symlink_status(dir_ / rel)); }
  bool SetAside(const std::string& rel, int attempt = 1) const {
    return fs::exists(
        fs::symlink_status(dir_ / ".cohort-torn" / ("attempt-" + std::to_string(attempt)) / rel));
  }
  std::vector<std::string> Pass(int attempt = 1) {
    return SetAsideTornCheckpoints(dir_.string(), attempt, std::nullopt).notes;
  }

  fs::path base_;
  fs::path dir_;
};

std::string Joined(const std::vector<std::string>& notes) {
  std::string out;
  for (const auto& n : notes) out += n + "\n";
  return out;
}

TEST_F(TornCheckpointsTest, AZipCutShortIsSetAsideAndACompleteOneStays) {
  const std::string whole = Zip("archive/data.pkl", std::string(4000, 'x'), "a comment");
  Write("epoch_1.pt", whole);
  Write("epoch_2.pt", whole.substr(0, whole.size() / 2));
  Write("epoch_3.pt", whole.substr(0, whole.size() - 1));  // cut inside the comment
  auto notes = Pass();
  EXPECT_TRUE(Here("epoch_1.pt"));
  EXPECT_FALSE(Here("epoch_2.pt"));
  EXPECT_FALSE(Here("epoch_3.pt"));
  EXPECT_TRUE(SetAside("epoch_2.pt"));
  EXPECT_TRUE(SetAside("epoch_3.pt"));
  ASSERT_EQ(notes.size(), 2u) << Joined(notes);
  EXPECT_EQ(notes[0],
            "set aside torn checkpoint epoch_2.pt (a torch.save archive (zip) cut short: no "
            "end-of-central-directory record at its end) as .cohort-torn/attempt-1/epoch_2.pt");
  // The moved bytes are the file's, untouched.
  EXPECT_EQ(fs::file_size(dir_ / ".cohort-torn/attempt-1/epoch_2.pt"), whole.size() / 2);
  // A second pass finds nothing more.
  EXPECT_TRUE(Pass().empty());
}

TEST_F(TornCheckpointsTest, ASafetensorsFileShorterThanItsHeaderSaysIsSetAside) {
  const std::string whole = Safetensors(256);
  Write("model.safetensors", whole);
  Write("short.safetensors", whole.substr(0, whole.size() - 10));
  Write("in_header.safetensors", whole.substr(0, 20));
  Write("in_length.safetensors", whole.substr(0, 5));
  auto notes = Pass();
  EXPECT_TRUE(Here("model.safetensors"));
  EXPECT_TRUE(SetAside("short.safetensors"));
  EXPECT_TRUE(SetAside("in_header.safetensors"));
  EXPECT_TRUE(SetAside("in_length.safetensors"));
  EXPECT_NE(
      Joined(notes).find("a .safetensors file cut short: " + std::to_string(whole.size() - 10) +
                         " bytes of the " + std::to_string(whole.size()) + " its header describes"),
      std::string::npos)
      << Joined(notes);
}

TEST_F(TornCheckpointsTest, OnlyEmptyFilesNamedAsCheckpointsAreTorn) {
  Write("epoch_4.pth", "");
  Write("last.ckpt", "");
  Write("DONE", "");
  Write("notes.txt", "not a checkpoint, not a zip");
  Write("legacy.pt", std::string("\x80\x02", 2) + "pickled, not a zip: not judged");
  Pass();
  EXPECT_TRUE(SetAside("epoch_4.pth"));
  EXPECT_TRUE(SetAside("last.ckpt"));
  EXPECT_TRUE(Here("DONE"));
  EXPECT_TRUE(Here("notes.txt"));
  EXPECT_TRUE(Here("legacy.pt"));
}

TEST_F(TornCheckpointsTest, ATrainerCheckpointWithoutItsStateIsSetAsideWhole) {
  const std::string zip = Zip("data.pkl", "x");
  Write("checkpoint-5/model.safetensors", Safetensors(4));
  Write("checkpoint-5/optimizer.pt", zip);
  Write("checkpoint-5/trainer_state.json", R"({"global_step": 5})");
  Write("checkpoint-10/model.safetensors", Safetensors(4));
  Write("checkpoint-10/optimizer.pt", zip);  // complete, but trainer_state.json never came
  Write("checkpoint-15/trainer_state.json", R"({"global_st)");  // cut short
  auto notes = Pass();
  EXPECT_TRUE(Here("checkpoint-5/trainer_state.json"));
  EXPECT_TRUE(SetAside("checkpoint-10/optimizer.pt"));
  EXPECT_TRUE(SetAside("checkpoint-15"));
  EXPECT_FALSE(Here("checkpoint-10"));
  EXPECT_FALSE(Here("checkpoint-15"));
  EXPECT_NE(Joined(notes).find("set aside torn checkpoint checkpoint-10 (a Hugging Face Trainer "
                               "checkpoint without its trainer_state.json, written last) as "
                               ".cohort-torn/attempt-1/checkpoint-10"),
            std::string::npos)
      << Joined(notes);
}

TEST_F(TornCheckpointsTest, ACheckpointFolderThatIsNotRecognisablyTrainersStays) {
  // save_pretrained into checkpoint-N by a loop of one's own: no trainer_state.json ever.
  Write("checkpoint-3/model.safetensors", Safetensors(4));
  Write("checkpoint-3/config.json", "{}");
  Pass();
  EXPECT_TRUE(Here("checkpoint-3/model.safetensors"));
  // Trainer's training_args.bin makes it Trainer's.
  Write("checkpoint-3/training_args.bin", Zip("data.pkl", "args"));
  Pass(2);
  EXPECT_TRUE(SetAside("checkpoint-3/training_args.bin", 2));
}

TEST_F(TornCheckpointsTest, AStepFolderHoldingATornFileGoesWholeAPlainFolderKeepsTheRest) {
  const std::string zip = Zip("data.pkl", std::string(100, 'y'));
  Write("step_7/model.pt", zip.substr(0, 50));
  Write("step_7/extra.json", "{}");
  Write("step_6/model.pt", zip);
  Write("run1/epoch_1.pt", zip);
  Write("run1/epoch_2.pt", zip.substr(0, 60));
  TornCheckpoints torn = SetAsideTornCheckpoints(dir_.string(), 3, std::nullopt);
  const std::vector<std::string>& notes = torn.notes;
  EXPECT_EQ(torn.set_aside, (std::vector<std::string>{"run1/epoch_2.pt", "step_7"}));
  EXPECT_EQ(TornCheckpointsSummary(torn),
            "set aside torn checkpoints run1/epoch_2.pt, step_7 (cohort logs says why)");
  EXPECT_TRUE(SetAside("step_7/extra.json", 3));
  EXPECT_TRUE(Here("step_6/model.pt"));
  EXPECT_TRUE(Here("run1/epoch_1.pt"));
  EXPECT_TRUE(SetAside("run1/epoch_2.pt", 3));
  EXPECT_NE(Joined(notes).find("set aside torn checkpoint step_7 (holds model.pt, a torch.save "
                               "archive (zip) cut short"),
            std::string::npos)
      << Joined(notes);
  EXPECT_NE(Joined(notes).find("as .cohort-torn/attempt-3/run1/epoch_2.pt"), std::string::npos);
}

TEST_F(TornCheckpointsTest, DistributedCheckpointShardsWithoutTheirMetadataTakeTheStepFolder) {
  Write("step_100/__0_0.distcp", "shard");
  Write("step_100/.metadata", "pickled");
  Write("step_200/__0_0.distcp", "shard");  // .metadata never came
  Write("step_300/model/__0_0.distcp", "shard");
  Write("step_400/__0_0.distcp", "shard");
  Write("step_400/__0.metadata", "pickled");  // one per rank, without collectives
  Write("latest/__0_0.distcp", "shard");      // not a step folder: nothing before it to resume
  TornCheckpoints torn = SetAsideTornCheckpoints(dir_.string(), 1, std::nullopt);
  EXPECT_EQ(torn.set_aside, (std::vector<std::string>{"step_200", "step_300"}))
      << Joined(torn.notes);
  EXPECT_TRUE(Here("step_100/.metadata"));
  EXPECT_TRUE(Here("step_400/__0.metadata"));
  EXPECT_TRUE(Here("latest/__0_0.distcp"));
  EXPECT_NE(Joined(torn.notes)
                .find("step_300 (holds model/, torch.distributed.checkpoint shards "
                      "(.distcp) without the .metadata written last)"),
            std::string::npos)
      << Joined(torn.notes);
}

// Real torch.distributed.checkpoint saves (one process): one whose .metadata is gone, as a save
// cut short before its last rename leaves it, is set aside; the other stays. The interpreter is
// COHORT_TEST_TORCH_PYTHON, or Debian's python3, whose torch 1.13 cannot import its checkpoint
// module under Python 3.11 (a dataclass error): then it skips, and tests/torch/
// debian_torch_check.sh runs it with a newer Debian's torch.
TEST_F(TornCheckpointsTest, ARealDistributedCheckpointCutBeforeItsMetadataIsSetAside) {
  const char* other = std::getenv("COHORT_TEST_TORCH_PYTHON");
  const std::string python = other != nullptr && *other != '\0' ? other : ct::kPython;
  const std::string script = R"(
import sys, torch
state = {"w": torch.arange(64, dtype=torch.float32), "b": torch.ones(4)}
for step in ("step_1", "step_2"):
    path = sys.argv[1] + "/" + step
    try:
        import torch.distributed.checkpoint as dcp
        dcp.save(state, checkpoint_id=path)
    except (ImportError, AttributeError):  # torch 1.13
        from torch.distributed._shard.checkpoint import FileSystemWriter, save_state_dict
        save_state_dict(state, FileSystemWriter(path), no_dist=True)
)";
  ct::RunResult saved = ct::RunProcess(python, {"-c", script, dir_.string()}, {}, 120s);
  if (saved.exit_code != 0 && !fs::exists(dir_ / "step_1")) {
    const std::string why = saved.err.substr(saved.err.size() > 300 ? saved.err.size() - 300 : 0);
    GTEST_SKIP() << python << " cannot save with torch.distributed.checkpoint: " << why;
  }
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  ASSERT_TRUE(Here("step_2/.metadata"));
  EXPECT_TRUE(Pass().empty());  // both complete
  fs::remove(dir_ / "step_2/.metadata");
  TornCheckpoints torn = SetAsideTornCheckpoints(dir_.string(), 2, std::nullopt);
  EXPECT_EQ(torn.set_aside, std::vector<std::string>{"step_2"}) << Joined(torn.notes);
  EXPECT_TRUE(Here("step_1/.metadata"));
}

// Only the newest files and step folders of a folder are read: a save cut short is among the
// newest, nothing of the job having written after it.
TEST_F(TornCheckpointsTest, OnlyTheNewestEntriesOfAFolderAreJudged) {
  const std::string zip = Zip("data.pkl", std::string(100, 'n'));
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (size_t i = 0; i < kScriptCheckpointNewestPerFolder + 4; ++i) {
    Write("epoch_" + std::to_string(i) + ".pt", zip);
  }
  Write("epoch_0.pt", zip.substr(0, 30));  // torn long ago: older than 16 complete ones
  fs::last_write_time(dir_ / "epoch_0.pt", old);
  Write("checkpoint-1/training_args.bin", zip);  // a Trainer folder without its state, old
  fs::last_write_time(dir_ / "checkpoint-1", old);
  for (size_t i = 0; i < kScriptCheckpointNewestPerFolder; ++i) {
    Write("checkpoint-" + std::to_string(100 + i) + "/trainer_state.json", "{}");
  }
  Write("epoch_99.pt", zip.substr(0, 40));  // the newest: torn
  TornCheckpoints torn = SetAsideTornCheckpoints(dir_.string(), 1, std::nullopt);
  EXPECT_EQ(torn.set_aside, std::vector<std::string>{"epoch_99.pt"}) << Joined(torn.notes);
  EXPECT_TRUE(Here("epoch_0.pt"));
  EXPECT_TRUE(Here("checkpoint-1/training_args.bin"));
}

TEST_F(TornCheckpointsTest, CohortsOwnCheckpointsAreLeftToTheirManifest) {
  Write("ckpt-4/MANIFEST", "{}");
  Write("ckpt-4/model.pt", "");
  Write("ckpt-5.tmp/model.pt", "");
  Write("LATEST", "ckpt-4\n");
  // A ckpt-N without Cohort's MANIFEST is a script's own step folder.
  Write("ckpt-6/model.pt", "");
  Pass();
  EXPECT_TRUE(Here("ckpt-4/model.pt"));
  EXPECT_TRUE(Here("ckpt-5.tmp/model.pt"));
  EXPECT_TRUE(Here("LATEST"));
  EXPECT_TRUE(SetAside("ckpt-6/model.pt"));
}

TEST_F(TornCheckpointsTest, NeitherALinkNorAFifoIsFollowedOrOpened) {
  const std::string zip = Zip("data.pkl", std::string(100, 'z'));
  fs::path outside = base_ / "outside";
  fs::create_directories(outside);
  std::ofstream(outside / "torn.pt", std::ios::binary) << zip.substr(0, 10);
  fs::create_symlink(outside / "torn.pt", dir_ / "linked.pt");
  fs::create_directory_symlink(outside, dir_ / "linked_dir");
  ASSERT_EQ(::mkfifo((dir_ / "pipe.pt").c_str(), 0600), 0);
  auto notes = Pass();  // returns: the FIFO was not opened for reading
  EXPECT_TRUE(notes.empty()) << Joined(notes);
  EXPECT_TRUE(fs::exists(outside / "torn.pt"));
  EXPECT_TRUE(Here("linked.pt"));
  EXPECT_TRUE(Here("pipe.pt"));
  // Nor a checkpoint dir that is itself a link, given with its trailing slash as
  // AIP_CHECKPOINT_DIR is.
  fs::create_directory_symlink(outside, base_ / "linked_checkpoints");
  notes =
      SetAsideTornCheckpoints((base_ / "linked_checkpoints").string() + "/", 1, std::nullopt).notes;
  EXPECT_TRUE(notes.empty()) << Joined(notes);
  EXPECT_TRUE(fs::exists(outside / "torn.pt"));
}

TEST_F(TornCheckpointsTest, ANameTakenInTheAttemptFolderGetsASuffixAndNoDirIsNothing) {
  const std::string zip = Zip("data.pkl", std::string(100, 'q'));
  Write("epoch_2.pt", zip.substr(0, 10));
  Pass();
  Write("epoch_2.pt", zip.substr(0, 20));  // torn again, same attempt number
  auto notes = Pass();
  EXPECT_TRUE(SetAside("epoch_2.pt"));
  EXPECT_TRUE(SetAside("epoch_2.pt-2"));
  EXPECT_EQ(fs::file_size(dir_ / ".cohort-torn/attempt-1/epoch_2.pt-2"), 20u);
  EXPECT_TRUE(SetAsideTornCheckpoints((base_ / "absent").string(), 1, std::nullopt).notes.empty());
}

}  // namespace
}  // namespace cohort::agent
