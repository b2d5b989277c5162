#include "collective/transport/loopback/loopback_transport.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace cohort::collective {

struct LoopbackFabric::Op {
  int self = 0;
  int peer = 0;
  Tag tag = 0;
  bool is_send = false;
  const void* src = nullptr;
  void* dst = nullptr;
  size_t size = 0;
  bool queued = false;   // still in sends_/recvs_
  bool matched = false;  // a copy is in progress by another thread
  bool done = false;
  Status status;
  // An eager send: done when posted, src points at its copy of the payload.
  bool eager = false;
  std::vector<std::byte> eager_copy;
};

class LoopbackRequest final : public RequestState {
 public:
  LoopbackRequest(LoopbackFabric* fabric, std::shared_ptr<LoopbackFabric::Op> op)
      : fabric_(fabric), op_(std::move(op)) {}
  ~LoopbackRequest() override {
    if (!waited_) fabric_->CancelOp(op_);
  }
  Status Wait(Deadline deadline) override {
    waited_ = true;
    return fabric_->WaitOp(op_, deadline);
  }
  bool Poll(Deadline deadline) override { return fabric_->PollOp(op_, deadline); }

 private:
  LoopbackFabric* fabric_;
  std::shared_ptr<LoopbackFabric::Op> op_;
  bool waited_ = false;
};

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(LoopbackFabric* fabric, int rank) : fabric_(fabric), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return fabric_->size(); }
  std::string name() const override { return "loopback"; }
  const Placement& placement() const override { return fabric_->placement(); }
  StatusOr<Request> Isend(int peer, Tag tag, ConstBytes data) override {
    return fabric_->Post(rank_, peer, tag, true, data.data, nullptr, data.size);
  }
  StatusOr<Request> IsendNotice(int peer, Tag tag, ConstBytes data) override {
    return fabric_->Post(rank_, peer, tag, true, data.data, nullptr, data.size, /*notice=*/true);
  }
  int gone_peer() const override { return fabric_->FirstDead(); }
  bool peer_gone(int peer) const override { return fabric_->Dead(peer); }
  void Cancel() override { fabric_->Cancel(rank_); }
  StatusOr<Request> Irecv(int peer, Tag tag, MutableBytes data) override {
    return fabric_->Post(rank_, peer, tag, false, nullptr, data.data, data.size);
  }
  StatusOr<int> Probe(Tag tag, Deadline deadline) override {
    return fabric_->Probe(rank_, tag, deadline);
  }

 private:
  LoopbackFabric* fabric_;
  int rank_;
};

LoopbackFabric::LoopbackFabric(int size)
    : LoopbackFabric(Placement::OneHost(size, /*shared_memory=*/false)) {}

LoopbackFabric::LoopbackFabric(Placement placement)
    : size_(static_cast<int>(placement.hosts.size())),
      placement_(std::move(placement)),
      dead_(size_, false),
      poisoned_(size_, false),
      cancelled_(size_, false) {}

LoopbackFabric::~LoopbackFabric() = default;

std::unique_ptr<Transport> LoopbackFabric::CreateTransport(int rank) {
  return std::make_unique<LoopbackTransport>(this, rank);
}

void LoopbackFabric::FailQueuedLocked(const std::function<std::optional<Status>(const Op&)>& why) {
  for (auto* queues : {&sends_, &recvs_}) {
    for (auto it = queues->begin(); it != queues->end();) {
      auto& q = it->second;
      for (auto op = q.begin(); op != q.end();) {
        std::optional<Status> status = why(**op);
        if (!status) {
          ++op;
          continue;
        }
        (*op)->queued = false;
        (*op)->done = true;
        (*op)->status = std::move(*status);
        op = q.erase(op);
      }
      it = q.empty() ? queues->erase(it) : std::next(it);
    }
  }
  cv_.notify_all();
}

void LoopbackFabric::Kill(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (first_dead_ < 0 && !dead_[rank]) first_dead_ = rank;
  dead_[rank] = true;
  FailQueuedLocked([rank](const Op& op) -> std::optional<Status> {
    if (op.self == rank) return Unavailable("this rank was killed");
    if (op.peer == rank) return Unavailable("peer " + std::to_string(rank) + " is gone");
    return std::nullopt;
  });
}

void LoopbackFabric::Cancel(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_[rank] = true;
  poisoned_[rank] = true;
  FailQueuedLocked([rank](const Op& op) -> std::optional<Status> {
    if (op.self != rank) return std::nullopt;
    return Cancelled(std::string("loopback: ") + (op.is_send ? "send to" : "receive from") +
                     " rank " + std::to_string(op.peer) + ": cancelled");
  });
}

int LoopbackFabric::FirstDead() {
  std::lock_guard<std::mutex> lock(mu_);
  return first_dead_;
}

bool LoopbackFabric::Dead(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  return rank >= 0 && rank < size_ && dead_[rank];
}

