// ProcessLauncher, cgroups, the replica environment and the inventory, with real processes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "agent/cgroup.h"
#include "agent/inventory.h"
#include "agent/process_launcher.h"
#include "agent/replica_env.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

using testing::GroupAlive;
using testing::ProcessAlive;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitUntil;

class LauncherTest : public ::testing::Test {
 protected:
  LaunchRequest Request(const std::string& script) {
    LaunchRequest r;
    r.job = "job1";
    r.replica = "chief-0";
    r.attempt = 0;
    r.argv = {"/bin/sh", "-c", script};
    r.env = {{"PATH", "/usr/bin:/bin"}, {"GREETING", "hello"}};
    r.working_dir = dir_.path();
    r.log_path = dir_.path() + "/attempt-0.log";
    return r;
  }
  // Waits for the main process to exit and reaps it.
  void Reap(ReplicaProcess& p) { ASSERT_TRUE(testing::Reap(p)) << "the replica did not exit"; }
  TempDir dir_;
  ProcessLauncher launcher_{CgroupManager()};
};

TEST_F(LauncherTest, RunsInItsOwnSessionWithItsEnvAndLog) {
  auto p = launcher_.Launch(
      Request("echo \"greeting=$GREETING cwd=$(pwd) sid=$(cut -d' ' -f6 /proc/$$/stat) "
              "pid=$$\"; echo to-stderr >&2; exit 3"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Reap(**p);
  ASSERT_TRUE((*p)->exit_info());
  EXPECT_EQ((*p)->exit_info()->exit_code, 3);
  EXPECT_EQ((*p)->exit_info()->signal, 0);
  std::string log = ReadFile(dir_.path() + "/attempt-0.log");
  EXPECT_NE(log.find("greeting=hello"), std::string::npos) << log;
  EXPECT_NE(log.find("cwd=" + dir_.path()), std::string::npos) << log;
  std::string pid = std::to_string((*p)->pid());
  EXPECT_NE(log.find("sid=" + pid + " pid=" + pid), std::string::npos) << log;  // setsid
  EXPECT_NE(log.find("to-stderr"), std::string::npos) << log;
}

// Each run reports its CPUs as the kernel's cpulist (/proc/self/status's Cpus_allowed_list).
TEST_F(LauncherTest, AReplicaRunsOnTheCpusItIsGivenAndOtherwiseWhereTheAgentMay) {
  const std::vector<int> own = OwnCpus();
  ASSERT_FALSE(own.empty());
  const std::string report = "grep Cpus_allowed_list /proc/self/status";
  LaunchRequest bound = Request(report);
  bound.cpu_affinity = {own.back()};
  auto p = launcher_.Launch(bound);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Reap(**p);
  EXPECT_NE(
      ReadFile(bound.log_path).find("Cpus_allowed_list:\t" + std::to_string(own.back()) + "\n"),
      std::string::npos)
      << ReadFile(bound.log_path);

  LaunchRequest unbound = Request(report);
  unbound.log_path = dir_.path() + "/unbound.log";
  auto q = launcher_.Launch(unbound);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  Reap(**q);
  EXPECT_NE(ReadFile(unbound.log_path).find("Cpus_allowed_list:\t" + CpuListText(own) + "\n"),
            std::string::npos)
      << ReadFile(unbound.log_path);

  // A CPU the agent may not use (one past the machine's) leaves it where the agent may, started.
  LaunchRequest refused = Request(report);
  refused.log_path = dir_.path() + "/refused.log";
  refused.cpu_affinity = {CPU_SETSIZE - 1};
  auto r = launcher_.Launch(refused);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Reap(**r);
  ASSERT_TRUE((*r)->exit_info());
  EXPECT_EQ((*r)->exit_info()->exit_code, 0);
  EXPECT_NE(ReadFile(refused.log_path).find("Cpus_allowed_list:\t" + CpuListText(own) + "\n"),
            std::string::npos)
      << ReadFile(refused.log_path);
}

TEST_F(LauncherTest, ReportsDeathBySignal) {
  auto p = launcher_.Launch(Request("kill -9 $$"));
  ASSERT_TRUE(p.ok());
  Reap(**p);
  EXPECT_EQ((*p)->exit_info()->signal, 9);
  EXPECT_EQ((*p)->exit_info()->exit_code, 137);
  EXPECT_NE((*p)->exit_info()->Describe().find("signal 9"), std::string::npos);
}

TEST_F(LauncherTest, CommandNotFoundExits127WithReason) {
  LaunchRequest r = Request("");
  r.argv = {"cohort-no-such-program", "--flag"};
  auto p = launcher_.Launch(r);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(testing::WaitForLaunch(**p), ReplicaProcess::LaunchState::kFailed);
  EXPECT_NE((*p)->launch_error().find("cannot execute cohort-no-such-program"), std::string::npos)
      << (*p)->launch_error();
  Reap(**p);
  EXPECT_EQ((*p)->exit_info()->exit_code, 127);
  EXPECT_NE(ReadFile(r.log_path).find("No such file or directory"), std::string::npos);
}

TEST_F(LauncherTest, LooksUpTheCommandOnTheReplicaPath) {
  LaunchRequest r = Request("");
  r.argv = {"sh", "-c", "echo found-on-path"};
  auto p = launcher_.Launch(r);
  ASSERT_TRUE(p.ok());
  Reap(**p);
  EXPECT_EQ((*p)->exit_info()->exit_code, 0);
  EXPECT_NE(ReadFile(r.log_path).find("found-on-path"), std::string::npos);
}

TEST_F(LauncherTest, KillAllReachesGrandchildrenThatIgnoreSigterm) {
  auto p =
      launcher_.Launch(Request("sh -c 'trap \"\" TERM; echo > ignoring; exec sleep 1000' & "
                               "sleep 1000 & echo $! > sleeper.pid; wait"));
  ASSERT_TRUE(p.ok());
  pid_t pgid = (*p)->pid();
  ASSERT_TRUE(WaitUntil(
      [&] {
        return !ReadFile(dir_.path() + "/sleeper.pid").empty() &&
               !ReadFile(dir_.path() + "/ignoring").empty();
      },
      std::chrono::seconds(10)));
  pid_t sleeper = std::atoi(ReadFile(dir_.path() + "/sleeper.pid").c_str());
  ASSERT_TRUE(ProcessAlive(sleeper));
  (*p)->Signal(SIGTERM);
  Reap(**p);
  EXPECT_EQ((*p)->exit_info()->signal, SIGTERM);
  // The TERM-ignoring grandchild is still there: the group is not empty.
  EXPECT_TRUE((*p)->AnyAlive());
  EXPECT_TRUE(GroupAlive(pgid));
  (*p)->KillAll();
  EXPECT_TRUE(WaitUntil([&] { return !(*p)->AnyAlive(); }, std::chrono::seconds(10)));
  EXPECT_TRUE(WaitUntil([&] { return !GroupAlive(pgid); }, std::chrono::seconds(10)));
  EXPECT_FALSE(ProcessAlive(sleeper));
}

TEST_F(LauncherTest, AStopSignalReachesEachProcessOnceFoundByItsEnvironment) {
  // No cgroup, no namespace: the process group, then the others carrying the attempt's marker.
  ASSERT_NO_FATAL_FAILURE(testing::ExpectOneSignalEach(launcher_, Request("")));
}

// The launcher over a cgroup v2 node of its own (each test skips where none can be made).
class CgroupTest : public LauncherTest {};

TEST_F(CgroupTest, AStopSignalReachesEachProcessOnce) {
  // No namespace: the process group, then the others of the cgroup.
  ASSERT_NO_FATAL_FAILURE(testing::ExpectOneSignalEachInACgroup("sigterm-cg", ""));
}

TEST_F(CgroupTest, KillReachesAProcessThatLeftTheGroup) {
  CgroupManager cgroups = testing::OwnCgroups("node-a");
  if (!cgroups.available()) GTEST_SKIP() << "no writable cgroup v2 here: " << cgroups.reason();
  ProcessLauncher launcher(cgroups);
  LaunchRequest r = Request("setsid sleep 1000 & echo $! > escaped.pid; wait");
  r.job = "cgtest" + std::to_string(::getpid());
  r.replica = "worker-0";
  r.cpus = 1;
  r.memory_mb = 64;
  auto p = launcher.Launch(r);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(dir_.path() + "/escaped.pid").empty(); },
                        std::chrono::seconds(10)));
  pid_t escaped = std::atoi(ReadFile(dir_.path() + "/escaped.pid").c_str());
  std::string cgroup = cgroups.base() + "/" + r.job + ".worker-0.0";
  EXPECT_NE(ReadFile("/proc/" + std::to_string(escaped) + "/cgroup").find(r.job),
            std::string::npos);
  (*p)->KillAll();
  ASSERT_TRUE(WaitUntil(
      [&] {
        int status = 0;
        if (::waitpid((*p)->pid(), &status, WNOHANG) != (*p)->pid()) return false;
        (*p)->OnExited(status);
        return true;
      },
      std::chrono::seconds(10)));
  EXPECT_TRUE(WaitUntil([&] { return !(*p)->AnyAlive(); }, std::chrono::seconds(10)));
  EXPECT_FALSE(ProcessAlive(escaped));
  (*p)->Release();
  EXPECT_FALSE(std::filesystem::exists(cgroup));
  testing::RemoveOwnCgroups(cgroups);
  RestorePoint none = FindRestoreCheckpoint(dir_.path() + "/no-such-dir");
  EXPECT_EQ(none.checkpoint, "");
  EXPECT_TRUE(none.notes.empty());
}

