// The agent loop never waits for a container runtime's command (a docker CLI call takes 0.1-1 s,
// a wedged dockerd minutes: meanwhile the agent sent no heartbeat and launched nothing, and the
// coordinator could declare the node lost). OciLauncher prepares the bundle and removes a leftover
// container in Prepare, off the loop; a container's kill, state and delete run on its lane of
// RuntimeCommands (agent/runtime_commands.h). Real processes throughout: the runtime is a shell
// script standing in for runc or docker (first on PATH), whose commands a test holds with a
// block-file until it releases them; a held command gives up by itself after a minute, so an
// agent that waits for it on its loop fails these tests instead of hanging them.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "agent/oci_launcher.h"
#include "agent/replica_manager.h"
#include "agent/runtime_commands.h"
#include "agent/work_dir_lock.h"
#include "tests/agent/agent_loop_fixture.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

// The job of the container replicas here.
constexpr char kJob[] = "ctr";

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::ReadFile;
using testing::WriteFile;

// runc's and docker's syntax: run --bundle B ID | run --rm --name ID ..., kill --all ID SIG |
// kill --signal SIG ID, state ID, delete --force ID | rm -f ID, list --quiet | ps --all --format
// {{.Names}}. Every command but the list is recorded in `calls` once done ("run ID", "kill ID
// SIG", "state ID", "delete ID"); the container's state is the file state-ID: a run sets it
// running and lasts while it is (or until finish-ID exists); a kill stops it; a delete removes it;
// the list prints each ID that has one. block-VERB-ID holds VERB for ID (writing its pid to
// held-VERB-ID) until release-VERB-ID exists.
constexpr char kFakeRuntime[] = R"sh(#!/bin/sh
dir=$(cd "$(dirname "$0")/.." && pwd)
case "$1" in
  run) id=$4 ;;
  kill) if [ "$2" = --all ]; then id=$3; sig=$4; else sig=$3; id=$4; fi ;;
  state) id=$2 ;;
  delete|rm) id=$3 ;;
  list|ps) for f in "$dir"/state-*; do [ -e "$f" ] && echo "${f##*/state-}"; done; exit 0 ;;
  *) echo "fake runtime: unexpected $*" >&2; exit 2 ;;
esac
verb=$1; [ "$verb" = rm ] && verb=delete
if [ -e "$dir/block-$verb-$id" ]; then
  echo $$ > "$dir/held-$verb-$id"
  i=0
  while [ ! -e "$dir/release-$verb-$id" ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done
fi
state="$dir/state-$id"
set_state() { echo "$1" > "$state.$$" && mv "$state.$$" "$state"; }
case "$verb" in
  run)
    echo "run $id" >> "$dir/calls"
    set_state running
    while [ "$(cat "$state" 2>/dev/null)" = running ]; do
      if [ -e "$dir/finish-$id" ]; then set_state stopped; exit 0; fi
      sleep 0.02
    done
    exit 137 ;;
  kill)
    echo "kill $id $sig" >> "$dir/calls"
    [ -e "$state" ] || { echo "container $id does not exist" >&2; exit 1; }
    [ "$(cat "$state")" = running ] || { echo "container $id is not running" >&2; exit 1; }
    set_state stopped ;;
  state)
    echo "state $id" >> "$dir/calls"
    [ -e "$state" ] || { echo "container $id does not exist" >&2; exit 1; }
    printf '{"id":"%s","status":"%s"}\n' "$id" "$(cat "$state")" ;;
  delete)
    rm -f "$state"
    echo "delete $id" >> "$dir/calls" ;;
esac
)sh";

