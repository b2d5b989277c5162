// The coordinator's side of the day-2 operations (issue 16 part 4), in process: the registry's
// admin settings (cordon, drain, forget, their rollback), the placement view leaving cordoned and
// draining nodes out, the state store keeping the settings and deleting a job's every row (and
// migrating a database of the previous schema), the job controller's delete, and a study's cancel
// journaled and replayed.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "coordinator/job_controller.h"
#include "coordinator/node_registry.h"
#include "coordinator/placement_round.h"
#include "coordinator/sqlite_db.h"
#include "coordinator/sqlite_state_store.h"
#include "coordinator/state_store.h"
#include "coordinator/study_controller.h"
#include "tests/testing/process.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;

class NoHealth : public NodeHealth {
 public:
  std::optional<int64_t> LastHeardMs(const std::string&) const override { return 0; }
};

NodeRecord* Register(NodeRegistry& nodes, const std::string& id, int64_t now_ms, int cpus = 4,
                     const NodeLabels& labels = {}) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<wire::KeyValue>> kvs;
  for (const auto& [key, value] : labels) {
    kvs.push_back(wire::CreateKeyValueDirect(fbb, key.c_str(), value.c_str()));
  }
  fbb.Finish(wire::CreateRegisterAgentDirect(fbb, id.c_str(), nullptr, nullptr, cpus, 1024,
                                             labels.empty() ? nullptr : &kvs));
  return nodes
      .Register(*flatbuffers::GetRoot<wire::RegisterAgent>(fbb.GetBufferPointer()), id, now_ms)
      .node;
}

