// The agent's control loop against a fake coordinator: a real ROUTER socket on
// tcp://127.0.0.1:<port> in this test, real replica processes, real log files. The agent's time
// is a ManualClock that the tests step: its timers (heartbeats, resends, the coordinator
// timeout, stop deadlines, preemption) fire when a test moves the clock, never on their own.
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "agent/agent.h"
#include "agent/process_launcher.h"
#include "agent/replica_env.h"
#include "common/checkpoint.h"
#include "coordinator/launch_plan.h"
#include "tests/agent/agent_loop_fixture.h"
#include "tests/agent/test_util.h"
#include "tests/testing/hostile_values.h"

namespace cohort::agent {
namespace {

using std::chrono::milliseconds;
using testing::GroupAlive;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitUntil;

TEST_F(AgentLoopTest, RegistersWithItsInventory) {
  ASSERT_FALSE(coordinator_->registrations.empty());
  const auto& reg = *coordinator_->registrations.front();
  EXPECT_EQ(reg.node_id, "node-a");
  EXPECT_EQ(reg.address, "127.0.0.1");
  ASSERT_EQ(reg.gpus.size(), 2u);
  EXPECT_EQ(reg.gpus[1]->index, 1);
  EXPECT_EQ(reg.gpus[1]->model, "declared");
  EXPECT_EQ(reg.cpus, 4);
  EXPECT_EQ(reg.memory_mb, 1024);
  EXPECT_TRUE(reg.replicas.empty());
  // One heartbeat per interval of the agent's clock (100 ms here), none while it stands still.
  Pump([] { return false; }, milliseconds(0), milliseconds(100));
  EXPECT_EQ(coordinator_->heartbeats, 0);
  EXPECT_TRUE(Pump([&] { return coordinator_->heartbeats >= 2; }, milliseconds(100)));
}

TEST_F(AgentLoopTest, ItsRoutingIdIsItsNodeIdAndBitsNoOtherPeerKnows) {
  const std::string& id = coordinator_->PeerOf("node-a");
  ASSERT_EQ(id.rfind("node-a/", 0), 0u) << id;
  EXPECT_EQ(id.size(), std::string("node-a/").size() + 16) << id;
  // Another agent of the same node (a restart) gets other bits.
  TempDir other_dir;
  AgentConfig config;
  config.coordinator = endpoint_;
  config.node_id = "node-a";
  config.work_dir = other_dir.path();
  config.security.insecure = true;
  auto other =
      Agent::Create(context_, config, std::make_unique<ProcessLauncher>(Cgroups()), &clock_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  size_t before = coordinator_->registrations.size();
  ASSERT_TRUE(Pump([&] {
    EXPECT_TRUE((*other)->RunOnce(milliseconds(1)).ok());
    return coordinator_->registrations.size() > before;
  }));
  EXPECT_NE(coordinator_->PeerOf("node-a"), id);
  EXPECT_EQ(coordinator_->PeerOf("node-a").rfind("node-a/", 0), 0u);
}

TEST_F(AgentLoopTest, SilentCoordinatorMakesTheAgentRegisterAgain) {
  coordinator_->ignore_heartbeats = true;
  size_t before = coordinator_->registrations.size();
  // coordinator_timeout is 1 s in this fixture: not yet after 900 ms of silence.
  Elapse(milliseconds(900));
  EXPECT_EQ(coordinator_->registrations.size(), before);
  ASSERT_TRUE(Pump([&] { return coordinator_->registrations.size() > before; }, milliseconds(10)));
  EXPECT_TRUE(Pump([&] { return agent_->registered(); }));
}

// Without a fence a silent coordinator changes nothing for the replicas. With one (handed at
// registration), a silence past it has every replica stopped, with the stop grace, and the
// attempt is reported STOPPED, saying why, once the coordinator hears from the node again.
TEST_F(AgentLoopTest, ACoordinatorSilentPastItsFenceAfterHasEveryReplicaStopped) {
  coordinator_->Launch("node-a", MakeLaunch("fence", "chief-0", 0,
                                            "trap 'echo got-term; exit 0' TERM; echo up; "
                                            "while :; do sleep 0.05; done"));
  const std::string key = LogKey("fence", "chief-0", 0);
  ASSERT_TRUE(Pump([&] { return coordinator_->SawState(key, wire::ReplicaState::RUNNING); }));
  const pid_t pgid = coordinator_->Latest(key)->pid;
  coordinator_->silent = true;
  Elapse(milliseconds(3000));
  EXPECT_TRUE(GroupAlive(pgid));  // no fence: it runs on

  coordinator_->fence_after_ms = 1500;
  coordinator_->fence_grace_ms = 2000;
  coordinator_->silent = false;
  ASSERT_TRUE(Pump([&] { return agent_->registered(); }, milliseconds(10)));
  coordinator_->silent = true;
  Elapse(milliseconds(1400));
  EXPECT_TRUE(GroupAlive(pgid));
  // SIGTERM at 1.5 s: the trap ends it well within the grace.
  ASSERT_TRUE(Pump([&] { return !GroupAlive(pgid); }, milliseconds(10)));
  coordinator_->silent = false;  // heard again: the agent registers (after its backoff)
  ASSERT_TRUE(Pump([&] { return coordinator_->Final(key) && coordinator_->log_eof.count(key); },
                   milliseconds(10)));
  const auto final = *coordinator_->Final(key);
  EXPECT_EQ(final.state, wire::ReplicaState::STOPPED);
  EXPECT_NE(final.message.find("fenced: no word from the coordinator for its --fence-after "
                               "(1500ms); it may have declared this node lost"),
            std::string::npos)
      << final.message;
  EXPECT_TRUE(LogHas(key, "got-term"));
}

// A coordinator that answers this node only with refusals of its key has declared it lost: the
// refusals do not hold off the fence.
TEST_F(AgentLoopTest, RefusalsOfItsKeyDoNotHoldOffTheFence) {
  coordinator_->fence_after_ms = 1000;
  coordinator_->fence_grace_ms = 500;
  coordinator_->known_nodes.clear();  // the next heartbeat's reply has it register again
  const size_t before = coordinator_->registrations.size();
  ASSERT_TRUE(Pump([&] { return coordinator_->registrations.size() > before; }, milliseconds(10)));
  ASSERT_TRUE(Pump([&] { return agent_->registered(); }, milliseconds(10)));
  coordinator_->Launch("node-a", MakeLaunch("keyless", "chief-0", 0, "sleep 1000"));
  const std::string key = LogKey("keyless", "chief-0", 0);
  ASSERT_TRUE(Pump([&] { return coordinator_->SawState(key, wire::ReplicaState::RUNNING); }));
  const pid_t pgid = coordinator_->Latest(key)->pid;
  coordinator_->refuse_everything = Unauthenticated("the key of 'node-a' is not listed");
  Elapse(milliseconds(800));
  EXPECT_TRUE(GroupAlive(pgid));
  EXPECT_TRUE(Pump([&] { return !GroupAlive(pgid); }, milliseconds(10)));
}

TEST_F(AgentLoopTest, UpdateRefusedForAnUnknownNodeMakesTheAgentRegisterAgain) {
  // The coordinator forgot the node, and no heartbeat reply tells the agent so.
  coordinator_->ignore_heartbeats = true;
  coordinator_->known_nodes.clear();
  size_t before = coordinator_->registrations.size();
  coordinator_->Launch("node-a", MakeLaunch("job10", "chief-0", 0, "sleep 0.2"));
  std::string key = LogKey("job10", "chief-0", 0);
  ASSERT_TRUE(Pump([&] { return coordinator_->rejected_updates > 0; }));
  int64_t refused_at = clock_.NowMs();
  ASSERT_TRUE(Pump([&] { return coordinator_->registrations.size() > before; }, milliseconds(10)));
  EXPECT_LT(clock_.NowMs() - refused_at, 900);  // sooner than the 1 s silence timeout
  coordinator_->ignore_heartbeats = false;
  ASSERT_TRUE(PumpUntilDone(key));
  EXPECT_EQ(coordinator_->Final(key)->state, wire::ReplicaState::SUCCEEDED);
}

TEST_F(AgentLoopTest, UpdatesRefusedForNowAreResentUntilTaken) {
  for (StatusCode code : {StatusCode::kResourceExhausted, StatusCode::kUnavailable}) {
    SCOPED_TRACE(static_cast<int>(code));
    // The coordinator cannot store anything (its disk is full): every update is refused.
    coordinator_->refusal = Status(code, "the coordinator could not store its state");
    coordinator_->refuse_updates = 1000;
    size_t registrations = coordinator_->registrations.size();
    std::string job = code == StatusCode::kUnavailable ? "job12" : "job11";
    std::string key = LogKey(job, "chief-0", 0);
    coordinator_->Launch("node-a", MakeLaunch(job, "chief-0", 0, "exit 3"));
    ASSERT_TRUE(Pump([&] { return coordinator_->rejected_updates >= 1; }));
    // Refused, not lost: the agent resends every resend interval (200 ms) and keeps the attempt.
    int refused = coordinator_->rejected_updates;
    Elapse(milliseconds(1000));
    EXPECT_TRUE(Pump([&] { return coordinator_->rejected_updates >= refused + 3; }));
    EXPECT_FALSE(coordinator_->Latest(key).has_value());
    EXPECT_EQ(agent_->attempt_count(), 1u);
    // Room again: the next resend is taken, with the final state; no registration was needed.
    coordinator_->refuse_updates = 0;
    coordinator_->rejected_updates = 0;
    ASSERT_TRUE(Pump([&] { return coordinator_->Final(key).has_value(); }, milliseconds(10)));
    EXPECT_EQ(coordinator_->Final(key)->state, wire::ReplicaState::FAILED);
    EXPECT_EQ(coordinator_->Final(key)->exit_code, 3);
    EXPECT_EQ(coordinator_->registrations.size(), registrations);
    EXPECT_TRUE(Pump([&] { return agent_->attempt_count() == 0; }, milliseconds(10)));
  }
}

TEST_F(AgentLoopTest, ReplicaSeesItsEnvironmentAndItsLogIsShipped) {
  auto launch = MakeLaunch("job1", "worker-0", 1,
                           "echo \"CVD=$CUDA_VISIBLE_DEVICES NVD=$NVIDIA_VISIBLE_DEVICES "
                           "RC=$COHORT_RESTART_COUNT RESTORE=[$COHORT_RESTORE_CHECKPOINT] "
                           "MINE=$MY_VAR\"; pwd; echo oops >&2");
  auto kv = std::make_unique<wire::KeyValueT>();
  kv->key = "MY_VAR";
  kv->value = "hello";
  launch.env.push_back(std::move(kv));
  launch.gpus = {1, 0};
  coordinator_->Launch("node-a", std::move(launch));
  std::string key = LogKey("job1", "worker-0", 1);
  ASSERT_TRUE(PumpUntilDone(key));
  auto final = *coordinator_->Final(key);
  EXPECT_EQ(final.state, wire::ReplicaState::SUCCEEDED);
  EXPECT_EQ(final.exit_code, 0);
  EXPECT_TRUE(coordinator_->SawState(key, wire::ReplicaState::RUNNING));
  const std::string& log = coordinator_->logs[key];
  EXPECT_NE(log.find("CVD=1,0 NVD=1,0 RC=1 RESTORE=[] MINE=hello"), std::string::npos) << log;
  EXPECT_NE(log.find(work_.path() + "/job1/worker-0/attempt-1\n"), std::string::npos) << log;
  EXPECT_NE(log.find("oops"), std::string::npos);
  EXPECT_EQ(log, ReadFile(AttemptLogPath(work_.path(), "job1", "worker-0", 1)));
  // Acked and fully shipped: forgotten.
  EXPECT_TRUE(Pump([&] { return agent_->attempt_count() == 0; }));
}

TEST_F(AgentLoopTest, ReportsExitCodesAndSignals) {
  coordinator_->Launch("node-a", MakeLaunch("job2", "chief-0", 0, "exit 3"));
  coordinator_->Launch("node-a", MakeLaunch("job2", "worker-0", 0, "kill -9 $$"));
  coordinator_->Launch("node-a", MakeLaunch("job2", "worker-1", 0, ""));
  auto missing = MakeLaunch("job2", "worker-2", 0, "");
  missing.command = {"cohort-no-such-program"};
  coordinator_->Launch("node-a", std::move(missing));
  std::string chief = LogKey("job2", "chief-0", 0), worker = LogKey("job2", "worker-0", 0);
  std::string ok = LogKey("job2", "worker-1", 0), bad = LogKey("job2", "worker-2", 0);
  ASSERT_TRUE(Pump([&] {
    return coordinator_->Final(chief) && coordinator_->Final(worker) && coordinator_->Final(ok) &&
           coordinator_->Final(bad);
  }));
  EXPECT_EQ(coordinator_->Final(chief)->state, wire::ReplicaState::FAILED);
  EXPECT_EQ(coordinator_->Final(chief)->exit_code, 3);
  EXPECT_EQ(coordinator_->Final(chief)->signal, 0);
  EXPECT_EQ(coordinator_->Final(worker)->state, wire::ReplicaState::FAILED);
  EXPECT_EQ(coordinator_->Final(worker)->signal, 9);
  EXPECT_EQ(coordinator_->Final(worker)->exit_code, 137);
  EXPECT_EQ(coordinator_->Final(ok)->state, wire::ReplicaState::SUCCEEDED);
  EXPECT_EQ(coordinator_->Final(bad)->state, wire::ReplicaState::FAILED);
  EXPECT_EQ(coordinator_->Final(bad)->exit_code, 127);
  EXPECT_NE(coordinator_->Final(bad)->message.find("cannot execute"), std::string::npos)
      << coordinator_->Final(bad)->message;
  ASSERT_TRUE(Pump([&] { return coordinator_->log_eof.count(bad) > 0; }));
  EXPECT_TRUE(LogHas(bad, "cannot execute cohort-no-such-program"));
}

// A failed replica's cause comes from torch's error file where the agent chose its path (here in
// the form torchrun copies from its first failed worker: the log's last traceback is torchrun's
// own), else from its log.
TEST_F(AgentLoopTest, TheErrorFileNamesTheCauseOverTheLog) {
  const std::string script =
      R"(printf '%s' '{"message": {"message": "ValueError: shard 1 is )"
      R"(corrupt", "extraInfo": {"timestamp": "1795816175"}, "errorCode": 1}}')"
      R"( > "$TORCHELASTIC_ERROR_FILE"; printf 'Traceback (most recent )"
      R"(call last):\n  File "run.py"\ntorch.distributed.elastic.)"
      R"(multiprocessing.errors.ChildFailedError: \n' >&2; exit 1)";
  coordinator_->Launch("node-a", MakeLaunch("errfile", "chief-0", 0, script));
  auto elsewhere = MakeLaunch("errfile", "worker-0", 0, script);
  auto kv = std::make_unique<wire::KeyValueT>();
  kv->key = "TORCHELASTIC_ERROR_FILE";
  kv->value = work_.path() + "/pool-error.json";
  elsewhere.env.push_back(std::move(kv));
  coordinator_->Launch("node-a", std::move(elsewhere));
  std::string chief = LogKey("errfile", "chief-0", 0), worker = LogKey("errfile", "worker-0", 0);
  ASSERT_TRUE(Pump([&] { return coordinator_->Final(chief) && coordinator_->Final(worker); }));
  EXPECT_EQ(coordinator_->Final(chief)->state, wire::ReplicaState::FAILED);
  EXPECT_EQ(coordinator_->Final(chief)->message, "raised: ValueError: shard 1 is corrupt");
  EXPECT_TRUE(std::filesystem::exists(AttemptWorkingDir(work_.path(), "errfile", "chief-0", 0) +
                                      "/torchelastic-error.json"));
  // A pool's own path is the replica's business: the agent reads the log.
  EXPECT_EQ(coordinator_->Final(worker)->message,
            "log: torch.distributed.elastic.multiprocessing.errors.ChildFailedError:");
  EXPECT_TRUE(std::filesystem::exists(work_.path() + "/pool-error.json"));
}