// memory.events as the kernel writes it (a stand-in file: this reads it, whatever made it).
TEST(CgroupOomTest, OomKillsIsMemoryEventsOomKillCount) {
  TempDir cgroup("fake-cgroup");
  EXPECT_EQ(CgroupManager::OomKills(cgroup.path()), 0);  // no memory controller: no file
  testing::WriteFile(cgroup.path() + "/memory.events",
                     "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n");
  EXPECT_EQ(CgroupManager::OomKills(cgroup.path()), 2);
}

// A replica that outgrows its memory_mb is ended by the kernel's OOM killer, and its exit says so.
TEST_F(CgroupTest, AReplicaPastItsMemoryLimitIsEndedByTheOomKillerAndItsExitSaysSo) {
  CgroupManager cgroups = testing::OwnCgroups("node-a");
  if (!cgroups.available()) GTEST_SKIP() << "no writable cgroup v2 here: " << cgroups.reason();
  ProcessLauncher launcher(cgroups);
  LaunchRequest r = Request("echo growing; exec tail /dev/zero");  // a line that never ends
  r.job = "oomtest" + std::to_string(::getpid());
  r.memory_mb = 32;
  auto p = launcher.Launch(r);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const std::string cgroup = cgroups.base() + "/" + r.job + ".chief-0.0";
  if (!testing::FileExists(cgroup + "/memory.max")) {
    (*p)->KillAll();
    Reap(**p);
    (*p)->Release();
    testing::RemoveOwnCgroups(cgroups);
    GTEST_SKIP() << "the cgroup v2 hierarchy here has no memory controller (no memory.max in "
                 << cgroup << "): no limit to run into";
  }
  Reap(**p);
  ASSERT_TRUE((*p)->exit_info());
  EXPECT_EQ((*p)->exit_info()->signal, SIGKILL);
  EXPECT_GE((*p)->exit_info()->oom_kills, 1);
  EXPECT_TRUE(WaitUntil([&] { return !(*p)->AnyAlive(); }, std::chrono::seconds(10)));
  (*p)->Release();
  testing::RemoveOwnCgroups(cgroups);
}

