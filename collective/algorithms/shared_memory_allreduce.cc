#include "collective/algorithms/shared_memory_allreduce.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>

#include "collective/algorithms/collective_call.h"
#include "collective/algorithms/stalled_call_check.h"
#include "collective/kernels/reduce.h"
#include "collective/same_host.h"
#include "common/logging.h"

namespace cohort::collective {
namespace {

constexpr uint64_t kMagic = 0x636f686f72747368;  // "cohortsh"
constexpr size_t kPageBytes = 4096;
constexpr size_t kHeaderBytes = kPageBytes;
// A waiter polls kPollsBeforeYield times, then polls with sched_yield for this long, then sleeps
// on the futex: with more ranks than cores, a peer waiting for this core must get it (so yield),
// yet a futex sleep per hand-off costs more than a short yielding poll. COHORT_SHM_SPIN_US
// overrides it.
std::chrono::microseconds SpinTime() {
  static const std::chrono::microseconds spin = [] {
    const char* v = std::getenv("COHORT_SHM_SPIN_US");
    return std::chrono::microseconds(v != nullptr ? std::atol(v) : 200);
  }();
  return spin;
}
// Plain polls first: a peer on another core usually answers within a few hundred.
constexpr int kPollsBeforeYield = 256;
// How often a waiter checks that its peers are alive and have not given up.
constexpr auto kCheckInterval = std::chrono::milliseconds(100);

static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "futex words must be plain 32-bit atomics");

size_t RoundUp(size_t n, size_t unit) { return (n + unit - 1) / unit * unit; }

// `have` is at or past `want` in a counter that wraps.
bool Reached(uint32_t have, uint32_t want) { return static_cast<int32_t>(have - want) >= 0; }

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  // Not FUTEX_PRIVATE_FLAG: the word lives in memory shared between processes.
  (void)syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr,
                0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  (void)syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
                0);
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A POSIX shared-memory name for this worker's segment: the key prefix made safe, then the rank
// and PID (two communicators of one process never collide).
std::string SegmentName(const std::string& key_prefix, int rank) {
  std::string name = "/cohort-";
  for (char c : key_prefix.substr(0, 160))
    name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name + "-w" + std::to_string(rank) + "-" + std::to_string(getpid());
}

std::string ErrnoText(const std::string& what, int err) { return what + ": " + std::strerror(err); }

}  // namespace

// The first page of every segment. Written by its owner only, except `waiters`.
struct SharedMemoryGroup::Segment {
  uint64_t magic = 0;
  uint64_t segment_bytes = 0;
  int32_t pid = 0;
  // Phases this worker has completed: 2k+1 once slot k is copied in, 2k+2 once its slice's sum
  // is published. The futex word its peers sleep on.
  alignas(64) std::atomic<uint32_t> phase{0};
  // Peers asleep (or about to sleep) on `phase`: the owner wakes them only when there are any.
  alignas(64) std::atomic<uint32_t> waiters{0};
  // Set when this worker's all-reduce failed (to the StatusCode it failed with): its peers stop
  // waiting for it and fail the same way.
  alignas(64) std::atomic<uint32_t> aborted{0};
  // The call each of the two alternating slots belongs to, written before the slot's first post:
  // its peers compare it with their own.
  struct Call {
    uint64_t count;
    uint32_t type;
    uint32_t op;
    uint32_t seq;      // AllreduceOptions::seq: workers at different points of their calls differ
    uint32_t history;  // AllreduceOptions::history.digest: workers whose earlier calls differ
  };
  alignas(64) Call call[2];
};

