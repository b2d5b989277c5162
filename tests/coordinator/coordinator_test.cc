// The coordinator driven through its real endpoints: DealerSockets over inproc:// play agents and
// clients, a ManualClock replaces time, and RunOnce() steps the loop (no sleeps).
#include "coordinator/coordinator.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "common/clock.h"
#include "common/utf8.h"
#include "common/wire_string.h"
#include "coordinator/agent_service.h"
#include "tests/coordinator/test_records.h"
#include "tests/testing/hostile_values.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using wire::JobState;
using wire::ReplicaState;

// A replica's status as an agent reports it (in a ReplicaUpdate, or running at registration).
wire::ReplicaStatusT StatusOf(const std::string& job, const std::string& replica, int attempt,
                              ReplicaState state) {
  wire::ReplicaStatusT s;
  s.job = job;
  s.replica = replica;
  s.attempt = attempt;
  s.state = state;
  return s;
}
wire::ReplicaStatusT Running(const std::string& job, const std::string& replica, int attempt = 0) {
  return StatusOf(job, replica, attempt, ReplicaState::RUNNING);
}

std::string JobYaml(const std::string& name, int workers, int gpus, int max_restarts = 3,
                    const std::string& extra_scheduling = "") {
  std::string y = "name: " + name +
                  "\n"
                  "worker_pools:\n"
                  "  - role: chief\n"
                  "    replicas: 1\n"
                  "    resources: {gpus: " +
                  std::to_string(gpus) +
                  ", cpus: 1}\n"
                  "    process: {command: [/bin/train], args: [--epochs=1], env: {MY_VAR: x}}\n";
  if (workers > 0) {
    y += "  - role: worker\n    replicas: " + std::to_string(workers) +
         "\n    resources: {gpus: " + std::to_string(gpus) +
         ", cpus: 1}\n    process: {command: [/bin/train]}\n";
  }
  y += "scheduling: {max_restarts: " + std::to_string(max_restarts) + extra_scheduling + "}\n";
  return y;
}

// One peer (agent or client): a DealerSocket plus an inbox of everything it has received.
struct Peer {
  std::unique_ptr<DealerSocket> socket;
  std::deque<Message> inbox;
  std::string node_id;

  void Drain() {
    while (true) {
      auto m = socket->Receive(milliseconds(0));
      if (!m.ok() || !m->has_value()) return;
      inbox.push_back(std::move(**m));
    }
  }
  // `user`: the one a plaintext client claims (Envelope.user); "": none.
  template <typename T>
  uint64_t Send(T body, const std::string& user = "") {
    uint64_t id = socket->NextRequestId();
    EXPECT_TRUE(socket->Send(Encode(id, std::move(body), user)).ok());
    return id;
  }
  // Removes and returns every received message of type T (unpacked).
  template <typename T>
  std::vector<typename T::NativeTableType> Take() {
    std::vector<typename T::NativeTableType> out;
    for (auto it = inbox.begin(); it != inbox.end();) {
      if (const T* t = it->As<T>()) {
        typename T::NativeTableType native;
        t->UnPackTo(&native);
        out.push_back(std::move(native));
        it = inbox.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
};

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    std::string tag = std::to_string(::getpid()) + "-" + std::to_string(++counter);
    dir_ = fs::temp_directory_path() / ("cohort-coord-test-" + tag);
    fs::remove_all(dir_);
    options_.client_endpoint = "inproc://clients-" + tag;
    options_.agent_endpoint = "inproc://agents-" + tag;
    options_.state_dir = dir_.string();
    options_.insecure = true;
    options_.heartbeat_timeout = milliseconds(10'000);
    options_.port_min = 25000;
    options_.port_max = 25999;
    Start();
    client_ = Connect(options_.client_endpoint, "");
  }
  void TearDown() override {
    agents_.clear();
    client_ = Peer{};
    coordinator_.reset();
    fs::remove_all(dir_);
  }

  void Start() {
    auto c = Coordinator::Create(options_, &clock_, &context_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    coordinator_ = std::move(*c);
  }
  // A new Coordinator object on the same state dir. inproc:// connections do not survive the
  // old sockets (tcp ones reconnect by themselves), so the peers connect again.
  void Restart() {
    coordinator_.reset();
    // A closed inproc:// endpoint is released asynchronously: bind fresh names.
    static int restarts = 0;
    ++restarts;
    options_.client_endpoint += "-r" + std::to_string(restarts);
    options_.agent_endpoint += "-r" + std::to_string(restarts);
    Start();
    client_ = Connect(options_.client_endpoint, "");
    for (auto& [id, a] : agents_) a = Connect(options_.agent_endpoint, id);
  }

  Peer Connect(const std::string& endpoint, const std::string& identity) {
    auto s = DealerSocket::Connect(context_, endpoint, identity);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    Peer p;
    p.socket = std::make_unique<DealerSocket>(std::move(*s));
    p.node_id = identity;
    return p;
  }

  // Steps the loop and collects what every peer received, until `done` holds (or 200 steps).
  void Pump(
      const std::function<bool()>& done = [] { return false; }, int steps = 200) {
    for (int i = 0; i < steps; ++i) {
      ASSERT_TRUE(coordinator_->RunOnce(milliseconds(i == 0 ? 0 : 2)).ok());
      client_.Drain();
      for (auto& [id, a] : agents_) a.Drain();
      if (done()) return;
    }
  }
  void PumpFew() {
    Pump([] { return false; }, 5);
  }

  // Client call (as `user`, see Peer::Send): sends, pumps until the reply with that id arrives.
  template <typename T>
  Message Call(T body, const std::string& user = "") {
    uint64_t id = client_.Send(std::move(body), user);
    std::optional<Message> reply;
    Pump([&] {
      for (auto it = client_.inbox.begin(); it != client_.inbox.end(); ++it) {
        if (it->request_id() == id) {
          reply.emplace(std::move(*it));
          client_.inbox.erase(it);
          return true;
        }
      }
      return false;
    });
    EXPECT_TRUE(reply.has_value()) << "no reply to request " << id;
    if (!reply) std::abort();
    return std::move(*reply);
  }

  Status Submit(const std::string& yaml) {
    wire::SubmitJobT req;
    req.spec_yaml = yaml;
    Message m = Call(std::move(req));
    return m.ErrorStatus();
  }
  wire::JobInfoT GetJob(const std::string& name) {
    wire::GetJobT req;
    req.name = name;
    return CallFor<wire::JobInfo>(std::move(req));
  }
  // The names of the jobs `query` lists, in the order given.
  std::vector<std::string> ListedNames(wire::ListJobsT query) {
    std::vector<std::string> out;
    for (const auto& job : CallFor<wire::JobList>(std::move(query)).jobs) out.push_back(job->name);
    return out;
  }
  // Sends `req` and unpacks the reply, expected to be a Reply.
  template <typename Reply, typename Request>
  typename Reply::NativeTableType CallFor(Request req, const std::string& user = "") {
    Message m = Call(std::move(req), user);
    typename Reply::NativeTableType out;
    const auto* r = m.As<Reply>();
    EXPECT_NE(r, nullptr) << m.ErrorStatus().ToString();
    if (r) r->UnPackTo(&out);
    return out;
  }

  Peer& AddAgent(const std::string& node_id, int gpus,
                 std::vector<wire::ReplicaStatusT> running = {}) {
    agents_[node_id] = Connect(options_.agent_endpoint, node_id);
    Register(node_id, gpus, std::move(running));
    return agents_[node_id];
  }
  void Register(const std::string& node_id, int gpus,
                std::vector<wire::ReplicaStatusT> running = {}) {
    Peer& a = agents_[node_id];
    wire::RegisterAgentT reg;
    reg.node_id = node_id;
    reg.address = node_id + ".local";
    if (port_domains_.count(node_id)) reg.port_domain = port_domains_[node_id];
    for (const auto& [key, value] : node_labels_[node_id]) {
      auto kv = std::make_unique<wire::KeyValueT>();
      kv->key = key;
      kv->value = value;
      reg.labels.push_back(std::move(kv));
    }
    for (int i = 0; i < gpus; ++i) {
      auto g = std::make_unique<wire::GpuInfoT>();
      g->index = i;
      g->model = "test-gpu";
      reg.gpus.push_back(std::move(g));
    }
    reg.cpus = 16;
    reg.memory_mb = 64'000;
    for (auto& s : running) reg.replicas.push_back(std::make_unique<wire::ReplicaStatusT>(s));
    uint64_t id = a.Send(std::move(reg));
    Pump([&] {
      for (auto it = a.inbox.begin(); it != a.inbox.end(); ++it) {
        if (it->request_id() == id && it->As<wire::RegisterAgentReply>()) {
          a.inbox.erase(it);
          return true;
        }
      }
      return false;
    });
  }
  void Heartbeat(const std::string& node_id, bool draining = false,
                 const std::string& unhealthy = "", bool health_rechecking = false) {
    wire::HeartbeatT hb;
    hb.node_id = node_id;
    hb.draining = draining;
    hb.unhealthy = unhealthy;
    hb.health_rechecking = health_rechecking;
    agents_[node_id].Send(std::move(hb));
  }
  // Heartbeats from node_id: the one reply says the coordinator does not know the node.
  void ExpectHeartbeatUnknown(const std::string& node_id) {
    Heartbeat(node_id);
    Pump([&] { return !agents_[node_id].inbox.empty(); });
    auto replies = agents_[node_id].Take<wire::HeartbeatReply>();
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_FALSE(replies[0].known);
  }
  void Report(const std::string& node_id, const std::string& job, const std::string& replica,
              int attempt, ReplicaState state, int exit_code = -1, int signal = 0,
              bool health_rechecking = false) {
    wire::ReplicaUpdateT u;
    u.node_id = node_id;
    u.status = std::make_unique<wire::ReplicaStatusT>(StatusOf(job, replica, attempt, state));
    u.status->exit_code = exit_code;
    u.status->signal = signal;
    u.status->health_rechecking = health_rechecking;
    agents_[node_id].Send(std::move(u));
    PumpFew();
  }
  // Every launch received by any agent, as (node, launch).
  std::vector<std::pair<std::string, wire::LaunchReplicaT>> TakeLaunchList() {
    std::vector<std::pair<std::string, wire::LaunchReplicaT>> out;
    for (auto& [id, a] : agents_) {
      for (auto& l : a.Take<wire::LaunchReplica>()) out.emplace_back(id, std::move(l));
    }
    return out;
  }
  // TakeLaunchList after the first of up to five periodic rounds (a second apart) that launched
  // anything; empty when none did.
  std::vector<std::pair<std::string, wire::LaunchReplicaT>> LaunchesWithinFiveRounds() {
    std::vector<std::pair<std::string, wire::LaunchReplicaT>> launched;
    for (int i = 0; i < 5 && launched.empty(); ++i) {
      clock_.Advance(milliseconds(1000));
      PumpFew();
      launched = TakeLaunchList();
    }
    return launched;
  }
  // The same keyed by "<node>/<replica>" (tests with one job).
  std::map<std::string, wire::LaunchReplicaT> TakeLaunches() {
    std::map<std::string, wire::LaunchReplicaT> out;
    for (auto& [node, l] : TakeLaunchList()) {
      std::string key = node + "/" + l.replica;  // before l is moved from
      out[key] = std::move(l);
    }
    return out;
  }
  void RunAll(const std::vector<std::pair<std::string, wire::LaunchReplicaT>>& launches) {
    for (const auto& [node, l] : launches) {
      Report(node, l.job, l.replica, l.attempt, ReplicaState::RUNNING);
    }
  }
  std::vector<std::string> TakeStops() {
    std::vector<std::string> out;
    for (auto& [id, a] : agents_) {
      for (auto& s : a.Take<wire::StopReplica>()) {
        out.push_back(id + "/" + s.replica + "#" + std::to_string(s.attempt));
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // Pumps until `count` launches came (a job's gang), reports each RUNNING; replica -> node.
  std::map<std::string, std::string> RunGang(size_t count) {
    std::vector<std::pair<std::string, wire::LaunchReplicaT>> launches;
    for (int i = 0; i < 20 && launches.size() < count; ++i) {
      PumpFew();
      for (auto& launch : TakeLaunchList()) launches.push_back(std::move(launch));
    }
    EXPECT_EQ(launches.size(), count);
    RunAll(launches);
    std::map<std::string, std::string> where;
    for (const auto& [node, launch] : launches) where[launch.replica] = node;
    return where;
  }
  // 12 s pass with every node of `nodes` but `lost` heartbeating: `lost` is declared lost.
  void LoseNodeAmong(const std::string& lost, const std::vector<std::string>& nodes) {
    for (int i = 0; i < 12; ++i) {
      clock_.Advance(milliseconds(1000));
      for (const std::string& id : nodes) {
        if (id != lost) Heartbeat(id);
      }
      PumpFew();
    }
    EXPECT_FALSE(coordinator_->FindNode(lost)->ready);
  }
  // Submits `yaml`, waits for node_id's agent to get a launch and reports every launch running.
  void SubmitAndRun(const std::string& node_id, const std::string& yaml) {
    ASSERT_TRUE(Submit(yaml).ok());
    Pump([&] { return !agents_[node_id].inbox.empty(); });
    RunAll(TakeLaunches());
  }
  void RunAll(const std::map<std::string, wire::LaunchReplicaT>& launches) {
    for (const auto& [key, l] : launches) {
      std::string node = key.substr(0, key.find('/'));
      Report(node, l.job, l.replica, l.attempt, ReplicaState::RUNNING);
    }
  }
  const wire::ReplicaInfoT* Replica(const wire::JobInfoT& info, const std::string& name) {
    for (const auto& r : info.replicas) {
      if (r->replica == name) return r.get();
    }
    ADD_FAILURE() << "no replica " << name;
    return nullptr;
  }
  bool HasEvent(const wire::JobInfoT& info, const std::string& needle) {
    for (const auto& e : info.events) {
      if (e->message.find(needle) != std::string::npos) return true;
    }
    return false;
  }

  zmq::context_t context_{1};
  ManualClock clock_;
  fs::path dir_;
  CoordinatorOptions options_;
  std::unique_ptr<Coordinator> coordinator_;
  Peer client_;
  std::map<std::string, Peer> agents_;
  // The port domain a node's agent reports (none: the agent reports none, so its address stands
  // for it, a host of its own).
  std::map<std::string, std::string> port_domains_;
  // The labels a node's agent registers with (none when not listed).
  std::map<std::string, NodeLabels> node_labels_;
};

std::string Env(const wire::LaunchReplicaT& l, const std::string& key) {
  for (const auto& kv : l.env) {
    if (kv->key == key) return kv->value;
  }
  return "<unset>";
}

TEST_F(CoordinatorTest, JobRunsToSuccessAndOtherReplicasAreStoppedAfterTheFinishGrace) {
  AddAgent("node-a", 4);
  ASSERT_TRUE(Submit(JobYaml("train", 2, 1)).ok());
  Pump([&] { return agents_["node-a"].inbox.size() >= 3; });
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.size(), 3u);
  const auto& chief = launches["node-a/chief-0"];
  EXPECT_EQ(chief.command, (std::vector<std::string>{"/bin/train", "--epochs=1"}));
  EXPECT_EQ(Env(chief, "MY_VAR"), "x");
  EXPECT_EQ(Env(chief, "RANK"), "0");
  EXPECT_EQ(Env(launches["node-a/worker-1"], "RANK"), "2");
  EXPECT_EQ(Env(chief, "WORLD_SIZE"), "3");
  EXPECT_EQ(Env(chief, "MASTER_ADDR"), "node-a.local");
  EXPECT_EQ(chief.attempt, 0);
  EXPECT_NE(chief.checkpoint_dir.find(dir_.string() + "/jobs/train"), std::string::npos);
  // Each replica is pinned to a GPU of its own; one-GPU training replicas sharing a node all
  // see the job's GPUs there in local-rank order (LaunchPlan's VisibleGpus).
  std::set<int> gpus;
  std::vector<int> in_rank_order;
  auto pending = GetJob("train");
  EXPECT_EQ(pending.state, JobState::PENDING);
  for (const auto& r : pending.replicas) {
    ASSERT_EQ(r->gpus.size(), 1u);
    EXPECT_TRUE(gpus.insert(r->gpus[0]).second);
    in_rank_order.push_back(r->gpus[0]);
  }
  for (const auto& [k, l] : launches) EXPECT_EQ(l.gpus, in_rank_order) << k;
  EXPECT_EQ(Env(launches["node-a/worker-1"], "LOCAL_RANK"), "2");

  RunAll(launches);
  EXPECT_EQ(GetJob("train").state, JobState::RUNNING);

  Report("node-a", "train", "worker-0", 0, ReplicaState::SUCCEEDED, 0);
  EXPECT_EQ(GetJob("train").state, JobState::RUNNING);  // a worker finishing is fine
  Report("node-a", "train", "chief-0", 0, ReplicaState::SUCCEEDED, 0);
  auto info = GetJob("train");
  EXPECT_EQ(info.state, JobState::SUCCEEDED);
  EXPECT_GT(info.end_time_ms, 0);
  // worker-1 still runs: it has scheduling.finish_grace (30 s) to end on its own.
  EXPECT_TRUE(TakeStops().empty());
  EXPECT_EQ(Replica(info, "worker-1")->state, ReplicaState::RUNNING);
  clock_.Advance(milliseconds(29'000));
  Heartbeat("node-a");
  PumpFew();
  EXPECT_TRUE(TakeStops().empty());
  clock_.Advance(milliseconds(1'100));
  Heartbeat("node-a");
  PumpFew();
  EXPECT_EQ(TakeStops(), (std::vector<std::string>{"node-a/worker-1#0"}));
  Report("node-a", "train", "worker-1", 0, ReplicaState::STOPPED, 143, 15);
  info = GetJob("train");
  EXPECT_EQ(info.state, JobState::SUCCEEDED);
  EXPECT_EQ(Replica(info, "worker-1")->state, ReplicaState::STOPPED);
  EXPECT_EQ(info.restarts, 0);
}

// A Vertex AI CustomJob file, submitted as it is: the coordinator stores and runs the Cohort job
// it makes, warns of what had no counterpart, and the agents get the container's args apart.
TEST_F(CoordinatorTest, AVertexCustomJobFileRunsAsTheJobItMakes) {
  AddAgent("node-a", 2);
  wire::SubmitJobT req;
  req.spec_yaml = R"({"displayName": "mnist", "jobSpec": {"workerPoolSpecs": [
      {"replicaCount": "1", "machineSpec": {"machineType": "a2-highgpu-1g", "acceleratorCount": 1},
       "containerSpec": {"imageUri": "/images/trainer", "args": ["--epochs=2"],
                         "env": [{"name": "MY_VAR", "value": "x"}]}},
      {"replicaCount": "1", "machineSpec": {"acceleratorCount": 1},
       "containerSpec": {"imageUri": "/images/trainer", "args": ["--epochs=2"]}}]}})";
  Message m = Call(std::move(req));
  const auto* reply = m.As<wire::SubmitJobReply>();
  ASSERT_NE(reply, nullptr) << m.ErrorStatus().ToString();
  wire::SubmitJobReplyT submitted;
  reply->UnPackTo(&submitted);
  EXPECT_EQ(submitted.name.rfind("mnist-", 0), 0u) << submitted.name;
  ASSERT_EQ(submitted.warnings.size(), 2u);
  EXPECT_NE(submitted.warnings[0].find("jobSpec.workerPoolSpecs[0].machineSpec.machineType"),
            std::string::npos)
      << submitted.warnings[0];
  EXPECT_NE(submitted.warnings[1].find("jobSpec.scheduling.restartJobOnWorkerRestart: unset"),
            std::string::npos)
      << submitted.warnings[1];
  Pump([&] { return agents_["node-a"].inbox.size() >= 2; });
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.size(), 2u);
  const auto& chief = launches["node-a/chief-0"];
  ASSERT_NE(chief.container, nullptr);
  EXPECT_EQ(chief.container->image, "/images/trainer");
  EXPECT_EQ(chief.container->args, (std::vector<std::string>{"--epochs=2"}));
  EXPECT_TRUE(chief.container->command.empty());
  EXPECT_EQ(Env(chief, "MY_VAR"), "x");
  EXPECT_FALSE(chief.gpus.empty());  // acceleratorCount: 1 (the node's two seen in rank order)
  // The job file stored, with its generated name, given only when asked for.
  wire::GetJobT get;
  get.name = submitted.name;
  get.with_spec = true;
  StatusOr<JobSpec> stored =
      ParseJobSpec(CallFor<wire::JobInfo>(std::move(get)).spec_yaml, "stored spec");
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->name, submitted.name);
  ASSERT_EQ(stored->pools.size(), 2u);
  EXPECT_EQ(stored->pools[0].container->args, (std::vector<std::string>{"--epochs=2"}));
  EXPECT_TRUE(GetJob(submitted.name).spec_yaml.empty());
  // A malformed one is refused, naming the field.
  wire::SubmitJobT bad;
  bad.spec_yaml = "workerPoolSpecs: [{replicaCount: 1, containerSpec: {imageUrl: x}}]\n";
  Status refused = Call(std::move(bad)).ErrorStatus();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("workerPoolSpecs[0].containerSpec.imageUrl: unknown key"),
            std::string::npos)
      << refused.message();
}

// A Vertex AI HyperparameterTuningJob file: the coordinator runs the study it makes; its first
// trial's job carries the trial's parameters after the container's args.
TEST_F(CoordinatorTest, AVertexTuningJobFileRunsAsTheStudyItMakes) {
  AddAgent("node-a", 1);
  const std::string file = R"({"displayName": "lr_sweep", "maxTrialCount": "2", "studySpec": {
      "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
      "parameters": [{"parameterId": "lr", "discreteValueSpec": {"values": [0.1, 0.2]}}],
      "algorithm": "GRID_SEARCH", "measurementSelectionType": "LAST_MEASUREMENT"},
    "trialJobSpec": {"workerPoolSpecs": [
      {"replicaCount": "1", "machineSpec": {"machineType": "n1-standard-4"},
       "containerSpec": {"imageUri": "/images/trainer", "args": ["--epochs=2"]}}]}})";
  wire::SubmitStudyT req;
  req.spec_yaml = file;
  wire::StudyInfoT study = CallFor<wire::StudyInfo>(std::move(req));
  EXPECT_EQ(study.name, "lr_sweep");
  // What had no counterpart comes back to the submitter.
  ASSERT_EQ(study.warnings.size(), 1u);
  EXPECT_NE(study.warnings[0].find("machineSpec.machineType: ignored 'n1-standard-4'"),
            std::string::npos)
      << study.warnings[0];
  wire::GetStudyT get;  // only the submit's reply has them
  get.name = "lr_sweep";
  EXPECT_TRUE(CallFor<wire::StudyInfo>(std::move(get)).warnings.empty());
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.size(), 1u);
  const wire::LaunchReplicaT& trial = launches.begin()->second;
  EXPECT_EQ(trial.job, "lr_sweep_trial_1");
  ASSERT_NE(trial.container, nullptr);
  EXPECT_EQ(trial.container->args, (std::vector<std::string>{"--epochs=2", "--lr=0.1"}));

  // The same file again, named by the request (`cohort tune --name`) in place of its
  // displayName; a name that is not a study name is refused as such.
  auto named = [](const std::string& text, const std::string& name) {
    wire::SubmitStudyT req;
    req.spec_yaml = text;
    req.name = name;
    return req;
  };
  EXPECT_EQ(CallFor<wire::StudyInfo>(named(file, "lr_sweep_2")).name, "lr_sweep_2");
  Status refused = Call(named(file, "2nd sweep")).ErrorStatus();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("name: '2nd sweep' is not a valid study name"),
            std::string::npos)
      << refused.message();
  // Without a displayName, the request's name is the study's; without either, it is refused.
  const std::string display = R"("displayName": "lr_sweep", )";
  std::string nameless = file;
  nameless.erase(nameless.find(display), display.size());
  EXPECT_EQ(CallFor<wire::StudyInfo>(named(nameless, "lr_sweep_3")).name, "lr_sweep_3");
  Status no_name = Call(named(nameless, "")).ErrorStatus();
  EXPECT_NE(no_name.message().find("displayName: required"), std::string::npos)
      << no_name.ToString();
}

TEST_F(CoordinatorTest, LostNodeReplicasArePlacedElsewhere) {
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("mover", 0, 1)));
  AddAgent("node-b", 1);
  // node-b keeps heartbeating, node-a falls silent.
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(milliseconds(1000));
    Heartbeat("node-b");
    PumpFew();
  }
  EXPECT_FALSE(coordinator_->FindNode("node-a")->ready);
  EXPECT_TRUE(coordinator_->FindNode("node-b")->ready);
  Pump([&] { return !agents_["node-b"].inbox.empty(); });
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.count("node-b/chief-0"), 1u);
  EXPECT_EQ(launches["node-b/chief-0"].attempt, 1);
  auto info = GetJob("mover");
  EXPECT_EQ(Replica(info, "chief-0")->node_id, "node-b");
  EXPECT_TRUE(HasEvent(info, "lost"));

  // node-a comes back still running attempt 0: it is told to stop it.
  ASSERT_NO_FATAL_FAILURE(ExpectHeartbeatUnknown("node-a"));
  Register("node-a", 1, {Running("mover", "chief-0")});
  EXPECT_EQ(TakeStops(), (std::vector<std::string>{"node-a/chief-0#0"}));
  EXPECT_TRUE(coordinator_->FindNode("node-a")->ready);
}

