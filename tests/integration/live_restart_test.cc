// A live restart of cohort-agent (SIGUSR2: agent/handoff.h), with real cohort-coordinator and
// cohort-agent processes on loopback, as a package upgrade does it: the agent runs from a copy of
// its binary (through a symlink to it), the copy is replaced by a new file or the symlink
// re-pointed to another install, and SIGUSR2 makes the agent execute the new one in place. Its
// replicas run on untouched (the same processes, still its children), their job spends no restart,
// their logs reach the coordinator whole (no line lost or repeated across the handover), and their
// ends are reported as before, a death by signal included (in a PID namespace that comes through
// init's status pipe, kept open across the execve). A container replica (runc or crun, a busybox
// image made with umoci) runs on the same way: its runtime's foreground process and its container
// are handed over.
//
// Each test runs twice: with the agent's defaults (cgroups and, as root, a PID namespace per
// replica) and with --cgroups off (process groups and COHORT_ATTEMPT_DIR only).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/build_version.h"
#include "common/client.h"
#include "tests/testing/cluster_test.h"
#include "tests/testing/oci_image.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
using namespace std::chrono_literals;

// $1: the directory of its files; its name is COHORT_REPLICA's. Prints "tick N" every 50 ms until
// $1/go exists, then "done after N", then exits with the code in go, or kills itself with SIGABRT
// for "abort".
constexpr char kTicker[] = R"sh(out="$1"; name="$COHORT_REPLICA"
touch "$out/$name.up"
i=0
while [ ! -s "$out/go" ]; do i=$((i+1)); echo "tick $i"; sleep 0.05; done
echo "done after $i"
how="$(cat "$out/go")"
if [ "$how" = abort ]; then kill -ABRT $$; fi
exit "$how"
)sh";

// The pids of `pid`'s children that its main thread started (the agent launches replicas there).
std::set<pid_t> Children(pid_t pid) {
  std::istringstream in(
      ct::ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
  std::set<pid_t> out;
  for (pid_t child; in >> child;) out.insert(child);
  return out;
}

// How many times `what` is in `text`.
size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string Executable(pid_t pid) {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).string();
}

