// Fuzz target: frames from agents and clients into a real Coordinator (its library, SQLite state
// under /dev/shm, inproc:// sockets), past Message::Parse into its services and managers.
//
// Each input starts from the same scene: a fresh state dir, agent "good" (one GPU) running
// chief-0 of job "target", job array "sweep" and study "study" queued behind it, agent "spare"
// (no GPU, label role=spare) on which job "done" ran and SUCCEEDED, the HTTP endpoint on a loopback
// port. The input is then a list of records, each
//   [peer: 1 byte][length: 2 bytes, little-endian][frame: length bytes]
// whose frame is sent by peer % 5: 0 the good agent, 1 an agent the coordinator has not met
// ("evil"), 2 a client, 3 a browser or scraper: the frame is the target of an HTTP GET (path and
// query; bytes outside printable ASCII percent-encoded, so that any byte reaches the handlers),
// 4 the spare agent.
// After each, the manual clock moves 1 s and the loop runs a few passes, so periodic rounds,
// timeouts, restarts and snapshots for HTTP happen too. Every pass must succeed, every GET must be
// answered without a 500 (an exception in a handler), and at the end a new Coordinator must start
// on the state the old one wrote and answer a client: hostile input may be refused, never crash
// it, throw out of it or leave state it cannot load.
//
// Frames are FlatBuffers, so the seed corpus (tests/fuzz/corpus/coordinator) holds one record of
// each message a peer sends the coordinator, with every field set, and a GET of each HTTP route
// with its parameters, for mutations to start from.
// It is written by `COHORT_WRITE_COORDINATOR_SEEDS=DIR coordinator_fuzzer`; COHORT_FUZZ_LOG=1 shows
// the coordinator's log of an input.
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/messaging.h"
#include "coordinator/coordinator.h"
#include "tests/fuzz/seed_messages.h"

namespace {

namespace fs = std::filesystem;
namespace wire = cohort::wire;
using cohort::DealerSocket;
using cohort::coordinator::Coordinator;
using cohort::fuzz::Context;
using cohort::fuzz::Kv;
using cohort::fuzz::TargetDumpStacks;
using cohort::fuzz::TargetExec;
using cohort::fuzz::TargetExecSession;
using std::chrono::milliseconds;

// Job "done" of the scene: placed on the spare agent by its label.
constexpr const char* kDoneYaml =
    "name: done\n"
    "worker_pools:\n"
    "  - role: chief\n"
    "    replicas: 1\n"
    "    resources: {gpus: 0, cpus: 1}\n"
    "    node_selector: {role: spare}\n"
    "    process: {command: [/bin/train]}\n";

constexpr const char* kJobYaml =
    "name: target\n"
    "worker_pools:\n"
    "  - role: chief\n"
    "    replicas: 1\n"
    "    resources: {gpus: 1, cpus: 1}\n"
    "    process: {command: [/bin/train], env: {MY_VAR: x}}\n"
    "scheduling: {max_restarts: 2}\n";

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "coordinator_fuzzer: %s\n", what.c_str());
  std::abort();
}

// The scene's messages and the seeds: each message a peer sends, as the real one sends it.
wire::RegisterAgentT Registration() {
  wire::RegisterAgentT reg;
  reg.node_id = "good";
  reg.address = "good.local";
  reg.version = "fuzz";
  reg.agent_instance = "boot/1/1";
  auto gpu = std::make_unique<wire::GpuInfoT>();
  gpu->index = 0;
  gpu->model = "fuzz-gpu";
  gpu->uuid = "GPU-0";
  reg.gpus.push_back(std::move(gpu));
  reg.cpus = 16;
  reg.memory_mb = 64'000;
  return reg;
}

// The spare agent's: no GPU, labelled role=spare.
wire::RegisterAgentT SpareRegistration() {
  wire::RegisterAgentT reg = Registration();
  reg.node_id = "spare";
  reg.address = "spare.local";
  reg.gpus.clear();
  reg.labels.push_back(Kv("role", "spare"));
  return reg;
}

