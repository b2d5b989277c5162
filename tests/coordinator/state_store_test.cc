// The state store on real files: round trips through a closed and reopened database, the schema's
// migration, the state dir's rules (marker, lost and swapped databases), the import of an
// earlier version's journal, and damaged state refused (and accepted with the flag, listing what
// was dropped).
#include "coordinator/state_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "coordinator/sqlite_db.h"
#include "coordinator/sqlite_state_store.h"
#include "coordinator/state_backups.h"
#include "coordinator/study_controller.h"
#include "tests/coordinator/test_records.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;

std::string Yaml(const std::string& name, int workers, const std::string& command = "/bin/train") {
  std::string y = "name: " + name +
                  "\nworker_pools:\n"
                  "  - role: chief\n    replicas: 1\n    resources: {gpus: 1, cpus: 1}\n"
                  "    process: {command: [" +
                  command + "]}\n";
  if (workers > 0) {
    y += "  - role: worker\n    replicas: " + std::to_string(workers) +
         "\n    resources: {gpus: 1}\n    process: {command: [/bin/train]}\n";
  }
  return y;
}

// A job as JobController::Submit makes it, then moved along a little.
JobRecord MakeJob(const std::string& name, uint64_t seq, int workers,
                  const std::string& command = "/bin/train") {
  JobRecord j;
  j.seq = seq;
  j.name = name;
  j.spec_yaml = Yaml(name, workers, command);
  auto spec = ParseJobSpec(j.spec_yaml);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  j.spec = *spec;
  j.replicas = MakeReplicas(j.spec);
  FillDemands(j);
  j.state = JobState::RUNNING;
  j.message = "running";
  j.create_time_ms = 1000 * static_cast<int64_t>(seq);
  j.queued_since_ms = j.create_time_ms;
  j.start_time_ms = j.create_time_ms + 5;
  j.output_dir = "/srv/out/" + name;
  j.master_port = 20000 + static_cast<int>(seq);
  j.bootstrap_port = 21000 + static_cast<int>(seq);
  j.owner = seq % 2 == 1 ? "user" + std::to_string(seq) : "";  // some jobs have none
  for (size_t i = 0; i < j.replicas.size(); ++i) {
    ReplicaRecord& r = j.replicas[i];
    r.state = ReplicaState::RUNNING;
    r.node_id = "node-" + std::to_string(i);
    r.last_node = r.node_id;
    r.gpus = {static_cast<int>(i), 7};
    r.port = 25000 + static_cast<int>(i);
    r.launched = true;
    r.attempt = 1;
    r.state_time_ms = j.start_time_ms + static_cast<int64_t>(i);
    r.message = "ok \"quoted\" ünïcode";
  }
  j.events.push_back(
      {j.create_time_ms, "submitted (" + std::to_string(j.replicas.size()) + " replicas)"});
  j.events.push_back({j.start_time_ms, "placed"});
  return j;
}

template <typename T>
void ExpectSameField(const T& a, const T& b, const std::string& name) {
  EXPECT_EQ(a, b) << "field " << name;
}

// Expects element I of tuples `a` and `b` equal for every I; a failure names the field, from
// `names`: the fields as written, separated by commas.
template <typename Tuple, size_t... I>
void ExpectSameElements(const Tuple& a, const Tuple& b, const std::string& names,
                        std::index_sequence<I...>) {
  std::vector<std::string> name;
  std::istringstream in(names);
  for (std::string field; std::getline(in >> std::ws, field, ',');) name.push_back(field);
  ASSERT_EQ(name.size(), sizeof...(I)) << names;
  (ExpectSameField(std::get<I>(a), std::get<I>(b), name[I]), ...);
}

// Expects the fields listed as `r.field, ...` equal in records `a` and `b`, each failure naming
// its field.
#define EXPECT_SAME_FIELDS(a, b, ...)                                                    \
  do {                                                                                   \
    auto tie = [](const auto& r) { return std::tie(__VA_ARGS__); };                      \
    ExpectSameElements(tie(a), tie(b), #__VA_ARGS__,                                     \
                       std::make_index_sequence<std::tuple_size_v<decltype(tie(a))>>{}); \
  } while (false)

void ExpectSameJob(const JobRecord& a, const JobRecord& b) {
  EXPECT_SAME_FIELDS(a, b, r.seq, r.name, r.spec_yaml, r.spec, r.state, r.message, r.create_time_ms,
                     r.queued_since_ms, r.start_time_ms, r.end_time_ms, r.restarts, r.output_dir,
                     r.trial_id, r.study, r.master_port, r.bootstrap_port, r.owner, r.suspended_ms,
                     r.first_running_ms);
  ASSERT_EQ(a.replicas.size(), b.replicas.size());
  for (size_t i = 0; i < a.replicas.size(); ++i) {
    SCOPED_TRACE("replica " + std::to_string(i));
    EXPECT_SAME_FIELDS(a.replicas[i], b.replicas[i], r.name, r.role, r.index, r.attempt, r.launched,
                       r.state, r.node_id, r.last_node, r.gpus, r.port, r.exit_code, r.signal,
                       r.cause_signal, r.message, r.stop_requested, r.state_time_ms,
                       r.fenced_until_ms, r.idle);
  }
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) {
    EXPECT_EQ(a.events[i].time_ms, b.events[i].time_ms) << i;
    EXPECT_EQ(a.events[i].message, b.events[i].message) << i;
  }
  EXPECT_EQ(a.demands.size(), b.demands.size());
}

// Expects `loaded` to hold exactly the jobs `expected`, in order, field by field.
void ExpectSameJobs(const std::vector<JobRecord>& loaded, const std::vector<JobRecord>& expected) {
  ASSERT_EQ(loaded.size(), expected.size());
  for (size_t i = 0; i < loaded.size(); ++i) ExpectSameJob(loaded[i], expected[i]);
}

