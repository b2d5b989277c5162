#include "agent/agent_options.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cctype>
#include <climits>
#include <filesystem>
#include <set>
#include <sstream>

#include "agent/oci_launcher.h"
#include "agent/process_launcher.h"
#include "agent/replica_env.h"
#include "agent/work_dir_lock.h"
#include "common/config.h"
#include "common/curve_keys.h"
#include "common/http_server.h"
#include "common/job_spec.h"
#include "common/logging.h"
#include "common/messaging.h"
#include "common/utf8.h"

namespace cohort::agent {
namespace po = boost::program_options;

namespace {

// --ignore-xids: "all", or Xid numbers separated by commas.
Status ParseIgnoredXids(const std::string& text, AgentConfig* config) {
  if (text == "all") {
    config->watch_xids = false;
    return Status::Ok();
  }
  std::istringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    char* end = nullptr;
    const unsigned long long xid = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || !std::isdigit(static_cast<unsigned char>(item[0])) ||
        xid == 0 || xid > 100000) {
      return InvalidArgument("--ignore-xids: expected Xid numbers separated by commas, or all; '" +
                             item + "' is not one");
    }
    config->ignored_xids.insert(xid);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<AgentFlags> ParseAgentFlags(int argc, const char* const* argv) {
  AgentFlags flags;
  flags.config.http_endpoint.clear();  // empty after parsing: not given
  FlagDuration grace = FlagDuration::Seconds(30);
  FlagDuration retention = FlagDuration::Seconds(7 * 24 * 3600);
  FlagDuration health_every = FlagDuration::Seconds(60);
  FlagDuration health_timeout = FlagDuration::Seconds(15);
  std::string health_check;
  std::vector<std::string> users;
  std::vector<std::string> labels;
  std::string allow_root;
  std::string ignore_xids;
  std::string cpu_binding = "gpu";
  std::string cpu_limit = "share";
  std::string container_rdma = "auto";
  po::options_description desc("Options");
  // clang-format off
  desc.add_options()
      ("version", "print the version and exit")
      ("check-config", po::bool_switch(&flags.check_config), "check the flags, the config file and the keys as a start would, then exit (0: they hold)")
      ("coordinator", po::value(&flags.config.coordinator), "coordinator agent endpoint, tcp://HOST:7401")
      ("node-id", po::value(&flags.config.node_id), "node id (default: hostname)")
      ("gpus", po::value(&flags.gpus), "GPU count to declare, or auto (NVML) (default auto)")
      ("cpus", po::value(&flags.cpus), "CPUs to offer (default: this process's CPU affinity)")
      ("memory-mb", po::value(&flags.memory_mb), "memory to offer in MiB (default: MemTotal)")
      ("cpu-binding", po::value(&cpu_binding), "gpu|none: run a replica pinned to GPUs on the CPUs of their NUMA node, as NVML names them, where they are at least its cpus (gpu); or wherever this agent may (default gpu)")
      ("cpu-limit", po::value(&cpu_limit), "share|quota: a replica's cpus is its share of this node's CPU time when they are contended, and it may use CPUs that are idle (share); or also the most it may take, cpus' worth, even of idle CPUs (quota) (default share)")
      ("label", po::value(&labels)->composing(), "KEY=VALUE: a label of this node, which a job's node_selector may ask for (e.g. gpu=h100); repeatable")
      ("work-dir", po::value(&flags.config.work_dir), "replica working dirs and logs; one agent's at a time (default /var/lib/cohort-agent)")
      ("builtin-dir", po::value(&flags.config.builtin_dir), "where cohort-reducer, cohort-ps and cohort-replica-init are looked for first, before beside cohort-agent and on PATH (default: the install's bin dir)")
      ("advertise-address", po::value(&flags.config.advertise_address), "address other nodes reach this node at")
      ("grace-period", po::value(&grace), "SIGTERM-to-SIGKILL time on preemption (default 30s)")
      ("attempt-retention", po::value(&retention), "remove ended attempts' working dirs and logs this old; 0 keeps them (default 7d)")
      ("insecure", po::bool_switch(&flags.config.security.insecure), "plaintext ZeroMQ (local use only)")
      ("container-runtime", po::value(&flags.container_runtime), "auto|runc|crun|docker|podman|none (default auto)")
      ("container-rdma", po::value(&container_rdma), "auto|off: give containers this node's RDMA devices (/dev/infiniband: verbs, rdma_cm, umad) as process replicas have them, so that NCCL and UCX in a container use InfiniBand or RoCE (auto); or none (off) (default auto)")
      ("cgroups", po::value(&flags.cgroups), "auto|off: put replicas in cgroup v2 where writable (default auto)")
      ("cgroup-root", po::value(&flags.cgroup_root), "cgroup v2 directory for replica cgroups (default: this agent's own cgroup)")
      ("key-file", po::value(&flags.key_file), ("this agent's CURVE key pair file (default " + ConfigPath("keys/agent.key") + ")").c_str())
      ("coordinator-key", po::value(&flags.coordinator_key_file), ("the coordinator's CURVE public key file (default " + ConfigPath("keys/coordinator.pub") + ")").c_str())
      ("log-level", po::value(&flags.log_level), "trace|debug|info|warn|error (default info)")
      ("http-endpoint", po::value(&flags.config.http_endpoint), "HOST:PORT of /metrics, or none (default 127.0.0.1:7481)")
      ("http-token", po::value(&flags.config.http_token), "token HTTP requests must carry (required beyond loopback)")
      ("users", po::value(&users)->composing(), "which Unix account each job owner's replicas run as: USER=ACCOUNT,... (a user not listed runs as the account of the same name)")
      ("allow-root-users", po::value(&allow_root), "job owners whose replicas may run as root (uid 0), comma-separated (none by default; with --insecure, every owner)")
      ("output-root", po::value(&flags.config.output_root), "where this node reads the storage marker instead of the coordinator's output root (default: that root, where jobs write; the node counts as sharing it only at that path)")
      ("health-check", po::value(&health_check), "PROGRAM [ARGS]: this node's health check (absolute path), run every --health-check-interval; while it exits other than 0 nothing new is placed here and its first output line says why (default: none)")
      ("health-check-interval", po::value(&health_every), "how often the health check runs (default 60s)")
      ("health-check-timeout", po::value(&health_timeout), "a health check run longer than this is killed and fails (default 15s)")
      ("ignore-xids", po::value(&ignore_xids), "XID,...: the NVIDIA driver's Xid errors that leave a GPU in service, beside the applications' own (13,31,43,45,68,109); all: no Xid takes one out (default: every other Xid does, until the GPU is reset and the agent reloaded, SIGHUP)");
  // clang-format on
  std::ostringstream usage;
  auto parsed = ParseFlags(argc, argv, desc,
                           "usage: cohort-agent [--config FILE] --coordinator tcp://HOST:7401 "
                           "[options]\n"
                           "Cohort's node agent: runs the training replicas the coordinator places "
                           "on this node,\nships their logs and reports their exits.",
                           &usage);
  if (!parsed.ok()) return parsed.status();
  usage << "\nSignals:\n"
           "  SIGTERM, SIGINT   stop: the replicas get SIGTERM, the grace period, then SIGKILL\n"
           "                    (reported PREEMPTED: their jobs resume elsewhere)\n"
           "  SIGHUP            GPUs taken out of service by Xids are back (after their reset)\n"
           "  SIGUSR2           live restart: execute this binary's path anew (an upgraded\n"
           "                    one) in place; the running replicas are taken over, untouched\n";
  flags.usage = usage.str();
  if (parsed->help) {
    flags.help = true;
    return flags;
  }
  if (parsed->values.count("version")) {
    flags.version = true;
    return flags;
  }
  flags.config.grace_period = grace.value;
  flags.config.attempt_retention = retention.value;
  COHORT_ASSIGN_OR_RETURN(flags.config.health_check.argv, ParseHealthCheckCommand(health_check));
  if (health_every.value.count() <= 0 || health_timeout.value.count() <= 0) {
    return InvalidArgument("--health-check-interval and --health-check-timeout must be positive");
  }
  COHORT_RETURN_IF_ERROR(ParseIgnoredXids(ignore_xids, &flags.config));
  if (cpu_binding != "gpu" && cpu_binding != "none") {
    return InvalidArgument("--cpu-binding: expected gpu or none, got '" + cpu_binding + "'");
  }
  flags.config.bind_cpus_to_gpus = cpu_binding == "gpu";
  if (cpu_limit != "share" && cpu_limit != "quota") {
    return InvalidArgument("--cpu-limit: expected share or quota, got '" + cpu_limit + "'");
  }
  flags.config.cpu_quota = cpu_limit == "quota";
  if (container_rdma != "auto" && container_rdma != "off") {
    return InvalidArgument("--container-rdma: expected auto or off, got '" + container_rdma + "'");
  }
  flags.container_rdma = container_rdma == "auto";
  flags.config.health_check.every = health_every.value;
  flags.config.health_check.timeout = health_timeout.value;
  if (flags.config.coordinator.empty()) return InvalidArgument("--coordinator is required");
  if (flags.config.node_id.empty()) {
    char host[HOST_NAME_MAX + 1] = {0};
    if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
      return InvalidArgument("--node-id: the hostname is unknown; give a node id");
    }
    flags.config.node_id = host;
  }
  if (flags.gpus != "auto") {
    char* end = nullptr;
    long n = std::strtol(flags.gpus.c_str(), &end, 10);
    if (flags.gpus.empty() || *end != '\0' || n < 0 || n > 1024) {
      return InvalidArgument("--gpus: expected a count or auto, got '" + flags.gpus + "'");
    }
  }
  if (!flags.config.http_endpoint.empty()) {
    flags.config.http_endpoint_explicit = true;
  }
  if (flags.config.http_endpoint.empty()) flags.config.http_endpoint = "127.0.0.1:7481";
  if (auto http = ParseHttpEndpoint(flags.config.http_endpoint); !http.ok()) {
    return InvalidArgument("--http-endpoint: " + http.status().message());
  }
  if (flags.cgroups != "auto" && flags.cgroups != "off") {
    return InvalidArgument("--cgroups: expected auto or off, got '" + flags.cgroups + "'");
  }
  if (!flags.cgroup_root.empty() && flags.cgroup_root.front() != '/') {
    return InvalidArgument("--cgroup-root: expected an absolute path, got '" + flags.cgroup_root +
                           "'");
  }
  if (flags.cpus < 0) return InvalidArgument("--cpus: must not be negative");
  if (flags.memory_mb < 0) return InvalidArgument("--memory-mb: must not be negative");
  if (!flags.config.output_root.empty() && flags.config.output_root[0] != '/') {
    return InvalidArgument("--output-root: expected an absolute path, got '" +
                           flags.config.output_root + "'");
  }
  if (!flags.config.output_root.empty()) {  // compared as text with the coordinator's, also normal
    std::string& root = flags.config.output_root;
    root = std::filesystem::path(root).lexically_normal().string();
    while (root.size() > 1 && root.back() == '/') root.pop_back();
  }
  for (const std::string& item : labels) {
    auto label = ParseNodeLabel(item);
    if (!label.ok()) return InvalidArgument("--label: " + label.status().message());
    flags.config.labels[label->first] = label->second;
  }
  if (flags.config.labels.size() > kMaxNodeLabels) {
    return InvalidArgument("--label: at most " + std::to_string(kMaxNodeLabels) + " labels, got " +
                           std::to_string(flags.config.labels.size()));
  }
  for (const std::string& item : users) {
    COHORT_ASSIGN_OR_RETURN(auto map, ParseUserMap("users", item));
    for (auto& [user, account] : map) flags.config.users.users[user] = account;
  }
  std::istringstream root_users(allow_root);
  for (std::string user; std::getline(root_users, user, ',');) {
    size_t b = user.find_first_not_of(" \t"), e = user.find_last_not_of(" \t");
    if (b != std::string::npos) {
      flags.config.users.allow_root_users.push_back(user.substr(b, e - b + 1));
    }
  }
  if (flags.config.work_dir.empty()) flags.config.work_dir = "/var/lib/cohort-agent";
  if (flags.config.builtin_dir.empty()) flags.config.builtin_dir = COHORT_INSTALL_BINDIR;
  if (flags.config.advertise_address.empty()) {
    flags.config.advertise_address = DefaultAdvertiseAddress(flags.config.coordinator);
  }
  // What the coordinator refuses a registration for (coordinator/node_registry.h's
  // CheckAgentNames): told at the start, not as a registration refused again and again.
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string&>{"--node-id", flags.config.node_id},
        {"--advertise-address", flags.config.advertise_address}}) {
    COHORT_RETURN_IF_ERROR(CheckPrintableText(value, kMaxNodeNameBytes, flag));
  }
  return flags;
}

