// cohort-recovery-bench: how long recovery takes, measured against real daemons on loopback
// (DESIGN.md "Agents and containers", "What each part must reach"). Never run by ctest.
//
//   node-loss           a real coordinator and two real agents; a one-replica job (a shell loop)
//                       runs on one of them. Each run SIGKILLs the agent that hosts the replica and
//                       times, from the kill: the node shown LOST, and the replica RUNNING on the
//                       other node (polled every 5 ms through the client library). The killed
//                       agent is started again before the next run, and the next run kills the
//                       other one. --heartbeat-timeout sets the coordinator's flag. With
//                       --signal TERM the agent gets SIGTERM instead (a preemption notice: it
//                       stops its replicas, reports them PREEMPTED and exits).
//   coordinator-restart a real coordinator, --agents real agents, one running job per agent. Each
//                       run SIGKILLs the coordinator and starts it again on the same state dir and
//                       ports, and times, from the new process's start: it answers a client, and
//                       full reconciliation (every agent re-registered, READY, and every job
//                       RUNNING with every replica RUNNING in the attempt it had: nothing lost,
//                       nothing restarted).
//   coordinator-restart-sim
//                       the same with --agents simulated agents in this process (as in
//                       bench/control_plane: one DEALER each, heartbeating at the interval the
//                       coordinator asks for, answering launches with RUNNING, re-registering with
//                       their replicas when the coordinator does not know them, as cohort-agent
//                       does) and --jobs one-replica jobs, each taking a whole node, so each of
//                       --jobs agents has a running replica to report.
//
// Prints one line per run and the median, min and max of each time.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/flag_pairs.h"
#include "bench/common/sim_agents.h"
#include "common/client.h"
#include "common/messaging.h"
#include "tests/testing/local_cluster.h"
#include "tests/testing/process.h"

