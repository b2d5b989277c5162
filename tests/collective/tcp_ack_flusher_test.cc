// TcpAckFlusher on real sockets: it finds the process's connected TCP sockets (by default those
// running BBR) and takes each out of the kernel's delayed-ACK (interactive) mode, which
// getsockopt(TCP_QUICKACK) reports.
#include "collective/transport/ucx/tcp_ack_flusher.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace cohort::collective {
namespace {

bool Has(const std::vector<int>& fds, int fd) {
  return std::find(fds.begin(), fds.end(), fd) != fds.end();
}

// A listener on loopback, a client connected to it and the accepted end.
struct LoopbackConnection {
  LoopbackConnection() {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(::listen(listener, 1), 0);
    EXPECT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&address), length), 0);
    accepted = ::accept(listener, nullptr, nullptr);
    EXPECT_GE(accepted, 0);
  }
  ~LoopbackConnection() {
    for (int fd : {listener, client, accepted}) ::close(fd);
  }
  int listener = -1, client = -1, accepted = -1;
};

int QuickAck(int fd) {
  int value = -1;
  socklen_t length = sizeof value;
  EXPECT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &value, &length), 0);
  return value;
}

TEST(TcpAckFlusherTest, FindsTheConnectedTcpSocketsOnly) {
  LoopbackConnection tcp;
  const int udp = ::socket(AF_INET, SOCK_DGRAM, 0);
  int unix_pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, unix_pair), 0);
  const std::vector<int> found = TcpAckFlusher::ConnectedTcpSockets();
  EXPECT_TRUE(Has(found, tcp.client));
  EXPECT_TRUE(Has(found, tcp.accepted));
  EXPECT_FALSE(Has(found, tcp.listener));
  EXPECT_FALSE(Has(found, udp));
  EXPECT_FALSE(Has(found, unix_pair[0]));
  EXPECT_FALSE(Has(found, unix_pair[1]));
  for (int fd : {udp, unix_pair[0], unix_pair[1]}) ::close(fd);
}

TEST(TcpAckFlusherTest, AFlushTakesEachSocketOutOfDelayedAckMode) {
  LoopbackConnection tcp;
  const int off = 0;
  for (int fd : {tcp.client, tcp.accepted}) {
    ASSERT_EQ(::setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &off, sizeof off), 0);
    ASSERT_EQ(QuickAck(fd), 0);  // interactive: ACKs wait to ride on a reply
  }
  TcpAckFlusher disabled(TcpAckFlusher::Which::kNone);
  EXPECT_EQ(disabled.Flush(), 0);
  EXPECT_EQ(QuickAck(tcp.client), 0);

  TcpAckFlusher flusher(TcpAckFlusher::Which::kAll);
  EXPECT_GE(flusher.Flush(), 2);
  EXPECT_EQ(QuickAck(tcp.client), 1);
  EXPECT_EQ(QuickAck(tcp.accepted), 1);
}

// The default flushes a connection running BBR (where delayed ACKs stalled the Reduction Server)
// and leaves one running another congestion control (reno here) as the kernel has it.
TEST(TcpAckFlusherTest, ByDefaultOnlyConnectionsRunningBbrAreFlushed) {
  LoopbackConnection tcp;
  const char bbr[] = "bbr", reno[] = "reno";
  if (::setsockopt(tcp.client, IPPROTO_TCP, TCP_CONGESTION, bbr, sizeof bbr - 1) != 0) {
    GTEST_SKIP() << "this kernel lets no socket run BBR (tcp_allowed_congestion_control): "
                 << std::strerror(errno);
  }
  ASSERT_EQ(::setsockopt(tcp.accepted, IPPROTO_TCP, TCP_CONGESTION, reno, sizeof reno - 1), 0)
      << std::strerror(errno);
  const std::vector<int> bbr_sockets = TcpAckFlusher::ConnectedTcpSockets(/*bbr_only=*/true);
  EXPECT_TRUE(Has(bbr_sockets, tcp.client));
  EXPECT_FALSE(Has(bbr_sockets, tcp.accepted));
  const int off = 0;
  for (int fd : {tcp.client, tcp.accepted}) {
    ASSERT_EQ(::setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &off, sizeof off), 0);
  }
  TcpAckFlusher flusher(TcpAckFlusher::Which::kBbr);
  EXPECT_GE(flusher.Flush(), 1);
  EXPECT_EQ(QuickAck(tcp.client), 1);
  EXPECT_EQ(QuickAck(tcp.accepted), 0);
}

// Sockets connected after the first scan are found by a later one; one closed meanwhile costs
// nothing.
TEST(TcpAckFlusherTest, ALaterScanFindsConnectionsMadeAfterTheFirst) {
  TcpAckFlusher flusher(TcpAckFlusher::Which::kAll);
  flusher.Flush();
  { LoopbackConnection gone; }  // found by no scan, or scanned and closed: no harm either way
  LoopbackConnection late;
  const int off = 0;
  ASSERT_EQ(::setsockopt(late.client, IPPROTO_TCP, TCP_QUICKACK, &off, sizeof off), 0);
  ::usleep(std::chrono::duration_cast<std::chrono::microseconds>(TcpAckFlusher::kRescanInterval)
               .count() +
           1000);
  EXPECT_GE(flusher.Flush(), 2);
  EXPECT_EQ(QuickAck(late.client), 1);
}

TEST(TcpAckFlusherTest, TheProcessFlusherFlushesBbrConnectionsUnlessToldOtherwise) {
  const char* value = std::getenv("COHORT_TCP_QUICKACK");
  const std::string which = value == nullptr ? "" : value;
  EXPECT_EQ(ProcessTcpAckFlusher().which(), which == "0"     ? TcpAckFlusher::Which::kNone
                                            : which == "all" ? TcpAckFlusher::Which::kAll
                                                             : TcpAckFlusher::Which::kBbr);
}

}  // namespace
}  // namespace cohort::collective
