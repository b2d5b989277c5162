/* C API of the Cohort collective library, for language bindings (the Python binding uses it
 * through ctypes). An opaque communicator handle, int error codes (0 = OK; others mirror
 * cohort::StatusCode) and a per-thread last-error string.
 *
 *   cohort_comm_t* comm;
 *   if (cohort_comm_from_env(&comm) != COHORT_OK) { fprintf(stderr, "%s\n", cohort_last_error()); }
 *   cohort_allreduce(comm, grads, n, COHORT_F32, COHORT_AVG, COHORT_ALGO_AUTO);
 *   cohort_comm_destroy(comm);
 *
 * Library: link cohort_collective (static, C++) or load libcohort_collective_c.so (shared).
 *
 * Thread safety: calls on one communicator must not overlap, except cohort_comm_cancel (from any
 * thread); cohort_last_error is per thread. */
#ifndef COHORT_COLLECTIVE_H_
#define COHORT_COLLECTIVE_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cohort_comm cohort_comm_t;

enum {
  COHORT_OK = 0,
  COHORT_ERR_INVALID_ARGUMENT = 1,
  COHORT_ERR_NOT_FOUND = 2,
  COHORT_ERR_ALREADY_EXISTS = 3,
  COHORT_ERR_FAILED_PRECONDITION = 4,
  COHORT_ERR_UNAVAILABLE = 5, /* a peer is gone */
  COHORT_ERR_DEADLINE_EXCEEDED = 6,
  COHORT_ERR_ABORTED = 7, /* communicator poisoned by an earlier error: rebuild it */
  COHORT_ERR_DATA_LOSS = 8,
  COHORT_ERR_RESOURCE_EXHAUSTED = 9,
  COHORT_ERR_CANCELLED = 10,
  COHORT_ERR_INTERNAL = 11
};

enum {
  COHORT_F32 = 0,
  COHORT_F64 = 1,
  COHORT_F16 = 2,
  COHORT_BF16 = 3,
  COHORT_I32 = 4,
  COHORT_I64 = 5
};
/* The bitwise ops (BAND, BOR, BXOR) reduce COHORT_I32 and COHORT_I64 only. */
enum {
  COHORT_SUM = 0,
  COHORT_AVG = 1,
  COHORT_MIN = 2,
  COHORT_MAX = 3,
  COHORT_PRODUCT = 4,
  COHORT_BAND = 5,
  COHORT_BOR = 6,
  COHORT_BXOR = 7
};
enum {
  COHORT_ALGO_AUTO = 0,
  COHORT_ALGO_REDUCTION_SERVER = 1,
  COHORT_ALGO_RING = 2,
  COHORT_ALGO_HALVING_DOUBLING = 3,
  COHORT_ALGO_SHARED_MEMORY = 4,
  COHORT_ALGO_HIERARCHICAL = 5,
  COHORT_ALGO_RECURSIVE_DOUBLING = 6
};

/* Builds a worker's communicator from COHORT_BOOTSTRAP_ADDR, RANK, WORLD_SIZE,
 * COHORT_NUM_REDUCERS and COHORT_COMM_TIMEOUT_MS. On error *out is NULL. */
int cohort_comm_from_env(cohort_comm_t** out);
/* Tells reducers this worker is done and frees the communicator. NULL is allowed. */
void cohort_comm_destroy(cohort_comm_t* comm);
/* Gives up on this worker's calls, from any thread: the call in progress on another thread fails
 * within milliseconds with COHORT_ERR_CANCELLED instead of waiting for its peers, and so does
 * every later call; cohort_comm_destroy then frees it without the reducers' goodbye (they and the
 * peers learn this worker is gone as it closes). NULL is allowed. */
void cohort_comm_cancel(cohort_comm_t* comm);
int cohort_comm_rank(const cohort_comm_t* comm);
int cohort_comm_size(const cohort_comm_t* comm);
/* In-place all-reduce of `count` elements of `dtype` at `data`. Every worker passes the same count,
 * dtype and op: a call that differs fails every worker with COHORT_ERR_INVALID_ARGUMENT naming
 * one whose call differs (where two workers' sizes lead kAuto to different algorithms, once the
 * call has waited 0.2 s). */
