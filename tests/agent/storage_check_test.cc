// The agent's side of the storage check on real files: it reads the marker at the root the
// coordinator names (or its own), reports what is missing, and reports a read that does not
// return (a FIFO stands in for a hung mount: opening it blocks until a writer comes) without
// blocking the caller.
#include "agent/storage_check.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <thread>

#include "common/storage_marker.h"

namespace cohort::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

class StorageCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "cohort-check-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(StorageCheckTest, ReadsTheCoordinatorsRootOnceNamedAndFollowsItsRewrites) {
  ASSERT_TRUE(WriteStorageMarker(dir_, "t1").ok());
  StorageCheck check("", 20ms, 10s);
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(check.Report()) << "no root named yet: nothing to report";
  check.SetCoordinatorRoot(dir_);
  ASSERT_TRUE(WaitUntil([&] { return check.Report() && check.Report()->token == "t1"; }));
  EXPECT_EQ(check.Report()->root, dir_);
  EXPECT_EQ(check.Report()->error, "");
  ASSERT_TRUE(WriteStorageMarker(dir_, "t2").ok());
  EXPECT_TRUE(WaitUntil([&] { return check.Report()->token == "t2"; }));
  // The coordinator says it has no root: nothing to report.
  check.SetCoordinatorRoot("");
  EXPECT_TRUE(WaitUntil([&] { return !check.Report(); }));
}

TEST_F(StorageCheckTest, AMissingMarkerIsReportedAsSuch) {
  StorageCheck check("", 20ms, 10s);
  check.SetCoordinatorRoot(dir_);
  ASSERT_TRUE(WaitUntil([&] { return check.Report().has_value(); }));
  EXPECT_EQ(check.Report()->token, "");
  EXPECT_EQ(check.Report()->error, "no storage marker " + StorageMarkerPath(dir_));
}

TEST_F(StorageCheckTest, ItsOwnRootIsReadInsteadOfTheCoordinators) {
  fs::create_directories(dir_ + "/coordinator");
  fs::create_directories(dir_ + "/own");
  ASSERT_TRUE(WriteStorageMarker(dir_ + "/coordinator", "c").ok());
  ASSERT_TRUE(WriteStorageMarker(dir_ + "/own", "o").ok());
  StorageCheck check(dir_ + "/own", 20ms, 10s);
  check.SetCoordinatorRoot(dir_ + "/coordinator");
  ASSERT_TRUE(WaitUntil([&] { return check.Report().has_value(); }));
  EXPECT_EQ(check.Report()->root, dir_ + "/own");
  EXPECT_EQ(check.Report()->token, "o");
}

TEST_F(StorageCheckTest, AReadThatDoesNotReturnIsReportedAsHungWithoutBlockingTheCaller) {
  ASSERT_EQ(::mkfifo(StorageMarkerPath(dir_).c_str(), 0600), 0);
  StorageCheck check("", 1h, 200ms);
  check.SetCoordinatorRoot(dir_);
  ASSERT_TRUE(WaitUntil([&] {
    auto r = check.Report();
    return r && r->error.find("did not answer within 200 ms (a hung mount?)") != std::string::npos;
  })) << (check.Report() ? check.Report()->error : "no report");
  EXPECT_EQ(check.Report()->root, dir_);
  // The mount answers: the blocked read completes with what comes.
  int fd = ::open(StorageMarkerPath(dir_).c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const std::string text = "cohort-storage-marker 1\nlate\n";
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  EXPECT_TRUE(WaitUntil([&] { return check.Report() && check.Report()->token == "late"; }));
}

}  // namespace
}  // namespace cohort::agent
