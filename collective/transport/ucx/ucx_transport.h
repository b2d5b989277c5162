// UcxTransport: the production Transport over UCX's UCP tag API. One UCP context and one worker
// per communicator; one endpoint per peer, each created with UCP_ERR_HANDLING_MODE_PEER so that a
// dead peer fails its requests (kUnavailable) instead of hanging. Large messages use UCX's
// zero-copy rendezvous (above UcxTransportOptions::eager_limit_bytes); UCX_TLS in the environment
// picks tcp, sm, or rc/ud where a fabric exists.
// Peers exchange worker addresses through a Bootstrap and then say hello to each other, so
// Create returns only when every rank is reachable (or fails naming the one that is not). Each
// address carries its publisher's UCX release and collective protocol (protocol.h): a peer on
// another minor release of UCX, or of another protocol, is refused by name before an endpoint is
// made (kFailedPrecondition).
//
// Shared memory: UCX's sm transports cannot detect a dead peer, so UCX never uses them for an
// endpoint in the peer error mode. Endpoints to same-host peers (same boot, PID and network
// namespace) therefore use UCP_ERR_HANDLING_MODE_NONE whenever UCX_TLS allows shared memory
// (unset does), and the transport checks those peers' PIDs (published with the address) every
// 100 ms while it waits (and when gone_peer() or peer_gone() is asked), and their liveness tokens
// (same_host.h), which a transport holds until it is closed or cancelled: a peer whose transport
// went counts as gone although its process lives on. With UCX_TLS=tcp they keep the peer mode
// and tcp's own detection. A send on such an endpoint cannot be withdrawn (UCX refuses to close it
// by force): abandoning one waits for the peer to take it in, up to a grace, see below.
//
// Closing: before its endpoints close, the transport takes in, and drops, what its peers still
// send and what nobody received, until they are quiet (20 ms; 500 ms after a failure; at most
// 2 s). Over TCP a socket closed with unread input is reset, which drops what this side still had
// queued (a reducer's last notices); and a peer's rendezvous send completes only once received (a
// worker abandoning a failed call's chunks to a reducer waits for that, so that the chunks are
// read before its call returns). The endpoints then close gracefully (by force to a failed peer),
// waiting at most 2 s. Over TCP a graceful close completes only once the peer's UCX has read
// what this side sent; a close still pending then (the peer is busy, or in this process and
// closed later) hands the worker to the process-wide UCX reaper (ucx_reaper.h), which progresses
// it until the peer catches up and then destroys it, so nothing is left behind and a child
// forked later can use UCX. A transport that was cancelled takes nothing in, closes by force
// what it can (peer-mode endpoints) and waits 100 ms for the rest.
//
// Progress: there is no progress thread. A thread that waits on a Request drives the worker
// (under the transport's mutex), spinning briefly and then sleeping on the worker's event fd.
// Callbacks (only the endpoint error handler) run inside that progress call. Cancel is seen
// between progress calls, which are at most 2 ms apart.
//
// Thread safety: thread-safe (one mutex around the UCP worker). Lifetime: Requests must not
// outlive the transport. Unless UCX_KEEPALIVE_INTERVAL is set, keepalive runs every second so
// idle endpoints to dead peers are noticed.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "collective/bootstrap.h"
#include "collective/transport/transport.h"

namespace cohort::collective {

struct UcxTransportOptions {
  // Namespace of this communicator's keys in the bootstrap: "<prefix>/addr/<rank>".
  std::string key_prefix = "cohort";
  // How long Create waits for peers to publish their addresses and answer the hello.
  std::chrono::milliseconds connect_timeout{60000};
  // Human name of a rank for errors: "worker 2", "reducer 1". Default: "rank N".
  std::function<std::string(int)> rank_name;
  // Messages up to this many bytes are sent eagerly (UCX's RNDV_THRESH); larger ones by
  // rendezvous, zero-copy. Above kDefaultChunkBytes, so pipelined chunks go eagerly: over tcp a
  // rendezvous handshake queues behind bulk data going the other way and stalls the pipeline.
  // 0 leaves the choice to UCX; UCX_RNDV_THRESH in the environment always wins.
  size_t eager_limit_bytes = size_t{256} << 10;
  // Each TCP socket's send buffer in bytes (UCX's TCP_SNDBUF; the kernel doubles it). 0 leaves it
  // to UCX and the kernel's autotuning; UCX_TCP_SNDBUF in the environment always wins.
  size_t tcp_send_buffer_bytes = 0;
};

class UcxTransportImpl;

class UcxTransport final : public Transport {
 public:
  static StatusOr<std::unique_ptr<UcxTransport>> Create(Bootstrap& bootstrap, int rank, int size,
                                                        UcxTransportOptions options);
  ~UcxTransport() override;

  int rank() const override;
  int size() const override;
  std::string name() const override { return "ucx"; }
  StatusOr<Request> Isend(int peer, Tag tag, ConstBytes data) override;
  StatusOr<Request> Irecv(int peer, Tag tag, MutableBytes data) override;
  StatusOr<Request> IsendNotice(int peer, Tag tag, ConstBytes data) override;
  StatusOr<int> Probe(Tag tag, Deadline deadline) override;
  int gone_peer() const override;
  bool peer_gone(int peer) const override;
  void Cancel() override;
  // Hosts: the identity each rank published with its address (collective/same_host.h); shared
  // memory: whether UCX_TLS lets UCX use it between same-host ranks.
  const Placement& placement() const override;

 private:
  explicit UcxTransport(std::unique_ptr<UcxTransportImpl> impl);
  std::unique_ptr<UcxTransportImpl> impl_;
};

}  // namespace cohort::collective
