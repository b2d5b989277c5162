// The agent loop never opens or reads a replica's flight recorder, which lies wherever the job's
// env points COHORT_FLIGHT_RECORDER (NFS, a FUSE mount: storage whose hung server blocks open and
// page faults forever): each attempt's FlightRecorderPoller does, on a thread of its own
// (agent/flight_recorder_poller.h). A real replica process and a real recorder file (written by
// this test, standing in for the replica's collectives); the readings of the file are held by
// the readers' test seam, standing in for the hung mount that is not available here.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "agent/replica_env.h"
#include "common/flight_recorder.h"
#include "tests/agent/agent_loop_fixture.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

using std::chrono::milliseconds;

class AgentFlightRecorderWaitTest : public AgentLoopTest {
 protected:
  // job/worker-0, whose COHORT_FLIGHT_RECORDER is `recorder_path_`; it runs `first`, then until
  // `done_` exists.
  wire::LaunchReplicaT LaunchWorker(const std::string& first = "true") {
    auto launch = MakeLaunch("job", "worker-0", 0,
                             first + "; while [ ! -e '" + done_ + "' ]; do sleep 0.02; done");
    auto kv = std::make_unique<wire::KeyValueT>();
    kv->key = kFlightRecorderEnv;
    kv->value = recorder_path_;
    launch.env.push_back(std::move(kv));
    return launch;
  }
  // The same with COHORT_FLIGHT_RECORDER set to `value`.
  wire::LaunchReplicaT LaunchWorkerWithRecorder(const std::string& value) {
    auto launch = LaunchWorker();
    launch.env.back()->value = value;
    return launch;
  }
  // Creates the replica's recorder at `path` (as its collectives would), with one communicator.
  void CreateRecorder(const std::string& path) {
    auto created = FlightRecorder::CreateFile(path, 64, 0, 1);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    recorder_ = std::move(*created);
    comm_ = recorder_->RegisterCommunicator();
  }
  // Pumps until the worker's progress shows its recorder with operation `completed` completed
  // and `current` entered.
  bool PumpUntilRecorderShows(int64_t completed, int64_t current) {
    return Pump(
        [&] {
          const wire::ReplicaProgressT* p = Progress();
          return p != nullptr && p->has_recorder && p->completed_seq == completed &&
                 p->current_seq == current;
        },
        milliseconds(10));
  }
  // Completes the allreduce entered (if any) and enters the next.
  void Step() {
    if (entered_) recorder_->End(*entered_, current_, Status::Ok());
    current_ = FlightRecord();
    current_.op_seq = next_seq_++;
    current_.comm_id = comm_;
    current_.op = FlightOp::kAllreduce;
    current_.bytes = 1 << 20;
    entered_ = recorder_->Begin(current_);
  }
  // The worker's newest progress; null before any.
  const wire::ReplicaProgressT* Progress() const { return coordinator_->LatestProgress(key_); }

  testing::TempDir storage_;  // where the job's env points the recorder
  const std::string recorder_path_ = storage_.path() + "/flight-recorder";
  const std::string done_ = storage_.path() + "/done";
  const std::string key_ = LogKey("job", "worker-0", 0);
  std::unique_ptr<FlightRecorder> recorder_;
  uint32_t comm_ = 0;
  uint32_t next_seq_ = 0;
  FlightRecord current_;
  std::optional<uint64_t> entered_;
};

TEST_F(AgentFlightRecorderWaitTest, HeartbeatsAndOtherLaunchesGoOnWhileTheRecorderHangs) {
  testing::HeldReads held(recorder_path_);
  coordinator_->Launch("node-a", LaunchWorker());
  // Its first snapshot hangs: heartbeats report it running, with no recorder seen.
  ASSERT_TRUE(Pump(
      [&] {
        auto latest = coordinator_->Latest(key_);
        return held.entered() >= 1 && latest && latest->state == wire::ReplicaState::RUNNING &&
               Progress() != nullptr;
      },
      milliseconds(10)));
  // The replica's collectives set their recorder up (after its launch: a file older than the
  // attempt is an earlier attempt's, never read).
  ASSERT_NO_FATAL_FAILURE(CreateRecorder(recorder_path_));
  Step();
  Step();  // 0 completed; in 1
  // Heartbeats every 100 ms of the agent's clock here, which moves 10 ms a step; each reports
  // the worker's progress, without its recorder (no reading of it returned).
  const int heartbeats = coordinator_->heartbeats;
  ASSERT_TRUE(Pump([&] { return coordinator_->heartbeats >= heartbeats + 5; }, milliseconds(10)));
  EXPECT_TRUE(agent_->registered());
  EXPECT_FALSE(Progress()->has_recorder);
  EXPECT_EQ(held.entered(), 1);  // one reading held; no other begun behind it
  // Another replica launches, runs and is reported meanwhile.
  ASSERT_NO_FATAL_FAILURE(ExpectAnotherReplicaRuns());
  EXPECT_EQ(coordinator_->Latest(key_)->state, wire::ReplicaState::RUNNING);

  // Let go: the recorder is seen, and the operations completed later too.
  held.Release();
  ASSERT_TRUE(PumpUntilRecorderShows(0, 1));
  Step();  // 1 completed; in 2
  ASSERT_TRUE(PumpUntilRecorderShows(1, 2));
  testing::WriteFile(done_, "");
  ASSERT_TRUE(PumpUntilDone(key_));
  EXPECT_EQ(coordinator_->Final(key_)->state, wire::ReplicaState::SUCCEEDED);
}

