#include "collective/same_host.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <mutex>
#include <vector>

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

// The tokens this process holds, so that a child forked without exec (a DataLoader worker, a
// subprocess before its exec) gives its copies up at once: SOCK_CLOEXEC covers exec, not fork, and
// a child holding its parent's socket would keep a closed transport looking open to its peers for
// as long as the child lives. The lock is taken in a pthread_atfork prepare handler, so no token
// is half made or half released at the fork; the child, its only thread the forking one, closes
// every held socket and lets go of the lock.
pthread_mutex_t g_tokens_mu = PTHREAD_MUTEX_INITIALIZER;
std::vector<std::atomic<int>*>* g_tokens = nullptr;  // guarded by g_tokens_mu; never freed

void LockTokens() { pthread_mutex_lock(&g_tokens_mu); }
void UnlockTokens() { pthread_mutex_unlock(&g_tokens_mu); }
void ReleaseTokensInChild() {
  if (g_tokens != nullptr) {
    for (std::atomic<int>* fd : *g_tokens) {
      const int held = fd->exchange(-1);
      if (held >= 0) ::close(held);
    }
    g_tokens->clear();
  }
  UnlockTokens();
}

// Takes the registry's lock, registering the fork handlers the first time.
void LockTokensForChange() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_tokens = new std::vector<std::atomic<int>*>();
    pthread_atfork(LockTokens, UnlockTokens, ReleaseTokensInChild);
  });
  LockTokens();
}

}  // namespace

LivenessToken::LivenessToken(const std::string& name) {
  sockaddr_un addr;
  socklen_t len;
  LockTokensForChange();
  const int fd = TokenSocket(name, &addr, &len);
  if (fd >= 0 && ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), len) == 0) {
    fd_.store(fd);
    g_tokens->push_back(&fd_);
  } else if (fd >= 0) {
    ::close(fd);
  }
  UnlockTokens();
}

LivenessToken::~LivenessToken() { Release(); }

void LivenessToken::Release() {
  LockTokensForChange();
  const int fd = fd_.exchange(-1);
  if (fd >= 0) {
    ::close(fd);
    g_tokens->erase(std::find(g_tokens->begin(), g_tokens->end(), &fd_));
  }
  UnlockTokens();
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