StatusOr<NodeInventory> BuildInventory(const AgentFlags& flags) {
  NodeInventory inventory;
  if (flags.gpus == "auto") {
    auto gpus = ProbeNvmlGpus();
    if (gpus.ok()) {
      inventory.gpus = std::move(*gpus);
      if (!inventory.gpus.empty() && inventory.gpus.front().is_mig()) {
        spdlog::info(
            "NVML reports {} MIG device(s) ({}) of {} GPU(s), every GPU partitioned "
            "alike: they are this node's GPUs",
            inventory.gpus.size(), inventory.gpus.front().model, inventory.gpus.back().mig.gpu + 1);
      } else {
        spdlog::info("NVML reports {} GPU(s)", inventory.gpus.size());
      }
    } else if (gpus.status().code() == StatusCode::kNotFound) {
      spdlog::info("no NVIDIA driver ({}): this node offers no GPUs", gpus.status().message());
    } else {
      spdlog::warn("NVML failed ({}): this node offers no GPUs", gpus.status().ToString());
    }
  } else {
    inventory.gpus = DeclaredGpus(std::stoi(flags.gpus));
  }
  inventory.cpus = flags.cpus > 0 ? flags.cpus : DetectCpus();
  inventory.memory_mb = flags.memory_mb > 0 ? flags.memory_mb : DetectMemoryMb();
  return inventory;
}

