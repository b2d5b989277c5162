// FlightRecorder: a fixed-size ring of the collective operations this process ran, kept in a small
// shared-memory file that another process (the agent) reads while this one runs, so that
// a job whose ranks are alive but stuck can be told apart from one that is slow, and the stuck rank
// and operation named (issue 18).
//
// Writers: every collective call of a Communicator (and the parameter server's pushes and pulls)
// calls Begin when it starts and End when it returns. Readers (FlightRecorderReader in this
// process, FlightRecorderFileReader in another) take a Snapshot: the recent entries, and per
// communicator the last completed sequence number and the operation in progress with the time spent
// in it.
//
// Where it lives (FlightRecorder::ForProcess, the recorder the Communicator uses): environment
// variable COHORT_FLIGHT_RECORDER, set by the agent to a path of its choosing (a file in the
// replica's attempt directory): the process creates (or truncates) the file and maps it shared.
// A file set up by this very process (same pid and start time: another copy of this library in
// it) is joined. A file whose header names another live process is never truncated (that process
// has it mapped: truncating it would fault its next write): where several processes inherit one
// path (torchrun's workers inside one replica), the first takes it and each other the first of
// "<path>.1", "<path>.2", ... (up to kFlightRecorderMaxSiblings) no live process holds; the agent
// reads them all, and the replica is where its slowest rank is (agent/progress.h).
// When the process exits normally, its recorder says so (FlightRecorderHeader::exited): the agent
// then takes its rank for finished rather than stuck, whatever its replica does after (torchrun
// noticing its ranks' end up to its monitor interval later, a script exporting the model).
// Unset or empty: the same ring in process memory only. "off": nothing is recorded (the overhead
// baseline of bench/). A file that cannot be created is logged once and the ring kept in memory.
//
// Layout (FlightRecorderHeader, FlightRecorderSlot below; little-endian, this host's only): a
// 128-byte header, then `capacity` (a power of two) slots of 64 bytes. The header's `magic` is
// written last (release), so a reader that sees it sees the rest of the header. Entry i (the i-th
// Begin of the process, from 0) lives in slot i % capacity. Each slot carries a seqlock version:
//   0          never written
//   4i + 1     Begin of entry i is writing          4i + 2   entry i begun (outcome kRunning)
//   4i + 3     End of entry i is writing            4i + 4   entry i ended (kOk or kFailed)
// A reader loads the version (acquire), copies the payload, fences (acquire) and loads the version
// again: equal and even means the copy is whole; versions only grow, so a copy never passes for
// another write's. Entry i's index is (version - 1) / 4: a slot that holds an older or newer
// entry than the one asked for is told apart.
//
// Hot path: Begin is one fetch_add on the header's counter, one CAS and eight relaxed stores; End
// one CAS and eight stores. No allocation, no lock, no system call (the clock is the vDSO's).
// Several threads may write (each Communicator is one writer, point-to-point requests and the
// parameter server's requests complete on other threads); a slot is only rewritten by the entry
// capacity later, which gives up (End is dropped) when it finds its slot taken.
//
// Times are CLOCK_MONOTONIC nanoseconds (std::chrono::steady_clock on Linux): the same clock for
// every process of the host, so the agent measures "time in the current op" against its own. The
// header's anchor pairs one monotonic reading with the wall clock (Unix ns) for showing times.
//
// Thread safety: Begin/End/RegisterCommunicator from any thread. FlightRecorderReader::Snapshot
// (this process) and FlightRecorderFileReader::Snapshot (any process) from any thread, concurrently
// with writers; they never block them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace cohort {

// Environment variable naming the recorder's file (see above), and its value that turns it off.
inline constexpr char kFlightRecorderEnv[] = "COHORT_FLIGHT_RECORDER";
inline constexpr char kFlightRecorderOff[] = "off";
// How many "<path>.<k>" files ForProcess tries when live processes hold the path and those before.
inline constexpr int kFlightRecorderMaxSiblings = 64;
// Slots of the process recorder: at the rate of small all-reduces, the last second or so.
inline constexpr uint32_t kFlightRecorderDefaultCapacity = 1024;
// The most slots a recorder may have (4 MiB of them): a reader copies them at every snapshot.
inline constexpr uint32_t kFlightRecorderMaxCapacity = 1u << 16;