TEST_F(AgentLoopTest, StopKillsTheWholeProcessGroup) {
  coordinator_->Launch("node-a",
                       MakeLaunch("job3", "chief-0", 0,
                                  "sh -c 'trap \"\" TERM; echo ignoring; exec sleep 1000' & "
                                  "sleep 1000 & sleep 1000; echo unreachable"));
  std::string key = LogKey("job3", "chief-0", 0);
  ASSERT_TRUE(Pump([&] {
    return coordinator_->SawState(key, wire::ReplicaState::RUNNING) && LogHas(key, "ignoring");
  }));
  pid_t pgid = coordinator_->Latest(key)->pid;
  ASSERT_GT(pgid, 0);
  EXPECT_TRUE(GroupAlive(pgid));
  coordinator_->Stop("node-a", "job3", "chief-0", 0, 300);
  ASSERT_TRUE(PumpUntilDone(key));
  auto final = *coordinator_->Final(key);
  EXPECT_EQ(final.state, wire::ReplicaState::STOPPED);
  EXPECT_EQ(final.signal, SIGTERM);
  EXPECT_NE(final.message.find("test stop"), std::string::npos) << final.message;
  // Not one process of the group is left, the TERM-ignoring grandchild included.
  EXPECT_TRUE(Pump([&] { return ::kill(-pgid, 0) != 0 && errno == ESRCH; }));
  EXPECT_FALSE(GroupAlive(pgid));
  EXPECT_FALSE(LogHas(key, "unreachable"));
}

