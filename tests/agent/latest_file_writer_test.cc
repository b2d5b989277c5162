// LatestFileWriter (agent/latest_file_writer.h): the newest text posted is what the file holds,
// a failed write is told with its version, and what was posted before the writer goes is written.
#include "agent/latest_file_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

TEST(LatestFileWriterTest, TheFileHoldsTheNewestTextPostedAndEachWriteIsTold) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.json";
  LatestFileWriter writer(path, 0600);
  EXPECT_FALSE(writer.Last().has_value());
  for (uint64_t v = 1; v <= 50; ++v) writer.Post(v, "version " + std::to_string(v));
  writer.Flush();
  ASSERT_TRUE(writer.Last().has_value());
  EXPECT_EQ(writer.Last()->version, 50u);  // older ones not yet begun were replaced
  EXPECT_TRUE(writer.Last()->status.ok()) << writer.Last()->status.ToString();
  EXPECT_EQ(testing::ReadFile(path), "version 50");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(LatestFileWriterTest, AWriteThatFailsIsToldWithItsVersionAndTheNextMaySucceed) {
  testing::TempDir dir;
  const std::string parent = dir.path() + "/not-yet";
  LatestFileWriter writer(parent + "/state.json", 0644);
  writer.Post(1, "one");
  writer.Flush();
  ASSERT_TRUE(writer.Last().has_value());
  EXPECT_EQ(writer.Last()->version, 1u);
  EXPECT_FALSE(writer.Last()->status.ok());
  EXPECT_NE(writer.Last()->status.message().find(parent), std::string::npos)
      << writer.Last()->status.ToString();
  ASSERT_EQ(::mkdir(parent.c_str(), 0755), 0);
  writer.Post(2, "two");
  writer.Flush();
  EXPECT_EQ(writer.Last()->version, 2u);
  EXPECT_TRUE(writer.Last()->status.ok()) << writer.Last()->status.ToString();
  EXPECT_EQ(testing::ReadFile(parent + "/state.json"), "two");
}

TEST(LatestFileWriterTest, WhatWasPostedIsWrittenBeforeTheWriterGoes) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/state.json";
  {
    LatestFileWriter writer(path, 0644);
    writer.Post(1, "first");
    writer.Post(2, "last");
  }
  EXPECT_EQ(testing::ReadFile(path), "last");
}

}  // namespace
}  // namespace cohort::agent
