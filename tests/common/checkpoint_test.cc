#include "common/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace cohort {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("cohort_ckpt_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Commits step `step` with two files whose contents name the step.
  CheckpointInfo Commit(int64_t step) {
    CheckpointWriter w(dir_, step);
    EXPECT_TRUE(w.AddFile("model.bin", "weights@" + std::to_string(step)).ok());
    EXPECT_TRUE(w.AddFile("opt/state.bin", std::string(1000 + step, 'o')).ok());
    StatusOr<CheckpointInfo> info = w.Commit();
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? *info : CheckpointInfo{};
  }

  std::string Path(int64_t step) const { return dir_ + "/" + CheckpointDirName(step); }

  // `path` does not verify: data loss, and the message names `what`.
  static void ExpectDataLoss(const std::string& path, const std::string& what) {
    Status st = VerifyCheckpoint(path);
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr(what));
  }

  // The step of the newest checkpoint that verifies; -1 (after a failed check) when none does.
  int64_t LatestValidStep() const {
    StatusOr<CheckpointInfo> found = FindLatestValidCheckpoint(dir_);
    EXPECT_TRUE(found.ok()) << found.status().ToString();
    return found.ok() ? found->step : -1;
  }

  static std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  static void FlipByte(const std::string& path, size_t offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << path;
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(offset));
    f.put(static_cast<char>(c ^ 0x5a));
  }

  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir_;
};

TEST_F(CheckpointTest, CommitThenFindAndRead) {
  CheckpointWriter w(dir_, 7);
  ASSERT_TRUE(w.status().ok()) << w.status().ToString();
  EXPECT_EQ(w.path(), dir_ + "/ckpt-7.tmp");
  ASSERT_TRUE(w.AddFile("model.bin", "abc").ok());
  // Files written directly under path(), in a subdirectory too.
  fs::create_directories(w.path() + "/shards");
  std::string big(3 * 1024 * 1024 + 17, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31 + 7);
  std::ofstream(w.path() + "/shards/0.bin", std::ios::binary) << big;
  std::ofstream(w.path() + "/empty") << "";
  StatusOr<CheckpointInfo> info = w.Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->step, 7);
  EXPECT_EQ(info->path, Path(7));
  ASSERT_EQ(info->files.size(), 3u);
  EXPECT_EQ(info->files[0].name, "empty");
  EXPECT_EQ(info->files[0].size, 0u);
  EXPECT_EQ(info->files[1].name, "model.bin");
  EXPECT_EQ(info->files[1].size, 3u);
  EXPECT_EQ(info->files[2].name, "shards/0.bin");
  EXPECT_EQ(info->files[2].size, big.size());

  EXPECT_FALSE(fs::exists(dir_ + "/ckpt-7.tmp"));
  EXPECT_TRUE(fs::exists(Path(7) + "/MANIFEST"));
  EXPECT_EQ(Slurp(dir_ + "/LATEST"), "ckpt-7\n");
  EXPECT_TRUE(VerifyCheckpoint(Path(7)).ok());

  StatusOr<CheckpointInfo> found = FindLatestValidCheckpoint(dir_);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->step, 7);
  EXPECT_EQ(found->files, info->files);

  StatusOr<std::string> data = ReadCheckpointFile(found->path, "shards/0.bin");
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(*data, big);
  EXPECT_EQ(*ReadCheckpointFile(found->path, "model.bin"), "abc");
  EXPECT_EQ(ReadCheckpointFile(found->path, "nope").status().code(), StatusCode::kNotFound);

  // Commit is once only.
  EXPECT_EQ(w.Commit().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(w.AddFile("late", "x").code(), StatusCode::kFailedPrecondition);
}

