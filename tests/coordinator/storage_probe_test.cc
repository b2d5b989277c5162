// The coordinator's side of the storage check: the verdict on each agent's report (pure), the
// probe writing and rewriting its marker on disk (a real directory), the warning a submitter gets,
// the node registry judging what registrations and heartbeats carry, and the coordinator's
// --output-root option.
#include "coordinator/storage_probe.h"

#include <flatbuffers/flatbuffers.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "common/storage_marker.h"
#include "coordinator/node_registry.h"
#include "coordinator/options.h"
#include "tests/testing/temp_dir_test.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

NodeStorage Report(const std::string& root, const std::string& token,
                   const std::string& error = "") {
  return {.reported = true, .root = root, .token = token, .error = error, .verdict = {}};
}

TEST(JudgeStorageTest, SharedOnlyWithTheCurrentOrPreviousTokenAtTheCoordinatorsPath) {
  const StorageTokens tokens{"new", "old", ""};
  NodeStorage s = Report("/shared", "new");
  JudgeStorage("/shared", tokens, s);
  EXPECT_TRUE(s.shared);
  EXPECT_EQ(s.verdict, "shared");

  s = Report("/shared", "old");  // read before the latest rewrite
  JudgeStorage("/shared", tokens, s);
  EXPECT_TRUE(s.shared);

  s = Report("/shared", "older");  // another filesystem's marker, or a stale copy
  JudgeStorage("/shared", tokens, s);
  EXPECT_FALSE(s.shared);
  EXPECT_NE(s.verdict.find("not shared: /shared holds another storage marker"), std::string::npos)
      << s.verdict;

  s = Report("/shared", "", "no storage marker /shared/.cohort-storage");
  JudgeStorage("/shared", tokens, s);
  EXPECT_FALSE(s.shared);
  EXPECT_EQ(s.verdict, "not shared: no storage marker /shared/.cohort-storage");

  s = Report("/elsewhere", "new");  // the same filesystem, at another path: jobs' paths break
  JudgeStorage("/shared", tokens, s);
  EXPECT_FALSE(s.shared);
  EXPECT_EQ(s.verdict, "not shared: the agent checks /elsewhere, not the output root /shared");
}

TEST(JudgeStorageTest, CheckingUntilBothSidesHaveSomethingAndNoRootMeansNoCheck) {
  NodeStorage s;  // the agent has not reported
  JudgeStorage("/shared", StorageTokens{"t", "", ""}, s);
  EXPECT_FALSE(s.shared);
  EXPECT_EQ(s.verdict, "checking");

  s = Report("/shared", "t");  // the probe has not written yet
  JudgeStorage("/shared", StorageTokens{}, s);
  EXPECT_EQ(s.verdict, "checking");

  s = Report("/shared", "t");
  JudgeStorage("/shared", StorageTokens{"", "", "cannot create /shared: Permission denied"}, s);
  EXPECT_FALSE(s.shared);
  EXPECT_EQ(s.verdict,
            "not shared: the coordinator cannot write its marker: cannot create /shared: "
            "Permission denied");

  s = Report("/shared", "t");
  JudgeStorage("", StorageTokens{}, s);
  EXPECT_FALSE(s.shared);
  EXPECT_EQ(s.verdict, "no output root");
}

TEST(StorageWarningTest, OutsideTheCheckedRootOrNothingCheckedOnSeveralNodes) {
  EXPECT_EQ(StorageWarning("/shared/jobs/a", "/shared/jobs", 3), "");
  EXPECT_EQ(StorageWarning("/x", "/shared/jobs", 1),
            "output dir /x is not on the checked shared storage (the output root /shared/jobs); "
            "a restart on another node will not find its checkpoints");
  EXPECT_EQ(StorageWarning("/x", "", 1), "");  // one node: a restart lands where the files are
  EXPECT_EQ(StorageWarning("/x", "", 2),
            "output dir /x is not on checked shared storage (the coordinator has no output_root); "
            "a restart on another node will not find its checkpoints");
}

