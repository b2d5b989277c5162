// ProcessGroupCohort is the `cohort` torch.distributed backend: a c10d ProcessGroup (torch 1.13;
// from torch 2.0 a c10d::Backend that torch wraps in a ProcessGroup, see torch_compat.h) whose
// collectives run on Cohort's collective library (collective::Communicator), so that a stock DDP
// script reaches the Reduction Server by changing its backend name to "cohort".
//
// Rendezvous (Create): the default process group inside a Cohort job (COHORT_BOOTSTRAP_ADDR set)
// builds its communicator from Cohort's environment, with the job's reducer pool; anything else
// (torchrun, MASTER_ADDR/MASTER_PORT, subgroups) rendezvouses through the c10d Store torch hands
// the backend. There, the default group takes COHORT_NUM_REDUCERS (or Config::num_reducers)
// reducers started with `python3 -m cohort.torch.reducer --store HOST:PORT`, and subgroups none.
//
// Execution: every call checks its tensors on the caller's thread (bad use raises there), stages
// what the library cannot use in place (GPU tensors through pinned host memory, non-contiguous
// tensors through contiguous copies), and queues the operation. One thread runs the queue in issue
// order, so every rank runs its collectives in the order torch issued them. Futures, then their
// Works, are completed on a pool of completion threads, because callbacks chained on a future (DDP
// comm hooks, PowerSGD) may issue collectives and wait on them.
// Overlap: an allreduce on the Reduction Server runs in two halves (Communicator::StartAllreduce):
// the queue thread sends its chunks, a finisher thread waits for its results, and meanwhile the
// queue thread starts the next allreduce if one is queued, so DDP's buckets keep the link busy
// instead of pausing at each bucket's tail. At most two allreduces are in flight; any other
// operation, or an allreduce whose buffer overlaps the one in flight, waits for it to finish.
// COHORT_TORCH_OVERLAP=0 (Config::overlap) turns this off: every operation runs whole.
//
// Agreement: the library's collectives check that every rank made the same call (count, type,
// root, op), its all-reduces within the call itself (the Reduction Server's reducers compare the
// workers' calls; recursive doubling, halving-doubling and the ring carry them in their exchanges:
// pairwise_agreement.h; the shared-memory all-reduce's workers publish theirs beside their data;
// the hierarchical all-reduce does both). Ranks whose sizes differ so much that they pick
// different algorithms (a small call by recursive doubling, a large one on the reducers) wait for
// each other in vain and fail at the timeout. COHORT_TORCH_CHECK_CALLS=1 (Config::check_calls), a
// debugging aid, all-gathers a small descriptor of every allreduce and allreduce_coalesced first
// (count, dtype, op, tensors and their shapes) and fails naming a rank whose call differs: that
// also catches those, and what the library cannot see (int8, uint8 and bool tensors, all reduced
// as int32; lists of tensors that coalesce into the same count), for a round per call.
//
// Operations that only move bytes (broadcast, gathers, scatters, all-to-all, send/recv) take any
// dtype; tensors whose size is not a whole number of int32s travel padded (tensor_staging.h), so
// there a size difference of less than four bytes between ranks goes unnoticed.
//
// Sparse COO tensors: allreduce (SUM) all-gathers the ranks' nonzeros and sums them on every rank
// (sparse_allreduce.h), as DDP needs for nn.Embedding(sparse=True); other operations refuse them.
//
// Errors: an operation the library lacks raises a RuntimeError naming it; a dead peer fails the
// operation with the collective library's error naming that peer (never a hang: every operation
// runs under the process group's timeout, and Work::wait gives up at that timeout too). After a
// failure the communicator is poisoned: later operations fail at once with the first error (they
// are refused when issued, or when they reach the queue thread if issued before). A rank that
// gives up (or aborts) writes why to the group's store; a rank whose operation has waited 5 s
// then reads it (PeerFailureWatch) and gives up too, naming that rank and its reason, instead of
// waiting out its timeout for a peer that makes no more calls (COHORT_TORCH_WATCH_PEERS=0: off).
// The group's abort hooks (registerAbortHook) run at that first failure, or at an abort.
//
// Thread safety: the c10d entry points may be called from any thread; ranks must issue
// collectives in the same order (torch's contract). Lifetime: destroying the process group waits
// for queued operations (each bounded by the timeout), then tells the reducers this worker is done.
// It may run on the group's own completion threads (a callback that shuts the group down, or drops
// its last reference): CompletionPool leaves the thread it runs on. Abort, from any thread, waits
// for nothing: the operation in flight and those queued fail at once (Communicator::Cancel), and
// the peers learn this worker is gone as its connections close.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "collective/communicator.h"
#include "common/status.h"
#include "python/torch_backend/torch_compat.h"

