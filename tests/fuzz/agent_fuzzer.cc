// Fuzz target: frames from a coordinator into a real Agent (its library, compiled with the
// fuzzer's instrumentation; an inproc:// socket; a work dir under /dev/shm), past Message::Parse
// into its session, replica manager, stop, exec, exec session and stack dump handlers.
//
// Each input starts from the same scene: a fresh work dir, the agent (node "fuzz-node", two
// declared GPUs) registered with the harness, which answers as the coordinator does (registrations,
// heartbeats, updates, log chunks, measurements), and job "target" chief-0 attempt 0 launched and
// running. The input is then a list of records, each
//   [length: 2 bytes, little-endian][frame: length bytes]
// whose frame the harness sends the agent as its coordinator. After each, the manual clock moves
// 1 s and the loop runs a few passes, so heartbeats, resends, stop deadlines and launches' waits
// happen too. Every pass must succeed; at the end a launch of a fresh job must still be run and
// reported RUNNING (hostile frames may be refused, never wedge the agent), and every process the
// agent started must be gone soon after it is destroyed: hostile input may be refused, never
// crash it, throw out of it or leave a replica behind.
//
// Sandbox: the replicas are real processes of the agent's ProcessLauncher, but whatever a launch
// asks for they run /bin/sleep with an empty environment (SandboxLauncher, for containers too),
// and a `cohort exec` command runs as /bin/echo's arguments. The agent makes the output
// directories a launch's environment names and sets aside torn checkpoints in its checkpoint
// directory: a LaunchReplica naming any outside kSandbox is not sent (InSandbox), so no input
// makes or moves anything elsewhere.
//
// Frames are FlatBuffers, so the seed corpus (tests/fuzz/corpus/agent) holds one record of each
// message a coordinator sends an agent, with every field set, for mutations to start from. It is
// written by `COHORT_WRITE_AGENT_SEEDS=DIR agent_fuzzer`; COHORT_FUZZ_LOG=1 shows the agent's log
// of an input.
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/process_launcher.h"
#include "agent/replica_env.h"
#include "common/clock.h"
#include "common/messaging.h"
#include "tests/fuzz/seed_messages.h"

namespace {

namespace fs = std::filesystem;
namespace wire = cohort::wire;
using cohort::StatusOr;
using cohort::agent::Launcher;
using cohort::agent::LaunchRequest;
using cohort::agent::ReplicaProcess;
using cohort::fuzz::Context;
using cohort::fuzz::Kv;
using cohort::fuzz::TargetDumpStacks;
using cohort::fuzz::TargetExec;
using cohort::fuzz::TargetExecSession;
using std::chrono::milliseconds;

// Every path a launch may name for the agent to make or change lies under this directory; each
// scene's work dir does too.
constexpr const char* kSandbox = "/dev/shm/cohort-agent-fuzz";
constexpr const char* kNode = "fuzz-node";

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "agent_fuzzer: %s\n", what.c_str());
  std::abort();
}

// The main processes SandboxLauncher started during this input.
std::vector<pid_t>& LaunchedPids() {
  static std::vector<pid_t> pids;
  return pids;
}

// One launched attempt of SandboxLauncher: the real process's, but a command run beside it goes
// to /bin/echo as its arguments (ExecPrefix is what a container's runtime exec would be).
class SandboxProcess : public ReplicaProcess {
 public:
  explicit SandboxProcess(std::unique_ptr<ReplicaProcess> inner) : inner_(std::move(inner)) {}
  pid_t pid() const override { return inner_->pid(); }
  pid_t command_pid() override { return inner_->command_pid(); }
  void OnExited(int wait_status) override { inner_->OnExited(wait_status); }
  std::optional<cohort::agent::ExitInfo> exit_info() const override { return inner_->exit_info(); }
  LaunchState PollLaunch() override { return inner_->PollLaunch(); }
  std::string launch_error() const override { return inner_->launch_error(); }
  void Signal(int sig) override { inner_->Signal(sig); }
  void KillAll() override { inner_->KillAll(); }
  bool AnyAlive() override { return inner_->AnyAlive(); }
  void Release() override { inner_->Release(); }
  std::vector<std::string> ExecPrefix(cohort::agent::ExecStdio) const override {
    return {"/bin/echo", "sandboxed exec:"};
  }

