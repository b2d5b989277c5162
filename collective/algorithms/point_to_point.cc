#include "collective/algorithms/point_to_point.h"

namespace cohort::collective {
namespace {

Status CheckPointToPoint(const Transport& transport, const PointToPointOptions& options,
                         const char* what) {
  const int n = options.num_workers;
  if (n <= 0 || transport.rank() >= n || transport.size() < n) {
    return InvalidArgument(std::string(what) + ": this rank is not one of " + std::to_string(n) +
                           " workers");
  }
  if (options.peer < 0 || options.peer >= n || options.peer == transport.rank()) {
    return InvalidArgument(std::string(what) + ": peer " + std::to_string(options.peer) +
                           " is not another worker (this is worker " +
                           std::to_string(transport.rank()) + " of " + std::to_string(n) + ")");
  }
  if (options.tag < 0 || options.tag >= kPointToPointTagLimit) {
    return InvalidArgument(std::string(what) + ": tag " + std::to_string(options.tag) +
                           " is outside [0, " + std::to_string(kPointToPointTagLimit) + ")");
  }
  if (!IsValid(options.type)) return InvalidArgument(std::string(what) + ": unknown data type");
  if (options.count > 0 && options.data == nullptr)
    return InvalidArgument(std::string(what) + ": null buffer");
  return Status::Ok();
}

CallHeader PointToPointHeader(const PointToPointOptions& options) {
  CallHeader h;
  h.kind = static_cast<uint8_t>(FlightOp::kSend);
  h.type = static_cast<uint8_t>(options.type);
  h.root = options.tag;
  h.count = options.count;
  return h;
}

// "12 f32 (48 bytes)": what a message holds (the bytes are what must match where a caller moves
// bytes as the widest type that divides them, as the torch backend does).
std::string Describe(const CallHeader& h) {
  const auto type = static_cast<DataType>(h.type);
  if (!IsValid(type)) return std::to_string(h.count) + " type " + std::to_string(h.type);
  return std::to_string(h.count) + " " + std::string(DataTypeName(type)) + " (" +
         std::to_string(h.count * DataTypeSize(type)) + " bytes)";
}

}  // namespace

StatusOr<PointToPointRequest> PointToPointRequest::Post(Transport& transport,
                                                        const PointToPointOptions& options,
                                                        bool send) {
  COHORT_RETURN_IF_ERROR(CheckPointToPoint(transport, options, send ? "send" : "recv"));
  PointToPointRequest r;
  r.send_ = send;
  r.peer_ = options.peer;
  r.deadline_ = options.deadline;
  if (send) {
    r.header_ = std::make_unique<CallHeader>(PointToPointHeader(options));
  } else {
    r.expected_ = PointToPointHeader(options);
    r.header_ = std::make_unique<CallHeader>();
  }
  COHORT_RETURN_IF_ERROR(r.PostMessages(transport, options));
  return r;
}

Status PointToPointRequest::PostMessages(Transport& transport, const PointToPointOptions& options) {
  // One message of the request, sent or received as the request is.
  const uint32_t tag = static_cast<uint32_t>(options.tag);
  auto post = [&](uint32_t step, void* data, size_t bytes) {
    return send_ ? transport.Isend(peer_, MakeTag(tag, step), ConstBytes{data, bytes})
                 : transport.Irecv(peer_, MakeTag(tag, step), MutableBytes{data, bytes});
  };
  COHORT_ASSIGN_OR_RETURN(header_request_,
                          post(kPointToPointHeaderStep, header_.get(), sizeof(CallHeader)));
  has_data_ = options.count > 0;
  if (has_data_) {
    StatusOr<Request> data =
        post(kPointToPointDataStep, options.data, options.count * DataTypeSize(options.type));
    if (data.ok()) {
      data_request_ = std::move(*data);
    } else if (send_) {
      return data.status();
    } else {
      data_post_error_ = data.status();
    }
  }
  return Status::Ok();
}

StatusOr<PointToPointRequest> PostSend(Transport& transport, const PointToPointOptions& options) {
  return PointToPointRequest::Post(transport, options, true);
}

StatusOr<PointToPointRequest> PostRecv(Transport& transport, const PointToPointOptions& options) {
  return PointToPointRequest::Post(transport, options, false);
}

StatusOr<PointToPointRequest> PostRecvAny(Transport& transport, const PointToPointOptions& options,
                                          std::mutex* posting) {
  if (options.num_workers < 2) {
    return InvalidArgument("recv from any worker: there is no other worker (" +
                           std::to_string(options.num_workers) + " in all)");
  }
  PointToPointOptions checked = options;
  // Any other worker will do for the checks.
  checked.peer = transport.rank() == 0 ? 1 : 0;
  COHORT_RETURN_IF_ERROR(CheckPointToPoint(transport, checked, "recv from any worker"));
  PointToPointRequest r;
  r.deadline_ = options.deadline;
  r.expected_ = PointToPointHeader(options);
  r.header_ = std::make_unique<CallHeader>();
  r.any_source_ = std::make_unique<PointToPointOptions>(options);
  r.transport_ = &transport;
  r.posting_ = posting;
  return r;
}

Status PointToPointRequest::FindSender() {
  const PointToPointOptions& o = *any_source_;
  const Tag header_tag = MakeTag(static_cast<uint32_t>(o.tag), kPointToPointHeaderStep);
  const std::string what = "recv from any worker with tag " + std::to_string(o.tag);
  while (true) {
    const StatusOr<int> waiting = transport_->Probe(header_tag, deadline_);
    COHORT_RETURN_IF_ERROR(waiting.status().WithContext(what));
    std::lock_guard<std::mutex> lock(*posting_);
    // Under the lock no other receive is posted: the message found now is the one posted next.
    // A receive posted since the first look may have taken that one: then wait for the next.
    StatusOr<int> found = transport_->Probe(header_tag, SteadyClock::now());
    if (!found.ok() && found.status().code() == StatusCode::kDeadlineExceeded &&
        SteadyClock::now() < deadline_) {
      continue;
    }
    COHORT_RETURN_IF_ERROR(found.status().WithContext(what));
    if (*found < 0 || *found >= o.num_workers || *found == transport_->rank()) {
      return DataLoss(what + ": a message with its tag came from rank " + std::to_string(*found) +
                      ", which is not another worker");
    }
    peer_ = *found;
    const std::unique_ptr<PointToPointOptions> options = std::move(any_source_);
    return PostMessages(*transport_, *options);
  }
}

Status PointToPointRequest::Wait() {
  if (!valid()) return FailedPrecondition("Wait on an empty point-to-point request");
  if (!waited_) {
    status_ = WaitOnce();
    waited_ = true;
    recording_.Finish(status_);
    if (!status_.ok() && poison_on_error_ != nullptr) poison_on_error_->store(true);
  }
  return status_;
}

Status PointToPointRequest::WaitOnce() {
  if (any_source_ != nullptr) COHORT_RETURN_IF_ERROR(FindSender());
  const std::string what = std::string(send_ ? "send to " : "recv from ") + WorkerName(peer_);
  COHORT_RETURN_IF_ERROR(header_request_.Wait(deadline_).WithContext(what));
  if (!send_) {
    const CallHeader& got = *header_;
    if (got.magic != CallHeader::kMagic || got.kind != expected_.kind) {
      return DataLoss(what + ": malformed message header");
    }
    if (got.count != expected_.count || got.type != expected_.type) {
      return InvalidArgument(what + " with tag " + std::to_string(expected_.root) + ": " +
                             WorkerName(peer_) + " sent " + Describe(got) +
                             ", this worker expects " + Describe(expected_));
    }
  }
  COHORT_RETURN_IF_ERROR(data_post_error_.WithContext(what));
  if (has_data_) COHORT_RETURN_IF_ERROR(data_request_.Wait(deadline_).WithContext(what));
  return Status::Ok();
}

}  // namespace cohort::collective
