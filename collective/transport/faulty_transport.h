// FaultyTransport wraps another Transport and injects faults, like LevelDB's EnvWrapper: it can
// kill its rank after a number of operations (running `on_death`, e.g. LoopbackFabric::Kill),
// silently drop messages to chosen peers, or delay every send. Fault tests use it to check that
// survivors return errors before their deadline instead of hanging.
//
// Thread safety: as the wrapped transport. Lifetime: `base` must outlive this object.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <set>

#include "collective/transport/transport.h"

namespace cohort::collective {

struct FaultPlan {
  // After this many Isend+Irecv calls the rank "dies": on_death runs once and every later call
  // returns kUnavailable. Negative: never.
  int die_after_ops = -1;
  std::function<void()> on_death;
  // Sends to these peers report success but are never delivered.
  std::set<int> drop_sends_to;
  // Added before each send is handed to the wrapped transport.
  std::chrono::milliseconds send_delay{0};
};

class FaultyTransport final : public Transport {
 public:
  FaultyTransport(Transport& base, FaultPlan plan) : base_(base), plan_(std::move(plan)) {}

  int rank() const override { return base_.rank(); }
  int size() const override { return base_.size(); }
  std::string name() const override { return "faulty(" + base_.name() + ")"; }
  const Placement& placement() const override { return base_.placement(); }
  StatusOr<Request> Isend(int peer, Tag tag, ConstBytes data) override;
  StatusOr<Request> IsendNotice(int peer, Tag tag, ConstBytes data) override;
  int gone_peer() const override { return base_.gone_peer(); }
  bool peer_gone(int peer) const override { return base_.peer_gone(peer); }
  void Cancel() override { base_.Cancel(); }
  StatusOr<Request> Irecv(int peer, Tag tag, MutableBytes data) override;
  StatusOr<int> Probe(Tag tag, Deadline deadline) override {
    if (dead_.load()) return Unavailable("faulty transport: this rank is dead");
    return base_.Probe(tag, deadline);
  }
  bool dead() const { return dead_.load(); }

 private:
  Status CountOp();

  Transport& base_;
  FaultPlan plan_;
  std::atomic<int> ops_{0};
  std::atomic<bool> dead_{false};
};

}  // namespace cohort::collective