namespace cohort::collective {
class LoopbackFabric;
class StoreServer;
}  // namespace cohort::collective

namespace cohort::torch_backend {

class CompletionPool;
class PeerFailureWatch;
class StagedTensor;
struct ByteCarrier;

// What the Python side passes from cohort.torch.Options; unset fields come from the environment.
struct Config {
  int num_reducers = -1;   // -1: COHORT_NUM_REDUCERS (0 when unset)
  std::string algorithm;   // "": COHORT_ALLREDUCE_ALGORITHM (auto when unset)
  size_t chunk_bytes = 0;  // 0: COHORT_CHUNK_BYTES, else chosen by placement
  int check_calls = -1;    // -1: COHORT_TORCH_CHECK_CALLS (0 when unset); see ProcessGroupCohort
  // "": COHORT_WIRE_DTYPE (off when unset); "bf16" or "f16": float32 all-reduces on the Reduction
  // Server cross the network in that type, reduced in float32 (CommunicatorOptions::wire_dtype);
  // "f32" or "none": off.
  std::string wire_dtype;
  int overlap = -1;  // -1: COHORT_TORCH_OVERLAP (1 when unset); see ProcessGroupCohort, Overlap
};

// A torch reduction as the library runs it: the library's op, and for NCCL's PREMUL_SUM (a sum of
// each rank's input multiplied by a factor: FSDP's gradient division) the factor, applied to a
// copy of the input on the caller's thread before the sum.
struct Reduction {
  collective::ReduceOp op = collective::ReduceOp::kSum;
  std::optional<double> premultiply;
};

// One queued operation's handle: wait() blocks until it ran (or the timeout passed), getFuture()
// completes with its output tensors. The future completes before the Work (as with gloo): when
// wait() returns or isCompleted() is true, the future holds the result and its callbacks have run.
class CohortWork final : public c10d::Work {
 public:
  CohortWork(int rank, c10d::OpType type, std::string name, std::vector<at::Tensor> outputs,
             std::chrono::milliseconds timeout);

  // Without a timeout: waits until the operation finished, or until it has run for the process
  // group's timeout (plus a grace period for the library's own deadline to report first).
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;

  // A receive's sender: the rank it names, or, for one from any rank, the rank its message came
  // from once it completed (-1 until then). Other operations have none (torch's error).
  int sourceRank() const override;
  // For receives, before the Work is handed out: where the sender's rank will be.
  void set_source_rank(std::shared_ptr<const std::atomic<int>> source) {
    source_rank_ = std::move(source);
  }

  const std::string& name() const { return name_; }
  void MarkStarted();
  // Completes the future (running its callbacks); the caller then calls Finish.
  void CompleteFuture(std::exception_ptr error);
  // Marks the Work finished (wakes wait()).
  void Finish(std::exception_ptr error);
  // CompleteFuture and Finish here, on the calling thread, unless getFuture has handed the future
  // out: then nobody can have added a callback to it, so none runs here (and a getFuture during
  // this waits for it, and returns the future completed). False when it was handed out: the
  // caller completes it where callbacks may run.
  bool ConcludeUnlessFutureHandedOut(std::exception_ptr error);

