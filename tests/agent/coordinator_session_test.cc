// CoordinatorSession without sockets: what it sends is recorded (tests/agent/test_util.h), its
// time is a ManualClock the tests step.
#include "agent/coordinator_session.h"

#include <gtest/gtest.h>

#include "agent/agent.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

using std::chrono::milliseconds;

using testing::Built;

Built<wire::RegisterAgentReply> RegisterReply(int heartbeat_interval_ms) {
  wire::RegisterAgentReplyT reply;
  reply.heartbeat_interval_ms = heartbeat_interval_ms;
  return Built<wire::RegisterAgentReply>(reply);
}

Built<wire::HeartbeatReply> HeartbeatReply(bool known) {
  wire::HeartbeatReplyT reply;
  reply.known = known;
  return Built<wire::HeartbeatReply>(reply);
}

class CoordinatorSessionTest : public ::testing::Test {
 protected:
  CoordinatorSessionTest() {
    config_.node_id = "node-a";
    config_.coordinator = "tcp://127.0.0.1:1";
    config_.resend_interval = milliseconds(100);
    config_.max_register_interval = milliseconds(350);
    config_.coordinator_timeout = milliseconds(2000);
  }
  // RegisterAgent messages sent so far.
  int Registrations() const {
    int n = 0;
    for (const auto& [id, body] : sent_.messages) n += body.AsRegisterAgent() != nullptr;
    return n;
  }
  // Registers and answers the registration (heartbeat interval 500 ms).
  void Register() {
    ASSERT_TRUE(session_.RegisterDue());
    CoordinatorSession::ReplicaReport report;
    report.versions["job\nchief-0\n0"] = 3;
    session_.Register(std::move(report));
    auto acked = session_.OnRegistered(sent_.last_id(), *RegisterReply(500));
    ASSERT_TRUE(acked.has_value());
    EXPECT_EQ(acked->at("job\nchief-0\n0"), 3u);
    ASSERT_TRUE(session_.registered());
  }

  AgentConfig config_;
  ManualClock clock_;
  testing::SentMessages sent_;
  Outbox outbox_{clock_, sent_.Transmit()};
  CoordinatorSession session_{config_, clock_, outbox_, sent_.Transmit()};
};

TEST_F(CoordinatorSessionTest, RegisteringBacksOffUntilAnswered) {
  EXPECT_FALSE(session_.registered());
  ASSERT_TRUE(session_.RegisterDue());
  session_.Register({});
  const wire::RegisterAgentT* reg = sent_.messages.back().second.AsRegisterAgent();
  ASSERT_NE(reg, nullptr);
  EXPECT_EQ(reg->node_id, "node-a");
  // 100, 200, then the cap of 350 ms between attempts.
  for (int wait : {100, 200, 350, 350}) {
    clock_.Advance(milliseconds(wait - 1));
    EXPECT_FALSE(session_.RegisterDue()) << wait;
    clock_.Advance(milliseconds(1));
    ASSERT_TRUE(session_.RegisterDue()) << wait;
    session_.Register({});
  }
  EXPECT_EQ(Registrations(), 5);
  // An answer to any outstanding registration registers; later answers are late duplicates.
  uint64_t last = sent_.last_id();
  ASSERT_TRUE(session_.OnRegistered(last - 2, *RegisterReply(0)).has_value());
  EXPECT_TRUE(session_.registered());
  EXPECT_FALSE(session_.OnRegistered(last, *RegisterReply(0)).has_value());
  EXPECT_FALSE(session_.RegisterDue());
}

// Why a live restart was undone rides on every registration until one is answered, then on none.
TEST_F(CoordinatorSessionTest, AnUndoneLiveRestartIsToldUntilARegistrationIsAnswered) {
  session_.TellLiveRestartUndone("cohort-agent 0.9.2 failed its start: a port is taken");
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(session_.RegisterDue());
    session_.Register({});
    const wire::RegisterAgentT* reg = sent_.messages.back().second.AsRegisterAgent();
    ASSERT_NE(reg, nullptr);
    EXPECT_EQ(reg->live_restart_undone, "cohort-agent 0.9.2 failed its start: a port is taken");
    clock_.Advance(milliseconds(350));
  }
  ASSERT_TRUE(session_.OnRegistered(sent_.last_id(), *RegisterReply(500)).has_value());
  session_.Unregister();  // the coordinator forgot this node: it registers again
  clock_.Advance(milliseconds(350));
  ASSERT_TRUE(session_.RegisterDue());
  session_.Register({});
  const wire::RegisterAgentT* reg = sent_.messages.back().second.AsRegisterAgent();
  ASSERT_NE(reg, nullptr);
  EXPECT_EQ(reg->live_restart_undone, "");
}

