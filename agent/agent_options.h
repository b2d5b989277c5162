// The cohort-agent command line and config file (DESIGN.md "Command-line contract"):
//   cohort-agent [--config FILE] --coordinator tcp://HOST:7401 [--node-id ID] [--gpus N|auto]
//     [--cpus N] [--memory-mb N] [--work-dir DIR] [--advertise-address ADDR]
//     [--grace-period 30s] [--builtin-dir DIR] [--insecure]
// plus --log-level LEVEL, --container-runtime auto|runc|crun|docker|podman|none
// (agent/oci_launcher.h; default auto, none disables containers), --container-rdma auto|off
// (whether containers get the node's RDMA devices; default auto), --cgroups auto|off
// (agent/cgroup.h; default auto, off leaves replicas to process groups and
// agent/process_launcher.h's environment marker), --cgroup-root DIR (a cgroup v2 directory for
// the replicas' cgroups instead of the agent's own cgroup, e.g. one delegated to it), and for CURVE
// (without --insecure) --key-file FILE (this agent's key pair, common/curve_keys.h) and
// --coordinator-key FILE (the coordinator's public key); --users USER=ACCOUNT,... and
// --allow-root-users USER,... (which Unix account job owners' replicas run as:
// agent/replica_user.h). An agent not running as root cannot switch users and says so at start.
// Parsed by common/config.h: the config file is INI ("name = value", the long flag names without
// dashes); the command line wins over the file.
//
// Defaults: key files <config dir>/keys/agent.key and coordinator.pub
// (common/config_dir.h: /etc/cohort for the packages); node id = hostname; GPUs auto (NVML);
// CPUs and memory from the machine; work dir /var/lib/cohort-agent; builtin dir = the bin dir of
// the install prefix (CMake's CMAKE_INSTALL_FULL_BINDIR), where cohort-reducer, cohort-ps and
// cohort-replica-init are installed (FindBuiltinBinary looks there first); advertise address = the
// local address of the route to the coordinator, else the first non-loopback IPv4 address, else
// 127.0.0.1; grace period 30 s.
#pragma once

#include <string>

#include "agent/agent.h"
#include "agent/handoff.h"
#include "common/config_dir.h"
#include "common/status.h"

namespace cohort::agent {

struct AgentFlags {
  bool help = false;     // --help: print usage, exit 0
  bool version = false;  // --version: print "cohort-agent <version>", exit 0
  // --check-config: parse the flags and config file and load the keys as a start would, say
  // whether they hold, exit (0 or 2). A live restart runs the new binary so before its execve.
  bool check_config = false;
  std::string usage;  // the --help text
  std::string log_level = "info";
  std::string gpus = "auto";  // "auto" or a count
  int cpus = 0;               // 0: detect
  int64_t memory_mb = 0;      // 0: detect
  std::string container_runtime = "auto";
  bool container_rdma = true;    // --container-rdma auto|off
  std::string cgroups = "auto";  // "auto": cgroup v2 where writable; "off": never
  std::string cgroup_root;       // "": the agent's own cgroup
  std::string key_file = ConfigPath("keys/agent.key");
  std::string coordinator_key_file = ConfigPath("keys/coordinator.pub");
  AgentConfig config;  // inventory not yet filled in; see BuildInventory
};

// Parses argv and the --config file. kInvalidArgument names the bad flag or key.
StatusOr<AgentFlags> ParseAgentFlags(int argc, const char* const* argv);

// The node's inventory from the flags: declared or NVML GPUs, CPUs, memory.
StatusOr<NodeInventory> BuildInventory(const AgentFlags& flags);

// Fills config.security from --insecure / the key files.
Status LoadSecurity(AgentFlags& flags);

// The daemon's agent: cgroups detected for this node id and work dir (stale replica cgroups of an
// earlier run killed; then, cgroups or not, the processes an earlier run with this work dir left,
// found by their COHORT_ATTEMPT_DIR, killed), the process launcher, and the OCI launcher when a
// container runtime is found. With `handoff` (a live restart, agent/handoff.h), the attempts it
// holds are spared by those sweeps and adopted.
StatusOr<std::unique_ptr<Agent>> BuildAgent(zmq::context_t& context, const AgentFlags& flags,
                                            Clock* clock, const Handoff* handoff = nullptr);

// The address other nodes reach this one at, as the defaults above describe.
std::string DefaultAdvertiseAddress(const std::string& coordinator_endpoint);

}  // namespace cohort::agent
