// The C API over Communicator: converts Status to an int code plus a thread-local message.
#include <atomic>
#include <memory>
#include <string>

#include "collective/cohort_collective.h"
#include "collective/communicator.h"
#include "collective/reducer.h"

struct cohort_comm {
  std::unique_ptr<cohort::collective::Communicator> comm;
};

struct cohort_request {
  cohort::collective::PointToPointRequest request;
};

namespace {

thread_local std::string g_last_error;

using cohort::Status;
using cohort::collective::DataType;
using cohort::collective::ReduceOp;

static_assert(COHORT_PRODUCT == static_cast<int>(ReduceOp::kProduct) &&
                  COHORT_BAND == static_cast<int>(ReduceOp::kBitwiseAnd) &&
                  COHORT_BOR == static_cast<int>(ReduceOp::kBitwiseOr) &&
                  COHORT_BXOR == static_cast<int>(ReduceOp::kBitwiseXor),
              "the C API's ops are the library's");

int Report(const Status& s) {
  if (s.ok()) {
    g_last_error.clear();
    return COHORT_OK;
  }
  g_last_error = s.ToString();
  return static_cast<int>(s.code());
}

// The checks every call makes before the C++ call: a communicator, a known dtype and op.
Status CheckArgs(const char* fn, const cohort_comm_t* comm, int dtype, int op) {
  const std::string name(fn);
  if (comm == nullptr) return cohort::InvalidArgument(name + ": comm is NULL");
  if (dtype < 0 || dtype > 255 || !cohort::collective::IsValid(static_cast<DataType>(dtype))) {
    return cohort::InvalidArgument(name + ": unknown dtype " + std::to_string(dtype));
  }
  if (op < 0 || op > 255 || !cohort::collective::IsValid(static_cast<ReduceOp>(op))) {
    return cohort::InvalidArgument(name + ": unknown op " + std::to_string(op));
  }
  return Status::Ok();
}

// A nonblocking send or receive: the checks, then `start` begins it; *out gets the request, or
// NULL on any error.
template <typename Start>
int StartRequest(const char* fn, cohort_comm_t* comm, int dtype, cohort_request_t** out,
                 Start start) {
  if (out == nullptr) return Report(cohort::InvalidArgument(std::string(fn) + ": out is NULL"));
  *out = nullptr;
  if (Status s = CheckArgs(fn, comm, dtype, COHORT_SUM); !s.ok()) return Report(s);
  auto r = start();
  if (!r.ok()) return Report(r.status());
  *out = new cohort_request{std::move(*r)};
  return Report(Status::Ok());
}

}  // namespace