TEST(CgroupCpuTest, ACpusWeightIsItsSharesAsRuncConvertsThem) {
  EXPECT_EQ(CpuWeight(1), 39);
  EXPECT_EQ(CpuWeight(3), 118);
  EXPECT_EQ(CpuWeight(64), 2500);
  EXPECT_EQ(CpuWeight(256), 10000);
  EXPECT_EQ(CpuWeight(4096), 10000);
  EXPECT_EQ(CpuWeight(0), 1);
}

// A replica's cpus is its cgroup's cpu.weight; cpu.max caps it only with a quota.
TEST_F(CgroupTest, AReplicasCpusAreItsWeightAndACapOnlyWithAQuota) {
  CgroupManager cgroups = testing::OwnCgroups("node-a");
  if (!cgroups.available()) GTEST_SKIP() << "no writable cgroup v2 here: " << cgroups.reason();
  ProcessLauncher launcher(cgroups);
  auto controls = [&](bool quota) {
    LaunchRequest r = Request("exit 0");
    r.job = "cputest" + std::to_string(::getpid());
    r.replica = quota ? "worker-1" : "worker-0";
    r.cpus = 3;
    r.cpu_quota = quota;
    auto p = launcher.Launch(r);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return std::string();
    const std::string cgroup = cgroups.base() + "/" + r.job + "." + r.replica + ".0";
    std::string read = testing::FileExists(cgroup + "/cpu.weight")
                           ? ReadFile(cgroup + "/cpu.weight") + ReadFile(cgroup + "/cpu.max")
                           : "";
    Reap(**p);
    (*p)->Release();
    return read;
  };
  const std::string shared = controls(false);
  const std::string capped = controls(true);
  testing::RemoveOwnCgroups(cgroups);
  if (shared.empty()) {
    GTEST_SKIP() << "the cgroup v2 hierarchy here has no cpu controller (no cpu.weight in "
                 << cgroups.base() << "'s replicas): no weight to set";
  }
  EXPECT_EQ(shared, "118\nmax 100000\n");
  EXPECT_EQ(capped, "118\n300000 100000\n");
}

// A process replica's processes are bounded as a container's are: a fork bomb in it stops at
// kReplicaPidsLimit, not at the node's pid_max.
TEST_F(CgroupTest, AReplicasProcessesAreBoundedAsAContainersAre) {
  CgroupManager cgroups = testing::OwnCgroups("node-a");
  if (!cgroups.available()) GTEST_SKIP() << "no writable cgroup v2 here: " << cgroups.reason();
  ProcessLauncher launcher(cgroups);
  LaunchRequest r = Request("cat /proc/self/cgroup");
  r.job = "pidstest" + std::to_string(::getpid());
  auto p = launcher.Launch(r);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const std::string cgroup = cgroups.base() + "/" + r.job + ".chief-0.0";
  const std::string limit =
      testing::FileExists(cgroup + "/pids.max") ? ReadFile(cgroup + "/pids.max") : "";
  Reap(**p);
  (*p)->Release();
  testing::RemoveOwnCgroups(cgroups);
  if (limit.empty()) {
    GTEST_SKIP() << "the cgroup v2 hierarchy here has no pids controller (no pids.max in " << cgroup
                 << "): no limit to set";
  }
  EXPECT_EQ(limit, std::to_string(kReplicaPidsLimit) + "\n");
}

TEST_F(CgroupTest, SweepKillsWhatAnEarlierRunLeftBehind) {
  const std::string node = "sweep", tag = std::to_string(::getpid());
  CgroupManager earlier = CgroupManager::Detect(node, tag);
  if (!earlier.available()) GTEST_SKIP() << "no writable cgroup v2 here: " << earlier.reason();
  ProcessLauncher launcher(earlier);
  LaunchRequest r = Request("setsid sleep 1000 & echo $! > left.pid; wait");
  r.job = "stale";
  auto p = launcher.Launch(r);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(dir_.path() + "/left.pid").empty(); },
                        std::chrono::seconds(10)));
  pid_t left = std::atoi(ReadFile(dir_.path() + "/left.pid").c_str());
  ASSERT_TRUE(ProcessAlive(left));
  // A new agent for the same node and work dir starts and finds the cgroup of the old one's
  // replica.
  CgroupManager later = CgroupManager::Detect(node, tag);
  EXPECT_EQ(later.base(), earlier.base());
  EXPECT_EQ(later.SweepStale(), 1);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(left); }, std::chrono::seconds(10)));
  EXPECT_FALSE(std::filesystem::exists(later.base() + "/stale.chief-0.0"));
  int status = 0;
  ::waitpid((*p)->pid(), &status, 0);
  (*p)->OnExited(status);
  ::rmdir(later.base().c_str());
}

