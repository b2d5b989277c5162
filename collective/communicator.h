// Communicator: what training code uses. One per worker process (or per thread over the loopback
// transport): it builds the transport through a Bootstrap, then runs all-reduces over it with the
// Reduction Server (when the job has reducers) or the ring.
//
//   auto comm = cohort::collective::Communicator::FromEnvironment();
//   if (!comm.ok()) ...;
//   Status s = (*comm)->Allreduce(grads, n, DataType::kF32, ReduceOp::kAvg);
//
// Environment contract (rendered by the agent): COHORT_BOOTSTRAP_ADDR=host:port (the chief, rank
// 0, serves the bootstrap store there), RANK, WORLD_SIZE (workers incl. the chief; reducers are not
// counted), COHORT_NUM_REDUCERS (0 or unset: ring), COHORT_COMM_TIMEOUT_MS (optional, default
// 60000), COHORT_CHUNK_BYTES (optional), COHORT_ALLREDUCE_ALGORITHM (optional: auto, ring,
// reduction-server, halving-doubling, recursive-doubling, shared-memory, hierarchical),
// COHORT_WIRE_DTYPE (optional: bf16, f16).
// Reducers also read COHORT_REDUCER_INDEX.
//
// Generations (generation.h): the chief publishes a fresh generation on every Create and the
// other workers join it; transport keys live under it, so a restarted job never meets stale
// addresses and a long-lived reducer (reducer.h) can tell that the workers rebuilt and join again.
//
// Flight recorder: every collective call and point-to-point request is an entry of the process's
// recorder (CommunicatorOptions::flight_recorder) from its start to its return: the call's
// sequence number, operation, algorithm, bytes, type, root or peer, times and outcome. The agent
// reads it to tell a stuck rank from a slow one (issue 18). Bindings over the Communicator (C API,
// Python, the torch backend) are recorded here, once.
//
// Thread safety: calls must not overlap (one caller thread, like NCCL's stream order), except
// that a PendingAllreduce's Finish may run on another thread (see StartAllreduce), and Cancel may
// be called from any thread at any time.
// Errors: a dead peer makes Allreduce fail (kUnavailable, or kDeadlineExceeded by the timeout);
// after any error the communicator is poisoned (kAborted) and must be rebuilt. An error from the
// call itself (not its argument checks) starts with the operation and its sequence number, e.g.
// "allreduce #1843 (64.0 MiB f32, ring): ring all-reduce: receive from worker 2: ... timed out".
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collective/algorithms/allreduce_options.h"
#include "collective/algorithms/collective_call.h"
#include "collective/algorithms/point_to_point.h"
#include "collective/algorithms/shared_memory_allreduce.h"
#include "collective/algorithms/stalled_call_check.h"
#include "collective/allreduce_selection.h"
#include "collective/bootstrap.h"
#include "collective/store_bootstrap.h"
#include "collective/transport/transport.h"
#include "collective/types.h"
#include "common/flight_recorder.h"
#include "common/status.h"

namespace cohort::collective {

class Communicator;
class LoopbackFabric;
class ReductionServerCall;

// The second half of an all-reduce begun by Communicator::StartAllreduce: Finish waits for its
// results. Movable; Finish once, from any one thread, before the communicator is destroyed.
// Destroying one unfinished abandons the call and poisons the communicator.
class PendingAllreduce {
 public:
  PendingAllreduce();
  PendingAllreduce(PendingAllreduce&&) noexcept;
  PendingAllreduce& operator=(PendingAllreduce&&) noexcept;
  ~PendingAllreduce();

  // Every result in the buffer; an error names the call and poisons the communicator, as
  // Allreduce's do. OK at once for a call that ran whole in StartAllreduce.
  Status Finish();

 private:
  friend class Communicator;
  void Abandon();

