// The coordinator's state dir on a real, size-limited filesystem that fills up while a job runs
// (issue 15): the real daemons as processes on loopback. The replica's final status arrives while
// nothing can be stored; the coordinator refuses it for now (RESOURCE_EXHAUSTED), the agent keeps
// it and resends it, and once there is room again the job ends SUCCEEDED, also after a restart.
// Mounting a tmpfs needs root (CAP_SYS_ADMIN); elsewhere the test skips, saying so.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/testing/binaries.h"
#include "tests/testing/local_cluster.h"
#include "tests/testing/process.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
namespace ct = ::cohort::testing;
namespace fs = std::filesystem;

// Unmounts (lazily: daemons may still hold files there) what the test mounted.
struct Mount {
  std::string path;
  ~Mount() {
    if (!path.empty()) ::umount2(path.c_str(), MNT_DETACH);
  }
};

TEST(FullDiskTest, AStatusArrivingOnAFullDiskIsResentByTheAgentUntilItIsStored) {
  std::string missing = ct::MissingBinary({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN});
  if (!missing.empty()) GTEST_SKIP() << missing;
  if (::geteuid() != 0)
    GTEST_SKIP() << "mounting a size-limited tmpfs for the state dir needs root";

  ct::LocalCluster cluster({COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN});
  Mount mount;
  if (::mount("tmpfs", cluster.state_dir().c_str(), "tmpfs", 0, "size=2m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs on " << cluster.state_dir() << ": "
                 << std::strerror(errno);
  }
  mount.path = cluster.state_dir();
  ASSERT_EQ(cluster.StartCoordinator(), "");
  std::string node = "full-" + std::to_string(::getpid());
  ASSERT_EQ(cluster.StartAgent({node}), "");
  auto client = cluster.Client();

  // The chief runs until the test lets it finish.
  fs::create_directories(cluster.scratch());
  std::string go = cluster.scratch("go");
  std::string yaml = "name: on_full_disk\noutput_dir: " + cluster.scratch("out") +
                     "\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n"
                     "    process: {command: [/bin/sh, -c, 'while [ ! -e " +
                     go + " ]; do sleep 0.05; done']}\n";
  auto name = client.Submit(yaml);
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  auto running = client.WaitForJob(
      *name, [](const wire::JobInfoT& j) { return j.state == wire::JobState::RUNNING; },
      std::chrono::steady_clock::now() + 20s, 100ms);
  ASSERT_TRUE(running.ok()) << running.status().ToString() << cluster.Logs();

  // Fill the state filesystem, then let the chief finish: its SUCCEEDED cannot be stored.
  std::string filler = cluster.state_dir() + "/filler";
  {
    std::ofstream out(filler, std::ios::binary);
    std::string chunk(4096, 'f');
    for (int i = 0; i < 1024 && out; ++i) out.write(chunk.data(), chunk.size()), out.flush();
  }
  ct::WriteFile(go, "");
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        return cluster.agent(node).Log(1 << 20).find("could not take the status") !=
               std::string::npos;
      },
      20s, 100ms))
      << cluster.Logs();
  // For several resend intervals (1 s) the job stays as stored, and reads are served.
  std::this_thread::sleep_for(3s);
  auto held = client.GetJob(*name);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(held->state, wire::JobState::RUNNING) << held->message;
  EXPECT_TRUE(cluster.coordinator().running()) << cluster.Logs();
  std::string log = cluster.coordinator().Log(1 << 20);
  EXPECT_NE(log.find("a commit failed"), std::string::npos) << log;

  // Room again: the agent's next resend is stored and the job ends SUCCEEDED; no registration
  // was needed for it.
  fs::remove(filler);
  auto done = ct::WaitForJobEnd(client, *name, 20s);
  EXPECT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message << cluster.Logs();
  EXPECT_EQ(done.restarts, 0);
  std::string agent_log = cluster.agent(node).Log(1 << 20);
  EXPECT_EQ(agent_log.find("re-registering"), std::string::npos) << agent_log;

  // Stored: a SIGKILL of the coordinator and a restart keep it.
  cluster.coordinator().Kill();
  ASSERT_EQ(cluster.StartCoordinator(), "");
  auto after = client.GetJob(*name);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->state, wire::JobState::SUCCEEDED);
  EXPECT_EQ(cluster.WaitForNoReplicaProcesses(), "");
}

}  // namespace
}  // namespace cohort
