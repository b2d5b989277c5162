#include "common/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "common/enum_names.h"
#include "common/env.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/process_start.h"

namespace cohort {
namespace {

constexpr EnumName<FlightOp> kFlightOpNames[] = {
    {FlightOp::kAllreduce, "allreduce"}, {FlightOp::kBroadcast, "broadcast"},
    {FlightOp::kAllgather, "allgather"}, {FlightOp::kReduceScatter, "reduce-scatter"},
    {FlightOp::kReduce, "reduce"},       {FlightOp::kGather, "gather"},
    {FlightOp::kScatter, "scatter"},     {FlightOp::kAlltoall, "alltoall"},
    {FlightOp::kAlltoallV, "alltoallv"}, {FlightOp::kBarrier, "barrier"},
    {FlightOp::kSend, "send"},           {FlightOp::kRecv, "recv"},
    {FlightOp::kPsPush, "ps-push"},      {FlightOp::kPsPull, "ps-pull"}};
constexpr EnumName<FlightOutcome> kFlightOutcomeNames[] = {{FlightOutcome::kRunning, "running"},
                                                           {FlightOutcome::kOk, "ok"},
                                                           {FlightOutcome::kFailed, "failed"}};

constexpr int kReadAttempts = 8;

template <typename T>
std::atomic_ref<T> Atomic(const T& value) {
  return std::atomic_ref<T>(const_cast<T&>(value));
}

bool IsPowerOfTwo(uint64_t v) { return v >= 2 && (v & (v - 1)) == 0; }
bool IsCapacity(uint64_t v) { return IsPowerOfTwo(v) && v <= kFlightRecorderMaxCapacity; }
constexpr char kCapacityRule[] = "capacity must be a power of two from 2 to 65536";
static_assert(kFlightRecorderMaxCapacity == 65536, "kCapacityRule says it");

void StorePayload(FlightRecorderSlot& slot, const FlightRecord& record) {
  uint64_t words[7];
  std::memcpy(words, &record, sizeof(words));
  for (int w = 0; w < 7; ++w) Atomic(slot.words[w]).store(words[w], std::memory_order_relaxed);
}

// Moves `slot` from `from` to `to` (odd: a write begins) and fences so the payload stores that
// follow are not seen before it.
bool Claim(FlightRecorderSlot& slot, uint64_t from, uint64_t to) {
  if (!Atomic(slot.version).compare_exchange_strong(from, to, std::memory_order_relaxed)) {
    return false;
  }
  std::atomic_thread_fence(std::memory_order_release);
  return true;
}

// The file's name in messages.
std::string Where(const std::string& path) { return "flight recorder " + path; }

}  // namespace

std::string_view FlightOpName(FlightOp op) { return NameIn(kFlightOpNames, op, "unknown"); }

FlightOp ParseFlightOp(std::string_view name) {
  return ValueIn(kFlightOpNames, name).value_or(FlightOp::kNone);
}

std::string_view FlightAlgorithmName(uint8_t algorithm) {
  static constexpr std::string_view kNames[] = {"",
                                                "reduction-server",
                                                "ring",
                                                "halving-doubling",
                                                "shared-memory",
                                                "hierarchical",
                                                "recursive-doubling"};
  return algorithm < std::size(kNames) ? kNames[algorithm] : "";
}

std::string_view FlightDataTypeName(uint8_t dtype) {
  static constexpr std::string_view kNames[] = {"", "f32", "f64", "f16", "bf16", "i32", "i64"};
  return dtype < std::size(kNames) ? kNames[dtype] : "";
}

std::string_view FlightOutcomeName(FlightOutcome outcome) {
  return NameIn(kFlightOutcomeNames, outcome, "none");
}

size_t FlightRecorderFileBytes(uint32_t capacity) {
  return sizeof(FlightRecorderHeader) + size_t{capacity} * sizeof(FlightRecorderSlot);
}

int64_t FlightClockNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t FlightWallClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- FlightRecorder ----

StatusOr<std::unique_ptr<FlightRecorder>> FlightRecorder::CreateFile(const std::string& path,
                                                                     uint32_t capacity, int rank,
                                                                     int world_size) {
  if (!IsCapacity(capacity)) return InvalidArgument(Where(path) + ": " + kCapacityRule);
  const size_t bytes = FlightRecorderFileBytes(capacity);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("creating " + Where(path), errno);
  // The lock orders two copies of this library in one process (the torch extension and the C
  // API's shared library each link the collectives): the second joins the ring the first set up
  // rather than wiping it. A file left by a process that has exited is started afresh; one of a
  // live process (a sibling given the same path) is never touched.
  Status status;
  void* p = MAP_FAILED;
  bool fresh = true;
  if (::flock(fd, LOCK_EX) != 0) {
    status = ErrnoStatus("locking " + Where(path), errno);
  } else {
    struct stat st;
    FlightRecorderHeader existing{};
    if (::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes &&
        ::pread(fd, &existing, sizeof(existing), 0) == sizeof(existing) &&
        existing.magic == FlightRecorderHeader::kMagic &&
        existing.version == FlightRecorderHeader::kVersion && existing.capacity == capacity &&
        existing.pid == static_cast<int32_t>(::getpid()) && existing.exited == 0 &&
        existing.start_ticks == ProcessStartTicks()) {
      fresh = false;
    } else if (existing.magic == FlightRecorderHeader::kMagic && existing.pid > 0 &&
               existing.pid != static_cast<int32_t>(::getpid()) && existing.exited == 0 &&
               (::kill(existing.pid, 0) == 0 || errno == EPERM)) {
      status = AlreadyExists(Where(path) + " is the recorder of live process " +
                             std::to_string(existing.pid));
    } else if (::ftruncate(fd, 0) != 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      status = ErrnoStatus("sizing " + Where(path), errno);
    }
    if (status.ok()) {
      p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) status = ErrnoStatus("mapping " + Where(path), errno);
    }
  }
  std::unique_ptr<FlightRecorder> r;
  if (status.ok()) {
    r.reset(new FlightRecorder());
    r->mapping_ = p;
    r->mapping_bytes_ = bytes;
    r->path_ = path;
    if (fresh) {
      r->Initialise(capacity, rank, world_size);
    } else {
      r->Attach(capacity);
    }
  }
  // Unlocked explicitly: the mapping keeps the open file, and with it a lock, alive past close.
  (void)::flock(fd, LOCK_UN);
  ::close(fd);
  if (!status.ok()) return status;
  return r;
}