// A node's agent reports its replica killed, then goes away before the heartbeat timeout (dies,
// or restarts); meanwhile the job's restart sends it a launch, which it never answers.
class LaunchIntoSilenceTest : public CoordinatorTest {
 protected:
  // Job "dies" (chief-0, worker-0; whole-job restarts) on node-a and node-b: worker-0 is killed,
  // its node (`dead_`) says so and says nothing more; attempt 1 goes to both nodes (the gang
  // needs both) 100 ms later, and runs on `live_`.
  void KillThenRestartIntoSilence() {
    AddAgent("node-a", 1);
    AddAgent("node-b", 1);
    ASSERT_TRUE(Submit(JobYaml("dies", 1, 1, 3, ", restart_job_on_worker_restart: true")).ok());
    Pump([&] { return !agents_["node-a"].inbox.empty() && !agents_["node-b"].inbox.empty(); });
    auto launches = TakeLaunchList();
    ASSERT_EQ(launches.size(), 2u);
    RunAll(launches);
    for (const auto& [node, l] : launches) (l.replica == "worker-0" ? dead_ : live_) = node;
    ASSERT_FALSE(dead_.empty());
    ASSERT_FALSE(live_.empty());

    Report(dead_, "dies", "worker-0", 0, ReplicaState::FAILED, 137, 9);  // its last word
    EXPECT_EQ(TakeStops(), std::vector<std::string>{live_ + "/chief-0#0"});
    clock_.Advance(milliseconds(100));
    Report(live_, "dies", "chief-0", 0, ReplicaState::STOPPED, 143, 15);
    Pump([&] { return !agents_[dead_].inbox.empty() && !agents_[live_].inbox.empty(); });
    launches = TakeLaunchList();
    ASSERT_EQ(launches.size(), 2u);
    for (const auto& [node, l] : launches) {
      EXPECT_EQ(l.attempt, 1) << l.replica;
      if (node == live_) Report(live_, "dies", l.replica, 1, ReplicaState::RUNNING);
    }
  }

  std::string dead_;
  std::string live_;
};

// The node is declared lost: the launch it never answered costs nothing, and the job has spent
// one restart, the kill's.
TEST_F(LaunchIntoSilenceTest, WhenTheNodeIsLostTheJobIsPlacedAgainWithoutSpendingARestart) {
  ASSERT_NO_FATAL_FAILURE(KillThenRestartIntoSilence());
  for (int i = 0; i < 11; ++i) {
    clock_.Advance(milliseconds(1000));
    Heartbeat(live_);
    PumpFew();
  }
  ASSERT_FALSE(coordinator_->FindNode(dead_)->ready);
  auto info = GetJob("dies");
  EXPECT_EQ(info.restarts, 1);
  EXPECT_TRUE(HasEvent(info, "relaunch (no restart spent): the whole job"));
  EXPECT_TRUE(HasEvent(info, "was launched 100ms after the node was last heard from"));

  // The job's other replica stops; on a new node the job runs again, its budget as it was.
  auto stops = TakeStops();  // "<node>/<replica>#<attempt>"
  ASSERT_EQ(stops.size(), 1u);
  const size_t slash = stops[0].find('/');
  ASSERT_EQ(stops[0].substr(0, slash), live_);
  Report(live_, "dies", stops[0].substr(slash + 1, stops[0].find('#') - slash - 1), 1,
         ReplicaState::STOPPED, 143, 15);
  AddAgent("node-c", 1);
  Pump([&] { return !agents_["node-c"].inbox.empty(); });
  auto launches = TakeLaunchList();
  ASSERT_EQ(launches.size(), 2u);
  for (const auto& [node, l] : launches) {
    EXPECT_NE(node, dead_);
    EXPECT_EQ(l.attempt, 2) << l.replica;
  }
  RunAll(launches);
  info = GetJob("dies");
  EXPECT_EQ(info.state, JobState::RUNNING);
  EXPECT_EQ(info.restarts, 1);
}

// The agent restarted and registers again knowing nothing: the launch it never saw costs nothing.
TEST_F(LaunchIntoSilenceTest, WhenItsAgentRegistersAgainWithoutItNoRestartIsSpent) {
  ASSERT_NO_FATAL_FAILURE(KillThenRestartIntoSilence());
  clock_.Advance(milliseconds(500));
  Register(dead_, 1);
  auto info = GetJob("dies");
  EXPECT_EQ(info.restarts, 1);
  EXPECT_TRUE(HasEvent(info, "relaunch (no restart spent): the whole job"));
  EXPECT_TRUE(HasEvent(info, "re-registered without it; attempt 1 was launched 100ms after"));
}

TEST_F(CoordinatorTest, DrainingNodeGetsNothingNewAndItsPreemptedReplicasMove) {
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("drained", 0, 1)));
  AddAgent("node-b", 1);

  Heartbeat("node-a", /*draining=*/true);
  Pump([&] { return coordinator_->FindNode("node-a")->draining; });
  agents_["node-a"].Take<wire::HeartbeatReply>();
  // A second job that fits only on one node goes to node-b, never to the draining node-a.
  ASSERT_TRUE(Submit(JobYaml("fresh", 0, 1)).ok());
  Pump([&] { return !agents_["node-b"].inbox.empty(); });
  auto fresh = TakeLaunches();
  ASSERT_EQ(fresh.count("node-b/chief-0"), 1u);
  EXPECT_EQ(fresh["node-b/chief-0"].job, "fresh");
  RunAll(fresh);

  // The drained replica is preempted: it restarts as soon as there is room, and not on node-a.
  Report("node-a", "drained", "chief-0", 0, ReplicaState::PREEMPTED);
  for (int i = 0; i < 3; ++i) PumpFew();
  EXPECT_TRUE(TakeLaunchList().empty()) << "placed on the draining node or on a full node";
  EXPECT_EQ(GetJob("drained").replicas[0]->state, ReplicaState::PENDING);
  AddAgent("node-c", 1);
  Pump([&] { return !agents_["node-c"].inbox.empty(); });
  auto moved = TakeLaunches();
  ASSERT_EQ(moved.count("node-c/chief-0"), 1u);
  EXPECT_EQ(moved["node-c/chief-0"].attempt, 1);

  wire::ListNodesT list;
  Message m = Call(std::move(list));
  const auto* nodes = m.As<wire::NodeList>();
  ASSERT_NE(nodes, nullptr);
  std::map<std::string, std::string> states;
  for (const auto* n : *nodes->nodes()) states[n->node_id()->str()] = n->state()->str();
  EXPECT_EQ(states["node-a"], "DRAINING");
  EXPECT_EQ(states["node-b"], "READY");

  // A node that registers again (a new agent process) is no longer draining.
  Register("node-a", 1);
  EXPECT_FALSE(coordinator_->FindNode("node-a")->draining);
}

// A node whose agent's health check fails takes nothing new, shows UNHEALTHY with the reason, and
// takes work again once its check passes. A replica that fails there (exit 1) is the node's
// fault: its job restarts, on another node.
TEST_F(CoordinatorTest, AnUnhealthyNodeTakesNothingNewAndAFailureThereRestartsElsewhere) {
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("steady", 0, 1)));
  AddAgent("node-b", 1);
  const std::string why = "GPU 0: 2 uncorrectable ECC errors (health check exited with code 1)";
  Heartbeat("node-b", false, why);
  Pump([&] { return !coordinator_->FindNode("node-b")->unhealthy.empty(); });
  agents_["node-b"].Take<wire::HeartbeatReply>();
  ASSERT_TRUE(Submit(JobYaml("waits", 0, 1)).ok());
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(milliseconds(1000));
    PumpFew();
  }
  EXPECT_TRUE(TakeLaunchList().empty()) << "placed on the unhealthy node";
  auto nodes = CallFor<wire::NodeList>(wire::ListNodesT{});
  std::map<std::string, const wire::NodeInfoT*> by_id;
  for (const auto& n : nodes.nodes) by_id[n->node_id] = n.get();
  EXPECT_EQ(by_id.at("node-b")->state, "UNHEALTHY");
  EXPECT_EQ(by_id.at("node-b")->unhealthy, why);
  EXPECT_EQ(by_id.at("node-a")->state, "READY");
  EXPECT_EQ(by_id.at("node-a")->unhealthy, "");

  // The check passes again: the waiting job goes there.
  Heartbeat("node-b");
  const auto launched = LaunchesWithinFiveRounds();
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(launched[0].first, "node-b");
  EXPECT_EQ(launched[0].second.job, "waits");
  RunAll(launched);

  // node-a's check now fails, and the replica there exits 1: a node fault, one restart, and the
  // restart waits for a node that passes (node-c), never node-a.
  Heartbeat("node-a", false, "GPU 0: XID 79");
  Pump([&] { return !coordinator_->FindNode("node-a")->unhealthy.empty(); });
  Report("node-a", "steady", "chief-0", 0, ReplicaState::FAILED, 1);
  auto info = GetJob("steady");
  EXPECT_NE(info.state, wire::JobState::FAILED) << info.message;
  EXPECT_EQ(info.restarts, 1);
  EXPECT_TRUE(HasEvent(info,
                       "chief-0 attempt 0 exited with code 1 on node node-a, which fails "
                       "its health check: GPU 0: XID 79"));
  for (int i = 0; i < 3; ++i) PumpFew();
  EXPECT_TRUE(TakeLaunchList().empty()) << "restarted on the unhealthy node";
  AddAgent("node-c", 1);
  Pump([&] { return !agents_["node-c"].inbox.empty(); });
  auto moved = TakeLaunches();
  ASSERT_EQ(moved.count("node-c/chief-0"), 1u);
  EXPECT_EQ(moved["node-c/chief-0"].attempt, 1);
}

// The agent reports a failure with its health check running again: even a lone replica's exit 1
// waits for that run's verdict (the heartbeats say when it is in), which here finds the fault.
TEST_F(CoordinatorTest, AFailureWaitsForTheHealthRecheckItsReportAnnounces) {
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("lone", 0, 1)));
  Report("node-a", "lone", "chief-0", 0, ReplicaState::FAILED, 1, 0, /*health_rechecking=*/true);
  EXPECT_TRUE(coordinator_->FindNode("node-a")->health_rechecking);
  for (int i = 0; i < 3; ++i) {
    Heartbeat("node-a", false, "", /*health_rechecking=*/true);
    clock_.Advance(milliseconds(1000));
    PumpFew();
    ASSERT_EQ(GetJob("lone").state, wire::JobState::RUNNING) << "judged before the verdict";
  }
  Heartbeat("node-a", false, "GPU 0: XID 79");
  Pump([&] { return GetJob("lone").restarts == 1; });
  auto info = GetJob("lone");
  EXPECT_NE(info.state, wire::JobState::FAILED) << info.message;
  EXPECT_EQ(info.restarts, 1);
  EXPECT_TRUE(HasEvent(info, "on node node-a, which fails its health check: GPU 0: XID 79"));
  EXPECT_FALSE(coordinator_->FindNode("node-a")->health_rechecking);
}

// A GPU its agent finds unfit through NVML (Heartbeat.unhealthy_gpus) takes nothing new while the
// node's other GPUs do; a replica pinned to it that fails is the GPU's fault: one restart, on
// the fit GPU, the event naming the GPU; an index the node does not offer is ignored.
TEST_F(CoordinatorTest, AnUnfitGpuTakesNothingNewAndAFailureOnItRestartsOnAnother) {
  AddAgent("node-a", 2);
  auto unfit_heartbeat = [&](std::map<int, std::string> gpus) {
    wire::HeartbeatT hb;
    hb.node_id = "node-a";
    for (auto& [index, why] : gpus) {
      auto gpu = std::make_unique<wire::UnhealthyGpuT>();
      gpu->index = index;
      gpu->reason = why;
      hb.unhealthy_gpus.push_back(std::move(gpu));
    }
    agents_["node-a"].Send(std::move(hb));
  };
  ASSERT_TRUE(Submit(JobYaml("first", 0, 1)).ok());
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.count("node-a/chief-0"), 1u);
  ASSERT_EQ(launches["node-a/chief-0"].gpus.size(), 1u);
  const int bad = launches["node-a/chief-0"].gpus[0], good = 1 - bad;
  RunAll(launches);

  const std::string why = "1 uncorrectable ECC error since the driver loaded (it needs a reset)";
  unfit_heartbeat({{bad, why}, {7, "not a GPU it offers"}});
  Pump([&] { return !coordinator_->FindNode("node-a")->unhealthy_gpus.empty(); });
  EXPECT_EQ(coordinator_->FindNode("node-a")->unhealthy_gpus,
            (std::map<int, std::string>{{bad, why}}));
  auto nodes = CallFor<wire::NodeList>(wire::ListNodesT{});
  ASSERT_EQ(nodes.nodes.size(), 1u);
  EXPECT_EQ(nodes.nodes[0]->state, "READY");
  ASSERT_EQ(nodes.nodes[0]->unhealthy_gpus.size(), 1u);
  EXPECT_EQ(nodes.nodes[0]->unhealthy_gpus[0]->index, bad);
  EXPECT_EQ(nodes.nodes[0]->unhealthy_gpus[0]->reason, why);

  // The replica on it dies of the error: restarted on the fit GPU, one restart spent.
  Report("node-a", "first", "chief-0", 0, ReplicaState::FAILED, 1);
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  auto moved = TakeLaunches();
  ASSERT_EQ(moved.count("node-a/chief-0"), 1u);
  EXPECT_EQ(moved["node-a/chief-0"].attempt, 1);
  EXPECT_EQ(moved["node-a/chief-0"].gpus, std::vector<int>{good});
  RunAll(moved);
  auto info = GetJob("first");
  EXPECT_EQ(info.restarts, 1);
  EXPECT_TRUE(HasEvent(info, "chief-0 attempt 0 exited with code 1 on GPU " + std::to_string(bad) +
                                 " of node node-a, which NVML finds unfit: " + why));

  // Both GPUs' worth waits while one is unfit, and is placed once the agent finds it fit again.
  ASSERT_TRUE(Submit(JobYaml("both", 0, 2)).ok());
  Report("node-a", "first", "chief-0", 1, ReplicaState::SUCCEEDED, 0);
  for (int i = 0; i < 3; ++i) {
    unfit_heartbeat({{bad, why}});
    clock_.Advance(milliseconds(1000));
    PumpFew();
  }
  EXPECT_TRUE(TakeLaunchList().empty()) << "placed on the unfit GPU";
  EXPECT_EQ(GetJob("both").message,
            "waiting for room for 1 replica with 2 GPUs, 1 CPU; none fits now (1 GPU is unfit: "
            "cohort nodes says which)");
  unfit_heartbeat({});
  const auto placed = LaunchesWithinFiveRounds();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].second.job, "both");
  EXPECT_EQ(placed[0].second.gpus, (std::vector<int>{0, 1}));
}

// An admin cordons one GPU of a node (NodeAdmin.gpus): new work goes to its other GPU, a job that
// needs both waits saying so, and the uncordon lets it run.
TEST_F(CoordinatorTest, AGpuCordonedAloneTakesNothingNewAndAWaitingJobSaysSo) {
  AddAgent("node-a", 2);
  wire::NodeAdminT cordon;
  cordon.node_id = "node-a";
  cordon.action = "cordon";
  cordon.gpus = {0};
  auto reply = CallFor<wire::NodeAdminReply>(std::move(cordon));
  EXPECT_EQ(reply.message, "node node-a GPU 0 cordoned: nothing new is placed on it");
  ASSERT_NE(reply.node, nullptr);
  EXPECT_EQ(reply.node->state, "READY");
  EXPECT_EQ(reply.node->cordoned_gpus, std::vector<int>{0});

  ASSERT_TRUE(Submit(JobYaml("one", 0, 1)).ok());
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.count("node-a/chief-0"), 1u);
  EXPECT_EQ(launches["node-a/chief-0"].gpus, std::vector<int>{1});
  RunAll(launches);
  Report("node-a", "one", "chief-0", 0, ReplicaState::SUCCEEDED, 0);

  ASSERT_TRUE(Submit(JobYaml("both", 0, 2)).ok());
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(milliseconds(1000));
    Heartbeat("node-a");
    PumpFew();
  }
  EXPECT_TRUE(TakeLaunchList().empty()) << "placed on the cordoned GPU";
  EXPECT_EQ(GetJob("both").message,
            "waiting for room for 1 replica with 2 GPUs, 1 CPU; none fits now (1 GPU is "
            "cordoned: cohort nodes says which)");
  wire::NodeAdminT uncordon;
  uncordon.node_id = "node-a";
  uncordon.action = "uncordon";
  uncordon.gpus = {0};
  auto uncordoned = CallFor<wire::NodeAdminReply>(std::move(uncordon));
  ASSERT_NE(uncordoned.node, nullptr);
  EXPECT_TRUE(uncordoned.node->cordoned_gpus.empty());
  const auto placed = LaunchesWithinFiveRounds();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].second.gpus, (std::vector<int>{0, 1}));

  wire::NodeAdminT label;
  label.node_id = "node-a";
  label.action = "label";
  label.labels = {"zone=a"};
  label.gpus = {1};
  const Status refused = Call(std::move(label)).ErrorStatus();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "NodeAdmin.gpus: only cordon, uncordon, drain and drain-now take GPUs, not label");
}

// `cohort drain NODE --gpu N [--now]`: the GPU is cordoned; a drain names the jobs that finish on
// it, a drain --now preempts them (no restart spent) and leaves the jobs on the node's other GPU
// running; the preempted job resumes on the GPU the uncordon frees.
TEST_F(CoordinatorTest, ADrainOfOneGpuMovesOnlyTheJobsPinnedToIt) {
  AddAgent("node-a", 2);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("first", 0, 1)));
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("second", 0, 1)));
  const int first_gpu = Replica(GetJob("first"), "chief-0")->gpus.at(0);
  const int second_gpu = 1 - first_gpu;
  auto drain = [&](int gpu, bool now) {
    wire::NodeAdminT req;
    req.node_id = "node-a";
    req.action = now ? "drain-now" : "drain";
    req.gpus = {gpu};
    return CallFor<wire::NodeAdminReply>(std::move(req));
  };

  auto kept = drain(second_gpu, /*now=*/false);
  EXPECT_EQ(kept.message, "node node-a GPU " + std::to_string(second_gpu) +
                              " cordoned: nothing new is placed on it; what runs there finishes: "
                              "second");
  ASSERT_NE(kept.node, nullptr);
  EXPECT_EQ(kept.node->state, "READY");
  EXPECT_EQ(kept.node->cordoned_gpus, std::vector<int>{second_gpu});
  PumpFew();
  EXPECT_TRUE(TakeStops().empty()) << "a drain without --now stopped a replica";

  auto moved = drain(first_gpu, /*now=*/true);
  EXPECT_EQ(moved.message, "node node-a GPU " + std::to_string(first_gpu) +
                               " cordoned: nothing new is placed on it; preempted to move "
                               "elsewhere: first");
  EXPECT_EQ(moved.node->cordoned_gpus, (std::vector<int>{0, 1}));
  std::vector<std::string> stops;
  Pump([&] {
    stops = TakeStops();
    return !stops.empty();
  });
  EXPECT_EQ(stops, std::vector<std::string>{"node-a/chief-0#0"});
  Report("node-a", "first", "chief-0", 0, ReplicaState::PREEMPTED);
  wire::JobInfoT first = GetJob("first");
  EXPECT_EQ(first.state, JobState::QUEUED);
  EXPECT_EQ(first.restarts, 0);
  EXPECT_TRUE(HasEvent(first, "node node-a GPU " + std::to_string(first_gpu) +
                                  " drained by an admin (drain --gpu --now)"));
  EXPECT_EQ(GetJob("second").state, JobState::RUNNING);
  EXPECT_TRUE(LaunchesWithinFiveRounds().empty()) << "placed on a drained GPU";

  EXPECT_EQ(drain(first_gpu, /*now=*/true).message,
            "node node-a GPU " + std::to_string(first_gpu) +
                " cordoned: nothing new is placed on it; nothing runs there");
  wire::NodeAdminT uncordon;
  uncordon.node_id = "node-a";
  uncordon.action = "uncordon";
  uncordon.gpus = {first_gpu};
  CallFor<wire::NodeAdminReply>(std::move(uncordon));
  const auto placed = LaunchesWithinFiveRounds();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].second.job, "first");
  EXPECT_EQ(placed[0].second.gpus, std::vector<int>{first_gpu});
}

// With the default queue alone, a queued job preempts only a running job of a lower priority (the
// round lists running jobs as candidates only when one could be a victim: placement_round.cc).
TEST_F(CoordinatorTest, InOneQueueOnlyAHigherPriorityJobPreemptsARunningOne) {
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("low", 0, 1, 3, ", priority: low")));
  ASSERT_TRUE(Submit(JobYaml("same", 0, 1, 3, ", priority: low")).ok());
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(milliseconds(1000));  // periodic rounds
    Heartbeat("node-a");
    PumpFew();
  }
  EXPECT_TRUE(TakeStops().empty()) << "a job preempted one of its own priority";
  EXPECT_EQ(GetJob("low").state, JobState::RUNNING);

  ASSERT_TRUE(Submit(JobYaml("high", 0, 1, 3, ", priority: high")).ok());
  std::vector<std::string> stops;
  Pump([&] {
    stops = TakeStops();
    return !stops.empty();
  });
  EXPECT_EQ(stops, std::vector<std::string>{"node-a/chief-0#0"});
  EXPECT_TRUE(HasEvent(GetJob("low"), "preempted by job high (priority high, queue default)"));
  EXPECT_EQ(GetJob("same").state, JobState::QUEUED);
}

// `cohort update`: a queued job moved to a higher class preempts a running one as if submitted
// with it; the change is an event, is kept in the stored job file, and survives a restart.
TEST_F(CoordinatorTest, AQueuedJobMovedToAHigherClassPreemptsAndKeepsItAcrossARestart) {
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("low", 0, 1, 3, ", priority: low")));
  ASSERT_TRUE(Submit(JobYaml("later", 0, 1, 3, ", priority: low")).ok());
  PumpFew();
  EXPECT_TRUE(TakeStops().empty());
  auto update = [&](const std::string& name, const std::string& priority,
                    const std::string& queue = "") {
    wire::UpdateJobT req;
    req.name = name;
    req.priority = priority;
    req.queue = queue;
    return Call(std::move(req));
  };
  // What is refused, naming why; nothing changes.
  Status unknown = update("later", "urgent").ErrorStatus();
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("no priority class named 'urgent'"), std::string::npos)
      << unknown.ToString();
  EXPECT_NE(update("later", "", "research").ErrorStatus().message().find("no queue named"),
            std::string::npos);
  EXPECT_EQ(update("later", "").ErrorStatus().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(update("nobody", "high").ErrorStatus().code(), StatusCode::kNotFound);
  EXPECT_EQ(GetJob("later").priority, "low");

  Message moved = update("later", "high");
  ASSERT_NE(moved.As<wire::JobInfo>(), nullptr) << moved.ErrorStatus().ToString();
  EXPECT_EQ(Str(moved.As<wire::JobInfo>()->priority()), "high");
  EXPECT_TRUE(HasEvent(GetJob("later"), "updated: priority high (was low)"));
  std::vector<std::string> stops;
  Pump([&] {
    stops = TakeStops();
    return !stops.empty();
  });
  EXPECT_EQ(stops, std::vector<std::string>{"node-a/chief-0#0"});
  EXPECT_TRUE(HasEvent(GetJob("low"), "preempted by job later (priority high, queue default)"));
  wire::GetJobT spec;
  spec.name = "later";
  spec.with_spec = true;
  EXPECT_EQ(ParseJobSpec(CallFor<wire::JobInfo>(std::move(spec)).spec_yaml, "stored")
                ->scheduling.priority,
            "high");

  Restart();
  EXPECT_EQ(GetJob("later").priority, "high");
}

