// The state store under the real cohort-coordinator process, driven by the real client library
// over TCP: a damaged database refuses the start (and --accept-damaged-state starts it, listing
// the job it drops), and a full disk refuses submits while the daemon keeps serving, losing
// nothing it accepted, through a SIGKILL and a restart; a full backup disk fails backups, not the
// daemon, and /metrics says so; `cohort backup` takes one now.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/client.h"
#include "tests/testing/binaries.h"
#include "tests/testing/process.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string Yaml(const std::string& name, const std::string& command = "/bin/true") {
  return "name: " + name +
         "\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {gpus: 1}\n"
         "    process: {command: [" +
         command + "]}\n";
}

class StateStoreDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string missing = ct::MissingBinary({COHORT_COORDINATOR_BIN});
    if (!missing.empty()) GTEST_SKIP() << missing;
    client_endpoint_ = "tcp://127.0.0.1:" + std::to_string(ct::PickFreePort());
    agent_endpoint_ = "tcp://127.0.0.1:" + std::to_string(ct::PickFreePort());
    state_ = dir_.Join("state");
    fs::create_directories(state_);
  }
  void TearDown() override {
    daemon_.reset();
    if (mounted_) ::umount2(state_.c_str(), MNT_DETACH);
    if (backups_mounted_) ::umount2(backups_.c_str(), MNT_DETACH);
  }
  std::vector<std::string> Args(bool accept = false) {
    std::vector<std::string> args = {"--insecure",        "--state-dir",    state_,
                                     "--client-endpoint", client_endpoint_, "--agent-endpoint",
                                     agent_endpoint_};
    if (accept) args.push_back("--accept-damaged-state");
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    return args;
  }
  // Starts the daemon and waits until it answers.
  void Start(bool accept = false) {
    daemon_.reset();
    daemon_ = std::make_unique<ct::DaemonProcess>(COHORT_COORDINATOR_BIN, Args(accept),
                                                  dir_.Join("coordinator.log"));
    ASSERT_TRUE(daemon_->Start());
    auto client = Client();
    ASSERT_TRUE(ct::WaitUntil([&] { return !daemon_->running() || client.ListJobs().ok(); }, 15s))
        << daemon_->Log();
    ASSERT_TRUE(daemon_->running()) << daemon_->Log();
  }
  CoordinatorClient Client() {
    auto c = CoordinatorClient::Connect(client_endpoint_, true);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(*c);
  }
  std::set<std::string> JobNames() {
    auto jobs = Client().ListJobs();
    EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
    std::set<std::string> out;
    if (jobs.ok()) {
      for (const auto& j : *jobs) out.insert(j.name);
    }
    return out;
  }

  ct::TempDir dir_{"cohort-store-daemon"};
  std::string client_endpoint_, agent_endpoint_, state_;
  std::unique_ptr<ct::DaemonProcess> daemon_;
  bool mounted_ = false;
  std::vector<std::string> extra_args_;  // appended to Args()
  std::string backups_;
  bool backups_mounted_ = false;
};

TEST_F(StateStoreDaemonTest, ADamagedDatabaseIsRefusedAndTheFlagListsTheJobItDrops) {
  Start();
  auto client = Client();
  ASSERT_TRUE(client.Submit(Yaml("kept_a")).ok());
  ASSERT_TRUE(client.Submit(Yaml("hit", "/bin/flip-me-here")).ok());
  ASSERT_TRUE(client.Submit(Yaml("kept_b")).ok());
  daemon_->Stop();  // a clean stop checkpoints the WAL into state.db

  std::string path = state_ + "/state.db";
  std::string data = ct::ReadFile(path);
  size_t at = data.find("/bin/flip-me-here");
  ASSERT_NE(at, std::string::npos);
  data[at + 6] ^= 0x20;
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << data; }

  ct::RunResult refused = ct::RunProcess(COHORT_COORDINATOR_BIN, Args(), {}, 30s);
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  std::string said = refused.out + refused.err;
  EXPECT_NE(said.find("job hit: its spec does not match its checksum"), std::string::npos) << said;
  EXPECT_NE(said.find("--accept-damaged-state"), std::string::npos) << said;

  Start(/*accept=*/true);
  EXPECT_EQ(JobNames(), (std::set<std::string>{"kept_a", "kept_b"}));
  std::string log = daemon_->Log(1 << 20);
  EXPECT_NE(log.find("job hit dropped: its spec does not match its checksum"), std::string::npos)
      << log;
  // The database was rebuilt from what verified: the next start needs no flag.
  daemon_->Stop();
  Start();
  EXPECT_EQ(JobNames(), (std::set<std::string>{"kept_a", "kept_b"}));
}

