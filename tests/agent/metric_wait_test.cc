// The agent loop never stats or reads a replica's $CLOUD_ML_HP_METRIC_FILE, which lies on the
// job's output storage (an NFS export whose hung server blocks stat and read forever): each
// attempt's MetricFileReader does, on a thread of its own (agent/metric_file_reader.h). Real
// replica processes and files; the reads of one metric file are held by the reader's test seam,
// standing in for the hung mount that is not available here.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "tests/agent/agent_loop_fixture.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

using std::chrono::milliseconds;
using testing::ReadFile;

class AgentMetricFileWaitTest : public AgentLoopTest {
 protected:
  // trial7/chief-0, a tuning trial's chief: it writes three measurements to `file_`, then waits
  // for `file_`.done to exist.
  wire::LaunchReplicaT LaunchChief() {
    auto launch = MakeLaunch(
        "trial7", "chief-0", 0,
        "for s in 1 2 3; do printf '{\"accuracy\":\"0.%s\",\"global_step\":\"%s\","
        "\"timestamp\":%s.5,\"trial\":\"7\"}\\n' $s $s $s >> \"$CLOUD_ML_HP_METRIC_FILE\"; done; "
        "while [ ! -e \"$CLOUD_ML_HP_METRIC_FILE.done\" ]; do sleep 0.02; done");
    for (auto [k, v] : {std::pair<std::string, std::string>{"CLOUD_ML_HP_METRIC_FILE", file_},
                        {"CLOUD_ML_TRIAL_ID", "7"}}) {
      auto kv = std::make_unique<wire::KeyValueT>();
      kv->key = k;
      kv->value = v;
      launch.env.push_back(std::move(kv));
    }
    return launch;
  }
  size_t Lines() const {
    std::string text = ReadFile(file_);
    return std::count(text.begin(), text.end(), '\n');
  }
  // The metric_idle_ms of the chief's newest heartbeat; -1 before any.
  int64_t MetricIdle() const {
    const wire::ReplicaProgressT* p = coordinator_->LatestProgress(LogKey("trial7", "chief-0", 0));
    return p == nullptr ? -1 : p->metric_idle_ms;
  }

  testing::TempDir output_;  // the job's output storage
  const std::string file_ = output_.path() + "/hp_metrics.jsonl";
};

TEST_F(AgentMetricFileWaitTest, HeartbeatsAndOtherLaunchesGoOnWhileTheMetricFileHangs) {
  testing::HeldReads held(file_);
  const std::string key = LogKey("trial7", "chief-0", 0);
  coordinator_->Launch("node-a", LaunchChief());
  // Its three lines are written; the reads of its file hang (the forwarder's and the probe's).
  ASSERT_TRUE(Pump(
      [&] {
        auto latest = coordinator_->Latest(key);
        return held.entered() >= 1 && latest && latest->state == wire::ReplicaState::RUNNING &&
               Lines() == 3 && MetricIdle() >= 0;
      },
      milliseconds(10)));
  // Heartbeats every 100 ms of the agent's clock here, which moves 10 ms a step; each reports the
  // chief's progress, its metric file not grown (no read of it returned).
  const int heartbeats = coordinator_->heartbeats;
  const int64_t idle_before = MetricIdle();
  ASSERT_TRUE(Pump([&] { return coordinator_->heartbeats >= heartbeats + 5; }, milliseconds(10)));
  EXPECT_TRUE(agent_->registered());
  ASSERT_TRUE(Pump([&] { return MetricIdle() >= idle_before + 400; }, milliseconds(10)));
  // Another replica launches, runs and is reported meanwhile.
  ASSERT_NO_FATAL_FAILURE(ExpectAnotherReplicaRuns());
  EXPECT_TRUE(coordinator_->measurements.empty());
  EXPECT_EQ(coordinator_->Latest(key)->state, wire::ReplicaState::RUNNING);
  const int64_t idle_held = MetricIdle();

  // Let go: the three measurements arrive in order, and the file's growth is seen.
  held.Release();
  ASSERT_TRUE(
      Pump([&] { return coordinator_->measurements.size() >= 3 && MetricIdle() < idle_held; },
           milliseconds(10)));
  // The chief ends: the last read finds nothing new; every measurement went exactly once.
  testing::WriteFile(file_ + ".done", "");
  ASSERT_TRUE(PumpUntilDone(key));
  EXPECT_EQ(coordinator_->Final(key)->state, wire::ReplicaState::SUCCEEDED);
  ASSERT_TRUE(Pump([&] { return agent_->attempt_count() == 0; }, milliseconds(10)));
  ExpectTrial7Measurements(3);
}

}  // namespace
}  // namespace cohort::agent