TEST_F(CoordinatorSessionTest, ARefusedRegistrationIsRetriedAfterItsBackoff) {
  ASSERT_TRUE(session_.RegisterDue());
  session_.Register({});
  EXPECT_TRUE(session_.OnRefused(sent_.last_id(), Unavailable("busy")));
  EXPECT_FALSE(session_.OnRefused(sent_.last_id() + 1, Unavailable("not a registration")));
  EXPECT_FALSE(session_.RegisterDue());
  clock_.Advance(milliseconds(100));
  EXPECT_TRUE(session_.RegisterDue());
}

TEST_F(CoordinatorSessionTest, HeartbeatsFollowTheIntervalTheReplyGave) {
  Register();
  EXPECT_FALSE(session_.HeartbeatDue());
  clock_.Advance(milliseconds(499));
  EXPECT_FALSE(session_.HeartbeatDue());
  clock_.Advance(milliseconds(1));
  ASSERT_TRUE(session_.HeartbeatDue());
  auto progress = std::make_unique<wire::ReplicaProgressT>();
  progress->job = "job";
  std::vector<std::unique_ptr<wire::ReplicaProgressT>> all;
  all.push_back(std::move(progress));
  session_.SendHeartbeat(true, std::move(all));
  const wire::HeartbeatT* heartbeat = sent_.messages.back().second.AsHeartbeat();
  ASSERT_NE(heartbeat, nullptr);
  EXPECT_TRUE(heartbeat->draining);
  ASSERT_EQ(heartbeat->progress.size(), 1u);
  EXPECT_EQ(heartbeat->progress[0]->job, "job");
  EXPECT_FALSE(session_.HeartbeatDue());
}

// Both messages name the GPUs NVML finds unfit, of those this node offers only; a resample after
// a failure counts as the health verdict still being taken.
TEST_F(CoordinatorSessionTest, BothMessagesCarryTheGpusFoundUnfit) {
  config_.inventory.gpus = {GpuDevice{0, "H100", 81559, "GPU-0", -1, {}, {}},
                            GpuDevice{1, "H100", 81559, "GPU-1", -1, {}, {}}};
  GpuHealth health;
  health.unhealthy = {{1, "a row remapping is pending (it needs a reset)"}, {5, "not offered"}};
  ASSERT_TRUE(session_.RegisterDue());
  session_.Register({}, health);
  const wire::RegisterAgentT* reg = sent_.messages.back().second.AsRegisterAgent();
  ASSERT_NE(reg, nullptr);
  ASSERT_EQ(reg->unhealthy_gpus.size(), 1u);
  EXPECT_EQ(reg->unhealthy_gpus[0]->index, 1);
  EXPECT_EQ(reg->unhealthy_gpus[0]->reason, "a row remapping is pending (it needs a reset)");
  ASSERT_TRUE(session_.OnRegistered(sent_.last_id(), *RegisterReply(500)).has_value());

  health.resampling = true;
  session_.SendHeartbeat(false, {}, health);
  const wire::HeartbeatT* heartbeat = sent_.messages.back().second.AsHeartbeat();
  ASSERT_NE(heartbeat, nullptr);
  EXPECT_TRUE(heartbeat->health_rechecking);
  ASSERT_EQ(heartbeat->unhealthy_gpus.size(), 1u);
  EXPECT_EQ(heartbeat->unhealthy_gpus[0]->index, 1);
  clock_.Advance(milliseconds(500));
  session_.SendHeartbeat(false, {}, GpuHealth{});
  heartbeat = sent_.messages.back().second.AsHeartbeat();
  ASSERT_NE(heartbeat, nullptr);
  EXPECT_FALSE(heartbeat->health_rechecking);
  EXPECT_TRUE(heartbeat->unhealthy_gpus.empty());
}

TEST_F(CoordinatorSessionTest, AForgottenNodeOrASilentCoordinatorRegistersAgain) {
  Register();
  session_.OnHeartbeatReply(*HeartbeatReply(true));
  EXPECT_TRUE(session_.registered());
  session_.OnHeartbeatReply(*HeartbeatReply(false));
  EXPECT_FALSE(session_.registered());
  EXPECT_TRUE(session_.RegisterDue());

  Register();
  clock_.Advance(milliseconds(1500));
  session_.Heard();
  clock_.Advance(milliseconds(2000));
  EXPECT_FALSE(session_.RegisterDue());  // 2000 ms since it was heard: not past the timeout
  EXPECT_TRUE(session_.registered());
  clock_.Advance(milliseconds(1));
  EXPECT_TRUE(session_.RegisterDue());
  EXPECT_FALSE(session_.registered());
}

TEST_F(CoordinatorSessionTest, AfterUnregisterTheNextRegistrationWaitsForTheLastBackoff) {
  Register();  // its RegisterAgent went out now, with a backoff of 100 ms
  session_.Unregister();
  EXPECT_FALSE(session_.registered());
  EXPECT_FALSE(session_.RegisterDue());
  clock_.Advance(milliseconds(100));
  EXPECT_TRUE(session_.RegisterDue());
}

}  // namespace
}  // namespace cohort::agent