void WriteBytes(const fs::path& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Flips one byte of the first occurrence of `needle` in the file; false if it is not there.
bool FlipByteOf(const fs::path& path, const std::string& needle) {
  std::string data = ReadBytes(path);
  size_t at = data.find(needle);
  if (at == std::string::npos) return false;
  data[at + needle.size() / 2] ^= 0x20;
  WriteBytes(path, data);
  return true;
}

bool Mentions(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

// Statements that take the node tables back to before cordon notes and node events (schemas 12
// and 13), for the tests that store an older schema.
constexpr const char* kDropNodeNotesAndEvents =
    "ALTER TABLE node_admin DROP COLUMN note_reason; ALTER TABLE node_admin DROP COLUMN note_by; "
    "ALTER TABLE node_admin DROP COLUMN note_ms; DROP TABLE node_events";

class StateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("cohort-store-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  StatusOr<std::unique_ptr<StateStore>> Open(bool accept = false) {
    StateStoreOptions o;
    o.accept_damaged_state = accept;
    return OpenStateStore(dir_.string(), o);
  }
  std::unique_ptr<StateStore> OpenOk(bool accept = false) {
    auto s = Open(accept);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  // Open() must refuse the state dir: the status it returns.
  Status OpenRefused() {
    auto s = Open();
    EXPECT_FALSE(s.ok()) << "opened";
    return s.ok() ? Status::Ok() : s.status();
  }
  // Opens the store and loads it; both must succeed. The store, left open (null when either
  // failed, the failure recorded), and what it loaded.
  struct Loaded {
    std::unique_ptr<StateStore> store;
    StoredState state;
  };
  Loaded OpenAndLoad(bool accept = false) {
    auto store = OpenOk(accept);
    if (!store) return {};
    auto loaded = store->Load();
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    if (!loaded.ok()) return {};
    return {std::move(store), std::move(*loaded)};
  }
  // Opens the store, whose Load() must refuse the state as damaged (kDataLoss), and closes it:
  // the status Load() returned.
  Status LoadRefused() {
    auto store = OpenOk();
    if (!store) return Internal("not opened");
    auto loaded = store->Load();
    EXPECT_FALSE(loaded.ok()) << "loaded";
    if (loaded.ok()) return Status::Ok();
    EXPECT_EQ(loaded.status().code(), StatusCode::kDataLoss) << loaded.status().ToString();
    return loaded.status();
  }
  // Opens with --accept-damaged-state, loads and closes the store: what it loaded.
  StatusOr<StoredState> LoadAccepted() {
    auto store = OpenOk(true);
    if (!store) return Internal("not opened");
    return store->Load();
  }
  // Runs `statements` on the closed store's database behind its back (an older schema, damage).
  void ExecBehindTheStore(std::initializer_list<const char*> statements) {
    auto db = SqliteDb::Open((dir_ / "state.db").string(), false);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    for (const char* sql : statements) ASSERT_TRUE((*db)->Exec(sql).ok()) << sql;
  }
  // `job`, stored, then taken back to an older schema by `downgrade` (statements run behind the
  // store's back), opens migrated: it loads as stored (with `loads_as` applied, when given), with
  // no damage (a new column's zero is outside the row checksum). `change` then sets the new column
  // through the store, which survives a reopen; `damage` behind the store's back is refused,
  // naming the job.
  void ExpectMigrated(JobRecord job, std::initializer_list<const char*> downgrade,
                      const std::function<void(JobRecord&)>& change,
                      std::initializer_list<const char*> damage,
                      const std::function<void(JobRecord&)>& loads_as = nullptr) {
    Store({job});
    ASSERT_NO_FATAL_FAILURE(ExecBehindTheStore(downgrade));
    if (loads_as) loads_as(job);
    {
      auto [store, loaded] = OpenAndLoad();
      ASSERT_TRUE(store);
      EXPECT_TRUE(loaded.dropped.empty());
      ExpectSameJobs(loaded.jobs, {job});
      change(job);
      StateChanges c;
      c.jobs.push_back(&job);
      ASSERT_TRUE(store->Commit(c).ok());
    }
    {
      auto [store, loaded] = OpenAndLoad();
      ASSERT_TRUE(store);
      ExpectSameJobs(loaded.jobs, {job});
    }
    ASSERT_NO_FATAL_FAILURE(ExecBehindTheStore(damage));
    Status refused = LoadRefused();
    EXPECT_NE(refused.message().find(job.name), std::string::npos) << refused.ToString();
  }
  // Stores `jobs` in a new store and closes it.
  void Store(const std::vector<JobRecord>& jobs) {
    auto store = OpenOk();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->Load().ok());
    StateChanges c;
    for (const auto& j : jobs) c.jobs.push_back(&j);
    ASSERT_TRUE(store->Commit(c).ok());
  }

  fs::path dir_;
};

TEST_F(StateStoreTest, JobsAndStudiesSurviveCloseAndReopenFieldByField) {
  std::vector<JobRecord> jobs = {MakeJob("a", 1, 2), MakeJob("b", 2, 0), MakeJob("c", 3, 1)};
  jobs[1].state = JobState::FAILED;
  jobs[1].end_time_ms = 9999;
  jobs[1].restarts = 2;
  jobs[1].replicas[0].state = ReplicaState::FAILED;
  jobs[1].replicas[0].exit_code = 3;
  jobs[1].replicas[0].signal = 9;
  jobs[2].replicas[1].state = ReplicaState::FAILED;
  jobs[2].replicas[1].exit_code = 1;
  jobs[2].replicas[1].cause_signal = 9;  // torchrun's worker was killed first
  jobs[2].replicas[0].state = ReplicaState::LOST;
  jobs[2].replicas[0].fenced_until_ms = 123456789;  // lost while fencing is on
  jobs[2].replicas[1].idle = true;                  // an elastic job runs without it
  jobs[0].state = JobState::SUSPENDED;              // `cohort suspend`, resumed once before
  jobs[0].suspended_ms = 45'000;
  jobs[1].replicas[0].stop_requested = true;
  jobs[1].replicas[0].gpus = {};
  jobs[2].study = "s";
  jobs[2].trial_id = "1";

  StudyController studies(dir_.string() + "/studies");
  ASSERT_TRUE(studies.Submit(StudyYaml("s", 4, 2), 100, "alice").ok());
  StudyActions actions = studies.TakeActions(100);
  ASSERT_EQ(actions.submit.size(), 2u);
  EXPECT_EQ(actions.submit[0].owner, "alice");  // a study's trial jobs are its owner's
  ASSERT_TRUE(studies.AddMeasurement(actions.submit[0].job.name, 1, {{"score", 0.5}}).ok());
  std::vector<std::string> records = studies.TakeJournalRecords();
  studies.JobEnded(actions.submit[0].job.name, true, "done", 200);
  for (auto& r : studies.TakeJournalRecords()) records.push_back(r);  // incremental
  ASSERT_EQ(records.size(), 2u);
  {
    auto [store, loaded] = OpenAndLoad();
    ASSERT_TRUE(store);
    EXPECT_TRUE(loaded.jobs.empty());
    StateChanges c;
    for (const auto& j : jobs) c.jobs.push_back(&j);
    c.study_records = {records[0]};
    ASSERT_TRUE(store->Commit(c).ok());
    StateChanges c2;
    c2.study_records = {records[1]};
    ASSERT_TRUE(store->Commit(c2).ok());
  }
  EXPECT_TRUE(fs::exists(dir_ / "state.db"));
  EXPECT_TRUE(fs::exists(dir_ / "state-store.id"));

  auto [store, loaded] = OpenAndLoad();
  ASSERT_TRUE(store);
  EXPECT_TRUE(loaded.dropped.empty());
  ExpectSameJobs(loaded.jobs, jobs);

  // The study comes back as one record that rebuilds the same study.
  ASSERT_EQ(loaded.studies.size(), 1u);
  StudyController again(dir_.string() + "/studies");
  auto replayed = again.Replay(loaded.studies[0]);
  ASSERT_TRUE(replayed.ok() && *replayed) << replayed.status().ToString();
  auto before = studies.Info("s"), after = again.Info("s");
  ASSERT_TRUE(before.ok() && after.ok());
  ASSERT_EQ(after->trials.size(), before->trials.size());
  for (size_t i = 0; i < after->trials.size(); ++i) {
    EXPECT_EQ(after->trials[i]->state, before->trials[i]->state) << i;
    EXPECT_EQ(after->trials[i]->steps, before->trials[i]->steps) << i;
  }
  EXPECT_EQ(after->best_trial, before->best_trial);
  EXPECT_EQ(after->owner, "alice");
  ASSERT_NE(again.OwnerOf("s"), nullptr);
  EXPECT_EQ(*again.OwnerOf("s"), "alice");
  EXPECT_EQ(again.OwnerOf("nope"), nullptr);
}

// A database of schema version 3 (before owners) opens migrated: its jobs and studies load with
// no owner and no damage (an empty owner is outside the row checksum), and an owner set since
// survives a reopen.
TEST_F(StateStoreTest, ADatabaseFromBeforeOwnersMigratesAndKeepsItsChecksums) {
  JobRecord job = MakeJob("old", 2, 1);  // an even seq: no owner
  ASSERT_TRUE(job.owner.empty());
  StudyController studies(dir_.string() + "/studies");
  ASSERT_TRUE(studies.Submit(StudyYaml("s", 4, 2), 100).ok());
  {
    auto store = OpenOk();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->Load().ok());
    StateChanges c;
    c.jobs.push_back(&job);
    c.study_records = studies.TakeJournalRecords();
    ASSERT_TRUE(store->Commit(c).ok());
  }
  // Back to version 3: the owner columns (and version 5's cause_signal) did not exist.
  ASSERT_NO_FATAL_FAILURE(ExecBehindTheStore(
      {"ALTER TABLE jobs DROP COLUMN owner", "ALTER TABLE studies DROP COLUMN owner",
       "ALTER TABLE replicas DROP COLUMN cause_signal",
       "ALTER TABLE replicas DROP COLUMN fenced_until_ms", "ALTER TABLE replicas DROP COLUMN idle",
       "ALTER TABLE jobs DROP COLUMN suspended_ms", "ALTER TABLE jobs DROP COLUMN first_running_ms",
       "ALTER TABLE node_admin DROP COLUMN gpus", "ALTER TABLE node_admin DROP COLUMN labels",
       kDropNodeNotesAndEvents, "PRAGMA user_version = 3"}));
  {
    auto [store, loaded] = OpenAndLoad();
    ASSERT_TRUE(store);
    EXPECT_TRUE(loaded.dropped.empty());
    ExpectSameJobs(loaded.jobs, {job});
    ASSERT_EQ(loaded.studies.size(), 1u);
    job.owner = "bob";
    StateChanges c;
    c.jobs.push_back(&job);
    ASSERT_TRUE(store->Commit(c).ok());
  }
  {
    auto db = SqliteDb::Open((dir_ / "state.db").string(), false);
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(*(*db)->QueryInt("PRAGMA user_version"), SqliteStateStore::Schema().back().version);
  }
  auto [store, loaded] = OpenAndLoad();
  ASSERT_TRUE(store);
  ASSERT_EQ(loaded.jobs.size(), 1u);
  EXPECT_EQ(loaded.jobs[0].owner, "bob");
  auto listed = store->ListJobs(JobQuery{.states = {}, .limit = 10});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].owner, "bob");
}