// The fake runtime, as runc and as docker, first on PATH while this lives; a root filesystem
// directory for the image.
class FakeRuntime {
 public:
  FakeRuntime() {
    fs::create_directories(dir_.Join("bin"));
    fs::create_directories(dir_.Join("rootfs/bin"));
    WriteFile(dir_.Join("bin/runc"), kFakeRuntime, /*executable=*/true);
    WriteFile(dir_.Join("bin/docker"), kFakeRuntime, /*executable=*/true);
    const char* path = std::getenv("PATH");
    saved_path_ = path ? path : "";
    ::setenv("PATH", (dir_.Join("bin") + ":" + saved_path_).c_str(), 1);
  }
  ~FakeRuntime() { ::setenv("PATH", saved_path_.c_str(), 1); }

  std::string image() const { return dir_.Join("rootfs"); }
  void Block(const std::string& verb, const std::string& id) {
    WriteFile(dir_.Join("block-" + verb + "-" + id), "");
  }
  void Release(const std::string& verb, const std::string& id) {
    WriteFile(dir_.Join("release-" + verb + "-" + id), "");
  }
  bool Held(const std::string& verb, const std::string& id) const {
    return !ReadFile(dir_.Join("held-" + verb + "-" + id)).empty();
  }
  pid_t HeldPid(const std::string& verb, const std::string& id) const {
    return std::atoi(ReadFile(dir_.Join("held-" + verb + "-" + id)).c_str());
  }
  void Finish(const std::string& id) { WriteFile(dir_.Join("finish-" + id), ""); }
  // A container `id` the runtime lists as running, with no runtime process of it (one an agent
  // killed with SIGKILL left).
  void Leave(const std::string& id) { WriteFile(dir_.Join("state-" + id), "running\n"); }
  // "running", "stopped", or "" once deleted (or never run).
  std::string State(const std::string& id) const {
    std::string state = ReadFile(dir_.Join("state-" + id));
    if (!state.empty() && state.back() == '\n') state.pop_back();
    return state;
  }
  // The commands done for `id`, in order, without the id: "run", "kill 15", "state", "delete".
  std::vector<std::string> Calls(const std::string& id) const {
    std::vector<std::string> calls;
    std::istringstream lines(ReadFile(dir_.Join("calls")));
    std::string line;
    const std::string tag = " " + id;
    while (std::getline(lines, line)) {
      auto at = line.find(tag);
      if (at == std::string::npos) continue;
      std::string rest = line.substr(at + tag.size());
      if (!rest.empty() && rest[0] != ' ') continue;  // another id that starts with this one
      calls.push_back(line.substr(0, at) + rest);
    }
    return calls;
  }

 private:
  testing::TempDir dir_;
  std::string saved_path_;
};

// Where `what` first occurs in `calls` (calls.size() when nowhere), and how often.
size_t First(const std::vector<std::string>& calls, const std::string& what) {
  return std::find(calls.begin(), calls.end(), what) - calls.begin();
}
size_t Count(const std::vector<std::string>& calls, const std::string& what) {
  return std::count(calls.begin(), calls.end(), what);
}