class StorageProbeTest : public testing::TempDirTest {};

TEST_F(StorageProbeTest, WritesAtStartRewritesAndKeepsThePreviousToken) {
  // The marker a coordinator before this one left: agents may still report it.
  ASSERT_TRUE(WriteStorageMarker(dir_, "from-before").ok());
  StorageProbe probe(dir_, 50ms);
  ASSERT_TRUE(probe.WaitForWrites(1, 10s));
  StorageTokens first = probe.tokens();
  EXPECT_EQ(first.previous, "from-before");
  EXPECT_EQ(ReadStorageMarker(dir_).value(), first.current);
  EXPECT_TRUE(first.error.empty());
  NodeStorage s = Report(dir_, "from-before");
  probe.Judge(s);
  EXPECT_TRUE(s.shared) << s.verdict;

  ASSERT_TRUE(probe.WaitForWrites(3, 10s));
  StorageTokens later = probe.tokens();
  EXPECT_NE(later.current, first.current);
  EXPECT_FALSE(later.previous.empty());
  s = Report(dir_, "from-before");  // two rewrites ago: no longer counts
  probe.Judge(s);
  EXPECT_FALSE(s.shared);
}

TEST_F(StorageProbeTest, AFailedWriteIsReportedAndNoNodeShares) {
  std::string file = dir_ + "/not-a-dir";
  ASSERT_TRUE(WriteStorageMarker(dir_, "x").ok());
  fs::rename(StorageMarkerPath(dir_), file);
  StorageProbe probe(file, 1h);
  ASSERT_TRUE(probe.WaitForWrites(1, 10s));
  EXPECT_TRUE(probe.tokens().current.empty());
  EXPECT_FALSE(probe.tokens().error.empty());
  NodeStorage s = Report(file, "x");
  probe.Judge(s);
  EXPECT_FALSE(s.shared);
  EXPECT_EQ(s.verdict.rfind("not shared: the coordinator cannot write its marker: ", 0), 0u)
      << s.verdict;
}

TEST_F(StorageProbeTest, TheRegistryJudgesRegistrationsAndHeartbeats) {
  StorageProbe probe(dir_, 1h);
  ASSERT_TRUE(probe.WaitForWrites(1, 10s));
  NodeRegistry nodes(10'000);
  nodes.SetStorageProbe(&probe);
  EXPECT_EQ(nodes.storage_root(), dir_);

  flatbuffers::FlatBufferBuilder fbb;
  auto reg = wire::CreateRegisterAgentDirect(fbb, "n1");
  fbb.Finish(reg);
  NodeRecord* node =
      nodes.Register(*flatbuffers::GetRoot<wire::RegisterAgent>(fbb.GetBufferPointer()), "p", 1)
          .node;
  EXPECT_EQ(node->storage.verdict, "checking");

  flatbuffers::FlatBufferBuilder hb;
  auto report = wire::CreateStorageReportDirect(hb, dir_.c_str(), probe.tokens().current.c_str());
  auto beat = wire::CreateHeartbeatDirect(hb, "n1", false, nullptr, nullptr, report);
  hb.Finish(beat);
  ASSERT_TRUE(
      nodes.Heartbeat(*flatbuffers::GetRoot<wire::Heartbeat>(hb.GetBufferPointer()), "p", 2));
  EXPECT_TRUE(node->storage.shared) << node->storage.verdict;
  EXPECT_EQ(node->storage.verdict, "shared");

  NodeRegistry unchecked(10'000);
  node =
      unchecked.Register(*flatbuffers::GetRoot<wire::RegisterAgent>(fbb.GetBufferPointer()), "p", 1)
          .node;
  EXPECT_EQ(node->storage.verdict, "no output root");
  EXPECT_EQ(unchecked.storage_root(), "");
}

// The coordinator's --output-root (config key output-root): where jobs without output_dir write,
// and the root the probe checks; without it, outputs stay under the state dir.
StatusOr<CoordinatorOptions> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "cohort-coordinator");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  auto parsed = ParseCoordinatorFlags(static_cast<int>(argv.size()), argv.data());
  if (!parsed.ok()) return parsed.status();
  return parsed->options;
}

