// Communicator's collectives other than the all-reduce: argument checks, the call's options, and
// the algorithm in collective/algorithms/ that runs it.
#include <string>

#include "collective/algorithms/allgather.h"
#include "collective/algorithms/barrier.h"
#include "collective/algorithms/broadcast.h"
#include "collective/algorithms/reduce_scatter.h"
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

}  // namespace

Status Communicator::BeginCall(std::string_view what, DataType type, size_t count,
                               std::initializer_list<const void*> buffers, std::optional<int> root,
                               CollectiveOptions* call) {
  const std::string name(what);
  if (!IsValid(type)) return InvalidArgument(name + ": unknown data type");
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
  if (poisoned_) return Aborted("communicator is poisoned by an earlier error; rebuild it");
  call->seq = seq_++;
  call->deadline = SteadyClock::now() + options_.timeout;
  call->num_workers = world_size_;
  call->chunk_bytes = options_.chunk_bytes;
  return Status::Ok();
}

Status Communicator::EndCall(Status status) {
  if (!status.ok()) poisoned_ = true;
  return status;
}

Status Communicator::Broadcast(void* data, size_t count, DataType type, int root) {
  BroadcastOptions o;
  COHORT_RETURN_IF_ERROR(BeginCall("broadcast", type, count, {data}, root, &o));
  o.data = data;
  o.count = count;
  o.type = type;
  o.root = root;
  return EndCall(collective::Broadcast(*transport_, o));
}

Status Communicator::Allgather(const void* send, void* recv, size_t count, DataType type) {
  AllgatherOptions o;
  COHORT_RETURN_IF_ERROR(BeginCall("allgather", type, count, {send, recv}, std::nullopt, &o));
  o.send = send;
  o.recv = recv;
  o.count = count;
  o.type = type;
  return EndCall(collective::Allgather(*transport_, o));
}

Status Communicator::ReduceScatter(const void* send, void* recv, size_t count, DataType type,
                                   ReduceOp op) {
  if (!IsValid(op)) return InvalidArgument("reduce-scatter: unknown op");
  ReduceScatterOptions o;
  COHORT_RETURN_IF_ERROR(BeginCall("reduce-scatter", type, count, {send, recv}, std::nullopt, &o));
  o.send = send;
  o.recv = recv;
  o.count = count;
  o.type = type;
  o.op = op;
  return EndCall(collective::ReduceScatter(*transport_, o));
}

Status Communicator::Barrier() {
  CollectiveOptions o;
  COHORT_RETURN_IF_ERROR(BeginCall("barrier", DataType::kF32, 0, {}, std::nullopt, &o));
  return EndCall(collective::Barrier(*transport_, o));
}

}  // namespace cohort::collective