class LiveRestartTest : public ct::ClusterTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool cgroups_off() const { return GetParam(); }

  void SetUp() override {
    if (!NeedBinaries()) return;
    ASSERT_NO_FATAL_FAILURE(StartCoordinator());
    // The agent runs from a copy of its binary, which the test replaces as an upgrade would,
    // with cohort-replica-init beside it as a package installs it (outside the cluster's dir,
    // whose processes are taken for replicas'), started through a symlink to it, as an
    // alternatives link or a versioned install's "current" is: bin/cohort-agent -> v1/...
    ASSERT_NO_FATAL_FAILURE(Install("v1"));
    binary_ = bin_.Join("cohort-agent");
    std::filesystem::create_symlink("v1/cohort-agent", binary_);
    ct::AgentOptions options;
    options.node_id = node_;
    // A config file as a package installs one, which a test may edit under the running agent.
    config_ = bin_.Join("agent.conf");
    ct::WriteFile(config_, "# cohort-agent's config file\nlog-level = info\n");
    options.extra_args = {"--config", config_};
    if (cgroups_off()) {
      options.extra_args.insert(options.extra_args.end(), {"--cgroups", "off"});
    }
    // sh -c SCRIPT COPY <this build's agent> ARGS...: the build's path is dropped.
    options.wrapper = {"/bin/sh", "-c", "shift; exec \"$0\" \"$@\"", binary_};
    ASSERT_EQ(cluster_->StartAgent(options), "");
    if (!cgroups_off() && ::geteuid() == 0) {
      // Root: replicas get PID namespaces, whose inits' status pipes cross the execve.
      ASSERT_NE(AgentLog().find("run in PID namespaces of their own"), std::string::npos)
          << AgentLog();
    }
    out_ = cluster_->scratch("out");
    std::filesystem::create_directories(out_);
    ct::WriteFile(cluster_->scratch("ticker.sh"), kTicker);
  }

  ct::DaemonProcess& agent() { return cluster_->agent(node_); }
  std::string AgentLog() { return agent().Log(1 << 20); }

  // Submits a job of a chief and `workers` workers, each a ticker; returns once each ticks.
  std::string SubmitTickers(int workers, int max_restarts) {
    auto pool = [&](const std::string& role, int replicas) {
      return "  - role: " + role + "\n    replicas: " + std::to_string(replicas) +
             "\n    resources: {gpus: 0, cpus: 1}\n    process:\n      command: [/bin/sh, " +
             cluster_->scratch("ticker.sh") + ", " + out_ + "]\n";
    };
    std::string yaml = "name: ticking\nworker_pools:\n" + pool("chief", 1) +
                       (workers > 0 ? pool("worker", workers) : "") +
                       "scheduling: {max_restarts: " + std::to_string(max_restarts) + "}\n";
    auto client = cluster_->Client();
    auto name = client.Submit(yaml);
    EXPECT_TRUE(name.ok()) << name.status().ToString();
    if (!name.ok()) return "";
    std::vector<std::string> replicas = {"chief-0"};
    for (int i = 0; i < workers; ++i) replicas.push_back("worker-" + std::to_string(i));
    EXPECT_TRUE(ct::WaitUntil(
        [&] {
          return std::all_of(replicas.begin(), replicas.end(), [&](const std::string& r) {
            return std::filesystem::exists(out_ + "/" + r + ".up");
          });
        },
        20s))
        << cluster_->Logs();
    EXPECT_TRUE(ct::WaitForJobState(client, *name, wire::JobState::RUNNING, 10s));
    return *name;
  }

  // A copy of this build's agent and cohort-replica-init in bin/<version>/.
  void Install(const std::string& version) {
    const std::filesystem::path dir = bin_.Join(version), built = COHORT_AGENT_BIN;
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(built, dir / "cohort-agent");
    std::filesystem::copy_file(built.parent_path() / "cohort-replica-init",
                               dir / "cohort-replica-init");
  }

  // Upgrades the agent's binary, SIGUSR2s the agent and waits until the new image took
  // `attempts` replica attempts over. The upgrade replaces the file the symlink names (a
  // package's dpkg -i), or with `repoint` installs v2 and points the symlink there.
  void LiveRestart(size_t attempts, bool repoint = false) {
    std::string target = bin_.Join("v1/cohort-agent");
    if (repoint) {
      ASSERT_NO_FATAL_FAILURE(Install("v2"));
      std::filesystem::create_symlink("v2/cohort-agent", binary_ + ".new");
      std::filesystem::rename(binary_ + ".new", binary_);
      target = bin_.Join("v2/cohort-agent");
    } else {
      std::filesystem::copy_file(COHORT_AGENT_BIN, target + ".new");
      std::filesystem::rename(target + ".new", target);
    }
    const pid_t pid = agent().pid();
    if (!repoint) {
      EXPECT_TRUE(Executable(pid).ends_with(" (deleted)")) << Executable(pid);
    }
    const std::string took = "live restart: took over " + std::to_string(attempts) + " of " +
                             std::to_string(attempts) + " replica attempt(s)";
    const size_t took_before = Occurrences(AgentLog(), took);
    agent().Signal(SIGUSR2);
    ASSERT_TRUE(ct::WaitUntil([&] { return Occurrences(AgentLog(), took) > took_before; }, 30s))
        << AgentLog();
    EXPECT_TRUE(agent().running());
    EXPECT_EQ(agent().pid(), pid);
    EXPECT_EQ(Executable(pid), target);  // the new file's image, not the old one
  }

  // SIGUSR2s the agent, whose live restart must be refused for `why` (in its log): the same
  // agent process runs on.
  void ExpectRestartRefused(const std::string& why) {
    const pid_t pid = agent().pid();
    agent().Signal(SIGUSR2);
    ASSERT_TRUE(ct::WaitUntil(
        [&] { return AgentLog().find("live restart refused: ") != std::string::npos; }, 30s))
        << AgentLog();
    EXPECT_NE(AgentLog().find(why), std::string::npos) << AgentLog();
    EXPECT_TRUE(agent().running());
    EXPECT_EQ(agent().pid(), pid);
  }

  // Lets the tickers of `job` end with 0; the job must end SUCCEEDED having spent no restart.
  void ExpectTickersEndWithoutARestart(const std::string& job) {
    ct::WriteFile(out_ + "/go", "0");
    auto client = cluster_->Client();
    auto ended = ct::WaitForJobEnd(client, job, 30s);
    EXPECT_EQ(ended.state, wire::JobState::SUCCEEDED) << ended.message;
    EXPECT_EQ(ended.restarts, 0);
  }

  // The chief's log as the coordinator has it, once it holds the line `last_line_prefix`.
  std::string ChiefLog(const std::string& job, const std::string& last_line_prefix) {
    auto client = cluster_->Client();
    std::string text;
    EXPECT_TRUE(ct::WaitUntil(
        [&] {
          auto logs = client.ReadLogs(job, "chief-0", 0, /*attempt=*/0);
          if (!logs.ok()) return false;
          text.assign(logs->data.begin(), logs->data.end());
          return text.find("\n" + last_line_prefix) != std::string::npos;
        },
        20s))
        << text;
    return text;
  }

  void ExpectAFailedStartIsUndone(const std::string& start, const std::string& named);

  // The agent, asked to stop, exits 0 having logged each of `marks` in that order and then its
  // preemption of `job`'s one replica, which ends PREEMPTED.
  void ExpectStoppedPreempting(const std::string& job, const std::vector<std::string>& marks) {
    const std::optional<int> status = agent().Wait(30s);
    ASSERT_TRUE(status.has_value()) << "the agent did not stop: " << AgentLog();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status << "\n" << AgentLog();
    const std::string log = AgentLog();
    size_t at = 0;
    for (const std::string& mark : marks) {
      at = log.find(mark, at);
      ASSERT_NE(at, std::string::npos) << "no '" << mark << "' where expected: " << log;
    }
    EXPECT_NE(log.find("preemption: signalled 1 replica(s)", at), std::string::npos) << log;
    auto client = cluster_->Client();
    auto replicas = ct::WaitForReplicasEnded(client, job, 20s);
    ASSERT_EQ(replicas.replicas.size(), 1u);
    EXPECT_EQ(replicas.replicas[0]->state, wire::ReplicaState::PREEMPTED)
        << replicas.replicas[0]->message;
  }

  // Replaces v1's binary with a script that runs v2's agent (installed now) as it is for the
  // pre-flights, after the shell code `preflight`, and runs the shell code `start` before it
  // starts it for the live restart (the agent's arguments are "$@").
  void UpgradeToAScript(const std::string& start, const std::string& preflight = ":") {
    ASSERT_NO_FATAL_FAILURE(Install("v2"));
    const std::string v1 = bin_.Join("v1/cohort-agent"), v2 = bin_.Join("v2/cohort-agent");
    ct::WriteFile(v1 + ".new",
                  "#!/bin/sh\ncase \" $* \" in *\" --version \"*|*\" --help \"*|*\" "
                  "--check-config \"*) " +
                      preflight + "; exec " + v2 + " \"$@\" ;; esac\n" + start + "\nexec " + v2 +
                      " \"$@\"\n");
    std::filesystem::permissions(v1 + ".new", std::filesystem::perms::owner_all);
    std::filesystem::rename(v1 + ".new", v1);
  }

  // Shell code for UpgradeToAScript that gives the agent a port this test holds (`port`, its
  // HOST:PORT) in place of its --http-endpoint: its start then fails.
  std::string StartOnATakenPort(std::string* port) {
    taken_port_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(::bind(taken_port_, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(::listen(taken_port_, 1), 0);
    EXPECT_EQ(::getsockname(taken_port_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    *port = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
    return "for a in \"$@\"; do\n"
           "  shift; [ \"$prev\" = --http-endpoint ] && a=" +
           *port +
           "\n"
           "  set -- \"$@\" \"$a\"; prev=$a\n"
           "done";
  }
  ~LiveRestartTest() override {
    if (taken_port_ >= 0) ::close(taken_port_);
  }
  int taken_port_ = -1;

  const std::string node_ = UniqueNodeId("liverestart");
  ct::TempDir bin_{"cohort-live-restart"};
  std::string binary_;
  std::string config_;
  std::string out_;
};

TEST_P(LiveRestartTest, ReplicasRunOnUntouchedAndTheirJobSpendsNoRestart) {
  const std::string job = SubmitTickers(/*workers=*/1, /*max_restarts=*/2);
  ASSERT_FALSE(job.empty());
  const std::set<pid_t> replicas = Children(agent().pid());
  ASSERT_EQ(replicas.size(), 2u) << "the agent's children: its two replicas' main processes";

  ASSERT_NO_FATAL_FAILURE(LiveRestart(2));
  EXPECT_EQ(Children(agent().pid()), replicas) << "the same processes, still the agent's children";
  auto client = cluster_->Client();
  auto info = client.GetJob(job);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->state, wire::JobState::RUNNING);
  EXPECT_EQ(info->restarts, 0);
  for (const auto& r : info->replicas) {
    EXPECT_EQ(r->state, wire::ReplicaState::RUNNING) << r->replica;
    EXPECT_EQ(r->attempt, 0) << r->replica;
  }

  // They tick on past the handover, then end; the new image reaps and reports them.
  const std::string before = ChiefLog(job, "tick 1");
  const size_t ticks_at_handover = std::count(before.begin(), before.end(), '\n');
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        std::string now = ChiefLog(job, "tick");
        return static_cast<size_t>(std::count(now.begin(), now.end(), '\n')) >=
               ticks_at_handover + 10;
      },
      20s));
  ct::WriteFile(out_ + "/go", "0");
  auto ended = ct::WaitForJobEnd(client, job, 30s);
  EXPECT_EQ(ended.state, wire::JobState::SUCCEEDED) << ended.message << cluster_->Logs();
  EXPECT_EQ(ended.restarts, 0);
  auto replicas_ended = ct::WaitForReplicasEnded(client, job, 20s);
  for (const auto& r : replicas_ended.replicas) {
    EXPECT_EQ(r->state, wire::ReplicaState::SUCCEEDED) << r->replica << ": " << r->message;
    EXPECT_EQ(r->exit_code, 0) << r->replica;
  }

  // Every line once, in order, across the handover.
  const std::string log = ChiefLog(job, "done after");
  std::istringstream lines(log);
  int expected = 1;
  std::string line;
  std::string last;
  while (std::getline(lines, line)) {
    if (!line.starts_with("tick ")) {
      last = line;
      continue;
    }
    EXPECT_EQ(line, "tick " + std::to_string(expected)) << log;
    ++expected;
  }
  EXPECT_EQ(last, "done after " + std::to_string(expected - 1)) << log;
  EXPECT_EQ(cluster_->WaitForNoReplicaProcesses(), "");
}