  Communicator* comm_ = nullptr;
  std::unique_ptr<ReductionServerCall> call_;
  FlightRecording recording_;
};

struct CommunicatorOptions {
  enum class TransportKind { kUcx, kLoopback };
  TransportKind transport = TransportKind::kUcx;
  // Loopback only: the fabric shared by all ranks of this communicator (size workers + reducers).
  LoopbackFabric* loopback_fabric = nullptr;
  // Bootstrap (connect) timeout and the deadline of each all-reduce.
  std::chrono::milliseconds timeout{60000};
  // Pipeline unit of both algorithms; 0 picks it by where the ranks run: kSameHostChunkBytes when
  // every rank shares this host over shared memory, kDefaultChunkBytes otherwise. The
  // shared-memory all-reduce's slot: chunk_bytes when set, else kSameHostChunkBytes.
  // Environment: COHORT_CHUNK_BYTES.
  size_t chunk_bytes = 0;
  // Reduction Server: chunks in flight per reducer.
  int window = 4;
  // Reduction Server: chunk sends outstanding per worker and result sends per reducer (0: no
  // limit); -1 picks it by where the ranks run: kCrossHostMaxFlows (1) across hosts, where a job
  // with reducers also gets TCP sockets with a small send buffer (allreduce_options.h; with
  // UCX_TCP_SNDBUF=auto in the environment the kernel sizes them), no limit when every rank
  // shares this host. Environment: COHORT_RS_MAX_FLOWS.
  int max_flows = -1;
  // What Allreduce(kAuto) runs: kAuto chooses (AutoAlgorithm); kRing, kReductionServer (when
  // the job has reducers), kHalvingDoubling (a power-of-two number of workers),
  // kRecursiveDoubling, kSharedMemory (when shared_memory_available()) or kHierarchical (when
  // hierarchical_available()) pins it. Environment: COHORT_ALLREDUCE_ALGORITHM=auto|ring|
  // reduction-server|halving-doubling|recursive-doubling|shared-memory|hierarchical, like
  // NCCL_ALGO.
  Algorithm algorithm = Algorithm::kAuto;
  // Wire compression: kBF16 or kF16 sends float32 all-reduce buffers to the reducers and back in
  // that type (half the bytes); the reducers reduce in float32 and round once on the way back, so
  // every worker ends with identical bytes (reduction_server.h, "Wire compression"). It applies
  // wherever the Reduction Server runs (pinned, or what kAuto picks across hosts for a job with
  // reducers). The peer-to-peer all-reduces (ring, halving-doubling, recursive-doubling,
  // hierarchical) and the one-host shared-memory one move float32 as it is (exact sums; on one
  // host there is no link to save), as do other data types and the other collectives. kF32: off.
  // Environment: COHORT_WIRE_DTYPE=bf16|f16 (f32, none or empty: off).
  DataType wire_dtype = DataType::kF32;
  // Namespace of this communicator's bootstrap keys.
  std::string key_prefix = "cohort";
  // Where every call is recorded (common/flight_recorder.h); nullptr: FlightRecorder::ForProcess(),
  // which COHORT_FLIGHT_RECORDER places in a file the agent reads, or turns off.
  FlightRecorder* flight_recorder = nullptr;
};

// Reads the optional tuning variables of the environment contract above (COHORT_COMM_TIMEOUT_MS,
// COHORT_CHUNK_BYTES, COHORT_RS_MAX_FLOWS, COHORT_ALLREDUCE_ALGORITHM, COHORT_WIRE_DTYPE) into
// `options`: an unset variable leaves its field as it is, except the timeout (60 s).
// kInvalidArgument names a variable whose value is wrong. For callers that rendezvous their own way
// (the torch backend) but honour the same variables.
Status CommunicatorOptionsFromEnvironment(CommunicatorOptions* options);

// The transport of `transport_rank` among `num_workers` workers and `num_reducers` reducers in
// `generation` (generation.h): options.loopback_fabric's, or UCX. Workers and reducers (reducer.h)
// open theirs here.
StatusOr<std::unique_ptr<Transport>> OpenCommunicatorTransport(Bootstrap& bootstrap,
                                                               int transport_rank, int num_workers,
                                                               int num_reducers,
                                                               const std::string& generation,
                                                               const CommunicatorOptions& options);

class Communicator {
 public:
  // Builds a communicator from the environment the agent injects (see above). Rank 0 also
  // starts the bootstrap store server and keeps it for the communicator's lifetime.
  static StatusOr<std::unique_ptr<Communicator>> FromEnvironment();
  // Builds a worker's communicator: `world_size` workers and `num_reducers` reducers find each
  // other through `bootstrap` (which must outlive the call only).
  static StatusOr<std::unique_ptr<Communicator>> Create(Bootstrap& bootstrap, int rank,
                                                        int world_size, int num_reducers,
                                                        CommunicatorOptions options);
  // Tells the reducers this worker is done (best effort, bounded wait) and closes the transport.
  ~Communicator();

