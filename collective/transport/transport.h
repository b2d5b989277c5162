// Transport moves bytes between the ranks of one communicator. It knows nothing about reductions:
// the algorithms in collective/algorithms/ see only this interface, and UCX types never leave
// collective/transport/ucx/.
//
// Matching: a receive posted with (peer, tag) takes the oldest message that `peer` sent to this
// rank with the same tag; messages between one pair with one tag arrive in send order.
//
// Thread safety: Isend/Irecv may be called from any thread; a Request is waited on by one thread.
// Buffers: the caller keeps `data` alive and unchanged (send) or untouched (receive) until Wait
// returns OK. Destroying a Request that has not completed cancels it where the transport can
// (receives always; sends are abandoned only after the transport is poisoned).
// Errors: a peer that is gone makes its requests fail with kUnavailable; a Wait whose deadline
// passes fails with kDeadlineExceeded. After any error the transport is poisoned: later
// Isend/Irecv calls return kAborted until the communicator is rebuilt (IsendNotice excepted).
// Cancel (from any thread) ends every wait of this rank's requests, in progress or later, within a
// few milliseconds with kCancelled, and refuses every later Isend/Irecv (notices too).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "collective/transport/placement.h"
#include "common/status.h"

namespace cohort::collective {

using SteadyClock = std::chrono::steady_clock;
using Deadline = SteadyClock::time_point;

inline Deadline DeadlineAfter(std::chrono::milliseconds timeout) {
  return SteadyClock::now() + timeout;
}

// A tag names one message of one operation: a 20-bit operation sequence number (wraps) and a
// 28-bit step within it, packed like UCC's tags. Transports use the upper 16 bits of their wire
// tag for the sender's rank, so a Tag uses only the low 48 bits.
using Tag = uint64_t;
constexpr uint32_t kTagSeqBits = 20;
constexpr uint32_t kTagStepBits = 28;
constexpr Tag kTagMask = (Tag{1} << 48) - 1;
constexpr Tag MakeTag(uint32_t seq, uint32_t step) {
  return ((Tag{seq} & ((Tag{1} << kTagSeqBits) - 1)) << kTagStepBits) |
         (Tag{step} & ((Tag{1} << kTagStepBits) - 1));
}

struct ConstBytes {
  const void* data = nullptr;
  size_t size = 0;
};
struct MutableBytes {
  void* data = nullptr;
  size_t size = 0;
};

// The state behind one outstanding send or receive; implemented by each transport.
class RequestState {
 public:
  virtual ~RequestState() = default;
  // Blocks until the operation completes, fails, or `deadline` passes. Called at most once to a
  // final answer; after it returns, the buffer belongs to the caller again unless the status is
  // kDeadlineExceeded on a send (then the transport is poisoned and the send abandoned).
  virtual Status Wait(Deadline deadline) = 0;
  // Waits until the operation completes or `deadline` passes, without failing or cancelling it:
  // returns true when Wait will return at once. For idle waits that must stay interruptible.
  virtual bool Poll(Deadline deadline) = 0;
};

// A handle to one Isend/Irecv. Movable; Wait once.
class Request {
 public:
  Request() = default;
  explicit Request(std::unique_ptr<RequestState> state) : state_(std::move(state)) {}
  // A request that is already complete with `status` (used for zero-work operations).
  static Request Done(Status status = Status::Ok());

  [[nodiscard]] Status Wait(Deadline deadline);
  // True once the request has completed (OK or not); false if `deadline` passed first. The
  // request stays posted either way.
  bool Poll(Deadline deadline);
  bool valid() const { return state_ != nullptr || done_; }

 private:
  std::unique_ptr<RequestState> state_;
  bool done_ = false;
  Status done_status_;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual StatusOr<Request> Isend(int peer, Tag tag, ConstBytes data) = 0;
  virtual StatusOr<Request> Irecv(int peer, Tag tag, MutableBytes data) = 0;
  // As Isend, but refused only when `peer` itself is gone, not because another peer's failure
  // poisoned the transport: for a last message that tells the peers still there about that
  // failure (a reducer naming the worker that ended a round, reduction_server.h "Failures").
  virtual StatusOr<Request> IsendNotice(int peer, Tag tag, ConstBytes data) {
    return Isend(peer, tag, data);
  }
  // Waits until a message with `tag` has arrived from some peer that no posted receive has taken,
  // and returns that peer without receiving the message: an Irecv(peer, tag) posted next, before
  // any other receive with `tag`, takes it. For receives from any peer (point_to_point.h). When
  // several peers' messages wait, which one is returned is the transport's choice. Fails with
  // kDeadlineExceeded when none came by `deadline`, and as Irecv is refused once this transport
  // is poisoned, cancelled or a peer is gone (a message already here is still returned). The
  // default refuses (kFailedPrecondition): only transports that can find such a message have it.
  virtual StatusOr<int> Probe(Tag tag, Deadline deadline);
  // The peer this transport found gone first (of peers found at once, the lowest rank), or -1:
  // the likeliest cause of what failed after it, where peers that went later (ranks ended by
  // their launcher once one failed, say) would otherwise take the blame.
  virtual int gone_peer() const { return -1; }
  // Whether this transport knows `peer` to be gone, whether or not it went first. The default
  // knows only gone_peer().
  virtual bool peer_gone(int peer) const { return peer >= 0 && peer == gone_peer(); }
  // Gives up on everything this rank has posted or will post: waits in progress on any thread
  // end within a few milliseconds with kCancelled (a send is abandoned as after a failure), and
  // later Isend/Irecv/IsendNotice calls are refused with kCancelled. For a process that abandons
  // its collectives (the torch backend's abort). Thread-safe, idempotent, irreversible.
  virtual void Cancel() = 0;
  // Short name for logs and benchmark output: "loopback", "ucx".
  virtual std::string name() const = 0;
  // Where the ranks run (placement.h); fixed for the transport's life.
  virtual const Placement& placement() const = 0;
};

}  // namespace cohort::collective