TEST_P(LiveRestartTest, AnEndAfterTheHandoverIsReportedAsBefore) {
  const std::string job = SubmitTickers(/*workers=*/0, /*max_restarts=*/0);
  ASSERT_FALSE(job.empty());
  ASSERT_NO_FATAL_FAILURE(LiveRestart(1));
  ct::WriteFile(out_ + "/go", "abort");  // the command kills itself with SIGABRT
  auto client = cluster_->Client();
  auto ended = ct::WaitForJobEnd(client, job, 30s);
  EXPECT_EQ(ended.state, wire::JobState::FAILED) << ended.message;
  auto replicas = ct::WaitForReplicasEnded(client, job, 20s);
  ASSERT_EQ(replicas.replicas.size(), 1u);
  const auto& chief = *replicas.replicas[0];
  EXPECT_EQ(chief.signal, SIGABRT) << chief.message;
  EXPECT_EQ(chief.exit_code, 128 + SIGABRT) << chief.message;
  EXPECT_NE(ended.message.find("killed by signal 6 (SIGABRT)"), std::string::npos) << ended.message;

  // Another live restart hands over how it ended, which each registration reports (a
  // coordinator restored from an older backup learns it there).
  ASSERT_NO_FATAL_FAILURE(LiveRestart(0));
  EXPECT_NE(
      AgentLog().find("took over 0 of 0 replica attempt(s) from cohort-agent " +
                      std::string(CohortBuildVersion()) + "; kept how 1 earlier one(s) ended"),
      std::string::npos)
      << AgentLog();
}

