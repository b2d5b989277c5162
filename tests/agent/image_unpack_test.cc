// An OCI image layout is unpacked off the agent loop (Launcher::Prepare: a slow unpack looked
// like a dead node). ReplicaManager, or the whole agent against a fake coordinator, drives real
// replica processes, the real OciLauncher and the real OCI runtime; `umoci` is a fake on PATH (a
// shell script) that blocks until the test creates a go-file and then "unpacks" a busybox root
// filesystem, or fails when told to. The manager reaps every child (as the daemon does), so these
// also check that umoci's exit status is not taken by the loop's reaper.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "agent/captured_command.h"
#include "agent/oci_launcher.h"
#include "agent/process_launcher.h"
#include "agent/replica_manager.h"
#include "agent/work_dir_lock.h"
#include "tests/agent/agent_loop_fixture.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Built;
using testing::FileExists;
using testing::ReadFile;
using testing::WaitUntil;
using testing::WriteFile;

// The job of the container replicas. An OCI runtime's ids are the host's, and ctest runs tests in
// parallel: the launcher's tag, of its test's own dir, keeps their containers apart.
const std::string& ImageJob() {
  static const std::string job = "img";
  return job;
}

// What /unpacked in the image's root says.
constexpr char kMarker[] = "unpacked from the image layout\n";

// umoci unpack --image REF DEST: records the call, leaves a half-unpacked DEST, waits for the
// go-file, then fails (a FAIL file) or completes DEST/rootfs from the template root filesystem.
constexpr char kFakeUmoci[] = R"(#!/bin/sh
dir=$(dirname "$0")/..
[ "$1" = unpack ] && [ "$2" = --image ] || { echo "fake umoci: unexpected $*" >&2; exit 2; }
echo "$3" >> "$dir/calls"
mkdir -p "$4/rootfs"
# Renamed into place: a test that sees the file reads the whole pid.
echo $$ > "$dir/started.tmp" && mv "$dir/started.tmp" "$dir/started"
while [ ! -e "$dir/go" ]; do sleep 0.05; done
if [ -e "$dir/fail" ]; then echo "umoci: layer sha256:0bad: unexpected EOF" >&2; exit 1; fi
cp -a "$dir/template/." "$4/rootfs/"
echo unpacked from the image layout > "$4/rootfs/unpacked"
)";