TEST_F(AgentLoopTest, LeftoversOfAFinishedReplicaAreKilled) {
  coordinator_->Launch("node-a",
                       MakeLaunch("job4", "chief-0", 0, "sleep 1000 & echo $! > sleeper; exit 0"));
  std::string key = LogKey("job4", "chief-0", 0);
  ASSERT_TRUE(PumpUntilDone(key));
  EXPECT_EQ(coordinator_->Final(key)->state, wire::ReplicaState::SUCCEEDED);
  pid_t pgid = coordinator_->Final(key)->pid;
  std::string sleeper = AttemptWorkingDir(work_.path(), "job4", "chief-0", 0) + "/sleeper";
  pid_t sleeper_pid = std::atoi(ReadFile(sleeper).c_str());
  ASSERT_GT(sleeper_pid, 0);
  EXPECT_TRUE(Pump([&] { return !testing::ProcessAlive(sleeper_pid) && !GroupAlive(pgid); }));
}

TEST_F(AgentLoopTest, LaunchIsIdempotentAndStopOfAnUnknownAttemptIsAnswered) {
  coordinator_->Launch("node-a", MakeLaunch("job5", "chief-0", 0, "echo once >> ../count"));
  coordinator_->Launch("node-a", MakeLaunch("job5", "chief-0", 0, "echo once >> ../count"));
  std::string key = LogKey("job5", "chief-0", 0);
  ASSERT_TRUE(PumpUntilDone(key));
  ASSERT_TRUE(Pump([&] { return agent_->attempt_count() == 0; }));
  EXPECT_EQ(ReadFile(work_.path() + "/job5/chief-0/count"), "once\n");

  coordinator_->Stop("node-a", "job5", "worker-7", 3, 100);
  std::string unknown = LogKey("job5", "worker-7", 3);
  ASSERT_TRUE(Pump([&] { return coordinator_->Final(unknown).has_value(); }));
  EXPECT_EQ(coordinator_->Final(unknown)->state, wire::ReplicaState::STOPPED);
}