// `cohort submit --dry-run`: the reply says what the next round would do with the job (start it
// where, preempt whom, or why it waits), with the errors a submit gives, and nothing is stored.
TEST_F(CoordinatorTest, ADryRunSaysWhatTheNextRoundWouldDoAndStoresNothing) {
  clock_.Advance(milliseconds(options_.heartbeat_timeout.count() + 1));  // the fit check is on
  AddAgent("node-a", 2);
  AddAgent("node-b", 2);
  auto dry_run = [&](const std::string& yaml) {
    wire::SubmitJobT req;
    req.spec_yaml = yaml;
    req.dry_run = true;
    Message m = Call(std::move(req));
    wire::SubmitJobReplyT reply;
    if (const auto* r = m.As<wire::SubmitJobReply>()) r->UnPackTo(&reply);
    return std::make_pair(m.ErrorStatus(), std::move(reply));
  };
  auto plan_of = [&](const std::string& yaml) {
    auto [status, reply] = dry_run(yaml);
    EXPECT_TRUE(status.ok()) << status.ToString();
    EXPECT_NE(reply.dry_run, nullptr);
    return reply.dry_run ? std::move(*reply.dry_run) : wire::DryRunPlanT{};
  };

  // On the idle cluster: where each replica would go, with its GPUs.
  wire::DryRunPlanT plan = plan_of(JobYaml("probe", 1, 2));
  EXPECT_EQ(plan.outcome, wire::DryRunOutcome::START);
  ASSERT_EQ(plan.replicas.size(), 2u);
  std::set<std::string> nodes;
  for (const auto& r : plan.replicas) {
    nodes.insert(r->node_id);
    EXPECT_EQ(r->gpus, (std::vector<int32_t>{0, 1})) << r->replica;
  }
  EXPECT_EQ(plan.replicas[0]->replica, "chief-0");
  EXPECT_EQ(plan.replicas[1]->replica, "worker-0");
  EXPECT_EQ(nodes, (std::set<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(plan.queue, "default");
  // Nothing was stored, nothing launched: the name is still free, and the real submit starts.
  PumpFew();
  EXPECT_TRUE(TakeLaunches().empty());
  wire::GetJobT get;
  get.name = "probe";
  EXPECT_EQ(Call(std::move(get)).ErrorStatus().code(), StatusCode::kNotFound);
  EXPECT_TRUE(CallFor<wire::JobList>(wire::ListJobsT{}).jobs.empty());

  // The cluster full: a job of the same priority would wait, saying for what, behind the jobs
  // queued before it.
  ASSERT_TRUE(Submit(JobYaml("big", 1, 2, 3, ", priority: low")).ok());
  ASSERT_EQ(RunGang(2).size(), 2u);
  const std::string low = JobYaml("probe", 0, 1, 3, ", priority: low");
  plan = plan_of(low);
  EXPECT_EQ(plan.outcome, wire::DryRunOutcome::WAIT);
  EXPECT_NE(plan.reason.find("waiting for room for 1 replica with 1 GPU"), std::string::npos)
      << plan.reason;
  EXPECT_EQ(plan.queued_ahead, 0u);
  // With a bound on its wait, the forecast names it.
  plan = plan_of(JobYaml("probe", 0, 1, 3, ", priority: low, max_wait: 10m"));
  EXPECT_EQ(plan.outcome, wire::DryRunOutcome::WAIT);
  EXPECT_NE(plan.reason.find("; it fails unless placed within 10m (scheduling.max_wait)"),
            std::string::npos)
      << plan.reason;
  ASSERT_TRUE(Submit(JobYaml("next", 0, 1, 3, ", priority: low")).ok());
  PumpFew();
  EXPECT_EQ(plan_of(low).queued_ahead, 1u);

  // A higher priority: it would preempt the running job, named as its preemption event names it.
  plan = plan_of(JobYaml("probe", 0, 1, 3, ", priority: high"));
  EXPECT_EQ(plan.outcome, wire::DryRunOutcome::PREEMPT);
  EXPECT_EQ(plan.preempts, std::vector<std::string>{"big (priority low, queue default)"});
  EXPECT_TRUE(TakeStops().empty()) << "a dry run preempted";
  EXPECT_EQ(GetJob("big").state, JobState::RUNNING);

  // After a running job, or held: what it would wait for.
  plan = plan_of(JobYaml("probe", 0, 1, 3, ", after: [big]"));
  EXPECT_EQ(plan.outcome, wire::DryRunOutcome::WAIT_FOR_JOBS);
  EXPECT_EQ(plan.reason, "waiting for job big to succeed (scheduling.after)");
  plan = plan_of(JobYaml("probe", 0, 1, 3, ", hold: true"));
  EXPECT_EQ(plan.outcome, wire::DryRunOutcome::HOLD);
  EXPECT_NE(plan.reason.find("cohort resume probe"), std::string::npos) << plan.reason;

  // The errors a submit gives: a name taken, a job that could never run here.
  EXPECT_EQ(dry_run(JobYaml("big", 0, 1)).first.code(), StatusCode::kAlreadyExists);
  Status never = dry_run(JobYaml("probe", 0, 8)).first;
  EXPECT_EQ(never.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(never.message().find("cannot run on this cluster"), std::string::npos)
      << never.ToString();
  EXPECT_EQ(CallFor<wire::JobList>(wire::ListJobsT{}).jobs.size(), 2u);  // big and next
}

TEST_F(CoordinatorTest, AFloodingPeerIsRefusedBeyondItsOutstandingRequestsAndOthersAreServed) {
  options_.max_requests_per_peer = 10;
  Restart();
  Peer other = Connect(options_.client_endpoint, "");
  for (int i = 0; i < 30; ++i) client_.Send(wire::ListNodesT{});
  uint64_t other_id = other.Send(wire::ListJobsT{});
  Pump([&] {
    other.Drain();
    return client_.inbox.size() >= 30 && !other.inbox.empty();
  });
  int served = 0, refused = 0;
  for (const Message& m : client_.inbox) {
    if (m.As<wire::NodeList>() != nullptr) {
      ++served;
    } else if (m.ErrorStatus().code() == StatusCode::kResourceExhausted) {
      ++refused;
      EXPECT_NE(m.ErrorStatus().message().find("more than 10 requests outstanding"),
                std::string::npos);
    }
  }
  EXPECT_EQ(served, 10);
  EXPECT_EQ(refused, 20);
  ASSERT_EQ(other.inbox.size(), 1u);
  EXPECT_EQ(other.inbox.front().request_id(), other_id);
  EXPECT_NE(other.inbox.front().As<wire::JobList>(), nullptr);
  EXPECT_EQ(coordinator_->stats().refused, 20u);
  // Once answered, the same peer is served again.
  client_.inbox.clear();
  wire::ListNodesT again;
  EXPECT_NE(Call(std::move(again)).As<wire::NodeList>(), nullptr);
}

TEST_F(CoordinatorTest, PortsTheNodesListenOnAreNeverHandedToReplicas) {
  options_.port_min = 25000;
  options_.port_max = 25005;
  Restart();
  AddAgent("node-a", 1);
  // Something on node-a listens on 25000 and 25002 (outside the range: 22, ignored).
  wire::HeartbeatT hb;
  hb.node_id = "node-a";
  hb.listening_ports = {22, 25000, 25002};
  agents_["node-a"].Send(std::move(hb));
  PumpFew();
  EXPECT_EQ(coordinator_->FindNode("node-a")->listening_ports,
            (std::vector<int>{22, 25000, 25002}));
  ASSERT_TRUE(Submit(JobYaml("ports", 0, 1)).ok());
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.count("node-a/chief-0"), 1u);
  const JobRecord* job = coordinator_->FindJob("ports");
  std::set<int> handed = {job->master_port, job->bootstrap_port, job->replicas[0].port};
  handed.erase(0);
  EXPECT_FALSE(handed.empty());
  for (int port : handed) {
    EXPECT_TRUE(port != 25000 && port != 25002) << port;
  }
  EXPECT_EQ(Env(launches["node-a/chief-0"], "MASTER_PORT"), std::to_string(job->master_port));
}

// Ports are unique per host, not across the cluster: with 3 ports, two hosts run a 1-replica job
// each (the job needs 3), and two agents that report one port domain (one host) only one.
TEST_F(CoordinatorTest, EachHostHasTheWholePortRange) {
  options_.port_min = 25000;
  options_.port_max = 25002;
  Restart();
  AddAgent("node-a", 1);
  AddAgent("node-b", 1);
  ASSERT_TRUE(Submit(JobYaml("one", 0, 1)).ok());
  ASSERT_TRUE(Submit(JobYaml("two", 0, 1)).ok());
  Pump([&] { return coordinator_->FindJob("two")->state != JobState::QUEUED; });
  EXPECT_EQ(coordinator_->FindJob("one")->state, JobState::PENDING);
  EXPECT_EQ(coordinator_->FindJob("two")->state, JobState::PENDING);
  EXPECT_EQ(coordinator_->FindJob("one")->master_port, coordinator_->FindJob("two")->master_port)
      << "the same port on two hosts";

  port_domains_["node-c"] = port_domains_["node-d"] = "host-cd";
  AddAgent("node-c", 1);
  AddAgent("node-d", 1);
  ASSERT_TRUE(Submit(JobYaml("three", 0, 1)).ok());
  ASSERT_TRUE(Submit(JobYaml("four", 0, 1)).ok());
  Pump([&] { return coordinator_->FindJob("three")->state != JobState::QUEUED; });
  PumpFew();
  EXPECT_EQ(coordinator_->FindJob("three")->state, JobState::PENDING);
  EXPECT_EQ(coordinator_->FindJob("four")->state, JobState::QUEUED);
  EXPECT_NE(coordinator_->FindJob("four")->waiting_reason.find("waiting for free ports"),
            std::string::npos)
      << coordinator_->FindJob("four")->waiting_reason;
}

// A replica that restarts on another host gets ports free there: its chief moved to a node where
// something listens on the job's master port, so the job's ports move too.
TEST_F(CoordinatorTest, AChiefThatMovesHostsGetsPortsFreeOnItsNewHost) {
  options_.port_min = 25000;
  options_.port_max = 25002;
  Restart();
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("mover", 0, 1)));
  const int master = coordinator_->FindJob("mover")->master_port;
  ASSERT_NE(master, 0);
  AddAgent("node-b", 1);
  // On node-b something listens on the job's master port; node-a falls silent.
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(milliseconds(1000));
    wire::HeartbeatT hb;
    hb.node_id = "node-b";
    hb.listening_ports = {master};
    agents_["node-b"].Send(std::move(hb));
    PumpFew();
  }
  ASSERT_FALSE(coordinator_->FindNode("node-a")->ready);
  Pump([&] { return coordinator_->FindJob("mover")->replicas[0].node_id == "node-b"; });
  const JobRecord* job = coordinator_->FindJob("mover");
  ASSERT_EQ(job->replicas[0].node_id, "node-b");
  EXPECT_NE(job->master_port, master);
  EXPECT_NE(job->bootstrap_port, master);
  EXPECT_EQ((std::set<int>{job->replicas[0].port, job->master_port, job->bootstrap_port}).size(),
            3u);
  EXPECT_TRUE(HasEvent(GetJob("mover"), "its chief moved to a host where its ports were taken"));
}

TEST_F(CoordinatorTest, HeartbeatFromUnknownNodeAsksForRegistration) {
  agents_["ghost"] = Connect(options_.agent_endpoint, "ghost");
  ASSERT_NO_FATAL_FAILURE(ExpectHeartbeatUnknown("ghost"));
  // An update from an unregistered node is not acked (the agent keeps it).
  Report("ghost", "x", "chief-0", 0, ReplicaState::SUCCEEDED, 0);
  Pump([&] { return !agents_["ghost"].inbox.empty(); });
  ASSERT_FALSE(agents_["ghost"].inbox.empty());
  EXPECT_EQ(agents_["ghost"].inbox.front().ErrorStatus().code(), StatusCode::kFailedPrecondition);
}

// What an agent sends is never trusted to be UTF-8 (the coordinator keeps it in JSON records,
// which refused it by throwing and ended the coordinator): a registration whose names are not
// printable UTF-8 is refused naming the field, and its other text is kept made well-formed.
TEST_F(CoordinatorTest, AnAgentsTextThatIsNotUtf8IsRefusedOrMadeWellFormed) {
  auto registration = [](const std::string& node_id) {
    wire::RegisterAgentT reg;
    reg.node_id = node_id;
    reg.address = node_id + ".local";
    reg.version = "0.9.1";
    auto gpu = std::make_unique<wire::GpuInfoT>();
    gpu->index = 0;
    gpu->model = "H100 \xff";
    gpu->uuid = "GPU-\xfe";
    reg.gpus.push_back(std::move(gpu));
    reg.cpus = 16;
    reg.memory_mb = 64'000;
    reg.storage = std::make_unique<wire::StorageReportT>();
    reg.storage->root = "/shared";
    reg.storage->error = "no marker in /shared/\xe9\x1b[2J";
    return reg;
  };
  // Refused: each name.
  Peer& bad = agents_["bad"] = Connect(options_.agent_endpoint, "bad");
  for (const std::string field : {"address", "version", "port_domain", "node_id"}) {
    wire::RegisterAgentT reg = registration("bad");
    if (field == "address") reg.address = "10.0.0.\xfe";
    if (field == "version") reg.version = "0.9\n";
    if (field == "port_domain") reg.port_domain = std::string(kMaxNodeNameBytes + 1, 'd');
    if (field == "node_id") reg.node_id = "bad\xff";
    const uint64_t id = bad.Send(std::move(reg));
    std::optional<Status> answer;
    Pump([&] {
      for (const Message& m : bad.inbox) {
        if (m.request_id() == id) answer = m.ErrorStatus();
      }
      return answer.has_value();
    });
    ASSERT_TRUE(answer.has_value()) << field;
    EXPECT_EQ(answer->code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(answer->message().find("RegisterAgent." + field + ": "), std::string::npos)
        << answer->message();
  }
  EXPECT_TRUE(CallFor<wire::NodeList>(wire::ListNodesT{}).nodes.empty());

  // Taken, its GPU's model and UUID and its storage error made printable UTF-8; a job runs there,
  // and the state written with it is read back by the next start.
  agents_["n1"] = Connect(options_.agent_endpoint, "n1");
  agents_["n1"].Send(registration("n1"));
  Pump([&] { return coordinator_->FindNode("n1") != nullptr; });
  ASSERT_TRUE(Submit(JobYaml("j", 0, 1)).ok());
  ASSERT_EQ(LaunchesWithinFiveRounds().size(), 1u);
  Restart();
  agents_["n1"].Send(registration("n1"));
  Pump([&] { return coordinator_->FindNode("n1") != nullptr; });
  auto nodes = CallFor<wire::NodeList>(wire::ListNodesT{});
  ASSERT_EQ(nodes.nodes.size(), 1u);
  ASSERT_EQ(nodes.nodes[0]->gpus.size(), 1u);
  EXPECT_EQ(nodes.nodes[0]->gpus[0]->model, "H100 \xef\xbf\xbd");
  EXPECT_EQ(nodes.nodes[0]->gpus[0]->uuid, "GPU-\xef\xbf\xbd");
  const wire::JobInfoT job = GetJob("j");  // its record, events and all, read back
  ASSERT_FALSE(job.events.empty());
  EXPECT_EQ(job.events.front()->message, "submitted (1 replica)");
}

// A replica state the coordinator does not know (a byte the schema's enum has no value for, as a
// hostile or garbled agent may send) is refused naming the field, in an update and in a
// registration's replicas: taken, it was judged a permanent failure and stored, and the next start
// refused the whole state as damaged (found by coordinator_fuzzer).
TEST_F(CoordinatorTest, AReplicaStateTheCoordinatorDoesNotKnowIsRefusedNamingTheField) {
  Peer& good = AddAgent("good", 1);
  ASSERT_TRUE(Submit(JobYaml("target", 0, 1)).ok());
  ASSERT_EQ(LaunchesWithinFiveRounds().size(), 1u);
  Report("good", "target", "chief-0", 0, ReplicaState::RUNNING);
  const auto unknown = static_cast<ReplicaState>(110);
  auto answer_to = [&](uint64_t id) {
    std::optional<Status> answer;
    Pump([&] {
      for (const Message& m : good.inbox) {
        if (m.request_id() == id) answer = m.ErrorStatus();
      }
      return answer.has_value();
    });
    return answer.value_or(Internal("no answer"));
  };
  wire::ReplicaUpdateT update;
  update.node_id = "good";
  update.status = std::make_unique<wire::ReplicaStatusT>(StatusOf("target", "chief-0", 0, unknown));
  Status refused = answer_to(good.Send(std::move(update)));
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.ToString();
  EXPECT_EQ(refused.message(), "ReplicaUpdate.status.state: 110 is no replica state");

  wire::RegisterAgentT reg;
  reg.node_id = "good";
  reg.address = "good.local";
  reg.replicas.push_back(std::make_unique<wire::ReplicaStatusT>(Running("target", "chief-0")));
  reg.replicas.push_back(
      std::make_unique<wire::ReplicaStatusT>(StatusOf("target", "chief-0", 0, unknown)));
  refused = answer_to(good.Send(std::move(reg)));
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.ToString();
  EXPECT_EQ(refused.message(), "RegisterAgent.replicas[1].state: 110 is no replica state");

  EXPECT_EQ(Replica(GetJob("target"), "chief-0")->state, ReplicaState::RUNNING);
  Restart();  // the state it wrote loads
  EXPECT_EQ(GetJob("target").state, wire::JobState::RUNNING);
}

using cohort::testing::HostileValues;

// Whatever a peer on the agent endpoint sends, well-formed FlatBuffers but hostile in every text
// and number (bytes that are not UTF-8, control characters, Boost's '%value%', names of nothing,
// the real job's names with a hostile rest, negative and huge numbers), the coordinator's passes
// go on, and the state they wrote is read back by its next start. Seeded: the same messages each
// run.
TEST_F(CoordinatorTest, HostileAgentMessagesNeverStopTheCoordinator) {
  AddAgent("good", 1);
  ASSERT_TRUE(Submit(JobYaml("target", 0, 1)).ok());
  ASSERT_EQ(LaunchesWithinFiveRounds().size(), 1u);
  HostileValues hostile(20261206);
  auto pick = [&](int n) { return hostile.Pick(n); };
  auto text = [&] { return hostile.Text({"good", "target", "chief-0"}); };
  auto number = [&] { return hostile.Number(); };
  Peer& evil = agents_["evil"] = Connect(options_.agent_endpoint, "evil");
  for (int i = 0; i < 400; ++i) {
    wire::BodyUnion body;
    switch (pick(7)) {
      case 0: {
        wire::RegisterAgentT reg;
        reg.node_id = pick(2) ? "evil" : text();
        reg.address = text();
        reg.version = text();
        reg.port_domain = text();
        reg.unhealthy = text();
        auto gpu = std::make_unique<wire::GpuInfoT>();
        gpu->index = static_cast<int>(number());
        gpu->model = text();
        gpu->uuid = text();
        reg.gpus.push_back(std::move(gpu));
        reg.cpus = static_cast<int>(number());
        reg.memory_mb = number();
        reg.uptime_ms = number();
        // Half of them the real job's chief: a success the coordinator has not recorded.
        auto s = std::make_unique<wire::ReplicaStatusT>(
            StatusOf(pick(2) ? "target" : text(), pick(2) ? "chief-0" : text(),
                     pick(2) ? 0 : static_cast<int>(number()), ReplicaState::SUCCEEDED));
        s->message = text();
        s->job_created_ms = number();
        reg.replicas.push_back(std::move(s));
        reg.storage = std::make_unique<wire::StorageReportT>();
        reg.storage->root = text();
        reg.storage->error = text();
        body.Set(std::move(reg));
        break;
      }
      case 1: {
        wire::HeartbeatT hb;
        hb.node_id = pick(2) ? "good" : text();
        hb.unhealthy = text();
        auto progress = std::make_unique<wire::ReplicaProgressT>();
        progress->job = text();
        progress->replica = text();
        progress->attempt = static_cast<int>(number());
        progress->current_op = text();
        progress->current_algorithm = text();
        progress->current_seq = number();
        progress->completed_seq = number();
        hb.progress.push_back(std::move(progress));
        auto gpu = std::make_unique<wire::UnhealthyGpuT>();
        gpu->index = static_cast<int>(number());
        gpu->reason = text();
        hb.unhealthy_gpus.push_back(std::move(gpu));
        body.Set(std::move(hb));
        break;
      }
      case 2: {
        wire::ReplicaUpdateT update;
        update.node_id = pick(2) ? "good" : text();
        const ReplicaState states[] = {ReplicaState::RUNNING, ReplicaState::FAILED,
                                       ReplicaState::PREEMPTED, ReplicaState::SUCCEEDED};
        update.status = std::make_unique<wire::ReplicaStatusT>(
            StatusOf(pick(2) ? "target" : text(), pick(2) ? "chief-0" : text(),
                     pick(2) ? 0 : static_cast<int>(number()), states[pick(4)]));
        update.status->exit_code = static_cast<int>(number());
        update.status->signal = static_cast<int>(number());
        update.status->message = text();
        body.Set(std::move(update));
        break;
      }
      case 3: {
        wire::LogChunkT chunk;
        chunk.job = pick(2) ? "target" : text();
        chunk.replica = pick(2) ? "chief-0" : text();
        chunk.attempt = pick(2) ? 0 : static_cast<int>(number());
        chunk.offset = static_cast<uint64_t>(number());
        const std::string data = text();
        chunk.data.assign(data.begin(), data.end());
        body.Set(std::move(chunk));
        break;
      }
      case 4: {
        wire::TrialMeasurementT m;
        m.job = pick(2) ? "target" : text();
        m.replica = text();
        m.step = number();
        auto kv = std::make_unique<wire::KeyValueT>();
        kv->key = text();
        kv->value = pick(2) ? "0.5" : text();
        m.metrics.push_back(std::move(kv));
        body.Set(std::move(m));
        break;
      }
      case 5: {
        wire::StackDumpT dump;
        dump.node_id = pick(2) ? "good" : text();
        dump.job = pick(2) ? "target" : text();
        dump.replica = text();
        dump.text = text();
        body.Set(std::move(dump));
        break;
      }
      default: {
        wire::ExecOutputT out;
        out.node_id = pick(2) ? "good" : text();
        out.exec_id = static_cast<uint64_t>(number());
        out.job = text();
        out.error = text();
        out.killed_because = text();
        body.Set(std::move(out));
        break;
      }
    }
    ASSERT_TRUE(evil.socket->Send(EncodeBody(evil.socket->NextRequestId(), std::move(body))).ok());
    PumpFew();  // each pass must succeed (Pump asserts it); a throw fails the test
  }
  Restart();
  PumpFew();
  EXPECT_EQ(GetJob("target").name, "target");
  for (const auto& node : CallFor<wire::NodeList>(wire::ListNodesT{}).nodes) {
    EXPECT_EQ(ValidUtf8(node->node_id, true), node->node_id);
    EXPECT_EQ(ValidUtf8(node->address, true), node->address);
  }
}

// The same for a client: hostile texts and numbers in every field of the requests a user sends
// (a submit's name, env, labels and array, lookups, logs, node admin, exec), each answered, the
// passes going on, the state read back by the next start.
TEST_F(CoordinatorTest, HostileClientRequestsAreAnsweredAndNeverStopTheCoordinator) {
  AddAgent("good", 1);
  ASSERT_TRUE(Submit(JobYaml("target", 0, 1)).ok());
  ASSERT_EQ(LaunchesWithinFiveRounds().size(), 1u);
  HostileValues hostile(20261207);
  auto pick = [&](int n) { return hostile.Pick(n); };
  auto text = [&] { return hostile.Text({"target", "good", "chief-0", "a=b"}); };
  auto rng = [&] { return hostile.Raw(); };
  auto pair = [&] {
    auto kv = std::make_unique<wire::KeyValueT>();
    kv->key = text();
    kv->value = text();
    return kv;
  };
  for (int i = 0; i < 300; ++i) {
    wire::BodyUnion body;
    const int kind = pick(8);
    switch (kind) {
      case 0: {
        wire::SubmitJobT submit;
        submit.spec_yaml = pick(2) ? JobYaml("hostile", 0, 0) : text();
        submit.name = text();
        submit.after.push_back(text());
        submit.env.push_back(pair());
        submit.labels.push_back(pair());
        submit.args.push_back(text());
        if (pick(4) == 0) submit.array = text();
        submit.dry_run = pick(2);
        body.Set(std::move(submit));
        break;
      }
      case 1: {
        wire::GetJobT get;
        get.name = text();
        get.with_spec = pick(2);
        body.Set(std::move(get));
        break;
      }
      case 2: {
        wire::ListJobsT list;
        list.selector = text();
        list.limit = static_cast<uint32_t>(rng());
        body.Set(std::move(list));
        break;
      }
      case 3: {
        wire::GetLogsT logs;
        logs.job = text();
        logs.replica = text();
        logs.attempt = static_cast<int>(rng());
        logs.offset = rng();
        body.Set(std::move(logs));
        break;
      }
      case 4: {
        wire::NodeAdminT admin;
        admin.node_id = text();
        const char* actions[] = {"cordon", "drain", "label", "uncordon", "forget"};
        admin.action = pick(2) ? actions[pick(5)] : text();
        admin.labels.push_back(text());
        admin.gpus.push_back(static_cast<int>(rng()));
        admin.reason = text();
        body.Set(std::move(admin));
        break;
      }
      case 5: {
        wire::UpdateJobT update;
        update.name = text();
        update.priority = text();
        update.queue = text();
        body.Set(std::move(update));
        break;
      }
      case 6: {
        wire::ListNodesT nodes;
        nodes.selector = text();
        nodes.events_of = text();
        body.Set(std::move(nodes));
        break;
      }
      default: {
        wire::ExecInReplicaT exec;
        exec.job = text();
        exec.replica = text();
        exec.argv.push_back(text());
        exec.timeout_ms = static_cast<int64_t>(rng());
        body.Set(std::move(exec));
        break;
      }
    }
    // A user claimed in plaintext is hostile too: a frame claiming one that is not printable
    // UTF-8 is refused whole (an error under request id 0).
    const std::string user = pick(4) == 0 ? text() : "";
    const uint64_t id = client_.socket->NextRequestId();
    ASSERT_TRUE(client_.socket->Send(EncodeBody(id, std::move(body), user)).ok());
    // Answered, a refusal or a result; an exec on the running replica waits for its agent.
    bool answered = false;
    Pump(
        [&] {
          for (const Message& m : client_.inbox) answered |= m.request_id() == id;
          return answered;
        },
        20);
    if (kind != 7 && user.empty()) {
      EXPECT_TRUE(answered) << "request " << i << " (kind " << kind << ")";
    }
    client_.inbox.clear();
  }
  Restart();
  PumpFew();
  EXPECT_EQ(GetJob("target").name, "target");
}

TEST_F(CoordinatorTest, InvalidAndDuplicateSubmissionsAreRefused) {
  Status s = Submit("name: x\nworker_pools: []\n");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("worker_pools"), std::string::npos) << s.message();
  s = Submit("this: [is not: valid");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(Submit(JobYaml("dup", 0, 0)).ok());
  EXPECT_EQ(Submit(JobYaml("dup", 0, 0)).code(), StatusCode::kAlreadyExists);
  wire::GetJobT get;
  get.name = "nope";
  EXPECT_EQ(Call(std::move(get)).ErrorStatus().code(), StatusCode::kNotFound);
}