  // In-place all-reduce of `count` elements at `data` (host memory; device memory too where
  // built with CUDA: staged through pinned host memory). kAuto: see AutoAlgorithm. Every worker
  // passes the same count, type and op: a call that differs fails every worker with
  // kInvalidArgument naming one whose call differs, whichever algorithm runs (each compares the
  // calls within its own exchanges); where the sizes lead kAuto to different algorithms on
  // different workers, or a worker made another collective call at this point (a barrier, an
  // allgather), once the call has waited kStalledCallAfter (stalled_call_check.h). The other
  // collectives below are watched the same way.
  Status Allreduce(void* data, size_t count, DataType type, ReduceOp op,
                   Algorithm algorithm = Algorithm::kAuto);
  // Allreduce in two halves, for a caller that keeps its link busy across consecutive calls (the
  // torch backend: DDP's gradient buckets). On the Reduction Server it returns once this worker's
  // chunks have all been sent; the PendingAllreduce's Finish, on another thread if need be, waits
  // for the results while this thread starts the next call, whose chunks then travel during this
  // call's tail (reduction_server.h, ReductionServerCall). Any other algorithm, or a device
  // buffer, runs the whole call here. Contract: at most one call pending when it is called (a
  // second is refused with kFailedPrecondition); no other collective while one is pending (also
  // refused); until Finish returns, nothing touches `data` and the next call's buffer does not
  // overlap it. Allreduce is StartAllreduce, then Finish.
  StatusOr<PendingAllreduce> StartAllreduce(void* data, size_t count, DataType type, ReduceOp op,
                                            Algorithm algorithm = Algorithm::kAuto);

  // What kAuto runs for a buffer of `bytes` (default: a large one): SelectAllreduceAlgorithm
  // (allreduce_selection.h) over allreduce_support() and options.algorithm. The same on every
  // worker.
  Algorithm AutoAlgorithm(size_t bytes = SIZE_MAX) const;
  // What this communicator's placement made available to the all-reduce.
  AllreduceSupport allreduce_support() const;
  // What Allreduce(kAuto) chooses from: allreduce_support() and options.algorithm.
  AllreduceChoice allreduce_choice() const { return {allreduce_support(), options_.algorithm}; }

  // The collectives below run among the workers (reducers take no part), like Allreduce one call
  // at a time: every worker makes the same calls in the same order with the same count, type, op
  // and root. A worker that receives from one that called something else gets kInvalidArgument
  // naming that worker and both calls. Each call's deadline is options.timeout; a dead or silent
  // peer makes it fail by then (kUnavailable or kDeadlineExceeded, naming the peer) and, as any
  // error in a call, poisons the communicator. Bad arguments (kInvalidArgument before anything is
  // sent) do not. Counts are elements of `type`; buffers are host memory (a device pointer is
  // refused: stage it). Algorithms: collective/algorithms/<name>.h.

  // The root's `data` (count elements) lands in every worker's `data`.
  Status Broadcast(void* data, size_t count, DataType type, int root);
  // Every worker's `send` (count elements) lands in every worker's `recv` (size() * count
  // elements) at offset rank * count. `send` may be recv + rank * count (in place).
  Status Allgather(const void* send, void* recv, size_t count, DataType type);
  // `send` holds size() * count elements on every worker; block r (elements r * count ..) reduced
  // over the workers by `op` lands in worker r's `recv` (count elements; may alias `send`).
  Status ReduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  // Returns once every worker has called it.
  Status Barrier();
  // Every worker's `send` (count elements) reduced by `op` lands in the root's `recv` (count
  // elements; may equal `send`; unused elsewhere).
  Status Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root);
  // Every worker's `send` (count elements) lands in the root's `recv` (size() * count elements;
  // unused elsewhere) at offset rank * count.
  Status Gather(const void* send, void* recv, size_t count, DataType type, int root);
  // Block r of the root's `send` (size() * count elements; unused elsewhere) lands in worker r's
  // `recv` (count elements).
  Status Scatter(const void* send, void* recv, size_t count, DataType type, int root);
  // Block j of `send` (size() blocks of count elements) lands in worker j's `recv` at block rank.
  Status Alltoall(const void* send, void* recv, size_t count, DataType type);
  // As Alltoall with per-peer counts (size() entries each): send_counts[j] elements go to worker j,
  // recv_counts[i] come from worker i; blocks are contiguous in worker order. A sender whose count
  // differs from the receiver's expectation is named in the receiver's error.
  Status AlltoallV(const void* send, const size_t* send_counts, void* recv,
                   const size_t* recv_counts, DataType type);