 private:
  std::unique_ptr<ReplicaProcess> inner_;
};

// Runs /bin/sleep for every launch, processes and containers alike, with the request's working
// dir, log, account and CPUs but none of its command, environment or image.
class SandboxLauncher : public Launcher {
 public:
  StatusOr<std::unique_ptr<ReplicaProcess>> Launch(const LaunchRequest& request) override {
    LaunchRequest sandboxed = request;
    sandboxed.argv = {"/bin/sleep", "600"};
    sandboxed.env = {{"PATH", "/usr/bin:/bin"}};
    sandboxed.image.clear();
    sandboxed.container_command.reset();
    sandboxed.python_site.clear();
    sandboxed.pid_namespace = false;
    auto launched = inner_.Launch(sandboxed);
    if (!launched.ok()) return launched.status();
    LaunchedPids().push_back((*launched)->pid());
    return std::unique_ptr<ReplicaProcess>(std::make_unique<SandboxProcess>(std::move(*launched)));
  }

 private:
  cohort::agent::ProcessLauncher inner_{cohort::agent::CgroupManager()};
};

// Empty, or an absolute path under kSandbox with no ".." in it.
bool InSandboxPath(const std::string& path) {
  if (path.empty()) return true;
  const std::string root = std::string(kSandbox) + "/";
  if (path.rfind(root, 0) != 0) return false;
  for (const auto& part : fs::path(path)) {
    if (part == "..") return false;
  }
  return true;
}

// Whether `frame` may be sent: anything but a LaunchReplica whose checkpoint dir or output
// directory variables (kOutputDirVars) lie outside kSandbox.
bool InSandbox(const uint8_t* data, size_t size) {
  auto parsed = cohort::Message::Parse(zmq::message_t(data, size));
  if (!parsed.ok() || parsed->type() != wire::Body::LaunchReplica) return true;
  const wire::LaunchReplica& launch = *parsed->As<wire::LaunchReplica>();
  if (launch.checkpoint_dir() && !InSandboxPath(launch.checkpoint_dir()->str())) return false;
  if (!launch.env()) return true;
  for (const wire::KeyValue* kv : *launch.env()) {
    const bool names_a_dir =
        kv->key() && std::any_of(std::begin(cohort::agent::kOutputDirVars),
                                 std::end(cohort::agent::kOutputDirVars),
                                 [&](const char* var) { return kv->key()->str() == var; });
    if (names_a_dir && kv->value() && !InSandboxPath(kv->value()->str())) return false;
  }
  return true;
}

// The scene's launches and the seeds: as the coordinator's launch plan writes them.
wire::LaunchReplicaT Launch(const std::string& job, int attempt) {
  wire::LaunchReplicaT launch;
  launch.job = job;
  launch.replica = "chief-0";
  launch.role = "chief";
  launch.index = 0;
  launch.attempt = attempt;
  launch.command = {"/usr/bin/python3", "train.py", "--epochs=3"};
  launch.env.push_back(Kv("CLUSTER_SPEC", R"({"cluster":{"workerpool0":["fuzz-node:2222"]}})"));
  launch.env.push_back(Kv("AIP_MODEL_DIR", std::string(kSandbox) + "/out/" + job + "/model/"));
  launch.env.push_back(Kv("AIP_CHECKPOINT_DIR", std::string(kSandbox) + "/out/" + job + "/ckpt/"));
  launch.env.push_back(Kv("RANK", "0"));
  launch.gpus = {0};
  launch.cpus = 1;
  launch.memory_mb = 1024;
  launch.checkpoint_dir = std::string(kSandbox) + "/out/" + job + "/ckpt";
  launch.job_created_ms = 1'700'000'000'000;
  return launch;
}