// SubmitJob's name, after and hold: the coordinator edits the text as `cohort submit --name,
// --after, --hold` does, and stores the edited text; a bad edit is refused naming the field.
TEST_F(CoordinatorTest, ASubmissionsEditsAreMadeToItsTextBeforeItIsParsed) {
  ASSERT_TRUE(Submit(JobYaml("first", 0, 0)).ok());
  wire::SubmitJobT req;
  req.spec_yaml = JobYaml("x", 0, 0);
  req.spec_yaml.replace(0, req.spec_yaml.find('\n'), "name_prefix: gen");
  req.name = "renamed";
  req.after = {"first:ended"};
  req.hold = true;
  Message reply = Call(wire::SubmitJobT(req));
  ASSERT_NE(reply.As<wire::SubmitJobReply>(), nullptr) << reply.ErrorStatus().ToString();
  EXPECT_EQ(Str(reply.As<wire::SubmitJobReply>()->name()), "renamed");
  const JobRecord* job = coordinator_->FindJob("renamed");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->state, JobState::SUSPENDED);
  EXPECT_TRUE(job->spec.name_prefix.empty());
  ASSERT_EQ(job->spec.scheduling.after.size(), 1u);
  EXPECT_EQ(job->spec.scheduling.after[0], (JobDependency{"first", AfterCondition::kEnded}));
  EXPECT_NE(job->spec_yaml.find("renamed"), std::string::npos) << job->spec_yaml;

  req.name = "9lives";
  Status bad_name = Call(wire::SubmitJobT(req)).ErrorStatus();
  EXPECT_EQ(bad_name.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_name.message().find("name: '9lives' is not a valid job name"), std::string::npos)
      << bad_name.message();
  req.name = "other";
  req.after = {"first:maybe"};
  Status bad_after = Call(wire::SubmitJobT(req)).ErrorStatus();
  EXPECT_EQ(bad_after.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_after.message().find("after: "), std::string::npos) << bad_after.message();
  EXPECT_NE(bad_after.message().find("'maybe'"), std::string::npos) << bad_after.message();
  req.after.assign(100000, "first");  // a hostile list: refused by its length, not compared
  Status long_after = Call(wire::SubmitJobT(req)).ErrorStatus();
  EXPECT_EQ(long_after.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(long_after.message().find("after: at most 32 jobs, got 100000"), std::string::npos)
      << long_after.message();
  EXPECT_EQ(coordinator_->FindJob("other"), nullptr);
}

TEST_F(CoordinatorTest, MalformedFramesNeverCrashIt) {
  zmq::message_t junk(std::string("definitely not a flatbuffer"));
  ASSERT_TRUE(client_.socket->Send(std::move(junk)).ok());
  Pump([&] { return !client_.inbox.empty(); });
  ASSERT_FALSE(client_.inbox.empty());
  EXPECT_EQ(client_.inbox.front().ErrorStatus().code(), StatusCode::kDataLoss);
  client_.inbox.clear();
  // An agent message on the client endpoint is refused, and the coordinator still works.
  wire::HeartbeatT hb;
  hb.node_id = "n";
  EXPECT_EQ(Call(std::move(hb)).ErrorStatus().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Submit(JobYaml("after", 0, 0)).ok());
}

TEST_F(CoordinatorTest, BadFramesCountInTheirPeersBudgetAndAPassReadsABoundedNumber) {
  options_.max_requests_per_peer = 10;
  Restart();
  AddAgent("node-a", 1);
  // One peer queues more garbage than a pass reads; another peer sends one valid request.
  zmq::socket_t flooder(context_, zmq::socket_type::dealer);
  flooder.set(zmq::sockopt::sndhwm, 0);
  flooder.set(zmq::sockopt::rcvhwm, 0);
  flooder.set(zmq::sockopt::linger, 0);
  flooder.connect(options_.client_endpoint);
  const size_t kFrames = Coordinator::kMaxMessagesPerPass + 1000;
  std::mt19937 random(7);
  for (size_t i = 0; i < kFrames; ++i) {
    std::string bytes(1 + random() % 300, '\0');
    for (char& c : bytes) c = static_cast<char>(random());
    ASSERT_TRUE(flooder.send(zmq::buffer(bytes), zmq::send_flags::none));
  }
  uint64_t valid = client_.Send(wire::ListNodesT{});
  Heartbeat("node-a");

  uint64_t before = coordinator_->stats().messages;
  ASSERT_TRUE(coordinator_->RunOnce(milliseconds(0)).ok());
  // The pass read kMaxMessagesPerPass messages from the client endpoint (the valid request may be
  // one of them) and the heartbeat, and answered only the first 10 bad frames (the peer's
  // budget); the rest were dropped unanswered.
  EXPECT_EQ(coordinator_->stats().messages - before, Coordinator::kMaxMessagesPerPass + 1);
  EXPECT_GE(coordinator_->stats().bad_frames, Coordinator::kMaxMessagesPerPass - 1);
  int answers = 0;
  zmq::message_t reply;
  while (flooder.recv(reply, zmq::recv_flags::dontwait)) {
    auto m = Message::Parse(std::move(reply));
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->ErrorStatus().code(), StatusCode::kDataLoss);
    ++answers;
  }
  EXPECT_EQ(answers, 10);
  // The agent's heartbeat was read and answered in that same pass.
  agents_["node-a"].Drain();
  EXPECT_EQ(agents_["node-a"].Take<wire::HeartbeatReply>().size(), 1u);

  // The rest of the flood takes the next pass; the valid request is answered.
  Pump([&] {
    for (const Message& m : client_.inbox) {
      if (m.request_id() == valid) return true;
    }
    return false;
  });
  EXPECT_EQ(coordinator_->stats().bad_frames, kFrames);
  EXPECT_TRUE(Submit(JobYaml("after_flood", 0, 0)).ok());
}

TEST_F(CoordinatorTest, SpecsOverTheSizeLimitAreRefusedNamingTheLimit) {
  options_.max_spec_bytes = 4096;
  Restart();
  std::string big = JobYaml("big", 0, 0) + "# " + std::string(5000, 'x') + "\n";
  Status s = Submit(big);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("4 KiB"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--max-spec-size"), std::string::npos) << s.message();
  EXPECT_EQ(coordinator_->FindJob("big"), nullptr);

  wire::SubmitStudyT study;
  study.spec_yaml = std::string(4097, '#');
  Status st = Call(std::move(study)).ErrorStatus();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("study spec"), std::string::npos) << st.message();

  // A spec at the limit is taken.
  std::string fits = JobYaml("fits", 0, 0);
  fits += "#" + std::string(4096 - fits.size() - 2, 'x') + "\n";
  ASSERT_EQ(fits.size(), 4096u);
  EXPECT_TRUE(Submit(fits).ok());
}

TEST_F(CoordinatorTest, AGangThatCannotFitTheIdleClusterIsRefusedSayingWhy) {
  // Within the registration grace (one heartbeat timeout after start) nothing is refused.
  AddAgent("node-a", 8);
  ASSERT_TRUE(Submit(JobYaml("early_huge", 0, 64)).ok());
  clock_.Advance(milliseconds(options_.heartbeat_timeout.count() + 1));
  AddAgent("node-a", 8);
  AddAgent("node-b", 8);

  Status huge = Submit(JobYaml("huge", 0, 64));
  EXPECT_EQ(huge.code(), StatusCode::kFailedPrecondition) << huge.ToString();
  EXPECT_EQ(huge.message(),
            "job huge cannot run on this cluster: chief pool needs 64 GPUs per replica; the "
            "largest node has 8");
  // Three replicas of 5 GPUs each fit a node of 8 alone, but not all three on two nodes.
  Status three = Submit(JobYaml("three_fives", 2, 5));
  EXPECT_EQ(three.code(), StatusCode::kFailedPrecondition) << three.ToString();
  EXPECT_NE(three.message().find("its 3 replicas (15 GPUs, 3 CPUs in all) do not fit together on "
                                 "2 nodes (16 GPUs, 32 CPUs in all)"),
            std::string::npos)
      << three.message();
  EXPECT_EQ(coordinator_->FindJob("huge"), nullptr);
  // What fits the idle cluster is taken, however busy it is now.
  EXPECT_TRUE(Submit(JobYaml("two_eights", 1, 8)).ok());
  EXPECT_TRUE(Submit(JobYaml("two_eights_again", 1, 8)).ok());
}

TEST_F(CoordinatorTest, WithNoNodeKnownABigGangWaitsForNodes) {
  clock_.Advance(milliseconds(options_.heartbeat_timeout.count() + 1));
  ASSERT_TRUE(Submit(JobYaml("waits", 3, 64)).ok());
  PumpFew();
  wire::JobInfoT info = GetJob("waits");
  EXPECT_EQ(info.state, JobState::QUEUED);
  EXPECT_EQ(info.message, "waiting for a node: none is ready");
}

TEST_F(CoordinatorTest, AQueuedJobSaysWhatItWaitsFor) {
  AddAgent("node-a", 4);
  AddAgent("node-b", 4);
  ASSERT_TRUE(Submit(JobYaml("blocker", 0, 4)).ok());
  Pump([&] { return TakeLaunchList().size() == 1; });
  ASSERT_TRUE(Submit(JobYaml("pair", 1, 4)).ok());
  PumpFew();
  wire::JobInfoT info = GetJob("pair");
  EXPECT_EQ(info.state, JobState::QUEUED);
  EXPECT_EQ(info.message, "waiting for room for 2 replicas with 4 GPUs, 1 CPU each; 1 fits now");
  // Once the blocker is gone the pair is placed.
  wire::CancelJobT cancel;
  cancel.name = "blocker";
  Call(std::move(cancel));
  Report(coordinator_->FindJob("blocker")->replicas[0].node_id, "blocker", "chief-0", 0,
         ReplicaState::STOPPED);
  Pump([&] { return GetJob("pair").state == JobState::PENDING; });
  EXPECT_EQ(GetJob("pair").state, JobState::PENDING);
  EXPECT_EQ(GetJob("pair").message, "launching 2 replicas");
}

// scheduling.max_wait: a job that cannot be placed within it fails, saying what it waited for;
// the job it waited behind runs on.
TEST_F(CoordinatorTest, AJobNotPlacedWithinItsMaxWaitFailsSayingWhatItWaitedFor) {
  clock_.Advance(milliseconds(options_.heartbeat_timeout.count() + 1));
  AddAgent("node-a", 4);
  ASSERT_TRUE(Submit(JobYaml("blocker", 0, 4)).ok());
  RunAll(LaunchesWithinFiveRounds());
  const int64_t submitted_ms = clock_.NowMs();
  ASSERT_TRUE(Submit(JobYaml("impatient", 0, 4, 3, ", max_wait: 20s")).ok());
  const auto a_second_passes = [&] {
    clock_.Advance(milliseconds(1000));
    Heartbeat("node-a");
    PumpFew();
  };
  for (int i = 0; i < 19; ++i) a_second_passes();
  wire::JobInfoT waiting = GetJob("impatient");
  EXPECT_EQ(waiting.state, JobState::QUEUED);
  // It says when it gives up.
  EXPECT_EQ(waiting.message,
            "waiting for room for 1 replica with 4 GPUs, 1 CPU; none fits now; fails at " +
                FormatUtc(submitted_ms + 20'000, "%Y-%m-%d %H:%M:%S UTC") +
                " unless placed (scheduling.max_wait: 20s)");
  for (int i = 0; i < 3 && GetJob("impatient").state == JobState::QUEUED; ++i) a_second_passes();
  wire::JobInfoT info = GetJob("impatient");
  EXPECT_EQ(info.state, JobState::FAILED);
  EXPECT_EQ(info.message,
            "waited 20s to be placed (scheduling.max_wait: 20s): waiting for room for 1 replica "
            "with 4 GPUs, 1 CPU; none fits now");
  EXPECT_EQ(GetJob("blocker").state, JobState::RUNNING);
  EXPECT_TRUE(TakeLaunchList().empty());
}

TEST_F(CoordinatorTest, GangWaitsUntilEveryReplicaFits) {
  AddAgent("node-a", 2);
  ASSERT_TRUE(Submit(JobYaml("wide", 2, 1)).ok());  // 3 GPUs
  PumpFew();
  EXPECT_TRUE(TakeLaunches().empty());
  EXPECT_EQ(GetJob("wide").state, JobState::QUEUED);
  AddAgent("node-b", 1);
  Pump([&] { return agents_["node-b"].inbox.size() >= 1 && agents_["node-a"].inbox.size() >= 2; });
  EXPECT_EQ(TakeLaunches().size(), 3u);
  EXPECT_EQ(GetJob("wide").state, JobState::PENDING);
}

TEST_F(CoordinatorTest, LogsAreStoredByOffsetAndServedAcrossAttempts) {
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("logs", 0, 1)));
  auto chunk = [&](int attempt, uint64_t offset, const std::string& text, bool eof = false) {
    wire::LogChunkT c;
    c.job = "logs";
    c.replica = "chief-0";
    c.attempt = attempt;
    c.offset = offset;
    c.data.assign(text.begin(), text.end());
    c.eof = eof;
    agents_["node-a"].Send(std::move(c));
    Pump([&] { return !agents_["node-a"].inbox.empty(); });
    auto acks = agents_["node-a"].Take<wire::LogAck>();
    EXPECT_EQ(acks.size(), 1u);
    return acks.empty() ? uint64_t{0} : acks[0].next_offset;
  };
  EXPECT_EQ(chunk(0, 0, "hello "), 6u);
  EXPECT_EQ(chunk(0, 0, "hello "), 6u);  // a re-send is ignored
  EXPECT_EQ(chunk(0, 20, "gap"), 6u);    // a gap is refused
  EXPECT_EQ(chunk(0, 6, "world\n"), 12u);
  Report("node-a", "logs", "chief-0", 0, ReplicaState::FAILED, 137, 9);
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  RunAll(TakeLaunches());
  EXPECT_EQ(chunk(1, 0, "again\n", true), 6u);

  auto get = [&](int attempt, uint64_t offset, uint32_t max) {
    wire::GetLogsT g;
    g.job = "logs";
    g.replica = "chief-0";
    g.attempt = attempt;
    g.offset = offset;
    g.max_bytes = max;
    Message m = Call(std::move(g));
    wire::LogDataT d;
    EXPECT_NE(m.As<wire::LogData>(), nullptr) << m.ErrorStatus().ToString();
    if (m.As<wire::LogData>()) m.As<wire::LogData>()->UnPackTo(&d);
    return d;
  };
  auto d = get(0, 0, 1 << 20);
  EXPECT_EQ(std::string(d.data.begin(), d.data.end()), "hello world\n");
  const std::string all =
      "==== chief-0 attempt 0 ====\nhello world\n==== chief-0 attempt 1 ====\nagain\n";
  d = get(-1, 0, 1 << 20);
  EXPECT_EQ(std::string(d.data.begin(), d.data.end()), all);
  EXPECT_FALSE(d.complete);  // the job still runs
  // Reading in small pieces gives the same bytes.
  std::string pieces;
  uint64_t off = 0;
  for (int i = 0; i < 100 && off < all.size(); ++i) {
    d = get(-1, off, 7);
    pieces.append(d.data.begin(), d.data.end());
    EXPECT_EQ(d.next_offset, off + d.data.size());
    off = d.next_offset;
  }
  EXPECT_EQ(pieces, all);
  Report("node-a", "logs", "chief-0", 1, ReplicaState::SUCCEEDED, 0);
  d = get(-1, all.size(), 1 << 20);
  EXPECT_TRUE(d.data.empty());
  EXPECT_TRUE(d.complete);
  EXPECT_TRUE(fs::exists(dir_ / "logs/logs/chief-0/attempt-1.log"));
}

// Agents register labels; a pool's node_selector places its replicas on nodes with them. A job no
// node's labels suit is refused at submit, naming the labels; one whose labelled nodes are busy
// waits, saying for what, while a node without them is idle. `cohort nodes` lists the labels, and
// a label no selector could name is left out.
// required_topology through the loop: the gang goes to the rack that holds it; when the node of
// its worker is lost, the worker restarts on the last free node of that rack, not on the other
// rack's node, which is as free and comes first.
TEST_F(CoordinatorTest, AReplicaOfAJobWithATopologyRestartsInItsJobsRack) {
  node_labels_["node-a"] = {{"rack", "r1"}};
  for (const char* id : {"node-b", "node-c", "node-d"}) node_labels_[id] = {{"rack", "r2"}};
  const std::vector<std::string> ids = {"node-a", "node-b", "node-c", "node-d"};
  for (const std::string& id : ids) AddAgent(id, 1);
  ASSERT_TRUE(Submit(JobYaml("racked", 1, 1, 3,
                             ", required_topology: rack, restart_job_on_worker_restart: false"))
                  .ok());
  std::map<std::string, std::string> where = RunGang(2);
  EXPECT_NE(where["chief-0"], "node-a");
  EXPECT_NE(where["worker-0"], "node-a");
  const std::string lost = where["worker-0"];
  LoseNodeAmong(lost, ids);
  const wire::JobInfoT info = GetJob("racked");
  const wire::ReplicaInfoT* worker = Replica(info, "worker-0");
  ASSERT_NE(worker, nullptr);
  EXPECT_NE(worker->node_id, "node-a") << "restarted outside its job's rack";
  EXPECT_NE(worker->node_id, lost);
  EXPECT_NE(worker->node_id, where["chief-0"]);
  EXPECT_FALSE(worker->node_id.empty()) << info.message;
}

// Topology levels through the loop: preferred rack inside a required block. The gang goes to
// rack r1; when the node of its worker is lost and r1 has no room left, the worker restarts in
// r1's block (node-c, rack r2), not in block b2, whose two nodes are as free.
TEST_F(CoordinatorTest, AReplicaRestartsInItsJobsRackElseItsBlock) {
  node_labels_["node-a"] = node_labels_["node-b"] = {{"block", "b1"}, {"rack", "r1"}};
  node_labels_["node-c"] = {{"block", "b1"}, {"rack", "r2"}};
  node_labels_["node-d"] = node_labels_["node-e"] = {{"block", "b2"}, {"rack", "r3"}};
  const std::vector<std::string> ids = {"node-a", "node-b", "node-c", "node-d", "node-e"};
  for (const std::string& id : ids) AddAgent(id, 1);
  ASSERT_TRUE(Submit(JobYaml("tiered", 1, 1, 3,
                             ", preferred_topology: [rack], required_topology: block, "
                             "restart_job_on_worker_restart: false"))
                  .ok());
  std::map<std::string, std::string> where = RunGang(2);
  EXPECT_EQ((std::set<std::string>{where["chief-0"], where["worker-0"]}),
            (std::set<std::string>{"node-a", "node-b"}));
  LoseNodeAmong(where["worker-0"], ids);
  const wire::JobInfoT info = GetJob("tiered");
  const wire::ReplicaInfoT* worker = Replica(info, "worker-0");
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(worker->node_id, "node-c") << info.message;
}

// A job its preferred rack could not hold (the chief needs node-a's two GPUs, rack r1; its three
// workers fill rack r2): when a worker's node is lost, the worker restarts in r2, where most of its
// job runs (node-f), not in the chief's rack (node-e), which is as free and registered first.
TEST_F(CoordinatorTest, AReplicaRestartsInTheRackOfMostOfItsJob) {
  node_labels_["node-a"] = node_labels_["node-e"] = {{"rack", "r1"}};
  for (const char* id : {"node-b", "node-c", "node-d", "node-f"})
    node_labels_[id] = {{"rack", "r2"}};
  AddAgent("node-a", 2);
  for (const char* id : {"node-b", "node-c", "node-d"}) AddAgent(id, 1);
  ASSERT_TRUE(Submit("name: spread\nworker_pools:\n"
                     "  - role: chief\n    resources: {gpus: 2, cpus: 1}\n"
                     "    process: {command: [/bin/train]}\n"
                     "  - role: worker\n    replicas: 3\n    resources: {gpus: 1, cpus: 1}\n"
                     "    process: {command: [/bin/train]}\n"
                     "scheduling: {max_restarts: 3, preferred_topology: [rack], "
                     "restart_job_on_worker_restart: false}\n")
                  .ok());
  std::map<std::string, std::string> where = RunGang(4);
  ASSERT_EQ(where["chief-0"], "node-a");
  AddAgent("node-e", 1);
  AddAgent("node-f", 1);
  LoseNodeAmong(where["worker-0"], {"node-a", "node-b", "node-c", "node-d", "node-e", "node-f"});
  const wire::JobInfoT info = GetJob("spread");
  const wire::ReplicaInfoT* worker = Replica(info, "worker-0");
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(worker->node_id, "node-f") << info.message;
}

TEST_F(CoordinatorTest, NodeSelectorsPlaceReplicasOnNodesWithTheirLabels) {
  node_labels_["node-a"] = {{"gpu", "a100"}, {"bad label", "x"}};
  node_labels_["node-b"] = {{"gpu", "h100"}};
  node_labels_["node-c"] = {{"gpu", "h100"}, {"zone", "b"}};
  clock_.Advance(milliseconds(options_.heartbeat_timeout.count() + 1));  // the submit check is on
  AddAgent("node-a", 4);
  AddAgent("node-b", 1);
  AddAgent("node-c", 1);
  auto yaml = [](const std::string& name, int workers, const std::string& gpu) {
    std::string pool = "    resources: {gpus: 1}\n    node_selector: {gpu: " + gpu +
                       "}\n    process: {command: [/bin/train]}\n";
    std::string y = "name: " + name + "\nworker_pools:\n  - role: chief\n" + pool;
    if (workers > 0)
      y += "  - role: worker\n    replicas: " + std::to_string(workers) + "\n" + pool;
    return y;
  };
  ASSERT_TRUE(Submit(yaml("h100s", 1, "h100")).ok());
  Pump([&] { return !agents_["node-b"].inbox.empty() && !agents_["node-c"].inbox.empty(); });
  EXPECT_EQ(TakeLaunches().size(), 2u);
  EXPECT_TRUE(agents_["node-a"].inbox.empty());

  Status refused = Submit(yaml("tpu", 0, "tpu"));
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("chief pool needs a node with labels gpu=tpu (node_selector); "
                                   "none of 3 nodes has them"),
            std::string::npos)
      << refused.ToString();

  ASSERT_TRUE(Submit(yaml("waits", 0, "h100")).ok());
  PumpFew();
  wire::JobInfoT info = GetJob("waits");
  EXPECT_EQ(info.state, JobState::QUEUED);
  EXPECT_EQ(info.message,
            "waiting for room for 1 replica with 1 GPU, 1 CPU on nodes with labels gpu=h100; none "
            "fits now");

  // node_affinity: any GPU but an A100, outside zone b, is node-b's (busy: it waits saying so);
  // a requirement no node meets is refused at submit, naming it.
  auto affinity_yaml = [](const std::string& name, const std::string& affinity) {
    return "name: " + name +
           "\nworker_pools:\n  - role: chief\n    resources: {gpus: 1}\n    node_affinity: " +
           affinity + "\n    process: {command: [/bin/train]}\n";
  };
  ASSERT_TRUE(Submit(affinity_yaml("not_a100",
                                   "[{key: gpu, operator: NotIn, values: [a100]}, "
                                   "{key: zone, operator: DoesNotExist}]"))
                  .ok());
  PumpFew();
  EXPECT_EQ(GetJob("not_a100").message,
            "waiting for room for 1 replica with 1 GPU, 1 CPU on nodes with labels gpu notin "
            "(a100),!zone; none fits now");
  EXPECT_TRUE(agents_["node-a"].inbox.empty()) << "node-a's free GPUs are A100s";
  refused = Submit(affinity_yaml("ib", "[{key: ib, operator: Exists}]"));
  EXPECT_NE(refused.message().find("chief pool needs a node with labels ib (node_affinity); none "
                                   "of 3 nodes has them"),
            std::string::npos)
      << refused.ToString();

  Message m = Call(wire::ListNodesT{});
  ASSERT_NE(m.As<wire::NodeList>(), nullptr);
  wire::NodeListT nodes;
  m.As<wire::NodeList>()->UnPackTo(&nodes);
  std::map<std::string, std::string> labels;
  for (const auto& n : nodes.nodes) labels[n->node_id] = n->labels;
  EXPECT_EQ(labels,
            (std::map<std::string, std::string>{
                {"node-a", "gpu=a100"}, {"node-b", "gpu=h100"}, {"node-c", "gpu=h100,zone=b"}}));

  // ListNodes with a selector: the nodes it matches, and the selector back in its canonical form
  // (a client tells from it that the coordinator matched); a malformed one is refused, named.
  auto matching = [&](const std::string& selector, std::string* echo = nullptr) {
    wire::ListNodesT request;
    request.selector = selector;
    Message reply = Call(std::move(request));
    std::set<std::string> ids;
    if (reply.As<wire::NodeList>() == nullptr) {
      ADD_FAILURE() << selector << ": " << reply.ErrorStatus().ToString();
      return ids;
    }
    wire::NodeListT listed;
    reply.As<wire::NodeList>()->UnPackTo(&listed);
    for (const auto& n : listed.nodes) ids.insert(n->node_id);
    if (echo != nullptr) *echo = listed.selector;
    return ids;
  };
  std::string echo;
  EXPECT_EQ(matching("gpu == h100, !zone", &echo), std::set<std::string>{"node-b"});
  EXPECT_EQ(echo, "gpu=h100,!zone");
  EXPECT_EQ(matching("gpu in (h100, a100)"), (std::set<std::string>{"node-a", "node-b", "node-c"}));
  EXPECT_EQ(matching("zone notin (b)"), (std::set<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(matching("ib"), std::set<std::string>{});
  EXPECT_EQ(matching("", &echo).size(), 3u);
  EXPECT_EQ(echo, "");
  wire::ListNodesT malformed;
  malformed.selector = "gpu in (h100";
  const Status bad = Call(std::move(malformed)).ErrorStatus();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad.ToString();
  EXPECT_NE(bad.message().find("selector: "), std::string::npos) << bad.ToString();
  EXPECT_NE(bad.message().find("without its ')'"), std::string::npos) << bad.ToString();
}

TEST_F(CoordinatorTest, ListNodesAndJobs) {
  AddAgent("node-a", 2);
  ASSERT_TRUE(Submit(JobYaml("one", 0, 1)).ok());
  ASSERT_TRUE(Submit(JobYaml("two", 0, 0)).ok());
  Pump([&] { return agents_["node-a"].inbox.size() >= 2; });
  Message m = Call(wire::ListNodesT{});
  ASSERT_NE(m.As<wire::NodeList>(), nullptr);
  wire::NodeListT nodes;
  m.As<wire::NodeList>()->UnPackTo(&nodes);
  ASSERT_EQ(nodes.nodes.size(), 1u);
  EXPECT_EQ(nodes.nodes[0]->node_id, "node-a");
  EXPECT_EQ(nodes.nodes[0]->state, "READY");
  EXPECT_EQ(nodes.nodes[0]->gpus.size(), 2u);
  EXPECT_EQ(nodes.nodes[0]->gpus_used.size(), 1u);
  EXPECT_EQ(nodes.nodes[0]->replicas, 2);
  Message l = Call(wire::ListJobsT{});
  ASSERT_NE(l.As<wire::JobList>(), nullptr);
  ASSERT_EQ(l.As<wire::JobList>()->jobs()->size(), 2u);
  EXPECT_EQ(l.As<wire::JobList>()->jobs()->Get(0)->name()->str(), "one");
}

// `cohort list --state S --since T --limit N`: the store selects, newest N, shown oldest first.
TEST_F(CoordinatorTest, HistoryQueriesFilterByStateSubmitTimeAndLimit) {
  AddAgent("node-a", 1);
  auto names = [&](wire::ListJobsT query) { return ListedNames(std::move(query)); };
  // old_done runs and succeeds; old_gone is cancelled; then, an hour later, three more.
  ASSERT_TRUE(Submit(JobYaml("old_done", 0, 1)).ok());
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.size(), 1u);
  RunAll(launches);
  Report("node-a", "old_done", "chief-0", launches.begin()->second.attempt, ReplicaState::SUCCEEDED,
         0);
  ASSERT_EQ(GetJob("old_done").state, JobState::SUCCEEDED);
  ASSERT_TRUE(Submit(JobYaml("old_gone", 0, 0)).ok());
  wire::CancelJobT cancel;
  cancel.name = "old_gone";
  Call(std::move(cancel));
  PumpFew();
  clock_.Advance(std::chrono::hours(1));
  const int64_t later = clock_.NowMs();
  for (const char* name : {"new_a", "new_b", "new_c"}) {
    ASSERT_TRUE(Submit(JobYaml(name, 0, 1)).ok());  // new_a takes the GPU; the others queue
  }
  PumpFew();

  EXPECT_EQ(names({}),
            (std::vector<std::string>{"old_done", "old_gone", "new_a", "new_b", "new_c"}));
  wire::ListJobsT succeeded;
  succeeded.states = {JobState::SUCCEEDED};
  EXPECT_EQ(names(std::move(succeeded)), (std::vector<std::string>{"old_done"}));
  wire::ListJobsT ended;
  ended.states = {JobState::SUCCEEDED, JobState::CANCELLED};
  EXPECT_EQ(names(std::move(ended)), (std::vector<std::string>{"old_done", "old_gone"}));
  wire::ListJobsT recent;
  recent.created_since_ms = later;
  EXPECT_EQ(names(std::move(recent)), (std::vector<std::string>{"new_a", "new_b", "new_c"}));
  wire::ListJobsT newest;
  newest.limit = 2;
  EXPECT_EQ(names(std::move(newest)), (std::vector<std::string>{"new_b", "new_c"}));
  wire::ListJobsT queued_one;
  queued_one.states = {JobState::QUEUED};
  queued_one.limit = 1;
  EXPECT_EQ(names(std::move(queued_one)), (std::vector<std::string>{"new_c"}));
  wire::ListJobsT none;
  none.states = {JobState::FAILED};
  none.created_since_ms = later;
  EXPECT_TRUE(names(std::move(none)).empty());

  // The answer is the store's: after a restart it is the same.
  Restart();
  wire::ListJobsT again;
  again.states = {JobState::SUCCEEDED, JobState::CANCELLED};
  again.limit = 1;
  EXPECT_EQ(names(std::move(again)), (std::vector<std::string>{"old_gone"}));
}

