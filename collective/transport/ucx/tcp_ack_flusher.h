// TcpAckFlusher: has the kernel send at once the ACKs it holds back on this process's TCP
// connections, for a transport that is about to wait for data.
//
// Why: Linux delays the ACK of received data (delayed ACK), by up to 200 ms on a connection it
// judges interactive, as the Reduction Server's request/response traffic looks to it; a sender
// under BBR congestion control then stalls for the delay. Measured on the emulated cluster
// (bench/RESULTS.md, "Delayed ACKs"): with BBR, 1 MiB all-reduces 150 ms apart, as DDP's buckets
// come between compute, took 183-200 ms in about one call of six (means of 42-70 ms against
// medians of 11-14); with the ACKs flushed as below, means of 11-13. With cubic (Debian's
// default) no call stalled, flushed or not: only connections running BBR are flushed, unless
// asked for all.
// UCX (Debian's 1.13.1) owns its sockets and has no option for it, so the flusher finds the
// process's connected TCP sockets itself (/proc/self/fd, again at most every kRescanInterval, so
// that connections UCX makes later are found) and on Flush sets TCP_QUICKACK on each: the kernel
// then sends any ACK it has scheduled, and leaves interactive mode until its own heuristics
// return to it, which is why a waiter flushes all the while it waits. Flushes closer together
// than kMinFlushInterval are skipped (every 5 ms left stalls; every 500 us none). Other such
// sockets of the process (a c10d store's, say) are flushed too: an early ACK costs a packet,
// nothing more.
//
// The process-wide flusher (ProcessTcpAckFlusher) flushes the connections running BBR;
// COHORT_TCP_QUICKACK=all flushes every TCP connection, =0 none.
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <mutex>
#include <vector>

#include "collective/transport/transport.h"

namespace cohort::collective {

class TcpAckFlusher {
 public:
  static constexpr auto kRescanInterval = std::chrono::milliseconds(250);
  static constexpr auto kMinFlushInterval = std::chrono::microseconds(500);

  // Which connections are flushed.
  enum class Which { kNone, kBbr, kAll };

  explicit TcpAckFlusher(Which which) : which_(which) {}

  // Sets TCP_QUICKACK on each connected TCP socket of the process that `which` names (rescanned
  // when the last scan is older than kRescanInterval). Returns how many took it; 0 with kNone,
  // when another thread is flushing, or within kMinFlushInterval of the last flush.
  int Flush();
  Which which() const { return which_; }

  // The process's connected TCP sockets (IPv4 or IPv6), by descriptor, now; with `bbr_only`,
  // those whose congestion control is BBR (TCP_CONGESTION "bbr").
  static std::vector<int> ConnectedTcpSockets(bool bbr_only = false);

 private:
  const Which which_;
  std::mutex mu_;
  std::vector<int> sockets_;
  SteadyClock::time_point scanned_{};
  SteadyClock::time_point flushed_{};
};

// The one every UCX transport of the process uses: kBbr, or as COHORT_TCP_QUICKACK says (0: kNone,
// all: kAll; anything else is taken as the default and logged).
TcpAckFlusher& ProcessTcpAckFlusher();

}  // namespace cohort::collective