// A database of schema version 4 (before replicas' cause_signal) opens migrated, and a cause
// signal set since is part of the row checksum.
TEST_F(StateStoreTest, ADatabaseFromBeforeCauseSignalsMigratesAndKeepsItsChecksums) {
  ExpectMigrated(
      MakeJob("torchrun", 1, 1),
      {"ALTER TABLE replicas DROP COLUMN cause_signal",
       "ALTER TABLE replicas DROP COLUMN fenced_until_ms", "ALTER TABLE replicas DROP COLUMN idle",
       "ALTER TABLE jobs DROP COLUMN suspended_ms", "ALTER TABLE jobs DROP COLUMN first_running_ms",
       "ALTER TABLE node_admin DROP COLUMN gpus", "ALTER TABLE node_admin DROP COLUMN labels",
       kDropNodeNotesAndEvents, "PRAGMA user_version = 4"},
      [](JobRecord& job) {
        job.replicas[1].state = ReplicaState::FAILED;
        job.replicas[1].exit_code = 1;
        job.replicas[1].cause_signal = 9;
      },
      {"UPDATE replicas SET cause_signal = 15 WHERE cause_signal = 9"});
}

// A database of schema version 5 (before fencing) opens migrated, and a hold set since is part of
// the row checksum, apart from the cause signal's: moved into that column it is damage.
TEST_F(StateStoreTest, ADatabaseFromBeforeFencingMigratesAndKeepsItsChecksums) {
  ExpectMigrated(
      MakeJob("fenced", 1, 1),
      {"ALTER TABLE replicas DROP COLUMN fenced_until_ms", "ALTER TABLE replicas DROP COLUMN idle",
       "ALTER TABLE jobs DROP COLUMN suspended_ms", "ALTER TABLE jobs DROP COLUMN first_running_ms",
       "ALTER TABLE node_admin DROP COLUMN gpus", "ALTER TABLE node_admin DROP COLUMN labels",
       kDropNodeNotesAndEvents, "PRAGMA user_version = 5"},
      [](JobRecord& job) {
        job.replicas[1].state = ReplicaState::LOST;
        job.replicas[1].fenced_until_ms = 77;
      },
      {"UPDATE replicas SET cause_signal = 77, fenced_until_ms = 0 WHERE fenced_until_ms = 77"});
}

// A database of schema version 6 (before elastic jobs) opens migrated, and an idle flag set since
// is part of the row checksum: cleared behind the store's back it is damage.
TEST_F(StateStoreTest, ADatabaseFromBeforeElasticJobsMigratesAndKeepsItsChecksums) {
  ExpectMigrated(
      MakeJob("elastic", 1, 2),
      {"ALTER TABLE replicas DROP COLUMN idle", "ALTER TABLE jobs DROP COLUMN suspended_ms",
       "ALTER TABLE jobs DROP COLUMN first_running_ms", "ALTER TABLE node_admin DROP COLUMN gpus",
       "ALTER TABLE node_admin DROP COLUMN labels", kDropNodeNotesAndEvents,
       "PRAGMA user_version = 6"},
      [](JobRecord& job) {
        job.replicas[2].state = ReplicaState::STOPPED;
        job.replicas[2].idle = true;
      },
      {"UPDATE replicas SET idle = 0 WHERE idle = 1"});
}

// A database of schema version 7 (before suspension) opens migrated, and a suspended time set
// since is part of the job row's checksum: cleared behind the store's back it is damage.
TEST_F(StateStoreTest, ADatabaseFromBeforeSuspensionMigratesAndKeepsItsChecksums) {
  ExpectMigrated(
      MakeJob("suspended", 1, 1),
      {"ALTER TABLE jobs DROP COLUMN suspended_ms", "ALTER TABLE jobs DROP COLUMN first_running_ms",
       "ALTER TABLE node_admin DROP COLUMN gpus", "ALTER TABLE node_admin DROP COLUMN labels",
       kDropNodeNotesAndEvents, "PRAGMA user_version = 7"},
      [](JobRecord& job) {
        job.state = JobState::SUSPENDED;
        job.suspended_ms = 60'000;
      },
      {"UPDATE jobs SET suspended_ms = 0 WHERE suspended_ms = 60000"});
}

// A database of schema version 10 (before first_running_ms) opens migrated: a job that ran takes
// the time from its first "running" event, and the time stored since is part of the row checksum.
TEST_F(StateStoreTest, ADatabaseFromBeforeFirstRunningTimesMigratesAndKeepsItsChecksums) {
  JobRecord job = MakeJob("ran", 1, 1);  // stored as a coordinator of version 10 stored it
  const int64_t ran_at = job.start_time_ms + 40;
  job.events.push_back({ran_at, "running: all 2 replicas running"});
  ExpectMigrated(
      job,
      {"ALTER TABLE jobs DROP COLUMN first_running_ms", kDropNodeNotesAndEvents,
       "PRAGMA user_version = 10"},
      [&](JobRecord& job) {
        job.events = {{ran_at + 90, "restart 1/3: ..."}};  // the first "running" lost to the cap
      },
      {"UPDATE jobs SET first_running_ms = 7"},
      [&](JobRecord& job) { job.first_running_ms = ran_at; });
}

// An owner is part of the row checksum: a row whose owner was changed behind the store's back
// is damage, not a new owner.
TEST_F(StateStoreTest, AnOwnerChangedBehindTheStoresBackIsDamage) {
  JobRecord job = MakeJob("mine", 1, 0);
  ASSERT_EQ(job.owner, "user1");
  Store({job});
  ASSERT_NO_FATAL_FAILURE(ExecBehindTheStore({"UPDATE jobs SET owner = 'mallory'"}));
  Status refused = LoadRefused();
  EXPECT_NE(refused.message().find("mine"), std::string::npos) << refused.ToString();
}

// A state no build of this coordinator writes, in a row whose checksum matches (a row written by
// hand, or by a build with more states), is damage naming it, not a job in a state nothing
// handles; with --accept-damaged-state the job is dropped.
TEST_F(StateStoreTest, AStateThisCoordinatorDoesNotKnowIsDamage) {
  JobRecord job = MakeJob("strange", 1, 1);
  job.state = static_cast<JobState>(9);
  JobRecord other = MakeJob("replica_strange", 2, 1);
  other.replicas[1].state = static_cast<ReplicaState>(12);
  Store({job, other});
  Status refused = LoadRefused();
  EXPECT_NE(refused.message().find("job strange: its state 9 is no job state this coordinator "
                                   "knows"),
            std::string::npos)
      << refused.ToString();
  EXPECT_NE(refused.message().find("job replica_strange: replica worker-0: its state 12 is no "
                                   "replica state this coordinator knows"),
            std::string::npos)
      << refused.ToString();
  auto accepted = LoadAccepted();
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  EXPECT_TRUE(accepted->jobs.empty());
}