// `cohort list -l team=vision`: the jobs whose labels match, with the other filters; a limit
// counts the jobs selected. Each job's labels come with it.
TEST_F(CoordinatorTest, ListingByLabelSelectsTheJobsWhoseLabelsMatch) {
  AddAgent("node-a", 1);
  const std::vector<std::pair<std::string, std::string>> jobs = {
      {"v1", "{team: vision, sweep: lr}"},
      {"n1", "{team: nlp}"},
      {"v2", "{team: vision}"},
      {"plain", ""},
      {"v3", "{team: vision, sweep: wd}"}};
  for (const auto& [name, labels] : jobs) {
    std::string yaml = JobYaml(name, 0, 0);
    if (!labels.empty()) yaml += "labels: " + labels + "\n";
    ASSERT_TRUE(Submit(yaml).ok()) << name;
  }
  auto selected = [&](const std::string& selector, uint32_t limit = 0) {
    wire::ListJobsT query;
    query.selector = selector;
    query.limit = limit;
    return ListedNames(std::move(query));
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(selected(""), (Names{"v1", "n1", "v2", "plain", "v3"}));
  EXPECT_EQ(selected("team=vision"), (Names{"v1", "v2", "v3"}));
  EXPECT_EQ(selected("team=vision,sweep"), (Names{"v1", "v3"}));
  EXPECT_EQ(selected("team=vision,!sweep"), (Names{"v2"}));
  EXPECT_EQ(selected("team notin (vision)"), (Names{"n1", "plain"}));
  EXPECT_EQ(selected("sweep in (wd, lr)", 1), (Names{"v3"}));  // the newest one selected
  EXPECT_TRUE(selected("team=speech").empty());
  wire::ListJobsT with_state;
  with_state.selector = "team=vision";
  with_state.states = {JobState::SUCCEEDED, JobState::FAILED};
  EXPECT_TRUE(ListedNames(std::move(with_state)).empty());

  wire::ListJobsT malformed;
  malformed.selector = "team in vision";
  Message refused = Call(std::move(malformed));
  EXPECT_EQ(refused.ErrorStatus().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.ErrorStatus().message().find("selector: "), std::string::npos)
      << refused.ErrorStatus().ToString();

  const wire::JobInfoT v1 = GetJob("v1");
  ASSERT_EQ(v1.labels.size(), 2u);
  EXPECT_EQ(v1.labels[0]->key, "sweep");
  EXPECT_EQ(v1.labels[0]->value, "lr");
  EXPECT_EQ(v1.labels[1]->key, "team");
  EXPECT_TRUE(GetJob("plain").labels.empty());
  // The same after a restart: labels are the stored job file's.
  Restart();
  EXPECT_EQ(selected("team=vision,sweep"), (Names{"v1", "v3"}));
}

TEST_F(CoordinatorTest, RestartedCoordinatorKeepsEveryJobAndReconciles) {
  AddAgent("node-a", 4);
  ASSERT_TRUE(Submit(JobYaml("keep", 1, 1, 3, ", restart_job_on_worker_restart: false")).ok());
  ASSERT_TRUE(Submit(JobYaml("done", 0, 1)).ok());
  Pump([&] { return agents_["node-a"].inbox.size() >= 3; });
  auto all = TakeLaunchList();
  ASSERT_EQ(all.size(), 3u);
  RunAll(all);
  Report("node-a", "done", "chief-0", 0, ReplicaState::SUCCEEDED, 0);
  ASSERT_TRUE(Submit(JobYaml("queued", 0, 8)).ok());  // never fits
  EXPECT_EQ(GetJob("keep").state, JobState::RUNNING);

  Restart();
  EXPECT_EQ(coordinator_->job_count(), 3u);
  EXPECT_EQ(GetJob("done").state, JobState::SUCCEEDED);
  EXPECT_EQ(GetJob("queued").state, JobState::QUEUED);
  auto keep = GetJob("keep");
  EXPECT_EQ(keep.state, JobState::RUNNING);
  EXPECT_EQ(Replica(keep, "worker-0")->node_id, "node-a");

  // The agent notices (heartbeat unknown) and re-registers with chief-0 only: worker-0 is gone.
  ASSERT_NO_FATAL_FAILURE(ExpectHeartbeatUnknown("node-a"));
  Register("node-a", 4, {Running("keep", "chief-0")});
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches["node-a/worker-0"].attempt, 1);
  EXPECT_TRUE(TakeStops().empty());  // chief-0 kept untouched
  keep = GetJob("keep");
  EXPECT_EQ(Replica(keep, "chief-0")->state, ReplicaState::RUNNING);
  EXPECT_EQ(Replica(keep, "chief-0")->attempt, 0);
  EXPECT_EQ(keep.restarts, 1);

  // And once more, now from a state dir with more history.
  Restart();
  EXPECT_EQ(coordinator_->job_count(), 3u);
  EXPECT_EQ(GetJob("keep").restarts, 1);
}

TEST_F(CoordinatorTest, ReplicasOnANodeThatNeverReturnsAreLostAfterTheTimeout) {
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("orphan", 0, 1)));
  agents_.clear();
  Restart();
  AddAgent("node-b", 1);
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(milliseconds(1000));
    Heartbeat("node-b");
    PumpFew();
  }
  Pump([&] { return !agents_["node-b"].inbox.empty(); });
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.count("node-b/chief-0"), 1u);
  EXPECT_EQ(launches["node-b/chief-0"].attempt, 1);
}

// A coordinator with --fence-after 10s and a stop grace of 5 s; heartbeats every second, so a
// replica lost with its node waits 10 + 5 + 2 x 1 s from that node's last word.
class FencingTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    options_.fence_after = milliseconds(10'000);
    options_.stop_grace = milliseconds(5'000);
    Restart();
  }
  static constexpr int64_t kHoldMs = 10'000 + 5'000 + 2 * 1'000;

  // Advances the clock to `until_ms` a second at a time, node-b heartbeating; false once node-b
  // got a launch (still reported to the caller through its inbox).
  bool QuietUntil(int64_t until_ms) {
    while (clock_.NowMs() + 1000 <= until_ms) {
      clock_.Advance(milliseconds(1000));
      Heartbeat("node-b");
      PumpFew();
      if (!agents_["node-b"].Take<wire::LaunchReplica>().empty()) return false;
    }
    return true;
  }

  // Job `name` (a chief) runs on node-a, and node-b joins; then node-a falls silent until it is
  // declared lost (node-b heartbeating), and hears that the coordinator does not know it; nothing
  // is launched meanwhile. `last_word`: node-a's.
  void RunOnNodeAThenLoseIt(const std::string& name, int64_t* last_word) {
    AddAgent("node-a", 1);
    ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml(name, 0, 1)));
    *last_word = clock_.NowMs();
    AddAgent("node-b", 1);
    while (coordinator_->FindNode("node-a")->ready) {
      clock_.Advance(milliseconds(1000));
      Heartbeat("node-b");
      PumpFew();
    }
    ASSERT_TRUE(TakeLaunchList().empty());
    ASSERT_NO_FATAL_FAILURE(ExpectHeartbeatUnknown("node-a"));
  }
  // Two seconds more, node-b heartbeating: chief-0 attempt 1 is launched there.
  void ExpectChiefRelaunchedOnNodeBSoon() {
    clock_.Advance(milliseconds(2000));
    Heartbeat("node-b");
    Pump([&] { return !agents_["node-b"].inbox.empty(); });
    auto launches = TakeLaunches();
    ASSERT_EQ(launches.count("node-b/chief-0"), 1u);
    EXPECT_EQ(launches["node-b/chief-0"].attempt, 1);
  }
  // chief-0 attempt 1 is launched (on either node), before `deadline_ms`.
  void ExpectPlacedBefore(int64_t deadline_ms) {
    Pump([&] { return !agents_["node-a"].inbox.empty() || !agents_["node-b"].inbox.empty(); });
    auto launches = TakeLaunchList();
    ASSERT_EQ(launches.size(), 1u);
    EXPECT_EQ(launches[0].second.replica, "chief-0");
    EXPECT_EQ(launches[0].second.attempt, 1);
    EXPECT_LT(clock_.NowMs(), deadline_ms);
  }

  // Job `name` (chief-0, worker-0 with `whole_job` restarts) runs on node-a and node-b; the
  // worker's node falls silent, node-c has room. Expects nothing launched until the fence is over,
  // then worker-0 attempt 1; `waiting` gets the job's message and the worker's while it waited.
  void LoseTheWorkersNode(const std::string& name, bool whole_job, std::string* waiting) {
    AddAgent("node-a", 1);
    AddAgent("node-b", 1);
    ASSERT_TRUE(Submit(JobYaml(name, 1, 1, 3,
                               std::string(", restart_job_on_worker_restart: ") +
                                   (whole_job ? "true" : "false")))
                    .ok());
    Pump([&] { return !agents_["node-a"].inbox.empty() && !agents_["node-b"].inbox.empty(); });
    auto launches = TakeLaunchList();
    ASSERT_EQ(launches.size(), 2u);
    RunAll(launches);
    std::string worker_node, chief_node;
    for (const auto& [node, l] : launches) {
      (l.replica == "worker-0" ? worker_node : chief_node) = node;
    }
    AddAgent("node-c", 1);
    const int64_t last_word = clock_.NowMs();
    auto step = [&] {
      clock_.Advance(milliseconds(1000));
      Heartbeat(chief_node);
      Heartbeat("node-c");
      PumpFew();
      // The chief stopped for a whole-job restart says so.
      for (auto& stop : agents_[chief_node].Take<wire::StopReplica>()) {
        Report(chief_node, name, stop.replica, stop.attempt, ReplicaState::STOPPED, 143, 15);
      }
    };
    while (clock_.NowMs() + 1000 <= last_word + kHoldMs - 1000) {
      step();
      ASSERT_TRUE(TakeLaunchList().empty())
          << "a launch " << clock_.NowMs() - last_word << " ms after the last word";
    }
    EXPECT_FALSE(coordinator_->FindNode(worker_node)->ready);
    auto info = GetJob(name);
    *waiting = info.message + " | " + Replica(info, "worker-0")->message;
    step();
    step();
    Pump([&] { return !agents_["node-c"].inbox.empty(); });
    bool relaunched = false;
    for (const auto& [node, l] : TakeLaunchList()) {
      if (l.replica == "worker-0" && l.attempt == 1 && node != worker_node) relaunched = true;
    }
    EXPECT_TRUE(relaunched) << "worker-0 attempt 1 not launched once the fence was over";
  }
};

