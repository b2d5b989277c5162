#include "tests/testing/local_cluster.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "agent/cgroup.h"
#include "agent/work_dir_lock.h"
#include "common/curve_keys.h"

namespace cohort::testing {
namespace {

// Removes the cgroup directory `path` and every cgroup below it, deepest first (rmdir only: a
// cgroup's control files go with its directory); one that still holds processes stays.
void RemoveCgroupTree(const std::string& path) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    if (entry.is_directory(ec)) RemoveCgroupTree(entry.path().string());
  }
  ::rmdir(path.c_str());
}

// Kills every process in the cgroup `path` and below it (what the replicas of a
// killed test left in a block of cgroups this cluster takes over), then removes the tree.
void ClearCgroupTree(const std::string& path) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    if (entry.is_directory(ec)) ClearCgroupTree(entry.path().string());
  }
  (void)agent::CgroupManager::KillAndRemove(path);  // one still busy stays
}

// The receiving end of the systemd notification protocol (sd_notify(3)) for one daemon: an
// abstract AF_UNIX datagram socket (no file to clean up, no path length to mind) whose name the
// daemon gets as NOTIFY_SOCKET. A daemon's notifications after the listener is gone fail, which
// sd_notify's callers ignore.
class NotifyListener {
 public:
  NotifyListener() {
    static std::atomic<int> count{0};
    name_ = "cohort-test-notify-" + std::to_string(::getpid()) + "-" + std::to_string(count++);
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path + 1, name_.data(), name_.size());  // sun_path[0] '\0': abstract
    const socklen_t length = offsetof(sockaddr_un, sun_path) + 1 + name_.size();
    if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0) {
      error_ = std::string("bind @") + name_ + ": " + std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
    } else if (fd_ < 0) {
      error_ = std::string("socket(AF_UNIX, SOCK_DGRAM): ") + std::strerror(errno);
    }
  }
  ~NotifyListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  // "" when listening, else why not.
  const std::string& error() const { return error_; }
  // The daemon's NOTIFY_SOCKET=... entry.
  std::string Variable() const { return "NOTIFY_SOCKET=@" + name_; }

  // Waits until a notification holding the line READY=1 came (true), or until `running` turns
  // false or `timeout` passes (false).
  bool WaitForReady(std::chrono::milliseconds timeout, const std::function<bool()>& running) {
    bool ready = false;
    WaitUntil(
        [&] {
          char buffer[4096];
          for (;;) {
            const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
            if (n < 0) return !running();  // nothing more now
            std::istringstream lines(std::string(buffer, static_cast<size_t>(n)));
            for (std::string line; std::getline(lines, line);) {
              if (line == "READY=1") return ready = true;
            }
          }
        },
        timeout, std::chrono::milliseconds(20));
    return ready;
  }

 private:
  std::string name_;
  std::string error_;
  int fd_ = -1;
};

}  // namespace

LocalCluster::LocalCluster(ClusterBinaries binaries)
    : LocalCluster(std::move(binaries), ClusterOptions()) {}

LocalCluster::LocalCluster(ClusterBinaries binaries, ClusterOptions options)
    : binaries_(std::move(binaries)), options_(std::move(options)), dir_("cohort-cluster") {
  client_endpoint_ = "tcp://127.0.0.1:" + std::to_string(PickFreePort());
  agent_endpoint_ = "tcp://127.0.0.1:" + std::to_string(PickFreePort());
  coordinator_http_port_ = PickFreePort();
  std::filesystem::create_directories(dir_.Join("state"));
  std::filesystem::create_directories(dir_.Join("scratch"));
  std::filesystem::create_directories(dir_.Join("logs"));
  // 120 blocks of 100 ports in 20000-31999, below Linux's ephemeral range (32768+), so the
  // free ports picked above never fall inside a block.
  constexpr int kBlocks = 120, kBlockSize = 100, kFirstPort = 20000;
  for (int block = 0; block < kBlocks && port_block_fd_ < 0; ++block) {
    std::string lock = "/tmp/cohort-test-port-block-" + std::to_string(block) + ".lock";
    int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      port_block_fd_ = fd;
      int first = kFirstPort + block * kBlockSize;
      port_range_ = std::to_string(first) + "-" + std::to_string(first + kBlockSize - 1);
      // Named by the block, which no other live cluster holds; what a killed test left there
      // (its agents' tags are their work dirs', so no agent of this cluster would sweep it) is
      // killed and removed first.
      auto own = agent::CgroupManager::OwnDirectory();
      std::string root = own.ok() ? *own + "/cohort-test-cluster-" + std::to_string(block) : "";
      if (!root.empty()) ClearCgroupTree(root);
      if (!root.empty() && (::mkdir(root.c_str(), 0755) == 0 || errno == EEXIST)) {
        cgroup_root_ = root;
      }
    } else {
      ::close(fd);
    }
  }
  if (port_block_fd_ < 0) throw std::runtime_error("no free block of test ports in 20000-31999");
  if (options_.secure) {
    std::filesystem::create_directories(keys_dir() + "/clients");
    std::filesystem::create_directories(keys_dir() + "/agents");
    for (const char* name : {"coordinator", "admin"}) {
      auto keys = GenerateCurveKeyPair();
      if (!keys.ok()) throw std::runtime_error(keys.status().ToString());
      Status written = WriteCurveKeyFiles(keys_dir(), name, *keys);
      if (!written.ok()) throw std::runtime_error(written.ToString());
    }
    std::filesystem::copy_file(keys_dir() + "/admin.pub", keys_dir() + "/clients/admin.pub");
  }
}

