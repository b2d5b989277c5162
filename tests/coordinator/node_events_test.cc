// Each node's history (NodeEvent, coordinator/state.h): what the NodeRegistry records as it sees a
// node register, go LOST and come back, fail and pass its health check, and as admins change it;
// the rollback of a failed commit; forget; and the StateStore keeping the newest kNodeEventsKept
// per node across reopens, a damaged row left out.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "coordinator/node_registry.h"
#include "coordinator/sqlite_db.h"
#include "coordinator/sqlite_state_store.h"
#include "coordinator/state_store.h"
#include "tests/testing/process.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;

// What an agent registers, with `version`, two GPUs, what its health check says, how long it has
// run (0: an agent that does not say), which process it is ("": one that does not say) and why
// its live restart was undone ("": it was not).
void Register(NodeRegistry& nodes, const std::string& id, int64_t now_ms,
              const std::string& version = "0.9.1", const std::string& unhealthy = "",
              int64_t uptime_ms = 0, const std::string& instance = "",
              const std::string& undone = "") {
  wire::RegisterAgentT req;
  req.live_restart_undone = undone;
  req.uptime_ms = uptime_ms;
  req.agent_instance = instance;
  req.node_id = id;
  req.address = "10.0.0.7";
  req.cpus = 8;
  req.memory_mb = 1024;
  req.version = version;
  req.unhealthy = unhealthy;
  for (int i = 0; i < 2; ++i) {
    auto gpu = std::make_unique<wire::GpuInfoT>();
    gpu->index = i;
    req.gpus.push_back(std::move(gpu));
  }
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(wire::RegisterAgent::Pack(fbb, &req));
  nodes.Register(*flatbuffers::GetRoot<wire::RegisterAgent>(fbb.GetBufferPointer()), id, now_ms);
}

// A heartbeat saying what the health check and NVML find now, and whether the agent drains.
void Heartbeat(NodeRegistry& nodes, const std::string& id, int64_t now_ms,
               const std::string& unhealthy, std::map<int, std::string> unfit = {},
               bool draining = false) {
  wire::HeartbeatT beat;
  beat.node_id = id;
  beat.unhealthy = unhealthy;
  beat.draining = draining;
  for (auto& [index, why] : unfit) {
    auto gpu = std::make_unique<wire::UnhealthyGpuT>();
    gpu->index = index;
    gpu->reason = why;
    beat.unhealthy_gpus.push_back(std::move(gpu));
  }
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(wire::Heartbeat::Pack(fbb, &beat));
  ASSERT_TRUE(
      nodes.Heartbeat(*flatbuffers::GetRoot<wire::Heartbeat>(fbb.GetBufferPointer()), id, now_ms));
}

std::vector<std::string> Texts(const std::vector<NodeEvent>& events) {
  std::vector<std::string> texts;
  for (const NodeEvent& e : events) texts.push_back(e.text);
  return texts;
}