StatusOr<Request> LoopbackFabric::Post(int self, int peer, Tag tag, bool is_send, const void* src,
                                       void* dst, size_t size, bool notice) {
  if (peer < 0 || peer >= size_ || peer == self) {
    return InvalidArgument("loopback: bad peer " + std::to_string(peer));
  }
  auto op = std::make_shared<Op>();
  op->self = self;
  op->peer = peer;
  op->tag = tag;
  op->is_send = is_send;
  op->src = src;
  op->dst = dst;
  op->size = size;
  std::shared_ptr<Op> match;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // As UCX does: a receive whose message is already here is still posted.
    const auto queued = sends_.find(Key{peer, self, tag});
    const bool arrived = !is_send && queued != sends_.end() && !queued->second.empty();
    if (cancelled_[self]) return Cancelled("loopback: the transport was cancelled");
    if (poisoned_[self] && !notice && !arrived) {
      return Aborted("loopback transport is poisoned by an earlier error");
    }
    if (dead_[self]) return Unavailable("this rank was killed");
    if (dead_[peer]) {
      poisoned_[self] = true;
      return Unavailable("peer " + std::to_string(peer) + " is gone");
    }
    Key key = is_send ? Key{self, peer, tag} : Key{peer, self, tag};
    auto& other = is_send ? recvs_ : sends_;
    auto it = other.find(key);
    if (it != other.end() && !it->second.empty()) {
      match = it->second.front();
      it->second.pop_front();
      if (it->second.empty()) other.erase(it);
      match->queued = false;
      match->matched = true;
      op->matched = true;
    } else {
      op->queued = true;
      if (is_send && eager_limit_ > 0 && size <= eager_limit_) {
        const auto* bytes = static_cast<const std::byte*>(src);
        op->eager_copy.assign(bytes, bytes + size);
        op->src = op->eager_copy.data();
        op->eager = true;
        op->done = true;
      }
      (is_send ? sends_ : recvs_)[key].push_back(op);
      if (is_send && probers_ > 0) cv_.notify_all();
    }
  }
  if (match) {
    if (is_send) {
      Complete(op, match);
    } else {
      Complete(match, op);
    }
  }
  return Request(std::make_unique<LoopbackRequest>(this, op));
}

StatusOr<int> LoopbackFabric::Probe(int self, Tag tag, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  ++probers_;
  StatusOr<int> found = DeadlineExceeded("loopback: receive from any rank timed out");
  while (true) {
    // A send waiting in sends_ has not been taken by a receive (a posted one would have matched).
    int peer = -1;
    for (int r = 0; r < size_ && peer < 0; ++r) {
      const auto it = sends_.find(Key{r, self, tag});
      if (it != sends_.end() && !it->second.empty()) peer = r;
    }
    const auto dead = std::find(dead_.begin(), dead_.end(), true);
    if (peer >= 0) {
      found = peer;
    } else if (cancelled_[self]) {
      found = Cancelled("loopback: the transport was cancelled");
    } else if (dead_[self]) {
      found = Unavailable("this rank was killed");
    } else if (dead != dead_.end()) {
      poisoned_[self] = true;
      found = Unavailable("peer " + std::to_string(dead - dead_.begin()) + " is gone");
    } else if (poisoned_[self]) {
      found = Aborted("loopback transport is poisoned by an earlier error");
    } else if (SteadyClock::now() < deadline) {
      cv_.wait_until(lock, deadline);
      continue;
    }
    break;
  }
  --probers_;
  return found;
}

void LoopbackFabric::Complete(const std::shared_ptr<Op>& send, const std::shared_ptr<Op>& recv) {
  Status recv_status;
  if (send->size > recv->size) {
    recv_status = DataLoss("loopback: message of " + std::to_string(send->size) +
                           " bytes truncated to " + std::to_string(recv->size));
  } else if (send->size > 0) {
    std::memcpy(recv->dst, send->src, send->size);
  }
  std::lock_guard<std::mutex> lock(mu_);
  send->done = true;
  send->matched = false;
  recv->done = true;
  recv->matched = false;
  recv->status = recv_status;
  cv_.notify_all();
}

bool LoopbackFabric::PollOp(const std::shared_ptr<Op>& op, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, deadline, [&] { return op->done; });
}

Status LoopbackFabric::WaitOp(const std::shared_ptr<Op>& op, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!op->done) {
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !op->done && !op->matched) {
      break;
    }
  }
  if (!op->done) {
    // Deadline passed with no match: withdraw the operation.
    Withdraw(op);
    op->done = true;
    op->status =
        DeadlineExceeded(std::string("loopback: ") + (op->is_send ? "send to" : "receive from") +
                         " rank " + std::to_string(op->peer) + " timed out");
  }
  if (!op->status.ok()) poisoned_[op->self] = true;
  return op->status;
}

void LoopbackFabric::CancelOp(const std::shared_ptr<Op>& op) {
  std::unique_lock<std::mutex> lock(mu_);
  // A copy in progress touches the caller's buffer: let it finish first.
  cv_.wait(lock, [&] { return !op->matched; });
  // An eager send left when it was posted: its receiver still gets it.
  if (op->queued && !op->eager) Withdraw(op);
  op->done = true;
}

void LoopbackFabric::Withdraw(const std::shared_ptr<Op>& op) {
  Key key = op->is_send ? Key{op->self, op->peer, op->tag} : Key{op->peer, op->self, op->tag};
  auto& queues = op->is_send ? sends_ : recvs_;
  auto it = queues.find(key);
  if (it != queues.end()) {
    std::erase(it->second, op);
    if (it->second.empty()) queues.erase(it);
  }
  op->queued = false;
}

}  // namespace cohort::collective
