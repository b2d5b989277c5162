// LoopbackFabric connects n in-process ranks (one thread each, gloo's "spawn" style) for unit
// tests of the algorithms and for `cohort-bench --transport inproc`. It is a rendezvous
// transport: a message is copied once, straight from the send buffer into the receive buffer, by
// whichever thread posts the second half of the match.
//
// SetEagerLimit(bytes) makes it behave as a real transport's eager protocol does for small
// messages: a send of at most that many bytes is copied as it is posted and completes at once,
// whether or not a receive has matched it (the copy waits for one). A worker whose part of a
// collective is only such sends then ends its call before its peers enter theirs, as it does
// over UCX and TCP.
//
// Kill(rank) simulates a dead process: every pending and later operation that involves that rank
// fails with kUnavailable on the survivors.
//
// Placement: by default every rank is on one host without shared memory, so the Communicator
// treats loopback ranks as it treats ranks across hosts. A fabric built from a Placement reports
// that one instead (fake hosts, shared memory allowed): the Communicator then sets up its real
// shared-memory segments among the threads, as it would among processes on those hosts.
//
// Thread safety: all methods are thread-safe. Lifetime: the fabric must outlive its transports.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "collective/transport/transport.h"

namespace cohort::collective {

class LoopbackFabric {
 public:
  explicit LoopbackFabric(int size);
  // size = placement.hosts.size().
  explicit LoopbackFabric(Placement placement);
  ~LoopbackFabric();
  LoopbackFabric(const LoopbackFabric&) = delete;
  LoopbackFabric& operator=(const LoopbackFabric&) = delete;

  int size() const { return size_; }
  const Placement& placement() const { return placement_; }
  // Sends of at most `bytes` complete as they are posted (default 0: every send waits for its
  // receive). Set before the transports are used.
  void SetEagerLimit(size_t bytes) { eager_limit_ = bytes; }
  // The transport of `rank`; call once per rank.
  std::unique_ptr<Transport> CreateTransport(int rank);
  // Marks `rank` dead: its pending operations and those of its peers with it fail.
  void Kill(int rank);
  // Transport::Cancel of `rank`'s transport: its pending operations fail with kCancelled (a copy
  // in progress finishes first), and its later ones are refused.
  void Cancel(int rank);
  // The rank killed first, or -1.
  int FirstDead();
  bool Dead(int rank);

  struct Op;  // one posted send or receive (defined in the .cc)

 private:
  friend class LoopbackTransport;
  friend class LoopbackRequest;
  using Key = std::tuple<int, int, Tag>;  // (sender, receiver, tag)

  // `notice`: a send that a poisoned rank still makes while `peer` lives (IsendNotice).
  StatusOr<Request> Post(int self, int peer, Tag tag, bool is_send, const void* src, void* dst,
                         size_t size, bool notice = false);
  // Transport::Probe for `self`: the lowest rank whose send with `tag` to `self` waits unmatched.
  StatusOr<int> Probe(int self, Tag tag, Deadline deadline);
  bool PollOp(const std::shared_ptr<Op>& op, Deadline deadline);
  Status WaitOp(const std::shared_ptr<Op>& op, Deadline deadline);
  void CancelOp(const std::shared_ptr<Op>& op);
  // Takes `op` out of its queue (if still there). Caller holds mu_.
  void Withdraw(const std::shared_ptr<Op>& op);
  // Fails every queued operation for which why(op) gives a status, with that status, and wakes
  // the waiters (Kill, Cancel). Caller holds mu_.
  void FailQueuedLocked(const std::function<std::optional<Status>(const Op&)>& why);
  void Complete(const std::shared_ptr<Op>& send, const std::shared_ptr<Op>& recv);

  const int size_;
  const Placement placement_;
  size_t eager_limit_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, std::deque<std::shared_ptr<Op>>> sends_;  // guarded by mu_
  std::map<Key, std::deque<std::shared_ptr<Op>>> recvs_;  // guarded by mu_
  std::vector<bool> dead_;                                // guarded by mu_
  int first_dead_ = -1;                                   // guarded by mu_
  std::vector<bool> poisoned_;                            // guarded by mu_
  std::vector<bool> cancelled_;                           // guarded by mu_
  int probers_ = 0;  // guarded by mu_: threads in Probe (a queued send then wakes cv_)
};

}  // namespace cohort::collective