// The fake umoci first on PATH (restored when this goes), the image layout it "unpacks", the
// busybox root filesystem it copies, the launcher's image cache and the files that steer and
// record it, in a temp dir of its own. After a minute it goes on by itself: an agent that waits
// for umoci on its loop then fails the tests (they see the go-file too soon) instead of hanging.
class FakeUmoci {
 public:
  FakeUmoci() {
    fs::create_directories(dir_.Join("bin"));
    WriteFile(dir_.Join("bin/umoci"), kFakeUmoci, /*executable=*/true);
    const char* path = std::getenv("PATH");
    saved_path_ = path ? path : "";
    ::setenv("PATH", (dir_.Join("bin") + ":" + saved_path_).c_str(), 1);
    // An OCI image layout as far as the launcher looks.
    fs::create_directories(image());
    WriteFile(image() + "/index.json", "{}");
    WriteFile(image() + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    fs::create_directories(dir_.Join("template/bin"));
    if (fs::exists("/bin/busybox")) {
      fs::copy_file("/bin/busybox", dir_.Join("template/bin/busybox"));
      for (const char* tool : {"sh", "cat", "echo"}) {
        fs::create_symlink("busybox", dir_.Join("template/bin/") + tool);
      }
    }
    watchdog_ = std::thread([this] {
      WaitUntil([&] { return done_.load(); }, seconds(60));
      Go();
    });
  }
  ~FakeUmoci() {
    done_ = true;
    watchdog_.join();  // and a umoci still waiting goes on
    ::setenv("PATH", saved_path_.c_str(), 1);
  }

  // Containers run here (the runtime step succeeds) only as root with busybox to build from.
  static bool ContainersRun() { return ::geteuid() == 0 && fs::exists("/bin/busybox"); }

  StatusOr<std::unique_ptr<OciLauncher>> CreateLauncher(ProcessLauncher* processes) const {
    OciOptions oci;
    oci.cache_dir = cache();
    oci.device_dir = dir_.Join("dev");
    oci.container_tag = AgentTag(dir_.path());
    return OciLauncher::Create(oci, processes);
  }
  // A launch of the image that prints the marker in its root (kMarker).
  wire::LaunchReplicaT Launch(const std::string& replica, int attempt) const {
    wire::LaunchReplicaT launch;
    launch.job = ImageJob();
    launch.replica = replica;
    launch.role = "worker";
    launch.attempt = attempt;
    launch.command = {"/bin/cat", "/unpacked"};
    launch.container = std::make_unique<wire::ContainerSpecT>();
    launch.container->image = image();
    return launch;
  }

  // Makes image() a real image layout, built by the real umoci from the template root and the
  // marker, and takes the fake off PATH. False where umoci is not installed.
  bool UseRealUmoci() {
    ::setenv("PATH", saved_path_.c_str(), 1);
    const std::string umoci = "/usr/bin/umoci";
    if (!FileExists(umoci)) return false;
    fs::remove_all(image());
    const std::string tagged = image() + ":latest", build = dir_.Join("build");
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"init", "--layout", image()},
             {"new", "--image", tagged},
             // The image's own ENV, as a stock image has (a conda or venv bin first on PATH).
             {"config", "--image", tagged, "--config.env", "PATH=/opt/tools/bin:/bin",
              "--config.env", "IMAGE_SAYS=from the image", "--config.env", "RANK=image",
              "--config.workingdir", "/app"},
             // An ENTRYPOINT that a job's args follow, and a CMD they replace.
             {"config", "--image", tagged, "--config.entrypoint", "/bin/cat", "--config.cmd",
              "/etc/hostname"},
             {"unpack", "--image", tagged, build}}) {
      auto run = testing::RunProcess(umoci, args);
      EXPECT_EQ(run.exit_code, 0) << "umoci " << args[0] << ": " << run.err;
    }
    fs::copy(dir_.Join("template"), build + "/rootfs",
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    WriteFile(build + "/rootfs/unpacked", kMarker);
    auto run = testing::RunProcess(umoci, {"repack", "--image", tagged, build});
    EXPECT_EQ(run.exit_code, 0) << "umoci repack: " << run.err;
    return true;
  }

  std::string image() const { return dir_.Join("image"); }
  std::string cache() const { return dir_.Join("cache"); }
  // Whether umoci started, and its pid.
  bool started() const { return FileExists(dir_.Join("started")); }
  pid_t pid() const { return std::atoi(ReadFile(dir_.Join("started")).c_str()); }
  bool going() const { return FileExists(dir_.Join("go")); }
  void Go() { WriteFile(dir_.Join("go"), ""); }
  void FailFromNowOn(bool fail) {
    if (fail) {
      WriteFile(dir_.Join("fail"), "");
    } else {
      fs::remove(dir_.Join("fail"));
    }
  }
  int calls() const {
    std::string calls = ReadFile(dir_.Join("calls"));
    return static_cast<int>(std::count(calls.begin(), calls.end(), '\n'));
  }

 private:
  testing::TempDir dir_;
  std::string saved_path_;
  std::atomic<bool> done_{false};
  std::thread watchdog_;
};

class ImageUnpackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.node_id = "node-a";
    config_.work_dir = work_.path();
    config_.security.insecure = true;
    config_.grace_period = milliseconds(500);
    config_.reap_all_children = true;  // as the daemon, a subreaper, does
    auto containers = umoci_.CreateLauncher(&container_processes_);
    if (!containers.ok()) GTEST_SKIP() << "no OCI runtime here: " << containers.status().message();
    manager_ = std::make_unique<ReplicaManager>(config_, clock_, outbox_,
                                                std::make_unique<ProcessLauncher>(CgroupManager()),
                                                [](Attempt&) {});
    manager_->SetContainerLauncher(std::move(*containers));
  }

  void TearDown() override {
    umoci_.Go();
    manager_.reset();
  }

  void LaunchContainer(const std::string& replica, int attempt) {
    manager_->Launch(*Built<wire::LaunchReplica>(umoci_.Launch(replica, attempt)));
  }
  void LaunchProcess(const std::string& job, const std::string& script) {
    wire::LaunchReplicaT launch;
    launch.job = job;
    launch.replica = "chief-0";
    launch.role = "chief";
    launch.command = {"/bin/sh", "-c", script};
    manager_->Launch(*Built<wire::LaunchReplica>(launch));
  }

  // Launches attempt 0 of img/worker-0 and steps the loop until the fake umoci runs for it.
  bool LaunchAndWaitForUmoci() {
    LaunchContainer("worker-0", 0);
    return StepUntil([&] { return umoci_.started(); });
  }
  // One turn of the agent loop's replica work.
  void Step() {
    manager_->StartPending();
    manager_->Reap();
    manager_->EnforceDeadlines();
  }
  // Steps the loop until `done` (a generous real-time guard only ends a hung test).
  bool StepUntil(const std::function<bool()>& done) {
    return WaitUntil(
        [&] {
          Step();
          return done();
        },
        seconds(60), milliseconds(5));
  }

  Attempt* Find(const std::string& job, const std::string& replica, int attempt) {
    return manager_->Find(AttemptKey(job, replica, attempt));
  }
  bool Final(const std::string& job, const std::string& replica, int attempt) {
    Attempt* a = Find(job, replica, attempt);
    return a != nullptr && a->final && a->gone;
  }
  std::string Log(const std::string& replica, int attempt) {
    return ReadFile(AttemptLogPath(config_.work_dir, ImageJob(), replica, attempt));
  }
  // What is in the image cache (bundle directories and staging ones).
  std::vector<std::string> CacheEntries() {
    std::vector<std::string> entries;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(umoci_.cache(), ec)) {
      entries.push_back(entry.path().filename().string());
    }
    return entries;
  }
  // The launch reached the runtime from the unpacked root: the bundle's root is the cached one
  // that umoci filled; where containers run, the command in it read its marker.
  void ExpectRanFromTheUnpackedRoot(const std::string& replica, int attempt) {
    Attempt* a = Find(ImageJob(), replica, attempt);
    ASSERT_NE(a, nullptr);
    std::string config = ReadFile(
        AttemptWorkingDir(config_.work_dir, ImageJob(), replica, attempt) + "/bundle/config.json");
    ASSERT_FALSE(config.empty()) << "no bundle written; " << a->message;
    std::string root = nlohmann::json::parse(config)["root"]["path"];
    EXPECT_EQ(fs::path(root).parent_path().parent_path(), fs::path(umoci_.cache()));
    EXPECT_EQ(ReadFile(root + "/unpacked"), kMarker);
    if (!FakeUmoci::ContainersRun())
      return;  // runc/crun then fail at the runtime step, past the unpack
    EXPECT_EQ(a->state, wire::ReplicaState::SUCCEEDED) << a->message << "\n"
                                                       << Log(replica, attempt);
    EXPECT_NE(Log(replica, attempt).find(kMarker), std::string::npos);
  }

  // Attempt 1 of img/worker-0 runs from the unpacked root, umoci having run so many times.
  void ExpectTheRetryRuns(int umoci_calls) {
    LaunchContainer("worker-0", 1);
    ASSERT_TRUE(StepUntil([&] { return Final(ImageJob(), "worker-0", 1); }));
    EXPECT_EQ(umoci_.calls(), umoci_calls);
    ExpectRanFromTheUnpackedRoot("worker-0", 1);
  }

  FakeUmoci umoci_;
  testing::TempDir work_;
  AgentConfig config_;
  ManualClock clock_;
  testing::SentMessages sent_;
  Outbox outbox_{clock_, sent_.Transmit()};
  ProcessLauncher container_processes_{CgroupManager()};
  std::unique_ptr<ReplicaManager> manager_;
};