// Job array "sweep" (tasks sweep-0..3, two at a time) and study "study" (two trials), of the scene.
wire::SubmitJobT ArraySubmission() {
  wire::SubmitJobT array;
  array.spec_yaml = kJobYaml;
  array.name = "sweep";
  array.array = "0-3%2";
  return array;
}

wire::SubmitStudyT StudySubmission() {
  wire::SubmitStudyT study;
  study.spec_yaml =
      "name: study\n"
      "metric: {id: accuracy, goal: maximize}\n"
      "parameters:\n"
      "  - {id: lr, type: double, min: 0.001, max: 0.1, scale: log}\n"
      "algorithm: random\n"
      "max_trials: 2\n"
      "parallel_trials: 1\n"
      "trial_job:\n"
      "  worker_pools:\n"
      "    - role: chief\n"
      "      replicas: 1\n"
      "      resources: {gpus: 1}\n"
      "      process: {command: [/bin/train]}\n";
  return study;
}

std::unique_ptr<wire::ReplicaStatusT> ChiefStatus(wire::ReplicaState state,
                                                  const std::string& job = "target") {
  auto s = std::make_unique<wire::ReplicaStatusT>();
  s->job = job;
  s->replica = "chief-0";
  s->attempt = 0;
  s->state = state;
  return s;
}

