// LogStore: replica output stored as the agents stream it, with each chunk's arrival time beside
// it (the .times file), read back as marks over one attempt or the concatenation of all of them;
// the times survive a new LogStore on the same directory, a torn last record is cut.
#include "coordinator/log_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/testing/temp_dir_test.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;
using Mark = LogStore::Mark;
using Marks = std::vector<Mark>;

class LogStoreTest : public testing::TempDirTest {
 protected:
  LogStore::ReadResult Read(LogStore& store, int attempt, int max_attempt, uint64_t offset,
                            uint32_t max_bytes = 1 << 20, bool with_times = true) {
    auto read = store.Read("job", "chief-0", attempt, max_attempt, offset, max_bytes, with_times);
    EXPECT_TRUE(read.ok()) << read.status().ToString();
    return read.ok() ? *read : LogStore::ReadResult{};
  }
};

TEST_F(LogStoreTest, EachStoredChunkKeepsItsArrivalTime) {
  LogStore store(dir_);
  ASSERT_EQ(*store.Append("job", "chief-0", 0, 0, "a\nb", 1000), 3u);
  ASSERT_EQ(*store.Append("job", "chief-0", 0, 3, "c\n", 2000), 5u);
  ASSERT_EQ(*store.Append("job", "chief-0", 0, 0, "a\nb", 3000), 5u);  // a re-send: not stored
  ASSERT_EQ(*store.Append("job", "chief-0", 0, 9, "zz", 3000), 5u);    // a gap: not stored
  ASSERT_EQ(*store.Append("job", "chief-0", 0, 5, "d\n", 4000), 7u);

  auto all = Read(store, 0, 0, 0);
  EXPECT_EQ(all.data, "a\nbc\nd\n");
  EXPECT_EQ(all.marks, (Marks{{0, 1000}, {3, 2000}, {5, 4000}}));
  // From inside the first chunk: its mark moves to the read's offset.
  auto mid = Read(store, 0, 0, 2, 2);
  EXPECT_EQ(mid.data, "bc");
  EXPECT_EQ(mid.marks, (Marks{{2, 1000}, {3, 2000}}));
  // No mark at or past next_offset.
  auto one = Read(store, 0, 0, 3, 1);
  EXPECT_EQ(one.marks, (Marks{{3, 2000}}));
  // Nothing asked, nothing given; nothing read, no marks.
  EXPECT_TRUE(Read(store, 0, 0, 0, 1 << 20, false).marks.empty());
  EXPECT_TRUE(Read(store, 0, 0, 7).marks.empty());
}

TEST_F(LogStoreTest, EveryAttemptsHeaderCarriesItsFirstArrival) {
  LogStore store(dir_);
  ASSERT_TRUE(store.Append("job", "chief-0", 0, 0, "zero\n", 1000).ok());
  ASSERT_TRUE(store.Append("job", "chief-0", 1, 0, "one\n", 5000).ok());
  ASSERT_TRUE(store.Append("job", "chief-0", 1, 4, "two\n", 6000).ok());
  const std::string h0 = "==== chief-0 attempt 0 ====\n", h1 = "==== chief-0 attempt 1 ====\n";
  auto all = Read(store, -1, 1, 0);
  EXPECT_EQ(all.data, h0 + "zero\n" + h1 + "one\ntwo\n");
  const uint64_t a1 = h0.size() + 5;  // where attempt 1's header starts
  EXPECT_EQ(all.marks, (Marks{{0, 1000},
                              {h0.size(), 1000},
                              {a1, 5000},
                              {a1 + h1.size(), 5000},
                              {a1 + h1.size() + 4, 6000}}));
  // From inside attempt 1's header.
  auto late = Read(store, -1, 1, a1 + 3);
  EXPECT_EQ(late.marks.front(), (Mark{a1 + 3, 5000}));
}

TEST_F(LogStoreTest, TimesAreDurableAndATornRecordIsCut) {
  {
    LogStore store(dir_);
    ASSERT_TRUE(store.Append("job", "chief-0", 0, 0, "first\n", 1000).ok());
  }
  // A crash mid-record leaves part of one behind.
  const std::string times = LogStore(dir_).TimesPathOf("job", "chief-0", 0);
  { std::ofstream(times, std::ios::app) << "torn"; }
  LogStore store(dir_);
  EXPECT_EQ(Read(store, 0, 0, 0).marks, (Marks{{0, 1000}}));  // the torn tail is not read
  ASSERT_EQ(*store.Append("job", "chief-0", 0, 6, "second\n", 2000), 13u);
  EXPECT_EQ(Read(store, 0, 0, 0).marks, (Marks{{0, 1000}, {6, 2000}}));
  EXPECT_EQ(fs::file_size(times), 32u);
}

TEST_F(LogStoreTest, OutputStoredWithoutTimesReadsWithoutMarks) {
  LogStore store(dir_);
  const std::string path = store.PathOf("job", "chief-0", 0);
  fs::create_directories(fs::path(path).parent_path());
  { std::ofstream(path) << "old line\n"; }
  auto old = Read(store, 0, 0, 0);
  EXPECT_EQ(old.data, "old line\n");
  EXPECT_TRUE(old.marks.empty());
  // Output after it is timed from where it starts; the old bytes stay without a time.
  ASSERT_TRUE(store.Append("job", "chief-0", 0, 9, "new\n", 7000).ok());
  EXPECT_EQ(Read(store, 0, 0, 0).marks, (Marks{{9, 7000}}));
  EXPECT_EQ(Read(store, -1, 0, 0).marks, (Marks{{28 + 9, 7000}}));  // no time for the header
}

}  // namespace
}  // namespace cohort::coordinator