TEST_F(ImageUnpackTest, TheLoopRunsOnWhileAnImageUnpacks) {
  ASSERT_TRUE(LaunchAndWaitForUmoci());
  Attempt* a = Find(ImageJob(), "worker-0", 0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->state, wire::ReplicaState::STARTING);
  // umoci blocks; the loop launches, reaps and reports another replica meanwhile.
  LaunchProcess("other", "echo other ran");
  ASSERT_TRUE(StepUntil([&] { return Final("other", "chief-0", 0); }));
  EXPECT_EQ(Find("other", "chief-0", 0)->state, wire::ReplicaState::SUCCEEDED);
  EXPECT_FALSE(umoci_.going());
  EXPECT_EQ(a->state, wire::ReplicaState::STARTING);
  EXPECT_EQ(a->process, nullptr);
  umoci_.Go();
  ASSERT_TRUE(StepUntil([&] { return Final(ImageJob(), "worker-0", 0); })) << a->message;
  EXPECT_EQ(umoci_.calls(), 1);
  ExpectRanFromTheUnpackedRoot("worker-0", 0);
}

TEST_F(ImageUnpackTest, AFailedUnpackFailsTheAttemptAndTheRetryUnpacksAgain) {
  umoci_.FailFromNowOn(true);
  umoci_.Go();
  LaunchContainer("worker-0", 0);
  ASSERT_TRUE(StepUntil([&] { return Final(ImageJob(), "worker-0", 0); }));
  Attempt* failed = Find(ImageJob(), "worker-0", 0);
  EXPECT_EQ(failed->state, wire::ReplicaState::FAILED);
  EXPECT_EQ(failed->exit.exit_code, -1);  // as every launch that fails before it starts
  EXPECT_NE(failed->message.find("umoci unpack " + umoci_.image() + ": "), std::string::npos)
      << failed->message;
  EXPECT_NE(failed->message.find("layer sha256:0bad: unexpected EOF"), std::string::npos)
      << failed->message;
  EXPECT_NE(Log("worker-0", 0).find("unexpected EOF"), std::string::npos);
  // The half-unpacked staging directory is gone: nothing in the cache passes for the image.
  EXPECT_TRUE(CacheEntries().empty()) << ::testing::PrintToString(CacheEntries());

  umoci_.FailFromNowOn(false);
  ExpectTheRetryRuns(/*umoci_calls=*/2);
}

// The real umoci (Go) under the hidden spawn, with a layout it made.
TEST_F(ImageUnpackTest, TheRealUmociUnpacksARealLayout) {
  if (!umoci_.UseRealUmoci()) GTEST_SKIP() << "umoci is not installed (scripts/install-deps.sh)";
  LaunchContainer("worker-0", 0);
  ASSERT_TRUE(StepUntil([&] { return Final(ImageJob(), "worker-0", 0); }));
  ExpectRanFromTheUnpackedRoot("worker-0", 0);
}