// Two agents of one node id started from one cgroup (two clusters' agents on a host, each with a
// work dir of its own): the start of one sweeps nothing of the other's running replica.
TEST_F(CgroupTest, SweepSparesTheReplicasOfAnotherAgentOfTheSameNodeId) {
  const std::string node = "twin-" + std::to_string(::getpid());
  CgroupManager running = CgroupManager::Detect(node, "0000aaaa");
  if (!running.available()) GTEST_SKIP() << "no writable cgroup v2 here: " << running.reason();
  ProcessLauncher launcher(running);
  auto p = launcher.Launch(Request("sleep 1000"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const std::string cgroup = running.base() + "/job1.chief-0.0";
  ASSERT_TRUE(
      WaitUntil([&] { return !CgroupManager::Procs(cgroup).empty(); }, std::chrono::seconds(10)))
      << cgroup;

  CgroupManager starting = CgroupManager::Detect(node, "0000bbbb");
  ASSERT_TRUE(starting.available()) << starting.reason();
  EXPECT_NE(starting.base(), running.base());
  EXPECT_EQ(starting.SweepStale(), 0);
  EXPECT_TRUE(ProcessAlive((*p)->pid()));
  EXPECT_FALSE(CgroupManager::Procs(cgroup).empty());

  (*p)->KillAll();
  Reap(**p);
  (*p)->Release();
  for (const CgroupManager* level : {&running, &starting}) testing::RemoveOwnCgroups(*level);
}

TEST(ReplicaEnvTest, SweepRemovesOnlyOldEndedAttempts) {
  namespace fs = std::filesystem;
  TempDir dir;
  const fs::path work = dir.path();
  auto make = [&](const std::string& job, const std::string& replica, int attempt, bool old) {
    fs::path wd = AttemptWorkingDir(work.string(), job, replica, attempt);
    fs::create_directories(wd);
    testing::WriteFile((wd / "out.txt").string(), "x");
    std::string log = AttemptLogPath(work.string(), job, replica, attempt);
    testing::WriteFile(log, "log");
    if (old) {
      auto then = fs::file_time_type::clock::now() - std::chrono::hours(48);
      fs::last_write_time(wd, then);
      fs::last_write_time(log, then);
    }
  };
  make("done", "chief-0", 0, true);      // ended long ago: removed, and its empty dirs
  make("mixed", "chief-0", 0, true);     // old attempt of a job...
  make("mixed", "chief-0", 1, false);    // ...whose newer attempt is recent: kept
  make("running", "worker-0", 0, true);  // old but live: kept
  testing::WriteFile((work / "mixed" / "chief-0" / "notes.txt").string(), "not ours");
  auto old_other = fs::file_time_type::clock::now() - std::chrono::hours(48);
  fs::last_write_time(work / "mixed" / "chief-0" / "notes.txt", old_other);

  int removed = SweepAttemptDirs(
      work.string(), std::chrono::hours(24),
      [](const std::string& job, const std::string&, int) { return job == "running"; });
  EXPECT_EQ(removed, 2);
  EXPECT_FALSE(fs::exists(work / "done"));
  EXPECT_FALSE(fs::exists(AttemptWorkingDir(work.string(), "mixed", "chief-0", 0)));
  EXPECT_FALSE(fs::exists(AttemptLogPath(work.string(), "mixed", "chief-0", 0)));
  EXPECT_TRUE(fs::exists(AttemptWorkingDir(work.string(), "mixed", "chief-0", 1)));
  EXPECT_TRUE(fs::exists(AttemptLogPath(work.string(), "mixed", "chief-0", 1)));
  EXPECT_TRUE(fs::exists(work / "mixed" / "chief-0" / "notes.txt"));
  EXPECT_TRUE(fs::exists(AttemptWorkingDir(work.string(), "running", "worker-0", 0)));
  EXPECT_EQ(SweepAttemptDirs((work / "no-such-dir").string(), std::chrono::hours(1),
                             [](const std::string&, const std::string&, int) { return false; }),
            0);
}

TEST(ReplicaEnvTest, AddsRestartRestoreAndGpuPinning) {
  ReplicaEnvInput in;
  in.launch_env = {{"RANK", "1"}, {"PATH", "/opt/bin"}};
  in.attempt = 2;
  in.gpus = {1, 3};
  in.restore_checkpoint = "/ckpt/ckpt-7";
  auto env = BuildReplicaEnv(in);
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["PATH"], "/opt/bin");  // the launch's own PATH wins over the agent's
  EXPECT_EQ(env["COHORT_RESTART_COUNT"], "2");
  EXPECT_EQ(env["COHORT_RESTORE_CHECKPOINT"], "/ckpt/ckpt-7");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1,3");
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "1,3");
  EXPECT_EQ(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");

  auto cpu_only = BuildReplicaEnv(ReplicaEnvInput{});
  EXPECT_EQ(cpu_only.count("TORCHELASTIC_ERROR_FILE"), 0u);  // no attempt dir: no files there
  EXPECT_EQ(cpu_only["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(cpu_only["NVIDIA_VISIBLE_DEVICES"], "void");
  EXPECT_EQ(cpu_only["COHORT_RESTORE_CHECKPOINT"], "");
  EXPECT_FALSE(cpu_only["PATH"].empty());
}

// A container's PATH, HOME and LANG are its image's (agent/oci_launcher.h lays the image's
// environment under this one), never the agent's host PATH: a stock image's /opt/conda/bin stays
// first. The launch's own PATH still wins.
TEST(ReplicaEnvTest, AContainerGetsNoneOfTheAgentsPathHomeOrLang) {
  ReplicaEnvInput in;
  in.container = true;
  in.launch_env = {{"RANK", "0"}};
  auto env = BuildReplicaEnv(in);
  EXPECT_EQ(env.count("PATH"), 0u);
  EXPECT_EQ(env.count("HOME"), 0u);
  EXPECT_EQ(env.count("LANG"), 0u);
  EXPECT_EQ(env["RANK"], "0");
  in.launch_env["PATH"] = "/job/bin";
  EXPECT_EQ(BuildReplicaEnv(in)["PATH"], "/job/bin");
}

TEST(ReplicaEnvTest, PythonOutputIsUnbufferedUnlessTheJobSaysOtherwise) {
  EXPECT_EQ(BuildReplicaEnv(ReplicaEnvInput{})["PYTHONUNBUFFERED"], "1");
  ReplicaEnvInput buffered;
  buffered.launch_env = {{"PYTHONUNBUFFERED", ""}};  // Python buffers again
  EXPECT_EQ(BuildReplicaEnv(buffered)["PYTHONUNBUFFERED"], "");
}

// gloo and tensorpipe bind to the interface other nodes reach this one at, unless the job names
// another; with none known, nothing is set.
TEST(ReplicaEnvTest, GlooBindsToTheAdvertiseInterfaceUnlessTheJobSaysOtherwise) {
  ReplicaEnvInput input;
  input.socket_interface = "eth1";
  auto env = BuildReplicaEnv(input);
  EXPECT_EQ(env["GLOO_SOCKET_IFNAME"], "eth1");
  EXPECT_EQ(env["TP_SOCKET_IFNAME"], "eth1");
  EXPECT_EQ(env.count("NCCL_SOCKET_IFNAME"), 0u);  // NCCL picks its own (InfiniBand's first)
  input.launch_env = {{"GLOO_SOCKET_IFNAME", "ib0"}};
  EXPECT_EQ(BuildReplicaEnv(input)["GLOO_SOCKET_IFNAME"], "ib0");
  EXPECT_EQ(BuildReplicaEnv(ReplicaEnvInput{}).count("GLOO_SOCKET_IFNAME"), 0u);
}

// The loopback address is lo's; an address no interface here holds is none's.
TEST(InventoryTest, AnAddressesInterfaceIsTheOneHoldingIt) {
  EXPECT_EQ(InterfaceOfAddress("127.0.0.1"), "lo");
  EXPECT_EQ(InterfaceOfAddress("localhost"), "lo");
  EXPECT_EQ(InterfaceOfAddress("203.0.113.77"), "");  // TEST-NET-3: on no interface here
  EXPECT_EQ(InterfaceOfAddress(""), "");
  EXPECT_EQ(InterfaceOfAddress("no such host.invalid"), "");
}

TEST(ReplicaEnvTest, TheAttemptDirHoldsTheRecorderStacksAndErrorFileUnlessThePoolSaysElse) {
  ReplicaEnvInput in;
  in.attempt_dir = "/w/j/chief-0/attempt-2";
  auto env = BuildReplicaEnv(in);
  EXPECT_EQ(env["COHORT_FLIGHT_RECORDER"], "/w/j/chief-0/attempt-2/flight-recorder");
  EXPECT_EQ(env["COHORT_STACK_DUMP_DIR"], "/w/j/chief-0/attempt-2/stacks");
  EXPECT_EQ(env["TORCHELASTIC_ERROR_FILE"], "/w/j/chief-0/attempt-2/torchelastic-error.json");
  EXPECT_EQ(ErrorFilePath(in.attempt_dir), env["TORCHELASTIC_ERROR_FILE"]);
  in.launch_env = {{"COHORT_FLIGHT_RECORDER", "off"},
                   {"TORCHELASTIC_ERROR_FILE", "/shared/errors/chief.json"}};
  env = BuildReplicaEnv(in);
  EXPECT_EQ(env["COHORT_FLIGHT_RECORDER"], "off");
  EXPECT_EQ(env["TORCHELASTIC_ERROR_FILE"], "/shared/errors/chief.json");
}

// Every Python process of a process replica registers for stack dumps (agent/python_site.h):
// the agent's sitecustomize directory goes first on PYTHONPATH, before the pool's, unless the pool
// opts out; a container (no attempt dir here) is left alone.
TEST(ReplicaEnvTest, TheAgentsSitecustomizeGoesFirstOnPythonPathUnlessThePoolOptsOut) {
  ReplicaEnvInput in;
  in.attempt_dir = "/w/j/chief-0/attempt-0";
  in.python_site = "/w/.python-site";
  EXPECT_EQ(BuildReplicaEnv(in)["PYTHONPATH"], "/w/.python-site");
  in.launch_env = {{"PYTHONPATH", "/src:/libs"}};
  EXPECT_EQ(BuildReplicaEnv(in)["PYTHONPATH"], "/w/.python-site:/src:/libs");
  in.launch_env["COHORT_PYTHON_STACKS"] = "0";
  EXPECT_EQ(BuildReplicaEnv(in)["PYTHONPATH"], "/src:/libs");
  ReplicaEnvInput container;
  container.python_site = "/w/.python-site";
  EXPECT_EQ(BuildReplicaEnv(container).count("PYTHONPATH"), 0u);
}

TEST(ReplicaEnvTest, RefusesPathEscapes) {
  EXPECT_TRUE(CheckPathComponent("job", "digits_001").ok());
  EXPECT_FALSE(CheckPathComponent("job", "..").ok());
  EXPECT_FALSE(CheckPathComponent("replica", "a/b").ok());
  EXPECT_FALSE(CheckPathComponent("replica", "").ok());
  EXPECT_EQ(AttemptWorkingDir("/w", "j", "chief-0", 2), "/w/j/chief-0/attempt-2");
  EXPECT_EQ(AttemptLogPath("/w", "j", "chief-0", 2), "/w/j/chief-0/attempt-2.log");
}

TEST(ReplicaEnvTest, BuiltinsResolveInTheBuiltinDirThenOnPathAndUnknownOnesAreRefused) {
  EXPECT_EQ(ResolveBuiltinBinary("mapreduce", "").status().code(), StatusCode::kInvalidArgument);
  TempDir builtin_dir;
  const std::string reducer = builtin_dir.path() + "/cohort-reducer";
  testing::WriteFile(reducer, "#!/bin/sh\n");
  ::chmod(reducer.c_str(), 0755);
  TempDir on_path;
  const std::string ps = on_path.path() + "/cohort-ps";
  testing::WriteFile(ps, "#!/bin/sh\n");
  ::chmod(ps.c_str(), 0755);
  std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (on_path.path() + ":" + old_path).c_str(), 1);
  auto resolved_reducer = ResolveBuiltinBinary("reducer", builtin_dir.path());
  auto resolved_ps = ResolveBuiltinBinary("parameter_server", builtin_dir.path());
  ::setenv("PATH", "/nonexistent", 1);
  auto missing = ResolveBuiltinBinary("parameter_server", builtin_dir.path());
  ::setenv("PATH", old_path.c_str(), 1);
  ASSERT_TRUE(resolved_reducer.ok()) << resolved_reducer.status().ToString();
  EXPECT_EQ(*resolved_reducer, reducer);
  // Not in the builtin dir, so PATH supplies it.
  ASSERT_TRUE(resolved_ps.ok()) << resolved_ps.status().ToString();
  EXPECT_EQ(*resolved_ps, ps);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(builtin_dir.path() + "/cohort-ps"), std::string::npos)
      << missing.status().ToString();
}

// PATH for one test's scope, then the old value (or none) again.
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& value) {
    const char* old = std::getenv("PATH");
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv("PATH", value.c_str(), 1);
  }
  ~ScopedPath() { had_ ? ::setenv("PATH", old_.c_str(), 1) : ::unsetenv("PATH"); }

 private:
  bool had_ = false;
  std::string old_;
};