StatusOr<std::unique_ptr<SharedMemoryGroup>> SharedMemoryGroup::Create(
    Bootstrap& bootstrap, const std::string& key_prefix, int rank, int size, size_t slot_bytes,
    Deadline deadline, std::vector<int> job_ranks) {
  static_assert(sizeof(Segment) <= kHeaderBytes);
  if (size < 1 || rank < 0 || rank >= size || slot_bytes < sizeof(uint64_t)) {
    return InvalidArgument("shared memory: worker " + std::to_string(rank) + " of " +
                           std::to_string(size) + " with " + std::to_string(slot_bytes) +
                           "-byte slots is not valid");
  }
  std::unique_ptr<SharedMemoryGroup> group(new SharedMemoryGroup());
  group->rank_ = rank;
  group->size_ = size;
  group->slot_bytes_ = slot_bytes / sizeof(uint64_t) * sizeof(uint64_t);
  group->segment_bytes_ = kHeaderBytes + 2 * RoundUp(group->slot_bytes_, kPageBytes);
  group->job_ranks_ = std::move(job_ranks);
  group->segments_.assign(size, nullptr);
  group->pids_.assign(size, 0);
  const size_t bytes = group->segment_bytes_;

  // This worker's segment: created, its pages reserved, mapped, its header written.
  const std::string name = SegmentName(key_prefix, rank);
  std::string problem;
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  struct Unlink {
    const std::string& name;
    bool created;
    ~Unlink() {
      if (created) shm_unlink(name.c_str());
    }
  } unlink{name, fd >= 0};
  if (fd < 0) {
    problem = ErrnoText("shm_open " + name, errno);
  } else {
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      problem = ErrnoText("sizing " + name, errno);
    } else if (int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
      problem =
          ErrnoText("reserving " + std::to_string(bytes) + " bytes of /dev/shm for " + name, err);
    } else {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        problem = ErrnoText("mapping " + name, errno);
      } else {
        auto* own = new (p) Segment();
        own->segment_bytes = bytes;
        own->pid = getpid();
        std::atomic_thread_fence(std::memory_order_release);
        own->magic = kMagic;
        group->segments_[rank] = own;
        group->pids_[rank] = own->pid;
      }
    }
    close(fd);
  }
  const std::string key = key_prefix + "/shm/";
  COHORT_RETURN_IF_ERROR(
      bootstrap.Put(key + std::to_string(rank), problem.empty() ? name : "!" + problem));

  // Every peer's segment, mapped.
  for (int peer = 0; peer < size && problem.empty(); ++peer) {
    if (peer == rank) continue;
    auto value = bootstrap.Get(key + std::to_string(peer), deadline);
    if (!value.ok()) return value.status().WithContext("shared memory: " + group->RankName(peer));
    if (!value->empty() && (*value)[0] == '!') {
      problem = group->RankName(peer) + ": " + value->substr(1);
      break;
    }
    const int pfd = shm_open(value->c_str(), O_RDWR, 0);
    if (pfd < 0) {
      problem = ErrnoText("opening " + group->RankName(peer) + "'s segment " + *value, errno);
      break;
    }
    struct stat st {};
    void* p = MAP_FAILED;
    if (fstat(pfd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes) {
      p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
    }
    close(pfd);
    if (p == MAP_FAILED) {
      problem = group->RankName(peer) + "'s segment " + *value + " is not a " +
                std::to_string(bytes) + "-byte segment that can be mapped";
      break;
    }
    auto* seg = static_cast<Segment*>(p);
    group->segments_[peer] = seg;
    if (seg->magic != kMagic || seg->segment_bytes != bytes) {
      problem = group->RankName(peer) + "'s segment " + *value + " has no valid header";
      break;
    }
    group->pids_[peer] = seg->pid;
  }

  // Everyone learns whether everyone succeeded, so all workers decide alike.
  const std::string ok_key = key_prefix + "/shm-ok/";
  COHORT_RETURN_IF_ERROR(
      bootstrap.Put(ok_key + std::to_string(rank), problem.empty() ? "1" : problem));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    auto value = bootstrap.Get(ok_key + std::to_string(peer), deadline);
    if (!value.ok()) return value.status().WithContext("shared memory: " + group->RankName(peer));
    if (*value != "1" && problem.empty()) problem = *value;
  }
  if (!problem.empty()) {
    spdlog::info("worker {}: no shared-memory all-reduce ({}); using the transport", rank, problem);
    return std::unique_ptr<SharedMemoryGroup>();
  }
  return group;
}