// What an entry records. Values are stored in the file: stable, append only.
enum class FlightOp : uint8_t {
  kNone = 0,
  kAllreduce = 1,
  kBroadcast = 2,
  kAllgather = 3,
  kReduceScatter = 4,
  kReduce = 5,
  kGather = 6,
  kScatter = 7,
  kAlltoall = 8,
  kAlltoallV = 9,
  kBarrier = 10,
  kSend = 11,
  kRecv = 12,
  kPsPush = 13,
  kPsPull = 14,
};
// "allreduce", "broadcast", "allgather", "reduce-scatter", "reduce", "gather", "scatter",
// "alltoall", "alltoallv", "barrier", "send", "recv", "ps-push", "ps-pull"; "unknown" otherwise.
std::string_view FlightOpName(FlightOp op);
// The inverse of FlightOpName; kNone for an unknown name.
FlightOp ParseFlightOp(std::string_view name);

// The all-reduce algorithm that ran, with collective::Algorithm's values (collective/types.h;
// communicator.cc asserts they agree). 0: none (other operations).
// "reduction-server", "ring", "halving-doubling", "shared-memory", "hierarchical",
// "recursive-doubling"; "" for 0.
std::string_view FlightAlgorithmName(uint8_t algorithm);
// The element type, with collective::DataType's values + 1 (0: none, e.g. a barrier).
// "f32", "f64", "f16", "bf16", "i32", "i64"; "" for 0.
std::string_view FlightDataTypeName(uint8_t dtype);

enum class FlightOutcome : uint8_t { kNone = 0, kRunning = 1, kOk = 2, kFailed = 3 };
// "running", "ok", "failed"; "none" for an empty slot.
std::string_view FlightOutcomeName(FlightOutcome outcome);

// One entry's payload: what Begin writes and End completes. 56 bytes, copied as seven words.
struct FlightRecord {
  // The operation's sequence number in its communicator: the same on every rank for one call
  // (Communicator's call counter; point-to-point: the user's tag; parameter server: request id).
  uint32_t op_seq = 0;
  // Which communicator of this process (RegisterCommunicator); ranks number theirs alike when they
  // build them in the same order.
  uint32_t comm_id = 0;
  uint64_t bytes = 0;      // this rank's payload (send side; all-reduce: the buffer)
  int64_t enqueue_ns = 0;  // when the caller asked (torch backend: queued); else == start_ns
  int64_t start_ns = 0;    // when the call started running
  int64_t end_ns = 0;      // when it returned; 0 while running
  int32_t peer = -1;       // root of a rooted collective, peer of point-to-point or PS server;
                           // -1: the whole group
  int32_t group_size = 0;  // ranks taking part (workers of the communicator; PS: servers)
  FlightOp op = FlightOp::kNone;
  uint8_t algorithm = 0;  // FlightAlgorithmName
  uint8_t dtype = 0;      // FlightDataTypeName
  FlightOutcome outcome = FlightOutcome::kNone;
  uint8_t status_code = 0;  // StatusCode of a failed call
  uint8_t reserved[3] = {};
};
static_assert(sizeof(FlightRecord) == 56, "FlightRecord is part of the file layout");

// The file's layout. Plain integers, accessed through std::atomic_ref where they change.
struct FlightRecorderHeader {
  static constexpr uint64_t kMagic = 0x31524643'54524f43;  // "CORTCFR1" read as little-endian
  static constexpr uint32_t kVersion = 1;
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;        // offset of slot 0 (sizeof(FlightRecorderHeader))
  uint32_t slot_bytes;          // sizeof(FlightRecorderSlot)
  uint32_t capacity;            // slots; a power of two
  int32_t rank;                 // RANK of the process (-1: unknown)
  int32_t world_size;           // WORLD_SIZE (-1: unknown)
  int32_t pid;                  // of the process that set it up, in that process's PID namespace
  uint32_t exited;              // 1 once that process has exited normally (atomic; MarkExited)
  int64_t anchor_monotonic_ns;  // one reading of CLOCK_MONOTONIC ...
  int64_t anchor_wall_ns;       // ... and of the wall clock (Unix epoch) at the same moment
  uint64_t next_entry;          // entries begun so far (atomic; the next Begin's index)
  uint32_t next_comm_id;        // communicators registered so far (atomic)
  uint32_t reserved0;
  // When the process that set it up started (starttime of /proc/<pid>/stat, clock ticks since
  // boot; 0: unknown, where /proc cannot be read). With `pid` it tells that process from a later
  // one given the same pid: pids repeat in each replica's PID namespace, so a restarted attempt's
  // process may have its predecessor's.
  uint64_t start_ticks;
  uint8_t reserved[48];
};
static_assert(sizeof(FlightRecorderHeader) == 128, "FlightRecorderHeader is the file layout");

struct FlightRecorderSlot {
  uint64_t version;   // seqlock (see above)
  uint64_t words[7];  // a FlightRecord
};
static_assert(sizeof(FlightRecorderSlot) == 64, "FlightRecorderSlot is the file layout");

// Bytes of a recorder file with `capacity` slots.
size_t FlightRecorderFileBytes(uint32_t capacity);