// A study record whose fields have other types than a study's is not one, and does not throw.
TEST(StudyReplayTest, ARecordOfOtherTypesIsRefusedNotThrown) {
  StudyController studies(::testing::TempDir() + "/replay-types");
  for (const char* record : {R"({"kind": 5})", R"([1, 2])", R"({"kind": "study", "name": 7})",
                             R"({"kind": "study", "name": "s", "spec_yaml": []})"}) {
    auto replayed = studies.Replay(record);
    EXPECT_TRUE(!replayed.ok() || !*replayed) << record;
  }
}

TEST_F(StateStoreTest, ChangedJobsAreStoredAndTheEventWindowSlides) {
  JobRecord job = MakeJob("slide", 1, 1);
  auto store = OpenOk();
  ASSERT_TRUE(store && store->Load().ok());
  auto commit = [&] {
    StateChanges c;
    c.jobs = {&job};
    ASSERT_TRUE(store->Commit(c).ok());
  };
  commit();
  // A replica moves, an event is rewritten in place, more are added.
  job.replicas[1].state = ReplicaState::LOST;
  job.replicas[1].node_id.clear();
  job.events[1].message = "placed on node-0, node-1";
  for (int i = 0; i < 10; ++i) job.events.push_back({5000 + i, "event " + std::to_string(i)});
  commit();
  // The job keeps its latest events only: the front falls off while new ones arrive.
  job.events.erase(job.events.begin(), job.events.begin() + 4);
  job.events.push_back({6000, "latest"});
  commit();
  job.state = JobState::SUCCEEDED;
  job.end_time_ms = 7000;
  job.events.clear();
  commit();
  job.events.push_back({7001, "a new first event"});
  commit();
  store.reset();

  auto [reopened, loaded] = OpenAndLoad();
  ASSERT_TRUE(reopened);
  ExpectSameJobs(loaded.jobs, {job});
  // LoadJobs reads the same, and leaves out names it does not hold.
  auto some = reopened->LoadJobs({"slide", "never-stored"});
  ASSERT_TRUE(some.ok()) << some.status().ToString();
  ASSERT_EQ(some->size(), 1u);
  ExpectSameJob((*some)[0], job);
}

TEST_F(StateStoreTest, AFailedCommitChangesNothingAndTheNextOneStoresEverything) {
  JobRecord job = MakeJob("atomic", 1, 0);
  auto store = OpenOk();
  ASSERT_TRUE(store && store->Load().ok());
  StateChanges c;
  c.jobs = {&job};
  ASSERT_TRUE(store->Commit(c).ok());

  // One pass: a changed job and a study record the store cannot take (it starts at event 5 of a
  // study it does not hold): the whole transaction is rolled back.
  job.state = JobState::SUCCEEDED;
  job.events.push_back({2, "succeeded"});
  JobRecord added = MakeJob("added", 2, 0);
  StateChanges bad;
  bad.jobs = {&job, &added};
  bad.study_records = {R"({"kind":"study","name":"x","spec_yaml":"","first":5,"events":[]})"};
  Status s = store->Commit(bad);
  EXPECT_FALSE(s.ok());
  auto stored = store->LoadJobs({"atomic", "added"});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].state, JobState::RUNNING);
  EXPECT_EQ((*stored)[0].events.size(), 2u);

  // The store did not take the failed pass for written: the same jobs are written in full next.
  StateChanges retry;
  retry.jobs = {&job, &added};
  ASSERT_TRUE(store->Commit(retry).ok());
  store.reset();
  auto [reopened, loaded] = OpenAndLoad();
  ASSERT_TRUE(reopened);
  ExpectSameJobs(loaded.jobs, {job, added});
}

TEST_F(StateStoreTest, HistoryQueriesFilterByStateAndTimeNewestFirstUsingTheIndexes) {
  std::vector<JobRecord> jobs;
  for (int i = 1; i <= 20; ++i) {
    JobRecord j = MakeJob("h" + std::to_string(i), static_cast<uint64_t>(i), i % 3);
    if (i % 2 == 0) {
      j.state = JobState::SUCCEEDED;
      j.end_time_ms = 100'000 + i;
    } else if (i % 5 == 0) {
      j.state = JobState::FAILED;
      j.end_time_ms = 200'000 + i;
    }
    jobs.push_back(std::move(j));
  }
  Store(jobs);
  auto store = OpenOk();
  ASSERT_TRUE(store && store->Load().ok());

  JobQuery q;
  q.states = {JobState::SUCCEEDED};
  q.limit = 3;
  auto r = store->ListJobs(q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].name, "h20");
  EXPECT_EQ((*r)[1].name, "h18");
  EXPECT_EQ((*r)[2].name, "h16");
  EXPECT_EQ((*r)[0].replicas, 1 + 20 % 3);

  JobQuery ended;
  ended.ended_since_ms = 200'000;
  r = store->ListJobs(ended);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);  // h15, h5
  EXPECT_EQ((*r)[0].name, "h15");
  EXPECT_EQ((*r)[0].state, JobState::FAILED);

  JobQuery created;
  created.created_since_ms = 18'000;
  created.states = {JobState::RUNNING, JobState::SUCCEEDED};
  r = store->ListJobs(created);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 3u);  // h18, h19, h20

  store.reset();
  auto db = SqliteDb::Open((dir_ / "state.db").string(), false);
  ASSERT_TRUE(db.ok());
  auto plan = [&](const std::string& sql) {
    std::string out;
    auto st = (*db)->Prepare("EXPLAIN QUERY PLAN " + sql);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    while (st.ok() && *st->Step()) out += st->Text(3) + "\n";
    return out;
  };
  EXPECT_NE(plan("SELECT name FROM jobs WHERE state IN (3) ORDER BY seq DESC LIMIT 3")
                .find("jobs_by_state"),
            std::string::npos);
  EXPECT_NE(plan("SELECT name FROM jobs WHERE end_time_ms >= 5").find("jobs_by_end_time"),
            std::string::npos);
}

// ---- schema ---------------------------------------------------------------------------------

TEST_F(StateStoreTest, TheSchemaMigratesStepByStepAndANewerOneIsRefused) {
  fs::create_directories(dir_);
  std::string path = (dir_ / "m.db").string();
  auto db = SqliteDb::Open(path, true);
  ASSERT_TRUE(db.ok());
  const SchemaStep v1[] = {{1, "CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (7);"}};
  ASSERT_TRUE(MigrateSchema(**db, v1).ok());
  EXPECT_EQ(*(*db)->QueryInt("PRAGMA user_version"), 1);
  // A second run of the same steps does nothing; a new step runs once, keeping the data.
  ASSERT_TRUE(MigrateSchema(**db, v1).ok());
  const SchemaStep v2[] = {v1[0], {2, "ALTER TABLE t ADD COLUMN b TEXT NOT NULL DEFAULT 'x';"}};
  ASSERT_TRUE(MigrateSchema(**db, v2).ok());
  EXPECT_EQ(*(*db)->QueryInt("PRAGMA user_version"), 2);
  EXPECT_EQ(*(*db)->QueryText("SELECT a || b FROM t"), "7x");
  // A failing step is rolled back whole and named; the database stays at the last good version.
  const SchemaStep v3[] = {
      v2[0], v2[1], {3, "CREATE TABLE u (c); INSERT INTO nowhere VALUES (1);"}};
  Status s = MigrateSchema(**db, v3);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("from version 2 to 3"), std::string::npos) << s.ToString();
  EXPECT_EQ(*(*db)->QueryInt("PRAGMA user_version"), 2);
  EXPECT_FALSE((*db)->QueryInt("SELECT COUNT(*) FROM u").ok());
  // A database newer than this program is refused, not downgraded.
  s = MigrateSchema(**db, v1);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("newer"), std::string::npos) << s.ToString();
}

