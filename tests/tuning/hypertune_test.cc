// Metric files: the C++ reporter's lines, the tailer across partial and malformed lines, offsets
// to resume from, rewritten files, and the Python reporter read back by the C++ tailer.
#include "common/hypertune.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace cohort {
namespace {

namespace fs = std::filesystem;

class HypertuneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cohort-hypertune-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = (dir_ / "sub" / "metrics.jsonl").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Append(const std::string& bytes) {
    fs::create_directories(fs::path(path_).parent_path());
    std::ofstream out(path_, std::ios::app | std::ios::binary);
    out << bytes;
  }

  fs::path dir_;
  std::string path_;
};

TEST(MetricLineTest, ParsesTheHypertuneShape) {
  StatusOr<MetricRecord> r =
      ParseMetricLine(R"({"accuracy": "0.91", "checkpoint_path": "", "global_step": "100", )"
                      R"("timestamp": 1700000000.5, "trial": "3"})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->metrics.at("accuracy"), 0.91);
  EXPECT_EQ(r->step, 100);
  EXPECT_DOUBLE_EQ(r->timestamp, 1700000000.5);
  EXPECT_EQ(r->trial, "3");
  // JSON numbers are accepted too, and several metrics per line.
  r = ParseMetricLine(R"({"loss": 0.5, "acc": "1e-1", "global_step": 7})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->metrics.size(), 2u);
  EXPECT_EQ(r->step, 7);
  // Round trip.
  StatusOr<MetricRecord> again = ParseMetricLine(FormatMetricLine(*r));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *r);
}

TEST(MetricLineTest, RejectsMalformedLines) {
  EXPECT_FALSE(ParseMetricLine("not json").ok());
  EXPECT_FALSE(ParseMetricLine("[1, 2]").ok());
  EXPECT_FALSE(ParseMetricLine(R"({"accuracy": "high"})").ok());
  EXPECT_FALSE(ParseMetricLine(R"({"trial": "1"})").ok());  // no metric
  EXPECT_FALSE(ParseMetricLine(R"({"accuracy": "0.5", "global_step": "1.5"})").ok());
  EXPECT_FALSE(ParseMetricLine(R"({"accuracy": "0.5")").ok());  // truncated
}

TEST_F(HypertuneTest, ReporterWritesLinesTheTailerReads) {
  MetricReporter reporter(path_, "7");
  ASSERT_TRUE(reporter.Report("accuracy", 0.5, 10).ok());  // creates sub/
  ASSERT_TRUE(reporter.Report("accuracy", 0.75, 20, "/ckpt/ckpt-20").ok());
  ASSERT_TRUE(reporter.Report("", 3.0).ok());
  MetricFileTailer tailer(path_);
  StatusOr<std::vector<MetricRecord>> got = tailer.Poll();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_DOUBLE_EQ((*got)[0].metrics.at("accuracy"), 0.5);
  EXPECT_EQ((*got)[0].step, 10);
  EXPECT_EQ((*got)[0].trial, "7");
  EXPECT_GT((*got)[0].timestamp, 1.6e9);
  EXPECT_EQ((*got)[1].checkpoint_path, "/ckpt/ckpt-20");
  EXPECT_DOUBLE_EQ((*got)[2].metrics.at(kDefaultMetricTag), 3.0);
  EXPECT_EQ(tailer.offset(), fs::file_size(path_));
  // Nothing new: nothing returned.
  got = tailer.Poll();
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
}

TEST_F(HypertuneTest, ReportMetricUsesTheEnvironment) {
  ::setenv("CLOUD_ML_HP_METRIC_FILE", path_.c_str(), 1);
  ::setenv("CLOUD_ML_TRIAL_ID", "12", 1);
  ASSERT_TRUE(ReportMetric("loss", 0.25, 3).ok());
  ::unsetenv("CLOUD_ML_HP_METRIC_FILE");
  ::unsetenv("CLOUD_ML_TRIAL_ID");
  MetricFileTailer tailer(path_);
  auto got = tailer.Poll();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].trial, "12");
  EXPECT_DOUBLE_EQ((*got)[0].metrics.at("loss"), 0.25);
}

TEST_F(HypertuneTest, MissingFileReadsAsEmpty) {
  MetricFileTailer tailer(path_);
  auto got = tailer.Poll();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->empty());
  EXPECT_EQ(tailer.offset(), 0u);
}

TEST_F(HypertuneTest, LineSplitAcrossReadsIsNeitherLostNorHalfParsed) {
  const std::string line = R"({"accuracy": "0.875", "global_step": "5", "trial": "1"})";
  MetricFileTailer tailer(path_);
  // Byte by byte for the first line: nothing until the newline arrives.
  for (size_t i = 0; i < line.size(); ++i) {
    Append(std::string(1, line[i]));
    auto got = tailer.Poll();
    ASSERT_TRUE(got.ok());
    ASSERT_TRUE(got->empty()) << "parsed a partial line at byte " << i;
    EXPECT_EQ(tailer.offset(), 0u);
  }
  Append("\n" + line.substr(0, 10));  // first complete, second begun
  auto got = tailer.Poll();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_DOUBLE_EQ((*got)[0].metrics.at("accuracy"), 0.875);
  EXPECT_EQ(tailer.offset(), line.size() + 1);
  Append(line.substr(10) + "\n");
  got = tailer.Poll();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(tailer.offset(), 2 * (line.size() + 1));
  EXPECT_EQ(tailer.malformed_lines(), 0u);
}

