// StrandedCheckpointsNote on real attempt folders in a temporary work dir: what a script left in
// an earlier attempt's working directory on this node (the newest such folder) is named, Cohort's
// own files there are not, and a node that ran no earlier attempt says nothing.
#include "agent/stranded_checkpoints.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "agent/replica_env.h"
#include "tests/testing/checkpoint_bytes.h"
#include "tests/testing/temp_dir_test.h"

namespace cohort::agent {
namespace {

namespace fs = std::filesystem;
namespace ct = cohort::testing;

class StrandedCheckpointsTest : public ct::TempDirTest {
 protected:
  std::string Attempt(int attempt) const {
    return AttemptWorkingDir(dir_, "job", "chief-0", attempt);
  }
  void Write(int attempt, const std::string& rel, const std::string& bytes) {
    fs::path p = fs::path(Attempt(attempt)) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
  }
  std::string Note(int attempt) const {
    return StrandedCheckpointsNote(dir_, "job", "chief-0", attempt);
  }
};

TEST_F(StrandedCheckpointsTest, NamesWhatTheLastAttemptHereSavedInItsWorkingDirectory) {
  // Attempt 0: a torch.save snapshot in its working directory, beside Cohort's own files.
  Write(0, "snapshot.pt", ct::Zip("archive/data.pkl", std::string(100, 'x')));
  Write(0, "flight-recorder", std::string(4096, '\0'));
  Write(0, "stacks/stack-1.txt", "Thread 0x1\n");
  Write(0, "torchelastic-error.json", "{}");
  EXPECT_EQ(Note(1), "attempt 0 left snapshot.pt in its working directory (" + Attempt(0) +
                         "), and each attempt starts in a new one: a script resumes from what it "
                         "saves under $AIP_CHECKPOINT_DIR");
  // Attempt 1 ran elsewhere: attempt 2 here still finds attempt 0's.
  EXPECT_NE(Note(2).find("attempt 0 left snapshot.pt"), std::string::npos) << Note(2);
  // Attempt 1 ran here and saved nothing of its own: the newest folder here decides.
  fs::create_directories(Attempt(1));
  EXPECT_EQ(Note(2), "");
}

TEST_F(StrandedCheckpointsTest, NamesAtMostThreeAndCountsTheRest) {
  for (int epoch = 1; epoch <= 5; ++epoch) {
    Write(0, "ckpt/epoch_" + std::to_string(epoch) + ".pt", ct::Zip("archive/data.pkl", "x"));
  }
  const std::string note = Note(1);
  EXPECT_NE(note.find("attempt 0 left ckpt/epoch_"), std::string::npos) << note;
  EXPECT_NE(note.find(" and 2 more in its working directory"), std::string::npos) << note;
}

TEST_F(StrandedCheckpointsTest, SaysNothingWithoutAnEarlierAttemptHereOrACheckpointInIt) {
  EXPECT_EQ(Note(0), "");
  EXPECT_EQ(Note(1), "");  // attempt 0 never ran on this node
  Write(0, "train.log", "epoch 1\n");
  Write(0, "flight-recorder", std::string(4096, '\0'));
  EXPECT_EQ(Note(1), "");
}

}  // namespace
}  // namespace cohort::agent