StatusOr<std::unique_ptr<FlightRecorder>> FlightRecorder::CreateInMemory(uint32_t capacity,
                                                                         int rank, int world_size) {
  if (!IsCapacity(capacity))
    return InvalidArgument(std::string("flight recorder: ") + kCapacityRule);
  const size_t bytes = FlightRecorderFileBytes(capacity);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return ErrnoStatus("flight recorder: mapping memory", errno);
  std::unique_ptr<FlightRecorder> r(new FlightRecorder());
  r->mapping_ = p;
  r->mapping_bytes_ = bytes;
  r->Initialise(capacity, rank, world_size);
  return r;
}

void FlightRecorder::Attach(uint32_t capacity) {
  header_ = static_cast<FlightRecorderHeader*>(mapping_);
  slots_ = reinterpret_cast<FlightRecorderSlot*>(static_cast<char*>(mapping_) +
                                                 sizeof(FlightRecorderHeader));
  mask_ = capacity - 1;
}

void FlightRecorder::Initialise(uint32_t capacity, int rank, int world_size) {
  Attach(capacity);
  // A fresh mapping (ftruncate of an emptied file, or anonymous memory) reads as zeros: every slot
  // is "never written". Writing those zeros now takes each page's first-write fault here, once,
  // rather than on the hot path of the first `capacity` operations.
  std::memset(slots_, 0, size_t{capacity} * sizeof(FlightRecorderSlot));
  header_->version = FlightRecorderHeader::kVersion;
  header_->header_bytes = sizeof(FlightRecorderHeader);
  header_->slot_bytes = sizeof(FlightRecorderSlot);
  header_->capacity = capacity;
  header_->rank = rank;
  header_->world_size = world_size;
  header_->pid = static_cast<int32_t>(::getpid());
  header_->start_ticks = ProcessStartTicks();
  header_->exited = 0;
  header_->anchor_monotonic_ns = FlightClockNs();
  header_->anchor_wall_ns = FlightWallClockNs();
  Atomic(header_->magic).store(FlightRecorderHeader::kMagic, std::memory_order_release);
}