// CLOCK_MONOTONIC in nanoseconds: the recorder's clock.
int64_t FlightClockNs();
// The wall clock (Unix epoch) in nanoseconds: what a header's anchor_wall_ns holds.
int64_t FlightWallClockNs();
// A steady_clock reading on the recorder's clock (libstdc++'s steady_clock reads CLOCK_MONOTONIC),
// so a caller that reads the clock anyway (e.g. for its deadline) can hand Begin its start time
// instead of Begin reading the clock again.
inline int64_t FlightClockNs(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

class FlightRecorder {
 public:
  // A ring of `capacity` slots (a power of two, 2 to kFlightRecorderMaxCapacity) in a file at
  // `path`, created or emptied and mapped shared, with `rank` and `world_size` in its header. A
  // file this process set up already (another copy of this library in the process: same pid and
  // start time) is shared, not emptied; one another live process set up is left alone:
  // kAlreadyExists.
  static StatusOr<std::unique_ptr<FlightRecorder>> CreateFile(const std::string& path,
                                                              uint32_t capacity, int rank,
                                                              int world_size);
  // The same ring in this process's memory only.
  static StatusOr<std::unique_ptr<FlightRecorder>> CreateInMemory(uint32_t capacity, int rank,
                                                                  int world_size);
  // The process's recorder, made on first use from COHORT_FLIGHT_RECORDER, RANK and WORLD_SIZE
  // (see above); nullptr when recording is off. Lives until the process exits.
  static FlightRecorder* ForProcess();

  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // A new communicator id (0, 1, ...).
  uint32_t RegisterCommunicator();
  // Says in the header that the process that set the recorder up has exited (a reader's
  // FlightRecorderSnapshot::exited); a no-op in any other process (a forked child sharing the
  // mapping). ForProcess's file recorder calls it at exit().
  void MarkExited();

  // Records the start of an operation (record.outcome becomes kRunning; start_ns and enqueue_ns
  // are filled from the clock when 0) and returns its entry index for End. `record` keeps what
  // was written; End completes it.
  uint64_t Begin(FlightRecord& record);
  // Records that entry `index` (from Begin, with the same `record`) ended with `status`.
  void End(uint64_t index, FlightRecord& record, const Status& status);

  const FlightRecorderHeader& header() const { return *header_; }
  const std::string& path() const { return path_; }  // "" in memory

 private:
  FlightRecorder() = default;
  // Points header_ and slots_ into the mapping; Initialise also writes a fresh header.
  void Attach(uint32_t capacity);
  void Initialise(uint32_t capacity, int rank, int world_size);

  FlightRecorderHeader* header_ = nullptr;
  FlightRecorderSlot* slots_ = nullptr;
  uint64_t mask_ = 0;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  std::string path_;
};

// One operation's entry from Begin to End, for callers whose operation ends elsewhere (a request
// waited on later) or on several return paths. Begins on construction when `recorder` is set;
// Finish ends it once; destroyed unfinished (a request never waited for), it ends as kCancelled.
// Movable; not thread-safe (one owner at a time).
class FlightRecording {
 public:
  FlightRecording() = default;
  FlightRecording(FlightRecorder* recorder, const FlightRecord& record)
      : recorder_(recorder), record_(record) {
    if (recorder_ != nullptr) index_ = recorder_->Begin(record_);
  }
  FlightRecording(FlightRecording&& other) noexcept { *this = std::move(other); }
  FlightRecording& operator=(FlightRecording&& other) noexcept {
    if (this != &other) {
      Abandon();
      recorder_ = other.recorder_;
      index_ = other.index_;
      record_ = other.record_;
      other.recorder_ = nullptr;
    }
    return *this;
  }
  ~FlightRecording() { Abandon(); }

  void Finish(const Status& status) {
    if (recorder_ == nullptr) return;
    recorder_->End(index_, record_, status);
    recorder_ = nullptr;
  }
  const FlightRecord& record() const { return record_; }

 private:
  void Abandon() {
    if (recorder_ != nullptr) Finish(Cancelled("never waited for"));
  }

  FlightRecorder* recorder_ = nullptr;
  uint64_t index_ = 0;
  FlightRecord record_;
};

// A consistent copy of one entry with its index.
struct FlightEntry {
  uint64_t index = 0;
  FlightRecord record;
};

// What a reader sees at one moment.
struct FlightRecorderSnapshot {
  int32_t rank = -1;
  int32_t world_size = -1;
  int32_t pid = 0;
  // Its writer has exited normally (exit(), a return from main): a rank that is done, not one
  // that is stuck. A process killed, or ended by _exit, never says so.
  bool exited = false;
  int64_t anchor_monotonic_ns = 0;
  int64_t anchor_wall_ns = 0;
  int64_t taken_ns = 0;  // FlightClockNs() when the snapshot was taken
  uint64_t entries = 0;  // entries begun in the process's life
  // The most recent entries that could be read whole, oldest first (a slot being rewritten at that
  // moment is left out).
  std::vector<FlightEntry> recent;
  // Per communicator seen in `recent`, by comm_id.
  struct Communicator {
    uint32_t comm_id = 0;
    // The highest op_seq of a collective (not point-to-point) that ended, if any did in `recent`.
    std::optional<uint32_t> last_completed_seq;
    // The operation running now, if any: a Communicator runs one collective at a time; of requests
    // that overlap (the parameter server's), the oldest still running. And how long it has run as
    // of taken_ns.
    std::optional<FlightEntry> current;
    int64_t current_elapsed_ns = 0;
  };
  std::vector<Communicator> communicators;
};

// Reads a recorder of this process in place (Attach): the recorder must outlive the reader.
class FlightRecorderReader {
 public:
  static std::unique_ptr<FlightRecorderReader> Attach(const FlightRecorder& recorder);

  FlightRecorderReader(const FlightRecorderReader&) = delete;
  FlightRecorderReader& operator=(const FlightRecorderReader&) = delete;

  // The last `max_entries` entries (at most the capacity) and each communicator's progress.
  FlightRecorderSnapshot Snapshot(size_t max_entries = SIZE_MAX) const;
  // Entry `index` when its slot holds it whole now.
  std::optional<FlightEntry> Read(uint64_t index) const;

  uint32_t capacity() const { return capacity_; }

 private:
  FlightRecorderReader() = default;

  const FlightRecorderHeader* header_ = nullptr;
  const FlightRecorderSlot* slots_ = nullptr;
  uint32_t capacity_ = 0;
};

// Reads a recorder file that another process writes (the agent reads its replicas'; a tool reads
// one left behind). The file is never mapped: its writer may shrink or rewrite it at any moment (a
// process that exited leaves its path to a new one, which empties it; a replica's own code may
// truncate it), and reading a mapping past a file's new end faults the reader (SIGBUS), which would
// take the whole agent down. Each Snapshot reads the file anew with pread instead: the header, then
// every slot three times (the versions before, the payloads, the versions after: the seqlock's two
// version loads with the copy between them), so an entry is kept only when its slot's version was
// the same, even, and its own before and after the copy. A file that changed under the reader is an
// error of that Snapshot, never a fault; the next one reads it as it is then.
//
// Thread safety: Snapshot from any thread. The writer's file is untrusted: its sizes are checked
// (capacity at most kFlightRecorderMaxCapacity) and its entries are copied as they are.
class FlightRecorderFileReader {
 public:
  // Opens `path`: a regular file, not through a symbolic link (common/file_util.h; the file is the
  // replica's). kNotFound when it does not exist; kInvalidArgument when it is a link or no regular
  // file; kUnavailable when its writer has not finished its header yet (try again); kDataLoss when
  // it is not a recorder file of this version (bad magic, version, sizes or capacity, or a file
  // shorter than its capacity says).
  static StatusOr<std::unique_ptr<FlightRecorderFileReader>> Open(const std::string& path);

  ~FlightRecorderFileReader();
  FlightRecorderFileReader(const FlightRecorderFileReader&) = delete;
  FlightRecorderFileReader& operator=(const FlightRecorderFileReader&) = delete;

  // As FlightRecorderReader::Snapshot, read from the file now. kUnavailable while a new writer
  // sets the file up anew; kDataLoss when it no longer holds a recorder of the capacity it was
  // opened with (shrunk, or rewritten otherwise); errno's status when a read fails.
  StatusOr<FlightRecorderSnapshot> Snapshot(size_t max_entries = SIZE_MAX) const;

  uint32_t capacity() const { return capacity_; }
  const std::string& path() const { return path_; }

 private:
  FlightRecorderFileReader(int fd, std::string path, uint32_t capacity)
      : fd_(fd), path_(std::move(path)), capacity_(capacity) {}

  int fd_;
  std::string path_;
  uint32_t capacity_;
};

// "allreduce #1843 (64.0 MiB f32, ring)", "broadcast #7 (4.0 KiB i64, root 0)", "ps-pull #3
// (1.0 MiB f32, server 1)": the operation, for errors and events.
std::string DescribeFlightOp(const FlightRecord& record);
// DescribeFlightOp and its time: "... running for 120300.0 ms" (as of now_ns), "... ok in 2.1 ms",
// "... failed after 60000.2 ms".
std::string DescribeFlightEntry(const FlightEntry& entry, int64_t now_ns);

}  // namespace cohort
