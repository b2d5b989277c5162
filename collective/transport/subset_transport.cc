#include "collective/transport/subset_transport.h"

#include <algorithm>
#include <string>

namespace cohort::collective {

SubsetTransport::SubsetTransport(Transport& parent, std::vector<int> ranks)
    : parent_(parent), ranks_(std::move(ranks)) {
  const auto it = std::find(ranks_.begin(), ranks_.end(), parent_.rank());
  if (it != ranks_.end()) rank_ = static_cast<int>(it - ranks_.begin());
  const Placement& all = parent_.placement();
  placement_.shared_memory = all.shared_memory;
  for (int r : ranks_) {
    placement_.hosts.push_back(r >= 0 && r < static_cast<int>(all.hosts.size()) ? all.hosts[r]
                                                                                : "");
  }
}

StatusOr<Request> SubsetTransport::Isend(int peer, Tag tag, ConstBytes data) {
  if (peer < 0 || peer >= size())
    return InvalidArgument("subset transport: bad peer " + std::to_string(peer));
  return parent_.Isend(ranks_[peer], tag, data);
}

StatusOr<Request> SubsetTransport::IsendNotice(int peer, Tag tag, ConstBytes data) {
  if (peer < 0 || peer >= size())
    return InvalidArgument("subset transport: bad peer " + std::to_string(peer));
  return parent_.IsendNotice(ranks_[peer], tag, data);
}

int SubsetTransport::gone_peer() const {
  const int gone = parent_.gone_peer();
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i] == gone) return static_cast<int>(i);
  }
  return -1;
}

bool SubsetTransport::peer_gone(int peer) const {
  return peer >= 0 && peer < size() && parent_.peer_gone(ranks_[peer]);
}

StatusOr<Request> SubsetTransport::Irecv(int peer, Tag tag, MutableBytes data) {
  if (peer < 0 || peer >= size())
    return InvalidArgument("subset transport: bad peer " + std::to_string(peer));
  return parent_.Irecv(ranks_[peer], tag, data);
}

}  // namespace cohort::collective
