#include "agent/proc_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

namespace cohort::agent {
namespace {

struct ProcStat {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgrp = 0;
  char state = 0;
};

// The whole of a small /proc file ("" when it cannot be read).
std::string ReadProcFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) text.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  return text;
}

// Calls `visit` with every process that /proc lists and that is not a zombie.
void ForEachLiveProcess(const std::function<void(const ProcStat&)>& visit) {
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::string stat = ReadProcFile(std::string("/proc/") + entry->d_name + "/stat");
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    auto paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    ProcStat p;
    p.pid = static_cast<pid_t>(std::atoi(entry->d_name));
    std::istringstream rest(stat.substr(paren + 1));
    rest >> p.state >> p.ppid >> p.pgrp;
    if (!rest || p.state == 'Z' || p.state == 'X') continue;
    visit(p);
  }
  ::closedir(dir);
}

}  // namespace

bool GroupHasLiveMembers(pid_t pgid) {
  bool found = false;
  ForEachLiveProcess([&](const ProcStat& p) { found |= p.pgrp == pgid; });
  return found;
}

std::vector<pid_t> ProcessesWithEnvEntry(const std::string& entry, bool prefix) {
  std::vector<pid_t> out;
  ForEachLiveProcess([&](const ProcStat& p) {
    std::string environ = ReadProcFile("/proc/" + std::to_string(p.pid) + "/environ");
    // NUL-separated NAME=value entries.
    for (size_t start = 0; start < environ.size();) {
      size_t end = environ.find('\0', start);
      if (end == std::string::npos) end = environ.size();
      std::string_view item(environ.data() + start, end - start);
      if (prefix ? item.substr(0, entry.size()) == entry : item == entry) {
        out.push_back(p.pid);
        break;
      }
      start = end + 1;
    }
  });
  return out;
}

std::vector<pid_t> Descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // ppid -> pid
  ForEachLiveProcess([&](const ProcStat& p) { children.emplace(p.ppid, p.pid); });
  std::vector<pid_t> out;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    pid_t parent = todo.back();
    todo.pop_back();
    auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

pid_t NamespacePid(pid_t pid) {
  std::string status = ReadProcFile("/proc/" + std::to_string(pid) + "/status");
  if (status.empty()) return 0;
  auto line = status.find("\nNSpid:");
  if (line == std::string::npos) return pid;
  auto end = status.find('\n', line + 1);
  std::istringstream fields(
      status.substr(line + 7, end == std::string::npos ? end : end - line - 7));
  pid_t innermost = pid;
  for (pid_t value; fields >> value;) innermost = value;
  return innermost;
}

int SignalEach(const std::vector<pid_t>& pids, int sig) {
  int reached = 0;
  for (pid_t pid : pids) reached += ::kill(pid, sig) == 0 ? 1 : 0;
  return reached;
}

int KillUntilNoneLeft(const std::function<std::vector<pid_t>()>& find) {
  std::set<pid_t> killed;
  for (int round = 0; round < 100; ++round) {
    std::vector<pid_t> left = find();
    if (left.empty()) break;
    for (pid_t pid : left) {
      if (::kill(pid, SIGKILL) == 0) killed.insert(pid);
    }
    ::usleep(2000);  // let the kernel finish them before looking again
  }
  return static_cast<int>(killed.size());
}

}  // namespace cohort::agent