TEST(NodeAdminTest, SettingsSurviveReRegistrationAndAreQueuedForTheStore) {
  NodeRegistry nodes(10'000);
  Register(nodes, "a", 1);
  Register(nodes, "b", 1);
  EXPECT_EQ(nodes.SetAdmin("nope", NodeAdmin::kCordoned, {}).code(), StatusCode::kNotFound);
  ASSERT_TRUE(nodes.SetAdmin("a", NodeAdmin::kCordoned, {}).ok());
  EXPECT_FALSE(nodes.Find("a")->schedulable());
  EXPECT_TRUE(nodes.Find("b")->schedulable());
  EXPECT_EQ(nodes.PendingSettings(),
            (std::map<std::string, NodeSettings>{{"a", {NodeAdmin::kCordoned, {}}}}));
  nodes.SettingsStored();
  EXPECT_TRUE(nodes.PendingSettings().empty());

  // The agent registers again (a restart of it): still cordoned.
  Register(nodes, "a", 2);
  EXPECT_EQ(nodes.Find("a")->admin, NodeAdmin::kCordoned);
  EXPECT_EQ(NodeStateName(*nodes.Find("a"), false), "CORDONED");

  // Drain: DRAINING while replicas hold resources there, DRAINED after.
  ASSERT_TRUE(nodes.SetAdmin("b", NodeAdmin::kDraining, {}).ok());
  EXPECT_EQ(NodeStateName(*nodes.Find("b"), true), "DRAINING");
  EXPECT_EQ(NodeStateName(*nodes.Find("b"), false), "DRAINED");
  EXPECT_EQ(NodeAdminLabel(*nodes.Find("b"), false), "drained");
  // A failed commit puts the settings back as they were.
  nodes.RevertSettings();
  EXPECT_EQ(nodes.Find("b")->admin, NodeAdmin::kNone);
  EXPECT_TRUE(nodes.PendingSettings().empty());

  // Uncordon: the stored row goes (kNone in the changes).
  ASSERT_TRUE(nodes.SetAdmin("a", NodeAdmin::kNone, {}).ok());
  EXPECT_EQ(nodes.PendingSettings(), (std::map<std::string, NodeSettings>{{"a", {}}}));
  EXPECT_TRUE(nodes.Find("a")->schedulable());
}

// An admin's label edits: over the agent's labels (set, overwrite, remove), kept across the
// agent's re-registration with other labels, queued for the store, undone by a failed commit, and
// refused whole past the label limit.
TEST(NodeAdminTest, LabelEditsApplyOverTheAgentsLabelsAndOutliveItsReRegistration) {
  NodeRegistry nodes(10'000);
  Register(nodes, "a", 1, 4, {{"gpu", "a100"}, {"zone", "east"}});
  const uint64_t version = nodes.capacity_version();
  EXPECT_EQ(nodes.EditLabels("nope", {{"gpu", "h100"}}, false, {}).code(), StatusCode::kNotFound);
  ASSERT_TRUE(
      nodes.EditLabels("a", {{"gpu", "h100"}, {"zone", std::nullopt}, {"rack", "r7"}}, false, {})
          .ok());
  EXPECT_EQ(nodes.Find("a")->labels, (NodeLabels{{"gpu", "h100"}, {"rack", "r7"}}));
  EXPECT_GT(nodes.capacity_version(), version) << "what is derived from the labels is rebuilt";
  EXPECT_EQ(
      nodes.PendingSettings(),
      (std::map<std::string, NodeSettings>{
          {"a", {NodeAdmin::kNone, {{"gpu", "h100"}, {"rack", "r7"}, {"zone", std::nullopt}}}}}));
  nodes.SettingsStored();

  // The agent comes back with other labels: the edits still apply over them.
  Register(nodes, "a", 2, 4, {{"gpu", "a100"}, {"zone", "west"}, {"ssd", "yes"}});
  EXPECT_EQ(nodes.Find("a")->labels, (NodeLabels{{"gpu", "h100"}, {"rack", "r7"}, {"ssd", "yes"}}));
  EXPECT_EQ(nodes.Find("a")->agent_labels.at("zone"), "west");

  // A later edit merges; a failed commit puts the labels back.
  ASSERT_TRUE(nodes.EditLabels("a", {{"rack", std::nullopt}}, false, {}).ok());
  EXPECT_EQ(nodes.Find("a")->labels, (NodeLabels{{"gpu", "h100"}, {"ssd", "yes"}}));
  nodes.RevertSettings();
  EXPECT_EQ(nodes.Find("a")->labels, (NodeLabels{{"gpu", "h100"}, {"rack", "r7"}, {"ssd", "yes"}}));

  // More labels than a node may carry: refused whole, nothing changed, nothing queued.
  NodeLabelEdits many;
  for (int i = 0; i < 31; ++i) many["k" + std::to_string(i)] = "v";
  const Status refused = nodes.EditLabels("a", many, false, {});
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("would keep edits of 34 label keys (at most 32)"),
            std::string::npos)
      << refused.ToString();
  EXPECT_EQ(nodes.Find("a")->labels.size(), 3u);
  EXPECT_TRUE(nodes.PendingSettings().empty());
  NodeLabels full;
  for (int i = 0; i < 32; ++i) full["k" + std::to_string(i)] = "v";
  Register(nodes, "b", 1, 4, full);
  const Status over = nodes.EditLabels("b", {{"one", "more"}}, false, {});
  EXPECT_NE(over.message().find("would carry 33 labels (at most 32)"), std::string::npos)
      << over.ToString();
  ASSERT_TRUE(nodes.EditLabels("b", {{"one", "more"}, {"k0", std::nullopt}}, false, {}).ok());
  EXPECT_EQ(nodes.Find("b")->labels.size(), 32u);
  nodes.SettingsStored();

  // --reset: the agent's labels again; the stored row goes (with no cordon either).
  ASSERT_TRUE(nodes.EditLabels("a", {}, /*reset=*/true, {}).ok());
  EXPECT_EQ(nodes.Find("a")->labels, nodes.Find("a")->agent_labels);
  EXPECT_EQ(nodes.PendingSettings(), (std::map<std::string, NodeSettings>{{"a", {}}}));
}

// CheckLost skips its walk until a deadline may have passed: every node is still found LOST at
// the first check past its own timeout, whatever was heard from the others or registered since.
TEST(NodeLossTest, EachNodeIsLostAtTheFirstCheckPastItsOwnTimeout) {
  NodeRegistry nodes(1000);
  Register(nodes, "a", 0);
  Register(nodes, "b", 0);
  EXPECT_TRUE(nodes.CheckLost(0).empty());
  EXPECT_TRUE(nodes.CheckLost(1000).empty());  // silent for exactly the timeout: not yet
  nodes.Touch(*nodes.FindReady("a"), 900);
  auto lost = nodes.CheckLost(1001);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].first, "b");
  Register(nodes, "c", 1500);
  EXPECT_TRUE(nodes.CheckLost(1900).empty());
  lost = nodes.CheckLost(1901);
  ASSERT_EQ(lost.size(), 1u);  // a, heard at 900
  EXPECT_EQ(lost[0].first, "a");
  EXPECT_EQ(nodes.FindReady("a"), nullptr);
  EXPECT_TRUE(nodes.CheckLost(2500).empty());
  ASSERT_EQ(nodes.CheckLost(2501).size(), 1u);  // c, registered at 1500
  // Nothing READY: nothing to find, until a node registers again.
  EXPECT_TRUE(nodes.CheckLost(100'000).empty());
  Register(nodes, "b", 100'000);
  EXPECT_TRUE(nodes.CheckLost(101'000).empty());
  ASSERT_EQ(nodes.CheckLost(101'001).size(), 1u);
}

// Each LOST node keeps its loss as recorded, which the coordinator applies again after a
// rolled-back pass: a node that fell silent, since its last heartbeat (launches sent after it never
// ran); a node whose session was ended while it answered (a removed key), with no such time (they
// ran).
TEST(NodeLossTest, ALostNodeKeepsHowItWasLostUntilItRegistersAgain) {
  NodeRegistry nodes(1000);
  Register(nodes, "silent", 0);
  Register(nodes, "revoked", 0);
  nodes.Touch(*nodes.FindReady("silent"), 400);
  nodes.Touch(*nodes.FindReady("revoked"), 1400);
  ASSERT_TRUE(nodes.EndSession("revoked", "its agent's key was removed: gone", 5));
  EXPECT_FALSE(nodes.EndSession("revoked", "again", 6)) << "not READY: nothing to end";
  auto lost = nodes.CheckLost(1500);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].first, "silent");

  const NodeRecord& silent = *nodes.Find("silent");
  EXPECT_EQ(silent.lost_why, lost[0].second);
  EXPECT_NE(silent.lost_why.find("no heartbeat for"), std::string::npos) << silent.lost_why;
  EXPECT_EQ(silent.silent_since_ms(), std::optional<int64_t>(400));
  const NodeRecord& revoked = *nodes.Find("revoked");
  EXPECT_EQ(revoked.lost_why, "its agent's key was removed: gone");
  EXPECT_EQ(revoked.silent_since_ms(), std::nullopt);
  EXPECT_EQ(revoked.peer, "");

  Register(nodes, "revoked", 2000);
  EXPECT_TRUE(nodes.Find("revoked")->ready);
  EXPECT_EQ(nodes.Find("revoked")->lost_why, "");
  EXPECT_EQ(nodes.Find("revoked")->silent_since_ms(), std::optional<int64_t>(2000));
}

TEST(NodeAdminTest, StoredSettingsApplyWhenTheNodeRegistersAndForgetTakesOnlyLostNodes) {
  NodeRegistry nodes(1000);
  nodes.RestoreSettings(
      {{"a", {NodeAdmin::kDraining, {}}}, {"ghost", {NodeAdmin::kCordoned, {{"gpu", "h100"}}}}});
  EXPECT_EQ(Register(nodes, "a", 1)->admin, NodeAdmin::kDraining);
  EXPECT_TRUE(nodes.PendingSettings().empty());  // restored, not changed

  EXPECT_EQ(nodes.Forget("a").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(nodes.Forget("nope").code(), StatusCode::kNotFound);
  ASSERT_EQ(nodes.CheckLost(5000).size(), 1u);
  ASSERT_TRUE(nodes.Forget("a").ok());
  EXPECT_EQ(nodes.Find("a"), nullptr);
  EXPECT_TRUE(nodes.SettingsOf("a").empty());
  // A setting of a node that has not registered since the restart can be changed or forgotten.
  ASSERT_TRUE(nodes.SetAdmin("ghost", NodeAdmin::kNone, {}).ok());
  EXPECT_EQ(nodes.SettingsOf("ghost"), (NodeSettings{NodeAdmin::kNone, {{"gpu", "h100"}}}));
  ASSERT_TRUE(nodes.EditLabels("ghost", {}, /*reset=*/true, {}).ok());
  EXPECT_EQ(nodes.Forget("ghost").code(), StatusCode::kNotFound);
  EXPECT_EQ(nodes.PendingSettings(),
            (std::map<std::string, NodeSettings>{{"a", {}}, {"ghost", {}}}));
}

// A node of `gpus` GPUs, as its agent registers it.
NodeRecord* RegisterWithGpus(NodeRegistry& nodes, const std::string& id, int gpus, int64_t now_ms) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<wire::GpuInfo>> infos;
  for (int i = 0; i < gpus; ++i) infos.push_back(wire::CreateGpuInfoDirect(fbb, i, "H100", 81559));
  fbb.Finish(wire::CreateRegisterAgentDirect(fbb, id.c_str(), nullptr, &infos, 8, 1024));
  return nodes
      .Register(*flatbuffers::GetRoot<wire::RegisterAgent>(fbb.GetBufferPointer()), id, now_ms)
      .node;
}

// `cohort cordon NODE --gpu N`: those GPUs leave the placement view (the node's others stay), the
// setting outlives the agent's re-registration and is queued for the store; a GPU the node does
// not have is refused, and so is a cordon of a node whose GPUs are not known yet.
TEST(NodeAdminTest, GpusCordonedAloneLeaveThePlacementViewAndTheNodeStays) {
  NodeRegistry nodes(10'000);
  RegisterWithGpus(nodes, "g", 4, 1);
  const uint64_t version = nodes.capacity_version();
  ASSERT_TRUE(nodes.CordonGpus("g", {1, 3}, true, {}).ok());
  EXPECT_EQ(nodes.Find("g")->cordoned_gpus, (std::set<int>{1, 3}));
  EXPECT_GT(nodes.capacity_version(), version);
  EXPECT_TRUE(nodes.Find("g")->schedulable());
  EXPECT_EQ(NodeStateName(*nodes.Find("g"), false), "READY");
  EXPECT_EQ(nodes.PendingSettings(),
            (std::map<std::string, NodeSettings>{{"g", {NodeAdmin::kNone, {}, {1, 3}}}}));
  nodes.SettingsStored();
  const Status none = nodes.CordonGpus("g", {4}, true, {});
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(none.message(), "node g has 4 GPUs (0-3): 4 is none of them");
  EXPECT_EQ(nodes.CordonGpus("nope", {0}, true, {}).code(), StatusCode::kNotFound);

  NoHealth health;
  JobController jobs(JobControllerOptions{}, &health);
  NodeIndex index;
  ClusterView view = BuildClusterView(nodes, jobs, QueueConfig(), 20000, 29999, &index);
  ASSERT_EQ(view.nodes.size(), 1u);
  EXPECT_EQ(view.nodes[0].free_gpus, (std::vector<int>{0, 2}));
  EXPECT_EQ(view.nodes[0].cordoned_gpus, 2);

  // The agent registers again: still cordoned. Uncordoning one leaves the other.
  RegisterWithGpus(nodes, "g", 4, 2);
  EXPECT_EQ(nodes.Find("g")->cordoned_gpus, (std::set<int>{1, 3}));
  ASSERT_TRUE(nodes.CordonGpus("g", {3}, false, {}).ok());
  EXPECT_EQ(nodes.Find("g")->cordoned_gpus, std::set<int>{1});
  nodes.RevertSettings();  // a failed commit
  EXPECT_EQ(nodes.Find("g")->cordoned_gpus, (std::set<int>{1, 3}));

  // Restored for a node not registered since: its GPUs may be uncordoned, not cordoned.
  nodes.RestoreSettings({{"ghost", {NodeAdmin::kNone, {}, {0}}}});
  EXPECT_EQ(nodes.CordonGpus("ghost", {1}, true, {}).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(nodes.CordonGpus("ghost", {0}, false, {}).ok());
  EXPECT_TRUE(nodes.SettingsOf("ghost").empty());
}

// `--reason`: a cordon keeps a note of why, who and since when; a later cordon or drain with a
// reason replaces it and one without keeps it (its first time still tells how long the node has
// been out); the note lasts while anything of the node (its GPUs too) is cordoned, is stored with
// the settings, comes back with the agent's re-registration, and goes with the last uncordon.
TEST(NodeAdminTest, ACordonKeepsWhyWhoAndSinceUntilNothingOfTheNodeIsCordoned) {
  NodeRegistry nodes(10'000);
  RegisterWithGpus(nodes, "n", 4, 1);
  ASSERT_TRUE(nodes.SetAdmin("n", NodeAdmin::kCordoned, {"PSU swap", "alice", 1000}).ok());
  EXPECT_EQ(nodes.Find("n")->cordon_note, (CordonNote{"PSU swap", "alice", 1000}));
  EXPECT_EQ(nodes.PendingSettings().at("n").note, (CordonNote{"PSU swap", "alice", 1000}));
  nodes.SettingsStored();

  // A drain without a reason keeps the note; one with a reason replaces it.
  ASSERT_TRUE(nodes.SetAdmin("n", NodeAdmin::kDraining, {"", "bob", 2000}).ok());
  EXPECT_EQ(nodes.Find("n")->cordon_note, (CordonNote{"PSU swap", "alice", 1000}));
  ASSERT_TRUE(nodes.SetAdmin("n", NodeAdmin::kDraining, {"PSU and fans", "bob", 3000}).ok());
  EXPECT_EQ(nodes.Find("n")->cordon_note, (CordonNote{"PSU and fans", "bob", 3000}));
  // A cordon already there, asked again without a reason, changes nothing to store.
  nodes.SettingsStored();
  ASSERT_TRUE(nodes.SetAdmin("n", NodeAdmin::kDraining, {"", "carol", 4000}).ok());
  EXPECT_TRUE(nodes.PendingSettings().empty());

  // A failed commit puts the note back with the rest.
  ASSERT_TRUE(nodes.SetAdmin("n", NodeAdmin::kDraining, {"rack move", "carol", 5000}).ok());
  nodes.RevertSettings();
  EXPECT_EQ(nodes.Find("n")->cordon_note, (CordonNote{"PSU and fans", "bob", 3000}));

  // A GPU still cordoned keeps the note after the node's own uncordon; the agent's
  // re-registration brings it back; the last uncordon drops it and the stored row.
  ASSERT_TRUE(nodes.CordonGpus("n", {2}, true, {"", "dave", 6000}).ok());
  ASSERT_TRUE(nodes.SetAdmin("n", NodeAdmin::kNone, {"", "dave", 7000}).ok());
  EXPECT_EQ(nodes.Find("n")->cordon_note, (CordonNote{"PSU and fans", "bob", 3000}));
  RegisterWithGpus(nodes, "n", 4, 2);
  EXPECT_EQ(nodes.Find("n")->cordon_note, (CordonNote{"PSU and fans", "bob", 3000}));
  nodes.SettingsStored();
  ASSERT_TRUE(nodes.CordonGpus("n", {2}, false, {"", "dave", 8000}).ok());
  EXPECT_TRUE(nodes.Find("n")->cordon_note.empty());
  EXPECT_EQ(nodes.PendingSettings(), (std::map<std::string, NodeSettings>{{"n", {}}}));

  // A first cordon without a reason still says who and since when; a GPU cordon with a reason.
  ASSERT_TRUE(nodes.SetAdmin("n", NodeAdmin::kCordoned, {"", "erin", 9000}).ok());
  EXPECT_EQ(nodes.Find("n")->cordon_note, (CordonNote{"", "erin", 9000}));
  ASSERT_TRUE(nodes.SetAdmin("n", NodeAdmin::kNone, {"", "erin", 9500}).ok());
  ASSERT_TRUE(nodes.CordonGpus("n", {0, 1}, true, {"XID 79 on GPU 0 and 1", "frank", 10'000}).ok());
  EXPECT_EQ(nodes.Find("n")->cordon_note, (CordonNote{"XID 79 on GPU 0 and 1", "frank", 10'000}));
}

TEST(NodeAdminTest, ACordonReasonIsShortPrintableText) {
  EXPECT_TRUE(CheckCordonReason("").ok());
  EXPECT_TRUE(CheckCordonReason("GPU 3: 12 ECC errors — RMA ticket #4411").ok());
  EXPECT_TRUE(CheckCordonReason(std::string(kMaxCordonReasonBytes, 'x')).ok());
  const Status long_reason = CheckCordonReason(std::string(kMaxCordonReasonBytes + 1, 'x'));
  EXPECT_EQ(long_reason.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(long_reason.message(), "the reason has 257 bytes; at most 256 are kept");
  for (const std::string& bad : {std::string("two\nlines"), std::string("\x1b[31mred"),
                                 std::string("tab\there"), std::string("bad \xff byte")}) {
    const Status refused = CheckCordonReason(bad);
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.message().find("printable UTF-8"), std::string::npos) << refused.ToString();
  }
}

TEST(NodeAdminTest, ThePlacementViewLeavesCordonedAndDrainingNodesOut) {
  NodeRegistry nodes(10'000);
  for (const char* id : {"a", "b", "c"}) Register(nodes, id, 1);
  ASSERT_TRUE(nodes.SetAdmin("a", NodeAdmin::kCordoned, {}).ok());
  ASSERT_TRUE(nodes.SetAdmin("c", NodeAdmin::kDraining, {}).ok());
  NoHealth health;
  JobController jobs(JobControllerOptions{}, &health);
  NodeIndex index;
  ClusterView view = BuildClusterView(nodes, jobs, QueueConfig(), 20000, 29999, &index);
  ASSERT_EQ(view.nodes.size(), 1u);
  EXPECT_EQ(view.nodes[0].node_id, "b");
  EXPECT_EQ(index.at("a").node, -1);
  EXPECT_EQ(index.at("b").node, 0);
  EXPECT_EQ(index.at("c").node, -1);
}

TEST(JobDeleteTest, OnlyAFinishedJobIsDeletedAndItsNameIsFreeAgain) {
  NoHealth health;
  JobController jobs(JobControllerOptions{}, &health);
  const std::string yaml =
      "name: j-1\nworker_pools: [{role: chief, replicas: 1, process: {command: [/bin/x]}}]\n";
  auto spec = ParseJobSpec(yaml);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobRecord& job = jobs.Submit(*spec, yaml, 1);
  jobs.TakeDirty();
  Status refused = jobs.Delete("j-1");
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("QUEUED"), std::string::npos) << refused.ToString();
  EXPECT_EQ(jobs.Delete("nope").code(), StatusCode::kNotFound);

  jobs.Cancel(job, "test", 2);  // never placed: CANCELLED at once
  ASSERT_TRUE(jobs.FindJob("j-1")->finished());
  ASSERT_TRUE(jobs.Delete("j-1").ok());
  EXPECT_EQ(jobs.FindJob("j-1"), nullptr);
  EXPECT_TRUE(jobs.active().empty());
  EXPECT_EQ(jobs.TakeDeleted(), std::vector<std::string>{"j-1"});
  EXPECT_EQ(jobs.TakeDirty().count("j-1"), 1u);  // a failed commit reads it back
  jobs.Submit(*spec, yaml, 3);
  EXPECT_NE(jobs.FindJob("j-1"), nullptr);
}

class Day2StoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<StateStore> Open() {
    auto store = OpenStateStore(dir_.string(), {});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }
  int64_t Count(const std::string& sql) {
    auto db = SqliteDb::Open((dir_ / "state.db").string(), false);
    EXPECT_TRUE(db.ok());
    auto n = (*db)->QueryInt(sql);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? *n : -1;
  }
  // Runs `sql` on the database behind the store's back (no store open).
  void Exec(const std::string& sql) {
    auto db = SqliteDb::Open((dir_ / "state.db").string(), false);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec(sql).ok()) << sql;
  }
  // Opens the store, loads it and commits `changes`; returns the node settings it loaded.
  std::map<std::string, NodeSettings> LoadAndCommit(const StateChanges& changes = {}) {
    auto store = Open();
    if (!store) return {};
    auto loaded = store->Load();
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_TRUE(store->Commit(changes).ok());
    return loaded.ok() ? loaded->node_settings : std::map<std::string, NodeSettings>{};
  }
  cohort::testing::TempDir tmp_{"cohort-day2-store"};
  const fs::path dir_ = tmp_.path();
};

TEST_F(Day2StoreTest, NodeSettingsSurviveReopenAndUncordonRemovesThem) {
  {
    auto store = Open();
    ASSERT_TRUE(store && store->Load().ok());
    StateChanges c;
    c.node_settings = {{"a", {NodeAdmin::kCordoned, {}}},
                       {"b", {NodeAdmin::kDraining, {}}},
                       {"c", {NodeAdmin::kNone, {{"gpu", "h100"}, {"zone", std::nullopt}}}}};
    ASSERT_TRUE(store->Commit(c).ok());
    StateChanges c2;
    c2.node_settings = {{"b", {}}};
    ASSERT_TRUE(store->Commit(c2).ok());
  }
  auto store = Open();
  ASSERT_TRUE(store);
  auto loaded = store->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->node_settings,
            (std::map<std::string, NodeSettings>{
                {"a", {NodeAdmin::kCordoned, {}}},
                {"c", {NodeAdmin::kNone, {{"gpu", "h100"}, {"zone", std::nullopt}}}}}));
}

// A cordon stored before label edits (schema 8: no labels column) verifies after the migration;
// label edits changed behind the store's back are damage: that node's row is dropped, the rest
// load.
TEST_F(Day2StoreTest, ACordonFromBeforeLabelEditsLoadsAndEditedEditsAreDropped) {
  const std::map<std::string, NodeSettings> old_cordon = {{"old", {NodeAdmin::kCordoned, {}}}};
  StateChanges cordon;
  cordon.node_settings = old_cordon;
  LoadAndCommit(cordon);
  ASSERT_NO_FATAL_FAILURE(Exec(
      "ALTER TABLE node_admin DROP COLUMN gpus; ALTER TABLE node_admin DROP COLUMN labels; "
      "ALTER TABLE jobs DROP COLUMN first_running_ms; ALTER TABLE node_admin DROP COLUMN "
      "note_reason; "
      "ALTER TABLE node_admin DROP COLUMN note_by; ALTER TABLE node_admin DROP COLUMN note_ms; "
      "DROP TABLE node_events; PRAGMA user_version = 8"));
  StateChanges label;
  label.node_settings = {{"new", {NodeAdmin::kNone, {{"gpu", "h100"}}}}};
  EXPECT_EQ(LoadAndCommit(label), old_cordon);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM node_admin WHERE labels = 'gpu=h100'"), 1);
  ASSERT_NO_FATAL_FAILURE(Exec("UPDATE node_admin SET labels = 'gpu=h200' WHERE node_id = 'new'"));
  EXPECT_EQ(LoadAndCommit(), old_cordon);
}

// A cordon's note is stored with the node's settings and survives a reopen; a row stored before
// the note's columns (schema 11) verifies after the migration; a reason or author changed behind
// the store's back is damage: that node's row is dropped, the rest load.
TEST_F(Day2StoreTest, ACordonNoteIsStoredAndARowFromBeforeNotesStillVerifies) {
  const std::map<std::string, NodeSettings> old_rows = {
      {"old", {NodeAdmin::kCordoned, {{"zone", "a"}}, {1}}}};
  StateChanges before;
  before.node_settings = old_rows;
  LoadAndCommit(before);
  ASSERT_NO_FATAL_FAILURE(
      Exec("ALTER TABLE node_admin DROP COLUMN note_reason; ALTER TABLE node_admin DROP COLUMN "
           "note_by; ALTER TABLE node_admin DROP COLUMN note_ms; DROP TABLE node_events; "
           "PRAGMA user_version = 11"));
  StateChanges noted;
  noted.node_settings = {
      {"psu", {NodeAdmin::kDraining, {}, {}, {"PSU swap", "alice", 1'764'964'800'000}}},
      {"gpu", {NodeAdmin::kNone, {}, {3}, {"", "bob", 1'764'964'900'000}}}};
  EXPECT_EQ(LoadAndCommit(noted), old_rows);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM node_admin WHERE note_reason = 'PSU swap' AND note_by = "
                  "'alice'"),
            1);
  std::map<std::string, NodeSettings> all = old_rows;
  all.insert(noted.node_settings.begin(), noted.node_settings.end());
  EXPECT_EQ(LoadAndCommit(), all);
  ASSERT_NO_FATAL_FAILURE(
      Exec("UPDATE node_admin SET note_reason = 'nothing wrong' WHERE node_id = 'psu'; "
           "UPDATE node_admin SET note_by = 'mallory' WHERE node_id = 'gpu'"));
  EXPECT_EQ(LoadAndCommit(), old_rows);
}

// GPUs cordoned alone are stored with the node's other settings; a row stored before the column
// (schema 9) verifies after the migration; GPUs changed behind the store's back are damage.
TEST_F(Day2StoreTest, CordonedGpusAreStoredAndARowFromBeforeThemStillVerifies) {
  const std::map<std::string, NodeSettings> labelled = {
      {"old", {NodeAdmin::kNone, {{"gpu", "h100"}}, {}}}};
  StateChanges label;
  label.node_settings = labelled;
  LoadAndCommit(label);
  ASSERT_NO_FATAL_FAILURE(Exec(
      "ALTER TABLE node_admin DROP COLUMN gpus; ALTER TABLE jobs DROP COLUMN first_running_ms; "
      "ALTER TABLE node_admin DROP COLUMN note_reason; "
      "ALTER TABLE node_admin DROP COLUMN note_by; ALTER TABLE node_admin DROP COLUMN note_ms; "
      "DROP TABLE node_events; PRAGMA user_version = 9"));
  StateChanges gpus;
  gpus.node_settings = {{"g", {NodeAdmin::kNone, {}, {1, 3}}},
                        {"both", {NodeAdmin::kCordoned, {{"zone", "a"}}, {0}}}};
  EXPECT_EQ(LoadAndCommit(gpus), labelled);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM node_admin WHERE gpus = '1,3'"), 1);
  std::map<std::string, NodeSettings> all = labelled;
  all.insert(gpus.node_settings.begin(), gpus.node_settings.end());
  EXPECT_EQ(LoadAndCommit(), all);
  ASSERT_NO_FATAL_FAILURE(Exec("UPDATE node_admin SET gpus = '1' WHERE node_id = 'g'"));
  all.erase("g");
  EXPECT_EQ(LoadAndCommit(), all);
}

TEST_F(Day2StoreTest, ADeletedJobLeavesNoRowAnywhere) {
  const std::string yaml =
      "name: gone\nworker_pools: [{role: chief, replicas: 1, process: {command: [/bin/x]}}]\n";
  auto spec = ParseJobSpec(yaml);
  ASSERT_TRUE(spec.ok());
  JobRecord job;
  job.seq = 1;
  job.name = "gone";
  job.spec_yaml = yaml;
  job.spec = *spec;
  job.replicas = MakeReplicas(job.spec);
  job.state = JobState::SUCCEEDED;
  job.events.push_back({1, "submitted"});
  JobRecord kept = job;
  kept.seq = 2;
  kept.name = "kept";
  {
    auto store = Open();
    ASSERT_TRUE(store && store->Load().ok());
    StateChanges c;
    c.jobs = {&job, &kept};
    c.training_metrics = {TrainingMetric{"gone", "chief-0", 1, 5, "loss", 0.5},
                          TrainingMetric{"kept", "chief-0", 1, 5, "loss", 0.25}};
    ASSERT_TRUE(store->Commit(c).ok());
    StateChanges d;
    d.deleted_jobs = {"gone"};
    ASSERT_TRUE(store->Commit(d).ok());
    // Stored again under the same name later: a new job.
    job.seq = 3;
    StateChanges again;
    again.jobs = {&job};
    ASSERT_TRUE(store->Commit(again).ok());
    StateChanges d2;
    d2.deleted_jobs = {"gone"};
    ASSERT_TRUE(store->Commit(d2).ok());
  }
  for (const char* table : {"jobs WHERE name", "job_specs WHERE job", "replicas WHERE job",
                            "events WHERE job", "job_metrics WHERE job"}) {
    EXPECT_EQ(Count(std::string("SELECT COUNT(*) FROM ") + table + " = 'gone'"), 0) << table;
    EXPECT_EQ(Count(std::string("SELECT COUNT(*) FROM ") + table + " = 'kept'"), 1) << table;
  }
  auto store = Open();
  auto loaded = store->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->jobs.size(), 1u);
  EXPECT_EQ(loaded->jobs[0].name, "kept");
  ASSERT_EQ(loaded->training_metrics.size(), 1u);
  EXPECT_EQ(loaded->training_metrics[0].job, "kept");
}

TEST_F(Day2StoreTest, ADatabaseOfTheSchemaBeforeMigratesAndKeepsItsJobs) {
  const std::string yaml =
      "name: old\nworker_pools: [{role: chief, replicas: 1, process: {command: [/bin/x]}}]\n";
  JobRecord job;
  job.seq = 1;
  job.name = "old";
  job.spec_yaml = yaml;
  job.spec = *ParseJobSpec(yaml);
  job.replicas = MakeReplicas(job.spec);
  {
    auto store = Open();
    ASSERT_TRUE(store && store->Load().ok());
    StateChanges c;
    c.jobs = {&job};
    ASSERT_TRUE(store->Commit(c).ok());
  }
  // Back to version 2, as an earlier coordinator left it: no node_admin, nor the owner columns
  // (version 4), nor replicas' cause_signal (version 5), fenced_until_ms (version 6) and idle
  // (version 7), nor jobs' suspended_ms (version 8) and first_running_ms (version 11).
  ASSERT_NO_FATAL_FAILURE(
      Exec("DROP TABLE node_admin; DROP TABLE node_events; ALTER TABLE jobs DROP COLUMN owner; "
           "ALTER TABLE studies DROP COLUMN owner; ALTER TABLE replicas DROP "
           "COLUMN cause_signal; ALTER TABLE replicas DROP COLUMN "
           "fenced_until_ms; ALTER TABLE replicas DROP COLUMN idle; "
           "ALTER TABLE jobs DROP COLUMN suspended_ms; "
           "ALTER TABLE jobs DROP COLUMN first_running_ms; PRAGMA user_version = 2"));
  auto store = Open();
  ASSERT_TRUE(store);
  auto loaded = store->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->jobs.size(), 1u);
  StateChanges c;
  c.node_settings = {{"a", {NodeAdmin::kCordoned, {{"gpu", "h100"}}}}};
  EXPECT_TRUE(store->Commit(c).ok());
}

std::string StudyYaml() {
  return "name: cancel-me\n"
         "metric: {id: score, goal: maximize}\n"
         "parameters:\n"
         "  - {id: x, type: integer, min: 1, max: 6}\n"
         "algorithm: grid\n"
         "max_trials: 4\nparallel_trials: 2\n"
         "trial_job:\n"
         "  worker_pools:\n"
         "    - {role: chief, replicas: 1, resources: {cpus: 1}, process: {command: [/bin/t]}}\n";
}

TEST(StudyCancelTest, ACancelIsJournaledStopsTheRunningTrialsAndReplays) {
  StudyController studies("/tmp/cohort-day2-studies");
  ASSERT_TRUE(studies.Submit(StudyYaml(), 1).ok());
  StudyActions first = studies.TakeActions(1);
  ASSERT_EQ(first.submit.size(), 2u);
  EXPECT_EQ(studies.Cancel("nope", 2).code(), StatusCode::kNotFound);
  ASSERT_TRUE(studies.Cancel("cancel-me", 2).ok());
  EXPECT_EQ(studies.Info("cancel-me")->state, "CANCELLED");
  StudyActions after = studies.TakeActions(3);
  EXPECT_TRUE(after.submit.empty());
  ASSERT_EQ(after.cancel.size(), 2u);
  EXPECT_EQ(after.cancel[0], first.submit[0].job.name);
  // Cancelling again changes nothing.
  ASSERT_TRUE(studies.Cancel("cancel-me", 4).ok());
  EXPECT_TRUE(studies.TakeActions(4).cancel.empty());

  StudyController again("/tmp/cohort-day2-studies");
  for (const std::string& record : studies.SnapshotRecords()) {
    auto replayed = again.Replay(record);
    ASSERT_TRUE(replayed.ok() && *replayed) << replayed.status().ToString();
  }
  auto info = again.Info("cancel-me");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, "CANCELLED");
  EXPECT_EQ(info->trials.size(), 2u);
  EXPECT_TRUE(again.TakeActions(5).submit.empty());
}

}  // namespace
}  // namespace cohort::coordinator
