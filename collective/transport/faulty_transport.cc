#include "collective/transport/faulty_transport.h"

#include <thread>

namespace cohort::collective {

Status FaultyTransport::CountOp() {
  if (dead_.load()) return Unavailable("faulty transport: this rank is dead");
  int n = ops_.fetch_add(1) + 1;
  if (plan_.die_after_ops >= 0 && n > plan_.die_after_ops) {
    if (!dead_.exchange(true) && plan_.on_death) plan_.on_death();
    return Unavailable("faulty transport: this rank died after " +
                       std::to_string(plan_.die_after_ops) + " operations");
  }
  return Status::Ok();
}

StatusOr<Request> FaultyTransport::Isend(int peer, Tag tag, ConstBytes data) {
  COHORT_RETURN_IF_ERROR(CountOp());
  if (plan_.send_delay.count() > 0) std::this_thread::sleep_for(plan_.send_delay);
  if (plan_.drop_sends_to.count(peer) > 0) return Request::Done();
  return base_.Isend(peer, tag, data);
}

StatusOr<Request> FaultyTransport::IsendNotice(int peer, Tag tag, ConstBytes data) {
  COHORT_RETURN_IF_ERROR(CountOp());
  if (plan_.drop_sends_to.count(peer) > 0) return Request::Done();
  return base_.IsendNotice(peer, tag, data);
}

StatusOr<Request> FaultyTransport::Irecv(int peer, Tag tag, MutableBytes data) {
  COHORT_RETURN_IF_ERROR(CountOp());
  return base_.Irecv(peer, tag, data);
}

}  // namespace cohort::collective