// The agents learn the fence at registration; a node that falls silent may only be cut off and
// still run its replica, which is placed again only once the node's agent has surely stopped it,
// and a coordinator restart in between keeps that wait.
// --fence-grace shortens the wait: the agents are told to stop fenced replicas within it, and a
// lost node's replica is placed again that much sooner.
TEST_F(FencingTest, AShorterFenceGraceShortensTheWait) {
  options_.fence_grace = milliseconds(1'000);
  Restart();
  int64_t last_word = 0;
  ASSERT_NO_FATAL_FAILURE(RunOnNodeAThenLoseIt("graced", &last_word));
  EXPECT_TRUE(HasEvent(GetJob("graced"),
                       "(fencing: an agent stops its replicas after 10s without word from the "
                       "coordinator, and waits at most 1s for them to end)"));
  ASSERT_TRUE(QuietUntil(last_word + 10'000 + 1'000 + 2 * 1'000 - 1000));
  ASSERT_NO_FATAL_FAILURE(ExpectChiefRelaunchedOnNodeBSoon());
}

TEST_F(FencingTest, ALostNodesReplicaIsPlacedAgainOnlyOnceItsAgentHasSurelyStoppedIt) {
  agents_["node-a"] = Connect(options_.agent_endpoint, "node-a");
  wire::RegisterAgentT reg;
  reg.node_id = "node-a";
  reg.cpus = 16;
  reg.memory_mb = 64'000;
  auto gpu = std::make_unique<wire::GpuInfoT>();
  reg.gpus.push_back(std::move(gpu));
  agents_["node-a"].Send(std::move(reg));
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  auto replies = agents_["node-a"].Take<wire::RegisterAgentReply>();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].fence_after_ms, 10'000);
  EXPECT_EQ(replies[0].fence_grace_ms, 5'000);

  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("fenced", 0, 1)));
  const int64_t last_word = clock_.NowMs();  // node-a's RUNNING report
  AddAgent("node-b", 1);
  // Lost after the 10 s timeout; nothing goes to node-b until the hold is over.
  ASSERT_TRUE(QuietUntil(last_word + 12'000));
  EXPECT_FALSE(coordinator_->FindNode("node-a")->ready);
  auto info = GetJob("fenced");
  EXPECT_TRUE(HasEvent(info, "what ran on node-a is placed again in "));
  EXPECT_TRUE(HasEvent(info,
                       ", once that node's agent has surely stopped it (fencing: an agent "
                       "stops its replicas after 10s without word from the coordinator, "
                       "and waits at most 5s for them to end)"))
      << info.events.back()->message;
  EXPECT_NE(Replica(info, "chief-0")
                ->message.find("waiting until the agent on node-a has surely "
                               "stopped chief-0 attempt 0 (fencing"),
            std::string::npos)
      << Replica(info, "chief-0")->message;

  Restart();  // the hold is stored with the replica
  Register("node-b", 1);
  ASSERT_TRUE(QuietUntil(last_word + kHoldMs - 1000));
  ASSERT_NO_FATAL_FAILURE(ExpectChiefRelaunchedOnNodeBSoon());
  EXPECT_EQ(GetJob("fenced").restarts, 1);
}

// With restart_job_on_worker_restart: false, the lost worker alone waits for its fence; the chief
// runs on.
TEST_F(FencingTest, AWorkerRestartedAloneWaitsForItsFenceToo) {
  std::string waiting;
  ASSERT_NO_FATAL_FAILURE(LoseTheWorkersNode("alone", false, &waiting));
  EXPECT_NE(waiting.find("| waiting until the agent on node-"), std::string::npos) << waiting;
  EXPECT_EQ(GetJob("alone").state, JobState::RUNNING);
}

// With restart_job_on_worker_restart: true the whole job waits in the queue, saying for what.
TEST_F(FencingTest, AWholeJobRestartWaitsInTheQueueForTheFence) {
  std::string waiting;
  ASSERT_NO_FATAL_FAILURE(LoseTheWorkersNode("whole", true, &waiting));
  EXPECT_EQ(waiting.rfind("waiting until the agent on node-", 0), 0u) << waiting;
  EXPECT_NE(waiting.find("has surely stopped worker-0 attempt 0 (fencing"), std::string::npos)
      << waiting;
}

// The cut-off node heard from again ends the wait: once it reports the held attempt ended (after
// the stop the coordinator sends it), or registers again without it, the replica is placed at once.
TEST_F(FencingTest, TheNodeHeardFromAgainReportingTheAttemptEndedEndsTheWait) {
  int64_t last_word = 0;
  ASSERT_NO_FATAL_FAILURE(RunOnNodeAThenLoseIt("back", &last_word));
  Register("node-a", 1, {Running("back", "chief-0")});
  EXPECT_EQ(TakeStops(), (std::vector<std::string>{"node-a/chief-0#0"}));
  PumpFew();
  EXPECT_TRUE(TakeLaunchList().empty()) << "placed while attempt 0 still ran";
  Report("node-a", "back", "chief-0", 0, ReplicaState::STOPPED, 143, 15);
  ASSERT_NO_FATAL_FAILURE(ExpectPlacedBefore(last_word + kHoldMs));
  EXPECT_TRUE(HasEvent(GetJob("back"),
                       "chief-0 attempt 0 no longer runs (node-a reports that it ended): placed "
                       "again without waiting for the fence"));
}

TEST_F(FencingTest, TheNodeHeardFromAgainWithoutTheAttemptEndsTheWait) {
  int64_t last_word = 0;
  ASSERT_NO_FATAL_FAILURE(RunOnNodeAThenLoseIt("gone", &last_word));
  Register("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(ExpectPlacedBefore(last_word + kHoldMs));
  EXPECT_TRUE(HasEvent(GetJob("gone"),
                       "chief-0 attempt 0 no longer runs (node-a registered again without it): "
                       "placed again without waiting for the fence"));
}

// After a coordinator restart a node that never registers again counts from the restart: its
// agent heard this coordinator no later.
TEST_F(FencingTest, ANodeThatNeverReturnsAfterARestartCountsFromTheRestart) {
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("orphan", 0, 1)));
  agents_.clear();
  clock_.Advance(milliseconds(60'000));  // down a minute
  Restart();
  const int64_t started = clock_.NowMs();
  AddAgent("node-b", 1);
  ASSERT_TRUE(QuietUntil(started + kHoldMs - 1000));
  auto info = GetJob("orphan");
  EXPECT_NE(Replica(info, "chief-0")->message.find("fencing"), std::string::npos)
      << Replica(info, "chief-0")->message;
  ASSERT_NO_FATAL_FAILURE(ExpectChiefRelaunchedOnNodeBSoon());
}

// An agent's message (or what it quotes of a replica's log) with bytes that are not UTF-8,
// terminal escapes and 4 KiB of text: the job keeps it well-formed, printable and bounded, in its
// message and replica, and across a restart.
// Elastic jobs (coordinator/job_controller.h, "Elastic jobs"): chief-0 and `workers` workers of
// one GPU each, the worker pool elastic down to `min_workers`.
// `cohort suspend` through the coordinator's loop: the suspended job's room goes to a job that
// waited for it, a coordinator restart keeps it SUSPENDED, and once resumed it waits its turn and
// runs again as attempt 1, having spent no restart.
TEST_F(CoordinatorTest, ASuspendedJobGivesItsRoomAwayAndRunsAgainOnceResumed) {
  AddAgent("node-a", 1);
  auto one_gpu = [](const std::string& name) {
    return "name: " + name +
           "\nworker_pools:\n  - role: chief\n    resources: {gpus: 1}\n"
           "    process: {command: [/bin/train]}\n";
  };
  ASSERT_TRUE(Submit(one_gpu("first")).ok());
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  RunAll(TakeLaunchList());
  ASSERT_EQ(GetJob("first").state, JobState::RUNNING);
  ASSERT_TRUE(Submit(one_gpu("second")).ok());
  PumpFew();
  EXPECT_EQ(GetJob("second").state, JobState::QUEUED);

  auto suspend = [&](const std::string& name, bool resume) {
    wire::SuspendJobT req;
    req.name = name;
    req.resume = resume;
    return CallFor<wire::JobInfo>(std::move(req));
  };
  wire::JobInfoT suspended = suspend("first", false);
  EXPECT_EQ(suspended.state, JobState::SUSPENDED);
  EXPECT_EQ(suspended.message, "suspended; `cohort resume first` queues it again");
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  EXPECT_EQ(TakeStops(), std::vector<std::string>{"node-a/chief-0#0"});
  Report("node-a", "first", "chief-0", 0, ReplicaState::STOPPED, 143, 15);
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  auto launched = TakeLaunchList();
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(launched[0].second.job, "second");
  RunAll(launched);

  Restart();
  Register("node-a", 1, {StatusOf("second", "chief-0", 0, ReplicaState::RUNNING)});
  EXPECT_EQ(GetJob("first").state, JobState::SUSPENDED);
  wire::JobInfoT resumed = suspend("first", true);
  EXPECT_EQ(resumed.state, JobState::QUEUED);
  PumpFew();
  EXPECT_TRUE(TakeLaunchList().empty()) << "placed where second runs";
  Report("node-a", "second", "chief-0", 0, ReplicaState::SUCCEEDED, 0);
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  launched = TakeLaunchList();
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(launched[0].second.job, "first");
  EXPECT_EQ(launched[0].second.attempt, 1);
  RunAll(launched);
  wire::JobInfoT after = GetJob("first");
  EXPECT_EQ(after.state, JobState::RUNNING);
  EXPECT_EQ(after.restarts, 0);
  EXPECT_TRUE(HasEvent(after, "resumed: back in the queue after "));
  // Neither verb reaches a job that ended.
  wire::SuspendJobT late;
  late.name = "second";
  Message refused = Call(std::move(late));
  EXPECT_EQ(refused.ErrorStatus().code(), StatusCode::kFailedPrecondition);
}

// scheduling.after through the coordinator's loop: a job after another is not placed while that
// one runs, though there is room, nor after a coordinator restart; once it succeeds the job is
// placed. A job after one unknown or failed is refused at submit, naming it.
TEST_F(CoordinatorTest, AJobAfterAnotherIsPlacedOnceThatOneSucceeds) {
  AddAgent("node-a", 2);
  auto job = [](const std::string& name, const std::string& after) {
    return "name: " + name +
           "\nworker_pools:\n  - role: chief\n    resources: {gpus: 1}\n"
           "    process: {command: [/bin/train]}\n" +
           (after.empty() ? "" : "scheduling: {after: [" + after + "]}\n");
  };
  ASSERT_TRUE(Submit(job("train", "")).ok());
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  RunAll(TakeLaunchList());
  ASSERT_TRUE(Submit(job("eval", "train")).ok());
  PumpFew();
  EXPECT_TRUE(TakeLaunchList().empty()) << "placed before train ended";
  EXPECT_EQ(GetJob("eval").message, "waiting for job train to succeed (scheduling.after)");
  Status unknown = Submit(job("stray", "nobody"));
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("scheduling.after: no job or array named 'nobody'"),
            std::string::npos)
      << unknown.ToString();

  Restart();
  Register("node-a", 2, {StatusOf("train", "chief-0", 0, ReplicaState::RUNNING)});
  PumpFew();
  EXPECT_TRUE(TakeLaunchList().empty()) << "placed before train ended, after a restart";
  Report("node-a", "train", "chief-0", 0, ReplicaState::SUCCEEDED, 0);
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  auto launched = TakeLaunchList();
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(launched[0].second.job, "eval");
  EXPECT_TRUE(HasEvent(GetJob("eval"), "job train succeeded (scheduling.after): it may run now"));
  Report("node-a", "eval", "chief-0", 0, ReplicaState::FAILED, 2);
  PumpFew();
  Status failed_before = Submit(job("report", "eval"));
  EXPECT_EQ(failed_before.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(failed_before.message().find("job eval is FAILED"), std::string::npos)
      << failed_before.ToString();
}

// A job file's one chief with a GPU, for the array tests.
constexpr const char* kOneGpuChief =
    "worker_pools:\n  - role: chief\n    resources: {gpus: 1}\n"
    "    process: {command: [/bin/train]}\n";

// The SubmitJob of array `name` of kOneGpuChief, as `cohort submit --array ARRAY` sends it.
wire::SubmitJobT ArrayRequest(const std::string& name, const std::string& array) {
  wire::SubmitJobT req;
  req.spec_yaml = "name: " + name + "\n" + kOneGpuChief;
  req.array = array;
  return req;
}

// scheduling.array through the coordinator's loop: four tasks with a parallelism of two, room
// for all four: tasks 0 and 1 run, 2 and 3 wait their turn, also across a coordinator restart;
// a task that ends hands its slot to the lowest index waiting. The array's name is taken (by a
// plain job too), a task alone is refused, and a cancel of the array ends every task not ended,
// the waiting ones without their turn.
TEST_F(CoordinatorTest, AnArrayRunsAtMostItsParallelismOfTasksAtOnceLowestIndexFirst) {
  AddAgent("node-a", 4);
  const std::string chief = kOneGpuChief;
  wire::SubmitJobT req = ArrayRequest("sweep", "0-3%2");
  wire::SubmitJobReplyT submitted = CallFor<wire::SubmitJobReply>(wire::SubmitJobT(req));
  EXPECT_EQ(submitted.name, "sweep");
  EXPECT_EQ(submitted.tasks,
            (std::vector<std::string>{"sweep-0", "sweep-1", "sweep-2", "sweep-3"}));
  Pump([&] { return agents_["node-a"].inbox.size() >= 2; });
  PumpFew();
  auto launched = TakeLaunchList();
  ASSERT_EQ(launched.size(), 2u);
  std::map<std::string, wire::LaunchReplicaT> by_job;
  for (auto& [node, l] : launched) by_job[l.job] = l;
  ASSERT_EQ(by_job.count("sweep-0"), 1u);
  ASSERT_EQ(by_job.count("sweep-1"), 1u);
  EXPECT_EQ(Env(by_job["sweep-1"], "COHORT_ARRAY_INDEX"), "1");
  EXPECT_EQ(Env(by_job["sweep-1"], "JOB_COMPLETION_INDEX"), "1");
  EXPECT_EQ(Env(by_job["sweep-0"], "COHORT_ARRAY_COUNT"), "4");
  RunAll(launched);
  EXPECT_EQ(GetJob("sweep-2").state, JobState::QUEUED);
  EXPECT_EQ(GetJob("sweep-2").message,
            "waiting for its turn in array sweep (at most 2 of its 4 tasks at once, "
            "scheduling.array)");
  wire::ListJobsT by_label;
  by_label.selector = "cohort/array=sweep";
  EXPECT_EQ(ListedNames(by_label).size(), 4u);

  Status plain = Submit("name: sweep\n" + chief);
  EXPECT_EQ(plain.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(plain.message().find("an array named 'sweep' already exists"), std::string::npos)
      << plain.ToString();
  Status alone =
      Submit("name: other-1\n" + chief + "scheduling: {array: \"0-1\", array_index: 1}\n");
  EXPECT_EQ(alone.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(alone.message().find("submit the array (scheduling.array) instead"), std::string::npos)
      << alone.ToString();
  Status clash = Submit("name: sweep-2\n" + chief);
  EXPECT_EQ(clash.code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(Submit("name: grid-1\n" + chief).ok());
  req.spec_yaml = "name: grid\n" + chief;
  req.array = "0-2";
  Status taken = Call(wire::SubmitJobT(req)).ErrorStatus();
  EXPECT_EQ(taken.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(taken.message().find("task 1 of array grid would have its name"), std::string::npos)
      << taken.ToString();
  EXPECT_EQ(coordinator_->FindJob("grid-0"), nullptr);
  // 1000 tasks of a 100 KiB job file would store 100 MiB.
  req.spec_yaml =
      "name: huge\nworker_pools:\n  - role: chief\n    process: {command: [/bin/train], "
      "env: {PAD: " +
      std::string(100 << 10, 'x') + "}}\n";
  req.array = "0-999";
  Status huge = Call(wire::SubmitJobT(req)).ErrorStatus();
  EXPECT_EQ(huge.code(), StatusCode::kInvalidArgument) << huge.ToString();
  EXPECT_NE(huge.message().find("1000 tasks would store 97 MiB of job files; at most 64 MiB"),
            std::string::npos)
      << huge.ToString();
  EXPECT_EQ(coordinator_->FindJob("huge-0"), nullptr);
  wire::CancelJobT drop;
  drop.name = "grid-1";
  Call(std::move(drop));
  PumpFew();
  TakeLaunchList();

  Restart();
  Register("node-a", 4, {Running("sweep-0", "chief-0"), Running("sweep-1", "chief-0")});
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(milliseconds(1000));
    PumpFew();
  }
  EXPECT_TRUE(TakeLaunchList().empty()) << "more than 2 tasks at once after a restart";
  EXPECT_EQ(GetJob("sweep-3").state, JobState::QUEUED);

  Report("node-a", "sweep-1", "chief-0", 0, ReplicaState::SUCCEEDED, 0);
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  launched = TakeLaunchList();
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(launched[0].second.job, "sweep-2");
  EXPECT_TRUE(HasEvent(GetJob("sweep-2"), "its turn in array sweep (at most 2 tasks at once"));
  RunAll(launched);
  // `cohort arrays`: the array as its tasks add up now (the task grid-1 is a job of its own).
  wire::ArrayListT arrays = CallFor<wire::ArrayList>(wire::ListArraysT{});
  ASSERT_EQ(arrays.arrays.size(), 1u);
  const wire::ArrayInfoT& sweep = *arrays.arrays[0];
  EXPECT_EQ(sweep.name, "sweep");
  EXPECT_EQ(sweep.state, "ACTIVE");
  EXPECT_EQ(sweep.array, "0-3%2");
  EXPECT_EQ(sweep.tasks, 4);
  EXPECT_EQ(sweep.ended, 1);
  EXPECT_EQ(sweep.in_flight, 2);  // sweep-0 and sweep-2; sweep-3 waits its turn
  ASSERT_EQ(sweep.by_state.size(), 3u);
  EXPECT_EQ(sweep.by_state[0].state(), JobState::QUEUED);
  EXPECT_EQ(sweep.by_state[0].count(), 1);
  EXPECT_EQ(sweep.by_state[1].state(), JobState::RUNNING);
  EXPECT_EQ(sweep.by_state[1].count(), 2);
  EXPECT_EQ(sweep.by_state[2].state(), JobState::SUCCEEDED);
  // `cohort status sweep`: the same summary, and the tasks by index.
  wire::GetArrayT get;
  get.name = "sweep";
  wire::ArrayStatusT one = CallFor<wire::ArrayStatus>(wire::GetArrayT(get));
  ASSERT_NE(one.summary, nullptr);
  EXPECT_EQ(one.summary->state, "ACTIVE");
  EXPECT_EQ(one.summary->ended, 1);
  EXPECT_EQ(one.summary->in_flight, 2);
  ASSERT_EQ(one.tasks.size(), 4u);
  for (size_t i = 0; i < one.tasks.size(); ++i) {
    EXPECT_EQ(one.tasks[i]->name, "sweep-" + std::to_string(i));
  }
  EXPECT_EQ(one.tasks[1]->state, JobState::SUCCEEDED);
  EXPECT_EQ(one.tasks[3]->state, JobState::QUEUED);
  get.name = "grid";  // grid-1 is a job of its own, not a task
  EXPECT_EQ(Call(wire::GetArrayT(get)).ErrorStatus().code(), StatusCode::kNotFound);

  wire::CancelArrayT cancel;
  cancel.name = "sweep";
  wire::JobListT cancelled = CallFor<wire::JobList>(wire::CancelArrayT(cancel));
  ASSERT_EQ(cancelled.jobs.size(), 4u);
  EXPECT_EQ(cancelled.jobs[0]->name, "sweep-0");
  EXPECT_EQ(cancelled.jobs[0]->state, JobState::CANCELLING);
  EXPECT_EQ(cancelled.jobs[1]->state, JobState::SUCCEEDED);
  EXPECT_EQ(cancelled.jobs[2]->state, JobState::CANCELLING);
  EXPECT_EQ(cancelled.jobs[3]->state, JobState::CANCELLED);
  EXPECT_FALSE(HasEvent(GetJob("sweep-3"), "its turn")) << "given a turn while being cancelled";
  EXPECT_TRUE(TakeLaunchList().empty());
  for (const char* task : {"sweep-0", "sweep-2"}) {
    Report("node-a", task, "chief-0", 0, ReplicaState::STOPPED, 143, 15);
  }
  PumpFew();
  EXPECT_EQ(GetJob("sweep-2").state, JobState::CANCELLED);
  arrays = CallFor<wire::ArrayList>(wire::ListArraysT{});
  ASSERT_EQ(arrays.arrays.size(), 1u);
  EXPECT_EQ(arrays.arrays[0]->state, "CANCELLED");  // every task ended, one SUCCEEDED
  EXPECT_EQ(arrays.arrays[0]->in_flight, 0);
  EXPECT_GT(arrays.arrays[0]->end_time_ms, 0);
  // A task deleted alone is gone from the array's indexes too.
  wire::DeleteJobT del;
  del.name = "sweep-1";
  ASSERT_TRUE(Call(std::move(del)).ErrorStatus().ok());
  arrays = CallFor<wire::ArrayList>(wire::ListArraysT{});
  ASSERT_EQ(arrays.arrays.size(), 1u);
  EXPECT_EQ(arrays.arrays[0]->array, "0,2-3%2");
  EXPECT_EQ(arrays.arrays[0]->tasks, 3);
  cancel.name = "nobody";
  EXPECT_EQ(Call(wire::CancelArrayT(cancel)).ErrorStatus().code(), StatusCode::kNotFound);
}

// `cohort suspend|resume|update ARRAY`: every task not ended, in one pass, the owner's alone. A
// suspended task in flight keeps its slot; once resumed, the tasks in flight are placed again and
// the others wait for their turn again.
TEST_F(CoordinatorTest, AnArrayIsSuspendedResumedAndUpdatedTaskByTask) {
  AddAgent("node-a", 4);
  ASSERT_TRUE(Call(ArrayRequest("sweep", "0-3%2"), "alice").As<wire::SubmitJobReply>());
  Pump([&] { return agents_["node-a"].inbox.size() >= 2; });
  RunAll(TakeLaunchList());
  ASSERT_EQ(GetJob("sweep-1").state, JobState::RUNNING);
  Report("node-a", "sweep-1", "chief-0", 0, ReplicaState::SUCCEEDED, 0);
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  RunAll(TakeLaunchList());  // sweep-2 took sweep-1's slot
  ASSERT_EQ(GetJob("sweep-2").state, JobState::RUNNING);

  wire::SuspendArrayT suspend;
  suspend.name = "sweep";
  EXPECT_EQ(Call(wire::SuspendArrayT(suspend), "bob").ErrorStatus().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(GetJob("sweep-0").state, JobState::RUNNING) << "suspended for another user";
  wire::JobListT tasks = CallFor<wire::JobList>(wire::SuspendArrayT(suspend), "alice");
  ASSERT_EQ(tasks.jobs.size(), 4u);
  EXPECT_EQ(tasks.jobs[0]->state, JobState::SUSPENDED);
  EXPECT_EQ(tasks.jobs[1]->state, JobState::SUCCEEDED);  // ended: left as it was
  EXPECT_EQ(tasks.jobs[2]->state, JobState::SUSPENDED);
  EXPECT_EQ(tasks.jobs[3]->state, JobState::SUSPENDED);  // never placed
  EXPECT_TRUE(HasEvent(GetJob("sweep-3"), "array sweep suspended by alice"));
  EXPECT_EQ(TakeStops(),
            (std::vector<std::string>{"node-a/chief-0#0", "node-a/chief-0#0"}));  // 0 and 2
  for (const char* task : {"sweep-0", "sweep-2"}) {
    Report("node-a", task, "chief-0", 0, ReplicaState::STOPPED, 143, 15);
  }
  PumpFew();
  EXPECT_TRUE(TakeLaunchList().empty()) << "a task of a suspended array placed";
  wire::ArrayListT arrays = CallFor<wire::ArrayList>(wire::ListArraysT{});
  ASSERT_EQ(arrays.arrays.size(), 1u);
  EXPECT_EQ(arrays.arrays[0]->in_flight, 2) << "a suspended task gave back its slot";

  wire::UpdateArrayT update;
  update.name = "sweep";
  update.priority = "high";
  update.queue = "nope";
  EXPECT_EQ(Call(wire::UpdateArrayT(update), "alice").ErrorStatus().code(),
            StatusCode::kInvalidArgument);
  update.queue.clear();
  EXPECT_EQ(Call(wire::UpdateArrayT(update), "bob").ErrorStatus().code(),
            StatusCode::kPermissionDenied);
  tasks = CallFor<wire::JobList>(wire::UpdateArrayT(update), "alice");
  ASSERT_EQ(tasks.jobs.size(), 4u);
  EXPECT_EQ(tasks.jobs[0]->priority, "high");
  EXPECT_EQ(tasks.jobs[1]->priority, "normal");  // ended
  EXPECT_EQ(tasks.jobs[3]->priority, "high");
  // `cohort status sweep --spec`: the array's job file, its owner's or an admin's to read.
  wire::GetArrayT get;
  get.name = "sweep";
  get.with_spec = true;
  EXPECT_EQ(Call(wire::GetArrayT(get), "bob").ErrorStatus().code(), StatusCode::kPermissionDenied);
  wire::ArrayStatusT with_file = CallFor<wire::ArrayStatus>(wire::GetArrayT(get), "alice");
  StatusOr<JobSpec> file = ParseJobSpec(with_file.spec_yaml);
  ASSERT_TRUE(file.ok()) << file.status().ToString() << "\n" << with_file.spec_yaml;
  EXPECT_EQ(file->name, "sweep");
  EXPECT_EQ(FormatArraySpec(file->scheduling.array), "0-3%2");
  EXPECT_FALSE(file->scheduling.array.index.has_value());
  get.with_spec = false;
  EXPECT_TRUE(CallFor<wire::ArrayStatus>(wire::GetArrayT(get), "bob").spec_yaml.empty());

  suspend.resume = true;
  tasks = CallFor<wire::JobList>(wire::SuspendArrayT(suspend), "alice");
  ASSERT_EQ(tasks.jobs.size(), 4u);
  EXPECT_EQ(tasks.jobs[3]->state, JobState::QUEUED);
  Pump([&] { return agents_["node-a"].inbox.size() >= 2; });
  PumpFew();
  auto launched = TakeLaunchList();
  std::set<std::string> placed;
  for (const auto& [node, launch] : launched) placed.insert(launch.job);
  EXPECT_EQ(placed, (std::set<std::string>{"sweep-0", "sweep-2"}));
  EXPECT_EQ(GetJob("sweep-3").message,
            "waiting for its turn in array sweep (at most 2 of its 4 tasks at once, "
            "scheduling.array)");
  Restart();  // the priority stays
  EXPECT_EQ(GetJob("sweep-3").priority, "high");
  suspend.name = "nobody";
  EXPECT_EQ(Call(wire::SuspendArrayT(suspend)).ErrorStatus().code(), StatusCode::kNotFound);
}

// A dry run of an array forecasts each task it would let in at once, submitted together: on four
// GPUs, the six one-GPU tasks "0-9%6" lets in would have four start, each on a GPU of its own,
// and two wait; without a parallelism, every task. Nothing is stored.
TEST_F(CoordinatorTest, AnArraysDryRunForecastsEachTaskItWouldLetInAtOnce) {
  clock_.Advance(milliseconds(options_.heartbeat_timeout.count() + 1));  // the fit check is on
  AddAgent("node-a", 2);
  AddAgent("node-b", 2);
  const auto dry_run = [&](const std::string& array) {
    wire::SubmitJobT req = ArrayRequest("sweep", array);
    req.dry_run = true;
    return CallFor<wire::SubmitJobReply>(std::move(req));
  };
  wire::SubmitJobReplyT reply = dry_run("0-9%6");
  EXPECT_EQ(reply.name, "sweep");
  ASSERT_EQ(reply.tasks.size(), 6u);
  ASSERT_EQ(reply.task_dry_runs.size(), 6u);
  std::set<std::pair<std::string, int>> gpus;
  for (size_t i = 0; i < reply.tasks.size(); ++i) {
    EXPECT_EQ(reply.tasks[i], "sweep-" + std::to_string(i));
    const wire::DryRunPlanT& plan = *reply.task_dry_runs[i];
    if (i < 4) {
      EXPECT_EQ(plan.outcome, wire::DryRunOutcome::START) << reply.tasks[i];
      ASSERT_EQ(plan.replicas.size(), 1u);
      ASSERT_EQ(plan.replicas[0]->gpus.size(), 1u);
      gpus.emplace(plan.replicas[0]->node_id, plan.replicas[0]->gpus[0]);
      continue;
    }
    EXPECT_EQ(plan.outcome, wire::DryRunOutcome::WAIT) << reply.tasks[i];
    EXPECT_NE(plan.reason.find("1 replica with 1 GPU"), std::string::npos) << plan.reason;
    EXPECT_EQ(plan.queued_ahead, i) << "the tasks before it, submitted with it";
  }
  EXPECT_EQ(gpus.size(), 4u) << "two tasks forecast on one GPU";
  ASSERT_NE(reply.dry_run, nullptr);  // the first task's, for clients that read it alone
  EXPECT_EQ(reply.dry_run->outcome, wire::DryRunOutcome::START);

  reply = dry_run("0-4");
  ASSERT_EQ(reply.task_dry_runs.size(), 5u);
  EXPECT_EQ(reply.task_dry_runs[3]->outcome, wire::DryRunOutcome::START);
  EXPECT_EQ(reply.task_dry_runs[4]->outcome, wire::DryRunOutcome::WAIT);

  PumpFew();
  EXPECT_TRUE(TakeLaunches().empty());
  EXPECT_TRUE(CallFor<wire::JobList>(wire::ListJobsT{}).jobs.empty());
  EXPECT_TRUE(CallFor<wire::ArrayList>(wire::ListArraysT{}).arrays.empty());
}

// scheduling.after naming an array (Slurm's dependency on an array job): a job after it waits
// until every task has ended, also across a coordinator restart, and fails naming the tasks that
// did not succeed; `ARRAY:failed` then runs. A job after an array that failed already is refused.
TEST_F(CoordinatorTest, AJobAfterAnArrayWaitsForEveryTask) {
  AddAgent("node-a", 4);
  const std::string chief = kOneGpuChief;
  ASSERT_TRUE(Call(ArrayRequest("grid", "0-1")).ErrorStatus().ok());
  ASSERT_TRUE(Submit("name: report\n" + chief + "scheduling: {after: [grid]}\n").ok());
  ASSERT_TRUE(
      Submit("name: fallback\n" + chief + "scheduling: {after: [grid:failed, grid-0]}\n").ok());
  EXPECT_EQ(GetJob("report").message, "waiting for array grid to succeed (scheduling.after)");
  EXPECT_EQ(GetJob("fallback").message,
            "waiting for array grid to fail and job grid-0 to succeed (scheduling.after)");
  Pump([&] { return agents_["node-a"].inbox.size() >= 2; });
  auto launched = TakeLaunchList();
  ASSERT_EQ(launched.size(), 2u);
  RunAll(launched);

  Restart();
  Register("node-a", 4, {Running("grid-0", "chief-0"), Running("grid-1", "chief-0")});
  PumpFew();
  Report("node-a", "grid-0", "chief-0", 0, ReplicaState::SUCCEEDED, 0);
  PumpFew();
  EXPECT_TRUE(TakeLaunchList().empty()) << "placed before every task of grid ended";
  EXPECT_EQ(GetJob("report").state, JobState::QUEUED);
  Report("node-a", "grid-1", "chief-0", 0, ReplicaState::FAILED, 2);
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  const wire::JobInfoT report = GetJob("report");
  EXPECT_EQ(report.state, JobState::FAILED);
  EXPECT_EQ(report.message,
            "array grid, which it runs after (scheduling.after), ended FAILED (grid-1 FAILED)");
  launched = TakeLaunchList();
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(launched[0].second.job, "fallback");
  EXPECT_TRUE(HasEvent(GetJob("fallback"),
                       "array grid ended FAILED (scheduling.after: grid:failed): it may run now"));
  Status late = Submit("name: late\n" + chief + "scheduling: {after: [grid]}\n");
  EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(late.message().find("scheduling.after: array grid is FAILED"), std::string::npos)
      << late.ToString();
}

class ElasticTest : public CoordinatorTest {
 protected:
  static std::string ElasticYaml(const std::string& name, int workers, int min_workers) {
    return "name: " + name +
           "\n"
           "worker_pools:\n"
           "  - role: chief\n"
           "    resources: {gpus: 1, cpus: 1}\n"
           "    process: {command: [/bin/train]}\n"
           "  - role: worker\n"
           "    replicas: " +
           std::to_string(workers) + "\n    min_replicas: " + std::to_string(min_workers) +
           "\n"
           "    resources: {gpus: 1, cpus: 1}\n"
           "    process: {command: [/bin/train]}\n"
           "scheduling: {max_restarts: 3, restart_job_on_worker_restart: true}\n";
  }
  // Advances the clock a second at a time for `seconds`, every node but `silent` heartbeating,
  // reporting each stop it gets as done (exit 143 after SIGTERM).
  void Run(int seconds, const std::string& silent = "") {
    for (int i = 0; i < seconds; ++i) {
      clock_.Advance(milliseconds(1000));
      for (auto& [id, a] : agents_) {
        if (id == silent) continue;
        Heartbeat(id);
        for (auto& stop : a.Take<wire::StopReplica>()) {
          Report(id, "elastic", stop.replica, stop.attempt, ReplicaState::STOPPED, 143, 15);
        }
      }
      PumpFew();
    }
  }
  // The launches so far, by replica; every one reported RUNNING.
  std::map<std::string, wire::LaunchReplicaT> RunLaunched() {
    std::map<std::string, wire::LaunchReplicaT> out;
    auto launches = TakeLaunchList();
    RunAll(launches);
    for (auto& [node, l] : launches) {
      std::string replica = l.replica;
      out[replica] = std::move(l);
    }
    return out;
  }
};

// A job asking for more workers than the cluster has runs, after the settle time, with those
// that fit (never the others in its cluster environment), and grows once a node joins: the whole
// job restarts at full size, spending no restart.
TEST_F(ElasticTest, AJobRunsWithTheWorkersThatFitAndGrowsWhenRoomComes) {
  AddAgent("node-a", 1);
  AddAgent("node-b", 1);
  AddAgent("node-c", 1);
  ASSERT_TRUE(Submit(ElasticYaml("elastic", 3, 1)).ok());
  Run(5);
  ASSERT_TRUE(TakeLaunchList().empty()) << "placed smaller before the settle time";
  EXPECT_EQ(GetJob("elastic").state, JobState::QUEUED);
  Run(7);
  auto launched = RunLaunched();
  ASSERT_EQ(launched.size(), 3u);
  ASSERT_EQ(launched.count("worker-2"), 0u);
  for (const auto& [replica, l] : launched) {
    EXPECT_EQ(Env(l, "WORLD_SIZE"), "3") << replica;
    const std::string spec = Env(l, "CLUSTER_SPEC");  // the three that run, no fourth
    size_t endpoints = 0;
    for (size_t at = spec.find(".local:"); at != std::string::npos;
         at = spec.find(".local:", at + 1))
      ++endpoints;
    EXPECT_EQ(endpoints, 3u) << spec;
  }
  auto info = GetJob("elastic");
  EXPECT_EQ(info.state, JobState::RUNNING) << info.message;
  EXPECT_EQ(Replica(info, "worker-2")->state, ReplicaState::STOPPED);
  EXPECT_NE(Replica(info, "worker-2")->message.find("idle: the job runs without it"),
            std::string::npos)
      << Replica(info, "worker-2")->message;
  EXPECT_TRUE(HasEvent(info, "elastic: 2 of 3 workers (min_replicas 1), no room for worker-2"));
  EXPECT_TRUE(HasEvent(info, "running: all 3 replicas running"));

  // A fourth node: once the chief has run for the settle time, the job grows.
  AddAgent("node-d", 1);
  Run(12);
  info = GetJob("elastic");
  EXPECT_TRUE(HasEvent(info,
                       "elastic: room for 1 more worker on node-d: the job grows to 3 of 3 "
                       "workers and restarts from its checkpoint (no restart spent)"))
      << info.events.back()->message;
  launched = RunLaunched();
  ASSERT_EQ(launched.size(), 4u);
  // One attempt number for the whole job, as torchrun's one restart count: worker-2, idle during
  // attempt 0, runs attempt 1 with the others.
  for (const auto& [replica, l] : launched) {
    EXPECT_EQ(Env(l, "WORLD_SIZE"), "4") << replica;
    EXPECT_EQ(l.attempt, 1) << replica;
  }
  info = GetJob("elastic");
  EXPECT_EQ(info.restarts, 0);
  EXPECT_EQ(info.state, JobState::RUNNING);
  EXPECT_NE(Replica(info, "worker-2")->message.find("idle"), 0u);
}

// The submit check takes an elastic job's fewest workers: more than the cluster holds is fine,
// as long as the chief and min_replicas workers fit.
TEST_F(ElasticTest, TheSubmitCheckTakesTheFewestWorkers) {
  clock_.Advance(milliseconds(options_.heartbeat_timeout.count() + 1));
  AddAgent("node-a", 1);
  AddAgent("node-b", 1);
  EXPECT_TRUE(Submit(ElasticYaml("elastic", 5, 1)).ok());
  Status refused = Submit(ElasticYaml("too_big", 5, 2));
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
}

// A node lost with no spare node: the job restarts (one restart spent) with the workers left,
// instead of waiting in the queue for a node; never below min_replicas.
TEST_F(ElasticTest, ANodeLossWithNoSpareNodeRestartsTheJobSmaller) {
  AddAgent("node-a", 1);
  AddAgent("node-b", 1);
  AddAgent("node-c", 1);
  ASSERT_TRUE(Submit(ElasticYaml("elastic", 2, 1)).ok());
  Pump([&] {
    return !agents_["node-a"].inbox.empty() && !agents_["node-b"].inbox.empty() &&
           !agents_["node-c"].inbox.empty();
  });
  auto launched = RunLaunched();
  ASSERT_EQ(launched.size(), 3u);
  const std::string lost_node = Replica(GetJob("elastic"), "worker-1")->node_id;
  Run(25, lost_node);
  launched = RunLaunched();
  ASSERT_EQ(launched.size(), 2u);
  EXPECT_EQ(launched.count("worker-1"), 0u);
  for (const auto& [replica, l] : launched) EXPECT_EQ(Env(l, "WORLD_SIZE"), "2") << replica;
  auto info = GetJob("elastic");
  EXPECT_EQ(info.restarts, 1);
  EXPECT_TRUE(HasEvent(info, "elastic: 1 of 2 workers (min_replicas 1), no room for worker-1"));

  // Another node lost: the job would go below min_replicas, so it waits whole in the queue.
  const std::string second = Replica(GetJob("elastic"), "worker-0")->node_id;
  ASSERT_NE(second, lost_node);
  agents_.erase(lost_node);
  Run(30, second);
  EXPECT_TRUE(TakeLaunchList().empty());
  info = GetJob("elastic");
  EXPECT_EQ(info.state, JobState::QUEUED) << info.message;
}

TEST_F(CoordinatorTest, AReplicaMessageIsKeptWellFormedPrintableAndBounded) {
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("bytes", 0, 1)));
  wire::ReplicaUpdateT u;
  u.node_id = "node-a";
  u.status =
      std::make_unique<wire::ReplicaStatusT>(StatusOf("bytes", "chief-0", 0, ReplicaState::FAILED));
  u.status->exit_code = 1;
  u.status->message = "log: bad \xFF\xFE bytes\x1B[31m" + std::string(4096, 'x');
  agents_["node-a"].Send(std::move(u));
  PumpFew();
  for (int pass = 0; pass < 2; ++pass) {
    auto info = GetJob("bytes");
    ASSERT_EQ(info.state, JobState::FAILED);
    const std::string& kept = Replica(info, "chief-0")->message;
    EXPECT_EQ(kept.substr(0, 26), "log: bad \xEF\xBF\xBD\xEF\xBF\xBD bytes [31m") << pass;
    EXPECT_EQ(kept.size(), kMaxReplicaMessageBytes) << pass;
    EXPECT_EQ(kept.substr(kept.size() - 3), "...") << pass;
    EXPECT_NE(info.message.find(kept), std::string::npos) << info.message;
    if (pass == 0) Restart();
  }
}

TEST_F(CoordinatorTest, UnknownReplicasReportedAtRegistrationAreStopped) {
  AddAgent("node-a", 1, {Running("never-submitted", "chief-0", 2)});
  PumpFew();
  EXPECT_EQ(TakeStops(), (std::vector<std::string>{"node-a/chief-0#2"}));
}

// An agent reports the ends it keeps (agent/handoff.h, the ends file) at every registration; one
// of an earlier job of the same name, deleted since, is not the current job's: by its create time
// it is told apart, and the current attempt, not reported, is taken for gone (placed again),
// where the old end would have failed the job. Its own end, with its create time, does.
TEST_F(CoordinatorTest, AnEndOfAnEarlierJobOfTheSameNameIsNotTakenForTheCurrentOnes) {
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("again", 0, 1)));
  const int64_t created = GetJob("again").create_time_ms;
  ASSERT_GT(created, 0);
  auto ended = [](int attempt, int64_t job_created_ms) {
    wire::ReplicaStatusT s = StatusOf("again", "chief-0", attempt, ReplicaState::FAILED);
    s.exit_code = 1;
    s.job_created_ms = job_created_ms;
    return s;
  };

  Register("node-a", 1, {ended(0, created - 60'000)});
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.count("node-a/chief-0"), 1u);
  EXPECT_EQ(launches["node-a/chief-0"].attempt, 1);
  RunAll(launches);
  EXPECT_EQ(GetJob("again").state, JobState::RUNNING);

  Register("node-a", 1, {ended(1, created)});
  const wire::JobInfoT info = GetJob("again");
  EXPECT_EQ(info.state, JobState::FAILED) << info.message;
  EXPECT_EQ(Replica(info, "chief-0")->exit_code, 1);
}

// ---- the state store under the coordinator --------------------------------------------------

// The state dir on a 2 MiB tmpfs, filled up: a failed commit refuses the pass's requests, the
// coordinator keeps serving reads, and once space is freed nothing accepted is lost. Mounting
// needs root (CAP_SYS_ADMIN); elsewhere the test skips, saying so.
class FullDiskTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    if (::geteuid() != 0)
      GTEST_SKIP() << "mounting a size-limited tmpfs for the state dir needs root";
    mount_ = dir_ / "small";
    fs::create_directories(mount_);
    if (::mount("tmpfs", mount_.c_str(), "tmpfs", 0, "size=2m") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs on " << mount_ << ": " << std::strerror(errno);
    }
    mounted_ = true;
    options_.state_dir = mount_.string();
    Restart();
  }
  void TearDown() override {
    agents_.clear();
    client_ = Peer{};
    coordinator_.reset();
    if (mounted_) ::umount2(mount_.c_str(), MNT_DETACH);
    CoordinatorTest::TearDown();
  }
  // Writes a file until the filesystem is full.
  void Fill() {
    std::ofstream out(mount_ / "filler", std::ios::binary | std::ios::app);
    std::string chunk(4096, 'f');
    for (int i = 0; i < 1024 && out; ++i) out.write(chunk.data(), chunk.size()), out.flush();
  }
  void Free() { fs::remove(mount_ / "filler"); }

  fs::path mount_;
  bool mounted_ = false;
};

TEST_F(FullDiskTest, SubmitsBeyondAFullDiskAreRefusedReadsAreServedAndNothingAcceptedIsLost) {
  AddAgent("node-a", 1);
  ASSERT_TRUE(Submit(JobYaml("first", 0, 1)).ok());
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.size(), 1u);
  RunAll(launches);
  ASSERT_EQ(GetJob("first").state, JobState::RUNNING);

  Fill();
  std::vector<std::string> accepted, refused;
  for (int i = 0; i < 200 && refused.size() < 3; ++i) {
    std::string name = "q" + std::to_string(i);
    Status s = Submit(JobYaml(name, 0, 1));
    if (s.ok()) {
      accepted.push_back(name);
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
    EXPECT_NE(s.message().find("disk is full"), std::string::npos) << s.ToString();
    refused.push_back(name);
  }
  ASSERT_EQ(refused.size(), 3u) << "the 2 MiB filesystem never filled up";
  EXPECT_GT(coordinator_->stats().rolled_back, 0u);

  // Reads are served, and a refused job does not exist.
  EXPECT_EQ(GetJob("first").state, JobState::RUNNING);
  for (const auto& name : accepted) EXPECT_EQ(GetJob(name).state, JobState::QUEUED) << name;
  wire::GetJobT get;
  get.name = refused[0];
  EXPECT_EQ(Call(std::move(get)).ErrorStatus().code(), StatusCode::kNotFound);
  Message list = Call(wire::ListJobsT{});
  ASSERT_NE(list.As<wire::JobList>(), nullptr) << list.ErrorStatus().ToString();
  EXPECT_EQ(list.As<wire::JobList>()->jobs()->size(), 1 + accepted.size());

  // An agent's update that cannot be stored is not acked: it is refused for now, naming the
  // cause (the agent resends it); the job stays as stored.
  const auto& l = launches.begin()->second;
  agents_["node-a"].inbox.clear();
  Report("node-a", l.job, l.replica, l.attempt, ReplicaState::SUCCEEDED, 0);
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  ASSERT_FALSE(agents_["node-a"].inbox.empty());
  Status refusal = agents_["node-a"].inbox.front().ErrorStatus();
  EXPECT_EQ(refusal.code(), StatusCode::kResourceExhausted) << refusal.ToString();
  EXPECT_NE(refusal.message().find("disk is full"), std::string::npos) << refusal.ToString();
  EXPECT_NE(refusal.message().find("send it again later"), std::string::npos) << refusal.ToString();
  EXPECT_EQ(GetJob("first").state, JobState::RUNNING);

  // Space comes back: the agent's resent update is taken, new submits are taken.
  Free();
  agents_["node-a"].inbox.clear();
  Report("node-a", l.job, l.replica, l.attempt, ReplicaState::SUCCEEDED, 0);
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  PumpFew();
  EXPECT_EQ(GetJob("first").state, JobState::SUCCEEDED);
  ASSERT_TRUE(Submit(JobYaml("after", 0, 1)).ok());
  accepted.push_back("after");

  // Everything accepted survives a restart; nothing refused appears.
  Restart();
  EXPECT_EQ(coordinator_->job_count(), 1 + accepted.size());
  EXPECT_EQ(GetJob("first").state, JobState::SUCCEEDED);
  for (const auto& name : accepted) EXPECT_NE(coordinator_->FindJob(name), nullptr) << name;
  for (const auto& name : refused) EXPECT_EQ(coordinator_->FindJob(name), nullptr) << name;
}

TEST_F(FullDiskTest, AReadSharingAPassWithARefusedWriteIsAnsweredFromWhatIsStored) {
  ASSERT_TRUE(Submit(JobYaml("kept", 0, 0)).ok());
  Fill();
  // The submit, then reads, all waiting before the loop's next pass: one pass handles them all,
  // and its commit fails.
  wire::SubmitJobT submit;
  submit.spec_yaml = JobYaml("refused", 0, 0);
  uint64_t submit_id = client_.Send(std::move(submit));
  wire::GetJobT get_kept;
  get_kept.name = "kept";
  uint64_t kept_id = client_.Send(std::move(get_kept));
  wire::GetJobT get_refused;
  get_refused.name = "refused";
  uint64_t refused_id = client_.Send(std::move(get_refused));
  uint64_t list_id = client_.Send(wire::ListJobsT{});
  uint64_t rolled_back = coordinator_->stats().rolled_back;
  std::map<uint64_t, Message> replies;
  Pump([&] {
    while (!client_.inbox.empty()) {
      uint64_t id = client_.inbox.front().request_id();
      replies.emplace(id, std::move(client_.inbox.front()));
      client_.inbox.pop_front();
    }
    return replies.size() == 4;
  });
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(coordinator_->stats().rolled_back, rolled_back + 1) << "not one pass";

  Status refusal = replies.at(submit_id).ErrorStatus();
  EXPECT_EQ(refusal.code(), StatusCode::kResourceExhausted) << refusal.ToString();
  // The reads are answered, from the store: the submit of their pass never happened.
  const auto* kept = replies.at(kept_id).As<wire::JobInfo>();
  ASSERT_NE(kept, nullptr) << replies.at(kept_id).ErrorStatus().ToString();
  EXPECT_EQ(kept->name()->str(), "kept");
  EXPECT_EQ(replies.at(refused_id).ErrorStatus().code(), StatusCode::kNotFound)
      << replies.at(refused_id).ErrorStatus().ToString();
  const auto* list = replies.at(list_id).As<wire::JobList>();
  ASSERT_NE(list, nullptr) << replies.at(list_id).ErrorStatus().ToString();
  EXPECT_EQ(list->jobs()->size(), 1u);
}

TEST_F(FullDiskTest, ANodeLostWhileNothingCanBeStoredIsLostOnceThereIsRoom) {
  AddAgent("node-a", 1);
  ASSERT_TRUE(Submit(JobYaml("moving", 0, 1)).ok());
  auto launches = TakeLaunches();
  ASSERT_EQ(launches.count("node-a/chief-0"), 1u);
  RunAll(launches);
  AddAgent("node-b", 1);

  // node-a falls silent past the heartbeat timeout while node-b heartbeats: the loss, the
  // restart and the launch on node-b cannot be stored, so none of them happens yet.
  Fill();
  uint64_t before = coordinator_->stats().rolled_back;
  for (int i = 0; i < 14; ++i) {
    clock_.Advance(milliseconds(1000));
    Heartbeat("node-b");
    PumpFew();
  }
  EXPECT_GT(coordinator_->stats().rolled_back, before);
  EXPECT_TRUE(TakeLaunchList().empty());
  // Reads are answered meanwhile, with what is stored.
  auto info = GetJob("moving");
  ASSERT_NE(Replica(info, "chief-0"), nullptr);
  EXPECT_EQ(Replica(info, "chief-0")->state, ReplicaState::RUNNING);
  EXPECT_EQ(Replica(info, "chief-0")->node_id, "node-a");

  // Room again: at the timers' next retry the loss is applied again and stored, and the replica
  // starts on node-b.
  Free();
  clock_.Advance(milliseconds(1000));
  Heartbeat("node-b");
  PumpFew();
  auto relaunched = TakeLaunches();
  ASSERT_EQ(relaunched.count("node-b/chief-0"), 1u);
  EXPECT_EQ(relaunched["node-b/chief-0"].attempt, 1);
  EXPECT_TRUE(HasEvent(GetJob("moving"), "node-a")) << "no event names the lost node";
  Restart();
  EXPECT_EQ(Replica(GetJob("moving"), "chief-0")->node_id, "node-b");
}

TEST_F(FullDiskTest, ACoordinatorStartsOnAFullDiskAndServesReads) {
  ASSERT_TRUE(Submit(JobYaml("kept", 0, 0)).ok());
  Fill();
  Restart();  // its state is read without any free space
  EXPECT_EQ(GetJob("kept").state, JobState::QUEUED);
  Status s = Submit(JobYaml("refused", 0, 0));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  Free();
  ASSERT_TRUE(Submit(JobYaml("taken", 0, 0)).ok());
  Restart();
  EXPECT_EQ(coordinator_->job_count(), 2u);
  EXPECT_EQ(coordinator_->FindJob("refused"), nullptr);
}

TEST_F(CoordinatorTest, AJournalOfAnEarlierVersionIsImportedAndItsRunningJobReconciles) {
  // The journal an earlier coordinator left: one job running on node-a, one queued.
  coordinator_.reset();
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  auto make = [](const std::string& name, uint64_t seq) {
    JobRecord j;
    j.seq = seq;
    j.name = name;
    j.spec_yaml = JobYaml(name, 0, 1);
    j.spec = *ParseJobSpec(j.spec_yaml);
    j.replicas = MakeReplicas(j.spec);
    j.create_time_ms = j.queued_since_ms = 1;
    j.events.push_back({1, "submitted (1 replica)"});
    return j;
  };
  JobRecord running = make("was_running", 1), queued = make("was_queued", 2);
  running.state = JobState::RUNNING;
  running.start_time_ms = 2;
  ReplicaRecord& r = running.replicas[0];
  r.state = ReplicaState::RUNNING;
  r.node_id = r.last_node = "node-a";
  r.gpus = {0};
  r.port = 25001;
  r.launched = true;
  std::ofstream(dir_ / "journal", std::ios::binary)
      << JournalFrame(JobToJson(running)) << JournalFrame(JobToJson(queued));

  Restart();
  EXPECT_EQ(coordinator_->job_count(), 2u);
  EXPECT_TRUE(fs::exists(dir_ / "journal.pre-sqlite"));
  EXPECT_FALSE(fs::exists(dir_ / "journal"));
  // The agent comes back with the replica: nothing is stopped or launched again.
  AddAgent("node-a", 1, {Running("was_running", "chief-0")});
  PumpFew();
  EXPECT_TRUE(TakeStops().empty());
  EXPECT_TRUE(TakeLaunchList().empty());
  EXPECT_EQ(GetJob("was_running").state, JobState::RUNNING);
  Restart();
  EXPECT_EQ(coordinator_->job_count(), 2u);
  EXPECT_EQ(GetJob("was_queued").state, JobState::QUEUED);
}

}  // namespace
}  // namespace cohort::coordinator

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;

// A fresh temporary directory with the key folders clients/ and agents/.
fs::path FreshKeyDir(const std::string& prefix) {
  fs::path dir = fs::temp_directory_path() / (prefix + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "clients");
  fs::create_directories(dir / "agents");
  return dir;
}

// A coordinator on loopback ports that speaks CURVE with its key and the listed keys in `dir`.
CoordinatorOptions CurveOptions(const fs::path& dir) {
  CoordinatorOptions options;
  options.client_endpoint = "tcp://127.0.0.1:0";
  options.agent_endpoint = "tcp://127.0.0.1:0";
  options.state_dir = (dir / "state").string();
  options.insecure = false;
  options.curve_key = (dir / "coordinator.key").string();
  options.client_keys_dir = (dir / "clients").string();
  options.agent_keys_dir = (dir / "agents").string();
  return options;
}

// A dealer that speaks CURVE with `keys` to the server whose public key is `server_public_key`.
StatusOr<DealerSocket> CurveDealer(zmq::context_t& context, const std::string& endpoint,
                                   const std::string& identity, const CurveKeyPair& keys,
                                   const std::string& server_public_key) {
  SocketSecurity sec;
  sec.insecure = false;
  sec.keys = keys;
  sec.server_public_key = server_public_key;
  return DealerSocket::Connect(context, endpoint, identity, sec);
}

// Steps the coordinator until `d` receives a Reply (true) or 2 s pass (false: never answered).
template <typename Reply>
bool AnswersWithin2s(Coordinator& coordinator, DealerSocket& d) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    EXPECT_TRUE(coordinator.RunOnce(milliseconds(5)).ok());
    auto m = d.Receive(milliseconds(5));
    if (m.ok() && m->has_value() && (*m)->As<Reply>()) return true;
  }
  return false;
}