// The agent against a fake coordinator (tests/agent/agent_loop_fixture.h), its container launcher
// the OciLauncher over the fake runtime. Parameter: the runtime ("runc" or "docker").
class AgentContainerWaitTest : public AgentLoopTest,
                               public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    AgentLoopTest::SetUp();
    if (HasFatalFailure()) return;
    OciOptions oci;
    oci.runtime = GetParam();
    oci.cache_dir = work_.path() + "/images";
    oci.shutdown_drain = milliseconds(300);
    oci.container_tag = tag_ = AgentTag(work_.path());
    auto containers = OciLauncher::Create(oci, &container_processes_);
    ASSERT_TRUE(containers.ok()) << containers.status().ToString();
    ASSERT_EQ((*containers)->runtime(), GetParam());
    agent_->SetContainerLauncher(std::move(*containers));
  }

  bool runc() const { return GetParam() == "runc"; }
  wire::LaunchReplicaT ContainerLaunch(const std::string& replica, int attempt) {
    wire::LaunchReplicaT launch = MakeLaunch(kJob, replica, attempt, "");
    launch.command = {"/bin/true"};
    launch.container = std::make_unique<wire::ContainerSpecT>();
    launch.container->image = runtime_.image();
    return launch;
  }
  // Launches kJob/worker-N and pumps until the coordinator heard it RUNNING.
  void LaunchRunning(int attempt) {
    coordinator_->Launch("node-a", ContainerLaunch("worker-0", attempt));
    const std::string key = LogKey(kJob, "worker-0", attempt);
    const std::string id = ContainerId(tag_, kJob, "worker-0", attempt);
    ASSERT_TRUE(Pump([&] {
      auto latest = coordinator_->Latest(key);
      return latest && latest->state == wire::ReplicaState::RUNNING &&
             runtime_.State(id) == "running";
    })) << (coordinator_->Latest(key) ? coordinator_->Latest(key)->message : "no status");
  }
  // The loop goes on: heartbeats (every 100 ms of the agent's clock, which moves 10 ms a step),
  // and a process replica launches, runs and is reported.
  void ExpectTheLoopGoesOn(const std::string& other_job) {
    const int heartbeats = coordinator_->heartbeats;
    ASSERT_TRUE(Pump([&] { return coordinator_->heartbeats >= heartbeats + 5; }, milliseconds(10)));
    EXPECT_TRUE(agent_->registered());
    ExpectAnotherReplicaRuns(other_job);
  }

  FakeRuntime runtime_;  // before the agent's launcher is made, gone after the agent
  std::string tag_;      // the launcher's container tag
  ProcessLauncher container_processes_{CgroupManager()};
};

INSTANTIATE_TEST_SUITE_P(Runtimes, AgentContainerWaitTest, ::testing::Values("runc", "docker"));

TEST_P(AgentContainerWaitTest, AStopWhoseRuntimeKillHangsHoldsNothingElse) {
  const std::string id = ContainerId(tag_, kJob, "worker-0", 0);
  const std::string key = LogKey(kJob, "worker-0", 0);
  ASSERT_NO_FATAL_FAILURE(LaunchRunning(0));
  // Prepare removed a leftover of the id before the run.
  EXPECT_EQ(runtime_.Calls(id), (std::vector<std::string>{"delete", "run"}));
  runtime_.Block("kill", id);
  coordinator_->Stop("node-a", kJob, "worker-0", 0, 200);
  ASSERT_TRUE(Pump([&] { return runtime_.Held("kill", id); }));
  // The runtime's foreground process got the SIGTERM at once: the stop is reported.
  ASSERT_TRUE(Pump([&] { return coordinator_->Final(key).has_value(); }));
  EXPECT_EQ(coordinator_->Final(key)->state, wire::ReplicaState::STOPPED);
  EXPECT_EQ(coordinator_->Final(key)->signal, SIGTERM);
  ASSERT_NO_FATAL_FAILURE(ExpectTheLoopGoesOn("other"));
  // Still held: no kill done, the container still running. runc's attempt stays until the
  // runtime says its container is gone (docker's container goes with its `run`).
  EXPECT_EQ(Count(runtime_.Calls(id), "kill 15"), 0u);
  EXPECT_EQ(runtime_.State(id), "running");
  ASSERT_TRUE(Pump([&] { return agent_->attempt_count() == (runc() ? 1u : 0u); }));
  if (runc()) {
    EXPECT_EQ(Count(runtime_.Calls(id), "delete"), 1u);  // the leftover's only
  }

  runtime_.Release("kill", id);
  ASSERT_TRUE(Pump([&] {
    return agent_->attempt_count() == 0 && Count(runtime_.Calls(id), "delete") == 2;
  })) << ::testing::PrintToString(runtime_.Calls(id));
  EXPECT_EQ(runtime_.State(id), "");
  // In order: the SIGTERM's kill, then the SIGKILL's; runc's state query after them; the
  // delete last, once.
  const std::vector<std::string> calls = runtime_.Calls(id);
  ASSERT_LT(First(calls, "kill 15"), calls.size()) << ::testing::PrintToString(calls);
  EXPECT_LT(First(calls, "kill 15"), First(calls, "kill 9")) << ::testing::PrintToString(calls);
  if (runc()) {
    EXPECT_LT(First(calls, "kill 9"), First(calls, "state")) << ::testing::PrintToString(calls);
  }
  EXPECT_EQ(calls.back(), "delete") << ::testing::PrintToString(calls);
  EXPECT_EQ(Count(calls, "delete"), 2u) << ::testing::PrintToString(calls);
}