std::vector<std::string> LocalCluster::SecurityArgs(bool coordinator,
                                                    const std::string& node_id) const {
  if (!options_.secure) return {"--insecure"};
  if (coordinator) {
    return {"--key-file",    keys_dir() + "/coordinator.key",
            "--client-keys", keys_dir() + "/clients",
            "--agent-keys",  keys_dir() + "/agents"};
  }
  // The admin's replicas run as the account running the tests (root in CI: allowed for admin),
  // as every replica did before jobs had owners.
  return {"--key-file",
          keys_dir() + "/" + node_id + ".key",
          "--coordinator-key",
          keys_dir() + "/coordinator.pub",
          "--users",
          "admin=" + LocalUserName(),
          "--allow-root-users",
          "admin"};
}

LocalCluster::~LocalCluster() {
  // Agents first, so they stop their replicas while the coordinator still listens.
  for (auto& [id, agent] : agents_) agent->Signal(SIGTERM);
  for (auto& [id, agent] : agents_) agent->Stop(std::chrono::seconds(5));
  if (coordinator_) coordinator_->Stop(std::chrono::seconds(5));
  if (!cgroup_root_.empty()) RemoveCgroupTree(cgroup_root_);
  if (port_block_fd_ >= 0) ::close(port_block_fd_);  // releases the lock
}

std::string LocalCluster::agent_cgroup_dir(const std::string& node_id) const {
  auto root = agent_cgroup_roots_.find(node_id);
  if (root == agent_cgroup_roots_.end() || root->second.empty()) return "";
  return root->second + "/cohort/" + node_id + "@" + agent::AgentTag(agent_work_dir(node_id));
}

std::string LocalCluster::scratch(const std::string& relative) const {
  return relative.empty() ? dir_.Join("scratch") : dir_.Join("scratch/" + relative);
}

std::string LocalCluster::StartCoordinator(std::chrono::milliseconds timeout) {
  if (binaries_.coordinator.empty() || !FileExists(binaries_.coordinator)) {
    return "cohort-coordinator binary not found: '" + binaries_.coordinator + "'";
  }
  if (coordinator_) coordinator_->Kill();
  std::vector<std::string> args = {
      "--client-endpoint", client_endpoint_, "--agent-endpoint",    agent_endpoint_,
      "--state-dir",       state_dir(),      "--heartbeat-timeout", options_.heartbeat_timeout,
      "--port-range",      port_range_};
  for (auto& arg : SecurityArgs(true, "")) args.push_back(std::move(arg));
  const auto& extra = options_.coordinator_args;
  if (std::find(extra.begin(), extra.end(), "--http-endpoint") == extra.end()) {
    args.insert(args.end(),
                {"--http-endpoint", "127.0.0.1:" + std::to_string(coordinator_http_port_)});
  } else {
    coordinator_http_port_ = 0;
  }
  args.insert(args.end(), extra.begin(), extra.end());
  coordinator_ = std::make_unique<DaemonProcess>(binaries_.coordinator, std::move(args),
                                                 dir_.Join("logs/coordinator.log"));
  if (!coordinator_->Start()) return "cannot start " + binaries_.coordinator;
  auto client = Client(std::chrono::milliseconds(300));
  std::string last_error;
  bool ready = WaitUntil(
      [&] {
        if (!coordinator_->running()) return true;  // stop waiting; reported below
        auto jobs = client.ListJobs();
        if (!jobs.ok()) last_error = jobs.status().ToString();
        return jobs.ok();
      },
      timeout, std::chrono::milliseconds(20));
  if (!coordinator_->running()) {
    return "cohort-coordinator exited during start-up; log:\n" + coordinator_->Log();
  }
  if (!ready) {
    return "cohort-coordinator did not answer within the timeout (" + last_error + "); log:\n" +
           coordinator_->Log();
  }
  return "";
}

