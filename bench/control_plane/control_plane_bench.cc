// cohort-control-plane-bench: measures the coordinator the way a cluster loads it. It starts a real
// cohort-coordinator process (plaintext, loopback TCP, a fresh state dir), simulates K agents in
// child processes of 4,000 agents each (one DEALER each, registered with G GPUs, heartbeating
// every second, answering every LaunchReplica with RUNNING), and acts as the client. It reports:
//   - submit -> RUNNING latency of a 3-replica job on an idle cluster (median, p90, max);
//   - jobs accepted per second while submitting N jobs (a mix of shapes; the cluster fills and
//     the rest stay queued), 256 requests in flight;
//   - scheduling round time with K agents and the queue full (the coordinator's own
//     measurement, read from its debug log), and a pure Scheduler round in this process;
//   - coordinator CPU (utime+stime over an idle window with every agent heartbeating) and RSS;
//   - restart time with the N jobs (and the running ones) in its state: the coordinator is
//     SIGKILLed and started again on the same state dir --restart-runs times; each run times, from
//     the exec, its first answer (ListNodes), its first full ListJobs, and every node READY again
//     (the agents register again, reporting what they run, as cohort-agent does).
// --coordinator-args "..." passes more flags to the coordinator (split on spaces), so the same
// bench runs against two builds: e.g. an earlier build with its journal and
// "--snapshot-every 100000", against this one with its SQLite store (see bench/RESULTS.md).
// The HTTP endpoint (issue 17): --http-port P gives the coordinator --http-endpoint
// 127.0.0.1:P (without it the coordinator gets no such flag, as an earlier build needs);
// --scrape-ms N GETs /metrics every N ms through the idle window, so the CPU figure with and
// without scraping compares the endpoint's cost; and with the endpoint on, the dashboard's jobs
// page is timed with every job in the state: its API call (/api/jobs, the newest 200 and all),
// and, with --chromium PATH, the whole page in headless Chromium (against about:blank, its
// start-up).
// Never run by ctest.
#include <httplib.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/flag_pairs.h"
#include "bench/common/percentile.h"
#include "bench/common/sim_agents.h"
#include "common/messaging.h"
#include "coordinator/scheduler.h"