FlightRecorder::~FlightRecorder() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
}

FlightRecorder* FlightRecorder::ForProcess() {
  static FlightRecorder* const recorder = []() -> FlightRecorder* {
    const char* where = std::getenv(kFlightRecorderEnv);
    const std::string path = where != nullptr ? where : "";
    if (path == kFlightRecorderOff) return nullptr;
    // The header's rank and size are for the reader's messages: unreadable ones are unknown.
    auto rank_or = IntFromEnvironment("RANK", -1);
    auto world_or = IntFromEnvironment("WORLD_SIZE", -1);
    const int rank = rank_or.ok() ? *rank_or : -1;
    const int world = world_or.ok() ? *world_or : -1;
    if (!path.empty()) {
      // Several processes given one path (torchrun's workers in one replica): the first takes it,
      // each other the first of "<path>.1", "<path>.2", ... no live process holds.
      auto file = FlightRecorder::CreateFile(path, kFlightRecorderDefaultCapacity, rank, world);
      for (int k = 1;
           k <= kFlightRecorderMaxSiblings && file.status().code() == StatusCode::kAlreadyExists;
           ++k) {
        file = FlightRecorder::CreateFile(path + "." + std::to_string(k),
                                          kFlightRecorderDefaultCapacity, rank, world);
      }
      if (file.ok()) {
        FlightRecorder* recorder = file->release();
        static FlightRecorder* exiting = recorder;
        std::atexit([] { exiting->MarkExited(); });
        return recorder;
      }
      spdlog::warn(
          "{}={}: {}; the flight recorder stays in this process's memory, where the "
          "agent cannot read it",
          kFlightRecorderEnv, path, file.status().ToString());
    }
    auto memory = FlightRecorder::CreateInMemory(kFlightRecorderDefaultCapacity, rank, world);
    if (memory.ok()) return memory->release();
    spdlog::warn("flight recorder off: {}", memory.status().ToString());
    return nullptr;
  }();
  return recorder;
}

void FlightRecorder::MarkExited() {
  if (header_->pid != static_cast<int32_t>(::getpid())) return;  // a forked child's exit
  Atomic(header_->exited).store(1, std::memory_order_release);
}

uint32_t FlightRecorder::RegisterCommunicator() {
  return Atomic(header_->next_comm_id).fetch_add(1, std::memory_order_relaxed);
}

uint64_t FlightRecorder::Begin(FlightRecord& record) {
  if (record.start_ns == 0) record.start_ns = FlightClockNs();
  if (record.enqueue_ns == 0) record.enqueue_ns = record.start_ns;
  record.end_ns = 0;
  record.outcome = FlightOutcome::kRunning;
  const uint64_t index = Atomic(header_->next_entry).fetch_add(1, std::memory_order_relaxed);
  FlightRecorderSlot& slot = slots_[index & mask_];
  // The slot holds an older entry (or none), stable unless a writer of entry index - capacity is
  // still in it: then wait for that write, a few stores long. A newer entry there means this one
  // was overtaken before it began: drop it.
  for (;;) {
    uint64_t v = Atomic(slot.version).load(std::memory_order_relaxed);
    if (v >= 4 * index + 1) return index;
    if (v % 2 == 1) continue;
    if (Claim(slot, v, 4 * index + 1)) break;
  }
  StorePayload(slot, record);
  Atomic(slot.version).store(4 * index + 2, std::memory_order_release);
  return index;
}