TEST_F(StateStoreDaemonTest, AFullDiskRefusesSubmitsWhileTheDaemonServesAndLosesNothing) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "mounting a size-limited tmpfs for the state dir needs root";
  if (::mount("tmpfs", state_.c_str(), "tmpfs", 0, "size=2m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs on " << state_ << ": " << std::strerror(errno);
  }
  mounted_ = true;
  Start();
  auto client = Client();
  ASSERT_TRUE(client.Submit(Yaml("before")).ok());
  {
    std::ofstream filler(state_ + "/filler", std::ios::binary);
    std::string chunk(4096, 'f');
    for (int i = 0; i < 1024 && filler; ++i)
      filler.write(chunk.data(), chunk.size()), filler.flush();
  }
  std::set<std::string> accepted = {"before"};
  int refused = 0;
  for (int i = 0; i < 200 && refused < 3; ++i) {
    std::string name = "full" + std::to_string(i);
    auto s = client.Submit(Yaml(name));
    if (s.ok()) {
      accepted.insert(name);
      continue;
    }
    ++refused;
    EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted) << s.status().ToString();
    EXPECT_NE(s.status().message().find("disk is full"), std::string::npos)
        << s.status().ToString();
  }
  ASSERT_EQ(refused, 3) << "the 2 MiB filesystem never filled up";
  ASSERT_TRUE(daemon_->running()) << daemon_->Log();
  EXPECT_EQ(JobNames(), accepted);  // reads are served

  fs::remove(state_ + "/filler");
  ASSERT_TRUE(client.Submit(Yaml("after")).ok());
  accepted.insert("after");
  daemon_->Kill();
  Start();
  EXPECT_EQ(JobNames(), accepted);
}