TEST(OutputRootOptionTest, DefaultsToTheStateDirAndIsNormalisedWhenGiven) {
  auto none = Parse({"--state-dir", "/var/lib/c"});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->output_root, "");
  EXPECT_EQ(DefaultJobOutputBase(*none), "/var/lib/c/jobs");
  EXPECT_EQ(DefaultStudyOutputBase(*none), "/var/lib/c/studies");

  auto given = Parse({"--state-dir", "/var/lib/c", "--output-root", "/mnt/./share//cohort/"});
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->output_root, "/mnt/share/cohort");
  EXPECT_EQ(DefaultJobOutputBase(*given), "/mnt/share/cohort");
  EXPECT_EQ(DefaultStudyOutputBase(*given), "/mnt/share/cohort/studies");

  auto relative = Parse({"--output-root", "share/cohort"});
  ASSERT_FALSE(relative.ok());
  EXPECT_EQ(relative.status().message(),
            "--output-root: expected an absolute path, got 'share/cohort'");
}

// The coordinator's config file reads as every daemon's does (common/config.h): comments, a ` #`
// comment after a value, a repeated queue line adding a queue; a misspelt name, there or on the
// command line, is refused naming the option meant.
class CoordinatorConfigTest : public testing::TempDirTest {};

TEST_F(CoordinatorConfigTest, TheFileReadsAsEveryDaemonsAndATypoNamesTheOptionMeant) {
  const std::string path = dir_ + "/coordinator.conf";
  std::ofstream(path) << "# the lab's coordinator\n"
                         "heartbeat-timeout = 20s   # a slow network\n"
                         "queue = research gpus=16 weight=2\n"
                         "queue = prod gpus=8\n";
  auto read = Parse({"--config", path});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->heartbeat_timeout, std::chrono::seconds(20));
  EXPECT_GE(read->queues.FindQueue("research"), 0);
  EXPECT_GE(read->queues.FindQueue("prod"), 0);
  // The command line wins over the file.
  auto flag_wins = Parse({"--config", path, "--heartbeat-timeout", "5s"});
  ASSERT_TRUE(flag_wins.ok()) << flag_wins.status().ToString();
  EXPECT_EQ(flag_wins->heartbeat_timeout, std::chrono::seconds(5));

  std::ofstream(path) << "job-retension = 30d\n";
  auto typo = Parse({"--config", path});
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().message(),
            path + ":1: unknown option 'job-retension' (did you mean 'job-retention'?)");
  // --version is answered whatever --config names, as --help is.
  const std::string missing = dir_ + "/missing.conf";
  std::vector<const char*> version = {"cohort-coordinator", "--version", "--config",
                                      missing.c_str()};
  auto asked = ParseCoordinatorFlags(static_cast<int>(version.size()), version.data());
  ASSERT_TRUE(asked.ok()) << asked.status().ToString();
  EXPECT_TRUE(asked->version);
  EXPECT_FALSE(Parse({"--config", missing}).ok());
  auto flag_typo = Parse({"--heartbeat-timout", "5s"});
  ASSERT_FALSE(flag_typo.ok());
  EXPECT_NE(flag_typo.status().message().find("(did you mean '--heartbeat-timeout'?)"),
            std::string::npos)
      << flag_typo.status().ToString();
}