// One record of every message, by peer.
std::vector<std::pair<uint8_t, wire::BodyUnion>> SeedBodies() {
  std::vector<std::pair<uint8_t, wire::BodyUnion>> seeds;
  auto add = [&](uint8_t peer, auto body) {
    wire::BodyUnion u;
    u.Set(std::move(body));
    seeds.emplace_back(peer, std::move(u));
  };
  {
    wire::RegisterAgentT reg = Registration();
    reg.replicas.push_back(ChiefStatus(wire::ReplicaState::RUNNING));
    reg.replicas.back()->message = "running";
    reg.replicas.back()->job_created_ms = 1'700'000'000'000;
    reg.port_domain = "rack-1";
    reg.unhealthy = "";
    reg.labels.push_back(Kv("zone", "a"));
    reg.uptime_ms = 5000;
    reg.storage = std::make_unique<wire::StorageReportT>();
    reg.storage->root = "/out";
    reg.storage->error = "not mounted";
    add(0, std::move(reg));
    wire::RegisterAgentT evil = Registration();
    evil.node_id = "evil";
    evil.address = "evil.local";
    add(1, std::move(evil));
  }
  {
    wire::HeartbeatT hb;
    hb.node_id = "good";
    hb.draining = true;
    hb.unhealthy = "disk";
    auto progress = std::make_unique<wire::ReplicaProgressT>();
    progress->job = "target";
    progress->replica = "chief-0";
    progress->attempt = 0;
    progress->current_op = "allreduce";
    progress->current_algorithm = "ring";
    progress->current_seq = 7;
    progress->completed_seq = 6;
    hb.progress.push_back(std::move(progress));
    auto gpu = std::make_unique<wire::UnhealthyGpuT>();
    gpu->index = 0;
    gpu->reason = "xid 79";
    hb.unhealthy_gpus.push_back(std::move(gpu));
    add(0, std::move(hb));
  }
  const wire::ReplicaState states[] = {wire::ReplicaState::FAILED, wire::ReplicaState::PREEMPTED,
                                       wire::ReplicaState::SUCCEEDED};
  for (wire::ReplicaState state : states) {
    wire::ReplicaUpdateT update;
    update.node_id = "good";
    update.status = ChiefStatus(state);
    update.status->exit_code = 1;
    update.status->signal = 9;
    update.status->message = "exited";
    add(0, std::move(update));
  }
  {
    wire::LogChunkT chunk;
    chunk.job = "target";
    chunk.replica = "chief-0";
    chunk.attempt = 0;
    chunk.offset = 0;
    const std::string text = "epoch 1 loss 0.5\nTraceback (most recent call last):\n";
    chunk.data.assign(text.begin(), text.end());
    add(0, std::move(chunk));
  }
  {
    wire::TrialMeasurementT m;
    m.job = "target";
    m.replica = "chief-0";
    m.step = 3;
    m.metrics.push_back(Kv("accuracy", "0.5"));
    add(0, std::move(m));
  }
  {
    wire::StackDumpT dump;
    dump.node_id = "good";
    dump.job = "target";
    dump.replica = "chief-0";
    dump.text = "Thread 1:\n  File \"train.py\", line 3, in <module>\n";
    add(0, std::move(dump));
  }
  {
    wire::ExecOutputT out;
    out.node_id = "good";
    out.exec_id = 1;
    out.job = "target";
    out.error = "no such file";
    out.killed_because = "timeout";
    add(0, std::move(out));
  }
  {
    wire::SubmitJobT submit;
    submit.spec_yaml = kJobYaml;
    submit.name = "second";
    submit.after.push_back("target");
    submit.hold = true;
    submit.env.push_back(Kv("SEED", "1"));
    submit.args.push_back("--lr=0.1");
    submit.labels.push_back(Kv("team", "a"));
    add(2, std::move(submit));
    add(2, ArraySubmission());
  }
  {
    wire::SubmitStudyT study;
    add(2, StudySubmission());
  }
  {
    wire::GetJobT get;
    get.name = "target";
    get.with_spec = true;
    add(2, std::move(get));
    wire::ListJobsT list;
    list.states.push_back(wire::JobState::RUNNING);
    list.created_since_ms = 1;
    list.limit = 10;
    list.selector = "team=a";
    add(2, std::move(list));
    wire::CancelJobT cancel;
    cancel.name = "target";
    add(2, std::move(cancel));
    wire::ListNodesT nodes;
    nodes.selector = "zone=a";
    nodes.events_of = "good";
    add(2, std::move(nodes));
    wire::GetLogsT logs;
    logs.job = "target";
    logs.replica = "chief-0";
    logs.attempt = 0;
    logs.offset = 1;
    logs.max_bytes = 100;
    logs.with_times = true;
    wire::GetLogsT dumps = logs;
    dumps.dump = true;
    add(2, std::move(logs));
    add(2, std::move(dumps));
  }
  {
    wire::GetStudyT study;
    study.name = "study";
    study.with_spec = true;
    add(2, std::move(study));
    add(2, wire::ListStudiesT{});
    add(2, wire::ListQueuesT{});
    add(2, TargetDumpStacks());
    wire::GetJobMetricsT metrics;
    metrics.job = "target";
    add(2, std::move(metrics));
    wire::GetUsageT usage;
    usage.user = "root";
    usage.queue = "default";
    usage.since_ms = 1;
    usage.selector = "team=a";
    usage.by_label = "team";
    add(2, std::move(usage));
  }
  for (const char* action :
       {"cordon", "drain", "drain-now", "uncordon", "label", "label-reset", "forget"}) {
    wire::NodeAdminT admin;
    admin.node_id = "good";
    admin.action = action;
    const std::string a = action;
    if (a.starts_with("label")) admin.labels.push_back("zone=b");
    if (a == "cordon" || a.starts_with("drain")) admin.reason = "maintenance";
    add(2, admin);
    if (a == "cordon" || a == "uncordon") {  // the node's GPU 0 alone
      admin.gpus.push_back(0);
      add(2, std::move(admin));
    }
  }
  {
    wire::DeleteJobT del;
    del.name = "target";
    add(2, del);
    del.name = "done";
    add(2, std::move(del));
    wire::GetLogsT done_logs;
    done_logs.job = "done";
    done_logs.replica = "chief-0";
    add(2, std::move(done_logs));
    wire::HeartbeatT spare;
    spare.node_id = "spare";
    add(4, std::move(spare));
    wire::ReplicaUpdateT late;  // of an attempt that has ended
    late.node_id = "spare";
    late.status = ChiefStatus(wire::ReplicaState::FAILED, "done");
    late.status->exit_code = 1;
    add(4, std::move(late));
    wire::CancelStudyT cancel;
    cancel.name = "study";
    add(2, std::move(cancel));
    wire::SuspendJobT suspend;
    suspend.name = "target";
    suspend.resume = true;
    add(2, std::move(suspend));
    add(2, TargetExec());
    wire::UpdateJobT update;
    update.name = "target";
    update.priority = "high";
    update.queue = "default";
    add(2, std::move(update));
    auto [session, end] = TargetExecSession();
    add(2, std::move(session));
    add(0, std::move(end));
  }
  {
    wire::CancelArrayT cancel;
    cancel.name = "sweep";
    add(2, std::move(cancel));
    add(2, wire::ListArraysT{});
    wire::GetArrayT get;
    get.name = "sweep";
    get.with_spec = true;
    add(2, std::move(get));
    wire::SuspendArrayT suspend;
    suspend.name = "sweep";
    add(2, std::move(suspend));
    wire::UpdateArrayT update;
    update.name = "sweep";
    update.priority = "low";
    update.queue = "default";
    add(2, std::move(update));
    add(2, wire::BackupStateT{});
  }
  return seeds;
}