TEST_F(StateStoreTest, ANewStoreHasTheLatestSchemaAndADatabaseFromTheFutureIsRefused) {
  Store({MakeJob("j", 1, 0)});
  {
    auto db = SqliteDb::Open((dir_ / "state.db").string(), false);
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(*(*db)->QueryInt("PRAGMA user_version"), SqliteStateStore::Schema().back().version);
    EXPECT_EQ(*(*db)->QueryText("PRAGMA journal_mode"), "wal");
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 99").ok());
  }
  const Status refused = OpenRefused();
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("newer cohort-coordinator"), std::string::npos)
      << refused.ToString();
}

TEST_F(StateStoreTest, ASecondOpenOfTheSameStoreIsRefusedAsBusy) {
  auto first = OpenOk();
  ASSERT_TRUE(first && first->Load().ok());
  const Status second = OpenRefused();
  EXPECT_EQ(second.code(), StatusCode::kUnavailable);
  EXPECT_NE(second.message().find("another process"), std::string::npos) << second.ToString();
}

// ---- the state dir's rules ------------------------------------------------------------------

TEST_F(StateStoreTest, ALostOrEmptiedDatabaseIsRefusedWhileTheMarkerSaysOneExisted) {
  Store({MakeJob("kept", 1, 0)});
  fs::create_directories(dir_ / "logs" / "kept");
  fs::rename(dir_ / "state.db", dir_ / "elsewhere.db");
  const Status missing = OpenRefused();
  EXPECT_EQ(missing.code(), StatusCode::kDataLoss);
  EXPECT_NE(missing.message().find("there is no state database"), std::string::npos)
      << missing.ToString();
  EXPECT_NE(missing.message().find("state-store.id"), std::string::npos);

  WriteBytes(dir_ / "state.db", "");
  const Status empty = OpenRefused();
  EXPECT_NE(empty.message().find("is empty"), std::string::npos) << empty.ToString();

  // With the flag it starts with no jobs, listing the job it knows of from its logs.
  auto loaded = LoadAccepted();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(loaded->jobs.empty());
  EXPECT_TRUE(Mentions(loaded->dropped, "job kept dropped")) << loaded->dropped.size();
}

TEST_F(StateStoreTest, NoDatabaseButLogsOfEarlierJobsIsRefused) {
  fs::create_directories(dir_ / "logs" / "old-job");
  const Status refused = OpenRefused();
  EXPECT_EQ(refused.code(), StatusCode::kDataLoss);
  EXPECT_NE(refused.message().find("old-job"), std::string::npos) << refused.ToString();
  EXPECT_FALSE(fs::exists(dir_ / "state.db"));
}

TEST_F(StateStoreTest, ADatabaseSwappedForAnotherStoresIsRefused) {
  Store({MakeJob("one", 1, 0)});
  fs::path first = dir_;
  dir_ += "-other";
  Store({MakeJob("two", 1, 0)});
  fs::path other = dir_;
  dir_ = first;
  fs::copy_file(other / "state.db", first / "state.db", fs::copy_options::overwrite_existing);
  const Status refused = OpenRefused();
  EXPECT_NE(refused.message().find("was replaced by another one"), std::string::npos)
      << refused.ToString();
  fs::remove_all(other);
  // Adopted with the flag; the marker then names it.
  ASSERT_TRUE(OpenOk(true));
  ASSERT_TRUE(OpenOk());
}

TEST_F(StateStoreTest, AMissingMarkerIsWrittenAgain) {
  Store({MakeJob("j", 1, 0)});
  fs::remove(dir_ / "state-store.id");
  auto store = OpenOk();
  ASSERT_TRUE(store);
  EXPECT_TRUE(fs::exists(dir_ / "state-store.id"));
  auto loaded = store->Load();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->jobs.size(), 1u);
}

// ---- damage ---------------------------------------------------------------------------------

TEST_F(StateStoreTest, AFlippedByteInASpecIsRefusedAndTheFlagDropsThatJobOnly) {
  std::vector<JobRecord> jobs = {MakeJob("good1", 1, 1), MakeJob("hit", 2, 1, "/bin/flip-me-here"),
                                 MakeJob("good2", 3, 0)};
  Store(jobs);  // closing checkpoints the WAL into state.db
  ASSERT_TRUE(FlipByteOf(dir_ / "state.db", "/bin/flip-me-here"));

  Status refused = LoadRefused();
  EXPECT_NE(refused.message().find("job hit: its spec does not match its checksum"),
            std::string::npos)
      << refused.ToString();
  EXPECT_NE(refused.message().find("--accept-damaged-state"), std::string::npos);

  auto [store, loaded] = OpenAndLoad(true);
  ASSERT_TRUE(store);
  ExpectSameJobs(loaded.jobs, {jobs[0], jobs[2]});
  ASSERT_EQ(loaded.dropped.size(), 1u);
  EXPECT_NE(loaded.dropped[0].find("job hit dropped"), std::string::npos) << loaded.dropped[0];
  bool kept_aside = false;
  for (const auto& e : fs::directory_iterator(dir_)) {
    kept_aside |= e.path().filename().string().rfind("state.db.damaged-", 0) == 0;
  }
  EXPECT_TRUE(kept_aside);
  store.reset();
  // The rebuilt database verifies: no flag needed any more.
  auto [rebuilt, reloaded] = OpenAndLoad();
  ASSERT_TRUE(rebuilt);
  EXPECT_EQ(reloaded.jobs.size(), 2u);
}

// Thousands of jobs are finished (specs parsed, replicas checked) on every core: each comes back
// exactly as stored, and a damaged one among them is still named.
TEST_F(StateStoreTest, ManyJobsLoadOnEveryCoreExactlyAsStored) {
  std::vector<JobRecord> jobs;
  for (uint64_t i = 1; i <= 2500; ++i) {
    jobs.push_back(MakeJob("job" + std::to_string(i), i, static_cast<int>(i % 4),
                           i == 1234 ? "/bin/flip-me-here" : "/bin/train"));
  }
  Store(jobs);
  auto [store, loaded] = OpenAndLoad();
  ASSERT_TRUE(store);
  ExpectSameJobs(loaded.jobs, jobs);
  store.reset();

  ASSERT_TRUE(FlipByteOf(dir_ / "state.db", "/bin/flip-me-here"));
  Status refused = LoadRefused();
  EXPECT_NE(refused.message().find("job job1234: its spec does not match its checksum"),
            std::string::npos)
      << refused.ToString();
  auto accepted = LoadAccepted();
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  EXPECT_EQ(accepted->jobs.size(), jobs.size() - 1);
}

TEST_F(StateStoreTest, ADamagedReplicaOrEventIsFoundByItsChecksum) {
  std::vector<JobRecord> jobs = {MakeJob("r", 1, 1), MakeJob("e", 2, 0)};
  jobs[0].replicas[1].message = "replica-needle";
  jobs[1].events.push_back({77, "event-needle"});
  Store(jobs);
  ASSERT_TRUE(FlipByteOf(dir_ / "state.db", "replica-needle"));
  ASSERT_TRUE(FlipByteOf(dir_ / "state.db", "event-needle"));
  Status refused = LoadRefused();
  EXPECT_NE(refused.message().find("job r: replica worker-0 does not match"), std::string::npos)
      << refused.ToString();
  EXPECT_NE(refused.message().find("job e: event 2 does not match"), std::string::npos)
      << refused.ToString();
  // A damaged replica drops its job; a damaged event is dropped from a job that is kept.
  auto [store, loaded] = OpenAndLoad(true);
  ASSERT_TRUE(store);
  ASSERT_EQ(loaded.jobs.size(), 1u);
  EXPECT_EQ(loaded.jobs[0].name, "e");
  EXPECT_EQ(loaded.jobs[0].events.size(), 2u);
  EXPECT_TRUE(Mentions(loaded.dropped, "job r dropped"));
  EXPECT_TRUE(Mentions(loaded.dropped, "job e: kept without its damaged events"));
}