// Without --insecure the endpoints speak CURVE and admit only listed client/agent keys.
// The stats' round figure is the median of the recent rounds, not the last one alone.
TEST(CoordinatorStatsTest, TheRecentRoundsMedianIsOfTheLastSixteen) {
  CoordinatorStats stats;
  EXPECT_EQ(stats.RecentRoundCpuMedianUs(), 0);
  auto round = [&](int64_t cpu_us) { stats.NoteRound(cpu_us, cpu_us, 0); };
  round(30);
  round(10);
  round(20);
  EXPECT_EQ(stats.RecentRoundCpuMedianUs(), 20);
  for (int i = 0; i < 16; ++i) round(1000 + i);  // the first three are overwritten
  EXPECT_EQ(stats.RecentRoundCpuMedianUs(), 1008);
}

TEST(CoordinatorCurveTest, OnlyListedClientAndAgentKeysAreServed) {
  fs::path dir = FreshKeyDir("cohort-coord-curve-");
  auto server = GenerateCurveKeyPair();
  auto good = GenerateCurveKeyPair();
  auto bad = GenerateCurveKeyPair();
  ASSERT_TRUE(server.ok() && good.ok() && bad.ok());
  ASSERT_TRUE(WriteCurveKeyFiles(dir.string(), "coordinator", *server).ok());
  ASSERT_TRUE(WriteCurveKeyFiles((dir / "clients").string(), "alice", *good).ok());

  zmq::context_t context(1);
  ManualClock clock;
  auto c = Coordinator::Create(CurveOptions(dir), &clock, &context);
  ASSERT_TRUE(c.ok()) << c.status().ToString();

  auto call = [&](const CurveKeyPair& keys) -> bool {
    auto d = CurveDealer(context, (*c)->client_endpoint(), "", keys, server->public_key);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    uint64_t id = d->NextRequestId();
    EXPECT_TRUE(d->Send(Encode(id, wire::ListNodesT{})).ok());
    return AnswersWithin2s<wire::NodeList>(**c, *d);
  };
  EXPECT_TRUE(call(*good));
  EXPECT_FALSE(call(*bad));

  // The agent endpoint admits only keys in agents/: a listed agent registers; a client key
  // (listed for clients only) and an unknown key never get an answer there.
  auto node_key = GenerateCurveKeyPair();
  ASSERT_TRUE(node_key.ok());
  ASSERT_TRUE(WriteCurveKeyFiles((dir / "agents").string(), "node1", *node_key).ok());
  auto registers = [&](const CurveKeyPair& keys, const std::string& node) -> bool {
    auto d = CurveDealer(context, (*c)->agent_endpoint(), node, keys, server->public_key);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    wire::RegisterAgentT reg;
    reg.node_id = node;
    reg.address = "127.0.0.1";
    reg.cpus = 4;
    EXPECT_TRUE(d->Send(Encode(d->NextRequestId(), std::move(reg))).ok());
    return AnswersWithin2s<wire::RegisterAgentReply>(**c, *d);
  };
  EXPECT_TRUE(registers(*node_key, "node1"));
  EXPECT_FALSE(registers(*good, "node2"));
  EXPECT_FALSE(registers(*bad, "node3"));
  c->reset();
  fs::remove_all(dir);
}