  // Point-to-point (collective/algorithms/point_to_point.h): `count` elements to or from worker
  // `peer` with `tag` in [0, kPointToPointTagLimit); a receive matches the sends of `peer` with
  // that tag in order. Unlike the collectives these involve two workers only (no sequence number)
  // and may be outstanding while other calls run: Isend/Irecv post and return, and the request's
  // Wait (deadline: options.timeout from posting) completes it; an error there poisons the
  // communicator. Requests must be waited for or destroyed before the communicator is.
  Status Send(const void* data, size_t count, DataType type, int peer, int tag = 0);
  Status Recv(void* data, size_t count, DataType type, int peer, int tag = 0);
  StatusOr<PointToPointRequest> Isend(const void* data, size_t count, DataType type, int peer,
                                      int tag = 0);
  StatusOr<PointToPointRequest> Irecv(void* data, size_t count, DataType type, int peer,
                                      int tag = 0);
  // A receive from whichever other worker sends `tag` first (point_to_point.h, "any worker"): its
  // Wait finds the sender, and the request's peer() names it. Transports without Probe (none
  // that a Communicator is built on) refuse it at Wait.
  StatusOr<PointToPointRequest> IrecvAny(void* data, size_t count, DataType type, int tag = 0);
  // Blocking IrecvAny; `*source` (when not null) receives the sender's worker rank.
  Status RecvAny(void* data, size_t count, DataType type, int tag, int* source);

  // Calls made from now on report `ns` (FlightClockNs) as the time they were queued; 0: the time
  // they start. The torch backend sets it to when it queued the operation on its thread.
  void set_enqueue_time(int64_t ns) { enqueue_ns_ = ns; }
  // The deadline of calls started from now on: each runs until `timeout` after its start
  // (options.timeout until this is called). A call already started keeps its own. The reducers
  // of the Reduction Server keep the timeout they were started with.
  void set_timeout(std::chrono::milliseconds timeout) { options_.timeout = timeout; }
  // This communicator's id in its flight recorder's entries.
  uint32_t flight_comm_id() const { return flight_comm_id_; }

  // Gives up on this worker's calls, from any thread: the call in progress (a pending
  // all-reduce's Finish and point-to-point waits included) fails within milliseconds with
  // kCancelled, naming the call, instead of waiting for peers; every later call fails at once.
  // The transport and shared-memory segments stay until destruction, which then sends the
  // reducers no goodbye: they and the peers learn this worker is gone as it closes, as after any
  // failure. For a process that abandons its collectives (the torch backend's abort, an exit on
  // an error). Idempotent, irreversible.
  void Cancel();

  int rank() const { return rank_; }
  int size() const { return world_size_; }
  // The pipeline unit in use (CommunicatorOptions::chunk_bytes, or what 0 picked).
  size_t chunk_bytes() const { return options_.chunk_bytes; }
  int num_reducers() const { return num_reducers_; }
  const std::string& generation() const { return generation_; }
  // True when every worker runs on this host (reducers may run elsewhere), the transport's
  // placement allows shared memory (UCX: UCX_TLS) and every worker mapped the others' segments:
  // kSharedMemory can run.
  bool shared_memory_available() const { return shared_memory_ != nullptr; }
  // True when the workers run on two or more hosts with the same number (at least two) of workers
  // each, the placement allows shared memory, and every host's workers mapped each other's
  // segments: kHierarchical can run.
  bool hierarchical_available() const { return host_memory_ != nullptr; }
  Transport& transport() { return *transport_; }