TEST_F(StateStoreTest, ACorruptPageIsRefusedAndTheFlagNamesEveryJobItDrops) {
  std::vector<JobRecord> jobs;
  for (int i = 1; i <= 300; ++i) {
    jobs.push_back(
        MakeJob("p" + std::to_string(i), i, 2, i == 150 ? "/bin/page-needle" : "/bin/t"));
  }
  Store(jobs);
  // Overwrite the page that holds job p150's spec with garbage.
  std::string data = ReadBytes(dir_ / "state.db");
  size_t at = data.find("/bin/page-needle");
  ASSERT_NE(at, std::string::npos);
  size_t page = at / 4096 * 4096;
  ASSERT_GT(page, 0u);
  for (size_t i = page; i < page + 4096; ++i) data[i] = static_cast<char>(i * 7 + 3);
  WriteBytes(dir_ / "state.db", data);

  Status refused = LoadRefused();
  EXPECT_NE(refused.message().find("integrity check"), std::string::npos) << refused.ToString();
  // With the flag what verifies is kept exactly as stored, and every other job is named.
  auto loaded = LoadAccepted();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_LT(loaded->jobs.size(), jobs.size());
  std::set<std::string> seen;
  for (const auto& j : loaded->jobs) {
    ExpectSameJob(j, jobs[j.seq - 1]);
    seen.insert(j.name);
  }
  EXPECT_FALSE(seen.count("p150"));
  for (const auto& j : jobs) {
    if (!seen.count(j.name)) {
      EXPECT_TRUE(Mentions(loaded->dropped, "job " + j.name + " dropped")) << j.name;
    }
  }
}

TEST_F(StateStoreTest, AFileThatIsNotADatabaseIsRefused) {
  Store({MakeJob("x", 1, 0)});
  fs::create_directories(dir_ / "logs" / "x");
  WriteBytes(dir_ / "state.db", std::string(8192, 'z'));
  const Status refused = OpenRefused();
  EXPECT_EQ(refused.code(), StatusCode::kDataLoss);
  EXPECT_NE(refused.message().find("cannot be read"), std::string::npos) << refused.ToString();
  auto loaded = LoadAccepted();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(loaded->jobs.empty());
  EXPECT_TRUE(Mentions(loaded->dropped, "job x dropped"));
}

// ---- import of an earlier version's journal -------------------------------------------------

TEST_F(StateStoreTest, AJournalIsImportedOnceAndKeptAsABackup) {
  fs::create_directories(dir_);
  JobRecord a = MakeJob("a", 1, 1), b = MakeJob("b", 2, 0);
  StudyController studies(dir_.string() + "/studies");
  ASSERT_TRUE(studies.Submit(StudyYaml("st", 4, 2), 10).ok());
  StudyActions actions = studies.TakeActions(10);
  std::vector<std::string> study_records = studies.TakeJournalRecords();
  ASSERT_TRUE(studies.AddMeasurement(actions.submit[0].job.name, 3, {{"score", 2.0}}).ok());
  for (auto& r : studies.TakeJournalRecords()) study_records.push_back(r);
  ASSERT_EQ(study_records.size(), 2u);

  // Snapshot: a and the study's first record; journal: a newer a, b, the study's next events,
  // and a torn last record.
  WriteBytes(dir_ / "snapshot", JournalFrame(JobToJson(a)) + JournalFrame(study_records[0]));
  JobRecord a2 = a;
  a2.state = JobState::SUCCEEDED;
  a2.end_time_ms = 5555;
  WriteBytes(dir_ / "journal", JournalFrame(JobToJson(a2)) + JournalFrame(JobToJson(b)) +
                                   JournalFrame(study_records[1]) +
                                   JournalFrame(JobToJson(b)).substr(0, 30));
  fs::create_directories(dir_ / "logs" / "a");

  {
    auto [store, loaded] = OpenAndLoad();
    ASSERT_TRUE(store);
    ExpectSameJobs(loaded.jobs, {a2, b});
    ASSERT_EQ(loaded.studies.size(), 1u);
    StudyController again(dir_.string() + "/studies");
    ASSERT_TRUE(again.Replay(loaded.studies[0]).ok());
    EXPECT_EQ(again.Info("st")->trials[0]->steps, 1);
  }
  EXPECT_FALSE(fs::exists(dir_ / "journal"));
  EXPECT_FALSE(fs::exists(dir_ / "snapshot"));
  EXPECT_TRUE(fs::exists(dir_ / "journal.pre-sqlite"));
  EXPECT_TRUE(fs::exists(dir_ / "snapshot.pre-sqlite"));

  // Once: the next start reads the database.
  auto [store, loaded] = OpenAndLoad();
  ASSERT_TRUE(store);
  EXPECT_EQ(loaded.jobs.size(), 2u);
  auto db = SqliteDb::Open((dir_ / "state.db").string(), false);
  store.reset();
  ASSERT_TRUE(db.ok());
  auto imported = (*db)->QueryText("SELECT value FROM meta WHERE key = 'journal_imported'");
  ASSERT_TRUE(imported.ok());
  EXPECT_NE(imported->find("2 jobs (1 unfinished) and 1 studies"), std::string::npos) << *imported;
}

TEST_F(StateStoreTest, AJournalDamagedInTheMiddleIsRefusedUntouchedAndTheFlagImportsTheRest) {
  fs::create_directories(dir_);
  JobRecord a = MakeJob("a", 1, 0), b = MakeJob("b", 2, 0, "/bin/flip-me-here"),
            c = MakeJob("c", 3, 0);
  std::string journal =
      JournalFrame(JobToJson(a)) + JournalFrame(JobToJson(b)) + JournalFrame(JobToJson(c));
  WriteBytes(dir_ / "journal", journal);
  ASSERT_TRUE(FlipByteOf(dir_ / "journal", "/bin/flip-me-here"));
  std::string damaged = ReadBytes(dir_ / "journal");

  const Status refused = OpenRefused();
  EXPECT_EQ(refused.code(), StatusCode::kDataLoss);
  EXPECT_NE(refused.message().find("a damaged record at offset"), std::string::npos)
      << refused.ToString();
  EXPECT_EQ(ReadBytes(dir_ / "journal"), damaged);
  EXPECT_FALSE(fs::exists(dir_ / "state.db"));

  // With the flag, c after the damage is found and kept.
  auto loaded = LoadAccepted();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->jobs.size(), 2u);
  EXPECT_EQ(loaded->jobs[0].name, "a");
  EXPECT_EQ(loaded->jobs[1].name, "c");
  EXPECT_TRUE(Mentions(loaded->dropped, "a damaged record at offset"));
  EXPECT_EQ(ReadBytes(dir_ / "journal.pre-sqlite"), damaged);
}

TEST_F(StateStoreTest, ABadLengthMidJournalIsDamageNotATornTail) {
  fs::create_directories(dir_);
  std::string first = JournalFrame(JobToJson(MakeJob("a", 1, 0)));
  std::string journal = first + JournalFrame(JobToJson(MakeJob("b", 2, 0))) +
                        JournalFrame(JobToJson(MakeJob("c", 3, 0)));
  journal[first.size() + 3] = '\x7f';  // b's length: far past the end of the file
  WriteBytes(dir_ / "journal", journal);
  const Status refused = OpenRefused();
  EXPECT_NE(refused.message().find("a damaged record at offset " + std::to_string(first.size())),
            std::string::npos)
      << refused.ToString();
  auto loaded = LoadAccepted();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->jobs.size(), 2u);
  EXPECT_EQ(loaded->jobs[1].name, "c");
}

