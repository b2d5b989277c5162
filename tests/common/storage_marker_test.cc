// The storage check's marker file: written whole (a reader sees the token written last), what a
// reader is told when the root, the marker or its format is wrong, and the output-dir-under-root
// rule that decides which jobs need shared storage.
#include "common/storage_marker.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "tests/testing/temp_dir_test.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

class StorageMarkerTest : public testing::TempDirTest {};

TEST_F(StorageMarkerTest, AWrittenTokenIsReadBackAndARewriteReplacesIt) {
  ASSERT_TRUE(WriteStorageMarker(dir_, "aaaa").ok());
  auto token = ReadStorageMarker(dir_);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(*token, "aaaa");
  ASSERT_TRUE(WriteStorageMarker(dir_, "bbbb").ok());
  EXPECT_EQ(ReadStorageMarker(dir_).value(), "bbbb");
  // Written under a temporary name and renamed: nothing else is left in the root.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename(), kStorageMarkerName);
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST_F(StorageMarkerTest, AMissingRootIsCreatedOnWrite) {
  std::string root = dir_ + "/a/b";
  ASSERT_TRUE(WriteStorageMarker(root, "cccc").ok());
  EXPECT_EQ(ReadStorageMarker(root).value(), "cccc");
}

TEST_F(StorageMarkerTest, AReaderIsToldWhatIsMissingOrWrong) {
  auto none = ReadStorageMarker(dir_ + "/absent");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(), "no directory " + dir_ + "/absent");

  auto no_marker = ReadStorageMarker(dir_);
  ASSERT_FALSE(no_marker.ok());
  EXPECT_EQ(no_marker.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(no_marker.status().message(), "no storage marker " + StorageMarkerPath(dir_));

  std::ofstream(dir_ + "/file") << "x";
  auto not_dir = ReadStorageMarker(dir_ + "/file");
  ASSERT_FALSE(not_dir.ok());
  EXPECT_EQ(not_dir.status().code(), StatusCode::kFailedPrecondition);

  for (const char* garbage : {"", "token\n", "cohort-storage-marker 1\n",
                              "cohort-storage-marker 1\nab", "cohort-storage-marker 1\na\nb\n"}) {
    std::ofstream(StorageMarkerPath(dir_), std::ios::trunc) << garbage;
    auto bad = ReadStorageMarker(dir_);
    ASSERT_FALSE(bad.ok()) << garbage;
    EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss) << garbage;
    EXPECT_NE(bad.status().message().find("is not a storage marker"), std::string::npos);
  }
}

TEST(StorageTokenTest, TokensAreHexAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    std::string t = NewStorageToken();
    EXPECT_EQ(t.size(), 32u);
    EXPECT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos) << t;
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 50u);
}

TEST(PathIsUnderTest, ComparesNormalisedPathsByWholeComponents) {
  using PathAndRoot = std::pair<const char*, const char*>;
  const PathAndRoot under[] = {
      {"/shared/jobs/a", "/shared/jobs"},
      {"/shared/jobs", "/shared/jobs"},
      {"/shared/jobs/", "/shared/jobs/"},
      {"/shared/./jobs//a/", "/shared/jobs"},
      {"/anything", "/"},
  };
  const PathAndRoot not_under[] = {
      {"/shared/jobsX/a", "/shared/jobs"},
      {"/shared", "/shared/jobs"},
      {"/shared/jobs/../other", "/shared/jobs"},
      {"/local/out", "/shared/jobs"},
      {"relative/out", "/shared"},
      {"/shared/a", "relative"},
      {"", "/shared"},
  };
  for (const auto& [path, root] : under) {
    EXPECT_TRUE(PathIsUnder(path, root)) << "'" << path << "' under '" << root << "'";
  }
  for (const auto& [path, root] : not_under) {
    EXPECT_FALSE(PathIsUnder(path, root)) << "'" << path << "' under '" << root << "'";
  }
}

}  // namespace
}  // namespace cohort