// An executable file `name` in `dir`, removed again at the end of the scope.
class ScopedExecutable {
 public:
  ScopedExecutable(const std::string& dir, const std::string& name) : path_(dir + "/" + name) {
    testing::WriteFile(path_, "#!/bin/sh\n", /*executable=*/true);
  }
  ~ScopedExecutable() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The directory of this test binary, where FindBuiltinBinary looks second.
std::string ExecutableDir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
}

std::string TestProgram() { return "cohort-test-builtin-" + std::to_string(::getpid()); }

TEST(ReplicaEnvTest, ABuiltinBinaryIsFoundInTheBuiltinDirFirst) {
  TempDir builtin_dir, on_path;
  ScopedExecutable in_dir(builtin_dir.path(), TestProgram());
  ScopedExecutable beside(ExecutableDir(), TestProgram());
  ScopedExecutable path_one(on_path.path(), TestProgram());
  ScopedPath path(on_path.path());
  auto found = FindBuiltinBinary(TestProgram(), builtin_dir.path());
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, in_dir.path());
  // A file there that may not be executed does not count: the next place is looked in.
  ::chmod(in_dir.path().c_str(), 0644);
  found = FindBuiltinBinary(TestProgram(), builtin_dir.path());
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, beside.path());
}

TEST(ReplicaEnvTest, ABuiltinBinaryIsFoundBesideTheAgentExecutableBeforePath) {
  TempDir builtin_dir, on_path;
  ScopedExecutable beside(ExecutableDir(), TestProgram());
  ScopedExecutable path_one(on_path.path(), TestProgram());
  ScopedPath path(on_path.path());
  for (const std::string& dir : {builtin_dir.path(), std::string()}) {  // empty: no builtin dir
    auto found = FindBuiltinBinary(TestProgram(), dir);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    EXPECT_EQ(*found, beside.path());
  }
}

