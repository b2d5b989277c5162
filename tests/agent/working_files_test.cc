// CarryWorkingFiles on real attempt folders in a temporary work dir: what a script left in the
// newest earlier attempt's working directory on this node moves into the new attempt's, the
// agent's own files there stay, and a node that ran no earlier attempt carries nothing.
#include "agent/working_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "agent/replica_env.h"
#include "tests/testing/temp_dir_test.h"

namespace cohort::agent {
namespace {

namespace fs = std::filesystem;
namespace ct = cohort::testing;

class WorkingFilesTest : public ct::TempDirTest {
 protected:
  std::string Attempt(int attempt) const {
    return AttemptWorkingDir(dir_, "job", "chief-0", attempt);
  }
  void Write(int attempt, const std::string& rel, const std::string& bytes) {
    fs::path p = fs::path(Attempt(attempt)) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
  }
  std::string Read(int attempt, const std::string& rel) const {
    std::ifstream in(fs::path(Attempt(attempt)) / rel, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  CarriedFiles Carry(int attempt) {
    fs::create_directories(Attempt(attempt));
    return CarryWorkingFiles(dir_, "job", "chief-0", attempt);
  }
};

TEST_F(WorkingFilesTest, ARestartHereStartsWithWhatTheScriptLeftAndNotWithTheAgentsFiles) {
  Write(0, "snapshot.pt", "PK\x03\x04 the model");
  Write(0, "logs/epoch_1.txt", "loss 0.3\n");
  Write(0, kFlightRecorderEntry, std::string(4096, '\0'));
  Write(0, std::string(kStackDumpEntry) + "/stack-1.txt", "Thread 0x1\n");
  Write(0, kErrorFileEntry, "{}");
  fs::create_symlink("/nonexistent/data", fs::path(Attempt(0)) / "data");
  const CarriedFiles carried = Carry(1);
  EXPECT_EQ(carried.from_attempt, 0);
  EXPECT_EQ(carried.moved, (std::vector<std::string>{"data", "logs", "snapshot.pt"}));
  EXPECT_TRUE(carried.errors.empty());
  EXPECT_EQ(Read(1, "snapshot.pt"), "PK\x03\x04 the model");
  EXPECT_EQ(Read(1, "logs/epoch_1.txt"), "loss 0.3\n");
  EXPECT_EQ(fs::read_symlink(fs::path(Attempt(1)) / "data"), "/nonexistent/data");
  EXPECT_FALSE(fs::exists(fs::path(Attempt(0)) / "snapshot.pt"));
  // The agent's files stay with the attempt they belong to.
  EXPECT_TRUE(fs::exists(fs::path(Attempt(0)) / kFlightRecorderEntry));
  EXPECT_TRUE(fs::exists(fs::path(Attempt(0)) / kStackDumpEntry));
  EXPECT_FALSE(fs::exists(fs::path(Attempt(1)) / kErrorFileEntry));
  EXPECT_EQ(CarriedFilesNote(carried),
            "carried attempt 0's working files into this attempt's (data, logs, snapshot.pt), as "
            "torchrun restarts a worker where it ran");
}

TEST_F(WorkingFilesTest, TheNewestEarlierAttemptHereIsCarriedOnce) {
  Write(0, "old.txt", "0");
  // Attempt 1 ran elsewhere: attempt 2 here starts with attempt 0's files.
  CarriedFiles carried = Carry(2);
  EXPECT_EQ(carried.from_attempt, 0);
  EXPECT_EQ(carried.moved, std::vector<std::string>{"old.txt"});
  // Attempt 3 here: attempt 2's (the newest here, holding them now), not attempt 0's (emptied).
  Write(2, "new.txt", "2");
  carried = Carry(3);
  EXPECT_EQ(carried.from_attempt, 2);
  EXPECT_EQ(carried.moved, (std::vector<std::string>{"new.txt", "old.txt"}));
  // A name the new attempt's directory holds already stays where it was.
  Write(3, "clash.txt", "3");
  Write(4, "clash.txt", "new");
  carried = Carry(4);
  EXPECT_EQ(Read(4, "clash.txt"), "new");
  EXPECT_EQ(Read(3, "clash.txt"), "3");
  EXPECT_EQ(carried.moved, (std::vector<std::string>{"new.txt", "old.txt"}));
}

TEST_F(WorkingFilesTest, TheNoteNamesThreeEntriesAndCountsTheRestAndSaysWhatFailed) {
  CarriedFiles carried;
  carried.from_attempt = 2;
  carried.moved = {"a", "b", "c", "d", "e"};
  carried.errors = {"f: Permission denied"};
  EXPECT_EQ(CarriedFilesNote(carried),
            "carried attempt 2's working files into this attempt's (a, b, c and 2 more), as "
            "torchrun restarts a worker where it ran; could not carry f: Permission denied");
}

TEST_F(WorkingFilesTest, NothingIsCarriedWithoutAnEarlierAttemptHere) {
  EXPECT_EQ(Carry(1).from_attempt, -1);
  EXPECT_EQ(CarriedFilesNote(Carry(1)), "");
  // An earlier attempt that left only the agent's files: nothing to say.
  Write(1, kFlightRecorderEntry, "x");
  const CarriedFiles carried = Carry(2);
  EXPECT_EQ(carried.from_attempt, 1);
  EXPECT_TRUE(carried.moved.empty());
  EXPECT_EQ(CarriedFilesNote(carried), "");
  // A name that is a file, not a directory, is no attempt that ran here: the newest before it
  // (attempt 2's, made by the carry into it above) is taken.
  std::ofstream(Attempt(5)) << "not a dir";
  EXPECT_EQ(Carry(6).from_attempt, 2);
}

}  // namespace
}  // namespace cohort::agent