SharedMemoryGroup::~SharedMemoryGroup() {
  for (Segment* seg : segments_) {
    if (seg != nullptr) munmap(seg, segment_bytes_);
  }
}

char* SharedMemoryGroup::Slot(int worker, uint64_t round) const {
  return reinterpret_cast<char*>(segments_[worker]) + kHeaderBytes +
         (round & 1) * RoundUp(slot_bytes_, kPageBytes);
}

uint32_t SharedMemoryGroup::Post() {
  Segment* own = segments_[rank_];
  const uint32_t phase = ++phase_;
  own->phase.store(phase, std::memory_order_seq_cst);
  if (own->waiters.load(std::memory_order_seq_cst) != 0) FutexWakeAll(&own->phase);
  return phase;
}

void SharedMemoryGroup::Abort(StatusCode code) {
  aborted_ = true;
  Segment* own = segments_[rank_];
  own->aborted.store(static_cast<uint32_t>(code), std::memory_order_seq_cst);
  FutexWakeAll(&own->phase);
}

void SharedMemoryGroup::Cancel() {
  cancelled_.store(true);
  // Wakes this worker's waits, which sleep on the peers' phase words (the peers' own waiters
  // wake too, and sleep again).
  for (int j = 0; j < size_; ++j) {
    if (j != rank_) FutexWakeAll(&segments_[j]->phase);
  }
}

Status SharedMemoryGroup::WaitFor(int peer, uint32_t phase, Deadline deadline,
                                  StalledCallCheck* check) {
  Segment* seg = segments_[peer];
  if (Reached(seg->phase.load(std::memory_order_acquire), phase)) return Status::Ok();
  const auto cancelled = [&] {
    return Cancelled("shared-memory all-reduce: cancelled while waiting for " + RankName(peer));
  };
  const auto spin_until = SteadyClock::now() + SpinTime();
  for (int i = 1;; ++i) {
    if (Reached(seg->phase.load(std::memory_order_acquire), phase)) return Status::Ok();
    if (i % 64 == 0 && cancelled_.load(std::memory_order_relaxed)) return cancelled();
    if (i % 64 == 0 && SteadyClock::now() >= spin_until) break;
    if (i > kPollsBeforeYield) {
      sched_yield();
    } else {
      CpuRelax();
    }
  }
  auto last_check = SteadyClock::now();
  while (true) {
    const auto now = SteadyClock::now();
    seg->waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = seg->phase.load(std::memory_order_seq_cst);
    if (!Reached(seen, phase) && now < deadline) {
      FutexWait(&seg->phase, seen,
                std::min<std::chrono::nanoseconds>(kCheckInterval, deadline - now));
    }
    seg->waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (Reached(seg->phase.load(std::memory_order_acquire), phase)) return Status::Ok();
    if (cancelled_.load()) return cancelled();
    if (check != nullptr) COHORT_RETURN_IF_ERROR(check->Check());
    // A peer that gave up usually did so because another is gone: name the dead one if so.
    int gave_up = -1;
    for (int j = 0; j < size_ && gave_up < 0; ++j) {
      if (j != rank_ && segments_[j]->aborted.load(std::memory_order_acquire) != 0) gave_up = j;
    }
    if (gave_up >= 0 || SteadyClock::now() - last_check >= kCheckInterval) {
      last_check = SteadyClock::now();
      for (int j = 0; j < size_; ++j) {
        if (j != rank_ && !ProcessAlive(pids_[j])) {
          return Unavailable("shared-memory all-reduce: " + RankName(j) + " is gone (process " +
                             std::to_string(pids_[j]) + " exited)");
        }
      }
    }
    if (gave_up >= 0) {
      const auto code =
          static_cast<StatusCode>(segments_[gave_up]->aborted.load(std::memory_order_acquire));
      // A peer whose stall check found calls that differ told every worker of the call so, in a
      // notice that quotes the calls and may still be on its way: take it rather than report that
      // the peer gave up.
      if (check != nullptr && code == StatusCode::kInvalidArgument)
        COHORT_RETURN_IF_ERROR(check->AwaitFinding());
      // A peer that cancelled its calls has left them, as a transport reports a peer that went:
      // kCancelled is only ever this worker's own.
      return Status(code == StatusCode::kCancelled ? StatusCode::kUnavailable : code,
                    "shared-memory all-reduce: " + RankName(gave_up) +
                        " gave up on this all-reduce (" + std::string(StatusCodeName(code)) + ")");
    }
    if (SteadyClock::now() >= deadline) {
      return DeadlineExceeded("shared-memory all-reduce: " + RankName(peer) +
                              " did not reach step " + std::to_string(phase) +
                              " before the deadline");
    }
  }
}