void FlightRecorder::End(uint64_t index, FlightRecord& record, const Status& status) {
  record.end_ns = FlightClockNs();
  record.outcome = status.ok() ? FlightOutcome::kOk : FlightOutcome::kFailed;
  record.status_code = static_cast<uint8_t>(status.code());
  FlightRecorderSlot& slot = slots_[index & mask_];
  if (!Claim(slot, 4 * index + 2, 4 * index + 3)) return;  // overwritten by a later entry
  StorePayload(slot, record);
  Atomic(slot.version).store(4 * index + 4, std::memory_order_release);
}

// ---- FlightRecorderReader ----

namespace {

// The snapshot of a recorder whose header says `h` (entries: its next_entry), with entry i read by
// read(i) (std::optional<FlightEntry>: none when its slot does not hold it whole).
template <typename ReadEntry>
FlightRecorderSnapshot Assemble(const FlightRecorderHeader& h, uint64_t entries, uint32_t capacity,
                                size_t max_entries, ReadEntry read) {
  FlightRecorderSnapshot s;
  s.rank = h.rank;
  s.world_size = h.world_size;
  s.pid = h.pid;
  s.exited = Atomic(h.exited).load(std::memory_order_acquire) != 0;
  s.anchor_monotonic_ns = h.anchor_monotonic_ns;
  s.anchor_wall_ns = h.anchor_wall_ns;
  s.entries = entries;
  s.taken_ns = FlightClockNs();
  const uint64_t window = std::min<uint64_t>({max_entries, capacity, s.entries});
  s.recent.reserve(window);
  // Newest first: writers reuse the oldest slots first, so a reader that is lapped while it reads
  // loses the oldest entries, never the newest ones.
  for (uint64_t i = s.entries; i-- > s.entries - window;) {
    if (auto e = read(i)) s.recent.push_back(*e);
  }
  std::reverse(s.recent.begin(), s.recent.end());
  std::map<uint32_t, FlightRecorderSnapshot::Communicator> by_comm;
  for (const FlightEntry& e : s.recent) {
    const FlightRecord& r = e.record;
    if (r.op == FlightOp::kSend || r.op == FlightOp::kRecv) continue;
    auto& c = by_comm[r.comm_id];
    c.comm_id = r.comm_id;
    if (r.outcome == FlightOutcome::kRunning) {
      if (!c.current) c.current = e;  // the oldest still running
    } else if (!c.last_completed_seq || r.op_seq > *c.last_completed_seq) {
      c.last_completed_seq = r.op_seq;
    }
  }
  for (auto& [id, c] : by_comm) {
    if (c.current) c.current_elapsed_ns = s.taken_ns - c.current->record.start_ns;
    s.communicators.push_back(c);
  }
  return s;
}

// Entry `index` from one slot's version (loaded before the payload and after it) and payload.
std::optional<FlightEntry> EntryOf(uint64_t index, uint64_t before, uint64_t after,
                                   const uint64_t (&words)[7]) {
  if (before != after || before == 0 || before % 2 == 1 || (before - 1) / 4 != index) {
    return std::nullopt;  // being written, another entry, or none
  }
  FlightEntry e;
  e.index = index;
  std::memcpy(&e.record, words, sizeof(words));
  return e;
}

// Reads `bytes` at `offset` of `fd` whole; a file that ends before is kDataLoss.
Status ReadWhole(int fd, void* out, size_t bytes, off_t offset, const std::string& path) {
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n =
        ::pread(fd, static_cast<char*>(out) + got, bytes - got, offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("reading " + Where(path), errno);
    if (n == 0) {
      return DataLoss(Where(path) + " ends at " + std::to_string(offset + got) +
                      " bytes, short of " + std::to_string(offset + bytes) +
                      ": truncated while it was read");
    }
    got += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// What is wrong with a header read from `path` (a reader opened with `capacity` slots, 0: any),
// else OK.
Status CheckHeader(const FlightRecorderHeader& h, const std::string& path, uint32_t capacity) {
  if (h.magic == 0) return Unavailable(Where(path) + ": its writer has not set it up yet");
  if (h.magic != FlightRecorderHeader::kMagic)
    return DataLoss(Where(path) + ": not a recorder file");
  if (h.version != FlightRecorderHeader::kVersion) {
    return DataLoss(Where(path) + ": layout version " + std::to_string(h.version) +
                    ", this reader knows " + std::to_string(FlightRecorderHeader::kVersion));
  }
  if (h.header_bytes != sizeof(FlightRecorderHeader) ||
      h.slot_bytes != sizeof(FlightRecorderSlot)) {
    return DataLoss(Where(path) + ": header sizes do not match layout version 1");
  }
  if (!IsCapacity(h.capacity)) {
    return DataLoss(Where(path) + ": " + std::to_string(h.capacity) + " slots; " + kCapacityRule);
  }
  if (capacity != 0 && h.capacity != capacity) {
    return DataLoss(Where(path) + " now has " + std::to_string(h.capacity) + " slots, not the " +
                    std::to_string(capacity) + " it was opened with: rewritten");
  }
  return Status::Ok();
}

}  // namespace

// ---- FlightRecorderReader ----

std::unique_ptr<FlightRecorderReader> FlightRecorderReader::Attach(const FlightRecorder& recorder) {
  std::unique_ptr<FlightRecorderReader> r(new FlightRecorderReader());
  r->header_ = &recorder.header();
  r->slots_ = reinterpret_cast<const FlightRecorderSlot*>(
      reinterpret_cast<const char*>(r->header_) + sizeof(FlightRecorderHeader));
  r->capacity_ = r->header_->capacity;
  return r;
}

std::optional<FlightEntry> FlightRecorderReader::Read(uint64_t index) const {
  const FlightRecorderSlot& slot = slots_[index & (capacity_ - 1)];
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    const uint64_t before = Atomic(slot.version).load(std::memory_order_acquire);
    if (before == 0 || (before - 1) / 4 != index) return std::nullopt;  // another entry, or none
    if (before % 2 == 1) continue;                                      // being written
    uint64_t words[7];
    for (int w = 0; w < 7; ++w) words[w] = Atomic(slot.words[w]).load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t after = Atomic(slot.version).load(std::memory_order_relaxed);
    if (auto e = EntryOf(index, before, after, words)) return e;
  }
  return std::nullopt;
}

FlightRecorderSnapshot FlightRecorderReader::Snapshot(size_t max_entries) const {
  const uint64_t entries = Atomic(header_->next_entry).load(std::memory_order_acquire);
  return Assemble(*header_, entries, capacity_, max_entries,
                  [this](uint64_t i) { return Read(i); });
}

// ---- FlightRecorderFileReader ----

StatusOr<std::unique_ptr<FlightRecorderFileReader>> FlightRecorderFileReader::Open(
    const std::string& path) {
  struct stat st {};
  COHORT_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, "flight recorder", &st));
  std::unique_ptr<FlightRecorderFileReader> r(new FlightRecorderFileReader(fd, path, 0));
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes == 0) return Unavailable(Where(path) + ": its writer has not set it up yet");
  if (bytes < sizeof(FlightRecorderHeader)) {
    return DataLoss(Where(path) + ": " + std::to_string(bytes) +
                    " bytes is shorter than a recorder header");
  }
  FlightRecorderHeader h{};
  COHORT_RETURN_IF_ERROR(ReadWhole(fd, &h, sizeof(h), 0, path));
  COHORT_RETURN_IF_ERROR(CheckHeader(h, path, 0));
  if (bytes < FlightRecorderFileBytes(h.capacity)) {
    return DataLoss(Where(path) + ": " + std::to_string(bytes) + " bytes hold fewer than its " +
                    std::to_string(h.capacity) + " slots");
  }
  r->capacity_ = h.capacity;
  return r;
}