TEST(ReplicaEnvTest, ABuiltinBinaryIsFoundOnPathAnEmptyEntryBeingTheCurrentDirectory) {
  TempDir builtin_dir, on_path, cwd;
  ScopedExecutable path_one(on_path.path(), TestProgram());
  {
    ScopedPath path("/nonexistent:" + on_path.path());
    auto found = FindBuiltinBinary(TestProgram(), builtin_dir.path());
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    EXPECT_EQ(*found, path_one.path());
  }
  // As execvp reads PATH: a trailing ':' (an empty entry) is the current directory; the answer
  // is absolute all the same, since a replica runs in a directory of its own.
  ScopedExecutable here(cwd.path(), TestProgram());
  const auto old_cwd = std::filesystem::current_path();
  std::filesystem::current_path(cwd.path());
  StatusOr<std::string> found = NotFound("not looked up");
  {
    ScopedPath path("/nonexistent:");
    found = FindBuiltinBinary(TestProgram(), builtin_dir.path());
  }
  std::filesystem::current_path(old_cwd);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, here.path());
}

TEST(ReplicaEnvTest, ABuiltinBinaryThatIsNowhereIsNotFoundNamingItAndWhereItLooked) {
  TempDir builtin_dir;
  ScopedPath path("/nonexistent:/nonexistent-too");
  auto found = FindBuiltinBinary(TestProgram(), builtin_dir.path());
  ASSERT_EQ(found.status().code(), StatusCode::kNotFound) << found.status().ToString();
  const std::string message = found.status().message();
  EXPECT_EQ(message.rfind(TestProgram() + " is nowhere: not at ", 0), 0u) << message;
  for (const std::string& place :
       {builtin_dir.path() + "/" + TestProgram() + " (--builtin-dir)",
        ExecutableDir() + "/" + TestProgram() + " (beside this executable)",
        std::string("on PATH (/nonexistent:/nonexistent-too)")}) {
    EXPECT_NE(message.find(place), std::string::npos) << place << " not in: " << message;
  }
}