// A GET of each route the HTTP endpoint serves (coordinator/http_service.h), with its parameters.
const char* const kHttpSeeds[] = {
    "/metrics",
    "/api/jobs?state=RUNNING&queue=default&user=root&name=tar&selector=team%3Da&limit=5",
    "/api/jobs/target",
    "/api/jobs/target/log?replica=chief-0&bytes=100",
    "/api/jobs/target/metrics",
    "/api/nodes?selector=zone%3Da&events_of=good",
    "/api/studies",
    "/api/studies/study",
    "/api/arrays?state=RUNNING&user=root&queue=default&name=sw",
    "/api/arrays/sweep",
    "/api/queues",
    "/api/usage?since=7d&user=root&queue=default&selector=team%3Da&by_label=team",
    "/",
    "/app.js",
};

void WriteSeeds(const std::string& dir) {
  fs::create_directories(dir);
  int n = 0;
  auto write = [&](uint8_t peer, const std::string& name, const void* data, size_t size) {
    if (size > 0xffff) Fail("seed frame over 64 KiB");
    std::string record(1, static_cast<char>(peer));
    record += static_cast<char>(size & 0xff);
    record += static_cast<char>(size >> 8);
    record.append(static_cast<const char*>(data), size);
    std::ofstream(fs::path(dir) / (std::to_string(n++) + "-" + name), std::ios::binary) << record;
  };
  for (auto& [peer, body] : SeedBodies()) {
    const std::string name = wire::EnumNameBody(body.type);
    zmq::message_t frame = cohort::EncodeBody(1, std::move(body), peer == 2 ? "fuzz" : "");
    write(peer, name, frame.data(), frame.size());
  }
  for (const std::string target : kHttpSeeds) write(3, "GET", target.data(), target.size());
  std::printf("wrote %d seed(s) to %s\n", n, dir.c_str());
}

// `bytes` as an HTTP request target: printable ASCII but '#' as it is (so the fuzzer shapes the
// path, the query and its own escapes), every other byte percent-encoded.
std::string RequestTarget(const uint8_t* bytes, size_t size) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string target = size > 0 && bytes[0] == '/' ? "" : "/";
  for (size_t i = 0; i < size; ++i) {
    const uint8_t b = bytes[i];
    if (b > ' ' && b < 0x7f && b != '#') {
      target += static_cast<char>(b);
    } else {
      target += '%';
      target += kHex[b >> 4];
      target += kHex[b & 0xf];
    }
  }
  return target;
}

// One coordinator on a state dir and the three peers connected to it.
struct Scene {
  cohort::ManualClock clock;
  std::unique_ptr<Coordinator> coordinator;
  std::unique_ptr<DealerSocket> peers[4];  // good agent, evil agent, client, spare agent
  std::unique_ptr<httplib::Client> browser;

