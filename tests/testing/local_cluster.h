// LocalCluster runs a real Cohort cluster on loopback for integration tests: one cohort-coordinator
// process and any number of cohort-agent processes, each on free ports, with state, work and log
// directories under one TempDir. It waits for readiness by asking, never by sleeping: the
// coordinator is ready when it answers ListJobs; an agent once it said READY=1 by the systemd
// notification protocol (its NOTIFY_SOCKET this cluster's: its start work is done, the sweeps of
// what an earlier run left included) and ListNodes shows it READY (which, for a restarted agent,
// the coordinator may still say of its predecessor).
//
// Each cluster owns a block of replica ports that no other LocalCluster on the host uses at the
// same time (see port_block_fd_). The coordinator can be killed (SIGKILL) and restarted on the same
// ports and state dir. The destructor stops agents first (SIGTERM, so they stop their replicas),
// then the coordinator.
//
// Each cluster's agents put replica cgroups under a cgroup of the cluster's own
// (<own cgroup>/cohort-test-cluster-<port block>, passed as --cgroup-root unless a test chooses
// --cgroups or --cgroup-root itself), removed by the destructor. Agents' levels there are their
// own anyway (agent/cgroup.h: node id and work dir), so this is for cleaning up: a cluster that
// takes over a block a killed test left kills and removes whatever that test left there first.
//
// Replica processes are found by the cluster's directory: every replica's environment names its
// job's output dir (AIP_MODEL_DIR and the others), which tests put under scratch() (the default
// output dir is under state_dir()), and its working directory is under the agents' work dirs. So
// ReplicaProcesses() lists every live replica of this cluster, and its descendants, whatever the
// command; WaitForNoReplicaProcesses() is the check that no replica outlives its job.
//
// Thread safety: none. Lifetime: daemons die with the object (and with the test process).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/client.h"
#include "tests/testing/process.h"

namespace cohort::testing {

struct ClusterBinaries {
  std::string coordinator;  // cohort-coordinator
  std::string agent;        // cohort-agent
};

struct ClusterOptions {
  // The coordinator's --heartbeat-timeout (a node silent this long is LOST).
  std::string heartbeat_timeout = "10s";
  // CURVE instead of --insecure: keys under keys_dir(): coordinator.key; each agent's
  // <node-id>.key, listed as agents/<node-id>.pub; Client()'s admin.key, listed as
  // clients/admin.pub. The agents run admin's replicas as the account running the test (root
  // allowed): --users admin=<that account> --allow-root-users admin.
  bool secure = false;
  // Appended to the coordinator's command line (with --http-endpoint among them, the cluster
  // gives it none of its own and coordinator_http_port() is 0).
  std::vector<std::string> coordinator_args = {};
};

struct AgentOptions {
  std::string node_id;
  int gpus = 0;  // -1: --gpus auto (what NVML, or the stand-in on LD_LIBRARY_PATH, finds)
  int cpus = 8;
  int memory_mb = 16384;
  std::string grace_period = "2s";
  // Appended to the agent's command line; a --builtin-dir among them replaces this build's.
  std::vector<std::string> extra_args = {};
  // Runs the agent under this command (the agent's path and arguments follow it), e.g. unshare
  // with a bind mount: a node whose view of the filesystem differs. It must exec the agent, so
  // that the process started is the agent's.
  std::vector<std::string> wrapper = {};
  // Where the agent reaches the coordinator (a TcpProxy's endpoint, say); empty: the cluster's
  // agent endpoint.
  std::string coordinator_endpoint = {};
};

class LocalCluster {
 public:
  explicit LocalCluster(ClusterBinaries binaries);
  LocalCluster(ClusterBinaries binaries, ClusterOptions options);
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Starts (or restarts, on the same ports and state dir) the coordinator and waits until it
  // answers. Returns an empty string on success, else what went wrong with the log's tail.
  std::string StartCoordinator(std::chrono::milliseconds timeout = std::chrono::seconds(15));
  // Starts an agent and waits until the coordinator lists it READY.
  std::string StartAgent(const AgentOptions& options,
                         std::chrono::milliseconds timeout = std::chrono::seconds(15));
  DaemonProcess& coordinator() { return *coordinator_; }
  DaemonProcess& agent(const std::string& node_id) { return *agents_.at(node_id); }