FlightRecorderFileReader::~FlightRecorderFileReader() { ::close(fd_); }

StatusOr<FlightRecorderSnapshot> FlightRecorderFileReader::Snapshot(size_t max_entries) const {
  FlightRecorderHeader h{};
  COHORT_RETURN_IF_ERROR(ReadWhole(fd_, &h, sizeof(h), 0, path_));
  COHORT_RETURN_IF_ERROR(CheckHeader(h, path_, capacity_));
  // The seqlock across system calls: each read ends before the next begins.
  const size_t bytes = size_t{capacity_} * sizeof(FlightRecorderSlot);
  const off_t at = sizeof(FlightRecorderHeader);
  std::vector<FlightRecorderSlot> before(capacity_), copy(capacity_), after(capacity_);
  COHORT_RETURN_IF_ERROR(ReadWhole(fd_, before.data(), bytes, at, path_));
  std::atomic_thread_fence(std::memory_order_acquire);
  COHORT_RETURN_IF_ERROR(ReadWhole(fd_, copy.data(), bytes, at, path_));
  std::atomic_thread_fence(std::memory_order_acquire);
  COHORT_RETURN_IF_ERROR(ReadWhole(fd_, after.data(), bytes, at, path_));
  const uint64_t mask = capacity_ - 1;
  return Assemble(h, h.next_entry, capacity_, max_entries, [&](uint64_t i) {
    const size_t slot = i & mask;
    // The copy's own version must be the one seen around it too.
    if (copy[slot].version != before[slot].version) return std::optional<FlightEntry>();
    return EntryOf(i, before[slot].version, after[slot].version, copy[slot].words);
  });
}

