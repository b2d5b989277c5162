// Communicator's collectives other than the all-reduce: argument checks, the call's options, and
// the algorithm in collective/algorithms/ that runs it.
#include <string>

#include "collective/algorithms/allgather.h"
#include "collective/algorithms/alltoall.h"
#include "collective/algorithms/barrier.h"
#include "collective/algorithms/broadcast.h"
#include "collective/algorithms/gather.h"
#include "collective/algorithms/reduce.h"
#include "collective/algorithms/reduce_scatter.h"
#include "collective/algorithms/scatter.h"
#include "collective/communicator.h"

#ifdef COHORT_HAVE_CUDA
#include "collective/kernels/device_staging.h"
#endif

namespace cohort::collective {
namespace {

bool OnDevice(const void* p) {
#ifdef COHORT_HAVE_CUDA
  return p != nullptr && IsDevicePointer(p);
#else
  (void)p;
  return false;
#endif
}

// The options of a collective that reads `count` elements at `send` and writes at `recv`.
template <typename Options>
Options Buffers(const void* send, void* recv, size_t count, DataType type) {
  Options o;
  o.send = send;
  o.recv = recv;
  o.count = count;
  o.type = type;
  return o;
}

}  // namespace

Status Communicator::BeginCall(std::string_view what, DataType type, size_t count, ReduceOp op,
                               std::initializer_list<const void*> buffers, std::optional<int> root,
                               CollectiveOptions* call) {
  const std::string name(what);
  if (!IsValid(type)) return InvalidArgument(name + ": unknown data type");
  if (pending_allreduces_.load() > 0) {
    return FailedPrecondition(name + ": an all-reduce is still pending (finish it first)");
  }
  for (const void* p : buffers) {
    if (count > 0 && p == nullptr) return InvalidArgument(name + ": null buffer");
    if (OnDevice(p))
      return InvalidArgument(name +
                             ": device memory is not supported here; stage it in host memory");
  }
  if (root && (*root < 0 || *root >= world_size_)) {
    return InvalidArgument(name + ": root " + std::to_string(*root) +
                           " is not a worker (there are " + std::to_string(world_size_) + ")");
  }
  COHORT_RETURN_IF_ERROR(CheckUsable());
  call->seq = seq_++;
  const auto now = SteadyClock::now();  // the deadline's and the recorder's start time
  call->deadline = now + options_.timeout;
  call->num_workers = world_size_;
  call->chunk_bytes = options_.chunk_bytes;
  const FlightOp kind = ParseFlightOp(what);
  call->stall_check = WatchCall(call->seq,
                                AgreementCall{.count = count,
                                              .type = static_cast<uint8_t>(type),
                                              .op = static_cast<uint8_t>(op),
                                              .collective = static_cast<uint8_t>(kind),
                                              .rank = rank_,
                                              .root = root.value_or(-1)},
                                all_workers_, name, now, &call->history);
  FlightRecord record = CallRecord(kind, call->seq, type, count, root.value_or(-1));
  record.start_ns = FlightClockNs(now);
  call_ = FlightRecording(recorder_, record);
  return Status::Ok();
}

Status Communicator::EndCall(Status status) {
  call_check_.reset();
  call_.Finish(status);
  if (status.ok()) return status;
  poisoned_ = true;
  return NameCall(call_.record(), status);
}

template <typename Options>
Status Communicator::RunCall(std::string_view what, DataType type, size_t count,
                             std::initializer_list<const void*> buffers, std::optional<int> root,
                             Options call, Status (*algorithm)(Transport&, const Options&)) {
  ReduceOp op = ReduceOp::kSum;
  if constexpr (requires { call.op; }) op = call.op;
  COHORT_RETURN_IF_ERROR(BeginCall(what, type, count, op, buffers, root, &call));
  return EndCall(algorithm(*transport_, call));
}

Status Communicator::Broadcast(void* data, size_t count, DataType type, int root) {
  BroadcastOptions o;
  o.data = data;
  o.count = count;
  o.type = type;
  o.root = root;
  return RunCall("broadcast", type, count, {data}, root, o, &collective::Broadcast);
}

Status Communicator::Allgather(const void* send, void* recv, size_t count, DataType type) {
  return RunCall("allgather", type, count, {send, recv}, std::nullopt,
                 Buffers<AllgatherOptions>(send, recv, count, type), &collective::Allgather);
}

Status Communicator::ReduceScatter(const void* send, void* recv, size_t count, DataType type,
                                   ReduceOp op) {
  COHORT_RETURN_IF_ERROR(CheckReduction("reduce-scatter", type, op));
  auto o = Buffers<ReduceScatterOptions>(send, recv, count, type);
  o.op = op;
  return RunCall("reduce-scatter", type, count, {send, recv}, std::nullopt, o,
                 &collective::ReduceScatter);
}

Status Communicator::Barrier() {
  return RunCall("barrier", DataType::kF32, 0, {}, std::nullopt, CollectiveOptions{},
                 &collective::Barrier);
}

Status Communicator::Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                            int root) {
  COHORT_RETURN_IF_ERROR(CheckReduction("reduce", type, op));
  auto o = Buffers<ReduceOptions>(send, recv, count, type);
  o.op = op;
  o.root = root;
  return RunCall("reduce", type, count, {send, root == rank_ ? recv : send}, root, o,
                 &collective::Reduce);
}