Status LoadSecurity(AgentFlags& flags) {
  SocketSecurity& security = flags.config.security;
  if (security.insecure) {
    spdlog::warn("--insecure: talking to the coordinator in plaintext, without authentication");
    return Status::Ok();
  }
  COHORT_ASSIGN_OR_RETURN(security,
                          CurveClientSecurity(flags.key_file, flags.coordinator_key_file));
  return Status::Ok();
}

StatusOr<std::unique_ptr<Agent>> BuildAgent(zmq::context_t& context, const AgentFlags& flags,
                                            Clock* clock, const Handoff* handoff) {
  const std::string tag = AgentTag(flags.config.work_dir);
  std::set<std::string> kept_dirs, kept_cgroups;  // what the sweeps spare
  if (handoff != nullptr) {
    for (const HandedOverAttempt& h : handoff->attempts) {
      kept_dirs.insert(h.working_dir);
      if (!h.cgroup.empty()) kept_cgroups.insert(h.cgroup);
    }
  }
  CgroupManager cgroups;
  if (flags.cgroups == "auto") {
    cgroups = CgroupManager::Detect(flags.config.node_id, tag, flags.cgroup_root);
  }
  // A PID namespace per replica where this agent may create one (root, CAP_SYS_ADMIN): then
  // nothing a replica starts outlives it, cgroups or not.
  StatusOr<std::string> found_init = FindBuiltinBinary(kReplicaInitName, flags.config.builtin_dir);
  Status probe = ProcessLauncher::ProbePidNamespaces();
  std::string replica_init;
  if (found_init.ok() && probe.ok()) {
    replica_init = *found_init;
    spdlog::info(
        "replicas run in PID namespaces of their own, under {}: every process a replica starts "
        "ends with it",
        replica_init);
  } else {
    std::string why = !probe.ok() ? "this agent may not create PID namespaces (" + probe.message() +
                                        "; it needs root or CAP_SYS_ADMIN)"
                                  : found_init.status().message();
    spdlog::warn("no PID namespace per replica: {}", why);
  }
  if (!cgroups.available()) {
    const std::string no_cgroups = flags.cgroups == "off"
                                       ? "--cgroups off"
                                       : "no writable cgroup v2 (" + cgroups.reason() + ")";
    if (!replica_init.empty()) {
      spdlog::warn("NO CGROUPS: {}. Replicas run without CPU and memory limits.", no_cgroups);
    } else {
      spdlog::warn(
          "NO CGROUPS: {}, and no PID namespaces. Replicas run without CPU and memory limits, and "
          "their processes are found by process group and by the COHORT_ATTEMPT_DIR variable "
          "they inherit: a descendant that clears its environment and double-forks escapes its "
          "replica while this agent runs (it is killed when the agent shuts down), and one that "
          "outlives a killed agent is not found again. Run the agent as root, or with cgroup v2, "
          "to close this.",
          no_cgroups);
    }
  } else {
    spdlog::info("replica cgroups under {}", cgroups.base());
    if (int stale = cgroups.SweepStale(kept_cgroups); stale > 0) {
      spdlog::warn("killed the processes of {} replica(s) left by an earlier run", stale);
    }
  }
  // Also with cgroups: what an earlier run left outside this agent's level of them (one of an
  // image older than agent tags, whose level was <node id> alone, handed over a replica and was
  // then killed) still carries this work dir's COHORT_ATTEMPT_DIR.
  if (int left = ProcessLauncher::SweepLeftovers(flags.config.work_dir, kept_dirs); left > 0) {
    spdlog::warn("killed {} process(es) of replicas left by an earlier run", left);
  }
  if (::geteuid() != 0) {
    struct passwd* self = ::getpwuid(::geteuid());
    spdlog::warn(
        "this agent runs as uid {} ({}), not root: it cannot switch users, so every replica runs "
        "as that account, whoever owns its job{}",
        ::geteuid(), self ? self->pw_name : "no account name",
        flags.config.users.users.empty() ? "" : " (the users setting is not used)");
  }
  AgentConfig config = flags.config;
  config.cgroups = cgroups.available();
  config.cgroup_dir = cgroups.base();
  config.cgroups_reason =
      flags.cgroups == "off" ? "--cgroups off" : "no writable cgroup v2: " + cgroups.reason();
  auto processes = std::make_unique<ProcessLauncher>(std::move(cgroups), replica_init);
  ProcessLauncher* process_launcher = processes.get();
  COHORT_ASSIGN_OR_RETURN(auto agent, Agent::Create(context, config, std::move(processes), clock));
  if (flags.container_runtime != "none") {
    OciOptions oci;
    oci.runtime = flags.container_runtime;
    oci.cache_dir = flags.config.work_dir + "/images";
    oci.rdma = flags.container_rdma;
    oci.container_tag = tag;
    auto containers = OciLauncher::Create(oci, process_launcher);
    if (containers.ok()) {
      spdlog::info("containers run with {}, their ids cohort-{}-<job>-<replica>-<attempt>",
                   (*containers)->runtime(), oci.container_tag);
      std::set<std::string> handed_over;
      if (handoff != nullptr) {
        for (const HandedOverAttempt& a : handoff->attempts) {
          if (a.container) handed_over.insert(a.container_id);
        }
      }
      StatusOr<int> swept = (*containers)->SweepLeftovers(handed_over);
      if (!swept.ok()) {
        spdlog::warn("containers left by an earlier run of this agent are not known: {}",
                     swept.status().ToString());
      } else if (*swept > 0) {
        spdlog::warn("removed {} container(s) left by an earlier run of this agent", *swept);
      }
      agent->SetContainerLauncher(std::move(*containers));
    } else {
      spdlog::info("no container runtime ({}): container replicas will fail",
                   containers.status().message());
    }
  }
  if (handoff != nullptr) {
    const int adopted = agent->Adopt(*handoff);
    spdlog::info(
        "live restart: took over {} of {} replica attempt(s) from cohort-agent {}; kept how {} "
        "earlier one(s) ended",
        adopted, handoff->attempts.size(), handoff->from_version, handoff->ended.size());
  } else if (StatusOr<size_t> kept = agent->KeepEndsFromDisk(); !kept.ok()) {
    spdlog::warn("how earlier replicas here ended is not known: {}", kept.status().ToString());
  } else if (*kept > 0) {
    spdlog::info("kept how {} replica attempt(s) ended here before this start, to report them",
                 *kept);
  }
  return agent;
}