// Records that frame and check out but hold other types than a job's or a study's (a state no
// build writes, a study's name or first event of another type) are damage naming them, not a
// crash; with the flag the good job is imported.
TEST_F(StateStoreTest, JournalRecordsOfOtherTypesAreDamageNotACrash) {
  fs::create_directories(dir_);
  JobRecord strange = MakeJob("strange", 2, 0);
  strange.state = static_cast<JobState>(42);
  WriteBytes(dir_ / "journal",
             JournalFrame(JobToJson(MakeJob("good", 1, 0))) + JournalFrame(JobToJson(strange)) +
                 JournalFrame(R"({"kind": "study", "name": 7, "first": 0, "events": []})") +
                 JournalFrame(R"({"kind": "study", "name": "s", "first": "x", "events": []})") +
                 JournalFrame(R"({"kind": ["study"]})"));
  const Status refused = OpenRefused();
  EXPECT_NE(refused.message().find("record 1: journal: state 42 is no job state (and 3 more"),
            std::string::npos)
      << refused.ToString();
  auto loaded = LoadAccepted();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->jobs.size(), 1u);
  EXPECT_EQ(loaded->jobs[0].name, "good");
  EXPECT_TRUE(loaded->studies.empty());
  EXPECT_TRUE(Mentions(loaded->dropped,
                       "record 2: a study record without a name or with a bad "
                       "first event"));
  EXPECT_TRUE(Mentions(loaded->dropped, "record 3: a study record without a name"));
}

TEST_F(StateStoreTest, AJournalWhoseSnapshotWasLostIsRefused) {
  fs::create_directories(dir_ / "logs" / "only-in-snapshot");
  WriteBytes(dir_ / "journal", JournalFrame(JobToJson(MakeJob("later", 2, 0))));
  const Status refused = OpenRefused();
  EXPECT_NE(refused.message().find("only-in-snapshot"), std::string::npos) << refused.ToString();
}

// ---- backups and restores -------------------------------------------------------------------