TEST_P(LiveRestartTest, TheHandoverWaitsForAReplicaBeingStopped) {
  const std::string job = SubmitTickers(/*workers=*/0, /*max_restarts=*/0);
  ASSERT_FALSE(job.empty());
  // A second job whose replica takes a second to stop: cancelled, it is being stopped when the
  // restart is asked for, and its end must reach the coordinator from the old image.
  const std::string slow_out = cluster_->scratch("slow");
  std::filesystem::create_directories(slow_out);
  auto client = cluster_->Client();
  auto slow = client.Submit(
      "name: slow-stop\nworker_pools:\n  - role: chief\n    replicas: 1\n"
      "    resources: {gpus: 0, cpus: 1}\n    process:\n      command: [/bin/sh, -c, "
      "\"trap 'touch " +
      slow_out + "/term; sleep 1; exit 0' TERM; touch " + slow_out +
      "/up; while :; do sleep 0.05; done\"]\n");
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  ASSERT_TRUE(ct::WaitUntil([&] { return std::filesystem::exists(slow_out + "/up"); }, 20s));
  ASSERT_TRUE(client.Cancel(*slow).ok());
  ASSERT_TRUE(ct::WaitUntil([&] { return std::filesystem::exists(slow_out + "/term"); }, 10s))
      << AgentLog();
  ASSERT_NO_FATAL_FAILURE(LiveRestart(1));  // the ticker alone, once the slow one has ended
  const std::string log = AgentLog();
  const size_t asked = log.find("live restart asked for");
  const size_t ended = log.find("slow-stop/chief-0 attempt 0: STOPPED");
  const size_t handed = log.find("live restart: handing over 1 replica attempt(s)");
  ASSERT_NE(asked, std::string::npos) << log;
  EXPECT_LT(asked, ended) << log;
  EXPECT_LT(ended, handed) << log;
  auto slow_info = ct::WaitForReplicasEnded(client, *slow, 10s);
  EXPECT_EQ(slow_info.state, wire::JobState::CANCELLED);
  ExpectTickersEndWithoutARestart(job);
}