TEST_F(AgentLoopTest, UnackedFinalStatusIsResentAndCarriedByRegistration) {
  coordinator_->ack_updates = false;
  coordinator_->Launch("node-a", MakeLaunch("job6", "chief-0", 0, "exit 4"));
  std::string key = LogKey("job6", "chief-0", 0);
  ASSERT_TRUE(PumpUntilDone(key));
  // Without acks the agent keeps the status and re-sends it every resend interval (200 ms).
  int updates = coordinator_->updates;
  Elapse(milliseconds(500));
  // Two resends went out; the clock stands still while they arrive.
  EXPECT_TRUE(Pump([&] { return coordinator_->updates >= updates + 2; }));
  EXPECT_EQ(agent_->attempt_count(), 1u);
  // The coordinator forgets the node (as after a restart): the next heartbeat says so, and the
  // agent registers again with the final status the coordinator never acked.
  coordinator_->known_nodes.clear();
  size_t before = coordinator_->registrations.size();
  ASSERT_TRUE(Pump([&] { return coordinator_->registrations.size() > before; }, milliseconds(10)));
  const auto& reg = *coordinator_->registrations.back();
  ASSERT_EQ(reg.replicas.size(), 1u);
  EXPECT_EQ(reg.replicas[0]->state, wire::ReplicaState::FAILED);
  EXPECT_EQ(reg.replicas[0]->exit_code, 4);
  // The registration reply counts as the ack.
  EXPECT_TRUE(Pump([&] { return agent_->attempt_count() == 0; }));
}

// How attempts ended stays in every registration after they were acked and forgotten: a
// coordinator restored from an older backup thinks they still run, and learns their end instead
// of restarting them; each with its job's create time from the launch, which tells that job
// from a later one of the same name. An attempt launched again under the same key is reported as
// it is now.
TEST_F(AgentLoopTest, RegistrationsCarryHowForgottenAttemptsEnded) {
  wire::LaunchReplicaT chief = MakeLaunch("job6b", "chief-0", 0, "exit 0");
  chief.job_created_ms = 1'764'964'800'123;
  coordinator_->Launch("node-a", std::move(chief));
  coordinator_->Launch("node-a", MakeLaunch("job6b", "worker-0", 2, "exit 5"));
  ASSERT_TRUE(PumpUntilDone(LogKey("job6b", "chief-0", 0)));
  ASSERT_TRUE(PumpUntilDone(LogKey("job6b", "worker-0", 2)));
  ASSERT_TRUE(Pump([&] { return agent_->attempt_count() == 0; }));  // acked and forgotten
  auto registered_again = [&] {
    coordinator_->known_nodes.clear();
    size_t before = coordinator_->registrations.size();
    EXPECT_TRUE(
        Pump([&] { return coordinator_->registrations.size() > before; }, milliseconds(10)));
    std::map<std::string, const wire::ReplicaStatusT*> by_replica;
    for (const auto& s : coordinator_->registrations.back()->replicas) {
      by_replica[s->replica + "#" + std::to_string(s->attempt)] = s.get();
    }
    return by_replica;
  };
  auto reported = registered_again();
  ASSERT_EQ(reported.size(), 2u);
  ASSERT_TRUE(reported.count("chief-0#0"));
  EXPECT_EQ(reported["chief-0#0"]->state, wire::ReplicaState::SUCCEEDED);
  EXPECT_EQ(reported["chief-0#0"]->job, "job6b");
  EXPECT_EQ(reported["chief-0#0"]->job_created_ms, 1'764'964'800'123);
  ASSERT_TRUE(reported.count("worker-0#2"));
  EXPECT_EQ(reported["worker-0#2"]->state, wire::ReplicaState::FAILED);
  EXPECT_EQ(reported["worker-0#2"]->exit_code, 5);
  EXPECT_TRUE(Pump([&] { return agent_->registered(); }));

  // worker-0's attempt 2 launched again (a restored coordinator's restart): only the new one.
  const std::string release = work_.path() + "/release-6b";
  coordinator_->Launch("node-a", MakeLaunch("job6b", "worker-0", 2,
                                            "while [ ! -e " + release + " ]; do sleep 0.02; done"));
  ASSERT_TRUE(Pump([&] {
    auto s = coordinator_->Latest(LogKey("job6b", "worker-0", 2));
    return s && s->state == wire::ReplicaState::RUNNING;
  }));
  reported = registered_again();
  ASSERT_EQ(reported.size(), 2u);
  EXPECT_EQ(reported["worker-0#2"]->state, wire::ReplicaState::RUNNING);
  EXPECT_EQ(reported["chief-0#0"]->state, wire::ReplicaState::SUCCEEDED);
  cohort::testing::WriteFile(release, "");
  ASSERT_TRUE(PumpUntilDone(LogKey("job6b", "worker-0", 2)));
}