Status Communicator::Gather(const void* send, void* recv, size_t count, DataType type, int root) {
  auto o = Buffers<GatherOptions>(send, recv, count, type);
  o.root = root;
  return RunCall("gather", type, count, {send, root == rank_ ? recv : send}, root, o,
                 &collective::Gather);
}

Status Communicator::Scatter(const void* send, void* recv, size_t count, DataType type, int root) {
  auto o = Buffers<ScatterOptions>(send, recv, count, type);
  o.root = root;
  return RunCall("scatter", type, count, {recv, root == rank_ ? send : recv}, root, o,
                 &collective::Scatter);
}

Status Communicator::Alltoall(const void* send, void* recv, size_t count, DataType type) {
  return RunCall("alltoall", type, count, {send, recv}, std::nullopt,
                 Buffers<AlltoallOptions>(send, recv, count, type), &collective::Alltoall);
}

Status Communicator::AlltoallV(const void* send, const size_t* send_counts, void* recv,
                               const size_t* recv_counts, DataType type) {
  if (send_counts == nullptr || recv_counts == nullptr)
    return InvalidArgument("alltoallv: null counts");
  AlltoallOptions o;
  o.send_counts.assign(send_counts, send_counts + world_size_);
  o.recv_counts.assign(recv_counts, recv_counts + world_size_);
  if (send_counts[rank_] != recv_counts[rank_]) {
    return InvalidArgument("alltoallv: this worker sends itself " +
                           std::to_string(send_counts[rank_]) + " elements but expects " +
                           std::to_string(recv_counts[rank_]));
  }
  size_t sent = 0, received = 0;
  for (int r = 0; r < world_size_; ++r) {
    sent += send_counts[r];
    received += recv_counts[r];
  }
  if ((sent > 0 && send == nullptr) || (received > 0 && recv == nullptr)) {
    return InvalidArgument("alltoallv: null buffer");
  }
  o.send = send;
  o.recv = recv;
  o.type = type;
  return RunCall("alltoallv", type, 0, {send, recv}, std::nullopt, o, &collective::AlltoallV);
}

StatusOr<PointToPointRequest> Communicator::PostPointToPoint(bool send, void* data, size_t count,
                                                             DataType type, int peer, int tag) {
  const char* what = send ? "send" : "recv";
  if (OnDevice(data)) {
    return InvalidArgument(std::string(what) +
                           ": device memory is not supported here; stage it in host memory");
  }
  COHORT_RETURN_IF_ERROR(CheckUsable());
  PointToPointOptions o;
  o.data = data;
  o.count = count;
  o.type = type;
  o.peer = peer;
  o.tag = tag;
  o.num_workers = world_size_;
  o.deadline = SteadyClock::now() + options_.timeout;
  // Bad arguments are refused before anything is posted and leave the communicator usable.
  StatusOr<PointToPointRequest> r = [&]() -> StatusOr<PointToPointRequest> {
    if (send) return PostSend(*transport_, o);
    if (peer == kAnyWorker) return PostRecvAny(*transport_, o, &posting_mu_);
    std::lock_guard<std::mutex> lock(posting_mu_);
    return PostRecv(*transport_, o);
  }();
  if (!r.ok()) {
    if (r.status().code() != StatusCode::kInvalidArgument) poisoned_ = true;
    return r.status();
  }
  r->set_poison_on_error(&poisoned_);
  // Recorded from posting to its Wait; op_seq is the user's tag.
  r->set_flight_recording(
      FlightRecording(recorder_, CallRecord(send ? FlightOp::kSend : FlightOp::kRecv,
                                            static_cast<uint32_t>(tag), type, count, peer)));
  return r;
}

StatusOr<PointToPointRequest> Communicator::Isend(const void* data, size_t count, DataType type,
                                                  int peer, int tag) {
  return PostPointToPoint(true, const_cast<void*>(data), count, type, peer, tag);
}

StatusOr<PointToPointRequest> Communicator::Irecv(void* data, size_t count, DataType type, int peer,
                                                  int tag) {
  return PostPointToPoint(false, data, count, type, peer, tag);
}

StatusOr<PointToPointRequest> Communicator::IrecvAny(void* data, size_t count, DataType type,
                                                     int tag) {
  return PostPointToPoint(false, data, count, type, kAnyWorker, tag);
}

Status Communicator::RecvAny(void* data, size_t count, DataType type, int tag, int* source) {
  COHORT_ASSIGN_OR_RETURN(PointToPointRequest r, IrecvAny(data, count, type, tag));
  COHORT_RETURN_IF_ERROR(r.Wait());
  if (source != nullptr) *source = r.peer();
  return Status::Ok();
}

Status Communicator::Send(const void* data, size_t count, DataType type, int peer, int tag) {
  COHORT_ASSIGN_OR_RETURN(PointToPointRequest r, Isend(data, count, type, peer, tag));
  return r.Wait();
}

Status Communicator::Recv(void* data, size_t count, DataType type, int peer, int tag) {
  COHORT_ASSIGN_OR_RETURN(PointToPointRequest r, Irecv(data, count, type, peer, tag));
  return r.Wait();
}

}  // namespace cohort::collective