// --fence-after: off by default (none, 0), a duration otherwise, within four heartbeat intervals
// of the timeout and an hour.
TEST(FenceAfterOptionTest, OffByDefaultAndBoundedWhenGiven) {
  auto none = Parse({});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->fence_after.count(), 0);
  auto zero = Parse({"--fence-after", "0"});
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  EXPECT_EQ(zero->fence_after.count(), 0);
  auto given = Parse({"--fence-after", "20s"});
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->fence_after.count(), 20'000);

  auto short_one = Parse({"--fence-after", "2s"});
  ASSERT_FALSE(short_one.ok());
  EXPECT_EQ(short_one.status().message(),
            "--fence-after: at least four heartbeat intervals (4s with --heartbeat-timeout 10s), "
            "got 2s");
  auto fast = Parse({"--fence-after", "2s", "--heartbeat-timeout", "2s"});  // 500 ms intervals
  EXPECT_TRUE(fast.ok()) << fast.status().ToString();
  auto long_one = Parse({"--fence-after", "2h"});
  ASSERT_FALSE(long_one.ok());
  EXPECT_EQ(long_one.status().message(), "--fence-after: at most 1h, got 2h");
  auto bad = Parse({"--fence-after", "soon"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--fence-after"), std::string::npos)
      << bad.status().ToString();

  // The fence's grace: --stop-grace unless given, and never longer.
  EXPECT_EQ(Parse({"--stop-grace", "45s"})->FenceGrace().count(), 45'000);
  auto graced = Parse({"--fence-after", "20s", "--fence-grace", "5s"});
  ASSERT_TRUE(graced.ok()) << graced.status().ToString();
  EXPECT_EQ(graced->FenceGrace().count(), 5'000);
  EXPECT_EQ(graced->stop_grace.count(), 30'000);
  auto longer = Parse({"--fence-grace", "1m"});
  ASSERT_FALSE(longer.ok());
  EXPECT_EQ(longer.status().message(), "--fence-grace: at most --stop-grace (30s), got 1m");
}

TEST(BackupOptionTest, OffByDefaultHourlyWhenGivenAndCheckedAsPaths) {
  auto none = Parse({});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->backup_dir, "");
  auto given = Parse({"--state-dir", "/var/lib/c", "--backup-dir", "/srv/./backups/"});
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->backup_dir, "/srv/backups");
  EXPECT_EQ(given->backup_every.count(), 3'600'000);
  EXPECT_EQ(given->backup_keep, 24);
  auto often = Parse({"--backup-dir", "/b", "--backup-every", "10m", "--backup-keep", "3"});
  ASSERT_TRUE(often.ok()) << often.status().ToString();
  EXPECT_EQ(often->backup_every.count(), 600'000);
  EXPECT_EQ(often->backup_keep, 3);

  const std::pair<std::vector<std::string>, std::string> refused[] = {
      {{"--backup-dir", "backups"}, "--backup-dir: expected an absolute path, got 'backups'"},
      {{"--state-dir", "/var/lib/c", "--backup-dir", "/var/lib/c/"},
       "--backup-dir: must not be the state dir (/var/lib/c)"},
      {{"--backup-every", "500ms"}, "--backup-every: at least 1s, got 500ms"},
      {{"--backup-keep", "0"}, "--backup-keep: at least 1, got 0"},
  };
  for (const auto& [args, message] : refused) {
    auto parsed = Parse(args);
    ASSERT_FALSE(parsed.ok()) << message;
    EXPECT_EQ(parsed.status().message(), message);
  }
}

TEST(ReadOnlyPathHintTest, OnlyAReadOnlyFileSystemGetsTheSystemdHint) {
  EXPECT_EQ(WithReadOnlyPathHint("open /srv/x: No space left on device"),
            "open /srv/x: No space left on device");
  const std::string hinted = WithReadOnlyPathHint("open /srv/x: Read-only file system");
  EXPECT_EQ(hinted.rfind("open /srv/x: Read-only file system (", 0), 0u) << hinted;
  EXPECT_NE(hinted.find("ReadWritePaths="), std::string::npos) << hinted;
}

TEST_F(StorageProbeTest, OutputRootFromTheConfigFile) {
  const std::string config = dir_ + "/coordinator.conf";
  {
    std::ofstream out(config);
    out << "state-dir = /var/lib/c\noutput-root = /srv/cohort-out\n";
  }
  auto parsed = Parse({"--config", config});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->output_root, "/srv/cohort-out");
  EXPECT_EQ(DefaultJobOutputBase(*parsed), "/srv/cohort-out");
}

}  // namespace
}  // namespace cohort::coordinator