std::string DescribeFlightOp(const FlightRecord& r) {
  std::string out = std::string(FlightOpName(r.op)) + " #" + std::to_string(r.op_seq) + " (";
  const double b = static_cast<double>(r.bytes);
  char size[32];
  if (r.bytes >= (1u << 20)) {
    std::snprintf(size, sizeof(size), "%.1f MiB", b / (1 << 20));
  } else if (r.bytes >= 1024) {
    std::snprintf(size, sizeof(size), "%.1f KiB", b / 1024);
  } else {
    std::snprintf(size, sizeof(size), "%" PRIu64 " B", r.bytes);
  }
  out += size;
  if (!FlightDataTypeName(r.dtype).empty()) out += " " + std::string(FlightDataTypeName(r.dtype));
  if (!FlightAlgorithmName(r.algorithm).empty())
    out += ", " + std::string(FlightAlgorithmName(r.algorithm));
  if (r.peer >= 0) {
    const bool ps = r.op == FlightOp::kPsPush || r.op == FlightOp::kPsPull;
    const bool p2p = r.op == FlightOp::kSend || r.op == FlightOp::kRecv;
    out += (ps ? ", server " : p2p ? ", peer " : ", root ") + std::to_string(r.peer);
  }
  return out + ")";
}

std::string DescribeFlightEntry(const FlightEntry& entry, int64_t now_ns) {
  const FlightRecord& r = entry.record;
  const int64_t until = r.outcome == FlightOutcome::kRunning ? now_ns : r.end_ns;
  char took[48];
  std::snprintf(took, sizeof(took), " %s %.1f ms",
                r.outcome == FlightOutcome::kRunning ? "running for"
                : r.outcome == FlightOutcome::kOk    ? "ok in"
                                                     : "failed after",
                static_cast<double>(until - r.start_ns) / 1e6);
  return DescribeFlightOp(r) + took;
}

}  // namespace cohort