TEST_F(HypertuneTest, MalformedLinesAreSkippedAndCounted) {
  Append(R"({"accuracy": "0.1", "global_step": "1"})"
         "\n");
  Append("garbage that is not json\n");
  Append("\n");  // blank lines are not errors
  Append(R"({"accuracy": "lots", "global_step": "2"})"
         "\n");
  Append(R"({"accuracy": "0.3", "global_step": "3"})"
         "\n");
  MetricFileTailer tailer(path_);
  auto got = tailer.Poll();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].step, 1);
  EXPECT_EQ((*got)[1].step, 3);
  EXPECT_EQ(tailer.malformed_lines(), 2u);
}

// The metric file is the job's and the agent (root) tails it: a line without end is dropped as it
// is read, never kept whole, and the lines after it are taken.
TEST_F(HypertuneTest, ALineLongerThanTheLimitIsSkippedWithoutBeingKept) {
  Append(R"({"accuracy": "0.1", "global_step": "1"})"
         "\n");
  Append(std::string(3 * MetricFileTailer::kMaxMetricLineBytes, 'x'));
  MetricFileTailer tailer(path_);
  auto got = tailer.Poll();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(tailer.malformed_lines(), 1u);
  EXPECT_EQ(tailer.offset(), fs::file_size(path_));                        // consumed, not held
  Append(std::string(MetricFileTailer::kMaxMetricLineBytes, 'y') + "\n");  // the same line's end
  Append(R"({"accuracy": "0.3", "global_step": "3"})"
         "\n");
  got = tailer.Poll();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].step, 3);
  EXPECT_EQ(tailer.malformed_lines(), 1u);
  // A file larger than one call reads is taken over several.
  std::string many;
  for (int step = 4; many.size() <= MetricFileTailer::kMaxMetricReadBytes; ++step) {
    many += R"({"accuracy": "0.5", "global_step": ")" + std::to_string(step) + "\"}\n";
  }
  Append(many);
  size_t records = 0;
  for (int poll = 0; poll < 3; ++poll) records += tailer.Poll()->size();
  EXPECT_EQ(records, static_cast<size_t>(std::count(many.begin(), many.end(), '\n')));
}

// A link (to /dev/zero, which never ends, or to a file only root may read) or a FIFO where the
// metric file should be is an error that says so, read no further.
TEST_F(HypertuneTest, AMetricFileThatIsALinkOrAFifoIsRefused) {
  fs::create_directories(fs::path(path_).parent_path());
  fs::create_symlink("/dev/zero", path_);
  MetricFileTailer tailer(path_);
  auto got = tailer.Poll();
  EXPECT_EQ(got.status().ToString(),
            "INVALID_ARGUMENT: metric file " + path_ + " is a symbolic link (not followed)");
  fs::remove(path_);
  ASSERT_EQ(::mkfifo(path_.c_str(), 0644), 0);
  got = tailer.Poll();
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status().ToString();
}

TEST_F(HypertuneTest, ResumesFromAnOffset) {
  MetricReporter reporter(path_, "1");
  for (int step = 1; step <= 3; ++step) ASSERT_TRUE(reporter.Report("acc", step / 10.0, step).ok());
  MetricFileTailer first(path_);
  ASSERT_EQ(first.Poll()->size(), 3u);
  uint64_t saved = first.offset();
  ASSERT_TRUE(reporter.Report("acc", 0.4, 4).ok());
  MetricFileTailer second(path_, saved);  // e.g. an agent that restarted
  auto got = second.Poll();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].step, 4);
}

TEST_F(HypertuneTest, RewrittenFileIsReadAgainWithoutDuplicates) {
  // The stock cloudml-hypertune rewrites the file with its newest entries.
  Append(R"({"acc": "0.1", "global_step": "1", "timestamp": 100.0})"
         "\n");
  Append(R"({"acc": "0.2", "global_step": "2", "timestamp": 101.0})"
         "\n");
  MetricFileTailer tailer(path_);
  ASSERT_EQ(tailer.Poll()->size(), 2u);
  fs::remove(path_);
  Append(R"({"acc": "0.3", "global_step": "3", "timestamp": 102.0})"
         "\n");
  auto got = tailer.Poll();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].step, 3);
}

TEST_F(HypertuneTest, PythonReporterLinesReadBack) {
  const std::string module_dir = std::string(COHORT_SOURCE_DIR) + "/python/cohort";
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  std::string script =
      "import hypertune\n"
      "h = hypertune.HyperTune()\n"
      "h.report_hyperparameter_tuning_metric(hyperparameter_metric_tag='accuracy', "
      "metric_value=0.5, global_step=10)\n"
      "h.report_hyperparameter_tuning_metric('accuracy', 0.625, 20, checkpoint_path='/c')\n"
      "h.report_hyperparameter_tuning_metric(None, 1)\n";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("PYTHONPATH", module_dir.c_str(), 1);
    ::setenv("CLOUD_ML_HP_METRIC_FILE", path_.c_str(), 1);
    ::setenv("CLOUD_ML_TRIAL_ID", "4", 1);
    ::execl("/usr/bin/python3", "python3", "-c", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "python3 failed: " << status;
  MetricFileTailer tailer(path_);
  auto got = tailer.Poll();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_DOUBLE_EQ((*got)[0].metrics.at("accuracy"), 0.5);
  EXPECT_EQ((*got)[0].step, 10);
  EXPECT_EQ((*got)[0].trial, "4");
  EXPECT_EQ((*got)[1].checkpoint_path, "/c");
  EXPECT_DOUBLE_EQ((*got)[2].metrics.at(kDefaultMetricTag), 1.0);
  EXPECT_EQ(tailer.malformed_lines(), 0u);
}

}  // namespace
}  // namespace cohort