TEST_P(AgentContainerWaitTest, ADeleteThatHangsHoldsNothingElseNorTheNextAttempt) {
  const std::string id0 = ContainerId(tag_, kJob, "worker-0", 0);
  const std::string id1 = ContainerId(tag_, kJob, "worker-0", 1);
  ASSERT_NO_FATAL_FAILURE(LaunchRunning(0));
  runtime_.Block("delete", id0);
  runtime_.Finish(id0);
  const std::string key0 = LogKey(kJob, "worker-0", 0);
  ASSERT_TRUE(PumpUntilDone(key0));
  EXPECT_EQ(coordinator_->Final(key0)->state, wire::ReplicaState::SUCCEEDED);
  ASSERT_TRUE(Pump([&] { return runtime_.Held("delete", id0); }));
  // While attempt 0's delete hangs, attempt 1 of the replica prepares, launches and runs.
  ASSERT_NO_FATAL_FAILURE(LaunchRunning(1));
  ASSERT_NO_FATAL_FAILURE(ExpectTheLoopGoesOn("other"));
  EXPECT_EQ(Count(runtime_.Calls(id0), "delete"), 1u);  // the leftover's only

  runtime_.Release("delete", id0);
  ASSERT_TRUE(Pump(
      [&] { return Count(runtime_.Calls(id0), "delete") == 2 && agent_->attempt_count() == 1; }));
  EXPECT_EQ(runtime_.State(id0), "");
  // Attempt 0's delete took its own container only.
  EXPECT_EQ(runtime_.State(id1), "running");
  EXPECT_EQ(coordinator_->Latest(LogKey(kJob, "worker-0", 1))->state, wire::ReplicaState::RUNNING);
  EXPECT_EQ(runtime_.Calls(id1), (std::vector<std::string>{"delete", "run"}));
  runtime_.Finish(id1);
  const std::string key1 = LogKey(kJob, "worker-0", 1);
  ASSERT_TRUE(PumpUntilDone(key1));
  EXPECT_EQ(coordinator_->Final(key1)->state, wire::ReplicaState::SUCCEEDED);
  ASSERT_TRUE(Pump(
      [&] { return Count(runtime_.Calls(id1), "delete") == 2 && agent_->attempt_count() == 0; }));
  EXPECT_EQ(runtime_.Calls(id1).back(), "delete");
  EXPECT_EQ(runtime_.State(id1), "");
}

// The removal of a leftover container runs in Prepare: while it hangs the attempt stays STARTING
// and the loop goes on; a shutdown then cancels the Prepare and kills the removal.
TEST_P(AgentContainerWaitTest, ALeftoverRemovalThatHangsHoldsNothingElseNorTheShutdown) {
  const std::string id = ContainerId(tag_, kJob, "worker-0", 0);
  const std::string key = LogKey(kJob, "worker-0", 0);
  runtime_.Block("delete", id);
  coordinator_->Launch("node-a", ContainerLaunch("worker-0", 0));
  ASSERT_TRUE(Pump([&] { return runtime_.Held("delete", id); }));
  ASSERT_NO_FATAL_FAILURE(ExpectTheLoopGoesOn("other"));
  ASSERT_TRUE(coordinator_->Latest(key).has_value());
  EXPECT_EQ(coordinator_->Latest(key)->state, wire::ReplicaState::STARTING);
  EXPECT_TRUE(runtime_.Calls(id).empty()) << ::testing::PrintToString(runtime_.Calls(id));
  const pid_t held = runtime_.HeldPid("delete", id);
  agent_.reset();  // returns although the removal would hang for a minute
  EXPECT_TRUE(runtime_.Calls(id).empty()) << ::testing::PrintToString(runtime_.Calls(id));
  EXPECT_TRUE(testing::WaitUntil([&] { return !testing::ProcessAlive(held); }, seconds(30)));
}