 private:
  const std::string name_;
  std::vector<at::Tensor> outputs_;
  const std::chrono::milliseconds timeout_;
  bool started_ = false;  // guarded by mutex_ (c10d::Work's)
  std::chrono::steady_clock::time_point started_at_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex future_mu_;
  bool future_handed_out_ = false;  // guarded by future_mu_
  std::shared_ptr<const std::atomic<int>> source_rank_;
};

class ProcessGroupCohort final : public BackendBase {
  struct PassKey {
    explicit PassKey() = default;
  };

 public:
  // Rendezvous and communicator set-up (see above); throws std::runtime_error naming what failed.
  // `default_group`: torch's default (world) process group, not a new_group().
  static c10::intrusive_ptr<ProcessGroupCohort> Create(const c10::intrusive_ptr<c10d::Store>& store,
                                                       int rank, int size,
                                                       std::chrono::milliseconds timeout,
                                                       bool default_group, const Config& config);
  ~ProcessGroupCohort() override;
  // Runs what is queued, then closes the communicator (the reducers learn this worker is done).
  // Idempotent; later operations raise. Releases the GIL while it waits, if the caller holds it.
  void Shutdown();
  // Newer torch (2.14, not 2.6) shuts a group's backends down in destroy_process_group through
  // Backend::shutdown, which this overrides; older torch has none (torch_compat.h): no `override`.
  void shutdown() { Shutdown(); }  // NOLINT(modernize-use-override)
  // Gives up on this group's operations instead of waiting for them: the one in flight fails
  // within milliseconds, the queued ones at once, each Work raising "... aborted"; then the group
  // closes as Shutdown does, without the reducers' goodbye. Callable from any thread, also while
  // another waits in Shutdown; idempotent; later operations raise. For a rank that will not make
  // its peers' calls any more: an exit on an error (cohort.torch's exit hook) or torch's
  // _abort_process_group, which reaches it through Backend::abort (torch 2.14; older torch has
  // none: backend_of(group).abort() there).
  void Abort();
  void abort() { Abort(); }  // NOLINT(modernize-use-override)
  // torch 2.14's shrink_group (Backend::shrink and supportsShrinking, which these override where
  // the base declares them): a new group of this group's ranks but `ranks_to_exclude`, in the same
  // order, made through this group's store as a subgroup is (no reducers), with this group's
  // options and timeout (`opts_override`'s timeout when given). Every surviving rank calls it, the
  // same number of times on a group, with the same ranks; none of the excluded ones does. Its
  // rendezvous needs the store to live: under env://, a group that excludes the rank hosting it
  // (rank 0) cannot be made. SHRINK_ABORT (flag 1) aborts this group first, so that what is in
  // flight on it fails at once instead of holding its shutdown up to the timeout.
  bool supportsShrinking() const { return true; }  // NOLINT(modernize-use-override)
  c10::intrusive_ptr<BackendBase> shrink(          // NOLINT(modernize-use-override)
      const std::vector<int64_t>& ranks_to_exclude, int shrink_flags = 0,
      const c10::intrusive_ptr<BackendBase::Options>& opts_override = {});
  // Abort hooks, for a user to capture what they need when the group gives up: torch 2.14's
  // ProcessGroup.register_abort_hook (Backend::registerAbortHook, which these override where the
  // base declares them), and backend_of(group).register_abort_hook() on every torch. They run once
  // per group, in the order of their ids, on the thread that sees the group give up: in abort(),
  // before anything is cancelled, or when an operation first fails or times out (after which the
  // group runs no more operations), before that operation's error reaches its Work. A hook that
  // raises is logged and the others still run. Registering an id again replaces its hook;
  // unregistering an unknown id does nothing. Hooks registered after they ran, or on a group shut
  // down, never run. A hook may run on the queue thread: an operation of this group it issues is
  // refused at once, as every operation issued after the group gave up is (not queued behind it).
  void registerAbortHook(int64_t hook_id, std::function<void()> hook);  // NOLINT
  void unregisterAbortHook(int64_t hook_id);                            // NOLINT
  // Whether the group gave up, and why, in the terms of torch's c10d::ErrorType: "SUCCESS" while
  // it runs; once it gave up (see registerAbortHook), "TIMEOUT" when its first failure was a
  // deadline, "REMOTE_ERROR" when a peer was gone or failed, "COMM_ERROR" for any other failure
  // and after an abort. torch's Backend.get_error() where it has one (getError, see
  // torch_compat.h), backend_of(group).get_error() (the name) on older torch.
  std::string ErrorTypeName() const;
#if COHORT_TORCH_HAS_ERROR_TYPE
  c10d::ErrorType getError() override;
#endif
  // The timeout of the operations issued from now on, both Work::wait's and the library's
  // deadline (Communicator::set_timeout): torch.distributed.set_timeout (torch 2.14; Backend::
  // setTimeout, which this overrides where the base declares it, see torch_compat.h), and
  // backend_of(group).set_timeout() on every torch. Operations already issued keep theirs; a job's
  // reducers keep the timeout the group was created with. Raises unless it is positive.
  void setTimeout(std::chrono::milliseconds timeout);  // NOLINT(modernize-use-override)

