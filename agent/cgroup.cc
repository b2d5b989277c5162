#include "agent/cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/logging.h"

namespace cohort::agent {
namespace {

// Writes `text` to a cgroup control file in one write() (the kernel parses one write at a time).
Status WriteControl(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path, errno);
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) return ErrnoStatus("write " + path, err);
  return Status::Ok();
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool HasWord(const std::string& list, const std::string& word) {
  std::istringstream in(list);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

// The mount point of the cgroup2 filesystem, from /proc/self/mountinfo.
std::string FindCgroup2Mount() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // ... mount_point options - fstype source super_options
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, devnum, root, mount_point;
    head >> id >> parent >> devnum >> root >> mount_point;
    return mount_point;
  }
  return "";
}

// The agent's own cgroup v2 path ("/", "/system.slice/cohort-agent.service").
std::string OwnCgroupPath() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

}  // namespace

StatusOr<std::string> CgroupManager::OwnDirectory() {
  std::string mount = FindCgroup2Mount();
  if (mount.empty()) return FailedPrecondition("no cgroup2 filesystem is mounted");
  std::string path = OwnCgroupPath();
  if (path.empty()) {
    return FailedPrecondition("this process has no cgroup v2 path in /proc/self/cgroup");
  }
  return path == "/" ? mount : mount + path;
}

CgroupManager CgroupManager::Detect(const std::string& node_id, const std::string& agent_tag,
                                    const std::string& root_override) {
  CgroupManager manager;
  std::string own;
  if (!root_override.empty()) {
    struct statfs fs {};
    if (::statfs(root_override.c_str(), &fs) != 0) {
      manager.reason_ = "cannot read " + root_override + ": " + std::strerror(errno);
      return manager;
    }
    if (fs.f_type != CGROUP2_SUPER_MAGIC) {
      manager.reason_ = root_override + " is not a cgroup v2 directory";
      return manager;
    }
    own = root_override;
  } else {
    StatusOr<std::string> found = OwnDirectory();
    if (!found.ok()) {
      manager.reason_ = found.status().message();
      return manager;
    }
    own = *found;
  }
  std::string level = node_id.empty() ? "agent" : node_id;
  if (level == "." || level == "..") level = "agent";
  if (!agent_tag.empty()) level += "@" + agent_tag;
  std::replace(level.begin(), level.end(), '/', '_');
  std::string cohort = own + "/cohort";
  std::string base = cohort + "/" + level;
  for (const std::string& dir : {cohort, base}) {
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      manager.reason_ = "cannot create " + dir + ": " + std::strerror(errno);
      return manager;
    }
  }
  if (::access((base + "/cgroup.procs").c_str(), W_OK) != 0) {
    manager.reason_ = base + "/cgroup.procs is not writable";
    return manager;
  }
  // Best effort: let replica cgroups carry cpu.weight, cpu.max, memory.max and pids.max. This
  // fails (EBUSY) when `own` holds processes and is not the root; the agent then runs without
  // limits.
  std::string available = ReadSmallFile(own + "/cgroup.controllers");
  for (const char* controller : {"cpu", "memory", "pids"}) {
    if (!HasWord(available, controller)) continue;
    for (const std::string& dir : {own, cohort, base}) {
      (void)WriteControl(dir + "/cgroup.subtree_control", std::string("+") + controller);
    }
  }
  std::string enabled = ReadSmallFile(base + "/cgroup.subtree_control");
  manager.cpu_controller_ = HasWord(enabled, "cpu");
  manager.memory_controller_ = HasWord(enabled, "memory");
  manager.pids_controller_ = HasWord(enabled, "pids");
  manager.base_ = base;
  return manager;
}

int CpuWeight(int cpus) {
  if (cpus <= 0) return 1;
  const int64_t shares = int64_t{cpus} * 1024;
  return static_cast<int>(std::min<int64_t>(10000, 1 + (shares - 2) * 9999 / 262142));
}

StatusOr<std::string> CgroupManager::Create(const std::string& name, int cpus, bool cpu_quota,
                                            int64_t memory_mb) const {
  if (!available()) return FailedPrecondition("cgroups are not available: " + reason_);
  std::string path = base_ + "/" + name;
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus("mkdir " + path, errno);
  }
  if (cpus > 0 && cpu_controller_) {
    Status s = WriteControl(path + "/cpu.weight", std::to_string(CpuWeight(cpus)));
    if (s.ok() && cpu_quota) {
      s = WriteControl(path + "/cpu.max", std::to_string(int64_t{cpus} * 100000) + " 100000");
    }
    if (!s.ok()) spdlog::warn("cgroup {}: {}", name, s.ToString());
  }
  if (memory_mb > 0 && memory_controller_) {
    Status s = WriteControl(path + "/memory.max", std::to_string(memory_mb * 1024 * 1024));
    if (!s.ok()) spdlog::warn("cgroup {}: {}", name, s.ToString());
  }
  if (pids_controller_) {
    Status s = WriteControl(path + "/pids.max", std::to_string(kReplicaPidsLimit));
    if (!s.ok()) spdlog::warn("cgroup {}: {}", name, s.ToString());
  }
  return path;
}

std::vector<pid_t> CgroupManager::Procs(const std::string& path) {
  std::vector<pid_t> pids;
  std::ifstream in(path + "/cgroup.procs");
  pid_t pid;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

int64_t CgroupManager::OomKills(const std::string& path) {
  std::ifstream in(path + "/memory.events");
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return 0;
}

void CgroupManager::Signal(const std::string& path, int sig) {
  for (pid_t pid : Procs(path)) ::kill(pid, sig);
}

void CgroupManager::Kill(const std::string& path) {
  if (WriteControl(path + "/cgroup.kill", "1").ok()) return;
  Signal(path, SIGKILL);
}

int CgroupManager::SweepStale(const std::set<std::string>& keep) const {
  if (!available()) return 0;
  int swept = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(base_, ec)) {
    if (!entry.is_directory(ec)) continue;
    std::string path = entry.path().string();
    if (keep.count(path) != 0) continue;  // as Create() named it: base() + "/" + name
    Status s = KillAndRemove(path);
    if (!s.ok()) spdlog::warn("stale replica cgroup: {}", s.ToString());
    ++swept;
  }
  return swept;
}

Status CgroupManager::KillAndRemove(const std::string& path) {
  Kill(path);
  // The kernel takes a moment to empty a killed cgroup.
  for (int i = 0; i < 200 && !Procs(path).empty(); ++i) ::usleep(5000);
  return Remove(path);
}

Status CgroupManager::Remove(const std::string& path) {
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("rmdir " + path, errno);
  return Status::Ok();
}

}  // namespace cohort::agent