// Whatever a coordinator sends, well-formed FlatBuffers but hostile in every text and number
// (bytes that are not UTF-8, control characters, the running replica's names with a hostile rest,
// negative and huge intervals, offsets, graces and fence times), the agent's passes go on and it
// still registers or heartbeats afterwards. Left out: LaunchReplica and exec, which act on paths
// and run commands by design (the coordinator is trusted with them), a stack dump of the real
// replica (it signals the process), and output_root (the agent writes its storage marker there).
// Seeded: the same messages each run.
TEST_F(AgentLoopTest, HostileCoordinatorMessagesNeverStopTheAgent) {
  coordinator_->Launch(
      "node-a", MakeLaunch("target", "chief-0", 0, "echo ready; while :; do sleep 0.05; done"));
  ASSERT_TRUE(Pump([&] { return LogHas(LogKey("target", "chief-0", 0), "ready"); }));
  cohort::testing::HostileValues hostile(20261208);
  auto pick = [&](int n) { return hostile.Pick(n); };
  auto text = [&] { return hostile.Text({"target", "chief-0", "node-a"}); };
  auto number = [&] { return hostile.Number(); };
  for (int i = 0; i < 300; ++i) {
    wire::BodyUnion body;
    switch (pick(7)) {
      case 0: {
        wire::RegisterAgentReplyT reply;
        reply.heartbeat_interval_ms = static_cast<int>(number());
        reply.fence_after_ms = number();
        reply.fence_grace_ms = number();
        body.Set(std::move(reply));
        break;
      }
      case 1: {
        wire::HeartbeatReplyT reply;
        reply.known = pick(4) != 0;
        auto late = std::make_unique<wire::ReplicaLatenessT>();
        late->job = text();
        late->replica = text();
        late->median_ms = static_cast<double>(number());
        late->samples = static_cast<int>(number());
        reply.lateness.push_back(std::move(late));
        body.Set(std::move(reply));
        break;
      }
      case 2: {
        wire::LogAckT ack;
        ack.job = text();
        ack.replica = text();
        ack.attempt = pick(2) ? 0 : static_cast<int>(number());
        ack.next_offset = static_cast<uint64_t>(number());
        body.Set(std::move(ack));
        break;
      }
      case 3: {
        wire::StopReplicaT stop;
        stop.job = text();
        stop.replica = text();
        stop.attempt = static_cast<int>(number());
        stop.grace_ms = static_cast<int>(number());
        stop.reason = text();
        body.Set(std::move(stop));
        break;
      }
      case 4: {
        wire::DumpStacksT dump;
        dump.job = hostile.Text({"other"});
        dump.replica = hostile.Text({"chief-0"});
        dump.attempt = static_cast<int>(number());
        dump.reason = text();
        body.Set(std::move(dump));
        break;
      }
      case 5: {
        wire::ErrorReplyT error;
        error.code = static_cast<int>(number());
        error.message = text();
        body.Set(std::move(error));
        break;
      }
      default:
        body.Set(wire::AckT{});
        break;
    }
    coordinator_->Send("node-a", std::move(body));
    for (int pass = 0; pass < 3; ++pass) {
      ASSERT_TRUE(agent_->RunOnce(milliseconds(1)).ok());
      coordinator_->Poll(milliseconds(0));
    }
  }
  // Heard from afterwards: a heartbeat, or a registration where a reply said it was not known.
  const int heartbeats = coordinator_->heartbeats;
  const size_t registrations = coordinator_->registrations.size();
  EXPECT_TRUE(Pump(
      [&] {
        return coordinator_->heartbeats > heartbeats ||
               coordinator_->registrations.size() > registrations;
      },
      milliseconds(200)));
}