// One record of every message a coordinator sends an agent.
std::vector<wire::BodyUnion> SeedBodies() {
  std::vector<wire::BodyUnion> seeds;
  auto add = [&](auto body) {
    wire::BodyUnion u;
    u.Set(std::move(body));
    seeds.push_back(std::move(u));
  };
  {
    wire::RegisterAgentReplyT reply;
    reply.heartbeat_interval_ms = 500;
    reply.output_root = std::string(kSandbox) + "/out";
    reply.fence_after_ms = 30'000;
    reply.fence_grace_ms = 5000;
    add(std::move(reply));
  }
  {
    wire::HeartbeatReplyT reply;
    reply.known = true;
    auto late = std::make_unique<wire::ReplicaLatenessT>();
    late->job = "target";
    late->replica = "chief-0";
    late->median_ms = 12.5;
    late->samples = 20;
    reply.lateness.push_back(std::move(late));
    add(std::move(reply));
    add(wire::HeartbeatReplyT{});  // known = false: register again
  }
  add(wire::AckT{});
  {
    wire::ErrorReplyT error;
    error.code = static_cast<int>(cohort::StatusCode::kFailedPrecondition);
    error.message = "node is not registered";
    add(std::move(error));
  }
  {
    wire::LogAckT ack;
    ack.job = "target";
    ack.replica = "chief-0";
    ack.attempt = 0;
    ack.next_offset = 10;
    add(std::move(ack));
  }
  {
    add(Launch("second", 0));
    wire::LaunchReplicaT restart = Launch("target", 1);
    restart.others_stopped = true;
    restart.owner = "root";
    add(std::move(restart));
    wire::LaunchReplicaT container = Launch("boxed", 0);
    container.command.clear();
    container.container = std::make_unique<wire::ContainerSpecT>();
    container.container->image = "docker.io/library/python:3.11";
    container.container->command = {"python3"};
    container.container->args = {"train.py"};
    add(std::move(container));
    wire::LaunchReplicaT reducer = Launch("target", 0);
    reducer.replica = "reducer-0";
    reducer.role = "reducer";
    reducer.command.clear();
    reducer.builtin = "reducer";
    reducer.gpus.clear();
    add(std::move(reducer));
  }
  {
    wire::StopReplicaT stop;
    stop.job = "target";
    stop.replica = "chief-0";
    stop.attempt = 0;
    stop.grace_ms = 100;
    stop.reason = "cancelled";
    add(std::move(stop));
  }
  add(TargetDumpStacks());
  add(TargetExec());
  auto [session, end] = TargetExecSession();
  add(std::move(session));
  add(std::move(end));
  return seeds;
}

void WriteSeeds(const std::string& dir) {
  fs::create_directories(dir);
  int n = 0;
  for (auto& body : SeedBodies()) {
    const std::string name = wire::EnumNameBody(body.type);
    zmq::message_t frame = cohort::EncodeBody(1000 + n, std::move(body));
    if (frame.size() > 0xffff) Fail("seed frame over 64 KiB");
    std::string record;
    record += static_cast<char>(frame.size() & 0xff);
    record += static_cast<char>(frame.size() >> 8);
    record.append(static_cast<const char*>(frame.data()), frame.size());
    std::ofstream(fs::path(dir) / (std::to_string(n++) + "-" + name), std::ios::binary) << record;
  }
  std::printf("wrote %d seed(s) to %s\n", n, dir.c_str());
}

// The agent and its coordinator: a ROUTER that answers as the real one does.
struct Scene {
  cohort::ManualClock clock;
  std::string work_dir;
  std::unique_ptr<cohort::RouterSocket> coordinator;
  std::unique_ptr<cohort::agent::Agent> agent;
  // The newest state reported of each attempt ("job/replica/attempt"), by updates and
  // registrations.
  std::map<std::string, wire::ReplicaState> reported;
  uint64_t next_id = 1;
  std::string peer;  // the agent's routing id (one per session of it), from its registration