TEST_P(AgentContainerWaitTest, ShutdownKillsARuntimeCommandThatHangsPastTheDrain) {
  const std::string id = ContainerId(tag_, kJob, "worker-0", 0);
  ASSERT_NO_FATAL_FAILURE(LaunchRunning(0));
  runtime_.Block("kill", id);
  // The agent goes away: its SIGKILL's kill hangs; the launcher lets it run for the drain
  // (300 ms here), then kills it. Were it waited for, it would finish (the fake gives up after
  // a minute) and be recorded.
  agent_.reset();
  EXPECT_EQ(Count(runtime_.Calls(id), "kill 9"), 0u)
      << ::testing::PrintToString(runtime_.Calls(id));
  if (runtime_.Held("kill", id)) {
    const pid_t held = runtime_.HeldPid("kill", id);
    EXPECT_TRUE(testing::WaitUntil([&] { return !testing::ProcessAlive(held); }, seconds(30)));
  }
}

// The start of an agent whose last run was SIGKILLed: the runtime (runc's list, docker's ps) lists
// the containers it left, beside another agent's of the same job, one a live restart handed over
// and one nothing of Cohort's. Only the first is removed.
TEST_P(AgentContainerWaitTest, TheStartSweepRemovesOnlyThisAgentsLeftovers) {
  const std::string left = ContainerId(tag_, kJob, "worker-0", 3);
  const std::string kept = ContainerId(tag_, kJob, "worker-1", 0);
  const std::string others = ContainerId("0badf00d", kJob, "worker-0", 3);
  for (const std::string& id : {left, kept, others, std::string("webserver")}) runtime_.Leave(id);
  OciOptions oci;
  oci.runtime = GetParam();
  oci.cache_dir = work_.path() + "/images";
  oci.container_tag = tag_;
  ProcessLauncher processes{CgroupManager()};
  auto next_start = OciLauncher::Create(oci, &processes);
  ASSERT_TRUE(next_start.ok()) << next_start.status().ToString();
  StatusOr<int> swept = (*next_start)->SweepLeftovers({kept});
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 1);
  EXPECT_EQ(runtime_.State(left), "");
  EXPECT_EQ(runtime_.Calls(left), std::vector<std::string>{"delete"});
  for (const std::string& id : {kept, others, std::string("webserver")}) {
    EXPECT_EQ(runtime_.State(id), "running") << id;
    EXPECT_TRUE(runtime_.Calls(id).empty()) << id;
  }
}