// The ends file is written off the loop; one that cannot be written (here its temp file's path is
// taken by a directory, as a full disk or a read-only remount would fail it) leaves the agent
// running its replicas and reporting them, and is written once it can be, 10 s on.
TEST_F(AgentLoopTest, AnEndsFileThatCannotBeWrittenIsTriedAgainAndNeverStopsTheAgent) {
  const std::string blocker = EndsPath(work_.path()) + ".tmp";
  ASSERT_TRUE(std::filesystem::create_directories(blocker + "/taken"));
  coordinator_->Launch("node-a", MakeLaunch("job6e", "chief-0", 0, "exit 0"));
  ASSERT_TRUE(Pump([&] {
    auto c = coordinator_->Latest(LogKey("job6e", "chief-0", 0));
    return c && c->state == wire::ReplicaState::SUCCEEDED;
  }));
  Elapse(milliseconds(500));
  EXPECT_FALSE(std::filesystem::exists(EndsPath(work_.path())));
  std::filesystem::remove_all(blocker);
  ASSERT_TRUE(Pump(
      [&] {
        return std::filesystem::exists(EndsPath(work_.path())) &&
               ReadFile(EndsPath(work_.path())).find("job6e") != std::string::npos;
      },
      milliseconds(500)));
}

// The coordinator hears nothing (it is down) while a chief succeeds and the agent is then stopped
// (its worker preempted): the agent started again on the same work dir, an ordinary start, not a
// live restart, reports both ends at its first registration, from the ends file, instead of
// coming back without them (which the coordinator would take for a loss, running the chief
// again). An agent of another node id on that work dir does not take them.
TEST_F(AgentLoopTest, AnAgentStartedAgainReportsTheEndsItsCoordinatorNeverHeard) {
  const std::string release = work_.path() + "/release-6c";
  wire::LaunchReplicaT chief =
      MakeLaunch("job6c", "chief-0", 0, "while [ ! -e " + release + " ]; do sleep 0.02; done");
  chief.job_created_ms = 1'764'964'800'456;
  coordinator_->Launch("node-a", std::move(chief));
  coordinator_->Launch(
      "node-a", MakeLaunch("job6c", "worker-0", 1, "echo ready; while :; do sleep 0.05; done"));
  ASSERT_TRUE(Pump([&] {
    auto c = coordinator_->Latest(LogKey("job6c", "chief-0", 0));
    return c && c->state == wire::ReplicaState::RUNNING &&
           LogHas(LogKey("job6c", "worker-0", 1), "ready");
  }));
  coordinator_->silent = true;  // down, from here on
  cohort::testing::WriteFile(release, "");
  ASSERT_TRUE(Pump(
      [&] { return ReadFile(EndsPath(work_.path())).find("\"SUCCEEDED\"") != std::string::npos; }));
  agent_->BeginPreemption();
  ASSERT_TRUE(Pump([&] { return agent_->preempted(); }, milliseconds(50)));
  AgentConfig config = agent_->config();
  agent_.reset();

  auto started =
      Agent::Create(context_, config, std::make_unique<ProcessLauncher>(CgroupManager()), &clock_);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  agent_ = std::move(*started);
  auto kept = agent_->KeepEndsFromDisk();
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, 2u);
  coordinator_->silent = false;  // back
  const size_t before = coordinator_->registrations.size();
  ASSERT_TRUE(Pump([&] { return coordinator_->registrations.size() > before; }, milliseconds(10)));
  std::map<std::string, const wire::ReplicaStatusT*> reported;
  for (const auto& s : coordinator_->registrations.back()->replicas) {
    reported[s->replica + "#" + std::to_string(s->attempt)] = s.get();
  }
  ASSERT_EQ(reported.size(), 2u);
  ASSERT_TRUE(reported.count("chief-0#0"));
  EXPECT_EQ(reported["chief-0#0"]->state, wire::ReplicaState::SUCCEEDED);
  EXPECT_EQ(reported["chief-0#0"]->exit_code, 0);
  EXPECT_EQ(reported["chief-0#0"]->job_created_ms, 1'764'964'800'456);
  ASSERT_TRUE(reported.count("worker-0#1"));
  EXPECT_EQ(reported["worker-0#1"]->state, wire::ReplicaState::PREEMPTED);

  config.node_id = "node-b";
  agent_.reset();
  started =
      Agent::Create(context_, config, std::make_unique<ProcessLauncher>(CgroupManager()), &clock_);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  kept = (*started)->KeepEndsFromDisk();
  ASSERT_FALSE(kept.ok());
  EXPECT_EQ(kept.status().code(), StatusCode::kFailedPrecondition) << kept.status().ToString();
}

TEST_F(AgentLoopTest, LogsResumeAfterACoordinatorRestartWithNothingLost) {
  coordinator_->Launch("node-a", MakeLaunch("job7", "chief-0", 0,
                                            "seq 1 100000; while [ ! -e go ]; do sleep 0.02; done; "
                                            "seq 100001 130000"));
  std::string key = LogKey("job7", "chief-0", 0);
  ASSERT_TRUE(Pump([&] { return coordinator_->logs[key].size() >= 3 * (64 << 10); }));
  std::string held = coordinator_->logs[key];
  ASSERT_LT(held.size(), 588895u);  // seq 1 100000 is 588895 bytes: some is not shipped yet

  // The coordinator goes away; the agent keeps running without it for a while.
  coordinator_.reset();
  Elapse(milliseconds(300));
  // A new coordinator on the same endpoint, which kept only the first chunk of the log.
  coordinator_ = std::make_unique<FakeCoordinator>(context_, endpoint_);
  ASSERT_TRUE(coordinator_->bound());
  coordinator_->logs[key] = held.substr(0, 64 << 10);
  ASSERT_TRUE(Pump(
      [&] {
        for (const auto& reg : coordinator_->registrations) {
          for (const auto& r : reg->replicas) {
            if (r->job == "job7" && r->state == wire::ReplicaState::RUNNING) return true;
          }
        }
        return false;
      },
      milliseconds(10)));
  testing::WriteFile(AttemptWorkingDir(work_.path(), "job7", "chief-0", 0) + "/go", "");
  ASSERT_TRUE(PumpUntilDone(key));
  EXPECT_EQ(coordinator_->Final(key)->state, wire::ReplicaState::SUCCEEDED);
  std::string file = ReadFile(AttemptLogPath(work_.path(), "job7", "chief-0", 0));
  EXPECT_EQ(file.size(), 588895u + 30000u * 7u);
  EXPECT_TRUE(coordinator_->logs[key] == file)
      << "coordinator holds " << coordinator_->logs[key].size() << " of " << file.size()
      << " bytes";
}