  explicit Scene(const std::string& dir) : work_dir(dir) {
    static int generation = 0;  // a closed inproc:// name is released asynchronously
    const std::string endpoint = "inproc://agent-fuzz-" + std::to_string(++generation);
    auto bound = cohort::RouterSocket::Bind(Context(), endpoint);
    if (!bound.ok()) Fail(bound.status().ToString());
    coordinator = std::make_unique<cohort::RouterSocket>(std::move(*bound));
    cohort::agent::AgentConfig config;
    config.coordinator = endpoint;
    config.node_id = kNode;
    config.advertise_address = "127.0.0.1";
    config.work_dir = work_dir;
    config.inventory.gpus = cohort::agent::DeclaredGpus(2);
    config.inventory.cpus = 4;
    config.inventory.memory_mb = 8192;
    config.security.insecure = true;
    config.grace_period = milliseconds(500);
    config.default_heartbeat_interval = milliseconds(1000);
    config.resend_interval = milliseconds(1000);
    config.max_register_interval = milliseconds(2000);
    config.preempt_ack_wait = milliseconds(1000);
    config.reap_all_children = true;
    config.watch_xids = false;
    config.storage_check_hung_after = milliseconds(1000);
    auto created = cohort::agent::Agent::Create(Context(), config,
                                                std::make_unique<SandboxLauncher>(), &clock);
    if (!created.ok()) Fail("the agent does not start: " + created.status().ToString());
    agent = std::move(*created);
    agent->SetContainerLauncher(std::make_unique<SandboxLauncher>());
  }
  ~Scene() {
    agent.reset();  // kills what it runs
    coordinator.reset();
  }

  void Send(zmq::message_t frame) {
    if (!coordinator->Send(peer, std::move(frame)).ok()) Fail("a send to the agent failed");
  }
  template <typename T>
  void Send(T body) {
    Send(cohort::Encode(next_id++, std::move(body)));
  }

  void Record(const wire::ReplicaStatus* s) {
    if (s == nullptr || !s->job() || !s->replica()) return;
    reported[s->job()->str() + "/" + s->replica()->str() + "/" + std::to_string(s->attempt())] =
        s->state();
  }
  // Answers what the agent sent, as the coordinator's agent endpoint does.
  void Answer() {
    while (true) {
      auto got = coordinator->Receive(milliseconds(0));
      if (!got.ok() || !got->has_value()) return;
      const cohort::Message& m = (*got)->message;
      wire::BodyUnion reply;
      switch (m.type()) {
        case wire::Body::RegisterAgent: {
          peer = (*got)->peer;
          if (const auto* replicas = m.As<wire::RegisterAgent>()->replicas()) {
            for (const wire::ReplicaStatus* s : *replicas) Record(s);
          }
          wire::RegisterAgentReplyT r;
          r.heartbeat_interval_ms = 1000;
          reply.Set(std::move(r));
          break;
        }
        case wire::Body::Heartbeat: {
          wire::HeartbeatReplyT r;
          r.known = true;
          reply.Set(std::move(r));
          break;
        }
        case wire::Body::ReplicaUpdate:
          Record(m.As<wire::ReplicaUpdate>()->status());
          reply.Set(wire::AckT());
          break;
        case wire::Body::LogChunk: {
          const auto* c = m.As<wire::LogChunk>();
          wire::LogAckT ack;
          ack.job = c->job() ? c->job()->str() : "";
          ack.replica = c->replica() ? c->replica()->str() : "";
          ack.attempt = c->attempt();
          ack.next_offset = c->offset() + (c->data() ? c->data()->size() : 0);
          reply.Set(std::move(ack));
          break;
        }
        default:
          reply.Set(wire::AckT());
      }
      (void)coordinator->Send((*got)->peer, cohort::EncodeBody(m.request_id(), std::move(reply)));
    }
  }
  // `passes` passes of the agent's loop, each followed by the coordinator's answers.
  void Pump(int passes) {
    for (int i = 0; i < passes; ++i) {
      cohort::Status s = agent->RunOnce(milliseconds(1));
      if (!s.ok()) Fail("a pass of the loop failed: " + s.ToString());
      Answer();
    }
  }
  // Pumps, the clock moving 10 ms a pass, until `key` is reported RUNNING; false after 20 s (of
  // real time: the replica is a real process, which takes real time to start).
  bool Running(const std::string& key) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      Pump(1);
      if (auto it = reported.find(key); it != reported.end()) {
        if (it->second == wire::ReplicaState::RUNNING) return true;
      }
      clock.Advance(milliseconds(10));
    }
    return false;
  }
};

