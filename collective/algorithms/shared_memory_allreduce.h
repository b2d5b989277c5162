// Shared-memory all-reduce among workers that all run on one host. Every worker owns a segment of
// POSIX shared memory that every other worker maps. A call goes a slot at a time: each worker
// copies its next slot of data into its own segment; worker r sums slice r of that slot from every
// segment, in rank order (so results are bit-identical run to run), and leaves the sum in its
// segment; then every worker copies the other slices' sums out. That is two synchronisations per
// slot (one for slots up to kSharedMemorySumAllMaxBytes, which every worker sums whole) where the
// ring needs 2(n-1) dependent transport steps, and no transport in the data path: on one host,
// with more ranks than cores, those hand-offs are what cost.
// Two slots per segment alternate, so a worker fills the next slot while slower peers still read
// the last one.
//
// Segments live in /dev/shm only until every worker has mapped them (then they are unlinked), so a
// crash leaves nothing behind; their pages are reserved up front, so a full /dev/shm is an error
// at creation and never a SIGBUS later. Waits poll briefly (yielding the core), then sleep on a
// futex; while waiting a worker checks its peers' PIDs (a dead one: kUnavailable naming it) and
// their failure flags (a peer that failed: its status code, naming it; one that cancelled its
// calls: kUnavailable, as for a peer that went), and gives up at the deadline (kDeadlineExceeded).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collective/algorithms/allreduce_options.h"
#include "collective/bootstrap.h"

namespace cohort::collective {

// Slots up to this size are summed whole by every worker: for small slots one synchronisation
// instead of two is worth n times the reading.
constexpr size_t kSharedMemorySumAllMaxBytes = size_t{128} << 10;

class SharedMemoryGroup {
 public:
  // Called by every worker (0 <= rank < size, all on this host and PID namespace) with the same
  // key_prefix (fresh for each communicator generation) and slot_bytes. Returns nullptr on every
  // worker, with the reason logged, when some worker cannot create or map a segment (then the
  // caller uses another algorithm); an error when the bootstrap fails or a worker does not answer
  // by `deadline`. `job_ranks`: the job rank of each rank of the group, by which errors name the
  // workers (empty: the same).
  static StatusOr<std::unique_ptr<SharedMemoryGroup>> Create(Bootstrap& bootstrap,
                                                             const std::string& key_prefix,
                                                             int rank, int size, size_t slot_bytes,
                                                             Deadline deadline,
                                                             std::vector<int> job_ranks = {});
  ~SharedMemoryGroup();
  SharedMemoryGroup(const SharedMemoryGroup&) = delete;
  SharedMemoryGroup& operator=(const SharedMemoryGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slot_bytes() const { return slot_bytes_; }

  // Reduces a worker's slice further (across hosts) in place: `count` elements at `slice`.
  // `differ`: two workers of this group (ranks in the group) whose calls differ, found while
  // summing the slot (the slice then holds no sum), or nullptr. It must then fail, and should tell
  // the workers it reduces with, so that every worker of the job fails alike.
  using SliceReduce = std::function<Status(void* slice, size_t count, const AgreementCall* differ)>;

  // In-place all-reduce of options.data (count, type, op, deadline; the transport-side fields are
  // ignored). Every worker calls it with the same count, type and op, one call at a time: each
  // publishes its call beside its data, and workers whose calls differ all fail with
  // kInvalidArgument naming a worker whose call differs from their own (an empty call too goes
  // through one slot for that). After an error the group is unusable: every later call returns
  // kAborted.
  // With `across`, every slot is cut into slices (none is summed whole) and each worker passes its
  // slice's sum through `across` before publishing it (a sum there: kAvg then divides by
  // `avg_divisor`, the workers of every host); every worker of the group must pass one. Workers
  // whose calls differ then go on to `across` with what they found (SliceReduce) instead of
  // failing at once, and fail with what it returns.
  Status Allreduce(const AllreduceOptions& options, const SliceReduce& across = {},
                   int avg_divisor = 0);
  // Gives up on this worker's calls, in progress on any thread or later: they fail with
  // kCancelled within milliseconds, and the peers waiting for this worker learn that it gave up.
  // Thread-safe, irreversible (Transport::Cancel's counterpart).
  void Cancel();

 private:
  struct Segment;
  SharedMemoryGroup() = default;
  Status AllreduceSlot(char* data, size_t count, const AllreduceOptions& options,
                       const SliceReduce& across, int avg_divisor);
  char* Slot(int worker, uint64_t round) const;
  // Fails when a worker's call differs from this one's, or with `differ`, records the first two
  // calls that differ there and goes on.
  Status SumOverWorkers(char* data, size_t first, size_t len, uint64_t round, uint32_t copied,
                        const AllreduceOptions& options, AgreementCall* differ = nullptr);
  // kInvalidArgument: a peer's call (differ[0], its rank in the group) differs from this worker's
  // (differ[1]).
  Status Disagreement(const AgreementCall differ[2], const AllreduceOptions& options) const;
  // kInvalidArgument: a peer is in `peer_call` (its job rank), its call `theirs`
  // (AllreduceOptions::seq), this worker in its call `mine`; the finding of options.stall_check
  // where it has one that explains it (StalledCallCheck::Met).
  Status OutOfStep(const AgreementCall& peer_call, uint32_t theirs, uint32_t mine,
                   const AllreduceOptions& options);
  // Completes this worker's next phase and wakes peers waiting for it; returns its number.
  uint32_t Post();
  // Waits until `peer` has completed `phase`; past its spinning, looks at `check` (when given:
  // options.stall_check) whenever it wakes.
  Status WaitFor(int peer, uint32_t phase, Deadline deadline, StalledCallCheck* check);
  // Marks this worker failed with `code` and wakes peers waiting for it.
  void Abort(StatusCode code);

  int rank_ = 0;
  int size_ = 1;
  size_t slot_bytes_ = 0;
  size_t segment_bytes_ = 0;
  // The job rank of each rank of the group; empty: the same.
  std::vector<int> job_ranks_;
  int JobRank(int r) const { return job_ranks_.empty() ? r : job_ranks_[r]; }
  // "worker 3": how errors name rank `r` of the group, by its job rank.
  std::string RankName(int r) const;
  std::vector<Segment*> segments_;  // mapped, one per worker (this worker's own at rank_)
  std::vector<int> pids_;
  uint64_t round_ = 0;  // slots started, over every call
  uint32_t phase_ = 0;  // phases posted (wraps)
  bool aborted_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace cohort::collective