  void Start(const cohort::coordinator::CoordinatorOptions& base) {
    static int generation = 0;  // a closed inproc:// name is released asynchronously
    cohort::coordinator::CoordinatorOptions options = base;
    const std::string tag = std::to_string(++generation);
    options.client_endpoint = "inproc://fuzz-clients-" + tag;
    options.agent_endpoint = "inproc://fuzz-agents-" + tag;
    options.http_endpoint = "127.0.0.1:0";
    options.http_endpoint_explicit = true;
    auto c = Coordinator::Create(options, &clock, &Context());
    if (!c.ok()) Fail("the coordinator does not start on its state: " + c.status().ToString());
    coordinator = std::move(*c);
    const std::pair<std::string, std::string> ends[] = {{options.agent_endpoint, "good"},
                                                        {options.agent_endpoint, "evil"},
                                                        {options.client_endpoint, ""},
                                                        {options.agent_endpoint, "spare"}};
    for (int i = 0; i < 4; ++i) {
      auto s = DealerSocket::Connect(Context(), ends[i].first, ends[i].second);
      if (!s.ok()) Fail(s.status().ToString());
      peers[i] = std::make_unique<DealerSocket>(std::move(*s));
    }
    const std::string url = coordinator->http_url();
    if (url.empty()) Fail("the coordinator serves no HTTP");
    browser = std::make_unique<httplib::Client>(url);
    browser->set_read_timeout(5, 0);
  }
  void Stop() {
    browser.reset();
    for (auto& p : peers) p.reset();
    coordinator.reset();
  }
  // `passes` passes of the loop, the peers' inboxes emptied after each.
  void Pump(int passes) {
    for (int i = 0; i < passes; ++i) {
      cohort::Status s = coordinator->RunOnce(milliseconds(0));
      if (!s.ok()) Fail("a pass of the loop failed: " + s.ToString());
      for (int peer = 0; peer < 4; ++peer) {
        while (true) {
          auto m = peers[peer]->Receive(milliseconds(0));
          if (!m.ok() || !m->has_value()) break;
          if (cohort::Status told = (*m)->ErrorStatus(); !told.ok()) {
            spdlog::debug("fuzz: peer {} told {}", peer, told.ToString());
          }
        }
      }
    }
  }
  // The state of job `name` as the coordinator answers a client's GetJob (within 20 passes).
  std::optional<wire::JobState> JobState(const std::string& name) {
    wire::GetJobT get;
    get.name = name;
    Send(2, std::move(get));
    for (int i = 0; i < 20; ++i) {
      if (!coordinator->RunOnce(milliseconds(1)).ok()) return std::nullopt;
      auto m = peers[2]->Receive(milliseconds(0));
      if (!m.ok() || !m->has_value()) continue;
      const wire::JobInfo* info = (*m)->As<wire::JobInfo>();
      if (info == nullptr) return std::nullopt;
      return info->state();
    }
    return std::nullopt;
  }
  // Whether `peer` receives a message within 20 passes.
  bool Answered(int peer) {
    for (int i = 0; i < 20; ++i) {
      if (!coordinator->RunOnce(milliseconds(1)).ok()) return false;
      auto m = peers[peer]->Receive(milliseconds(0));
      if (m.ok() && m->has_value()) return true;
    }
    return false;
  }
  // A GET of `target`: answered, and not with a 500 (what an exception in a handler becomes).
  void Get(const std::string& target) {
    httplib::Result result = browser->Get(target);
    if (!result) Fail("GET " + target + ": no answer (" + httplib::to_string(result.error()) + ")");
    spdlog::debug("fuzz: GET {}: {}", target, result->status);
    if (result->status >= 500) {
      Fail("GET " + target + ": " + std::to_string(result->status) + " " + result->body);
    }
  }
  void Send(int peer, zmq::message_t frame) {
    if (!peers[peer]->Send(std::move(frame)).ok()) Fail("a peer's send failed");
  }
  template <typename T>
  void Send(int peer, T body) {
    Send(peer, cohort::Encode(peers[peer]->NextRequestId(), std::move(body)));
  }
};