extern "C" {

int cohort_comm_from_env(cohort_comm_t** out) {
  if (out == nullptr) return Report(cohort::InvalidArgument("cohort_comm_from_env: out is NULL"));
  *out = nullptr;
  auto comm = cohort::collective::Communicator::FromEnvironment();
  if (!comm.ok()) return Report(comm.status());
  *out = new cohort_comm{std::move(*comm)};
  return Report(cohort::Status::Ok());
}

void cohort_comm_destroy(cohort_comm_t* comm) { delete comm; }

void cohort_comm_cancel(cohort_comm_t* comm) {
  if (comm != nullptr) comm->comm->Cancel();
}

int cohort_comm_rank(const cohort_comm_t* comm) {
  return comm != nullptr ? comm->comm->rank() : -1;
}
int cohort_comm_size(const cohort_comm_t* comm) {
  return comm != nullptr ? comm->comm->size() : -1;
}

int cohort_allreduce(cohort_comm_t* comm, void* data, size_t count, int dtype, int op,
                     int algorithm) {
  using cohort::collective::Algorithm;
  if (Status s = CheckArgs("cohort_allreduce", comm, dtype, op); !s.ok()) return Report(s);
  if (algorithm < 0 || algorithm > COHORT_ALGO_RECURSIVE_DOUBLING) {
    return Report(cohort::InvalidArgument("cohort_allreduce: unknown algorithm " +
                                          std::to_string(algorithm)));
  }
  return Report(comm->comm->Allreduce(data, count, static_cast<DataType>(dtype),
                                      static_cast<ReduceOp>(op),
                                      static_cast<Algorithm>(algorithm)));
}

int cohort_broadcast(cohort_comm_t* comm, void* data, size_t count, int dtype, int root) {
  if (Status s = CheckArgs("cohort_broadcast", comm, dtype, COHORT_SUM); !s.ok()) return Report(s);
  return Report(comm->comm->Broadcast(data, count, static_cast<DataType>(dtype), root));
}

int cohort_allgather(cohort_comm_t* comm, const void* send, void* recv, size_t count, int dtype) {
  if (Status s = CheckArgs("cohort_allgather", comm, dtype, COHORT_SUM); !s.ok()) return Report(s);
  return Report(comm->comm->Allgather(send, recv, count, static_cast<DataType>(dtype)));
}

int cohort_reduce_scatter(cohort_comm_t* comm, const void* send, void* recv, size_t count,
                          int dtype, int op) {
  if (Status s = CheckArgs("cohort_reduce_scatter", comm, dtype, op); !s.ok()) return Report(s);
  return Report(comm->comm->ReduceScatter(send, recv, count, static_cast<DataType>(dtype),
                                          static_cast<ReduceOp>(op)));
}

int cohort_barrier(cohort_comm_t* comm) {
  if (Status s = CheckArgs("cohort_barrier", comm, COHORT_F32, COHORT_SUM); !s.ok())
    return Report(s);
  return Report(comm->comm->Barrier());
}

int cohort_reduce(cohort_comm_t* comm, const void* send, void* recv, size_t count, int dtype,
                  int op, int root) {
  if (Status s = CheckArgs("cohort_reduce", comm, dtype, op); !s.ok()) return Report(s);
  return Report(comm->comm->Reduce(send, recv, count, static_cast<DataType>(dtype),
                                   static_cast<ReduceOp>(op), root));
}

int cohort_gather(cohort_comm_t* comm, const void* send, void* recv, size_t count, int dtype,
                  int root) {
  if (Status s = CheckArgs("cohort_gather", comm, dtype, COHORT_SUM); !s.ok()) return Report(s);
  return Report(comm->comm->Gather(send, recv, count, static_cast<DataType>(dtype), root));
}

int cohort_scatter(cohort_comm_t* comm, const void* send, void* recv, size_t count, int dtype,
                   int root) {
  if (Status s = CheckArgs("cohort_scatter", comm, dtype, COHORT_SUM); !s.ok()) return Report(s);
  return Report(comm->comm->Scatter(send, recv, count, static_cast<DataType>(dtype), root));
}

int cohort_alltoall(cohort_comm_t* comm, const void* send, void* recv, size_t count, int dtype) {
  if (Status s = CheckArgs("cohort_alltoall", comm, dtype, COHORT_SUM); !s.ok()) return Report(s);
  return Report(comm->comm->Alltoall(send, recv, count, static_cast<DataType>(dtype)));
}

int cohort_alltoallv(cohort_comm_t* comm, const void* send, const size_t* send_counts, void* recv,
                     const size_t* recv_counts, int dtype) {
  if (Status s = CheckArgs("cohort_alltoallv", comm, dtype, COHORT_SUM); !s.ok()) return Report(s);
  return Report(
      comm->comm->AlltoallV(send, send_counts, recv, recv_counts, static_cast<DataType>(dtype)));
}

int cohort_send(cohort_comm_t* comm, const void* data, size_t count, int dtype, int peer, int tag) {
  if (Status s = CheckArgs("cohort_send", comm, dtype, COHORT_SUM); !s.ok()) return Report(s);
  return Report(comm->comm->Send(data, count, static_cast<DataType>(dtype), peer, tag));
}

int cohort_recv(cohort_comm_t* comm, void* data, size_t count, int dtype, int peer, int tag) {
  if (Status s = CheckArgs("cohort_recv", comm, dtype, COHORT_SUM); !s.ok()) return Report(s);
  if (peer == COHORT_ANY_WORKER) {
    return Report(comm->comm->RecvAny(data, count, static_cast<DataType>(dtype), tag, nullptr));
  }
  return Report(comm->comm->Recv(data, count, static_cast<DataType>(dtype), peer, tag));
}

int cohort_isend(cohort_comm_t* comm, const void* data, size_t count, int dtype, int peer, int tag,
                 cohort_request_t** out) {
  return StartRequest("cohort_isend", comm, dtype, out, [&] {
    return comm->comm->Isend(data, count, static_cast<DataType>(dtype), peer, tag);
  });
}

int cohort_irecv(cohort_comm_t* comm, void* data, size_t count, int dtype, int peer, int tag,
                 cohort_request_t** out) {
  return StartRequest("cohort_irecv", comm, dtype, out, [&] {
    if (peer == COHORT_ANY_WORKER)
      return comm->comm->IrecvAny(data, count, static_cast<DataType>(dtype), tag);
    return comm->comm->Irecv(data, count, static_cast<DataType>(dtype), peer, tag);
  });
}

int cohort_wait(cohort_request_t* request) { return cohort_wait_source(request, nullptr); }

int cohort_wait_source(cohort_request_t* request, int* source) {
  if (source != nullptr) *source = -1;
  if (request == nullptr) return Report(cohort::InvalidArgument("cohort_wait: request is NULL"));
  const Status s = request->request.Wait();
  if (s.ok() && source != nullptr) *source = request->request.peer();
  delete request;
  return Report(s);
}

int cohort_run_reducer_from_env(void) {
  static std::atomic<bool> never{false};
  return Report(cohort::collective::RunReducerFromEnvironment(never));
}

const char* cohort_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
