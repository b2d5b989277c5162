#include "collective/same_host.h"

#include <unistd.h>

#include <fstream>

namespace cohort::collective {

std::string HostIdentity() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  auto link = [](const char* path) {
    char buf[128] = {0};
    const ssize_t n = readlink(path, buf, sizeof(buf) - 1);
    return n > 0 ? std::string(buf, n) : std::string("?");
  };
  return boot + "/" + link("/proc/self/ns/pid") + "/" + link("/proc/self/ns/net");
}

bool ProcessAlive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  const char state = line[close + 2];
  return state != 'Z' && state != 'X';
}

}  // namespace cohort::collective