TEST_F(AgentLoopTest, RestartRestoresTheNewestCheckpoint) {
  TempDir checkpoints;
  for (int step : {5, 12, 20}) {
    CheckpointWriter writer(checkpoints.path(), step);
    ASSERT_TRUE(writer.AddFile("weights.bin", "step " + std::to_string(step)).ok());
    ASSERT_TRUE(writer.Commit().ok());
  }
  // ckpt-20 is corrupted after its commit: restore skips it.
  testing::WriteFile(checkpoints.path() + "/ckpt-20/weights.bin", "garbage!");
  auto first = MakeLaunch("job8", "chief-0", 0, "echo restore=[$COHORT_RESTORE_CHECKPOINT]");
  first.checkpoint_dir = checkpoints.path();
  auto second = MakeLaunch("job8", "chief-0", 1, "echo restore=[$COHORT_RESTORE_CHECKPOINT]");
  second.checkpoint_dir = checkpoints.path();
  coordinator_->Launch("node-a", std::move(first));
  std::string key0 = LogKey("job8", "chief-0", 0), key1 = LogKey("job8", "chief-0", 1);
  ASSERT_TRUE(PumpUntilDone(key0));
  coordinator_->Launch("node-a", std::move(second));
  ASSERT_TRUE(PumpUntilDone(key1));
  EXPECT_TRUE(LogHas(key0, "restore=[]")) << coordinator_->logs[key0];
  EXPECT_TRUE(LogHas(key1, "restore=[" + checkpoints.path() + "/ckpt-12]"))
      << coordinator_->logs[key1];
}

TEST_F(AgentLoopTest, ChiefMeasurementsAreForwardedInOrder) {
  TempDir output;
  std::string file = output.path() + "/hp_metrics.jsonl";
  const std::string script =
      "for s in 1 2 3; do printf '{\"accuracy\":\"0.%s\",\"global_step\":\"%s\","
      "\"timestamp\":%s.5,\"trial\":\"7\"}\\n' $s $s $s >> \"$CLOUD_ML_HP_METRIC_FILE\"; "
      "sleep 0.1; done";
  for (const char* replica : {"chief-0", "worker-0"}) {
    auto launch = MakeLaunch("trial7", replica, 0, script);
    for (auto [k, v] :
         {std::pair<std::string, std::string>{"CLOUD_ML_HP_METRIC_FILE", file + "." + replica},
          {"CLOUD_ML_TRIAL_ID", "7"}}) {
      auto kv = std::make_unique<wire::KeyValueT>();
      kv->key = k;
      kv->value = v;
      launch.env.push_back(std::move(kv));
    }
    coordinator_->Launch("node-a", std::move(launch));
  }
  // The file is read every 200 ms of the agent's time, and once more after the chief ended.
  ASSERT_TRUE(Pump(
      [&] {
        std::string chief = LogKey("trial7", "chief-0", 0);
        return coordinator_->Final(chief) && coordinator_->log_eof.count(chief);
      },
      milliseconds(10)));
  ASSERT_TRUE(PumpUntilDone(LogKey("trial7", "worker-0", 0)));
  ASSERT_TRUE(Pump([&] { return agent_->attempt_count() == 0; }));
  // The chief's three lines, in order; the worker's file is not tailed.
  ASSERT_EQ(coordinator_->measurements.size(), 3u)
      << ReadFile(file + ".chief-0") << coordinator_->logs[LogKey("trial7", "chief-0", 0)];
  ExpectTrial7Measurements(3);
}

TEST_F(AgentLoopTest, PreemptionStopsEveryReplicaAndReportsPreempted) {
  coordinator_->Launch("node-a", MakeLaunch("job9", "chief-0", 0,
                                            "trap 'echo got-term; exit 0' TERM; echo ready; "
                                            "while :; do sleep 0.05; done"));
  coordinator_->Launch("node-a", MakeLaunch("job9", "worker-0", 0,
                                            "trap '' TERM; echo ready; "
                                            "while :; do sleep 0.05; done"));
  std::string chief = LogKey("job9", "chief-0", 0), worker = LogKey("job9", "worker-0", 0);
  ASSERT_TRUE(Pump([&] { return LogHas(chief, "ready") && LogHas(worker, "ready"); }));
  pid_t chief_pgid = coordinator_->Latest(chief)->pid;
  pid_t worker_pgid = coordinator_->Latest(worker)->pid;

  agent_->BeginPreemption();
  // The chief ends on SIGTERM at once; the worker ignores it and lives until the grace period
  // (500 ms of the agent's clock) is over.
  ASSERT_TRUE(Pump([&] { return coordinator_->Final(chief).has_value(); }));
  Pump([] { return false; }, milliseconds(0), milliseconds(100));
  EXPECT_FALSE(coordinator_->Final(worker).has_value());
  EXPECT_FALSE(agent_->preempted());
  ASSERT_TRUE(Pump([&] { return agent_->preempted(); }, milliseconds(50)));
  EXPECT_EQ(agent_->attempt_count(), 0u);  // everything acked and shipped before it was done

  auto c = *coordinator_->Final(chief);
  EXPECT_EQ(c.state, wire::ReplicaState::PREEMPTED);
  EXPECT_EQ(c.exit_code, 0);  // it handled SIGTERM and exited cleanly
  EXPECT_TRUE(LogHas(chief, "got-term"));
  EXPECT_TRUE(coordinator_->log_eof.count(chief));
  auto w = *coordinator_->Final(worker);
  EXPECT_EQ(w.state, wire::ReplicaState::PREEMPTED);
  EXPECT_EQ(w.signal, SIGKILL);  // it ignored SIGTERM: killed after the grace period
  EXPECT_FALSE(GroupAlive(chief_pgid));
  EXPECT_FALSE(GroupAlive(worker_pgid));

  // A launch during shutdown is not taken (the coordinator will see the node lost): nothing
  // starts and nothing is reported.
  coordinator_->Launch("node-a", MakeLaunch("job9", "worker-1", 0, "true"));
  Elapse(milliseconds(300));
  EXPECT_FALSE(coordinator_->Latest(LogKey("job9", "worker-1", 0)).has_value());
  EXPECT_EQ(agent_->attempt_count(), 0u);
}