namespace {

using namespace cohort;
namespace ct = cohort::testing;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Args {
  std::string mode;
  std::string coordinator = "build/coordinator/cohort-coordinator";
  std::string agent = "build/agent/cohort-agent";
  std::string heartbeat_timeout = "10s";
  std::string signal = "KILL";  // node-loss: KILL (a crash) or TERM (a preemption notice)
  int agents = 3;
  int jobs = 0;  // coordinator-restart-sim: 0 means one per agent
  int runs = 5;
};

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Series {
  explicit Series(std::string n) : name(std::move(n)) {}
  std::string name;
  std::vector<double> values;
};

void PrintSummary(const std::vector<Series>& series) {
  for (const auto& s : series) {
    if (s.values.empty()) {
      std::printf("  %-34s not reached in any run\n", s.name.c_str());
      continue;
    }
    std::vector<double> v = s.values;
    std::sort(v.begin(), v.end());
    double median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    std::printf("  %-34s median %8.1f ms   min %8.1f   max %8.1f   (%zu runs)\n", s.name.c_str(),
                median, v.front(), v.back(), v.size());
  }
}

std::string LoopJob(const std::string& name, const std::string& output_dir, int max_restarts) {
  return "name: " + name + "\noutput_dir: " + output_dir +
         "\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n"
         "    process:\n      command: [/bin/sh, -c, 'while :; do sleep 0.2; done', " +
         name + "]\nscheduling: {timeout: 7d, max_restarts: " + std::to_string(max_restarts) +
         "}\n";
}

const wire::ReplicaInfoT* Chief(const wire::JobInfoT& job) {
  for (const auto& r : job.replicas) {
    if (r && r->replica == "chief-0") return r.get();
  }
  return nullptr;
}

// ---- node-loss ------------------------------------------------------------------------------

// Starts the coordinator and one agent (no GPU, one CPU) per name, each name suffixed with this
// process's pid; prints what failed and returns false.
bool StartCluster(ct::LocalCluster& cluster, const std::vector<std::string>& names) {
  std::string e = cluster.StartCoordinator();
  const std::string pid = std::to_string(::getpid());
  for (size_t i = 0; i < names.size() && e.empty(); ++i) {
    e = cluster.StartAgent({names[i] + "-" + pid, 0, 1});
  }
  if (!e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
  return e.empty();
}

int NodeLoss(const Args& a) {
  ct::LocalCluster cluster({a.coordinator, a.agent}, ct::ClusterOptions{a.heartbeat_timeout});
  if (!StartCluster(cluster, {"bench-a", "bench-b"})) return 1;
  auto client = cluster.Client(milliseconds(2000));
  if (auto s = client.Submit(LoopJob("victim", cluster.scratch("victim"), 1000)); !s.ok()) {
    return std::fprintf(stderr, "submit: %s\n", s.status().ToString().c_str()), 1;
  }
  std::printf(
      "node-loss: SIG%s to the agent, coordinator --heartbeat-timeout %s, 2 agents, "
      "one 1-replica job\n",
      a.signal.c_str(), a.heartbeat_timeout.c_str());
  Series lost{"signal -> node LOST"}, running{"signal -> replica RUNNING elsewhere"};
  int attempt = -1;
  for (int run = 0; run < a.runs; ++run) {
    std::string host;
    bool up = ct::WaitUntil(
        [&] {
          auto job = client.GetJob("victim");
          const wire::ReplicaInfoT* r = job.ok() ? Chief(*job) : nullptr;
          if (!r || r->state != wire::ReplicaState::RUNNING || r->attempt <= attempt) return false;
          host = r->node_id;
          attempt = r->attempt;
          return true;
        },
        std::chrono::seconds(120), milliseconds(5));
    if (!up)
      return std::fprintf(stderr, "the replica is not running\n%s", cluster.Logs().c_str()), 1;
    // Both agents READY before the kill, so the replica has somewhere to go.
    ct::WaitUntil(
        [&] {
          auto list = client.ListNodes();
          if (!list.ok()) return false;
          int ready = 0;
          for (const auto& n : *list) ready += n.state == "READY";
          return ready == 2;
        },
        std::chrono::seconds(30), milliseconds(5));
    auto t0 = Clock::now();
    if (a.signal == "TERM") {
      cluster.agent(host).Signal(SIGTERM);
    } else {
      cluster.agent(host).Kill();
    }
    double t_lost = -1, t_running = -1;
    ct::WaitUntil(
        [&] {
          if (t_lost < 0) {
            auto list = client.ListNodes();
            if (list.ok()) {
              for (const auto& n : *list) {
                if (n.node_id == host && n.state == "LOST") t_lost = Ms(Clock::now() - t0);
              }
            }
          }
          auto job = client.GetJob("victim");
          const wire::ReplicaInfoT* r = job.ok() ? Chief(*job) : nullptr;
          if (r && r->state == wire::ReplicaState::RUNNING && r->attempt > attempt &&
              r->node_id != host) {
            t_running = Ms(Clock::now() - t0);
          }
          return t_running >= 0;
        },
        std::chrono::seconds(120), milliseconds(5));
    if (a.signal == "TERM") cluster.agent(host).Wait(std::chrono::seconds(30));
    std::printf("  run %d: signalled %s; LOST after %.1f ms; RUNNING elsewhere after %.1f ms\n",
                run, host.c_str(), t_lost, t_running);
    if (t_lost >= 0) lost.values.push_back(t_lost);
    if (t_running >= 0) running.values.push_back(t_running);
    // The killed node comes back for the next run.
    if (auto e = cluster.StartAgent({host, 0, 1}); !e.empty()) {
      return std::fprintf(stderr, "%s\n", e.c_str()), 1;
    }
  }
  PrintSummary({lost, running});
  return 0;
}

// ---- coordinator-restart, real agents -------------------------------------------------------

// Every listed node READY and every job RUNNING with each replica RUNNING in `attempts`.
bool Reconciled(CoordinatorClient& client, size_t nodes,
                const std::map<std::string, int>& attempts) {
  auto list = client.ListNodes();
  if (!list.ok() || list->size() != nodes) return false;
  for (const auto& n : *list) {
    if (n.state != "READY") return false;
  }
  for (const auto& [name, attempt] : attempts) {
    auto job = client.GetJob(name);
    if (!job.ok() || job->state != wire::JobState::RUNNING) return false;
    for (const auto& r : job->replicas) {
      if (r->state != wire::ReplicaState::RUNNING || r->attempt != attempt) return false;
    }
  }
  return true;
}

int CoordinatorRestart(const Args& a) {
  ct::LocalCluster cluster({a.coordinator, a.agent}, ct::ClusterOptions{a.heartbeat_timeout});
  std::vector<std::string> names;
  for (int i = 0; i < a.agents; ++i) names.push_back("bench-" + std::to_string(i));
  if (!StartCluster(cluster, names)) return 1;
  std::map<std::string, int> attempts;
  {
    auto client = cluster.Client(milliseconds(2000));
    for (int i = 0; i < a.agents; ++i) {
      std::string name = "job" + std::to_string(i);
      if (auto s = client.Submit(LoopJob(name, cluster.scratch(name), 0)); !s.ok()) {
        return std::fprintf(stderr, "submit: %s\n", s.status().ToString().c_str()), 1;
      }
      attempts[name] = 0;
    }
    if (!ct::WaitUntil([&] { return Reconciled(client, a.agents, attempts); },
                       std::chrono::seconds(60))) {
      return std::fprintf(stderr, "jobs never ran\n%s", cluster.Logs().c_str()), 1;
    }
  }
  std::printf("coordinator-restart: %d real agents, %d running jobs, --heartbeat-timeout %s\n",
              a.agents, a.agents, a.heartbeat_timeout.c_str());
  Series answer{"restart -> answers a client"}, full{"restart -> fully reconciled"};
  for (int run = 0; run < a.runs; ++run) {
    cluster.coordinator().Kill();
    auto t0 = Clock::now();
    if (auto e = cluster.StartCoordinator(); !e.empty())
      return std::fprintf(stderr, "%s\n", e.c_str()), 1;
    double t_answer = Ms(Clock::now() - t0);
    auto client = cluster.Client(milliseconds(2000));
    double t_full = -1;
    if (ct::WaitUntil([&] { return Reconciled(client, a.agents, attempts); },
                      std::chrono::seconds(60), milliseconds(5))) {
      t_full = Ms(Clock::now() - t0);
    }
    std::printf("  run %d: answers after %.1f ms; reconciled after %.1f ms\n", run, t_answer,
                t_full);
    answer.values.push_back(t_answer);
    if (t_full >= 0) full.values.push_back(t_full);
  }
  PrintSummary({answer, full});
  return 0;
}

// ---- coordinator-restart, simulated agents --------------------------------------------------

struct SimAgent {
  std::string id;
  std::unique_ptr<DealerSocket> socket;
  Clock::time_point next_heartbeat;
  Clock::time_point last_heard;
  milliseconds interval{1000};
  bool registered = false;
  bool register_again = false;  // the coordinator does not know it (or went silent)
  uint64_t registrations = 0;   // RegisterAgentReply messages received
  std::map<std::string, wire::ReplicaStatusT> replicas;  // job -> its running replica
};

struct Sim {
  zmq::context_t ctx{2};
  std::vector<SimAgent> agents;
  int gpus = 8;

  void Register(SimAgent& a) {
    wire::RegisterAgentT reg = bench::SimRegistration(a.id, gpus);
    for (const auto& [job, s] : a.replicas) {
      reg.replicas.push_back(std::make_unique<wire::ReplicaStatusT>(s));
    }
    a.registered = false;
    a.register_again = false;
    (void)a.socket->Send(Encode(a.socket->NextRequestId(), std::move(reg)));
    a.last_heard = Clock::now();
  }

  // One pass: replies handled, launches answered RUNNING, heartbeats sent when due; an agent the
  // coordinator does not know (HeartbeatReply known=false, an update refused) registers again.
  void Pump(milliseconds wait) {
    bench::ReceiveAll(agents, wait, [](SimAgent& a, const Message& msg) {
      const auto now = Clock::now();
      a.last_heard = now;
      if (const auto* r = msg.As<wire::RegisterAgentReply>()) {
        a.registered = true;
        ++a.registrations;
        if (r->heartbeat_interval_ms() > 0) a.interval = milliseconds(r->heartbeat_interval_ms());
        a.next_heartbeat = now + a.interval;
      } else if (const auto* h = msg.As<wire::HeartbeatReply>()) {
        if (!h->known() && a.registered) a.register_again = true;
      } else if (msg.type() == wire::Body::ErrorReply) {
        if (msg.ErrorStatus().code() == StatusCode::kFailedPrecondition) a.register_again = true;
      } else if (const auto* l = msg.As<wire::LaunchReplica>()) {
        wire::ReplicaStatusT s = bench::StatusOf(*l, wire::ReplicaState::RUNNING);
        s.pid = 1;
        a.replicas[s.job] = s;
        bench::SendReplicaUpdate(*a.socket, a.id, s);
      } else if (const auto* st = msg.As<wire::StopReplica>()) {
        a.replicas.erase(st->job()->str());
        bench::SendReplicaUpdate(*a.socket, a.id,
                                 bench::StatusOf(*st, wire::ReplicaState::STOPPED));
      }
    });
    auto now = Clock::now();
    for (SimAgent& a : agents) {
      // cohort-agent registers again when the coordinator stays silent too long.
      if (a.registered && now - a.last_heard > std::max(5 * a.interval, milliseconds(3000))) {
        a.register_again = true;
      }
      if (a.register_again) {
        Register(a);
        continue;
      }
      if (a.registered && now >= a.next_heartbeat) {
        bench::SendHeartbeat(*a.socket, a.id);
        a.next_heartbeat = now + a.interval;
      }
    }
  }

  size_t Registered() const {
    return static_cast<size_t>(std::count_if(agents.begin(), agents.end(),
                                             [](const SimAgent& a) { return a.registered; }));
  }
};

int CoordinatorRestartSim(const Args& a) {
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  ct::TempDir dir("cohort-recovery-bench");
  std::filesystem::create_directories(dir.Join("state"));
  const std::string client_ep = "tcp://127.0.0.1:" + std::to_string(ct::PickFreePort());
  const std::string agent_ep = "tcp://127.0.0.1:" + std::to_string(ct::PickFreePort());
  std::unique_ptr<ct::DaemonProcess> coordinator;
  auto start = [&] {
    if (coordinator) coordinator->Kill();
    coordinator = std::make_unique<ct::DaemonProcess>(
        a.coordinator,
        std::vector<std::string>{"--client-endpoint", client_ep, "--agent-endpoint", agent_ep,
                                 "--state-dir", dir.Join("state"), "--insecure",
                                 "--heartbeat-timeout", a.heartbeat_timeout},
        dir.Join("coordinator.log"));
    return coordinator->Start();
  };
  if (!start()) return 1;
  Sim sim;
  sim.ctx.set(zmq::ctxopt::max_sockets, a.agents + 64);
  ClientOptions options;
  options.endpoint = client_ep;
  options.insecure = true;
  options.timeout = milliseconds(1000);
  auto client = CoordinatorClient::Connect(options);
  if (!client.ok()) return 1;
  // The client library blocks; the agents must keep heartbeating meanwhile, so every client call
  // here is short and interleaved with Pump().
  auto answers = [&] { return client->ListJobs().ok(); };
  if (!ct::WaitUntil(answers, std::chrono::seconds(20))) {
    return std::fprintf(stderr, "the coordinator does not answer; log:\n%s\n",
                        coordinator->Log().c_str()),
           1;
  }
  for (int i = 0; i < a.agents; ++i) {
    SimAgent ag;
    ag.id = "sim-" + std::to_string(i);
    ag.socket = std::make_unique<DealerSocket>(*DealerSocket::Connect(sim.ctx, agent_ep, ag.id));
    sim.Register(ag);
    sim.agents.push_back(std::move(ag));
  }
  auto pump_until = [&](auto done, std::chrono::seconds limit) {
    auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      sim.Pump(milliseconds(2));
      if (done()) return true;
    }
    return false;
  };
  if (!pump_until([&] { return sim.Registered() == sim.agents.size(); },
                  std::chrono::seconds(120))) {
    return std::fprintf(stderr, "agents did not register\n"), 1;
  }
  // Jobs: each takes a whole node (all its GPUs), so every agent up to --jobs runs one replica
  // and has it to report when it registers again.
  const int jobs = std::min(a.jobs > 0 ? a.jobs : a.agents, a.agents);
  for (int j = 0; j < jobs; ++j) {
    std::string name = "j" + std::to_string(j);
    std::string yaml = "name: " + name +
                       "\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                       "    resources: {gpus: " +
                       std::to_string(sim.gpus) +
                       ", cpus: 1}\n    process: {command: [/bin/true]}\n";
    while (!client->Submit(yaml).ok()) sim.Pump(milliseconds(1));
    if (j % 50 == 0) sim.Pump(milliseconds(0));
  }
  auto running_jobs = [&] {
    size_t n = 0;
    for (const auto& ag : sim.agents) n += ag.replicas.size();
    return n;
  };
  if (!pump_until([&] { return running_jobs() == static_cast<size_t>(jobs); },
                  std::chrono::seconds(300))) {
    return std::fprintf(stderr, "only %zu of %d jobs launched\n", running_jobs(), jobs), 1;
  }
  size_t nodes_used = static_cast<size_t>(std::count_if(
      sim.agents.begin(), sim.agents.end(), [](const SimAgent& g) { return !g.replicas.empty(); }));
  // Let every RUNNING update reach the state store.
  pump_until([] { return false; }, std::chrono::seconds(3));
  std::printf(
      "coordinator-restart-sim: %d simulated agents, %d running jobs on %zu of them, "
      "--heartbeat-timeout %s\n",
      a.agents, jobs, nodes_used, a.heartbeat_timeout.c_str());

  Series answer{"restart -> answers a client"}, all_registered{"restart -> every agent registered"},
      full{"restart -> fully reconciled"};
  for (int run = 0; run < a.runs; ++run) {
    coordinator->Kill();
    auto t0 = Clock::now();
    if (!start()) return 1;
    double t_answer = -1, t_registered = -1, t_full = -1;
    // The first answer: ListJobs with a short timeout, agents pumped in between.
    options.timeout = milliseconds(50);
    auto quick = CoordinatorClient::Connect(options);
    auto deadline = t0 + std::chrono::seconds(120);
    // Re-registered agents: those that got a RegisterAgentReply from the new process.
    std::vector<uint64_t> before;
    for (const auto& ag : sim.agents) before.push_back(ag.registrations);
    size_t count = 0;
    Clock::time_point last_poll = Clock::now();
    while (Clock::now() < deadline && t_full < 0) {
      sim.Pump(milliseconds(1));
      count = 0;
      for (size_t i = 0; i < sim.agents.size(); ++i) {
        count += sim.agents[i].registrations > before[i];
      }
      if (t_registered < 0 && count == sim.agents.size()) t_registered = Ms(Clock::now() - t0);
      if (Clock::now() - last_poll < milliseconds(20)) continue;
      last_poll = Clock::now();
      if (t_answer < 0) {
        if (quick.ok() && quick->ListJobs().ok()) t_answer = Ms(Clock::now() - t0);
        continue;
      }
      if (t_registered < 0) continue;
      // Every node READY, every job RUNNING, none restarted.
      auto nodes = quick->ListNodes();
      auto list = quick->ListJobs();
      if (!nodes.ok() || !list.ok()) continue;
      bool ok = nodes->size() == sim.agents.size() && list->size() == static_cast<size_t>(jobs);
      for (const auto& n : *nodes) ok = ok && n.state == "READY";
      for (const auto& j : *list) ok = ok && j.state == wire::JobState::RUNNING && j.restarts == 0;
      if (ok) t_full = Ms(Clock::now() - t0);
    }
    std::printf(
        "  run %d: answers after %.1f ms; all %zu agents re-registered after %.1f ms; "
        "reconciled (all READY, all %d jobs RUNNING, 0 restarts) after %.1f ms\n",
        run, t_answer, count, t_registered, jobs, t_full);
    if (t_answer >= 0) answer.values.push_back(t_answer);
    if (t_registered >= 0) all_registered.values.push_back(t_registered);
    if (t_full >= 0) full.values.push_back(t_full);
    if (t_full < 0) {
      std::fprintf(stderr, "not reconciled; coordinator log tail:\n%s\n",
                   coordinator->Log().c_str());
      break;
    }
  }
  PrintSummary({answer, all_registered, full});
  coordinator->Stop();
  return 0;
}

}  // namespace

constexpr char kUsage[] =
    "usage: cohort-recovery-bench node-loss|coordinator-restart|coordinator-restart-sim "
    "[--coordinator PATH] [--agent PATH] [--heartbeat-timeout 10s] [--signal KILL|TERM] "
    "[--agents N] [--jobs N] [--runs N]\n";

int main(int argc, char** argv) {
  if (cohort::bench::AsksForHelp(argc, argv, 1)) return std::fputs(kUsage, stdout), 0;
  Args a;
  if (argc < 2 || argv[1][0] == '-') {
    return std::fprintf(stderr, "cohort-recovery-bench: the first argument is the mode\n%s",
                        kUsage),
           2;
  }
  a.mode = argv[1];
  const std::string bad =
      cohort::bench::ParseFlagPairs(argc, argv, 2,
                                    {{"--coordinator", &a.coordinator},
                                     {"--agent", &a.agent},
                                     {"--heartbeat-timeout", &a.heartbeat_timeout},
                                     {"--agents", &a.agents},
                                     {"--jobs", &a.jobs},
                                     {"--runs", &a.runs},
                                     {"--signal", &a.signal}});
  if (!bad.empty()) return std::fprintf(stderr, "cohort-recovery-bench: %s\n", bad.c_str()), 2;
  spdlog::set_level(spdlog::level::warn);
  a.coordinator = std::filesystem::absolute(a.coordinator).string();
  a.agent = std::filesystem::absolute(a.agent).string();
  if (a.mode == "node-loss") return NodeLoss(a);
  if (a.mode == "coordinator-restart") return CoordinatorRestart(a);
  if (a.mode == "coordinator-restart-sim") return CoordinatorRestartSim(a);
  std::fprintf(stderr, "cohort-recovery-bench: unknown mode %s\n%s", a.mode.c_str(), kUsage);
  return 2;
}