// A `cohort exec` command running beside a replica when the restart is asked for is killed (the
// execve would cut it off) and its client told why, instead of holding the restart back until the
// command ends (up to its --kill-after, a minute by default).
TEST_P(LiveRestartTest, ACohortExecCommandRunningThereIsKilledAndTheHandoverGoesOn) {
  if (!NeedBinaries({COHORT_CLI_BIN})) return;
  const std::string job = SubmitTickers(/*workers=*/0, /*max_restarts=*/0);
  ASSERT_FALSE(job.empty());
  const std::string up = out_ + "/exec.up";
  ct::DaemonProcess exec(COHORT_CLI_BIN,
                         Cli({"exec", job, "--kill-after", "10m", "--", "/bin/sh", "-c",
                              "touch " + up + "; exec sleep 300"}),
                         cluster_->scratch("exec.log"));
  ASSERT_TRUE(exec.Start());
  ASSERT_TRUE(ct::WaitUntil([&] { return std::filesystem::exists(up); }, 20s)) << exec.Log();
  ASSERT_NO_FATAL_FAILURE(LiveRestart(1));
  const std::optional<int> status = exec.Wait(20s);
  ASSERT_TRUE(status.has_value()) << "cohort exec did not end: " << exec.Log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 137) << *status << "\n" << exec.Log();
  EXPECT_NE(exec.Log().find("was killed: the agent on " + node_ + " restarted live (an upgrade)"),
            std::string::npos)
      << exec.Log();
  ExpectTickersEndWithoutARestart(job);
}