Status SharedMemoryGroup::Allreduce(const AllreduceOptions& options, const SliceReduce& across,
                                    int avg_divisor) {
  if (cancelled_.load()) return Cancelled("shared-memory all-reduce: cancelled");
  if (aborted_)
    return Aborted("shared-memory all-reduce: an earlier call failed; rebuild the communicator");
  if (size_ == 1 && !across) return Status::Ok();
  const size_t es = DataTypeSize(options.type);
  const size_t slot_elems = slot_bytes_ / es;
  auto* data = static_cast<char*>(options.data);
  // An empty call goes through one empty slot: there too the workers compare their calls.
  size_t done = 0;
  do {
    const size_t n = std::min(slot_elems, options.count - done);
    Status s = AllreduceSlot(data + done * es, n, options, across, avg_divisor);
    if (!s.ok()) {
      Abort(s.code());
      return s;
    }
    done += n;
  } while (done < options.count);
  return Status::Ok();
}

std::string SharedMemoryGroup::RankName(int r) const { return WorkerName(JobRank(r)); }

Status SharedMemoryGroup::Disagreement(const AgreementCall differ[2],
                                       const AllreduceOptions& options) const {
  const HistoryClauses h =
      DescribeHistories(SameArguments(differ[0], differ[1]), options.history.last);
  return AllreduceDisagreement("shared-memory all-reduce", RankName(differ[0].rank),
                               DescribeAllreduceCall(differ[0]) + h.theirs,
                               DescribeAllreduceCall(differ[1]) + h.mine, h.also);
}

Status SharedMemoryGroup::OutOfStep(const AgreementCall& peer_call, uint32_t theirs, uint32_t mine,
                                    const AllreduceOptions& options) {
  if (options.stall_check != nullptr)
    COHORT_RETURN_IF_ERROR(options.stall_check->Met(theirs, peer_call));
  return InvalidArgument("shared-memory all-reduce: " + WorkerName(peer_call.rank) +
                         " is in its call #" + std::to_string(theirs) +
                         ", this worker in its call #" + std::to_string(mine) +
                         " (every worker must make the same collective calls, in the same order: "
                         "an earlier call ended for one of them without the other)");
}

