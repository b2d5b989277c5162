#include "collective/transport/ucx/tcp_ack_flusher.h"

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace cohort::collective {

std::vector<int> TcpAckFlusher::ConnectedTcpSockets(bool bbr_only) {
  std::vector<int> sockets;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return sockets;
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own) continue;
    int value = 0;
    socklen_t length = sizeof value;
    if (::getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_PROTOCOL, &value, &length) != 0 ||
        value != IPPROTO_TCP) {
      continue;  // not a socket, or not TCP
    }
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof peer;
    if (::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_length) !=
            0 ||
        (peer.ss_family != AF_INET && peer.ss_family != AF_INET6)) {
      continue;  // a listener, or not connected yet
    }
    if (bbr_only) {
      char algorithm[16] = {};
      socklen_t algorithm_length = sizeof algorithm - 1;
      if (::getsockopt(static_cast<int>(fd), IPPROTO_TCP, TCP_CONGESTION, algorithm,
                       &algorithm_length) != 0 ||
          std::strcmp(algorithm, "bbr") != 0) {
        continue;
      }
    }
    sockets.push_back(static_cast<int>(fd));
  }
  ::closedir(dir);
  return sockets;
}

int TcpAckFlusher::Flush() {
  if (which_ == Which::kNone) return 0;
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return 0;  // another thread is flushing these very sockets
  const auto now = SteadyClock::now();
  if (now - flushed_ < kMinFlushInterval) return 0;
  flushed_ = now;
  if (now - scanned_ >= kRescanInterval) {
    sockets_ = ConnectedTcpSockets(which_ == Which::kBbr);
    scanned_ = now;
  }
  // A socket closed since the scan fails here (EBADF, ENOTSOCK) or, its descriptor reused for
  // another TCP socket, takes a harmless flush.
  int flushed = 0;
  const int on = 1;
  for (int fd : sockets_) {
    if (::setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &on, sizeof on) == 0) ++flushed;
  }
  return flushed;
}

TcpAckFlusher& ProcessTcpAckFlusher() {
  static TcpAckFlusher flusher([] {
    const char* value = std::getenv("COHORT_TCP_QUICKACK");
    const std::string which = value == nullptr ? "" : value;
    if (which == "0") return TcpAckFlusher::Which::kNone;
    if (which == "all") return TcpAckFlusher::Which::kAll;
    if (!which.empty() && which != "bbr") {
      spdlog::warn(
          "COHORT_TCP_QUICKACK='{}' is none of 0, bbr, all: flushing the ACKs of BBR "
          "connections (bbr)",
          which);
    }
    return TcpAckFlusher::Which::kBbr;
  }());
  return flusher;
}

}  // namespace cohort::collective