TEST_P(LiveRestartTest, AnUpgradeThatRepointsTheAgentsSymlinkRunsTheNewTarget) {
  const std::string job = SubmitTickers(/*workers=*/0, /*max_restarts=*/0);
  ASSERT_FALSE(job.empty());
  ASSERT_NO_FATAL_FAILURE(LiveRestart(1, /*repoint=*/true));
  ExpectTickersEndWithoutARestart(job);
}

TEST_P(LiveRestartTest, SignalsDuringTheNewImagesStartDoNotEndIt) {
  // SIGUSR2's default action ends a process: one that reaches the new image before its handler
  // (while the binary loads) would end the agent and its replicas with it. A burst sent as the
  // old image executes the new one lands there; each is held until the handler is in place.
  const std::string job = SubmitTickers(/*workers=*/0, /*max_restarts=*/0);
  ASSERT_FALSE(job.empty());
  const pid_t pid = agent().pid();
  agent().Signal(SIGUSR2);
  ASSERT_TRUE(
      ct::WaitUntil([&] { return AgentLog().find("live restart: executing") != std::string::npos; },
                    30s, std::chrono::milliseconds(1)));
  for (int i = 0; i < 40; ++i) {
    ::kill(pid, SIGUSR2);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(ct::WaitUntil(
      [&] { return AgentLog().find("live restart: took over 1 of 1") != std::string::npos; }, 30s))
      << AgentLog();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // any restart still asked for
  EXPECT_TRUE(agent().running()) << AgentLog();
  EXPECT_EQ(AgentLog().find("took over 0 of"), std::string::npos) << AgentLog();
  ExpectTickersEndWithoutARestart(job);
}

TEST_P(LiveRestartTest, ANewBinaryThatDoesNotRunIsRefusedAndTheAgentRunsOn) {
  const std::string job = SubmitTickers(/*workers=*/0, /*max_restarts=*/0);
  ASSERT_FALSE(job.empty());
  // An upgrade that left a binary whose libraries do not load, say.
  const std::string broken = bin_.Join("v1/cohort-agent");
  ct::WriteFile(broken + ".new",
                "#!/bin/sh\necho 'error while loading shared libraries' >&2\nexit 127\n");
  std::filesystem::permissions(broken + ".new", std::filesystem::perms::owner_all);
  std::filesystem::rename(broken + ".new", broken);
  ASSERT_NO_FATAL_FAILURE(
      ExpectRestartRefused("--version exited with 127 and said: error while loading shared"));
  // A good binary then: the next request goes through.
  ASSERT_NO_FATAL_FAILURE(LiveRestart(1));
  ExpectTickersEndWithoutARestart(job);
}

TEST_P(LiveRestartTest, ANewBinaryThatRefusesTheConfigIsRefusedAndTheAgentRunsOn) {
  const std::string job = SubmitTickers(/*workers=*/0, /*max_restarts=*/0);
  ASSERT_FALSE(job.empty());
  // The config file was edited with a mistake since the agent started: the new image would
  // refuse it at its start, with the replicas its children.
  ct::WriteFile(config_, "log-level = info\ngpuz = 2\n");
  ASSERT_NO_FATAL_FAILURE(
      ExpectRestartRefused("refuses this agent's configuration (--check-config exited with 2)"));
  EXPECT_NE(AgentLog().find("gpuz"), std::string::npos) << "the mistake is named";
  // Mended, the next request goes through.
  ct::WriteFile(config_, "log-level = info\n");
  ASSERT_NO_FATAL_FAILURE(LiveRestart(1));
  ExpectTickersEndWithoutARestart(job);
}

// An upgrade whose new binary passes the pre-flights but fails its start after it took the
// handoff is undone: the new image goes back to the one it replaced, which takes the replicas over
// again. The same process runs on with them, their job spends no restart, and the upgrade goes
// through once the install is mended. The new binary here is v2's agent behind a script in v1's
// place, which lets it answer the pre-flights as it is and runs the shell code `start` before it
// starts it (the agent's arguments are "$@"); its failure must be named by `named`.
void LiveRestartTest::ExpectAFailedStartIsUndone(const std::string& start,
                                                 const std::string& named) {
  const std::string job = SubmitTickers(/*workers=*/1, /*max_restarts=*/0);
  ASSERT_FALSE(job.empty());
  const pid_t pid = agent().pid();
  const std::set<pid_t> replicas = Children(pid);
  ASSERT_EQ(replicas.size(), 2u) << "the agent's children: its two replicas' main processes";
  ASSERT_NO_FATAL_FAILURE(UpgradeToAScript(start));
  const std::string v1 = bin_.Join("v1/cohort-agent");
  const std::string took = "live restart: took over 2 of 2 replica attempt(s)";
  const size_t took_before = Occurrences(AgentLog(), took);
  agent().Signal(SIGUSR2);
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        return AgentLog().find("live restart undone: cohort-agent " +
                               std::string(CohortBuildVersion()) + " failed its start: ") !=
                   std::string::npos &&
               Occurrences(AgentLog(), took) > took_before;
      },
      30s))
      << AgentLog();
  const std::string log = AgentLog();
  EXPECT_NE(log.find("this image (cohort-agent " + std::string(CohortBuildVersion()) +
                     ") failed its start: "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(named), std::string::npos) << "what failed is named: " << log;
  EXPECT_TRUE(agent().running());
  EXPECT_EQ(agent().pid(), pid);
  EXPECT_EQ(Executable(pid), v1 + " (deleted)") << "the image the upgrade replaced, again";
  EXPECT_EQ(Children(pid), replicas) << "the same processes, still the agent's children";
  auto client = cluster_->Client();
  auto info = client.GetJob(job);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->state, wire::JobState::RUNNING);
  EXPECT_EQ(info->restarts, 0);
  // The node's history says so (a rolling upgrade's admin reads it there, not on the node).
  std::string history;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        auto nodes = client.ListNodes("", node_);
        if (!nodes.ok() || nodes->empty()) return false;
        history.clear();
        for (const auto& e : nodes->front().events) history += e->text + "\n";
        return history.find("its agent's live restart was undone: cohort-agent " +
                            std::string(CohortBuildVersion()) + " failed its start: ") !=
               std::string::npos;
      },
      10s))
      << history;
  EXPECT_NE(history.find(named), std::string::npos) << history;
  EXPECT_NE(
      history.find("; it runs cohort-agent " + std::string(CohortBuildVersion()) + " as before"),
      std::string::npos)
      << history;
  // Mended (a good binary in v1's place), the next request goes through.
  ASSERT_NO_FATAL_FAILURE(LiveRestart(2));
  ExpectTickersEndWithoutARestart(job);
}

