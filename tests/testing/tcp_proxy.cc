#include "tests/testing/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace cohort::testing {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// Writes all of `data` to `fd`, waiting for room (the peer reads at its own pace) until `stop`.
bool WriteAll(int fd, const char* data, size_t size, const std::atomic<bool>& stop) {
  while (size > 0 && !stop) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return size == 0;
}

}  // namespace

TcpProxy::TcpProxy(int upstream_port) : upstream_port_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return;
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof(addr);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 16) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    return;
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Run(); });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  for (const Pair& p : pairs_) {
    ::close(p.down);
    ::close(p.up);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void TcpProxy::Run() {
  while (!stop_) {
    if (cut_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const Pair& p : pairs_) {
      fds.push_back({p.down, POLLIN, 0});
      fds.push_back({p.up, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
    if (cut_) continue;  // cut while it waited: what arrived waits too
    const size_t polled = pairs_.size();
    if (fds[0].revents & POLLIN) Accept();  // appends after the polled ones
    std::vector<Pair> kept;
    for (size_t i = 0; i < polled; ++i) {
      const Pair& p = pairs_[i];
      bool alive = true;
      if (fds[1 + 2 * i].revents) alive = Forward(p.down, p.up);
      if (alive && fds[2 + 2 * i].revents) alive = Forward(p.up, p.down);
      if (alive) {
        kept.push_back(p);
      } else {
        ::close(p.down);
        ::close(p.up);
      }
    }
    for (size_t i = polled; i < pairs_.size(); ++i) kept.push_back(pairs_[i]);
    pairs_ = std::move(kept);
  }
}

void TcpProxy::Accept() {
  int down = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (down < 0) return;
  int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = Loopback(upstream_port_);
  if (up < 0 || ::connect(up, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(down);
    if (up >= 0) ::close(up);
    return;
  }
  int one = 1;
  ::setsockopt(down, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  pairs_.push_back({down, up});
}

bool TcpProxy::Forward(int from, int to) const {
  char buffer[64 << 10];
  ssize_t n = ::recv(from, buffer, sizeof(buffer), MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  if (n == 0) return false;
  return WriteAll(to, buffer, static_cast<size_t>(n), stop_);
}

}  // namespace cohort::testing