cohort::coordinator::CoordinatorOptions BaseOptions() {
  cohort::coordinator::CoordinatorOptions options;
  options.state_dir = (fs::path(fs::exists("/dev/shm") ? "/dev/shm" : fs::temp_directory_path()) /
                       ("cohort-coordinator-fuzz-" + std::to_string(::getpid())))
                          .string();
  options.insecure = true;
  options.heartbeat_timeout = milliseconds(10'000);
  options.port_min = 25000;
  options.port_max = 25999;
  options.backup_dir = options.state_dir + "-backups";  // BackupState writes there
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The coordinator's log only when asked (COHORT_FUZZ_LOG=1): to read what an input did.
  spdlog::set_level(std::getenv("COHORT_FUZZ_LOG") ? spdlog::level::debug : spdlog::level::off);
  if (const char* dir = std::getenv("COHORT_WRITE_COORDINATOR_SEEDS")) {
    WriteSeeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The state and backup dirs, removed again when the process ends.
  static const struct Base {
    cohort::coordinator::CoordinatorOptions options = BaseOptions();
    ~Base() {
      fs::remove_all(options.state_dir);
      fs::remove_all(options.backup_dir);
    }
  } owned;
  const cohort::coordinator::CoordinatorOptions& base = owned.options;
  fs::remove_all(base.state_dir);
  fs::remove_all(base.backup_dir);
  Scene scene;
  scene.Start(base);
  scene.Send(0, Registration());
  scene.Send(3, SpareRegistration());
  scene.Pump(3);
  {
    wire::SubmitJobT done;
    done.spec_yaml = kDoneYaml;
    scene.Send(2, std::move(done));
  }
  scene.Pump(3);
  for (wire::ReplicaState state : {wire::ReplicaState::RUNNING, wire::ReplicaState::SUCCEEDED}) {
    wire::ReplicaUpdateT update;
    update.node_id = "spare";
    update.status = ChiefStatus(state, "done");
    scene.Send(3, std::move(update));
    scene.Pump(3);
  }
  {
    wire::SubmitJobT submit;
    submit.spec_yaml = kJobYaml;
    scene.Send(2, std::move(submit));
    scene.Send(2, ArraySubmission());
    scene.Send(2, StudySubmission());
  }
  scene.Pump(3);
  scene.clock.Advance(milliseconds(1000));
  scene.Pump(3);
  {
    wire::ReplicaUpdateT running;
    running.node_id = "good";
    running.status = ChiefStatus(wire::ReplicaState::RUNNING);
    scene.Send(0, std::move(running));
  }
  scene.Pump(3);
  static bool scene_checked = false;  // once: the scene is what the header says
  if (!scene_checked) {
    if (scene.JobState("done") != wire::JobState::SUCCEEDED)
      Fail("job done of the scene did not end");
    if (scene.JobState("target") != wire::JobState::RUNNING)
      Fail("job target of the scene does not run");
    scene_checked = true;
  }

  constexpr int kMaxRecords = 64;
  size_t at = 0;
  for (int records = 0; records < kMaxRecords && at + 3 <= size; ++records) {
    const int peer = data[at] % 5;
    const size_t length = std::min<size_t>(data[at + 1] | (data[at + 2] << 8), size - at - 3);
    if (peer == 3) {
      scene.Get(RequestTarget(data + at + 3, length));
    } else {
      scene.Send(peer == 4 ? 3 : peer, zmq::message_t(data + at + 3, length));
    }
    at += 3 + length;
    scene.clock.Advance(milliseconds(1000));
    scene.Pump(3);
  }
  scene.Stop();

  // What it wrote must load, and the new coordinator must answer.
  scene.Start(base);
  scene.Send(2, wire::ListJobsT{});
  if (!scene.Answered(2)) Fail("the restarted coordinator did not answer a client");
  scene.Stop();
  return 0;
}