// The HTTP port the new image is to serve on is taken.
TEST_P(LiveRestartTest, ANewBinaryThatCannotBindItsPortGoesBackAndTheReplicasRunOn) {
  std::string port;
  const std::string start = StartOnATakenPort(&port);
  ExpectAFailedStartIsUndone(start, "--http-endpoint: HTTP endpoint " + port + ": cannot bind");
}

// A stop asked for while the new image starts, and fails, is not lost on the way back: the image it
// goes back to gets it and stops as any stop does, preempting its replicas.
TEST_P(LiveRestartTest, AStopAskedForDuringAFailedStartIsKeptByTheImageItGoesBackTo) {
  const std::string job = SubmitTickers(/*workers=*/0, /*max_restarts=*/0);
  ASSERT_FALSE(job.empty());
  std::string port;
  // The signal comes while the new image runs (the script is it: the same process), blocked
  // until the agent's handler is in place.
  ASSERT_NO_FATAL_FAILURE(UpgradeToAScript("kill -TERM $$\n" + StartOnATakenPort(&port)));
  agent().Signal(SIGUSR2);
  ExpectStoppedPreempting(job, {"live restart undone: cohort-agent "});
}

// A stop asked for while the new binary's pre-flights run (its --version here, which takes 2 s) is
// not lost across the execve: the new image takes the replicas over, then gets the stop and stops
// as any stop does, preempting them.
TEST_P(LiveRestartTest, AStopAskedForDuringThePreFlightsIsKeptByTheNewImage) {
  const std::string job = SubmitTickers(/*workers=*/0, /*max_restarts=*/0);
  ASSERT_FALSE(job.empty());
  const std::string preflight = out_ + "/preflight";
  ASSERT_NO_FATAL_FAILURE(
      UpgradeToAScript("", "[ -e " + preflight + " ] || { touch " + preflight + "; sleep 2; }"));
  agent().Signal(SIGUSR2);
  ASSERT_TRUE(ct::WaitUntil([&] { return std::filesystem::exists(preflight); }, 30s)) << AgentLog();
  agent().Signal(SIGTERM);
  // The restart went on: the new image took the replica over, then stopped.
  ExpectStoppedPreempting(
      job, {"live restart: executing ", "live restart: took over 1 of 1 replica attempt(s)"});
}