// The image's ENV is the container's, under the replica's own variables: its PATH (not the
// agent's), its other variables, and the job's RANK over the image's; its WORKDIR the cwd.
TEST_F(ImageUnpackTest, TheContainerRunsWithTheImagesEnvironmentUnderTheJobs) {
  if (!umoci_.UseRealUmoci()) GTEST_SKIP() << "umoci is not installed (scripts/install-deps.sh)";
  wire::LaunchReplicaT launch = umoci_.Launch("worker-0", 0);
  launch.command = {"/bin/sh", "-c",
                    "echo \"PATH=$PATH|IMAGE_SAYS=$IMAGE_SAYS|RANK=$RANK|CWD=$(pwd)\""};
  auto rank = std::make_unique<wire::KeyValueT>();
  rank->key = "RANK";
  rank->value = "3";
  launch.env.push_back(std::move(rank));
  manager_->Launch(*Built<wire::LaunchReplica>(launch));
  ASSERT_TRUE(StepUntil([&] { return Final(ImageJob(), "worker-0", 0); }));
  const std::string config = ReadFile(
      AttemptWorkingDir(config_.work_dir, ImageJob(), "worker-0", 0) + "/bundle/config.json");
  ASSERT_FALSE(config.empty()) << Find(ImageJob(), "worker-0", 0)->message;
  std::set<std::string> env;
  const nlohmann::json parsed = nlohmann::json::parse(config);
  for (const auto& var : parsed["process"]["env"]) env.insert(var.get<std::string>());
  EXPECT_TRUE(env.count("PATH=/opt/tools/bin:/bin")) << config;
  EXPECT_TRUE(env.count("IMAGE_SAYS=from the image")) << config;
  EXPECT_TRUE(env.count("RANK=3")) << config;
  if (!FakeUmoci::ContainersRun()) return;  // runc/crun then fail at the runtime step
  // The image's WORKDIR, /app, which its root lacks: the attempt's image-workdir there.
  EXPECT_NE(
      Log("worker-0", 0).find("PATH=/opt/tools/bin:/bin|IMAGE_SAYS=from the image|RANK=3|CWD=/app"),
      std::string::npos)
      << Log("worker-0", 0);
}

// A job that gives only args (Vertex's usual container job: the image's ENTRYPOINT runs the
// trainer): they follow the image's ENTRYPOINT in place of its CMD, read apart from the layout.
TEST_F(ImageUnpackTest, AJobsArgsFollowTheImagesEntrypointInPlaceOfItsCmd) {
  if (!umoci_.UseRealUmoci()) GTEST_SKIP() << "umoci is not installed (scripts/install-deps.sh)";
  wire::LaunchReplicaT launch = umoci_.Launch("worker-0", 0);
  launch.command = {"/unpacked"};  // as the coordinator sends them: joined, and apart
  launch.container->args = {"/unpacked"};
  manager_->Launch(*Built<wire::LaunchReplica>(launch));
  ASSERT_TRUE(StepUntil([&] { return Final(ImageJob(), "worker-0", 0); }));
  const std::string config = ReadFile(
      AttemptWorkingDir(config_.work_dir, ImageJob(), "worker-0", 0) + "/bundle/config.json");
  ASSERT_FALSE(config.empty()) << Find(ImageJob(), "worker-0", 0)->message;
  EXPECT_EQ(nlohmann::json::parse(config)["process"]["args"],
            nlohmann::json({"/bin/cat", "/unpacked"}))
      << config;
  if (!FakeUmoci::ContainersRun()) return;  // runc/crun then fail at the runtime step
  EXPECT_NE(Log("worker-0", 0).find(kMarker), std::string::npos) << Log("worker-0", 0);
}

TEST_F(ImageUnpackTest, TwoReplicasOfOneImageUnpackItOnce) {
  LaunchContainer("worker-1", 0);
  ASSERT_TRUE(LaunchAndWaitForUmoci());
  EXPECT_EQ(Find(ImageJob(), "worker-1", 0)->state, wire::ReplicaState::STARTING);
  umoci_.Go();
  ASSERT_TRUE(StepUntil(
      [&] { return Final(ImageJob(), "worker-0", 0) && Final(ImageJob(), "worker-1", 0); }));
  EXPECT_EQ(umoci_.calls(), 1);
  ExpectRanFromTheUnpackedRoot("worker-0", 0);
  ExpectRanFromTheUnpackedRoot("worker-1", 0);
}