class StateBackupTest : public StateStoreTest {
 protected:
  fs::path Backups() { return dir_.string() + "-backups"; }
  void TearDown() override {
    StateStoreTest::TearDown();
    fs::remove_all(Backups());
    fs::remove_all(dir_.string() + "-restored");
  }
  // Jobs with specs of about `kib` KiB each, so that a copy takes several steps.
  static std::vector<JobRecord> BigJobs(int n, int kib) {
    std::vector<JobRecord> jobs;
    for (int i = 1; i <= n; ++i) {
      jobs.push_back(MakeJob("big" + std::to_string(i), i, 1,
                             "/bin/" + std::string(static_cast<size_t>(kib) * 1024, 'a' + i % 26)));
    }
    return jobs;
  }
  // A whole copy of the open `store` at <backup dir>/<name> (one step); its path.
  std::string CopyWhole(StateStore& store, const std::string& name) {
    fs::create_directories(Backups());
    const std::string path = (Backups() / name).string();
    auto copy = store.BeginCopy(path, kStoreCopyPagesPerStep);
    EXPECT_TRUE(copy.ok()) << copy.status().ToString();
    if (!copy.ok()) return path;
    auto done = (*copy)->Step();
    EXPECT_TRUE(done.ok() && *done) << done.status().ToString();
    return path;
  }
  // The files in the backup dir, sorted.
  std::vector<std::string> BackupFiles() {
    std::vector<std::string> out;
    std::error_code ec;
    for (fs::directory_iterator it(Backups(), ec), end; !ec && it != end; it.increment(ec)) {
      out.push_back(it->path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // `path` restored into a state dir of its own and loaded there.
  StatusOr<StoredState> LoadRestored(const std::string& path) {
    const std::string restored = dir_.string() + "-restored";
    fs::remove_all(restored);
    COHORT_RETURN_IF_ERROR(RestoreStateStore(restored, path).status());
    COHORT_ASSIGN_OR_RETURN(auto store, OpenStateStore(restored, {}));
    return store->Load();
  }
};

TEST_F(StateBackupTest, ACopyTakenWhileCommitsGoOnHoldsEveryCommitBeforeItsLastStep) {
  std::vector<JobRecord> jobs = BigJobs(60, 4);  // about 60 pages of 4 KiB each
  auto [store, loaded] = OpenAndLoad();
  ASSERT_TRUE(store);
  StateChanges all;
  for (const auto& j : jobs) all.jobs.push_back(&j);
  ASSERT_TRUE(store->Commit(all).ok());

  fs::create_directories(Backups());
  const std::string copy_path = (Backups() / "copy.db").string();
  auto copy = store->BeginCopy(copy_path, 16);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(store->BeginCopy(copy_path, 16).status().code(), StatusCode::kAlreadyExists);
  auto first = (*copy)->Step();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_FALSE(*first) << "copied in one step";

  // Between steps the coordinator goes on: a job ends, one is submitted, one is deleted.
  jobs[0].state = JobState::SUCCEEDED;
  jobs[0].end_time_ms = 99'000;
  JobRecord added = MakeJob("added", 61, 0);
  StateChanges more;
  more.jobs = {&jobs[0], &added};
  more.deleted_jobs = {jobs[59].name};
  ASSERT_TRUE(store->Commit(more).ok());
  int steps = 1;
  while (true) {
    auto done = (*copy)->Step();
    ASSERT_TRUE(done.ok()) << done.status().ToString();
    ++steps;
    if (*done) break;
  }
  EXPECT_GE(steps, 3);
  copy->reset();
  EXPECT_FALSE(fs::exists(copy_path + "-wal")) << "a copy is one file";

  auto info = CheckStoreCopy(copy_path);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->jobs, 60);
  EXPECT_EQ(info->schema_version, SqliteStateStore::Schema().back().version);
  auto restored = LoadRestored(copy_path);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  std::vector<JobRecord> expected(jobs.begin(), jobs.end() - 1);
  expected.push_back(added);
  ExpectSameJobs(restored->jobs, expected);
}

TEST_F(StateBackupTest, BackupsAreNamedByTimeRotatedAndDueAfterTheNewestFound) {
  Store(BigJobs(3, 1));
  auto store = OpenOk();
  ASSERT_TRUE(store && store->Load().ok());
  const int64_t t0 = 1'764'950'400'000;  // 2025-12-05T16:00:00Z
  EXPECT_EQ(StateBackups::FileName(t0 + 123), "state-20251205T160000.123Z.db");
  EXPECT_EQ(StateBackups::TimeOfName("state-20251205T160000.123Z.db"), t0 + 123);
  for (const char* other : {"state-20251205T160000.123Z.db.partial", "state.db", "state-x.db",
                            "state-20251205T16000.1234Z.db", "state-20251205X160000.123Z.db"}) {
    EXPECT_FALSE(StateBackups::TimeOfName(other)) << other;
  }
  {
    fs::create_directories(Backups());
    WriteBytes(Backups() / ".state-20251205T150000.000Z.db.partial", "left by a crash");
    WriteBytes(Backups() / "notes.txt", "the admin's");
    StateBackups backups({Backups().string(), 60'000, 2}, t0);
    EXPECT_FALSE(fs::exists(Backups() / ".state-20251205T150000.000Z.db.partial"));
    EXPECT_EQ(backups.next_due_ms(), t0);  // none yet: at once
    for (int i = 0; i < 3; ++i) {
      const int64_t now = t0 + i * 60'000;
      std::vector<StateBackupResult> ended = backups.Step(*store, now);
      for (auto& r : backups.Finish(*store, now)) ended.push_back(std::move(r));
      ASSERT_EQ(ended.size(), 1u);
      EXPECT_TRUE(ended[0].ok) << ended[0].error;
      EXPECT_EQ(ended[0].path, (Backups() / StateBackups::FileName(now)).string());
      EXPECT_EQ(ended[0].info.jobs, 3);
      EXPECT_GT(ended[0].bytes, 0u);
      EXPECT_EQ(ended[0].kept, std::min(i + 1, 2));
      EXPECT_EQ(ended[0].number, static_cast<uint64_t>(i + 1));
      EXPECT_EQ(backups.begun(), static_cast<uint64_t>(i + 1));
      EXPECT_EQ(backups.next_due_ms(), now + 60'000);
      EXPECT_TRUE(backups.Step(*store, now + 59'999).empty());  // not due
      EXPECT_FALSE(backups.busy());
    }
    EXPECT_EQ(BackupFiles(),
              (std::vector<std::string>{"notes.txt", StateBackups::FileName(t0 + 60'000),
                                        StateBackups::FileName(t0 + 120'000)}));
    EXPECT_EQ(backups.counters().succeeded, 3u);
    EXPECT_EQ(backups.counters().last_success_ms, t0 + 120'000);
    // Asked for, a backup is taken at once, however soon the next one is due.
    backups.RequestNow();
    std::vector<StateBackupResult> asked = backups.Step(*store, t0 + 130'000);
    for (auto& r : backups.Finish(*store, t0 + 130'000)) asked.push_back(std::move(r));
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_TRUE(asked[0].ok) << asked[0].error;
    EXPECT_TRUE(asked[0].requested);
    EXPECT_EQ(BackupFiles(),
              (std::vector<std::string>{"notes.txt", StateBackups::FileName(t0 + 120'000),
                                        StateBackups::FileName(t0 + 130'000)}));
  }
  // A coordinator started again goes on from the newest backup there, not from its start.
  StateBackups again({Backups().string(), 60'000, 2}, t0 + 150'000);
  EXPECT_EQ(again.counters().last_success_ms, t0 + 130'000);
  EXPECT_EQ(again.next_due_ms(), t0 + 190'000);
}

TEST_F(StateBackupTest, ABackupThatCannotBeWrittenIsCountedRemovedAndTriedAgainSooner) {
  Store(BigJobs(2, 1));
  auto store = OpenOk();
  ASSERT_TRUE(store && store->Load().ok());
  // The backup dir's parent is a file: nothing can be made there.
  WriteBytes(Backups(), "not a directory");
  StateBackups backups({(Backups() / "sub").string(), 3'600'000, 5}, 1000);
  std::vector<StateBackupResult> ended = backups.Step(*store, 1000);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_FALSE(ended[0].ok);
  EXPECT_NE(ended[0].error.find((Backups() / "sub").string()), std::string::npos) << ended[0].error;
  EXPECT_EQ(backups.counters().failed, 1u);
  EXPECT_EQ(backups.counters().succeeded, 0u);
  EXPECT_EQ(backups.next_due_ms(), 1000 + 60'000);  // a minute, not the hour
  EXPECT_FALSE(backups.busy());
  fs::remove(Backups());
  ended = backups.Step(*store, 61'000);
  for (auto& r : backups.Finish(*store, 61'000)) ended.push_back(std::move(r));
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_TRUE(ended[0].ok) << ended[0].error;
  EXPECT_EQ(backups.next_due_ms(), 61'000 + 3'600'000);
}

TEST_F(StateBackupTest, ARestoreReplacesTheDatabaseKeepingTheOldOneAsideAndNamesTheStore) {
  std::vector<JobRecord> jobs = BigJobs(4, 1);
  Store(jobs);
  std::string backup;
  {
    auto [store, loaded] = OpenAndLoad();
    ASSERT_TRUE(store);
    backup = CopyWhole(*store, "b.db");
    // Afterwards the live store moves on: the restore goes back to the backup's point.
    JobRecord later = MakeJob("later", 5, 0);
    StateChanges c;
    c.jobs = {&later};
    ASSERT_TRUE(store->Commit(c).ok());
    // While the coordinator holds the database, a restore is refused and changes nothing.
    auto refused = RestoreStateStore(dir_.string(), backup);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(refused.status().message().find("stop it first"), std::string::npos)
        << refused.status().ToString();
  }
  const std::string backup_bytes = ReadBytes(backup);
  auto said = RestoreStateStore(dir_.string(), backup);
  ASSERT_TRUE(said.ok()) << said.status().ToString();
  EXPECT_TRUE(Mentions(*said, "4 jobs")) << ::testing::PrintToString(*said);
  EXPECT_TRUE(Mentions(*said, "kept as " + (dir_ / "state.db.replaced-").string()));
  EXPECT_EQ(ReadBytes(backup), backup_bytes) << "the backup itself is never changed";
  EXPECT_FALSE(fs::exists(dir_ / "state.db.restoring"));
  auto [store, loaded] = OpenAndLoad();
  ASSERT_TRUE(store);
  ExpectSameJobs(loaded.jobs, jobs);
  store.reset();
  // The database it replaced, with job "later", is there to go back to.
  int replaced = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (e.path().filename().string().rfind("state.db.replaced-", 0) == 0) ++replaced;
  }
  EXPECT_EQ(replaced, 1);
}

TEST_F(StateBackupTest, ABackupThatDoesNotVerifyIsNotRestoredAndNothingChanges) {
  std::vector<JobRecord> jobs = {MakeJob("kept", 1, 0), MakeJob("hit", 2, 0, "/bin/flip-me-here")};
  Store(jobs);
  std::string backup;
  {
    auto [store, loaded] = OpenAndLoad();
    ASSERT_TRUE(store);
    backup = CopyWhole(*store, "b.db");
  }
  // The live state dir is another store's now, without jobs "kept" and "hit".
  fs::remove_all(dir_);
  Store({MakeJob("live", 1, 0)});
  const std::string live_db = ReadBytes(dir_ / "state.db");
  const std::string live_marker = ReadBytes(dir_ / "state-store.id");
  auto unchanged = [&] {
    EXPECT_EQ(ReadBytes(dir_ / "state.db"), live_db);
    EXPECT_EQ(ReadBytes(dir_ / "state-store.id"), live_marker);
    EXPECT_FALSE(fs::exists(dir_ / "state.db.restoring"));
  };

  const std::string flipped = (Backups() / "flipped.db").string();
  WriteBytes(flipped, ReadBytes(backup));
  ASSERT_TRUE(FlipByteOf(flipped, "/bin/flip-me-here"));
  auto refused = RestoreStateStore(dir_.string(), flipped);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(refused.status().message().find("job hit"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("Nothing in " + dir_.string() + " changed"),
            std::string::npos);
  unchanged();

  const std::string junk = (Backups() / "junk.db").string();
  WriteBytes(junk, std::string(8192, 'z'));
  refused = RestoreStateStore(dir_.string(), junk);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kDataLoss) << refused.status().ToString();
  unchanged();

  const std::string future = (Backups() / "future.db").string();
  WriteBytes(future, ReadBytes(backup));
  {
    auto db = SqliteDb::Open(future, false);
    ASSERT_TRUE(db.ok() && (*db)->Exec("PRAGMA user_version = 99").ok());
  }
  refused = RestoreStateStore(dir_.string(), future);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("newer cohort-coordinator"), std::string::npos);
  unchanged();

  refused = RestoreStateStore(dir_.string(), (Backups() / "missing.db").string());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kNotFound) << refused.status().ToString();
  unchanged();

  // The good backup of the other store is taken, and the marker names that store now.
  auto said = RestoreStateStore(dir_.string(), backup);
  ASSERT_TRUE(said.ok()) << said.status().ToString();
  EXPECT_TRUE(Mentions(*said, "it now holds store"));
  auto [store, loaded] = OpenAndLoad();
  ASSERT_TRUE(store);
  ExpectSameJobs(loaded.jobs, jobs);
}

}  // namespace
}  // namespace cohort::coordinator
