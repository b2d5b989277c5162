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

std::string Describe(const CallHeader& h) {
  return std::to_string(h.count) + " " +
         (IsValid(static_cast<DataType>(h.type))
              ? std::string(DataTypeName(static_cast<DataType>(h.type)))
              : "type " + std::to_string(h.type));
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
  // One message of the request, sent or received as the request is.
  const uint32_t tag = static_cast<uint32_t>(options.tag);
  auto post = [&](uint32_t step, void* data, size_t bytes) {
    return send ? transport.Isend(options.peer, MakeTag(tag, step), ConstBytes{data, bytes})
                : transport.Irecv(options.peer, MakeTag(tag, step), MutableBytes{data, bytes});
  };
  COHORT_ASSIGN_OR_RETURN(r.header_request_,
                          post(kPointToPointHeaderStep, r.header_.get(), sizeof(CallHeader)));
  r.has_data_ = options.count > 0;
  if (r.has_data_) {
    StatusOr<Request> data =
        post(kPointToPointDataStep, options.data, options.count * DataTypeSize(options.type));
    if (data.ok()) {
      r.data_request_ = std::move(*data);
    } else if (send) {
      return data.status();
    } else {
      r.data_post_error_ = data.status();
    }
  }
  return r;
}

StatusOr<PointToPointRequest> PostSend(Transport& transport, const PointToPointOptions& options) {
  return PointToPointRequest::Post(transport, options, true);
}

StatusOr<PointToPointRequest> PostRecv(Transport& transport, const PointToPointOptions& options) {
  return PointToPointRequest::Post(transport, options, false);
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
