// The agent's control loop against a fake coordinator (tests/agent/agent_loop_test.cc and the
// tests of what the loop must not wait for): FakeCoordinator, a real ROUTER socket on
// tcp://127.0.0.1:<port> that answers as the coordinator does and records what it got, and the
// AgentLoopTest fixture, an agent with real replica processes and a ManualClock the tests step.
#pragma once

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/process_launcher.h"
#include "coordinator/launch_plan.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {

inline std::string LogKey(const std::string& job, const std::string& replica, int attempt) {
  return job + "/" + replica + "/" + std::to_string(attempt);
}

inline bool IsFinal(wire::ReplicaState s) {
  return s == wire::ReplicaState::SUCCEEDED || s == wire::ReplicaState::FAILED ||
         s == wire::ReplicaState::PREEMPTED || s == wire::ReplicaState::STOPPED;
}

// Plays the coordinator's agent endpoint: answers registrations, heartbeats, updates and log
// chunks as common/schema/cohort.fbs says, and records what it got.
class FakeCoordinator {
 public:
  using milliseconds = std::chrono::milliseconds;

  FakeCoordinator(zmq::context_t& context, const std::string& endpoint) {
    // Re-binding a port just closed may need a moment.
    testing::WaitUntil(
        [&] {
          auto socket = RouterSocket::Bind(context, endpoint);
          if (socket.ok()) router_.emplace(std::move(*socket));
          return router_.has_value();
        },
        std::chrono::seconds(10));
  }
  bool bound() const { return router_.has_value(); }
  std::string endpoint() const { return router_->endpoint(); }

  // Handles every message waiting (up to `wait` for the first).
  void Poll(milliseconds wait = milliseconds(0)) {
    while (true) {
      auto got = router_->Receive(wait);
      wait = milliseconds(0);
      if (!got.ok() || !got->has_value()) return;
      Handle((*got)->peer, (*got)->message);
    }
  }

  void Send(const std::string& node, wire::BodyUnion body) {
    auto peer = peers_.find(node);
    ASSERT_NE(peer, peers_.end()) << node << " has not registered";
    ASSERT_TRUE(router_->Send(peer->second, EncodeBody(next_id_++, std::move(body))).ok());
  }
  // Sends one message of the coordinator's (a wire::BodyUnion member, e.g. LaunchReplicaT).
  template <typename Message>
  void Send(const std::string& node, Message message) {
    wire::BodyUnion body;
    body.Set(std::move(message));
    Send(node, std::move(body));
  }
  void Launch(const std::string& node, wire::LaunchReplicaT launch) {
    Send(node, std::move(launch));
  }
  // The stop the real coordinator sends (coordinator/launch_plan.h).
  void Stop(const std::string& node, const std::string& job, const std::string& replica,
            int attempt, int grace_ms) {
    Send(node, coordinator::PlanStop(job, replica, attempt, "test stop", grace_ms));
  }