 private:
  friend class PendingAllreduce;
  Communicator() = default;
  StatusOr<PendingAllreduce> StartAllreduceHost(void* data, size_t count, DataType type,
                                                ReduceOp op, Algorithm algorithm);
  // The stall check of call `seq` (this worker's call `mine`, among `workers`, transport ranks;
  // `what` prefixes its errors; `started`: when the call started): made into `owned` when given,
  // else into call_check_ (the call in progress on this thread). Drains late notices at most every
  // kStallDrainInterval. Adds `mine` to the calls' history; `*before` gets the history before it,
  // which the call's headers carry (and so does the check's `mine`).
  StalledCallCheck* WatchCall(uint32_t seq, AgreementCall mine, const std::vector<int>& workers,
                              std::string what, SteadyClock::time_point started,
                              CallHistory* before,
                              std::unique_ptr<StalledCallCheck>* owned = nullptr);
  // The argument checks every collective call makes (`what` names it in errors), then the call's
  // options (sequence number, deadline, its stall check, which compares `op` too: kSum for calls
  // that reduce nothing), and its flight-recorder entry begins.
  Status BeginCall(std::string_view what, DataType type, size_t count, ReduceOp op,
                   std::initializer_list<const void*> buffers, std::optional<int> root,
                   CollectiveOptions* call);
  // One collective call: BeginCall, then `algorithm` over the transport with `call`, then EndCall.
  template <typename Options>
  Status RunCall(std::string_view what, DataType type, size_t count,
                 std::initializer_list<const void*> buffers, std::optional<int> root, Options call,
                 Status (*algorithm)(Transport&, const Options&));
  // Ends the call's flight-recorder entry; an error names the call and poisons the communicator.
  Status EndCall(Status status);
  // OK unless a call may not start: cancelled (kCancelled), or poisoned (kAborted).
  Status CheckUsable() const;
  // A flight-recorder entry of this communicator for a call (peer: root, point-to-point peer, or
  // -1 for the group).
  FlightRecord CallRecord(FlightOp op, uint32_t seq, DataType type, size_t count, int peer) const;
  // `status` with the call named first: "allreduce #12 (4.0 KiB f32, ring): ...".
  static Status NameCall(const FlightRecord& record, const Status& status);
  // peer kAnyWorker: a receive from any worker (IrecvAny).
  static constexpr int kAnyWorker = -1;
  StatusOr<PointToPointRequest> PostPointToPoint(bool send, void* data, size_t count, DataType type,
                                                 int peer, int tag);
  // Sets up host_memory_ and across_hosts_ when the workers' placement allows (see
  // hierarchical_available); every worker reaches the same verdict.
  Status SetUpHierarchy(Bootstrap& bootstrap, const Placement& placement, size_t slot_bytes,
                        Deadline deadline);

  int rank_ = 0;
  int world_size_ = 1;
  int num_reducers_ = 0;
  std::string generation_;
  CommunicatorOptions options_;
  uint32_t seq_ = 0;
  CallHistory history_;  // of the calls that took a sequence number
  // The flight recorder (nullptr: off), this communicator's id there, the enqueue time calls
  // report, and the entry of the collective call in progress.
  FlightRecorder* recorder_ = nullptr;
  uint32_t flight_comm_id_ = 0;
  int64_t enqueue_ns_ = 0;
  FlightRecording call_;
  std::atomic<bool> poisoned_{false};  // point-to-point requests set it from any thread
  // Every point-to-point receive is posted under it (point_to_point.h, "any worker").
  std::mutex posting_mu_;
  std::atomic<bool> cancelled_{false};      // Cancel was called (from any thread)
  std::atomic<int> pending_allreduces_{0};  // started by StartAllreduce, not yet finished
  // Wire compression's narrow copies of the Reduction Server's chunks: one per all-reduce that may
  // be in flight at once (the pending one and the next), by sequence number parity.
  std::vector<char> wire_staging_[2];
  bool one_host_shared_memory_ = false;  // UCX, every rank on this host, shared memory allowed
  JobBootstrap job_;  // FromEnvironment only: the job's store (served by rank 0) and its client
  std::unique_ptr<LoopbackFabric> owned_fabric_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<SharedMemoryGroup> shared_memory_;  // when every worker shares this host
  // Hierarchical: this host's workers (their group, and their transport ranks by their rank in
  // it), and the workers with this worker's local rank on every host (transport ranks, in host
  // order).
  std::unique_ptr<SharedMemoryGroup> host_memory_;
  std::vector<int> host_workers_;
  std::vector<int> across_hosts_;
  // Every collective call is watched for workers whose calls never meet (stalled_call_check.h):
  // the notices, the workers' transport ranks (0 .. world_size - 1), when late notices were last
  // drained, and the check of the call in progress on the calling thread (any but a Reduction
  // Server all-reduce, whose call owns its check).
  std::unique_ptr<StallNotices> stall_notices_;
  std::vector<int> all_workers_;
  SteadyClock::time_point last_drain_{};
  std::optional<StalledCallCheck> call_check_;
};

}  // namespace cohort::collective