// The agent with cgroups turned off: a replica's setsid children and double-forked daemons have
// left its process group, and are found by the COHORT_ATTEMPT_DIR they inherit.
class AgentWithoutCgroupsTest : public AgentLoopTest {
 protected:
  CgroupManager Cgroups() override { return CgroupManager(); }

  // Launches `replica` of `job`, which starts a child in its own session and a double-forked
  // daemon (both ignore SIGTERM), waits for them, then runs `then`. Returns their pids.
  std::vector<pid_t> LaunchDaemonizing(const std::string& job, const std::string& replica,
                                       const std::string& then) {
    coordinator_->Launch(
        "node-a",
        MakeLaunch(job, replica, 0,
                   "setsid sh -c 'trap \"\" TERM; exec sleep 1000' & echo $! > setsid.pid; "
                   "(setsid sh -c 'trap \"\" TERM; sleep 1000 & echo $! > daemon.pid' &); "
                   "while [ ! -s setsid.pid ] || [ ! -s daemon.pid ]; do sleep 0.01; done; "
                   "echo ready; " +
                       then));
    std::string dir = AttemptWorkingDir(work_.path(), job, replica, 0);
    EXPECT_TRUE(Pump([&] { return LogHas(LogKey(job, replica, 0), "ready"); }));
    std::vector<pid_t> pids;
    for (const char* file : {"/setsid.pid", "/daemon.pid"}) {
      pids.push_back(std::atoi(ReadFile(dir + file).c_str()));
      EXPECT_GT(pids.back(), 0);
      EXPECT_TRUE(testing::ProcessAlive(pids.back()));
    }
    return pids;
  }
  static bool AllGone(const std::vector<pid_t>& pids) {
    return std::none_of(pids.begin(), pids.end(), testing::ProcessAlive);
  }
};

TEST_F(AgentWithoutCgroupsTest, CancelKillsTheReplicasSetsidChildAndDaemon) {
  auto left = LaunchDaemonizing("job11", "chief-0", "while :; do sleep 0.05; done");
  pid_t pgid = coordinator_->Latest(LogKey("job11", "chief-0", 0))->pid;
  // They leave the process group (setsid may take a moment after the pid is written).
  EXPECT_TRUE(Pump([&] {
    return std::none_of(left.begin(), left.end(),
                        [&](pid_t pid) { return ::getpgid(pid) == pgid; });
  }));
  coordinator_->Stop("node-a", "job11", "chief-0", 0, 300);
  ASSERT_TRUE(PumpUntilDone(LogKey("job11", "chief-0", 0)));
  EXPECT_EQ(coordinator_->Final(LogKey("job11", "chief-0", 0))->state, wire::ReplicaState::STOPPED);
  EXPECT_TRUE(Pump([&] { return AllGone(left); }));
  EXPECT_TRUE(Pump([&] { return agent_->attempt_count() == 0; }));
}

TEST_F(AgentWithoutCgroupsTest, SuccessOrFailureKillsWhatTheReplicaLeftBehind) {
  const std::string wait_for_go = "while [ ! -e go ]; do sleep 0.01; done; ";
  auto chief = LaunchDaemonizing("job12", "chief-0", wait_for_go + "exit 0");
  auto worker = LaunchDaemonizing("job12", "worker-0", wait_for_go + "exit 3");
  for (const char* replica : {"chief-0", "worker-0"}) {
    testing::WriteFile(AttemptWorkingDir(work_.path(), "job12", replica, 0) + "/go", "");
  }
  ASSERT_TRUE(PumpUntilDone(LogKey("job12", "chief-0", 0)));
  ASSERT_TRUE(PumpUntilDone(LogKey("job12", "worker-0", 0)));
  EXPECT_EQ(coordinator_->Final(LogKey("job12", "chief-0", 0))->state,
            wire::ReplicaState::SUCCEEDED);
  EXPECT_EQ(coordinator_->Final(LogKey("job12", "worker-0", 0))->exit_code, 3);
  EXPECT_TRUE(Pump([&] { return AllGone(chief) && AllGone(worker); }));
  // An attempt is gone only once nothing of it is left: then it is forgotten.
  EXPECT_TRUE(Pump([&] { return agent_->attempt_count() == 0; }));
}

TEST_F(AgentWithoutCgroupsTest, ShutdownKillsTheReplicasDaemons) {
  auto left = LaunchDaemonizing("job13", "chief-0", "while :; do sleep 0.05; done");
  agent_->BeginPreemption();
  ASSERT_TRUE(Pump([&] { return agent_->preempted(); }, milliseconds(50)));
  EXPECT_EQ(coordinator_->Final(LogKey("job13", "chief-0", 0))->state,
            wire::ReplicaState::PREEMPTED);
  // SIGKILLed; a process still finishing its exit has no environment left to find it by (the
  // agent counts it gone), so wait for its last moments as the tests above do.
  EXPECT_TRUE(Pump([&] { return AllGone(left); }));
}

}  // namespace
}  // namespace cohort::agent