  const std::string getBackendName() const override { return "cohort"; }

  // The group's sequence number, as TORCH_DISTRIBUTED_DEBUG=DETAIL's wrapper (torch 2.x wraps
  // plugin backends too) compares it across ranks before each collective: the collectives this
  // rank issued on the group so far, sends and receives not counted (they need not pair up
  // across the group). It starts at 0 on every rank, so setting it is a no-op, as torch 2.14's
  // base class makes it (earlier ones, 2.6 among them, refuse both calls).
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override;

  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
#if COHORT_TORCH_HAS_ALLREDUCE_SPARSE
  // torch 2.x's entry for sparse CUDA tensors: as allreduce of a sparse tensor.
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
#endif
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;
  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
#if COHORT_TORCH_HAS_TENSOR_COALESCED
  // torch 2.x's coalesced forms of _allgather_base and _reduce_scatter_base (FSDP2 and the
  // functional collectives issue them; _coalescing_manager too): one Work, the pairs in order.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
#endif
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors,
      const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors,
      const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
      std::vector<int64_t>& input_split_sizes,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& output_tensors, std::vector<at::Tensor>& input_tensors,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  // torch.distributed.monitored_barrier (torch 2.14 takes it to any backend with CPU tensors; on
  // older torch, which allows it on gloo only, call it on the group: backend_of(group)
  // .monitored_barrier(timeout)): a barrier that names the ranks that did not reach it. Blocks.
  // Every rank but 0 sends rank 0 a token and waits for its acknowledgement; rank 0 waits for
  // every token until `opts.timeout` (the group's when unset), then acknowledges them all. It
  // raises on rank 0 naming the first rank that did not arrive in time (with `wait_all_ranks`,
  // every such rank), and on the others naming rank 0 when its acknowledgement did not come within
  // the timeout (as gloo's, a rank that arrives long before rank 0 may time out too). Runs in
  // issue order with the other collectives; a failure gives the group up, as any does.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks = false) override;
  // Point-to-point: posted in issue order by the queue thread, then waited for on a thread of
  // their own, so a send and a receive issued in any order on two ranks cannot wait for each
  // other; tags in [0, 2^20 - 1) (the last one carries monitoredBarrier's messages).
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  // dist.recv without a source: takes the first message with `tag` that another rank sends and
  // no other receive takes (collective/algorithms/point_to_point.h, "any worker"); the Work's
  // sourceRank() names the sender once it completed. A receive from a named rank issued while it
  // waits may take that rank's next message first.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  // What the library runs and where it came from, for logs and tests; fixed at creation, so a
  // group shut down still answers (Describe then says so).
  int num_reducers() const { return num_reducers_; }
  std::string Describe() const;

  // Only Create makes one (c10::make_intrusive needs a public constructor).
  ProcessGroupCohort(PassKey, int rank, int size, std::chrono::milliseconds timeout);