TEST_P(LiveRestartTest, AContainerReplicaRunsOnToo) {
  if (std::string why = ct::WhyNoContainers(); !why.empty()) GTEST_SKIP() << why;
  ct::TempDir dir("cohort-live-restart-image");
  const std::string layout = dir.Join("ticker");
  // Its job's output dir (the parent of AIP_MODEL_DIR) is mounted in the container.
  ASSERT_NO_FATAL_FAILURE(ct::MakeBusyboxImage(
      dir.path(), layout, {"sleep", "cat", "touch"},
      {"/bin/sh", "-c",
       "d=\"$AIP_MODEL_DIR/..\"; touch \"$d/up\"; i=0; "
       "while [ ! -s \"$d/go\" ]; do i=$((i+1)); echo \"tick $i\"; sleep 0.05; done; "
       "echo \"done after $i\"; exit \"$(cat \"$d/go\")\""},
      {}));
  const std::string output = cluster_->scratch("container-out");
  auto client = cluster_->Client();
  // Both modes of this test may run at once: their agents' tags keep their containers apart.
  auto job = client.Submit(
      ct::OneContainerJob("boxed", output, layout, "scheduling: {max_restarts: 2}\n"));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(ct::WaitUntil([&] { return std::filesystem::exists(output + "/up"); }, 60s))
      << cluster_->Logs();
  const std::set<pid_t> runtime = Children(agent().pid());
  ASSERT_EQ(runtime.size(), 1u) << "the agent's child: the runtime's foreground process";

  ASSERT_NO_FATAL_FAILURE(LiveRestart(1));
  EXPECT_EQ(Children(agent().pid()), runtime);
  const std::string before = ChiefLog(*job, "tick 1");
  const size_t ticks_at_handover = std::count(before.begin(), before.end(), '\n');
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        std::string now = ChiefLog(*job, "tick");
        return static_cast<size_t>(std::count(now.begin(), now.end(), '\n')) >=
               ticks_at_handover + 10;
      },
      20s));
  ct::WriteFile(output + "/go", "0");
  auto ended = ct::WaitForJobEnd(client, *job, 30s);
  EXPECT_EQ(ended.state, wire::JobState::SUCCEEDED) << ended.message;
  EXPECT_EQ(ended.restarts, 0);
  EXPECT_NE(ChiefLog(*job, "done after").find("\ndone after "), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(AgentModes, LiveRestartTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("CgroupsOff") : std::string("Defaults");
                         });

}  // namespace
}  // namespace cohort
