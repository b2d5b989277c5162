// Helpers shared by the agent tests: temporary directories, file reads, process-group checks,
// deadline-driven waits, and a recording stand-in for the socket under an Outbox.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/outbox.h"

namespace cohort::agent::testing {

// Stands in for the agent's socket under an Outbox: keeps every message sent, with its id.
struct SentMessages {
  std::vector<std::pair<uint64_t, wire::BodyUnion>> messages;
  uint64_t next_id = 1;

  Outbox::Transmit Transmit() {
    return [this](wire::BodyUnion body) {
      messages.emplace_back(next_id, std::move(body));
      return next_id++;
    };
  }
  uint64_t last_id() const { return messages.back().first; }
};

class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "cohort-agent-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// True while some process of group `pgid` exists that is not a zombie.
inline bool GroupAlive(pid_t pgid) {
  if (::kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  DIR* dir = ::opendir("/proc");
  bool found = false;
  while (dirent* entry = dir ? ::readdir(dir) : nullptr) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::string stat = ReadFile(std::string("/proc/") + entry->d_name + "/stat");
    auto paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 1));
    char state = 0;
    int ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z' && state != 'X') found = true;
  }
  if (dir) ::closedir(dir);
  return found;
}

inline bool ProcessAlive(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  if (paren == std::string::npos) return false;
  char state = stat.size() > paren + 2 ? stat[paren + 2] : 'X';
  return state != 'Z' && state != 'X';
}

// Polls `done` until it holds or `timeout` passes; returns its last value.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace cohort::agent::testing