namespace {

using namespace cohort;
using cohort::bench::Percentile;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Args {
  std::string coordinator = "build/coordinator/cohort-coordinator";
  int agents = 1000;
  int gpus = 8;
  int jobs = 10000;
  int latency_runs = 20;
  int idle_seconds = 10;
  int restart_runs = 3;
  int port = 17400;
  std::vector<std::string> coordinator_args;
  int http_port = 0;  // 0: no --http-endpoint flag
  int scrape_ms = 0;  // 0: no scraping
  std::string chromium;
};

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Agent {
  std::string id;
  std::unique_ptr<DealerSocket> socket;
  Clock::time_point next_heartbeat;
  bool registered = false;
  // What it runs, (job, replica) -> its RUNNING status: reported again when it registers again.
  std::map<std::pair<std::string, std::string>, wire::ReplicaStatusT> running;
};

// Agents [first, first + count) in a process of their own, so that the client's timings do not
// wait on a pass over thousands of sockets, and each process stays within its open-file limit
// (each agent holds a connection and a ZeroMQ mailbox). Runs until the parent goes away.
[[noreturn]] void SimulateAgents(const std::string& agent_ep, int first, int count, int gpus,
                                 pid_t parent) {
  zmq::context_t ctx(1);
  ctx.set(zmq::ctxopt::max_sockets, count + 64);
  std::vector<Agent> agents;
  for (int i = first; i < first + count; ++i) {
    Agent ag;
    ag.id = "node-" + std::to_string(i);
    ag.socket = std::make_unique<DealerSocket>(*DealerSocket::Connect(ctx, agent_ep, ag.id));
    (void)ag.socket->Send(Encode(ag.socket->NextRequestId(), bench::SimRegistration(ag.id, gpus)));
    ag.next_heartbeat = Clock::now() + std::chrono::seconds(1);
    agents.push_back(std::move(ag));
  }
  // Woken per socket through its ZMQ_FD, so a pass costs what arrived, not a poll of every
  // socket (thousands here, with a heartbeat reply each a second). A send can take a socket's
  // wake-up with it, so each socket sent on is drained right after.
  int epoll = epoll_create1(0);
  for (size_t i = 0; i < agents.size(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    epoll_ctl(epoll, EPOLL_CTL_ADD, agents[i].socket->socket().get(zmq::sockopt::fd), &ev);
  }
  // As cohort-agent does: launches answered RUNNING, stops STOPPED, and when a HeartbeatReply
  // says the coordinator does not know it (it restarted), registered again with what it runs.
  auto drain = [&](Agent& a) {
    while (a.socket->socket().get(zmq::sockopt::events) & ZMQ_POLLIN) {
      auto m = a.socket->Receive(milliseconds(0));
      if (!m.ok() || !m->has_value()) return;
      if ((*m)->As<wire::RegisterAgentReply>()) a.registered = true;
      if (const auto* h = (*m)->As<wire::HeartbeatReply>(); h && !h->known() && a.registered) {
        wire::RegisterAgentT reg = bench::SimRegistration(a.id, gpus);
        for (const auto& [key, status] : a.running) {
          reg.replicas.push_back(std::make_unique<wire::ReplicaStatusT>(status));
        }
        a.registered = false;
        (void)a.socket->Send(Encode(a.socket->NextRequestId(), std::move(reg)));
      }
      if (const auto* l = (*m)->As<wire::LaunchReplica>()) {
        wire::ReplicaStatusT status = bench::StatusOf(*l, wire::ReplicaState::RUNNING);
        status.pid = 1;
        a.running[{status.job, status.replica}] = status;
        bench::SendReplicaUpdate(*a.socket, a.id, status);
      }
      if (const auto* st = (*m)->As<wire::StopReplica>()) {
        a.running.erase({st->job()->str(), st->replica()->str()});
        bench::SendReplicaUpdate(*a.socket, a.id,
                                 bench::StatusOf(*st, wire::ReplicaState::STOPPED));
      }
    }
  };
  for (Agent& ag : agents) drain(ag);
  std::vector<epoll_event> ready(256);
  while (getppid() == parent) {
    int n = epoll_wait(epoll, ready.data(), static_cast<int>(ready.size()), 10);
    for (int k = 0; k < n; ++k) drain(agents[ready[static_cast<size_t>(k)].data.u64]);
    auto now = Clock::now();
    for (Agent& ag : agents) {
      if (now >= ag.next_heartbeat) {
        if (ag.registered) bench::SendHeartbeat(*ag.socket, ag.id);
        ag.next_heartbeat = now + std::chrono::seconds(1);
        drain(ag);
      }
    }
  }
  _exit(0);
}

// The client side: DealerSocket::Call for one request at a time, or pipelined sends.
struct Client {
  zmq::context_t ctx{1};
  std::unique_ptr<DealerSocket> socket;

  // How many nodes the coordinator lists as READY (-1: no answer).
  int ReadyNodes() {
    auto reply = socket->Call(wire::ListNodesT{}, milliseconds(20000));
    const auto* list = reply.ok() ? reply->As<wire::NodeList>() : nullptr;
    if (list == nullptr) return -1;
    int ready = 0;
    if (list->nodes()) {
      for (const auto* n : *list->nodes()) ready += n->state() && n->state()->str() == "READY";
    }
    return ready;
  }
};

struct ProcStat {
  double cpu_seconds = 0;
  long rss_kb = 0;
};

ProcStat ReadProc(pid_t pid) {
  ProcStat s;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) {
    std::fprintf(stderr, "cannot read /proc/%d/stat\n", static_cast<int>(pid));
    return s;
  }
  std::istringstream rest(line.substr(close + 2));
  std::vector<std::string> f;
  std::string tok;
  while (rest >> tok) f.push_back(tok);
  // After the comm field: state is f[0]; utime is field 14 overall -> f[11], stime f[12].
  if (f.size() > 12) {
    s.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / sysconf(_SC_CLK_TCK);
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_kb = std::atol(line.c_str() + 6);
  }
  return s;
}

// Pure scheduler round: K nodes (cluster full but a few GPUs), N queued jobs of mixed shapes.
double PureSchedulerRoundMs(int nodes, int gpus, int jobs) {
  using namespace cohort::coordinator;
  std::mt19937 rng(7);
  std::vector<JobRequest> queue;
  for (int i = 0; i < jobs; ++i) {
    JobRequest r;
    r.name = "j" + std::to_string(i);
    int reps = 1 << (rng() % 3), g = 1 << (rng() % 4);
    r.replicas.assign(static_cast<size_t>(reps), ReplicaDemand{g, 1, 0});
    queue.push_back(std::move(r));
  }
  std::vector<double> times;
  for (int round = 0; round < 5; ++round) {
    ClusterView view(20000, 29999);
    for (int n = 0; n < nodes; ++n) {
      NodeFree f;
      f.node_id = "node-" + std::to_string(n);
      for (int g = 0; g < gpus; ++g) {
        if (n % 10 == 0 || g == 0) f.free_gpus.push_back(g);  // mostly busy
      }
      f.free_cpus = 64;
      f.memory_unlimited = true;
      view.nodes.push_back(std::move(f));
    }
    Scheduler s({5 * 60 * 1000});
    auto t0 = Clock::now();
    auto result = s.Schedule(queue, view, 0);
    times.push_back(Ms(Clock::now() - t0));
    if (round == 0) {
      std::printf("  pure round: %zu placed, %zu searches\n", result.placed.size(),
                  result.searches);
    }
  }
  return Percentile(times, 0.5);
}

// The dashboard's jobs page with every job in the state: its API calls and, with --chromium, the
// page in headless Chromium, agents heartbeating meanwhile.
void DashboardTimings(const Args& a) {
  httplib::Client http("127.0.0.1", a.http_port);
  http.set_read_timeout(60, 0);
  for (const char* path : {"/api/jobs?limit=200", "/api/jobs?limit=0"}) {
    std::vector<double> times;
    size_t bytes = 0;
    for (int i = 0; i < 5; ++i) {
      auto t0 = Clock::now();
      auto r = http.Get(path);
      times.push_back(Ms(Clock::now() - t0));
      if (r) bytes = r->body.size();
    }
    std::printf("  GET %s: median %.1f ms, max %.1f ms (%zu bytes)\n", path, Percentile(times, 0.5),
                Percentile(times, 1.0), bytes);
  }
  if (a.chromium.empty()) return;
  auto load = [&](const std::string& url) {
    std::string cmd = a.chromium +
                      " --headless=new --no-sandbox --disable-gpu --no-first-run "
                      "--user-data-dir=/tmp/cohort-cp-bench-chromium --virtual-time-budget=1000 "
                      "--dump-dom '" +
                      url + "' > /dev/null 2>&1";
    auto t0 = Clock::now();
    int rc = std::system(cmd.c_str());
    (void)rc;
    return Ms(Clock::now() - t0);
  };
  std::vector<double> blank, page;
  for (int i = 0; i < 3; ++i) {
    blank.push_back(load("about:blank"));
    // A virtual-time budget below the page's poll interval: pending fetches pause virtual time,
    // so the DOM is dumped once the first /api/jobs answered and the table is rendered.
    page.push_back(load("http://127.0.0.1:" + std::to_string(a.http_port) + "/#/jobs"));
  }
  std::printf(
      "  dashboard jobs page in headless Chromium: median %.0f ms (about:blank %.0f ms: "
      "the page itself ~%.0f ms)\n",
      Percentile(page, 0.5), Percentile(blank, 0.5),
      Percentile(page, 0.5) - Percentile(blank, 0.5));
}

}  // namespace

