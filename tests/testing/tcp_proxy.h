// TcpProxy stands between a daemon and the endpoint it connects to (an agent and its coordinator)
// so that a test can cut the network between them: a real loopback TCP listener whose thread
// forwards every accepted connection to `upstream_port` on 127.0.0.1, byte for byte, both ways.
//
// Cut() is a partition, not a disconnect: from then on the proxy reads nothing, writes nothing and
// accepts nothing, and closes nothing, so both peers' connections stay ESTABLISHED while what they
// send waits in kernel buffers, as when a link fails and TCP has not given up yet. Heal() resumes
// forwarding (what waited is then delivered, late, as after a real partition) and accepting.
//
// Thread safety: Cut() and Heal() may be called from any thread. Lifetime: the destructor stops
// the thread and closes every connection.
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace cohort::testing {

class TcpProxy {
 public:
  // Listens on 127.0.0.1 at a free port; port() is 0 when it could not.
  explicit TcpProxy(int upstream_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  // "tcp://127.0.0.1:<port()>", for a ZeroMQ peer.
  std::string endpoint() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
  void Cut() { cut_ = true; }
  void Heal() { cut_ = false; }

 private:
  struct Pair {
    int down = -1;  // the accepted connection
    int up = -1;    // to upstream
  };
  void Run();
  void Accept();
  // Moves what `from` has to `to`; false when either side is done (closed or failed) or the proxy
  // stops.
  bool Forward(int from, int to) const;

  int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stop_{false};
  std::vector<Pair> pairs_;  // the thread's
  std::thread thread_;
};

}  // namespace cohort::testing
