#include "common/file_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include "tests/testing/process.h"

namespace cohort {
namespace {

// What another party could leave where a daemon reads its file: only the regular file is taken.
TEST(OpenRegularFileTest, TakesARegularFileAndRefusesLinksFifosAndDevices) {
  testing::TempDir dir("regular");
  const std::string file = dir.Join("metrics.jsonl");
  std::ofstream(file) << "{}\n";
  struct stat st {};
  StatusOr<int> fd = OpenRegularFile(file, "metric file", &st);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(st.st_size, 3);
  ::close(*fd);

  EXPECT_EQ(OpenRegularFile(dir.Join("absent"), "metric file", &st).status().code(),
            StatusCode::kNotFound);
  const std::string link = dir.Join("link"), zero = dir.Join("zero"), fifo = dir.Join("fifo");
  ASSERT_EQ(::symlink(file.c_str(), link.c_str()), 0);
  ASSERT_EQ(::symlink("/dev/zero", zero.c_str()), 0);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_EQ(OpenRegularFile(link, "metric file", &st).status().ToString(),
            "INVALID_ARGUMENT: metric file " + link + " is a symbolic link (not followed)");
  EXPECT_EQ(OpenRegularFile(zero, "metric file", &st).status().code(),
            StatusCode::kInvalidArgument);
  // A FIFO with no writer: refused at once, not waited on.
  EXPECT_EQ(OpenRegularFile(fifo, "metric file", &st).status().ToString(),
            "INVALID_ARGUMENT: metric file " + fifo + " is not a regular file");
  EXPECT_EQ(OpenRegularFile("/dev/null", "metric file", &st).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenRegularFile(dir.path(), "metric file", &st).status().code(),
            StatusCode::kInvalidArgument);
}

// ReplaceFile and ReplaceFileDurably: the whole new text in place of the old, with the mode asked
// for whatever the umask, and no temporary file left; a folder it cannot write in is named in the
// error. (That the durable one's bytes outlive a power cut no test here can show; it fsyncs.)
class ReplaceFileTest : public ::testing::TestWithParam<bool> {
 protected:
  static Status Replace(const std::string& path, std::string_view text, mode_t mode = 0644) {
    return GetParam() ? ReplaceFileDurably(path, text, mode) : ReplaceFile(path, text, mode);
  }
};

TEST_P(ReplaceFileTest, ReplacesTheWholeFileWithItsModeAndLeavesNoTemporary) {
  testing::TempDir dir("replace");
  const std::string file = dir.Join("sitecustomize.py");
  std::ofstream(file) << "an older, longer text than the new one\n";
  const mode_t umask_was = ::umask(077);
  Status replaced = Replace(file, "new\n", 0644);
  ::umask(umask_was);
  ASSERT_TRUE(replaced.ok()) << replaced.ToString();
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "new\n");
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_NE(::access((file + ".tmp").c_str(), F_OK), 0);
  Status missing = Replace(dir.Join("no/such/dir/f"), "x");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("create " + dir.Join("no/such/dir/f.tmp")), std::string::npos)
      << missing.ToString();
}

INSTANTIATE_TEST_SUITE_P(PlainAndDurable, ReplaceFileTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Durably" : "Plainly";
                         });

}  // namespace
}  // namespace cohort