 private:
  // What an operation leaves to wait for after the queue thread posted it (point-to-point); empty
  // for operations that finished on the queue thread.
  using Deferred = std::function<Status()>;

  // Queues `run` under a new Work named `name` whose future yields `outputs`.
  c10::intrusive_ptr<c10d::Work> Enqueue(c10d::OpType type, std::string name,
                                         std::vector<at::Tensor> outputs,
                                         std::function<Status()> run);
  // `overlaps`: an overlapped allreduce (see Overlap), whose Deferred is its second half.
  // `timeout`: the operation's own, instead of the group's.
  c10::intrusive_ptr<c10d::Work> EnqueueDeferred(
      c10d::OpType type, std::string name, std::vector<at::Tensor> outputs,
      std::function<StatusOr<Deferred>()> run, bool overlaps = false,
      std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  void RunQueue();
  // Records the outcome of `work` (the first error poisons the group), completes its future and
  // finishes it: here (`complete_future_here`, or when its future was never handed out), else on
  // the completion pool.
  void Conclude(const c10::intrusive_ptr<CohortWork>& work, const Status& status,
                bool complete_future_here);
  // ErrorTypeName's answer, as c10d::ErrorType's values.
  enum class GaveUp { kNo, kTimeout, kRemoteError, kCommError };
  GaveUp WhyItGaveUp() const;
  // PeerFailureWatch found that worker `peer` gave up while an operation here waited: this group
  // gives up too (kUnavailable naming the peer and `why`), ending the operations in flight. On
  // the watch's thread; the abort hooks then run where those operations conclude.
  void GiveUpForPeer(int peer, const std::string& why);
  // The abort hooks, taken out for good: none run or are kept after this (Shutdown, RunAbortHooks).
  std::map<int64_t, std::function<void()>> TakeAbortHooks();
  // Runs the abort hooks, once (see registerAbortHook); never under mu_.
  void RunAbortHooks();
  // Why the queue thread runs no more operations: the group was aborted (kCancelled), or an
  // operation failed (kAborted naming the first error); OK when it may run them.
  Status RefusalToRun();
  Status RefusalLocked() const;  // RefusalToRun, with mu_ held
  // allreduce of a sparse COO tensor (sparse_allreduce.h): SUM only, on the queue thread.
  c10::intrusive_ptr<c10d::Work> SparseAllreduce(std::vector<at::Tensor>& tensors,
                                                 const c10d::AllreduceOptions& opts);
  // What an all-gather into one tensor runs on the queue thread, staged now (at issue time):
  // `output` receives every rank's `input` in rank order. Raises on a mismatched output.
  std::function<Status()> PrepareAllgatherBase(const at::Tensor& output, const at::Tensor& input,
                                               const char* name);
  // What a reduce-scatter runs on the queue thread, staged now: `input` holds every rank's block
  // in rank order, `output` receives this rank's reduced block. Raises on a mismatched input.
  std::function<Status()> PrepareReduceScatter(const at::Tensor& input, const at::Tensor& output,
                                               const Reduction& reduction, const char* name);
  // Runs one all-reduce on the communicator (the queue thread only).
  Status Allreduce(const StagedTensor& t, collective::ReduceOp op);
  // The overlapped allreduce (see Overlap): starts it, and returns its second half.
  StatusOr<Deferred> StartAllreduce(const std::shared_ptr<StagedTensor>& t,
                                    collective::ReduceOp op);
  // All-gathers `descriptor` and fails naming the first rank whose descriptor differs. `what`
  // renders a descriptor for the error.
  Status CheckAgreement(const std::vector<int64_t>& descriptor,
                        const std::function<std::string(const std::vector<int64_t>&)>& what);
  // True when every all-reduce runs CheckAgreement first (Config::check_calls, in a group of more
  // than one).
  bool ChecksCalls() const { return check_calls_ && getSize() > 1; }
  // What CheckAgreement compares of an all-reduce of `tensors` (every tensor's dtype and size, and
  // `op`); empty when the calls are not checked.
  std::vector<int64_t> AllreduceCall(const std::vector<at::Tensor>& tensors,
                                     const c10d::ReduceOp& op) const;
  // True when the all-reduce of `t` runs on the Reduction Server, the one that overlaps.
  bool OnReductionServer(const StagedTensor& t) const;
  // peer kAnyRank: a receive from any rank (recvAnysource).
  static constexpr int kAnyRank = -1;
  c10::intrusive_ptr<c10d::Work> PointToPoint(bool send, std::vector<at::Tensor>& tensors, int peer,
                                              int tag);
  // monitoredBarrier's exchange (the queue thread only), under the communicator's timeout.
  Status RunMonitoredBarrier(std::chrono::milliseconds timeout, bool wait_all_ranks);

  struct Op {
    c10::intrusive_ptr<CohortWork> work;
    std::function<StatusOr<Deferred>()> run;
    int64_t enqueued_ns = 0;  // FlightClockNs() when queued: the flight recorder's enqueue time
    bool overlaps = false;    // an overlapped allreduce: its Deferred runs on finisher_
    std::chrono::milliseconds timeout{0};  // the group's timeout when it was issued
  };

  // Milliseconds: the timeout of operations issued from now on (setTimeout).
  std::atomic<int64_t> timeout_ms_;
  bool check_calls_ = false;
  bool overlap_ = true;
  collective::DataType wire_dtype_ = collective::DataType::kF32;
  std::string rendezvous_;  // how this group found its peers, for Describe()
  // What the communicator's placement and options chose, fixed at creation: calls read it at
  // issue time, when a group shut down has no communicator left.
  int num_reducers_ = 0;
  collective::AllreduceChoice allreduce_choice_;
  // What Create was given, for shrink: the group's store and options.
  c10::intrusive_ptr<c10d::Store> store_;
  Config config_;
  int shrinks_ = 0;  // guarded by mu_: shrink calls so far (each a session of its own)
  std::unique_ptr<collective::StoreServer>
      store_server_;  // Cohort job, rank 0: the bootstrap store
  // Shared with watch_ (both store clients are thread-safe); closed after it.
  std::shared_ptr<collective::Bootstrap> bootstrap_;
  std::unique_ptr<collective::LoopbackFabric> loopback_;  // a group of one
  std::unique_ptr<collective::Communicator> comm_;        // used by the queue thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;      // guarded by mu_
  bool stopping_ = false;     // guarded by mu_: no more operations are taken
  bool aborted_ = false;      // guarded by mu_: Abort was called
  bool closing_ = false;      // guarded by mu_: Shutdown's teardown has begun (once)
  Status first_error_;        // guarded by mu_
  uint64_t ops_ = 0;          // guarded by mu_: operations issued, for names
  uint64_t collectives_ = 0;  // guarded by mu_: of those, collectives (getSequenceNumberForGroup)
  int unfinished_ = 0;        // guarded by mu_: overlapped allreduces started, not yet finished
  // guarded by mu_: registerAbortHook's, until they run or the group is shut down
  std::map<int64_t, std::function<void()>> abort_hooks_;
  bool abort_hooks_done_ = false;  // guarded by mu_: they ran, or the group was shut down
  // The buffer of the overlapped allreduce started last (the queue thread only).
  const char* overlap_begin_ = nullptr;
  const char* overlap_end_ = nullptr;
  // Tells the other ranks when this group gives up, and this one when another did (see
  // PeerFailureWatch); none for a group of one, or with COHORT_TORCH_WATCH_PEERS=0.
  std::unique_ptr<PeerFailureWatch> watch_;
  bool gave_up_for_peer_ = false;  // guarded by mu_: first_error_ is a peer's (GiveUpForPeer)
  std::unique_ptr<CompletionPool> completions_;
  std::unique_ptr<CompletionPool> point_to_point_;  // waits for posted sends and receives
  std::unique_ptr<CompletionPool> finisher_;        // one thread: the second halves of allreduces
  std::thread thread_;
};

}  // namespace cohort::torch_backend