// A relative COHORT_FLIGHT_RECORDER is the replica's path, from its working directory (where its
// collectives create the file), not one from the agent's own.
TEST_F(AgentFlightRecorderWaitTest, ARelativeRecorderPathIsReadFromTheReplicasWorkingDirectory) {
  coordinator_->Launch("node-a", LaunchWorkerWithRecorder("rank-recorder"));
  ASSERT_TRUE(Pump(
      [&] {
        auto latest = coordinator_->Latest(key_);
        return latest && latest->state == wire::ReplicaState::RUNNING && Progress() != nullptr;
      },
      milliseconds(10)));
  ASSERT_NO_FATAL_FAILURE(
      CreateRecorder(AttemptWorkingDir(work_.path(), "job", "worker-0", 0) + "/rank-recorder"));
  Step();
  Step();  // 0 completed; in 1
  ASSERT_TRUE(PumpUntilRecorderShows(0, 1));
  testing::WriteFile(done_, "");
  ASSERT_TRUE(PumpUntilDone(key_));
}

// A replica's code may empty its own recorder file (truncate it, write over it) while the agent
// reads it: the agent's readings never fault on it (a mapping of a file that shrank would SIGBUS
// the whole agent), its heartbeats go on, and the replica's rank keeps its last known operation.
TEST_F(AgentFlightRecorderWaitTest, AReplicaThatEmptiesItsRecorderFileDoesNotTakeTheAgentDown) {
  const std::string go = storage_.path() + "/go", emptied = storage_.path() + "/emptied";
  coordinator_->Launch(
      "node-a", LaunchWorker("while [ ! -e '" + go + "' ]; do sleep 0.02; done; : > \"$" +
                             std::string(kFlightRecorderEnv) + "\"; touch '" + emptied + "'"));
  ASSERT_TRUE(Pump(
      [&] {
        auto latest = coordinator_->Latest(key_);
        return latest && latest->state == wire::ReplicaState::RUNNING && Progress() != nullptr;
      },
      milliseconds(10)));
  ASSERT_NO_FATAL_FAILURE(CreateRecorder(recorder_path_));
  Step();
  Step();  // 0 completed; in 1
  ASSERT_TRUE(PumpUntilRecorderShows(0, 1));
  testing::WriteFile(go, "");
  ASSERT_TRUE(Pump([&] { return testing::FileExists(emptied); }, milliseconds(10)));
  const int heartbeats = coordinator_->heartbeats;
  ASSERT_TRUE(Pump([&] { return coordinator_->heartbeats >= heartbeats + 5; }, milliseconds(10)));
  EXPECT_TRUE(agent_->registered());
  ASSERT_NE(Progress(), nullptr);
  EXPECT_TRUE(Progress()->has_recorder);
  EXPECT_EQ(Progress()->completed_seq, 0);
  EXPECT_EQ(Progress()->current_seq, 1);
  testing::WriteFile(done_, "");
  ASSERT_TRUE(PumpUntilDone(key_));
  EXPECT_EQ(coordinator_->Final(key_)->state, wire::ReplicaState::SUCCEEDED);
}

// "off" turns the recorder off: there is no file to read, and none named "off" is looked for.
TEST_F(AgentFlightRecorderWaitTest, OffMeansNoRecorderToRead) {
  // A reading of a file "off" (where a relative path would lie) would be held, and counted.
  testing::HeldReads held(AttemptWorkingDir(work_.path(), "job", "worker-0", 0) + "/off");
  coordinator_->Launch("node-a", LaunchWorkerWithRecorder(kFlightRecorderOff));
  const int heartbeats = coordinator_->heartbeats;
  ASSERT_TRUE(
      Pump([&] { return Progress() != nullptr && coordinator_->heartbeats >= heartbeats + 5; },
           milliseconds(10)));
  EXPECT_FALSE(Progress()->has_recorder);
  EXPECT_EQ(held.entered(), 0);
  testing::WriteFile(done_, "");
  ASSERT_TRUE(PumpUntilDone(key_));
}

}  // namespace
}  // namespace cohort::agent
