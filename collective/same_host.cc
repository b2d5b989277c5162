#include "collective/same_host.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
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

namespace {

constexpr char kTokenPrefix[] = "cohort-live/";

// A socket for the token `name`, and its abstract address (a leading NUL, no terminator).
int TokenSocket(const std::string& name, sockaddr_un* addr, socklen_t* len) {
  const std::string path = kTokenPrefix + name;
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  const size_t n = std::min(path.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, path.data(), n);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

}  // namespace

LivenessToken::LivenessToken(const std::string& name) {
  sockaddr_un addr;
  socklen_t len;
  const int fd = TokenSocket(name, &addr, &len);
  if (fd < 0) return;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    ::close(fd);
    return;
  }
  fd_.store(fd);
}

LivenessToken::~LivenessToken() { Release(); }

void LivenessToken::Release() {
  const int fd = fd_.exchange(-1);
  if (fd >= 0) ::close(fd);
}

bool LivenessTokenHeld(const std::string& name) {
  sockaddr_un addr;
  socklen_t len;
  const int fd = TokenSocket(name, &addr, &len);
  if (fd < 0) return true;
  // Only a bind that succeeds proves the name free; any failure counts as held.
  const bool free = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), len) == 0;
  ::close(fd);
  return !free;
}

}  // namespace cohort::collective
