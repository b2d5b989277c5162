#include "coordinator/journal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;

class JournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("cohort-journal-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Journal> Open(JournalReplay* replay) {
    auto j = Journal::Open(dir_.string(), replay);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? std::move(*j) : nullptr;
  }
  void Write(const std::vector<std::string>& records) {
    JournalReplay replay;
    auto j = Open(&replay);
    for (const auto& r : records) ASSERT_TRUE(j->Append(r).ok());
    ASSERT_TRUE(j->Sync().ok());
  }
  std::string JournalPath() const { return (dir_ / "journal").string(); }
  std::string ReadAll() const {
    std::ifstream in(JournalPath(), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void WriteAll(const std::string& data) const {
    std::ofstream out(JournalPath(), std::ios::binary | std::ios::trunc);
    out << data;
  }

  fs::path dir_;
};

TEST_F(JournalTest, ReplaysEveryRecordInOrder) {
  Write({"one", "two", std::string("three\0with nul", 14)});
  JournalReplay replay;
  auto j = Open(&replay);
  ASSERT_EQ(replay.records.size(), 3u);
  EXPECT_EQ(replay.records[0], "one");
  EXPECT_EQ(replay.records[1], "two");
  EXPECT_EQ(replay.records[2], std::string("three\0with nul", 14));
  EXPECT_FALSE(replay.truncated_tail);
  EXPECT_FALSE(replay.stopped_at_corruption);
  EXPECT_EQ(j->journal_records(), 3u);
}

TEST_F(JournalTest, EmptyDirectoryStartsEmpty) {
  JournalReplay replay;
  auto j = Open(&replay);
  EXPECT_TRUE(replay.records.empty());
  EXPECT_TRUE(fs::exists(JournalPath()));
}

TEST_F(JournalTest, TornLastRecordIsCutOffAndAppendsContinue) {
  Write({"first", "second", "third-record-payload"});
  std::string data = ReadAll();
  WriteAll(data.substr(0, data.size() - 5));  // a crash mid-append
  {
    JournalReplay replay;
    auto j = Open(&replay);
    ASSERT_EQ(replay.records.size(), 2u);
    EXPECT_TRUE(replay.truncated_tail);
    EXPECT_EQ(replay.records[1], "second");
    ASSERT_TRUE(j->Append("fourth").ok());
    ASSERT_TRUE(j->Sync().ok());
  }
  JournalReplay replay;
  auto j = Open(&replay);
  ASSERT_EQ(replay.records.size(), 3u);
  EXPECT_FALSE(replay.truncated_tail);
  EXPECT_EQ(replay.records[2], "fourth");
}

TEST_F(JournalTest, TornHeaderIsCutOff) {
  Write({"a", "b"});
  WriteAll(ReadAll() + std::string("\x05\x00\x00", 3));
  JournalReplay replay;
  auto j = Open(&replay);
  EXPECT_EQ(replay.records.size(), 2u);
  EXPECT_TRUE(replay.truncated_tail);
}

TEST_F(JournalTest, CorruptLastRecordIsCutOff) {
  Write({"a", "b", "last"});
  std::string data = ReadAll();
  data.back() ^= 0x40;  // flip a payload bit of the last record
  WriteAll(data);
  JournalReplay replay;
  auto j = Open(&replay);
  ASSERT_EQ(replay.records.size(), 2u);
  EXPECT_TRUE(replay.truncated_tail);
  EXPECT_FALSE(replay.stopped_at_corruption);
}

TEST_F(JournalTest, CorruptMiddleRecordStopsReplayAndKeepsEarlierState) {
  Write({"r0", "r1", "r2", "r3"});
  std::string data = ReadAll();
  // Record i starts at 10*i (8 header + 2 payload); corrupt r2's payload.
  data[20 + 8] ^= 0x01;
  WriteAll(data);
  {
    JournalReplay replay;
    auto j = Open(&replay);
    ASSERT_EQ(replay.records.size(), 2u);
    EXPECT_TRUE(replay.stopped_at_corruption);
    EXPECT_FALSE(replay.corruption.empty());
    // The damaged file is kept aside; new appends land in a readable journal.
    bool aside = false;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename().string().rfind("journal.corrupt-", 0) == 0) aside = true;
    }
    EXPECT_TRUE(aside);
    ASSERT_TRUE(j->Append("r4").ok());
    ASSERT_TRUE(j->Sync().ok());
  }
  JournalReplay replay;
  auto j = Open(&replay);
  EXPECT_FALSE(replay.stopped_at_corruption);
  EXPECT_EQ(replay.records, (std::vector<std::string>{"r0", "r1", "r4"}));
}

TEST_F(JournalTest, CompactWritesSnapshotAndEmptiesJournal) {
  JournalReplay replay;
  {
    auto j = Open(&replay);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(j->Append("old" + std::to_string(i)).ok());
    ASSERT_TRUE(j->Compact({"state-a", "state-b"}).ok());
    EXPECT_EQ(j->journal_records(), 0u);
    ASSERT_TRUE(j->Append("after").ok());
    ASSERT_TRUE(j->Sync().ok());
  }
  auto j = Open(&replay);
  EXPECT_EQ(replay.records, (std::vector<std::string>{"state-a", "state-b", "after"}));
  EXPECT_EQ(j->journal_records(), 1u);
  EXPECT_FALSE(fs::exists(dir_ / "snapshot.tmp"));
}

TEST_F(JournalTest, DamagedSnapshotIsAnError) {
  {
    JournalReplay replay;
    auto j = Open(&replay);
    ASSERT_TRUE(j->Compact({"x", "y"}).ok());
  }
  fs::resize_file(dir_ / "snapshot", 12);
  JournalReplay replay;
  auto j = Journal::Open(dir_.string(), &replay);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cohort::coordinator