int cohort_allreduce(cohort_comm_t* comm, void* data, size_t count, int dtype, int op,
                     int algorithm);
/* The collectives below run among the workers, one call at a time, like cohort_allreduce: every
 * worker makes the same calls in the same order with the same count, dtype, op and root; a worker
 * that receives from one that disagrees gets COHORT_ERR_INVALID_ARGUMENT naming it. Counts are
 * elements; buffers are host memory. */
/* The root's `data` (count elements) lands in every worker's `data`. */
int cohort_broadcast(cohort_comm_t* comm, void* data, size_t count, int dtype, int root);
/* Every worker's `send` (count elements) lands in every worker's `recv` (size * count elements) at
 * rank * count; `send` may be recv + rank * count. */
int cohort_allgather(cohort_comm_t* comm, const void* send, void* recv, size_t count, int dtype);
/* `send` holds size * count elements; block r reduced over the workers lands in worker r's `recv`
 * (count elements). */
int cohort_reduce_scatter(cohort_comm_t* comm, const void* send, void* recv, size_t count,
                          int dtype, int op);
/* Returns once every worker has called it. */
int cohort_barrier(cohort_comm_t* comm);
/* Every worker's `send` (count elements) reduced by `op` lands in the root's `recv` (may equal
 * `send`; unused elsewhere). */
int cohort_reduce(cohort_comm_t* comm, const void* send, void* recv, size_t count, int dtype,
                  int op, int root);
/* Every worker's `send` (count elements) lands in the root's `recv` (size * count) at rank * count.
 */
int cohort_gather(cohort_comm_t* comm, const void* send, void* recv, size_t count, int dtype,
                  int root);
/* Block r of the root's `send` (size * count elements) lands in worker r's `recv` (count). */
int cohort_scatter(cohort_comm_t* comm, const void* send, void* recv, size_t count, int dtype,
                   int root);
/* Block j of `send` (size blocks of count elements) lands in worker j's `recv` at block rank. */
int cohort_alltoall(cohort_comm_t* comm, const void* send, void* recv, size_t count, int dtype);
/* As cohort_alltoall with per-peer counts (size entries each; blocks contiguous in worker order).
 */
int cohort_alltoallv(cohort_comm_t* comm, const void* send, const size_t* send_counts, void* recv,
                     const size_t* recv_counts, int dtype);

/* Point-to-point between two workers, tag in [0, 2^20): a receive matches the sends of `peer` with
 * that tag in order. cohort_send/cohort_recv block; cohort_isend/cohort_irecv post and return a
 * request that cohort_wait completes and frees (every request must be waited for before the
 * communicator is destroyed). A receive whose peer is COHORT_ANY_WORKER takes the first message
 * with its tag that another worker sends and no other receive takes; cohort_wait_source waits as
 * cohort_wait does and stores the sender's rank in *source (-1 when the wait failed first). */
typedef struct cohort_request cohort_request_t;
enum { COHORT_ANY_WORKER = -1 };
int cohort_send(cohort_comm_t* comm, const void* data, size_t count, int dtype, int peer, int tag);
int cohort_recv(cohort_comm_t* comm, void* data, size_t count, int dtype, int peer, int tag);
int cohort_isend(cohort_comm_t* comm, const void* data, size_t count, int dtype, int peer, int tag,
                 cohort_request_t** out);
int cohort_irecv(cohort_comm_t* comm, void* data, size_t count, int dtype, int peer, int tag,
                 cohort_request_t** out);
int cohort_wait(cohort_request_t* request);
int cohort_wait_source(cohort_request_t* request, int* source);
/* Runs a reducer from the environment until its workers are gone for good (see cohort-reducer). */
int cohort_run_reducer_from_env(void);
/* The message of the last failed call on this thread ("" if none). Valid until the next call. */
const char* cohort_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* COHORT_COLLECTIVE_H_ */