namespace {

// "tcp://host:7401" -> {"host", "7401"}; "[::1]" brackets removed.
bool SplitEndpoint(const std::string& endpoint, std::string* host, std::string* port) {
  std::string rest = endpoint;
  auto scheme = rest.find("://");
  if (scheme != std::string::npos) rest = rest.substr(scheme + 3);
  auto colon = rest.rfind(':');
  if (colon == std::string::npos) return false;
  *host = rest.substr(0, colon);
  *port = rest.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return !host->empty() && *host != "*";
}

std::string AddressToString(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof(text));
  } else if (sa->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text,
                sizeof(text));
  }
  return text;
}

}  // namespace

std::string DefaultAdvertiseAddress(const std::string& coordinator_endpoint) {
  // The source address of the route to the coordinator (a UDP connect sends nothing).
  std::string host, port;
  if (SplitEndpoint(coordinator_endpoint, &host, &port)) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* result = nullptr;
    if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &result) == 0) {
      std::string address;
      for (addrinfo* ai = result; ai != nullptr && address.empty(); ai = ai->ai_next) {
        int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        sockaddr_storage local{};
        socklen_t len = sizeof(local);
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
          address = AddressToString(reinterpret_cast<sockaddr*>(&local));
        }
        ::close(fd);
      }
      ::freeaddrinfo(result);
      if (!address.empty()) return address;
    }
  }
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) == 0) {
    std::string address;
    for (ifaddrs* i = interfaces; i != nullptr && address.empty(); i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
      address = AddressToString(i->ifa_addr);
    }
    ::freeifaddrs(interfaces);
    if (!address.empty()) return address;
  }
  return "127.0.0.1";
}

}  // namespace cohort::agent