// Elements first..first+len of slot `round`, summed over the workers in rank order into the
// caller's buffer `data` (which holds this worker's own contribution, staged already), each
// worker's part as soon as it has posted `copied`.
Status SharedMemoryGroup::SumOverWorkers(char* data, size_t first, size_t len, uint64_t round,
                                         uint32_t copied, const AllreduceOptions& options,
                                         AgreementCall* differ) {
  const size_t at = first * DataTypeSize(options.type);
  const Segment::Call& mine = segments_[rank_]->call[round % 2];
  auto as_agreement = [](const Segment::Call& c, int worker) {
    return AgreementCall{.count = c.count,
                         .type = static_cast<uint8_t>(c.type),
                         .op = static_cast<uint8_t>(c.op),
                         .rank = worker,
                         .history = c.history};
  };
  for (int j = 0; j < size_; ++j) {
    if (j != rank_) {
      COHORT_RETURN_IF_ERROR(WaitFor(j, copied, options.deadline, options.stall_check));
      const Segment::Call theirs = segments_[j]->call[round % 2];
      if (theirs.seq != mine.seq)
        return OutOfStep(as_agreement(theirs, JobRank(j)), theirs.seq, mine.seq, options);
      const AgreementCall found[2] = {as_agreement(theirs, j), as_agreement(mine, rank_)};
      if (!SameCall(found[0], found[1])) {
        if (differ == nullptr) return Disagreement(found, options);
        // Reading on is safe (the slice lies within every slot) and its sum goes unused.
        if (differ[0].rank < 0) {
          differ[0] = found[0];
          differ[1] = found[1];
        }
      }
    }
    const char* in = Slot(j, round) + at;
    if (j == 0) {
      if (rank_ != 0) std::memcpy(data + at, in, len * DataTypeSize(options.type));
    } else {
      ReduceInto(options.type, options.op, data + at, in, len);
    }
  }
  return Status::Ok();
}

// One slot: `count` elements at `data`. Slots alternate. Every read of a peer's slot k happens
// before this worker's first post of slot k + 1, and a peer fills slot k + 2 only after seeing
// every worker's posts of slot k + 1: so nobody overwrites what a peer may still read. Workers
// post the same number of phases per slot (the kind of slot depends only on its size), so phase
// numbers agree.
Status SharedMemoryGroup::AllreduceSlot(char* data, size_t count, const AllreduceOptions& options,
                                        const SliceReduce& across, int avg_divisor) {
  const uint64_t round = round_++;
  const size_t es = DataTypeSize(options.type);
  char* mine = Slot(rank_, round);
  segments_[rank_]->call[round % 2] = {options.count, static_cast<uint32_t>(options.type),
                                       static_cast<uint32_t>(options.op), options.seq,
                                       options.history.digest};
  std::memcpy(mine, data, count * es);
  const uint32_t copied = Post();

  if (!across && count * es <= kSharedMemorySumAllMaxBytes) {
    // Small: every worker sums the whole slot itself. One synchronisation.
    COHORT_RETURN_IF_ERROR(SumOverWorkers(data, 0, count, round, copied, options));
    if (options.op == ReduceOp::kAvg) ScaleForAverage(options.type, data, count, size_);
    return Status::Ok();
  }

  // This worker's slice, summed, then published in this worker's slot.
  const std::vector<size_t> offset = BlockOffsets(count, size_);
  const size_t lo = offset[rank_] * es;
  const size_t len = offset[rank_ + 1] - offset[rank_];
  AgreementCall differ[2];
  COHORT_RETURN_IF_ERROR(
      SumOverWorkers(data, offset[rank_], len, round, copied, options, across ? differ : nullptr));
  if (across) {
    const bool found = differ[0].rank >= 0;
    COHORT_RETURN_IF_ERROR(across(data + lo, len, found ? differ : nullptr));
    if (found) return Disagreement(differ, options);
  }
  if (options.op == ReduceOp::kAvg)
    ScaleForAverage(options.type, data + lo, len, across ? avg_divisor : size_);
  std::memcpy(mine + lo, data + lo, len * es);
  const uint32_t summed = Post();

  // The other slices' sums, starting with the next worker's so that workers read different
  // segments at once.
  for (int d = 1; d < size_; ++d) {
    const int j = (rank_ + d) % size_;
    COHORT_RETURN_IF_ERROR(WaitFor(j, summed, options.deadline, options.stall_check));
    const size_t at = offset[j] * es;
    std::memcpy(data + at, Slot(j, round) + at, (offset[j + 1] - offset[j]) * es);
  }
  return Status::Ok();
}

}  // namespace cohort::collective