TEST_F(CheckpointTest, NewestStepWins) {
  Commit(1);
  Commit(10);
  Commit(2);  // LATEST says ckpt-2, but the newest valid step is 10
  EXPECT_EQ(Slurp(dir_ + "/LATEST"), "ckpt-2\n");
  StatusOr<CheckpointInfo> found = FindLatestValidCheckpoint(dir_);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->step, 10);
  EXPECT_EQ(*ReadCheckpointFile(found->path, "model.bin"), "weights@10");
}

TEST_F(CheckpointTest, FallsBackPastTruncatedFile) {
  Commit(1);
  Commit(2);
  fs::resize_file(Path(2) + "/opt/state.bin", 10);
  ExpectDataLoss(Path(2), "opt/state.bin has 10 bytes, manifest says 1002");
  EXPECT_EQ(LatestValidStep(), 1);
  EXPECT_EQ(ReadCheckpointFile(Path(2), "opt/state.bin").status().code(), StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, FallsBackPastFlippedByte) {
  Commit(1);
  Commit(2);
  FlipByte(Path(2) + "/model.bin", 3);
  ExpectDataLoss(Path(2), "model.bin checksum mismatch");
  EXPECT_EQ(LatestValidStep(), 1);
  StatusOr<std::string> data = ReadCheckpointFile(Path(2), "model.bin");
  EXPECT_EQ(data.status().code(), StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, FallsBackPastMissingManifest) {
  Commit(3);
  Commit(4);
  fs::remove(Path(4) + "/MANIFEST");
  ExpectDataLoss(Path(4), "no MANIFEST");
  EXPECT_EQ(LatestValidStep(), 3);
}

TEST_F(CheckpointTest, FallsBackPastCorruptedManifest) {
  Commit(1);
  Commit(2);
  Commit(3);
  // An edit that keeps the manifest valid JSON is caught by the manifest's own checksum.
  std::string manifest = Path(3) + "/MANIFEST";
  std::string text = Slurp(manifest);
  size_t at = text.find("\"size\": 9");  // model.bin holds "weights@3"
  ASSERT_NE(at, std::string::npos) << text;
  text[at + 8] = '8';
  std::ofstream(manifest, std::ios::binary | std::ios::trunc) << text;
  ExpectDataLoss(Path(3), "manifest checksum mismatch");
  // A flipped byte that breaks the JSON is caught too.
  Commit(30);
  FlipByte(Path(30) + "/MANIFEST", 20);
  EXPECT_EQ(VerifyCheckpoint(Path(30)).code(), StatusCode::kDataLoss);
  // A torn (truncated) manifest does not parse.
  fs::resize_file(Path(2) + "/MANIFEST", 15);
  ExpectDataLoss(Path(2), "MANIFEST");
  EXPECT_EQ(LatestValidStep(), 1);
}

// A checkpoint is its job's to write and the agent that looks one up runs as root: a file replaced
// by a link (to /dev/zero, which never ends, or to a file only root may read), a FIFO (whose read
// would never return) or a file grown past its manifest's size is refused without reading it all.
TEST_F(CheckpointTest, FallsBackPastLinksFifosAndOversizedFiles) {
  Commit(1);
  Commit(2);
  Commit(3);
  Commit(4);
  fs::remove(Path(4) + "/model.bin");
  fs::create_symlink("/dev/zero", Path(4) + "/model.bin");
  ExpectDataLoss(Path(4), "model.bin is unreadable: file " + Path(4) +
                              "/model.bin is a symbolic link (not followed)");
  fs::remove(Path(3) + "/MANIFEST");
  fs::create_symlink("/dev/zero", Path(3) + "/MANIFEST");
  ExpectDataLoss(Path(3), "MANIFEST is a symbolic link");
  fs::remove(Path(2) + "/model.bin");
  ASSERT_EQ(::mkfifo((Path(2) + "/model.bin").c_str(), 0644), 0);
  ExpectDataLoss(Path(2), "model.bin is not a regular file");
  EXPECT_EQ(LatestValidStep(), 1);
  // A sparse terabyte is judged by its size, not read.
  Commit(5);
  fs::resize_file(Path(5) + "/model.bin", uint64_t{1} << 40);
  ExpectDataLoss(Path(5), "model.bin is unreadable: " + Path(5) +
                              "/model.bin has 1099511627776 "
                              "bytes, more than the 9 expected");
  EXPECT_EQ(ReadCheckpointFile(Path(5), "model.bin").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(LatestValidStep(), 1);
}

TEST_F(CheckpointTest, MissingFileAndRenamedDirectory) {
  Commit(5);
  Commit(6);
  fs::remove(Path(6) + "/model.bin");
  EXPECT_THAT(VerifyCheckpoint(Path(6)).message(), HasSubstr("model.bin is unreadable"));
  // A checkpoint directory renamed to another step no longer verifies.
  fs::rename(Path(5), Path(9));
  EXPECT_THAT(VerifyCheckpoint(Path(9)).message(), HasSubstr("does not match"));
  StatusOr<CheckpointInfo> found = FindLatestValidCheckpoint(dir_);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(found.status().message(), HasSubstr("ckpt-9"));
  EXPECT_THAT(found.status().message(), HasSubstr("ckpt-6"));
}

TEST_F(CheckpointTest, StagingDirectoriesAreIgnoredByFind) {
  Commit(1);
  {
    // An uncommitted newer checkpoint, as a crash leaves it.
    fs::create_directories(dir_ + "/ckpt-2.tmp");
    std::ofstream(dir_ + "/ckpt-2.tmp/model.bin") << "partial";
  }
  fs::create_directories(dir_ + "/not-a-checkpoint");
  fs::create_directories(dir_ + "/ckpt-007");
  EXPECT_EQ(LatestValidStep(), 1);
}

TEST_F(CheckpointTest, CrashedWriterProcessLeavesOnlyAStagingDirectory) {
  Commit(1);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    CheckpointWriter w(dir_, 2);
    (void)w.AddFile("model.bin", "half-written");
    ::_exit(0);  // dies before Commit, without running destructors
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_TRUE(fs::exists(dir_ + "/ckpt-2.tmp/model.bin"));
  StatusOr<CheckpointInfo> found = FindLatestValidCheckpoint(dir_);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->step, 1);
  // A new attempt at the same step starts clean and commits.
  CheckpointWriter again(dir_, 2);
  EXPECT_FALSE(fs::exists(again.path() + "/model.bin"));
  ASSERT_TRUE(again.AddFile("model.bin", "whole").ok());
  ASSERT_TRUE(again.Commit().ok());
  found = FindLatestValidCheckpoint(dir_);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->step, 2);
}

TEST_F(CheckpointTest, ConcurrentCommitsOfDifferentSteps) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        int64_t step = t * 10 + i;
        CheckpointWriter w(dir_, step);
        if (!w.AddFile("model.bin", "m" + std::to_string(step)).ok() || !w.Commit().ok()) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(LatestValidStep(), 32);
  std::string latest = Slurp(dir_ + "/LATEST");
  EXPECT_THAT(latest, ::testing::StartsWith("ckpt-"));
  EXPECT_TRUE(VerifyCheckpoint(dir_ + "/" + latest.substr(0, latest.size() - 1)).ok());
  for (const auto& name : Entries()) EXPECT_THAT(name, ::testing::Not(::testing::EndsWith(".tmp")));
}