TEST(NodeEventsTest, TheRegistryTellsWhatHappenedToEachNodeInOrder) {
  NodeRegistry nodes(10'000);
  Register(nodes, "n", 1'000);
  Heartbeat(nodes, "n", 2'000, "");  // nothing new
  Heartbeat(nodes, "n", 3'000, "nvidia-smi failed", {{1, "XID 79"}});
  Heartbeat(nodes, "n", 4'000, "nvidia-smi failed", {{1, "XID 79"}});  // nothing new
  Heartbeat(nodes, "n", 5'000, "");
  ASSERT_TRUE(nodes.SetAdmin("n", NodeAdmin::kCordoned, {"PSU swap", "alice", 6'000}).ok());
  ASSERT_TRUE(nodes.SetAdmin("n", NodeAdmin::kCordoned, {"", "alice", 6'500}).ok());  // no change
  ASSERT_TRUE(nodes.CordonGpus("n", {0}, true, {"", "bob", 7'000}).ok());
  ASSERT_TRUE(nodes.EditLabels("n", {{"rack", "r7"}}, false, {"", "bob", 7'500}).ok());
  ASSERT_TRUE(nodes.SetAdmin("n", NodeAdmin::kNone, {"", "alice", 8'000}).ok());
  EXPECT_EQ(nodes.CheckLost(30'000).size(), 1u);
  Register(nodes, "n", 40'000);
  Register(nodes, "n", 41'000, "0.9.2");  // a live restart into a new agent
  Register(nodes, "n", 42'000, "0.9.2");  // the same again: nothing new
  Heartbeat(nodes, "n", 43'000, "", {}, /*draining=*/true);

  const std::vector<NodeEvent> events = nodes.EventsOf("n");
  EXPECT_EQ(Texts(events),
            (std::vector<std::string>{
                "registered: cohort-agent 0.9.1 at 10.0.0.7, 2 GPUs, 8 CPUs, 1024 MiB",
                "fails its health check: nvidia-smi failed", "GPU 1 unfit: XID 79",
                "passes its health check again", "GPU 1 fit again", "cordoned by alice: PSU swap",
                "GPU 0 cordoned by bob", "labels edited by bob: rack=r7", "uncordoned by alice",
                "LOST: no heartbeat for 25s (timeout 10s)",
                "registered again (cohort-agent 0.9.1), 35s after it was last heard",
                "its agent is now cohort-agent 0.9.2 (was 0.9.1)",
                "its agent is shutting down: nothing new is placed there"}));
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].seq, static_cast<int64_t>(i + 1));
  EXPECT_EQ(events[5].time_ms, 6'000);
  EXPECT_EQ(events[9].time_ms, 30'000);
  // Every one is queued for the commit, in order; once stored, none.
  const auto pending = nodes.PendingEvents();
  ASSERT_EQ(pending.size(), events.size());
  EXPECT_EQ(pending.front().first, "n");
  EXPECT_EQ(pending.back().second, events.back());
  nodes.EventsStored();
  EXPECT_TRUE(nodes.PendingEvents().empty());
}

// An agent process that started since the coordinator last heard of its node is told apart from
// the same process registering again (a link that broke, the coordinator's restart) by its uptime,
// by the coordinator's own clock: a quick stop and start or crash, one with a new version, one
// that made its node LOST, and one while the coordinator itself was down. Registrations of one
// process that arrive late by less than the slack (5 s) are not taken for a restart.
TEST(NodeEventsTest, AnAgentThatStartedAgainIsToldFromOneThatRegistersAgain) {
  NodeRegistry nodes(30'000);
  auto register_up = [&](int64_t now_ms, int64_t uptime_ms, const std::string& version = "0.9.1") {
    Register(nodes, "n", now_ms, version, "", uptime_ms);
  };
  register_up(100'000, 2'000);            // started at 98 s
  register_up(110'000, 11'000);           // the same one, re-registering (a broken link)
  register_up(120'000, 18'000);           // the same, its registration 4 s late: not told
  register_up(130'000, 3'000);            // started at 127 s: a stop and start
  register_up(150'000, 4'000, "0.9.2");   // an upgrade by restart
  register_up(160'000, 14'000, "0.9.2");  // nothing new
  EXPECT_EQ(nodes.CheckLost(200'000).size(), 1u);
  register_up(230'000, 3'000, "0.9.2");  // back from LOST, started again
  register_up(240'000, 0, "0.9.2");      // an agent that gives no uptime: not told
  EXPECT_EQ(Texts(nodes.EventsOf("n")),
            (std::vector<std::string>{
                "registered: cohort-agent 0.9.1 at 10.0.0.7, 2 GPUs, 8 CPUs, 1024 MiB",
                "its agent started again 3.0s ago (cohort-agent 0.9.1), 10s after it was last "
                "heard",
                "its agent started again 4.0s ago (cohort-agent 0.9.2, was 0.9.1), 20s after it "
                "was last heard",
                "LOST: no heartbeat for 40s (timeout 30s)",
                "registered again (cohort-agent 0.9.2, started 3.0s ago), 1m10s after it was "
                "last heard"}));

  // A coordinator restarted (a new registry, the history restored): the node's agent started
  // after its last event is told; one that ran since before it is not.
  NodeRegistry restarted(30'000);
  restarted.RestoreEvents({{"n", nodes.EventsOf("n")}, {"m", {{1, 1'000, "registered: ..."}}}});
  Register(restarted, "n", 300'000, "0.9.2", "", 60'000);   // started at 240 s: after 230 s
  Register(restarted, "m", 300'000, "0.9.2", "", 299'500);  // started at 0.5 s: before 1 s
  EXPECT_EQ(restarted.EventsOf("n").back().text,
            "its agent started 1m00s ago (cohort-agent 0.9.2), after the last event here: a start "
            "this coordinator did not see (it was not running, or not reached)");
  EXPECT_EQ(restarted.EventsOf("m").size(), 1u);
  EXPECT_EQ(restarted.FindReady("n")->agent_started_ms, 240'000);
}

// An agent that says which process it is is told apart by that, however soon it started again:
// systemd's RestartSec=2s restarts one within the 5 s that uptimes alone must allow; and the same
// process is never taken for a new one, however late its registration arrives. A crash loop at
// that pace folds into one event.
TEST(NodeEventsTest, AnAgentThatStartsAgainWithinSecondsIsToldByWhichProcessItIs) {
  NodeRegistry nodes(30'000);
  Register(nodes, "n", 100'000, "0.9.1", "", 2'000, "boot/41/100");  // started at 98 s
  Register(nodes, "n", 103'000, "0.9.1", "", 1'000, "boot/57/300");  // at 102 s: another process
  Register(nodes, "n", 120'000, "0.9.1", "", 9'000, "boot/57/300");  // the same one, 9 s late
  EXPECT_EQ(Texts(nodes.EventsOf("n")),
            (std::vector<std::string>{
                "registered: cohort-agent 0.9.1 at 10.0.0.7, 2 GPUs, 8 CPUs, 1024 MiB",
                "its agent started again 1.0s ago (cohort-agent 0.9.1), 3.0s after it was last "
                "heard"}));
  EXPECT_EQ(nodes.FindReady("n")->agent_started_ms, 102'000);
  int64_t now = 120'000;
  for (int i = 0; i < 10; ++i) {
    now += 3'000;
    Register(nodes, "n", now, "0.9.1", "", 1'000, "boot/" + std::to_string(100 + i) + "/1");
  }
  EXPECT_EQ(nodes.EventsOf("n").size(), 3u);
  EXPECT_EQ(nodes.EventsOf("n").back().text,
            "its agent started again 10 times since the event before; the last: its agent started "
            "again 1.0s ago (cohort-agent 0.9.1), 3.0s after it was last heard");
}

// An agent whose live restart was undone (the new binary failed its start and went back: the same
// process, the same version) says why at its next registration, which the history tells.
// Whatever the text holds, the event is printable and bounded.
TEST(NodeEventsTest, ALiveRestartUndoneIsToldWithWhy) {
  NodeRegistry nodes(30'000);
  Register(nodes, "n", 100'000, "0.9.1", "", 2'000, "boot/41/100");
  Register(nodes, "n", 101'000, "0.9.1", "", 3'000, "boot/41/100",
           "cohort-agent 0.9.2 failed its start: UNAVAILABLE: --http-endpoint: cannot bind");
  EXPECT_EQ(
      Texts(nodes.EventsOf("n")),
      (std::vector<std::string>{
          "registered: cohort-agent 0.9.1 at 10.0.0.7, 2 GPUs, 8 CPUs, 1024 MiB",
          "its agent's live restart was undone: cohort-agent 0.9.2 failed its start: "
          "UNAVAILABLE: --http-endpoint: cannot bind; it runs cohort-agent 0.9.1 as before"}));
  // Told twice (a registration repeated before its answer came): one event.
  Register(nodes, "n", 101'100, "0.9.1", "", 3'100, "boot/41/100",
           "cohort-agent 0.9.2 failed its start: UNAVAILABLE: --http-endpoint: cannot bind");
  EXPECT_EQ(nodes.EventsOf("n").size(), 2u);
  Register(nodes, "n", 102'000, "0.9.1", "", 4'000, "boot/41/100",
           "x\x01\xff" + std::string(100'000, 'y'));
  const std::string hostile = nodes.EventsOf("n").back().text;
  EXPECT_TRUE(hostile.starts_with("its agent's live restart was undone: x")) << hostile;
  EXPECT_LT(hostile.size(), 1'000u);  // kMaxAgentTextBytes of it
  EXPECT_EQ(ValidUtf8(hostile, /*printable=*/true), hostile);
}

// A health check or a GPU that keeps failing and passing again folds into one event, rewritten in
// place under its seq (queued once for the store), while each change comes within 10 minutes of
// the one before; a change after a quiet spell, or of another subject in between, is told anew.
TEST(NodeEventsTest, AFlappingHealthCheckFoldsIntoOneEventInsteadOfFillingTheHistory) {
  NodeRegistry nodes(3'600'000);
  Register(nodes, "n", 1'000);
  nodes.EventsStored();
  int64_t now = 1'000;
  for (int i = 0; i < 30; ++i) {
    now += 60'000;
    Heartbeat(nodes, "n", now, i % 2 == 0 ? "fan failure" : "");
  }
  std::vector<NodeEvent> events = nodes.EventsOf("n");
  EXPECT_EQ(Texts(events),
            (std::vector<std::string>{
                "registered: cohort-agent 0.9.1 at 10.0.0.7, 2 GPUs, 8 CPUs, 1024 MiB",
                "fails its health check: fan failure",
                "its health check changed 29 times since the event before; the last: passes its "
                "health check again"}));
  EXPECT_EQ(events.back().seq, 3);
  EXPECT_EQ(events.back().time_ms, now);
  // The store gets the first change and the fold's newest text, once each.
  auto pending = nodes.PendingEvents();
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[1].second, events.back());

  // Stored, then the fold goes on: stored again under the same seq.
  nodes.EventsStored();
  now += 60'000;
  Heartbeat(nodes, "n", now, "fan failure");
  pending = nodes.PendingEvents();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].second.seq, 3);
  EXPECT_EQ(pending[0].second.text,
            "its health check changed 30 times since the event before; the last: fails its "
            "health check: fan failure");

  // A GPU's change between them ends the fold; after 11 quiet minutes a change is told as
  // itself; a GPU flapping folds the same way.
  const int64_t later = now + 11 * 60'000;
  Heartbeat(nodes, "n", now + 1'000, "fan failure", {{1, "XID 79"}});
  Heartbeat(nodes, "n", now + 2'000, "", {{1, "XID 79"}});
  Heartbeat(nodes, "n", later, "fan failure", {{1, "XID 79"}});
  Heartbeat(nodes, "n", later + 1'000, "fan failure");
  Heartbeat(nodes, "n", later + 2'000, "fan failure", {{1, "XID 79"}});
  Heartbeat(nodes, "n", later + 3'000, "fan failure");
  const std::vector<std::string> texts = Texts(nodes.EventsOf("n"));
  EXPECT_EQ(std::vector<std::string>(texts.begin() + 3, texts.end()),
            (std::vector<std::string>{
                "GPU 1 unfit: XID 79", "passes its health check again",
                "fails its health check: fan failure", "GPU 1 fit again",
                "GPU 1 changed 2 times since the event before; the last: GPU 1 fit again"}));
}

// An agent in a crash loop (systemd starting it again every few seconds, each run dying) folds
// as a flapping health check does: one event counting its starts, not one event per start.
TEST(NodeEventsTest, AnAgentInACrashLoopFoldsIntoOneEvent) {
  NodeRegistry nodes(30'000);
  Register(nodes, "n", 100'000, "0.9.1", "", 2'000);
  int64_t now = 100'000;
  for (int i = 0; i < 20; ++i) {
    now += 12'000;
    Register(nodes, "n", now, "0.9.1", "", 3'000);  // started 3 s ago, 9 s after the last
  }
  EXPECT_EQ(Texts(nodes.EventsOf("n")),
            (std::vector<std::string>{
                "registered: cohort-agent 0.9.1 at 10.0.0.7, 2 GPUs, 8 CPUs, 1024 MiB",
                "its agent started again 3.0s ago (cohort-agent 0.9.1), 12s after it was last "
                "heard",
                "its agent started again 19 times since the event before; the last: its agent "
                "started again 3.0s ago (cohort-agent 0.9.1), 12s after it was last heard"}));
  // Starting again after a quiet spell is told anew.
  now += 11 * 60'000;
  Register(nodes, "n", now, "0.9.1", "", 3'000);
  EXPECT_EQ(nodes.EventsOf("n").back().text,
            "its agent started again 3.0s ago (cohort-agent 0.9.1), 11m00s after it was last "
            "heard");
}

// A failed commit undoes the admins' changes of the pass, and their events with them; what the
// registry saw happen (a health check failing) stays queued.
TEST(NodeEventsTest, AFailedCommitDropsTheEventsOfTheChangesItUndid) {
  NodeRegistry nodes(10'000);
  Register(nodes, "n", 1'000);
  nodes.EventsStored();
  ASSERT_TRUE(nodes.SetAdmin("n", NodeAdmin::kDraining, {"rack move", "alice", 2'000}).ok());
  Heartbeat(nodes, "n", 2'500, "fan failure");
  nodes.AddAdminEvent("n", 3'000, "drain --now preempted its jobs: train");
  nodes.RevertSettings();
  EXPECT_EQ(Texts(nodes.EventsOf("n")),
            (std::vector<std::string>{
                "registered: cohort-agent 0.9.1 at 10.0.0.7, 2 GPUs, 8 CPUs, 1024 MiB",
                "fails its health check: fan failure"}));
  ASSERT_EQ(nodes.PendingEvents().size(), 1u);
  EXPECT_EQ(nodes.PendingEvents()[0].second.text, "fails its health check: fan failure");
}

// Restored events: at most kNodeEventsKept, the newest; a node LOST when the coordinator stopped
// that registers after its restart says it is back; one that was not says nothing; forget drops
// a node's history (and what was still queued of it) and is queued for the store.
TEST(NodeEventsTest, RestoredHistoryGoesOnAndForgetEndsIt) {
  NodeRegistry nodes(10'000);
  std::vector<NodeEvent> many;
  for (int i = 1; i <= 60; ++i) many.push_back({i, i * 1'000, "event " + std::to_string(i)});
  nodes.RestoreEvents({{"old", many},
                       {"lost", {{1, 1'000, "registered: ..."}, {2, 5'000, "LOST: no heartbeat"}}},
                       {"quiet", {{1, 1'000, "registered: ..."}}}});
  ASSERT_EQ(nodes.EventsOf("old").size(), kNodeEventsKept);
  EXPECT_EQ(nodes.EventsOf("old").front().seq, 11);
  Register(nodes, "lost", 65'000);
  Register(nodes, "quiet", 65'000);
  EXPECT_EQ(
      nodes.EventsOf("lost").back(),
      (NodeEvent{3, 65'000, "registered again (cohort-agent 0.9.1), 1m00s after it was LOST"}));
  EXPECT_EQ(nodes.EventsOf("quiet").size(), 1u);
  Register(nodes, "old", 66'000);
  EXPECT_EQ(nodes.EventsOf("old").size(), kNodeEventsKept);  // nothing new: it was not LOST
  EXPECT_EQ(nodes.CheckLost(80'000).size(), 3u);
  EXPECT_EQ(nodes.EventsOf("old").back().seq, 61);
  ASSERT_TRUE(nodes.Forget("old").ok());
  EXPECT_TRUE(nodes.EventsOf("old").empty());
  EXPECT_EQ(nodes.ForgottenNodes(), std::vector<std::string>{"old"});
  for (const auto& [id, e] : nodes.PendingEvents()) EXPECT_NE(id, "old") << e.text;
  nodes.EventsStored();
  EXPECT_TRUE(nodes.ForgottenNodes().empty());
}

class NodeEventsStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<StateStore> Open() {
    auto store = OpenStateStore(dir_.string(), {});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }
  // Opens the store, loads it and commits `changes`; returns the node events it loaded.
  std::map<std::string, std::vector<NodeEvent>> LoadAndCommit(const StateChanges& changes = {}) {
    auto store = Open();
    if (!store) return {};
    auto loaded = store->Load();
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_TRUE(store->Commit(changes).ok());
    return loaded.ok() ? loaded->node_events : std::map<std::string, std::vector<NodeEvent>>{};
  }
  cohort::testing::TempDir tmp_{"cohort-node-events"};
  const fs::path dir_ = tmp_.path();
};

// Stored events load back in order, a node's older than its newest kNodeEventsKept are gone, a
// row changed behind the store's back is left out (the rest load), and a forgotten node's go
// (before the pass's new ones are stored).
TEST_F(NodeEventsStoreTest, TheNewestEventsOfEachNodeAreKeptAndAForgottenNodesGo) {
  StateChanges first;
  for (int i = 1; i <= 70; ++i) {
    first.node_events.push_back({"a", {i, 1'000 + i, "event " + std::to_string(i)}});
  }
  first.node_events.push_back({"b", {1, 5'000, "registered: cohort-agent 0.9.1"}});
  first.node_events.push_back({"b", {2, 6'000, "cordoned by alice: PSU swap"}});
  LoadAndCommit(first);
  auto loaded = LoadAndCommit();
  ASSERT_EQ(loaded.size(), 2u);
  ASSERT_EQ(loaded["a"].size(), kNodeEventsKept);
  EXPECT_EQ(loaded["a"].front(), (NodeEvent{21, 1'021, "event 21"}));
  EXPECT_EQ(loaded["a"].back(), (NodeEvent{70, 1'070, "event 70"}));
  EXPECT_EQ(loaded["b"], (std::vector<NodeEvent>{{1, 5'000, "registered: cohort-agent 0.9.1"},
                                                 {2, 6'000, "cordoned by alice: PSU swap"}}));
  {
    auto db = SqliteDb::Open((dir_ / "state.db").string(), false);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)
                    ->Exec("UPDATE node_events SET text = 'nothing happened' WHERE node_id = 'b' "
                           "AND seq = 2")
                    .ok());
  }
  // `a` forgotten, then registered again in the same pass: only its new history is left.
  StateChanges forget;
  forget.forgotten_nodes = {"a"};
  forget.node_events = {{"a", {1, 9'000, "registered: cohort-agent 0.9.2"}}};
  loaded = LoadAndCommit(forget);
  EXPECT_EQ(loaded["b"], (std::vector<NodeEvent>{{1, 5'000, "registered: cohort-agent 0.9.1"}}));
  loaded = LoadAndCommit();
  EXPECT_EQ(loaded["a"], (std::vector<NodeEvent>{{1, 9'000, "registered: cohort-agent 0.9.2"}}));
  EXPECT_EQ(loaded.size(), 2u);
}

// A flap's fold, rewritten under its seq pass after pass, is one row holding its newest text.
TEST_F(NodeEventsStoreTest, AFoldRewrittenUnderItsSeqIsStoredAsItsNewestText) {
  NodeRegistry nodes(3'600'000);
  Register(nodes, "n", 1'000);
  for (int i = 0; i < 5; ++i) {
    Heartbeat(nodes, "n", 2'000 + i * 1'000, i % 2 == 0 ? "fan failure" : "");
    StateChanges pass;
    pass.node_events = nodes.PendingEvents();
    LoadAndCommit(pass);
    nodes.EventsStored();
  }
  auto loaded = LoadAndCommit();
  EXPECT_EQ(loaded["n"], nodes.EventsOf("n"));
  ASSERT_EQ(loaded["n"].size(), 3u);
  EXPECT_EQ(loaded["n"].back().text,
            "its health check changed 4 times since the event before; the last: fails its health "
            "check: fan failure");
}

}  // namespace
}  // namespace cohort::coordinator