  // A fresh client of the coordinator's client endpoint (plaintext, or with the admin key when
  // secure), `timeout` per call.
  CoordinatorClient Client(std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;
  ClientOptions ClientOptionsFor(std::chrono::milliseconds timeout) const;
  // Secure clusters: where the keys are (see ClusterOptions::secure).
  std::string keys_dir() const { return dir_.Join("keys"); }
  const std::string& client_endpoint() const { return client_endpoint_; }
  const std::string& agent_endpoint() const { return agent_endpoint_; }
  // The HTTP ports (127.0.0.1) of the coordinator and of an agent (0: the test gave its own
  // --http-endpoint).
  int coordinator_http_port() const { return coordinator_http_port_; }
  int agent_http_port(const std::string& node_id) const {
    auto it = agent_http_ports_.find(node_id);
    return it == agent_http_ports_.end() ? 0 : it->second;
  }
  std::string state_dir() const { return dir_.Join("state"); }
  // An agent's --work-dir.
  std::string agent_work_dir(const std::string& node_id) const {
    return dir_.Join("work/" + node_id);
  }
  // The cgroup v2 directory the agents put their replica cgroups under (--cgroup-root), "" where
  // none could be made.
  const std::string& cgroup_root() const { return cgroup_root_; }
  // An agent's level of replica cgroups (agent/cgroup.h: <root>/cohort/<node id>@<tag of its work
  // dir>, the root cgroup_root() or the agent's own --cgroup-root); "" without either.
  std::string agent_cgroup_dir(const std::string& node_id) const;
  // A scratch directory of this cluster for job files, outputs, markers.
  std::string scratch(const std::string& relative = "") const;
  // The coordinator's and every agent's log tails, for failure messages.
  std::string Logs() const;

  // Live processes started for this cluster's jobs (see the header comment).
  std::vector<pid_t> ReplicaProcesses() const;
  // Waits until ReplicaProcesses() is empty. "" when it is; else each survivor's pid and
  // command line.
  std::string WaitForNoReplicaProcesses(
      std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

 private:
  ClusterBinaries binaries_;
  ClusterOptions options_;
  TempDir dir_;
  std::string client_endpoint_;
  std::string agent_endpoint_;
  int coordinator_http_port_ = 0;
  std::map<std::string, int> agent_http_ports_;
  std::map<std::string, std::string> agent_cgroup_roots_;  // node id -> its --cgroup-root
  std::unique_ptr<DaemonProcess> coordinator_;
  std::map<std::string, std::unique_ptr<DaemonProcess>> agents_;
  // --insecure, or the key flags of the coordinator (or of agent `node_id`).
  std::vector<std::string> SecurityArgs(bool coordinator, const std::string& node_id) const;
  // The block of replica ports this cluster's coordinator hands out (--port-range), held
  // exclusively through a lock file so that clusters of tests running in parallel on one host
  // never give two jobs the same port.
  int port_block_fd_ = -1;
  std::string port_range_;
  // The cgroup v2 directory the agents' replica cgroups go under ("" where none can be made:
  // then each agent finds its own, as a daemon does).
  std::string cgroup_root_;
};

// Polls `job` until it is SUCCEEDED, FAILED or CANCELLED or `timeout` passes; returns the last
// status read (empty when none could be read).
wire::JobInfoT WaitForJobEnd(CoordinatorClient& client, const std::string& job,
                             std::chrono::milliseconds timeout);

// Polls `job` until every replica has ended (none PENDING, STARTING or RUNNING: after a job's end
// its replicas' last reports may come later) or `timeout` passes; returns the last status read.
wire::JobInfoT WaitForReplicasEnded(CoordinatorClient& client, const std::string& job,
                                    std::chrono::milliseconds timeout);

// Polls `job` until its state is `state` or `timeout` passes; true when it was.
bool WaitForJobState(CoordinatorClient& client, const std::string& job, wire::JobState state,
                     std::chrono::milliseconds timeout);

}  // namespace cohort::testing