// The replica manager alone, its container launcher the OciLauncher over the fake runtime: an
// attempt stopped while its Prepare is held (here its leftover removal) ends at once, without
// starting; once that Prepare is done, the launcher forgets the runtime argv it kept for it.
TEST(ContainerPrepareTest, AnAttemptStoppedWhilePreparingLeavesNothingPrepared) {
  FakeRuntime runtime;
  testing::TempDir work;
  AgentConfig config;
  config.node_id = "node-a";
  config.work_dir = work.path();
  config.security.insecure = true;
  ManualClock clock;
  testing::SentMessages sent;
  Outbox outbox(clock, sent.Transmit());
  ProcessLauncher processes{CgroupManager()};
  std::vector<wire::ReplicaState> states;
  ReplicaManager manager(config, clock, outbox, std::make_unique<ProcessLauncher>(CgroupManager()),
                         [&](Attempt& a) { states.push_back(a.state); });
  OciOptions oci;
  oci.runtime = "runc";
  oci.cache_dir = work.path() + "/images";
  oci.shutdown_drain = milliseconds(300);
  oci.container_tag = AgentTag(work.path());
  auto created = OciLauncher::Create(oci, &processes);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  OciLauncher* containers = created->get();
  manager.SetContainerLauncher(std::move(*created));

  const std::string id = ContainerId(oci.container_tag, kJob, "worker-0", 0);
  runtime.Block("delete", id);
  wire::LaunchReplicaT launch = MakeLaunch(kJob, "worker-0", 0, "");
  launch.command = {"/bin/true"};
  launch.container = std::make_unique<wire::ContainerSpecT>();
  launch.container->image = runtime.image();
  manager.Launch(*testing::Built<wire::LaunchReplica>(launch));
  ASSERT_TRUE(testing::WaitUntil([&] { return runtime.Held("delete", id); }, seconds(30)));
  EXPECT_EQ(manager.StopAll(StopCause::kCoordinator, "test stop", milliseconds(5000)), 1);
  manager.StartPending();
  EXPECT_EQ(states.back(), wire::ReplicaState::STOPPED);
  EXPECT_EQ(manager.abandoned_count(), 1u);

  runtime.Release("delete", id);
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        manager.StartPending();
        return manager.abandoned_count() == 0;
      },
      seconds(30)));
  // The Prepare ran to its end (it kept an argv: the removal succeeded), and nothing is left.
  EXPECT_EQ(runtime.Calls(id), (std::vector<std::string>{"delete"}));
  EXPECT_EQ(containers->prepared_count(), 0u);
  EXPECT_EQ(runtime.State(id), "");
}