  // The newest status reported for an attempt (updates and registrations).
  std::optional<wire::ReplicaStatusT> Latest(const std::string& key) const {
    auto it = latest_.find(key);
    if (it == latest_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<wire::ReplicaStatusT> Final(const std::string& key) const {
    auto s = Latest(key);
    if (s && IsFinal(s->state)) return s;
    return std::nullopt;
  }
  // The routing id `node` registered from ("" when it did not).
  std::string PeerOf(const std::string& node) const {
    auto it = peers_.find(node);
    return it == peers_.end() ? "" : it->second;
  }
  bool SawState(const std::string& key, wire::ReplicaState state) const {
    auto it = seen_.find(key);
    return it != seen_.end() && it->second.count(state);
  }

  bool ack_updates = true;
  int refuse_updates = 0;  // refuse so many updates with `refusal` before taking them
  Status refusal;
  bool ignore_heartbeats = false;
  // Takes nothing and answers nothing, as a coordinator cut off from this node.
  bool silent = false;
  // Answers everything with this error, as a coordinator that removed this node's key.
  std::optional<Status> refuse_everything;
  // What RegisterAgentReply hands: --fence-after and the stop grace (0: no fencing).
  int64_t fence_after_ms = 0;
  int64_t fence_grace_ms = 0;
  int updates = 0;
  int rejected_updates = 0;
  int heartbeat_interval_ms = 100;
  std::set<std::string> known_nodes;
  std::vector<std::unique_ptr<wire::RegisterAgentT>> registrations;
  std::map<std::string, std::string> logs;  // LogKey -> bytes held
  std::set<std::string> log_eof;
  std::vector<std::unique_ptr<wire::TrialMeasurementT>> measurements;
  int heartbeats = 0;
  // Each heartbeat's progress of an attempt, by LogKey, oldest first.
  std::map<std::string, std::vector<std::unique_ptr<wire::ReplicaProgressT>>> progress;
  // The newest progress of an attempt a heartbeat brought; null before any.
  const wire::ReplicaProgressT* LatestProgress(const std::string& key) const {
    auto it = progress.find(key);
    return it == progress.end() || it->second.empty() ? nullptr : it->second.back().get();
  }

 private:
  void Record(const wire::ReplicaStatusT& s) {
    std::string key = LogKey(s.job, s.replica, s.attempt);
    latest_[key] = s;
    seen_[key].insert(s.state);
  }

  void Reply(const std::string& peer, uint64_t id, wire::BodyUnion body) {
    (void)router_->Send(peer, EncodeBody(id, std::move(body)));
  }

  void Handle(const std::string& peer, const Message& m) {
    if (silent) return;
    if (refuse_everything) {
      (void)router_->Send(peer, EncodeError(m.request_id(), *refuse_everything));
      return;
    }
    wire::BodyUnion reply;
    switch (m.type()) {
      case wire::Body::RegisterAgent: {
        registrations.emplace_back(m.As<wire::RegisterAgent>()->UnPack());
        for (const auto& r : registrations.back()->replicas) Record(*r);
        known_nodes.insert(registrations.back()->node_id);
        peers_[registrations.back()->node_id] = peer;
        wire::RegisterAgentReplyT r;
        r.heartbeat_interval_ms = heartbeat_interval_ms;
        r.fence_after_ms = fence_after_ms;
        r.fence_grace_ms = fence_grace_ms;
        reply.Set(std::move(r));
        break;
      }
      case wire::Body::Heartbeat: {
        ++heartbeats;
        if (const auto* reported = m.As<wire::Heartbeat>()->progress()) {
          for (const wire::ReplicaProgress* p : *reported) {
            progress[LogKey(p->job()->str(), p->replica()->str(), p->attempt())].emplace_back(
                p->UnPack());
          }
        }
        if (ignore_heartbeats) return;
        wire::HeartbeatReplyT r;
        r.known = known_nodes.count(m.As<wire::Heartbeat>()->node_id()->str()) > 0;
        reply.Set(std::move(r));
        break;
      }
      case wire::Body::ReplicaUpdate: {
        std::unique_ptr<wire::ReplicaUpdateT> u(m.As<wire::ReplicaUpdate>()->UnPack());
        ++updates;
        if (!known_nodes.count(u->node_id)) {  // as the real coordinator: register first
          ++rejected_updates;
          (void)router_->Send(
              peer, EncodeError(m.request_id(), FailedPrecondition("node is not registered")));
          return;
        }
        if (refuse_updates > 0) {  // as the real coordinator whose commit failed
          --refuse_updates;
          ++rejected_updates;
          (void)router_->Send(peer, EncodeError(m.request_id(), refusal));
          return;
        }
        Record(*u->status);
        if (!ack_updates) return;
        reply.Set(wire::AckT());
        break;
      }
      case wire::Body::LogChunk: {
        const auto* c = m.As<wire::LogChunk>();
        std::string key = LogKey(c->job()->str(), c->replica()->str(), c->attempt());
        std::string& held = logs[key];
        if (c->offset() == held.size()) {
          if (c->data())
            held.append(reinterpret_cast<const char*>(c->data()->data()), c->data()->size());
          if (c->eof()) log_eof.insert(key);
        }
        wire::LogAckT ack;
        ack.job = c->job()->str();
        ack.replica = c->replica()->str();
        ack.attempt = c->attempt();
        ack.next_offset = held.size();
        reply.Set(std::move(ack));
        break;
      }
      case wire::Body::TrialMeasurement:
        measurements.emplace_back(m.As<wire::TrialMeasurement>()->UnPack());
        reply.Set(wire::AckT());
        break;
      default:
        return;
    }
    Reply(peer, m.request_id(), std::move(reply));
  }

  std::optional<RouterSocket> router_;
  uint64_t next_id_ = 1000;
  std::map<std::string, wire::ReplicaStatusT> latest_;
  std::map<std::string, std::set<wire::ReplicaState>> seen_;
  std::map<std::string, std::string> peers_;  // node id -> routing id, as it registered
};

inline wire::LaunchReplicaT MakeLaunch(const std::string& job, const std::string& replica,
                                       int attempt, const std::string& script) {
  wire::LaunchReplicaT l;
  l.job = job;
  l.replica = replica;
  l.role = replica.substr(0, replica.find('-'));
  l.attempt = attempt;
  l.command = {"/bin/sh", "-c", script};
  return l;
}

class AgentLoopTest : public ::testing::Test {
 protected:
  using milliseconds = std::chrono::milliseconds;

  static void SetUpTestSuite() {
    // As the daemon does: orphans of replicas come to this process, and the agent reaps them.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  }

  void SetUp() override {
    coordinator_ = std::make_unique<FakeCoordinator>(context_, "tcp://127.0.0.1:0");
    ASSERT_TRUE(coordinator_->bound());
    endpoint_ = coordinator_->endpoint();
    AgentConfig config;
    config.coordinator = endpoint_;
    config.node_id = "node-a";
    config.advertise_address = "127.0.0.1";
    config.work_dir = work_.path();
    config.inventory.gpus = DeclaredGpus(2);
    config.inventory.cpus = 4;
    config.inventory.memory_mb = 1024;
    config.security.insecure = true;
    config.grace_period = milliseconds(500);
    config.default_heartbeat_interval = milliseconds(100);
    config.coordinator_timeout = milliseconds(1000);
    config.resend_interval = milliseconds(200);
    config.max_register_interval = milliseconds(400);
    config.preempt_ack_wait = milliseconds(3000);
    config.log_chunk_bytes = 64 << 10;
    config.reap_all_children = true;
    auto agent = Agent::Create(context_, config, MakeLauncher(), &clock_);
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(*agent);
    ASSERT_TRUE(Pump([&] { return agent_->registered(); }));
  }

  void TearDown() override {
    agent_.reset();  // kills anything left
    testing::RemoveOwnCgroups(cgroups_);
  }

  // Where the replicas run: cgroup v2 where writable, under a node level of this test process.
  virtual CgroupManager Cgroups() {
    cgroups_ = testing::OwnCgroups("node-a");
    return cgroups_;
  }
  // The agent's process launcher.
  virtual std::unique_ptr<Launcher> MakeLauncher() {
    return std::make_unique<ProcessLauncher>(Cgroups());
  }

  // Steps the agent and the coordinator in turn until `done`, moving the agent's clock by `tick`
  // after each step. The replicas are real processes, so waiting for them takes real time;
  // `guard` (real time) only ends a test that would otherwise hang.
  bool Pump(const std::function<bool()>& done, milliseconds tick = milliseconds(0),
            milliseconds guard = milliseconds(10000)) {
    auto deadline = std::chrono::steady_clock::now() + guard;
    while (std::chrono::steady_clock::now() < deadline) {
      EXPECT_TRUE(agent_->RunOnce(milliseconds(2)).ok());
      if (coordinator_) coordinator_->Poll(milliseconds(1));
      if (done()) return true;
      clock_.Advance(tick);
    }
    return done();
  }
  // Lets `span` of the agent's time pass, in steps of `tick`.
  void Elapse(milliseconds span, milliseconds tick = milliseconds(10)) {
    for (milliseconds passed(0); passed < span; passed += tick) {
      EXPECT_TRUE(agent_->RunOnce(milliseconds(1)).ok());
      if (coordinator_) coordinator_->Poll(milliseconds(1));
      clock_.Advance(tick);
    }
  }

  // The coordinator got trial7/chief-0's measurements of steps 1..n, in order, each once, as
  // lines {"accuracy":"0.<step>","global_step":"<step>","timestamp":<step>.5,"trial":"7"} make.
  void ExpectTrial7Measurements(size_t n) {
    ASSERT_EQ(coordinator_->measurements.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const auto& m = *coordinator_->measurements[i];
      EXPECT_EQ(m.job, "trial7");
      EXPECT_EQ(m.trial, "7");
      EXPECT_EQ(m.replica, "chief-0");
      EXPECT_EQ(m.step, static_cast<int64_t>(i + 1));
      EXPECT_DOUBLE_EQ(m.timestamp, i + 1.5);
      ASSERT_EQ(m.metrics.size(), 1u);
      EXPECT_EQ(m.metrics[0]->key, "accuracy");
      EXPECT_DOUBLE_EQ(std::stod(m.metrics[0]->value), 0.1 * (i + 1));
    }
  }

  bool LogHas(const std::string& key, const std::string& text) {
    return coordinator_->logs[key].find(text) != std::string::npos;
  }
  // Launches `job`/chief-0 (echo other-ran) and expects it to run, succeed and be reported: the
  // loop goes on while something of another attempt's waits.
  void ExpectAnotherReplicaRuns(const std::string& job = "other") {
    coordinator_->Launch("node-a", MakeLaunch(job, "chief-0", 0, "echo other-ran"));
    const std::string other = LogKey(job, "chief-0", 0);
    ASSERT_TRUE(PumpUntilDone(other));
    EXPECT_EQ(coordinator_->Final(other)->state, wire::ReplicaState::SUCCEEDED);
    EXPECT_TRUE(LogHas(other, "other-ran"));
  }
  // Until the attempt is final and its whole log arrived.
  bool PumpUntilDone(const std::string& key) {
    return Pump([&] { return coordinator_->Final(key) && coordinator_->log_eof.count(key); });
  }

  zmq::context_t context_;
  testing::TempDir work_;
  CgroupManager cgroups_;  // the node level Cgroups() made (none until then)
  ManualClock clock_;
  std::unique_ptr<FakeCoordinator> coordinator_;
  std::string endpoint_;
  std::unique_ptr<Agent> agent_;
};

}  // namespace cohort::agent