TEST_F(CheckpointTest, AbandonedWriterRemovesStaging) {
  {
    CheckpointWriter w(dir_, 3);
    ASSERT_TRUE(w.AddFile("x", "y").ok());
    EXPECT_TRUE(fs::exists(w.path()));
  }
  EXPECT_FALSE(fs::exists(dir_ + "/ckpt-3.tmp"));
  EXPECT_EQ(FindLatestValidCheckpoint(dir_).status().code(), StatusCode::kNotFound);
}

TEST_F(CheckpointTest, RecommitReplacesStep) {
  Commit(4);
  CheckpointWriter w(dir_, 4);
  ASSERT_TRUE(w.AddFile("model.bin", "second").ok());
  ASSERT_TRUE(w.Commit().ok());
  StatusOr<CheckpointInfo> found = FindLatestValidCheckpoint(dir_);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->files.size(), 1u);
  EXPECT_EQ(*ReadCheckpointFile(found->path, "model.bin"), "second");
  EXPECT_EQ(Entries(), (std::vector<std::string>{"LATEST", "ckpt-4"}));
}

TEST_F(CheckpointTest, RejectsBadNamesAndSteps) {
  CheckpointWriter w(dir_, 1);
  for (const char* bad : {"", "/abs", "../up", "a/../b", "a//b", "./a", "MANIFEST", "dir/"}) {
    EXPECT_EQ(w.AddFile(bad, "x").code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(w.AddFile("sub/MANIFEST", "fine in a subdirectory").ok());
  std::ofstream(w.path() + "/MANIFEST") << "user-written";
  EXPECT_EQ(w.Commit().status().code(), StatusCode::kInvalidArgument);

  CheckpointWriter negative(dir_, -1);
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.AddFile("a", "b").code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(negative.Commit().ok());

  // A directory that cannot be created: its parent is a file.
  std::ofstream(dir_ + "/file") << "x";
  CheckpointWriter blocked(dir_ + "/file/sub", 1);
  EXPECT_FALSE(blocked.status().ok());
  EXPECT_THAT(blocked.status().message(), HasSubstr(dir_ + "/file/sub"));
}

TEST_F(CheckpointTest, NotFoundCases) {
  EXPECT_EQ(FindLatestValidCheckpoint(dir_).status().code(), StatusCode::kNotFound);
  fs::create_directories(dir_);
  EXPECT_EQ(FindLatestValidCheckpoint(dir_).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadCheckpointManifest(dir_ + "/ckpt-1").status().code(), StatusCode::kNotFound);
}

TEST_F(CheckpointTest, RetainKeepsNewestCompleteCheckpoints) {
  for (int step : {1, 2, 3, 4, 5}) Commit(step);
  fs::create_directories(dir_ + "/ckpt-6.tmp");              // stale staging from a crash
  std::ofstream(dir_ + "/LATEST.ckpt-6.tmp") << "ckpt-6\n";  // crash before the LATEST rename
  fs::remove(Path(5) + "/MANIFEST");                         // torn newest
  ASSERT_TRUE(RetainLatest(dir_, 2).ok());
  EXPECT_EQ(Entries(), (std::vector<std::string>{"LATEST", "ckpt-3", "ckpt-4"}));
  EXPECT_EQ(LatestValidStep(), 4);

  ASSERT_TRUE(RetainLatest(dir_, 1).ok());
  EXPECT_EQ(Entries(), (std::vector<std::string>{"LATEST", "ckpt-4"}));
  ASSERT_TRUE(RetainLatest(dir_, 3).ok());  // fewer than keep: nothing removed
  EXPECT_EQ(Entries(), (std::vector<std::string>{"LATEST", "ckpt-4"}));

  EXPECT_EQ(RetainLatest(dir_, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RetainLatest(dir_ + "/missing", 1).code(), StatusCode::kNotFound);
}

TEST_F(CheckpointTest, ManifestIsReadableJson) {
  Commit(12);
  StatusOr<CheckpointInfo> info = ReadCheckpointManifest(Path(12));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->step, 12);
  ASSERT_EQ(info->files.size(), 2u);
  EXPECT_EQ(info->files[0].name, "model.bin");
  EXPECT_EQ(info->files[1].name, "opt/state.bin");
  EXPECT_EQ(info->files[1].size, 1012u);
  std::string text = Slurp(Path(12) + "/MANIFEST");
  EXPECT_THAT(text, HasSubstr("\"format\""));
  EXPECT_THAT(text, HasSubstr("\"crc32\""));
}

}  // namespace
}  // namespace cohort