TEST_F(ImageUnpackTest, AStopWhileTheImageUnpacksEndsTheAttemptAtOnce) {
  ASSERT_TRUE(LaunchAndWaitForUmoci());
  wire::StopReplicaT stop;
  stop.job = ImageJob();
  stop.replica = "worker-0";
  stop.attempt = 0;
  stop.grace_ms = 500;
  stop.reason = "job cancelled";
  manager_->Stop(*Built<wire::StopReplica>(stop));
  ASSERT_TRUE(StepUntil([&] { return Final(ImageJob(), "worker-0", 0); }));
  Attempt* a = Find(ImageJob(), "worker-0", 0);
  EXPECT_EQ(a->state, wire::ReplicaState::STOPPED);
  EXPECT_EQ(a->message, "job cancelled; stopped before it started");
  EXPECT_EQ(a->process, nullptr);
  EXPECT_FALSE(umoci_.going()) << "it ended while umoci still ran";
  // The unpack goes on in the background and fills the cache: the next attempt reuses it.
  umoci_.Go();
  ExpectTheRetryRuns(/*umoci_calls=*/1);
}

TEST_F(ImageUnpackTest, ShutdownCancelsTheUnpackAndLeavesNothingHalfDone) {
  ASSERT_TRUE(LaunchAndWaitForUmoci());
  pid_t umoci = umoci_.pid();
  ASSERT_GT(umoci, 0);
  manager_.reset();  // no go-file: returns only because the unpack is cancelled
  // SIGKILLed (and its death under way: it may take the kernel a moment).
  EXPECT_TRUE(WaitUntil([&] { return !testing::ProcessAlive(umoci); }, seconds(30)));
  EXPECT_TRUE(CacheEntries().empty()) << ::testing::PrintToString(CacheEntries());
}

// The agent with a fake coordinator (tests/agent/agent_loop_fixture.h) and the OCI launcher.
class AgentImageTest : public AgentLoopTest {
 protected:
  void SetUp() override {
    AgentLoopTest::SetUp();
    if (HasFatalFailure()) return;
    auto containers = umoci_.CreateLauncher(&container_processes_);
    if (!containers.ok()) GTEST_SKIP() << "no OCI runtime here: " << containers.status().message();
    agent_->SetContainerLauncher(std::move(*containers));
  }

  FakeUmoci umoci_;
  ProcessLauncher container_processes_{CgroupManager()};
};

// The defect this guards against: a slow unpack on the loop sent no heartbeat for minutes, and
// the coordinator declared the node lost.
TEST_F(AgentImageTest, HeartbeatsGoOnWhileAnImageUnpacks) {
  coordinator_->Launch("node-a", umoci_.Launch("worker-0", 0));
  const std::string key = LogKey(ImageJob(), "worker-0", 0);
  ASSERT_TRUE(Pump([&] { return umoci_.started(); }));
  // Heartbeats every 100 ms of the agent's clock here, which moves 10 ms a step.
  const int heartbeats = coordinator_->heartbeats;
  ASSERT_TRUE(Pump([&] { return coordinator_->heartbeats >= heartbeats + 5; }, milliseconds(10)));
  EXPECT_TRUE(agent_->registered());
  EXPECT_FALSE(umoci_.going());
  ASSERT_TRUE(coordinator_->Latest(key).has_value());
  EXPECT_EQ(coordinator_->Latest(key)->state, wire::ReplicaState::STARTING);
  umoci_.Go();
  ASSERT_TRUE(PumpUntilDone(key));
  // It reached the runtime (RUNNING), from the unpacked root where containers run here.
  EXPECT_TRUE(coordinator_->SawState(key, wire::ReplicaState::RUNNING));
  EXPECT_EQ(umoci_.calls(), 1);
  if (FakeUmoci::ContainersRun()) {
    EXPECT_EQ(coordinator_->Final(key)->state, wire::ReplicaState::SUCCEEDED);
    EXPECT_TRUE(LogHas(key, kMarker)) << coordinator_->logs[key];
  }
}

