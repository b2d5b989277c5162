#include "collective/transport/transport.h"

namespace cohort::collective {

Request Request::Done(Status status) {
  Request r;
  r.done_ = true;
  r.done_status_ = std::move(status);
  return r;
}

Status Request::Wait(Deadline deadline) {
  if (done_) return done_status_;
  if (state_ == nullptr) return FailedPrecondition("Wait on an empty Request");
  Status s = state_->Wait(deadline);
  state_.reset();
  done_ = true;
  done_status_ = s;
  return s;
}

StatusOr<int> Transport::Probe(Tag /*tag*/, Deadline /*deadline*/) {
  return FailedPrecondition(name() + " transport cannot wait for a message from any peer");
}

bool Request::Poll(Deadline deadline) {
  if (done_ || state_ == nullptr) return true;
  return state_->Poll(deadline);
}

}  // namespace cohort::collective