// RuntimeCommands alone, with shell commands.
class ContainerRuntimeCommandsTest : public ::testing::Test {
 protected:
  // A command that waits for `file` to exist (a minute at most), then appends `line` to out.
  std::vector<std::string> After(const std::string& file, const std::string& line) {
    return {"/bin/sh", "-c",
            "i=0; while [ ! -e '" + dir_.Join(file) + "' ] && [ $i -lt 3000 ]; do sleep 0.02; " +
                "i=$((i+1)); done; echo " + line + " >> '" + dir_.Join("out") + "'"};
  }
  std::vector<std::string> Lines() {
    std::vector<std::string> lines;
    std::istringstream in(ReadFile(dir_.Join("out")));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  testing::TempDir dir_;
};

TEST_F(ContainerRuntimeCommandsTest, ALaneRunsInOrderAndAWedgedOneHoldsNoOther) {
  RuntimeCommands commands(seconds(120));
  std::atomic<int> done_a{0}, done_b{0};
  ASSERT_TRUE(commands.Enqueue("a", After("go", "a1"), [&](const CapturedCommand&) { ++done_a; }));
  ASSERT_TRUE(commands.Enqueue("a", After("", "a2"), [&](const CapturedCommand&) { ++done_a; }));
  ASSERT_TRUE(commands.Enqueue("b", After("", "b1"), [&](const CapturedCommand& run) {
    EXPECT_EQ(run.exit_code, 0) << run.output;
    ++done_b;
  }));
  ASSERT_TRUE(testing::WaitUntil([&] { return done_b == 1; }, seconds(30)));
  EXPECT_EQ(Lines(), (std::vector<std::string>{"b1"}));
  EXPECT_EQ(done_a, 0);
  EXPECT_EQ(commands.pending(), 2u);
  WriteFile(dir_.Join("go"), "");
  ASSERT_TRUE(testing::WaitUntil([&] { return done_a == 2; }, seconds(30)));
  EXPECT_EQ(Lines(), (std::vector<std::string>{"b1", "a1", "a2"}));
  EXPECT_EQ(commands.pending(), 0u);
}

TEST_F(ContainerRuntimeCommandsTest, AnIdenticalWaitingCommandIsQueuedOnceUnlessAsked) {
  RuntimeCommands commands(seconds(120));
  std::atomic<int> done{0};
  auto count = [&](const CapturedCommand&) { ++done; };
  ASSERT_TRUE(commands.Enqueue("a", After("go", "first"), count));
  ASSERT_TRUE(commands.Enqueue("a", After("", "kill"), count));
  EXPECT_FALSE(commands.Enqueue("a", After("", "kill"), count));  // waits already
  EXPECT_TRUE(commands.Enqueue("a", After("", "kill"), count, /*coalesce=*/false));
  WriteFile(dir_.Join("go"), "");
  ASSERT_TRUE(testing::WaitUntil([&] { return done == 3; }, seconds(30)));
  EXPECT_EQ(Lines(), (std::vector<std::string>{"first", "kill", "kill"}));
}

// A process that holds a command's output open (here its own background child; in the agent a
// replica forked by the loop and held before its exec, or another command's spawner) does not
// hold its result: the command's exit ends it.
TEST_F(ContainerRuntimeCommandsTest, ACommandEndsAtItsExitThoughAnotherProcessHoldsItsOutput) {
  RuntimeCommands commands(seconds(120));
  std::atomic<bool> done{false};
  CapturedCommand result;
  ASSERT_TRUE(commands.Enqueue(
      "a", {"/bin/sh", "-c", "sleep 1000 & echo $! > '" + dir_.Join("bg") + "'; echo hi; exit 4"},
      [&](const CapturedCommand& run) {
        result = run;
        done = true;
      }));
  const bool ended = testing::WaitUntil([&] { return done.load(); }, seconds(30));
  const pid_t background = std::atoi(ReadFile(dir_.Join("bg")).c_str());
  ASSERT_GT(background, 0);
  ::kill(background, SIGKILL);  // which ends the command's output, should it be waited for
  ASSERT_TRUE(ended) << "the result waited for the background process";
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_EQ(result.output, "hi\n");
  EXPECT_FALSE(result.timed_out);
}

TEST_F(ContainerRuntimeCommandsTest, ACommandPastItsTimeoutIsKilledAndSaysSo) {
  RuntimeCommands commands(milliseconds(200));
  std::atomic<bool> done{false};
  CapturedCommand result;
  ASSERT_TRUE(commands.Enqueue("a", After("never", "late"), [&](const CapturedCommand& run) {
    result = run;
    done = true;
  }));
  ASSERT_TRUE(testing::WaitUntil([&] { return done.load(); }, seconds(30)));
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  EXPECT_TRUE(Lines().empty());
}

TEST_F(ContainerRuntimeCommandsTest, ShutdownKillsWhatRunsPastTheDrainAndDropsTheRest) {
  RuntimeCommands commands(seconds(120));
  std::vector<CapturedCommand> results;
  std::mutex mu;
  auto keep = [&](const CapturedCommand& run) {
    std::lock_guard<std::mutex> lock(mu);
    results.push_back(run);
  };
  ASSERT_TRUE(commands.Enqueue("a", After("go", "wedged"), keep));
  ASSERT_TRUE(commands.Enqueue("a", After("", "queued"), keep));
  ASSERT_TRUE(commands.Enqueue("b", After("", "quick"), keep));
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return results.size() == 1;
      },
      seconds(30)));
  // Returns although the wedged command would wait a minute for its go-file.
  commands.Shutdown(milliseconds(100));
  EXPECT_EQ(Lines(), (std::vector<std::string>{"quick"}));
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].exit_code, 0);  // quick, before the shutdown
  EXPECT_TRUE(results[1].cancelled);   // the wedged one, killed
  EXPECT_TRUE(results[2].cancelled);   // never started
  EXPECT_EQ(results[2].output, "not run: the agent is shutting down");
  EXPECT_FALSE(commands.Enqueue("a", After("", "late"), keep));
  EXPECT_EQ(commands.pending(), 0u);
}

}  // namespace
}  // namespace cohort::agent