// With CURVE an agent key speaks for its own node only (agents/<node-id>.pub), and a key file
// removed ends that node's session at the next key check (one heartbeat interval).
TEST(CoordinatorCurveTest, AnAgentKeySpeaksOnlyForItsNodeAndARemovedKeyEndsItsSession) {
  fs::path dir = FreshKeyDir("cohort-coord-ids-");
  auto server = GenerateCurveKeyPair();
  auto alice = GenerateCurveKeyPair();
  ASSERT_TRUE(server.ok() && alice.ok());
  ASSERT_TRUE(WriteCurveKeyFiles(dir.string(), "coordinator", *server).ok());
  ASSERT_TRUE(WriteCurveKeyFiles((dir / "clients").string(), "alice", *alice).ok());
  std::map<std::string, CurveKeyPair> node_keys;
  for (const std::string node : {"node-a", "node-b"}) {
    node_keys[node] = *GenerateCurveKeyPair();
    ASSERT_TRUE(WriteCurveKeyFiles((dir / "agents").string(), node, node_keys[node]).ok());
  }

  zmq::context_t context(1);
  ManualClock clock;
  CoordinatorOptions options = CurveOptions(dir);
  options.port_min = 25000;
  options.port_max = 25999;
  auto c = Coordinator::Create(options, &clock, &context);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Coordinator& coordinator = **c;

  auto connect = [&](const std::string& endpoint, const CurveKeyPair& keys,
                     const std::string& identity) {
    auto d = CurveDealer(context, endpoint, identity, keys, server->public_key);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return std::make_unique<DealerSocket>(std::move(*d));
  };
  // Sends `body` and steps the loop until the reply to it arrives; other messages are kept.
  std::map<DealerSocket*, std::vector<Message>> inbox;
  auto call = [&](DealerSocket& d, auto body) -> std::optional<Message> {
    uint64_t id = d.NextRequestId();
    EXPECT_TRUE(d.Send(Encode(id, std::move(body))).ok());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      EXPECT_TRUE(coordinator.RunOnce(milliseconds(5)).ok());
      auto m = d.Receive(milliseconds(5));
      if (!m.ok() || !m->has_value()) continue;
      if ((*m)->request_id() == id) return std::move(**m);
      inbox[&d].push_back(std::move(**m));
    }
    return std::nullopt;
  };
  std::map<std::string, std::unique_ptr<DealerSocket>> agents;
  milliseconds heartbeat_interval{0};  // as the coordinator tells its agents
  for (const auto& [node, keys] : node_keys) {
    agents[node] = connect(coordinator.agent_endpoint(), keys, node);
    wire::RegisterAgentT reg;
    reg.node_id = node;
    reg.cpus = 4;
    auto g = std::make_unique<wire::GpuInfoT>();
    g->index = 0;
    reg.gpus.push_back(std::move(g));
    auto reply = call(*agents[node], std::move(reg));
    ASSERT_TRUE(reply && reply->As<wire::RegisterAgentReply>()) << node;
    heartbeat_interval =
        milliseconds(reply->As<wire::RegisterAgentReply>()->heartbeat_interval_ms());
  }
  ASSERT_GT(heartbeat_interval.count(), 0);
  // A job with one replica on each node, both running.
  auto client = connect(coordinator.client_endpoint(), *alice, "");
  wire::SubmitJobT submit;
  submit.spec_yaml = JobYaml("pair", 1, 1);
  ASSERT_TRUE(call(*client, std::move(submit))->As<wire::SubmitJobReply>());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(coordinator.RunOnce(milliseconds(5)).ok());
  const JobRecord* job = coordinator.FindJob("pair");
  ASSERT_NE(job, nullptr);
  ASSERT_EQ(job->state, JobState::PENDING);
  auto status_of = [&](const ReplicaRecord& r, ReplicaState state, int exit_code) {
    wire::ReplicaUpdateT u;
    u.node_id = r.node_id;
    u.status = std::make_unique<wire::ReplicaStatusT>(StatusOf("pair", r.name, r.attempt, state));
    u.status->exit_code = exit_code;
    return u;
  };
  for (const ReplicaRecord& r : job->replicas) {
    ASSERT_TRUE(call(*agents[r.node_id], status_of(r, ReplicaState::RUNNING, -1))->As<wire::Ack>());
  }
  ASSERT_EQ(job->state, JobState::RUNNING);

  // node-a's key reports the chief on node-b SUCCEEDED: refused, the job keeps running.
  const ReplicaRecord& chief = job->replicas[0];
  std::string other = chief.node_id == "node-a" ? "node-b" : "node-a";
  auto spoof = call(*agents[other], status_of(chief, ReplicaState::SUCCEEDED, 0));
  ASSERT_TRUE(spoof.has_value());
  EXPECT_EQ(spoof->ErrorStatus().code(), StatusCode::kPermissionDenied)
      << spoof->ErrorStatus().ToString();
  EXPECT_NE(spoof->ErrorStatus().message().find("listed as node '" + other + "'"),
            std::string::npos)
      << spoof->ErrorStatus().ToString();
  EXPECT_EQ(job->state, JobState::RUNNING);
  wire::HeartbeatT hb;
  hb.node_id = chief.node_id;
  EXPECT_EQ(call(*agents[other], std::move(hb))->ErrorStatus().code(),
            StatusCode::kPermissionDenied);

  // The chief's node key and alice's client key are removed: once the coordinator's clock has
  // moved one heartbeat interval on, the node is LOST, its routing id forgotten, and both keys'
  // messages are refused on their live connections. (The clock is the test's: the interval is
  // the configured one, exactly, whatever the machine's speed.)
  std::string revoked = chief.node_id;
  fs::remove(dir / "agents" / (revoked + ".pub"));
  fs::remove(dir / "agents" / (revoked + ".key"));
  fs::remove(dir / "clients" / "alice.pub");
  fs::remove(dir / "clients" / "alice.key");
  clock.Advance(heartbeat_interval);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(coordinator.RunOnce(milliseconds(5)).ok());
  ASSERT_NE(coordinator.FindNode(revoked), nullptr);
  EXPECT_FALSE(coordinator.FindNode(revoked)->ready);
  EXPECT_EQ(coordinator.FindNode(revoked)->peer, "");
  EXPECT_TRUE(coordinator.FindNode(other)->ready);
  EXPECT_NE(coordinator.FindNode(other)->peer, "");
  auto listed = call(*client, wire::ListJobsT{});
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->ErrorStatus().code(), StatusCode::kUnauthenticated)
      << listed->ErrorStatus().ToString();
  bool noted = false;
  for (const auto& e : job->events) noted |= e.message.find("key was removed") != std::string::npos;
  EXPECT_TRUE(noted);
  wire::HeartbeatT again;
  again.node_id = revoked;
  auto refused = call(*agents[revoked], std::move(again));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->ErrorStatus().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(refused->ErrorStatus().message().find("no longer listed"), std::string::npos);

  agents.clear();
  client.reset();
  c->reset();
  fs::remove_all(dir);
}

}  // namespace

// ---- studies --------------------------------------------------------------------------------

class StudyTest : public CoordinatorTest {
 protected:
  Message SubmitStudy(const std::string& yaml) {
    wire::SubmitStudyT req;
    req.spec_yaml = yaml;
    return Call(std::move(req));
  }
  wire::StudyInfoT GetStudy(const std::string& name) {
    wire::GetStudyT req;
    req.name = name;
    return CallFor<wire::StudyInfo>(std::move(req));
  }
  void Measure(const std::string& job, int64_t step, double score) {
    wire::TrialMeasurementT m;
    m.job = job;
    m.step = step;
    auto kv = std::make_unique<wire::KeyValueT>();
    kv->key = "score";
    kv->value = std::to_string(score);
    m.metrics.push_back(std::move(kv));
    agents_["node-a"].Send(std::move(m));
    PumpFew();
  }
  // Jobs of the study not yet ended, per the coordinator.
  int RunningTrialJobs(const std::string& study) {
    int n = 0;
    for (const auto& t : GetStudy(study).trials) {
      const JobRecord* job = coordinator_->FindJob(t->job);
      if (job != nullptr && !job->finished()) ++n;
    }
    return n;
  }
  static std::string Arg(const wire::LaunchReplicaT& l, const std::string& prefix) {
    for (const auto& a : l.command) {
      if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
    }
    return "<none>";
  }
  // Waits for the launches of `n` trial jobs on node-a, reports them RUNNING, returns them.
  std::vector<wire::LaunchReplicaT> TakeTrialLaunches(size_t n) {
    Pump([&] { return agents_["node-a"].inbox.size() >= n; });
    std::vector<wire::LaunchReplicaT> out;
    for (auto& [node, l] : TakeLaunchList()) out.push_back(std::move(l));
    EXPECT_EQ(out.size(), n);
    for (const auto& l : out) Report("node-a", l.job, l.replica, l.attempt, ReplicaState::RUNNING);
    return out;
  }
};

TEST_F(StudyTest, TrialsRunAsJobsNeverMoreThanParallelTrialsAndTheBestIsFound) {
  AddAgent("node-a", 0);
  Message reply = SubmitStudy(StudyYaml("grid", 5, 2));
  ASSERT_NE(reply.As<wire::StudyInfo>(), nullptr) << reply.ErrorStatus().ToString();
  std::deque<wire::LaunchReplicaT> running;
  std::set<std::string> seen_x;
  int most_running = 0;
  for (int round = 0; round < 10 && GetStudy("grid").state == "ACTIVE"; ++round) {
    PumpFew();
    for (auto& [node, l] : TakeLaunchList()) {
      std::string x = Arg(l, "--x=");
      EXPECT_TRUE(seen_x.insert(x).second) << "x=" << x << " twice";
      std::string trial = Env(l, "CLOUD_ML_TRIAL_ID");
      EXPECT_EQ(l.job, "grid_trial_" + trial);
      EXPECT_NE(Env(l, "CLOUD_ML_HP_METRIC_FILE").find("/grid/" + trial + "/"), std::string::npos)
          << Env(l, "CLOUD_ML_HP_METRIC_FILE");
      Report("node-a", l.job, l.replica, l.attempt, ReplicaState::RUNNING);
      running.push_back(std::move(l));
    }
    most_running = std::max(most_running, RunningTrialJobs("grid"));
    ASSERT_FALSE(running.empty()) << "an active study with no trial running";
    // The oldest trial reports score = x and succeeds; x=5 reports nothing (INFEASIBLE).
    wire::LaunchReplicaT oldest = std::move(running.front());
    running.pop_front();
    std::string x = Arg(oldest, "--x=");
    if (x != "5") Measure(oldest.job, 1, std::stod(x));
    Report("node-a", oldest.job, "chief-0", 0, ReplicaState::SUCCEEDED, 0);
    Measure(oldest.job, 2, 100);  // after its end: ignored
  }
  EXPECT_EQ(most_running, 2);
  Pump([&] { return GetStudy("grid").state != "ACTIVE"; }, 50);
  auto info = GetStudy("grid");
  EXPECT_EQ(info.state, "SUCCEEDED") << info.message;
  ASSERT_EQ(info.trials.size(), 5u);
  EXPECT_EQ(seen_x, (std::set<std::string>{"1", "2", "3", "4", "5"}));
  // x=5 ended without a measurement: INFEASIBLE; the best is x=4.
  for (const auto& t : info.trials) {
    EXPECT_EQ(t->state, t->parameters[0]->value == "5" ? "INFEASIBLE" : "SUCCEEDED") << t->id;
  }
  const wire::TrialInfoT* best = nullptr;
  for (const auto& t : info.trials) {
    if (t->id == info.best_trial) best = t.get();
  }
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->parameters[0]->value, "4");
  EXPECT_EQ(RunningTrialJobs("grid"), 0);
}

TEST_F(StudyTest, InvalidAndDuplicateStudiesAreRefusedNamingTheField) {
  Message bad = SubmitStudy(StudyYaml("bad", 0, 1));
  EXPECT_EQ(bad.ErrorStatus().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.ErrorStatus().message().find("max_trials"), std::string::npos)
      << bad.ErrorStatus().message();
  ASSERT_NE(SubmitStudy(StudyYaml("twice", 1, 1)).As<wire::StudyInfo>(), nullptr);
  EXPECT_EQ(SubmitStudy(StudyYaml("twice", 1, 1)).ErrorStatus().code(), StatusCode::kAlreadyExists);
  wire::GetStudyT get;
  get.name = "nope";
  EXPECT_EQ(Call(std::move(get)).ErrorStatus().code(), StatusCode::kNotFound);
}

TEST_F(StudyTest, FailedTrialsBeyondTheLimitFailTheStudyAndCancelTheRest) {
  AddAgent("node-a", 0);
  ASSERT_NE(SubmitStudy(StudyYaml("flaky", 6, 3, "max_failed_trials: 2\n")).As<wire::StudyInfo>(),
            nullptr);
  auto launches = TakeTrialLaunches(3);
  Report("node-a", launches[0].job, "chief-0", 0, ReplicaState::FAILED, 1);
  auto next = TakeTrialLaunches(1);  // one failure: the study goes on
  Report("node-a", launches[1].job, "chief-0", 0, ReplicaState::FAILED, 1);
  Pump([&] { return GetStudy("flaky").state == "FAILED"; }, 50);
  auto info = GetStudy("flaky");
  EXPECT_EQ(info.state, "FAILED");
  EXPECT_NE(info.message.find("max_failed_trials"), std::string::npos) << info.message;
  // The trials still running are stopped, and no new one starts.
  Pump([&] { return TakeStops().size() >= 2; }, 50);
  EXPECT_EQ(coordinator_->FindJob(launches[2].job)->state, JobState::CANCELLING);
  EXPECT_EQ(coordinator_->FindJob(next[0].job)->state, JobState::CANCELLING);
  EXPECT_TRUE(TakeLaunchList().empty());
  EXPECT_EQ(info.trials.size(), 4u);
}

TEST_F(StudyTest, MedianRuleStopsAClearlyBadTrial) {
  AddAgent("node-a", 0);
  ASSERT_NE(SubmitStudy(StudyYaml("median", 4, 1,
                                  "early_stopping: {median: true, min_steps: 2, min_trials: 2}\n"))
                .As<wire::StudyInfo>(),
            nullptr);
  // Two good trials complete with scores 0.8..0.9 at steps 1-3.
  for (int i = 0; i < 2; ++i) {
    auto l = TakeTrialLaunches(1);
    for (int step = 1; step <= 3; ++step) Measure(l[0].job, step, 0.8 + 0.05 * (step - 1));
    Report("node-a", l[0].job, "chief-0", 0, ReplicaState::SUCCEEDED, 0);
  }
  // The third is far below the median of their running averages: stopped after min_steps.
  auto bad = TakeTrialLaunches(1);
  Measure(bad[0].job, 1, 0.1);
  EXPECT_EQ(coordinator_->FindJob(bad[0].job)->state, JobState::RUNNING);
  Measure(bad[0].job, 2, 0.1);
  Pump([&] { return !TakeStops().empty(); }, 50);
  EXPECT_EQ(coordinator_->FindJob(bad[0].job)->state, JobState::CANCELLING);
  Report("node-a", bad[0].job, "chief-0", 0, ReplicaState::STOPPED, -1, 15);
  auto info = GetStudy("median");
  ASSERT_EQ(info.trials.size(), 4u);  // the fourth trial started when the third ended
  EXPECT_EQ(info.trials[2]->state, "STOPPED");
  EXPECT_NE(info.trials[2]->message.find("median"), std::string::npos) << info.trials[2]->message;
}

TEST_F(StudyTest, StudySurvivesACoordinatorRestart) {
  AddAgent("node-a", 0);
  ASSERT_NE(SubmitStudy(StudyYaml("durable", 4, 2)).As<wire::StudyInfo>(), nullptr);
  auto first = TakeTrialLaunches(2);
  Measure(first[0].job, 1, 3.5);
  Report("node-a", first[0].job, "chief-0", 0, ReplicaState::SUCCEEDED, 0);
  auto third = TakeTrialLaunches(1);
  Measure(first[1].job, 1, 1.5);  // trial 2 still runs with a measurement
  auto before = GetStudy("durable");

  Restart();
  auto after = GetStudy("durable");
  EXPECT_EQ(after.state, "ACTIVE");
  ASSERT_EQ(after.trials.size(), before.trials.size());
  for (size_t i = 0; i < after.trials.size(); ++i) {
    EXPECT_EQ(after.trials[i]->state, before.trials[i]->state) << i;
    EXPECT_EQ(after.trials[i]->parameters[0]->value, before.trials[i]->parameters[0]->value);
    EXPECT_EQ(after.trials[i]->steps, before.trials[i]->steps) << i;
    EXPECT_EQ(after.trials[i]->final_metric, before.trials[i]->final_metric) << i;
  }
  EXPECT_EQ(after.best_trial, "1");
  // The agent re-registers with both running trials; nothing is restarted, nothing new starts.
  const wire::ReplicaStatusT t2 = Running(first[1].job, "chief-0");
  Register("node-a", 0, {t2, Running(third[0].job, "chief-0")});
  PumpFew();
  EXPECT_TRUE(TakeLaunchList().empty());
  EXPECT_TRUE(TakeStops().empty());
  // The study goes on where it was: trial 4 gets the next grid point.
  Report("node-a", t2.job, "chief-0", 0, ReplicaState::SUCCEEDED, 0);
  auto fourth = TakeTrialLaunches(1);
  EXPECT_EQ(Arg(fourth[0], "--x="), "4");
  EXPECT_EQ(GetStudy("durable").trials[1]->state, "SUCCEEDED");

  // Through two more restarts.
  auto compacted = GetStudy("durable");
  Restart();
  Restart();
  auto again = GetStudy("durable");
  ASSERT_EQ(again.trials.size(), 4u);
  for (size_t i = 0; i < again.trials.size(); ++i) {
    EXPECT_EQ(again.trials[i]->state, compacted.trials[i]->state) << i;
    EXPECT_EQ(again.trials[i]->steps, compacted.trials[i]->steps) << i;
  }
  EXPECT_EQ(again.best_trial, compacted.best_trial);
}

// `cohort exec`: a client's command goes to the agent of the replica's node, naming the attempt;
// the agent's ExecOutput goes back to that client as the reply, and the job's events say who ran
// what.
TEST_F(CoordinatorTest, ExecGoesToTheReplicasAgentAndItsOutputBackToTheClient) {
  AddAgent("node-a", 1);
  AddAgent("node-b", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("train", 0, 1)));
  std::string node = GetJob("train").replicas.at(0)->node_id;
  const std::string other = node == "node-a" ? "node-b" : "node-a";
  wire::ExecInReplicaT req;
  req.job = "train";
  req.argv = {"nvidia-smi", "-L"};
  const uint64_t id = client_.Send(req);
  std::vector<wire::ExecInReplicaT> sent;
  Pump([&] {
    sent = agents_[node].Take<wire::ExecInReplica>();
    return !sent.empty();
  });
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].job, "train");
  EXPECT_EQ(sent[0].replica, "chief-0");  // the default
  EXPECT_EQ(sent[0].attempt, 0);
  EXPECT_EQ(sent[0].timeout_ms, kDefaultExecTimeoutMs);
  EXPECT_EQ(sent[0].argv, (std::vector<std::string>{"nvidia-smi", "-L"}));
  EXPECT_TRUE(agents_[other].Take<wire::ExecInReplica>().empty());
  EXPECT_TRUE(HasEvent(GetJob("train"), "cohort exec in chief-0 attempt 0: nvidia-smi -L"));

  // An answer from another node is not the one waited for; the replica's node's is.
  wire::ExecOutputT answer;
  answer.node_id = other;
  answer.exec_id = sent[0].exec_id;
  answer.job = "train";
  answer.replica = "chief-0";
  answer.exit_code = 9;
  agents_[other].Send(answer);
  PumpFew();
  EXPECT_TRUE(client_.inbox.empty());
  answer.node_id = node;
  answer.exit_code = 3;
  const std::string text = "GPU 0: test-gpu\n";
  answer.output.assign(text.begin(), text.end());
  agents_[node].Send(answer);
  Pump([&] { return !client_.inbox.empty(); });
  ASSERT_EQ(client_.inbox.size(), 1u);
  EXPECT_EQ(client_.inbox.front().request_id(), id);
  auto outputs = client_.Take<wire::ExecOutput>();
  ASSERT_EQ(outputs.size(), 1u) << client_.inbox.front().ErrorStatus().ToString();
  EXPECT_EQ(outputs[0].exit_code, 3);
  EXPECT_EQ(std::string(outputs[0].output.begin(), outputs[0].output.end()), text);
  // Sent again (a late duplicate): nobody waits for it any more.
  agents_[node].Send(answer);
  PumpFew();
  EXPECT_TRUE(client_.inbox.empty());

  // The agent could not run it (the attempt had just ended there): its reason, refused.
  const uint64_t second = client_.Send(req);
  Pump([&] {
    sent = agents_[node].Take<wire::ExecInReplica>();
    return !sent.empty();
  });
  ASSERT_EQ(sent.size(), 1u);
  wire::ExecOutputT refused;
  refused.node_id = node;
  refused.exec_id = sent[0].exec_id;
  refused.error = "chief-0 attempt 0 of job train is not running on node " + node;
  agents_[node].Send(refused);
  Pump([&] { return !client_.inbox.empty(); });
  ASSERT_EQ(client_.inbox.size(), 1u);
  EXPECT_EQ(client_.inbox.front().request_id(), second);
  EXPECT_EQ(client_.inbox.front().ErrorStatus(), FailedPrecondition(refused.error));
}

TEST_F(CoordinatorTest, ExecIsRefusedClearlyAndAnsweredWhenItsAgentFallsSilent) {
  AddAgent("node-a", 1);
  ASSERT_NO_FATAL_FAILURE(SubmitAndRun("node-a", JobYaml("train", 0, 1)));
  ASSERT_TRUE(Submit(JobYaml("waits", 0, 1)).ok());  // no room: PENDING
  auto refusal = [&](const std::string& job, const std::string& replica,
                     std::vector<std::string> argv, int64_t timeout_ms = 0) {
    wire::ExecInReplicaT req;
    req.job = job;
    req.replica = replica;
    req.argv = std::move(argv);
    req.timeout_ms = timeout_ms;
    return Call(std::move(req)).ErrorStatus();
  };
  EXPECT_EQ(refusal("nope", "", {"ls"}), NotFound("no job named 'nope'"));
  EXPECT_EQ(refusal("train", "worker-3", {"ls"}),
            NotFound("job train has no replica worker-3 (it has chief-0)"));
  EXPECT_EQ(refusal("train", "", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refusal("train", "", {"ls", std::string("a\0b", 3)}),
            InvalidArgument("exec: an argument holds a NUL byte"));
  EXPECT_EQ(refusal("train", "", {"sleep", "1"}, kMaxExecTimeoutMs + 1).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(refusal("train", "", std::vector<std::string>(kMaxExecArgs + 1, "x")).code(),
            StatusCode::kInvalidArgument);
  const Status pending = refusal("waits", "", {"ls"});
  EXPECT_EQ(pending.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(pending.message().find("chief-0 of job waits is not running (PENDING, job QUEUED)"),
            std::string::npos)
      << pending.ToString();
  EXPECT_TRUE(agents_["node-a"].Take<wire::ExecInReplica>().empty());

  // The agent never answers: once the command's timeout and the slack have passed, the client
  // is told so.
  wire::ExecInReplicaT req;
  req.job = "train";
  req.argv = {"sleep", "100"};
  req.timeout_ms = 2000;
  const uint64_t id = client_.Send(req);
  Pump([&] { return !agents_["node-a"].Take<wire::ExecInReplica>().empty(); });
  for (int64_t waited = 0; waited < 2000 + kExecAnswerSlackMs - 1;) {
    const int64_t step = std::min<int64_t>(1000, 2000 + kExecAnswerSlackMs - 1 - waited);
    clock_.Advance(milliseconds(step));
    waited += step;
    Heartbeat("node-a");
    PumpFew();
  }
  EXPECT_TRUE(client_.inbox.empty());
  clock_.Advance(milliseconds(1));
  Heartbeat("node-a");
  Pump([&] { return !client_.inbox.empty(); });
  ASSERT_EQ(client_.inbox.size(), 1u);
  EXPECT_EQ(client_.inbox.front().request_id(), id);
  EXPECT_EQ(client_.inbox.front().ErrorStatus(),
            DeadlineExceeded("node node-a did not say how the command in chief-0 of job train "
                             "ended"));
  client_.inbox.clear();

  // Its node is lost while a command runs: the client is told at once.
  req.timeout_ms = 60'000;
  const uint64_t lost = client_.Send(req);
  Pump([&] { return !agents_["node-a"].Take<wire::ExecInReplica>().empty(); });
  LoseNodeAmong("node-a", {"node-a"});
  Pump([&] { return !client_.inbox.empty(); });
  ASSERT_FALSE(client_.inbox.empty());
  EXPECT_EQ(client_.inbox.front().request_id(), lost);
  EXPECT_EQ(client_.inbox.front().ErrorStatus(),
            Unavailable("node node-a was lost before the command in chief-0 of job train ended"));
}

// A command runs as the job owner's account: only the owner (or an admin, as for cancel) may run
// one. With --insecure the user is the one the client claims (Envelope.user).
TEST_F(CoordinatorTest, ExecAndStacksAreTheJobOwnersAlone) {
  AddAgent("node-a", 1);
  wire::SubmitJobT submit;
  submit.spec_yaml = JobYaml("alices", 0, 1);
  ASSERT_TRUE(Call(std::move(submit), "alice").As<wire::SubmitJobReply>());
  Pump([&] { return !agents_["node-a"].inbox.empty(); });
  RunAll(TakeLaunchList());
  ASSERT_EQ(GetJob("alices").state, JobState::RUNNING);
  wire::ExecInReplicaT req;
  req.job = "alices";
  req.argv = {"ls"};
  EXPECT_EQ(Call(req, "bob").ErrorStatus(),
            PermissionDenied("user bob may not exec in job alices: it is owned by alice (only its "
                             "owner or an admin may)"));
  EXPECT_TRUE(agents_["node-a"].Take<wire::ExecInReplica>().empty());
  client_.Send(req, "alice");
  std::vector<wire::ExecInReplicaT> sent;
  Pump([&] {
    sent = agents_["node-a"].Take<wire::ExecInReplica>();
    return !sent.empty();
  });
  EXPECT_EQ(sent.size(), 1u);
  EXPECT_TRUE(HasEvent(GetJob("alices"), "cohort exec by alice in chief-0 attempt 0: ls"));
  // Taking its stacks (it signals and traces the owner's processes) too.
  wire::DumpStacksT stacks;
  stacks.job = "alices";
  EXPECT_EQ(Call(stacks, "bob").ErrorStatus().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(agents_["node-a"].Take<wire::DumpStacks>().empty());
}

// `cohort stacks`: the agent of each running replica's node is asked for its attempt's stacks,
// as the watchdog asks for those of a hung job.
TEST_F(CoordinatorTest, StacksAreAskedOfTheAgentOfEachRunningReplica) {
  AddAgent("node-a", 1);
  AddAgent("node-b", 1);
  ASSERT_TRUE(Submit(JobYaml("pair", 1, 1)).ok());
  std::map<std::string, std::string> where = RunGang(2);
  auto asked = [&] {
    std::set<std::string> dumps;
    for (auto& [node, agent] : agents_) {
      for (const auto& d : agent.Take<wire::DumpStacks>()) {
        EXPECT_EQ(d.reason, "stacks asked for (cohort stacks)");
        dumps.insert(node + "/" + d.replica + "#" + std::to_string(d.attempt));
      }
    }
    return dumps;
  };
  wire::DumpStacksT req;
  req.job = "pair";
  EXPECT_EQ(CallFor<wire::JobInfo>(req).name, "pair");
  PumpFew();
  EXPECT_EQ(asked(), (std::set<std::string>{where.at("chief-0") + "/chief-0#0",
                                            where.at("worker-0") + "/worker-0#0"}));
  EXPECT_TRUE(HasEvent(GetJob("pair"), "cohort stacks: chief-0, worker-0"));
  req.replica = "worker-0";
  EXPECT_EQ(CallFor<wire::JobInfo>(req).name, "pair");
  PumpFew();
  EXPECT_EQ(asked(), (std::set<std::string>{where.at("worker-0") + "/worker-0#0"}));
  req.replica = "worker-9";
  EXPECT_EQ(Call(req).ErrorStatus(),
            NotFound("job pair has no replica worker-9 (it has chief-0, worker-0)"));
  req.job = "nope";
  EXPECT_EQ(Call(req).ErrorStatus(), NotFound("no job named 'nope'"));
  // Nothing of a queued job runs.
  ASSERT_TRUE(Submit(JobYaml("queued", 0, 1)).ok());
  wire::DumpStacksT queued;
  queued.job = "queued";
  EXPECT_EQ(Call(queued).ErrorStatus(),
            FailedPrecondition("no replica of job queued is running (job QUEUED)"));
  EXPECT_TRUE(asked().empty());
}

}  // namespace cohort::coordinator