std::string LocalCluster::StartAgent(const AgentOptions& options,
                                     std::chrono::milliseconds timeout) {
  if (binaries_.agent.empty() || !FileExists(binaries_.agent)) {
    return "cohort-agent binary not found: '" + binaries_.agent + "'";
  }
  const std::string work_dir = agent_work_dir(options.node_id);
  std::filesystem::create_directories(work_dir);
  std::vector<std::string> args = options.extra_args;
  if (std::find(args.begin(), args.end(), "--http-endpoint") == args.end()) {
    int port = PickFreePort();
    agent_http_ports_[options.node_id] = port;
    args.insert(args.begin(), {"--http-endpoint", "127.0.0.1:" + std::to_string(port)});
  }
  const bool own_cgroup_choice = std::find(args.begin(), args.end(), "--cgroups") != args.end() ||
                                 std::find(args.begin(), args.end(), "--cgroup-root") != args.end();
  if (!cgroup_root_.empty() && !own_cgroup_choice) {
    args.insert(args.begin(), {"--cgroup-root", cgroup_root_});
  }
  auto root = std::find(args.begin(), args.end(), "--cgroup-root");
  agent_cgroup_roots_[options.node_id] =
      root != args.end() && root + 1 != args.end() ? *(root + 1) : "";
  if (std::find(args.begin(), args.end(), "--builtin-dir") == args.end()) {
    args.insert(args.begin(), {"--builtin-dir", COHORT_BUILTIN_DIR});
  }
  args.insert(
      args.begin(),
      {"--coordinator",
       options.coordinator_endpoint.empty() ? agent_endpoint_ : options.coordinator_endpoint,
       "--node-id", options.node_id, "--gpus",
       options.gpus < 0 ? "auto" : std::to_string(options.gpus), "--cpus",
       std::to_string(options.cpus), "--memory-mb", std::to_string(options.memory_mb), "--work-dir",
       work_dir, "--advertise-address", "127.0.0.1", "--grace-period", options.grace_period});
  if (options_.secure && !FileExists(keys_dir() + "/" + options.node_id + ".key")) {
    auto keys = GenerateCurveKeyPair();
    if (!keys.ok()) return keys.status().ToString();
    Status written = WriteCurveKeyFiles(keys_dir(), options.node_id, *keys);
    if (!written.ok()) return written.ToString();
    std::filesystem::copy_file(keys_dir() + "/" + options.node_id + ".pub",
                               keys_dir() + "/agents/" + options.node_id + ".pub");
  }
  for (auto& arg : SecurityArgs(false, options.node_id)) args.push_back(std::move(arg));
  std::string binary = binaries_.agent;
  if (!options.wrapper.empty()) {
    args.insert(args.begin(), binary);
    args.insert(args.begin(), options.wrapper.begin() + 1, options.wrapper.end());
    binary = options.wrapper.front();
  }
  NotifyListener notify;
  if (!notify.error().empty()) return "cannot listen for the agent's READY=1: " + notify.error();
  auto agent = std::make_unique<DaemonProcess>(binary, std::move(args),
                                               dir_.Join("logs/agent-" + options.node_id + ".log"),
                                               std::vector<std::string>{notify.Variable()});
  if (!agent->Start()) return "cannot start " + binaries_.agent;
  DaemonProcess* raw = agent.get();
  agents_[options.node_id] = std::move(agent);
  if (!notify.WaitForReady(timeout, [&] { return raw->running(); })) {
    if (!raw->running()) return "cohort-agent exited during start-up; log:\n" + raw->Log();
    return "agent " + options.node_id + " did not say READY=1 (sd_notify) in time; agent log:\n" +
           raw->Log();
  }
  auto client = Client(std::chrono::milliseconds(500));
  bool ready = WaitUntil(
      [&] {
        if (!raw->running()) return true;
        auto nodes = client.ListNodes();
        if (!nodes.ok()) return false;
        for (const auto& node : *nodes) {
          if (node.node_id == options.node_id && node.state == "READY") return true;
        }
        return false;
      },
      timeout, std::chrono::milliseconds(50));
  if (!raw->running()) return "cohort-agent exited during start-up; log:\n" + raw->Log();
  if (!ready) {
    return "agent " + options.node_id + " did not become READY; agent log:\n" + raw->Log() +
           "\ncoordinator log:\n" + (coordinator_ ? coordinator_->Log() : std::string());
  }
  return "";
}