// The agent's shutdown is not held up by an unpack: the attempt ends PREEMPTED at once, and
// destroying the agent kills umoci.
TEST_F(AgentImageTest, ShutdownWhileAnImageUnpacksIsNotHeldUp) {
  coordinator_->Launch("node-a", umoci_.Launch("worker-0", 0));
  const std::string key = LogKey(ImageJob(), "worker-0", 0);
  ASSERT_TRUE(Pump([&] { return umoci_.started(); }));
  agent_->BeginPreemption();
  ASSERT_TRUE(Pump([&] { return agent_->preempted(); }, milliseconds(50)));
  ASSERT_TRUE(coordinator_->Final(key).has_value());
  EXPECT_EQ(coordinator_->Final(key)->state, wire::ReplicaState::PREEMPTED);
  const pid_t umoci = umoci_.pid();
  agent_.reset();
  EXPECT_TRUE(WaitUntil([&] { return !testing::ProcessAlive(umoci); }, seconds(30)));
  EXPECT_FALSE(umoci_.going()) << "the unpack was waited for, not cancelled";
}

// RunCaptured's hidden_from_reaper, which the unpack uses, with a command run on a thread of
// its own beside this one, which plays the agent loop.
class HiddenCapturedCommandTest : public ::testing::Test {
 protected:
  void TearDown() override {
    cancel_ = true;
    if (runner_.joinable()) runner_.join();
  }
  // Starts `/bin/sh -c script`, hidden from the reaper, cancelled by cancel_.
  void Start(const std::string& script) {
    runner_ = std::thread([this, script] {
      CaptureOptions options;
      options.hidden_from_reaper = true;
      options.cancel = &cancel_;
      result_ = RunCaptured({"/bin/sh", "-c", script}, options);
    });
  }
  // The pids the script wrote to `file` (once it has).
  std::vector<pid_t> Pids(const std::string& file) {
    EXPECT_TRUE(WaitUntil([&] { return !ReadFile(dir_.Join(file)).empty(); }, seconds(30)));
    std::istringstream in(ReadFile(dir_.Join(file)));
    std::vector<pid_t> pids;
    for (pid_t pid; in >> pid;) pids.push_back(pid);
    return pids;
  }
  void Finish() { runner_.join(); }

  testing::TempDir dir_;
  std::atomic<bool> cancel_{false};
  std::thread runner_;
  CapturedCommand result_;
};

// The agent loop reaps every child with waitpid(-1); the command's exit status stays
// RunCaptured's. The command exits while a child of it still holds its output open; the reaper
// runs once the command and whatever waits for it have exited. (Run as an ordinary child, the
// command is a zombie of this process then, the reaper takes it and RunCaptured reports 0.)
TEST_F(HiddenCapturedCommandTest, TheLoopsReaperCannotTakeItsExitStatus) {
  Start("(while [ ! -e " + dir_.Join("go") + " ]; do sleep 0.05; done) & echo $$ $PPID > " +
        dir_.Join("pids") + "; echo bye; exit 3");
  std::vector<pid_t> pids = Pids("pids");
  ASSERT_EQ(pids.size(), 2u);
  const pid_t command = pids[0], parent = pids[1];
  ASSERT_TRUE(WaitUntil(
      [&] {
        return !testing::ProcessAlive(command) &&
               (parent == ::getpid() || !testing::ProcessAlive(parent));
      },
      seconds(30)));
  int status = 0;
  while (::waitpid(-1, &status, WNOHANG) > 0) {  // the agent loop's reaper
  }
  WriteFile(dir_.Join("go"), "");
  Finish();
  EXPECT_EQ(result_.exit_code, 3) << result_.output;
  EXPECT_EQ(result_.output, "bye\n");
  EXPECT_FALSE(result_.cancelled);
}

// A cancelled command is killed with what it started (its process group), and says so.
TEST_F(HiddenCapturedCommandTest, CancelKillsTheCommand) {
  Start("echo $$ > " + dir_.Join("pid") + "; exec sleep 1000");
  std::vector<pid_t> pids = Pids("pid");
  ASSERT_EQ(pids.size(), 1u);
  cancel_ = true;
  Finish();
  EXPECT_TRUE(result_.cancelled);
  EXPECT_NE(result_.exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return !testing::ProcessAlive(pids[0]); }, seconds(30)));
}

}  // namespace
}  // namespace cohort::agent
