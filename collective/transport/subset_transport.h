// SubsetTransport: some ranks of another transport seen as a transport of their own (rank i here is
// ranks[i] there), so that an algorithm written for ranks 0..n-1 runs among, say, the workers with
// the same local rank on every host. Tags pass through unchanged: subsets that run at once must not
// share a pair of ranks (the hierarchical all-reduce's subsets are disjoint).
#pragma once

#include <vector>

#include "collective/transport/transport.h"

namespace cohort::collective {

class SubsetTransport final : public Transport {
 public:
  // `ranks` must hold parent.rank() once and no rank twice; `parent` must outlive this.
  SubsetTransport(Transport& parent, std::vector<int> ranks);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  StatusOr<Request> Isend(int peer, Tag tag, ConstBytes data) override;
  StatusOr<Request> IsendNotice(int peer, Tag tag, ConstBytes data) override;
  int gone_peer() const override;
  bool peer_gone(int peer) const override;
  // Cancels the parent: its requests are the subset's.
  void Cancel() override { parent_.Cancel(); }
  StatusOr<Request> Irecv(int peer, Tag tag, MutableBytes data) override;
  std::string name() const override { return parent_.name(); }
  // The parent's, for the subset's ranks.
  const Placement& placement() const override { return placement_; }

 private:
  Transport& parent_;
  std::vector<int> ranks_;
  int rank_ = -1;
  Placement placement_;
};

}  // namespace cohort::collective