TEST(InventoryTest, DeclaredGpusAndMachineResources) {
  auto gpus = DeclaredGpus(3);
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[2].index, 2);
  EXPECT_EQ(gpus[2].model, "declared");
  EXPECT_GT(DetectCpus(), 0);
  EXPECT_GT(DetectMemoryMb(), 0);
}

TEST(InventoryTest, AReplicasCpusAreThoseNearItsGpusWhereTheyAreKnownAndEnough) {
  // Two NUMA nodes of 4 CPUs, two GPUs on each; GPU 4 is declared (nothing known).
  const std::vector<GpuDevice> gpus = {{0, "H100", 81559, "GPU-0", 0, {0, 1, 2, 3}, {}},
                                       {1, "H100", 81559, "GPU-1", 0, {0, 1, 2, 3}, {}},
                                       {2, "H100", 81559, "GPU-2", 1, {4, 5, 6, 7}, {}},
                                       {3, "H100", 81559, "GPU-3", 1, {4, 5, 6, 7}, {}},
                                       {4, "declared", 0, "", -1, {}, {}}};
  EXPECT_EQ(GpuLocalCpus(gpus, {1}, 2), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(GpuLocalCpus(gpus, {0, 1}, 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(GpuLocalCpus(gpus, {1, 2}, 0), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(GpuLocalCpus(gpus, {3}, 0), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(GpuLocalCpus(gpus, {2}, 5), std::vector<int>()) << "fewer near CPUs than it asked";
  EXPECT_EQ(GpuLocalCpus(gpus, {}, 1), std::vector<int>()) << "no GPU";
  EXPECT_EQ(GpuLocalCpus(gpus, {0, 4}, 1), std::vector<int>()) << "one GPU's CPUs unknown";
  EXPECT_EQ(GpuLocalCpus(gpus, {9}, 1), std::vector<int>()) << "a GPU not in the inventory";

  EXPECT_EQ(CpuListText({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(CpuListText({5}), "5");
  EXPECT_EQ(CpuListText({}), "");
}

// NVIDIA's single strategy: MIG devices are offered only where every GPU has some, all alike.
TEST(InventoryTest, MigDevicesAreOfferedWhereEveryGpuHasThemAndAllAreAlike) {
  auto mig = [](std::vector<std::string> names) {
    Nvml::Mig m;
    m.on = true;
    for (std::string& name : names) {
      m.devices.push_back(Nvml::MigDevice{static_cast<unsigned>(m.devices.size()), "MIG-x",
                                          std::move(name), 9984, 1, 0});
    }
    return m;
  };
  const std::string a = "NVIDIA H100 80GB HBM3 MIG 1g.10gb";
  EXPECT_TRUE(OffersMigDevices({mig({a, a}), mig({a})}));
  EXPECT_FALSE(OffersMigDevices({mig({a}), Nvml::Mig{}}));  // one GPU whole
  EXPECT_FALSE(OffersMigDevices({mig({a}), mig({})}));      // one with none made yet
  EXPECT_FALSE(OffersMigDevices({mig({a, "NVIDIA H100 80GB HBM3 MIG 2g.20gb"})}));
  EXPECT_FALSE(OffersMigDevices({mig({a}), mig({"NVIDIA A100-SXM4-80GB MIG 1g.10gb"})}));
  EXPECT_FALSE(OffersMigDevices({}));
}

// A MIG device is named by its UUID and needs its GPU's node and its instances' capability
// nodes, whose minors the driver lists (a fake /proc/driver/nvidia/capabilities here).
TEST(InventoryTest, AMigDeviceIsVisibleByItsUuidAndItsContainerGetsItsCapabilityNodes) {
  std::vector<GpuDevice> slices;
  for (int i = 0; i < 3; ++i) {
    const GpuDevice::Mig mig{1 + i / 2, i % 2, 7 + i % 2, 0};
    GpuDevice d{i,  "NVIDIA H100 80GB HBM3 MIG 1g.10gb", 9984, "MIG-" + std::to_string(i), 0, {},
                mig};
    slices.push_back(d);
  }
  EXPECT_EQ(slices[2].gpu(), 2);
  EXPECT_EQ(VisibleGpuNames(slices, {2, 0}), (std::vector<std::string>{"MIG-2", "MIG-0"}));
  EXPECT_EQ(VisibleGpuNames(DeclaredGpus(4), {3, 1}), (std::vector<std::string>{"3", "1"}));
  EXPECT_EQ(VisibleGpuNames({}, {5}), (std::vector<std::string>{"5"}));

  TempDir caps("caps");
  auto access = [&](const std::string& dir, const std::string& text) {
    std::filesystem::create_directories(caps.path() + dir);
    testing::WriteFile(caps.path() + dir + "/access", text);
  };
  access("/gpu1/mig/gi7", "DeviceFileMinor: 66\nDeviceFileMode: 256\nDeviceFileModify: 1\n");
  access("/gpu1/mig/gi7/ci0", "DeviceFileMinor: 67\nDeviceFileMode: 256\n");
  access("/gpu1/mig/gi8", "DeviceFileMinor: 75\n");
  access("/gpu1/mig/gi8/ci0", "DeviceFileMinor: x\n");  // unreadable: left out
  EXPECT_EQ(GpuDeviceNodes(slices, {0, 1}, caps.path()),
            (std::vector<std::string>{"nvidia1", "nvidia-caps/nvidia-cap66",
                                      "nvidia-caps/nvidia-cap67", "nvidia-caps/nvidia-cap75"}));
  EXPECT_EQ(GpuDeviceNodes(slices, {2}, caps.path()), (std::vector<std::string>{"nvidia2"}));
  EXPECT_EQ(GpuDeviceNodes(DeclaredGpus(4), {3, 1}, caps.path()),
            (std::vector<std::string>{"nvidia3", "nvidia1"}));
}

TEST(InventoryTest, ListeningPortsFromProcNetTcp) {
  const std::string text =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0\n"
      "   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0\n"
      "   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0\n"
      "   3: garbage\n";
  EXPECT_EQ(ParseListeningPorts(text), (std::vector<int>{8080, 22}));
  EXPECT_TRUE(ParseListeningPorts("").empty());

  // A socket listening here shows up in the live list; a connected one does not add its port.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int port = ntohs(addr.sin_port);
  auto before = ListeningTcpPorts();
  EXPECT_FALSE(std::binary_search(before.begin(), before.end(), port)) << "bound, not listening";
  ASSERT_EQ(::listen(fd, 1), 0);
  auto after = ListeningTcpPorts();
  EXPECT_TRUE(std::binary_search(after.begin(), after.end(), port)) << port;
  EXPECT_TRUE(std::is_sorted(after.begin(), after.end()));
  ::close(fd);
}

// The port domain names this boot of this host and this network namespace: the same for every
// agent here, another in a namespace of its own (where replicas have all ports to themselves).
TEST(InventoryTest, ThePortDomainIsTheBootAndTheNetworkNamespace) {
  const std::string here = PortDomain();
  ASSERT_FALSE(here.empty());
  EXPECT_EQ(PortDomain(), here);
  std::ifstream boot_file("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(boot_file, boot);
  EXPECT_EQ(here, boot + " " + std::filesystem::read_symlink("/proc/self/ns/net").string());

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Unprivileged too: a user namespace lets it make a network namespace.
    int flags = ::geteuid() == 0 ? CLONE_NEWNET : (CLONE_NEWUSER | CLONE_NEWNET);
    std::string out = ::unshare(flags) == 0 ? PortDomain() : "unshare: " + std::to_string(errno);
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string theirs;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) theirs.append(buf, n);
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  if (theirs.rfind("unshare: ", 0) == 0) {
    GTEST_SKIP() << "this machine lets no process make a network namespace (" << theirs
                 << "), so a second domain cannot be made here";
  }
  EXPECT_NE(theirs, here);
  EXPECT_EQ(theirs.substr(0, boot.size() + 1), boot + " ") << theirs;
}

TEST(InventoryTest, NvmlProbe) {
  auto gpus = ProbeNvmlGpus();
  if (!gpus.ok() && gpus.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "no NVIDIA driver: " << gpus.status().message();
  }
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  for (size_t i = 0; i < gpus->size(); ++i) {
    EXPECT_EQ((*gpus)[i].index, static_cast<int>(i));
    EXPECT_FALSE((*gpus)[i].model.empty());
    EXPECT_GT((*gpus)[i].memory_mb, 0);
    EXPECT_EQ((*gpus)[i].uuid.rfind("GPU-", 0), 0u) << (*gpus)[i].uuid;
    // Where it sits, where NVML says: CPUs this process may use, a NUMA node NVML names.
    const std::vector<int> own = OwnCpus();
    for (int cpu : (*gpus)[i].near_cpus) {
      EXPECT_TRUE(std::binary_search(own.begin(), own.end(), cpu)) << cpu;
    }
    EXPECT_GE((*gpus)[i].numa_node, -1);
    std::cout << "GPU " << i << ": NUMA node " << (*gpus)[i].numa_node << ", near CPUs "
              << CpuListText((*gpus)[i].near_cpus) << "\n";
  }
}

}  // namespace
}  // namespace cohort::agent