// The value of the sample `name` (with its labels, as written) in a Prometheus text page; -1 when
// absent.
double Sample(const std::string& page, const std::string& name) {
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

TEST_F(StateStoreDaemonTest, AFullBackupDiskFailsBackupsNotTheCoordinatorAndMetricsSayIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a size-limited tmpfs for backups needs root";
  backups_ = dir_.Join("backups");
  fs::create_directories(backups_);
  if (::mount("tmpfs", backups_.c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs on " << backups_ << ": " << std::strerror(errno);
  }
  backups_mounted_ = true;
  {
    std::ofstream filler(backups_ + "/filler", std::ios::binary);
    std::string chunk(4096, 'f');
    while (filler.write(chunk.data(), chunk.size()) && filler.flush()) {
    }
  }
  const int http_port = ct::PickFreePort();
  extra_args_ = {"--backup-dir", backups_,          "--backup-every",
                 "1s",           "--http-endpoint", "127.0.0.1:" + std::to_string(http_port)};
  Start();
  auto client = Client();
  ASSERT_TRUE(client.Submit(Yaml("kept")).ok());
  auto log_says = [&](const std::string& text) {
    return ct::ReadFile(dir_.Join("coordinator.log")).find(text) != std::string::npos;
  };
  ASSERT_TRUE(
      ct::WaitUntil([&] { return log_says("state backup into " + backups_ + " failed"); }, 20s))
      << daemon_->Log();
  EXPECT_TRUE(log_says("the disk is full")) << daemon_->Log();
  ASSERT_TRUE(client.Submit(Yaml("while_failing")).ok()) << "the coordinator stopped serving";
  ASSERT_TRUE(daemon_->running());
  for (const auto& e : fs::directory_iterator(backups_)) {
    EXPECT_EQ(e.path().filename(), "filler") << "left behind: " << e.path();
  }
  httplib::Client http("127.0.0.1", http_port);
  auto metrics = [&] {
    auto r = http.Get("/metrics");
    return r && r->status == 200 ? r->body : std::string();
  };
  // The page is published every half second.
  EXPECT_TRUE(ct::WaitUntil(
      [&] { return Sample(metrics(), "cohort_state_backups_total{result=\"failed\"}") >= 1; }, 10s))
      << metrics();
  EXPECT_EQ(Sample(metrics(), "cohort_state_backups_total{result=\"ok\"}"), 0);
  EXPECT_EQ(Sample(metrics(), "cohort_state_backup_last_success_timestamp_seconds"), 0);

  // Space again: the next try (a second later, --backup-every being shorter than a minute) works.
  fs::remove(backups_ + "/filler");
  ASSERT_TRUE(ct::WaitUntil([&] { return log_says("state backup: wrote"); }, 20s))
      << daemon_->Log();
  ASSERT_TRUE(ct::WaitUntil(
      [&] { return Sample(metrics(), "cohort_state_backups_total{result=\"ok\"}") >= 1; }, 10s));
  EXPECT_GT(Sample(metrics(), "cohort_state_backup_last_success_timestamp_seconds"), 1.7e9);
  EXPECT_GT(Sample(metrics(), "cohort_state_backup_last_size_bytes"), 0);
  std::string newest;
  for (const auto& e : fs::directory_iterator(backups_)) {
    if (e.path().extension() == ".db") newest = std::max(newest, e.path().string());
  }
  ASSERT_FALSE(newest.empty());
  // That backup restores into a state dir of its own, with both jobs.
  ct::RunResult restored =
      ct::RunProcess(COHORT_COORDINATOR_BIN,
                     {"--state-dir", dir_.Join("restored"), "--restore-state", newest}, {}, 30s);
  ASSERT_EQ(restored.exit_code, 0) << restored.out << restored.err;
  EXPECT_NE(restored.out.find(", 2 jobs,"), std::string::npos) << restored.out;
}

TEST_F(StateStoreDaemonTest, AnAdminAsksForABackupNowAndGetsItOnceWritten) {
  const std::string backups = dir_.Join("backups");
  extra_args_ = {"--backup-dir", backups, "--backup-every", "1h"};
  Start();
  auto client = Client();
  ASSERT_TRUE(client.Submit(Yaml("in_it")).ok());
  // The first backup was due at start (none in the directory); one asked for now holds the job.
  auto reply = client.BackupState(60s);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString() << daemon_->Log();
  EXPECT_EQ(fs::path(reply->path).parent_path(), backups);
  EXPECT_TRUE(fs::exists(reply->path));
  EXPECT_EQ(reply->jobs, 1);
  EXPECT_EQ(reply->bytes, fs::file_size(reply->path));

  const std::vector<std::string> cli = {"--insecure", "--coordinator", client_endpoint_, "backup",
                                        "--json"};
  ct::RunResult asked = ct::RunProcess(COHORT_CLI_BIN, cli, {}, 60s);
  ASSERT_EQ(asked.exit_code, 0) << asked.out << asked.err;
  const nlohmann::json out = nlohmann::json::parse(asked.out, nullptr, false);
  ASSERT_TRUE(out.is_object()) << asked.out;
  EXPECT_NE(out.value("path", ""), reply->path) << "a new backup, not the last one";
  EXPECT_TRUE(fs::exists(out.value("path", "")));
  EXPECT_EQ(out.value("jobs", -1), 1);

  // A coordinator without --backup-dir says how to get one.
  daemon_->Stop();
  extra_args_.clear();
  Start();
  auto refused = Client().BackupState(10s);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  ct::RunResult none = ct::RunProcess(COHORT_CLI_BIN, cli, {}, 30s);
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("--backup-dir"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace cohort