// Waits for every replica the destroyed agent killed to be gone, reaping those it left; one still
// alive 10 s later outlived its agent. (Only the launched pids: libFuzzer's own children, its
// llvm-symbolizer, live on.)
void ReapReplicas() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (const pid_t pid : LaunchedPids()) {
    while (true) {
      int status = 0;
      const pid_t reaped = ::waitpid(pid, &status, WNOHANG);
      if (reaped != 0) break;  // reaped now, or by the agent before (ECHILD)
      if (std::chrono::steady_clock::now() >= deadline) {
        Fail("replica process " + std::to_string(pid) + " outlived its agent by 10 s");
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  LaunchedPids().clear();
}

// Removes what inputs left under kSandbox (this process's scene, and the directories launches
// named), all but the scenes of other fuzzer processes still running.
void CleanSandbox() {
  std::error_code ec;
  for (fs::directory_iterator it(kSandbox, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool a_pid = !name.empty() && name.find_first_not_of("0123456789") == std::string::npos;
    if (a_pid && name != std::to_string(::getpid()) && fs::exists("/proc/" + name)) continue;
    std::error_code removed;
    fs::remove_all(it->path(), removed);
  }
  ::rmdir(kSandbox);  // where nothing else is left
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The agent's log only when asked (COHORT_FUZZ_LOG=1): to read what an input did.
  spdlog::set_level(std::getenv("COHORT_FUZZ_LOG") ? spdlog::level::debug : spdlog::level::off);
  if (const char* dir = std::getenv("COHORT_WRITE_AGENT_SEEDS")) {
    WriteSeeds(dir);
    std::exit(0);
  }
  // As the daemon does: orphans of replicas come to this process, and the agent reaps them.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // This process's part of the sandbox.
  static const struct Base {
    std::string dir = std::string(kSandbox) + "/" + std::to_string(::getpid());
    ~Base() { CleanSandbox(); }
  } owned;
  CleanSandbox();
  fs::create_directories(owned.dir);
  {
    Scene scene(owned.dir + "/work");
    for (int i = 0; i < 50 && !scene.agent->registered(); ++i) {
      scene.Pump(1);
      scene.clock.Advance(milliseconds(100));
    }
    if (!scene.agent->registered()) Fail("the agent did not register");
    scene.Send(Launch("target", 0));
    if (!scene.Running("target/chief-0/0")) Fail("the scene's replica did not run");

    constexpr int kMaxRecords = 32;
    size_t at = 0;
    for (int records = 0; records < kMaxRecords && at + 2 <= size; ++records) {
      const size_t length = std::min<size_t>(data[at] | (data[at + 1] << 8), size - at - 2);
      if (InSandbox(data + at + 2, length)) {
        scene.Send(zmq::message_t(data + at + 2, length));
      }
      at += 2 + length;
      scene.clock.Advance(milliseconds(1000));
      scene.Pump(3);
    }
    // Whatever came before, a launch is still run and reported.
    scene.Send(Launch("liveness-check", 0));
    if (!scene.Running("liveness-check/chief-0/0")) {
      Fail("after the input, a new launch was not reported RUNNING");
    }
  }
  ReapReplicas();
  CleanSandbox();
  return 0;
}