ClientOptions LocalCluster::ClientOptionsFor(std::chrono::milliseconds timeout) const {
  ClientOptions options;
  options.endpoint = client_endpoint_;
  options.insecure = !options_.secure;
  options.timeout = timeout;
  if (options_.secure) {
    options.key_file = keys_dir() + "/admin.key";
    options.server_key_file = keys_dir() + "/coordinator.pub";
  }
  return options;
}

CoordinatorClient LocalCluster::Client(std::chrono::milliseconds timeout) const {
  auto client = CoordinatorClient::Connect(ClientOptionsFor(timeout));
  if (!client.ok()) throw std::runtime_error(client.status().ToString());
  return std::move(*client);
}

std::string LocalCluster::Logs() const {
  std::string out;
  if (coordinator_) out += "--- coordinator log ---\n" + coordinator_->Log(6000) + "\n";
  for (const auto& [id, agent] : agents_) {
    out += "--- agent " + id + " log ---\n" + agent->Log(4000) + "\n";
  }
  return out;
}

std::vector<pid_t> LocalCluster::ReplicaProcesses() const {
  return FindProcessesWithEnvOrCwd(dir_.path() + "/");
}

std::string LocalCluster::WaitForNoReplicaProcesses(std::chrono::milliseconds timeout) const {
  std::vector<pid_t> left;
  WaitUntil(
      [&] {
        left = ReplicaProcesses();
        return left.empty();
      },
      timeout, std::chrono::milliseconds(50));
  std::string out;
  for (pid_t pid : left) {
    out += (out.empty() ? "" : "; ") + std::to_string(pid) + ": " + ProcessCommandLine(pid);
  }
  return out;
}

namespace {

// Polls `job` until `done` holds for its status or `timeout` passes; returns the last status read.
wire::JobInfoT PollJob(CoordinatorClient& client, const std::string& job,
                       std::chrono::milliseconds timeout,
                       const std::function<bool(const wire::JobInfoT&)>& done) {
  wire::JobInfoT last;
  WaitUntil(
      [&] {
        auto info = client.GetJob(job);
        if (!info.ok()) return false;
        last = std::move(*info);
        return done(last);
      },
      timeout);
  return last;
}

}  // namespace

wire::JobInfoT WaitForJobEnd(CoordinatorClient& client, const std::string& job,
                             std::chrono::milliseconds timeout) {
  return PollJob(client, job, timeout, [](const wire::JobInfoT& j) {
    return j.state == wire::JobState::SUCCEEDED || j.state == wire::JobState::FAILED ||
           j.state == wire::JobState::CANCELLED;
  });
}

wire::JobInfoT WaitForReplicasEnded(CoordinatorClient& client, const std::string& job,
                                    std::chrono::milliseconds timeout) {
  return PollJob(client, job, timeout, [](const wire::JobInfoT& j) {
    return std::none_of(j.replicas.begin(), j.replicas.end(), [](const auto& r) {
      return r->state == wire::ReplicaState::PENDING || r->state == wire::ReplicaState::STARTING ||
             r->state == wire::ReplicaState::RUNNING;
    });
  });
}

bool WaitForJobState(CoordinatorClient& client, const std::string& job, wire::JobState state,
                     std::chrono::milliseconds timeout) {
  return WaitUntil(
      [&] {
        auto info = client.GetJob(job);
        return info.ok() && info->state == state;
      },
      timeout);
}

}  // namespace cohort::testing