constexpr char kUsage[] =
    "usage: cohort-control-plane-bench [--coordinator PATH] [--agents K] [--gpus G] [--jobs N] "
    "[--latency-runs R] [--idle-seconds S] [--restart-runs R] [--port P] "
    "[--coordinator-args \"FLAGS\"] [--http-port P [--scrape-ms N] [--chromium PATH]]\n";

int main(int argc, char** argv) {
  if (cohort::bench::AsksForHelp(argc, argv, 1)) return std::fputs(kUsage, stdout), 0;
  Args a;
  std::string coordinator_args;
  const std::string bad = cohort::bench::ParseFlagPairs(argc, argv, 1,
                                                        {{"--coordinator", &a.coordinator},
                                                         {"--agents", &a.agents},
                                                         {"--gpus", &a.gpus},
                                                         {"--jobs", &a.jobs},
                                                         {"--latency-runs", &a.latency_runs},
                                                         {"--idle-seconds", &a.idle_seconds},
                                                         {"--port", &a.port},
                                                         {"--restart-runs", &a.restart_runs},
                                                         {"--coordinator-args", &coordinator_args},
                                                         {"--http-port", &a.http_port},
                                                         {"--scrape-ms", &a.scrape_ms},
                                                         {"--chromium", &a.chromium}});
  if (!bad.empty()) {
    std::fprintf(stderr, "cohort-control-plane-bench: %s\n%s", bad.c_str(), kUsage);
    return 2;
  }
  a.coordinator_args = Words(coordinator_args);
  spdlog::set_level(spdlog::level::warn);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure as it is taken, even if a run dies
  // The coordinator (which inherits the limit) holds a connection per agent.
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
    if (nofile.rlim_cur != RLIM_INFINITY &&
        nofile.rlim_cur < static_cast<rlim_t>(a.agents) + 1024) {
      std::fprintf(stderr,
                   "warning: the open-file limit (%llu) is short of %d agents' connections\n",
                   static_cast<unsigned long long>(nofile.rlim_cur), a.agents);
    }
  }
  char tmpl[] = "/tmp/cohort-cp-bench-XXXXXX";
  std::string state = mkdtemp(tmpl);
  std::string client_ep = "tcp://127.0.0.1:" + std::to_string(a.port);
  std::string agent_ep = "tcp://127.0.0.1:" + std::to_string(a.port + 1);
  std::string log_path = state + "/coordinator.log";

  // Starts the coordinator on `state`, its log appended to log_path.
  auto start_coordinator = [&]() -> pid_t {
    pid_t child = fork();
    if (child == 0) {
      FILE* log = std::fopen(log_path.c_str(), "a");
      dup2(fileno(log), 2);
      std::vector<std::string> args = {
          a.coordinator,         "--insecure", "--state-dir",      state + "/state",
          "--client-endpoint",   client_ep,    "--agent-endpoint", agent_ep,
          "--heartbeat-timeout", "60s",        "--log-level",      "debug"};
      args.insert(args.end(), a.coordinator_args.begin(), a.coordinator_args.end());
      if (a.http_port > 0) {
        args.insert(args.end(), {"--http-endpoint", "127.0.0.1:" + std::to_string(a.http_port)});
      }
      std::vector<char*> argv;
      for (auto& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(a.coordinator.c_str(), argv.data());
      std::perror("exec cohort-coordinator");
      _exit(127);
    }
    return child;
  };
  pid_t pid = start_coordinator();
  // The agents, in processes of their own (forked before this process makes a ZeroMQ context).
  constexpr int kAgentsPerProcess = 4000;
  std::vector<pid_t> simulators;
  const pid_t self = getpid();
  auto t0 = Clock::now();
  for (int first = 0; first < a.agents; first += kAgentsPerProcess) {
    pid_t child = fork();
    if (child == 0) {
      SimulateAgents(agent_ep, first, std::min(kAgentsPerProcess, a.agents - first), a.gpus, self);
    }
    simulators.push_back(child);
  }
  auto stop_simulators = [&] {
    for (pid_t p : simulators) kill(p, SIGKILL);
    for (pid_t p : simulators) waitpid(p, nullptr, 0);
  };
  Client sim;
  sim.socket = std::make_unique<DealerSocket>(*DealerSocket::Connect(sim.ctx, client_ep));
  if (sim.ReadyNodes() < 0) {
    std::fprintf(stderr, "coordinator did not answer; see %s\n", log_path.c_str());
    kill(pid, SIGKILL);
    stop_simulators();
    return 1;
  }
  std::printf("control plane bench: %d agents x %d GPUs, %d jobs, coordinator pid %d\n", a.agents,
              a.gpus, a.jobs, pid);

  // Agents register.
  int ready = 0;
  while (Clock::now() - t0 < std::chrono::seconds(120) && (ready = sim.ReadyNodes()) < a.agents) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  std::printf("  %d of %d agents registered in %.0f ms\n", ready, a.agents, Ms(Clock::now() - t0));

  // Latency: submit -> RUNNING of a 3-replica job on an idle cluster.
  std::vector<double> lat;
  for (int r = 0; r < a.latency_runs; ++r) {
    std::string name = "lat" + std::to_string(r);
    wire::SubmitJobT sub;
    sub.spec_yaml = bench::SimJobYaml(name, 3, 1);
    auto start = Clock::now();
    auto reply = sim.socket->Call(std::move(sub), milliseconds(30000));
    if (!reply.ok()) {
      std::fprintf(stderr, "submit failed: %s\n", reply.status().ToString().c_str());
      break;
    }
    while (Clock::now() - start < std::chrono::seconds(30)) {
      wire::GetJobT get;
      get.name = name;
      auto info = sim.socket->Call(std::move(get), milliseconds(30000));
      if (info.ok() && info->As<wire::JobInfo>() &&
          info->As<wire::JobInfo>()->state() == wire::JobState::RUNNING) {
        lat.push_back(Ms(Clock::now() - start));
        break;
      }
    }
  }
  std::printf(
      "  submit->RUNNING (3 replicas, polled every ~1 ms): median %.2f ms, p90 %.2f ms, "
      "max %.2f ms over %zu runs\n",
      Percentile(lat, 0.5), Percentile(lat, 0.9), Percentile(lat, 1.0), lat.size());

  // Throughput: N submissions, 256 in flight.
  std::mt19937 rng(1);
  int sent = 0, accepted = 0, refused = 0;
  std::map<uint64_t, bool> inflight;
  auto s0 = Clock::now();
  while (accepted + refused < a.jobs && Clock::now() - s0 < std::chrono::seconds(600)) {
    while (sent < a.jobs && inflight.size() < 256) {
      int reps = 1 << (rng() % 3), g = 1 << (rng() % 4);
      wire::SubmitJobT sub;
      sub.spec_yaml = bench::SimJobYaml("job" + std::to_string(sent), reps, g);
      uint64_t id = sim.socket->NextRequestId();
      if (!sim.socket->Send(Encode(id, std::move(sub))).ok()) break;
      inflight[id] = true;
      ++sent;
    }
    for (auto wait = milliseconds(1);; wait = milliseconds(0)) {
      auto m = sim.socket->Receive(wait);
      if (!m.ok() || !m->has_value()) break;
      if (inflight.erase((*m)->request_id())) {
        if ((*m)->ErrorStatus().ok())
          ++accepted;
        else
          ++refused;
      }
    }
  }
  double submit_s = Ms(Clock::now() - s0) / 1000.0;
  std::printf("  submitted %d jobs: %d accepted, %d refused in %.2f s = %.0f jobs/s\n", sent,
              accepted, refused, submit_s, accepted / submit_s);

  // Idle window: every agent heartbeats once a second, the queue stays full.
  // With --scrape-ms, a thread scrapes /metrics meanwhile, as Prometheus would.
  std::atomic<bool> scraping{a.http_port > 0 && a.scrape_ms > 0};
  std::atomic<int> scrapes{0}, scrape_failures{0};
  std::atomic<size_t> scrape_bytes{0};
  std::thread scraper([&] {
    httplib::Client http("127.0.0.1", a.http_port);
    while (scraping.load()) {
      auto r = http.Get("/metrics");
      if (r && r->status == 200) {
        ++scrapes;
        scrape_bytes = r->body.size();
      } else {
        ++scrape_failures;
      }
      std::this_thread::sleep_for(milliseconds(a.scrape_ms));
    }
  });
  ProcStat p0 = ReadProc(pid);
  auto i0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(a.idle_seconds));
  ProcStat p1 = ReadProc(pid);
  double idle_wall = Ms(Clock::now() - i0) / 1000.0;
  scraping = false;
  scraper.join();
  std::printf(
      "  coordinator with %d heartbeating agents and the queue full: CPU %.1f%% of one "
      "core over %.0f s, RSS %.1f MiB\n",
      a.agents, 100.0 * (p1.cpu_seconds - p0.cpu_seconds) / idle_wall, idle_wall,
      p1.rss_kb / 1024.0);
  if (a.http_port > 0) {
    std::printf(
        "  HTTP endpoint on 127.0.0.1:%d; /metrics scraped every %d ms: %d scrapes "
        "(%zu bytes each), %d failed\n",
        a.http_port, a.scrape_ms, scrapes.load(), scrape_bytes.load(), scrape_failures.load());
    DashboardTimings(a);
  }

  // The coordinator's own round timings from its debug log (the last stats line, before any
  // restart).
  std::string last_stats;
  long max_warn_ms = 0;
  {
    std::ifstream log(log_path);
    std::string line;
    while (std::getline(log, line)) {
      if (line.find("scheduler stats:") != std::string::npos) last_stats = line;
      auto w = line.find("scheduling round took ");
      if (w != std::string::npos) {
        max_warn_ms = std::max(max_warn_ms, std::atol(line.c_str() + w + 22));
      }
    }
  }

  // Restart: SIGKILL (nothing flushed at exit), then the same state dir again.
  std::vector<double> first_answer, full_list, ready_again;
  for (int r = 0; r < a.restart_runs; ++r) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    auto r0 = Clock::now();
    pid = start_coordinator();
    double answered = -1;
    // Each try waits 2 s: a coordinator still loading reads its requests only once it is up, and
    // answers every one it was sent; tries every 20 ms would leave it a backlog of hundreds of
    // ListNodes (each a walk of the jobs and 10,000 nodes) to answer before the first in time.
    while (Clock::now() - r0 < std::chrono::seconds(120)) {
      if (sim.socket->Call(wire::ListNodesT{}, milliseconds(2000)).ok()) {
        answered = Ms(Clock::now() - r0);
        break;
      }
    }
    auto list = sim.socket->Call(wire::ListJobsT{}, milliseconds(60000));
    size_t listed = list.ok() && list->As<wire::JobList>() && list->As<wire::JobList>()->jobs()
                        ? list->As<wire::JobList>()->jobs()->size()
                        : 0;
    double listed_ms = Ms(Clock::now() - r0);
    // The agents learn of the restart from their next heartbeat's reply and register again with
    // what they run (a reconnect storm of --agents registrations).
    double all_ready = -1;
    while (answered >= 0 && Clock::now() - r0 < std::chrono::seconds(180)) {
      if (sim.ReadyNodes() == a.agents) {
        all_ready = Ms(Clock::now() - r0);
        break;
      }
      std::this_thread::sleep_for(milliseconds(200));
    }
    std::printf(
        "  restart %d: first answer %.0f ms, ListJobs with %zu jobs %.0f ms, all %d nodes READY "
        "again %.0f ms\n",
        r + 1, answered, listed, listed_ms, a.agents, all_ready);
    if (answered < 0 || listed == 0) break;
    first_answer.push_back(answered);
    full_list.push_back(listed_ms);
    if (all_ready >= 0) ready_again.push_back(all_ready);
  }
  if (!first_answer.empty()) {
    std::uintmax_t bytes = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(state + "/state", ec)) {
      if (e.is_regular_file()) bytes += e.file_size();
    }
    std::printf(
        "  restart with the state of %d submitted jobs (%.1f MiB of state files): first "
        "answer median %.0f ms (max %.0f), full ListJobs median %.0f ms over %zu runs; every "
        "node READY again median %.0f ms over %zu runs\n",
        a.jobs + a.latency_runs, bytes / 1048576.0, Percentile(first_answer, 0.5),
        Percentile(first_answer, 1.0), Percentile(full_list, 0.5), first_answer.size(),
        ready_again.empty() ? -1.0 : Percentile(ready_again, 0.5), ready_again.size());
  }

  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  stop_simulators();
  std::printf("  coordinator exit: %s\n",
              WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "clean (0)" : "NOT clean");

  if (!last_stats.empty()) {
    std::printf("  coordinator %s\n",
                last_stats.substr(last_stats.find("scheduler stats:")).c_str());
  }
  if (max_warn_ms) std::printf("  slowest round over 50 ms: %ld ms\n", max_warn_ms);
  std::printf("  pure Scheduler round, %d nodes, %d queued jobs (median of 5): %.2f ms\n", a.agents,
              a.jobs, PureSchedulerRoundMs(a.agents, a.gpus, a.jobs));
  std::filesystem::remove_all(state);
  return 0;
}
