// Options shared by the all-reduce algorithms (gloo style: free functions taking a Transport and
// an options struct, so new options never break callers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collective/transport/transport.h"
#include "collective/types.h"
#include "common/fnv.h"
#include "common/status.h"

namespace cohort::collective {

class StalledCallCheck;

// Pipeline unit across hosts: under the UCX eager limit (no chunk waits for a rendezvous
// handshake) and small, since filling and draining the pipeline costs about 2 x workers x chunk.
constexpr size_t kDefaultChunkBytes = size_t{128} << 10;
// Pipeline unit when every rank shares one host: one zero-copy (cma) rendezvous per piece beats
// more, smaller eager pieces that shared memory copies twice.
constexpr size_t kSameHostChunkBytes = size_t{1} << 20;

// Reduction Server across hosts: this many chunks per reducer keep the pipeline's fill and drain
// small next to the call...
constexpr int kPipelineChunksPerReducer = 64;
// ...but no chunk is cut below this size, where the cost per message outweighs what it saves.
constexpr size_t kMinPipelineChunkBytes = size_t{16} << 10;

// Reduction Server across hosts: one chunk send outstanding per worker and one result send per
// reducer (max_flows), over TCP sockets whose send buffer is this small (UCX's TCP_SNDBUF; the
// kernel doubles it). Together they make a send complete about when its bytes leave on the link,
// so each worker sends to one reducer at a time in the staggered order (reduction_server.h) and a
// reducer's switch port does not take n workers' bursts at once (TCP incast). Measured on the
// emulated cluster at 1 Gbit/s, 32 MiB (bench/RESULTS.md, "Shallow switch queues"): behind 250 KB
// switch queues the Reduction Server ran at 37-57% of the link without them and 80-92% with them,
// and as fast as before behind 2.5 MB queues; neither alone helped.
constexpr int kCrossHostMaxFlows = 1;
constexpr size_t kReductionServerTcpSendBufferBytes = size_t{128} << 10;

// Offsets of n near-equal blocks of `count` elements (n + 1 entries): block i holds count/n
// elements, the first count%n blocks one more, and a run of blocks is contiguous.
inline std::vector<size_t> BlockOffsets(size_t count, int n) {
  std::vector<size_t> offset(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i)
    offset[i + 1] = offset[i] + count / n + (static_cast<size_t>(i) < count % n ? 1 : 0);
  return offset;
}

// One worker's all-reduce call, as agreement headers carry it (pairwise_agreement.h), or, in stall
// notices (stalled_call_check.h), its call of any collective.
struct AgreementCall {
  uint64_t count = 0;
  uint8_t type = 0;
  uint8_t op = 0;
  // 0: an all-reduce (what agreement headers carry). Other collectives: their FlightOp (the flight
  // recorder's values, stable), count their count, op kSum unless they reduce.
  uint8_t collective = 0;
  uint8_t reserved = 0;
  int32_t rank = -1;  // the worker that made it
  int32_t root = -1;  // a rooted collective's root (broadcast, reduce, gather, scatter); else -1
  // CallHistory::digest of the calls the worker made before this one on its communicator.
  uint32_t history = 0;
};

// True when two workers made the same call with the same arguments (whoever they are), whatever
// they called before it.
inline bool SameArguments(const AgreementCall& a, const AgreementCall& b) {
  return a.count == b.count && a.type == b.type && a.op == b.op && a.collective == b.collective &&
         a.root == b.root;
}

// True when two workers made the same call after the same calls.
inline bool SameCall(const AgreementCall& a, const AgreementCall& b) {
  return SameArguments(a, b) && a.history == b.history;
}

// What a worker called on its communicator before its current call. A call that ends on every
// worker without a message between them (each worker broadcasting from itself as the root: every
// send leaves eagerly, nobody receives) cannot find out that the calls differed; the digest, which
// the next call's headers carry and compare with the rest of the call, finds it there.
struct CallHistory {
  // A hash (Fnv1a, folded to 32 bits) of the previous digest and the arguments (not the rank) of
  // every call before this one; 0 before the first, never 0 after it.
  uint32_t digest = 0;
  // The call just before this one (rank < 0: none), for errors to quote.
  AgreementCall last;

  // The history after `call` has been made.
  CallHistory After(const AgreementCall& call) const {
    const uint64_t h = Fnv1a()
                           .Add(digest)
                           .Add(call.count)
                           .Add(call.type)
                           .Add(call.op)
                           .Add(call.collective)
                           .Add(static_cast<uint32_t>(call.root))
                           .value();
    const auto folded = static_cast<uint32_t>(h ^ (h >> 32));
    return CallHistory{.digest = folded == 0 ? 1 : folded, .last = call};
  }
};

// For an all-reduce that is one stage of a larger call (the hierarchical all-reduce's stage across
// hosts): what its agreement headers announce and know from the start, so that every worker
// compares the larger calls, and learns what an earlier stage found.
struct AgreementSeed {
  AgreementCall mine;  // the larger call, with this worker's rank in the job
  // Two workers (job ranks) whose calls differ, found before this stage; rank < 0: none.
  AgreementCall differ[2];
  // The job rank of each rank of the stage's transport (headers name job ranks).
  const std::vector<int>* job_ranks = nullptr;
};

struct AllreduceOptions {
  void* data = nullptr;  // in: this rank's contribution; out: the reduced result
  size_t count = 0;      // elements, equal on every worker
  DataType type = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;
  // Operation sequence number: the same on every rank for one call, distinct for calls that
  // may be in flight together (the Communicator counts calls).
  uint32_t seq = 0;
  // Every Wait of this call uses this deadline; a dead or silent peer turns into an error by then.
  Deadline deadline = Deadline::max();
  // Pipeline unit: bytes per message. Chunks travel and are reduced while later ones move.
  size_t chunk_bytes = kDefaultChunkBytes;
  // Transport ranks 0..num_workers-1 are workers; num_workers.. num_workers+num_reducers-1 are
  // reducers (Reduction Server only). The ring uses only the workers.
  int num_workers = 0;
  int num_reducers = 0;
  // Reduction Server: chunks per reducer to aim for (kPipelineChunksPerReducer across hosts); at
  // least four whatever this says. The Communicator asks for four when every rank shares one host,
  // where smaller chunks made the Reduction Server slower.
  int chunks_per_reducer = kPipelineChunksPerReducer;
  // Chunks in flight per reducer (Reduction Server): bounds reducer memory to
  // window * num_workers * chunk_bytes.
  int window = 4;
  // Reduction Server: at most this many chunk sends outstanding per worker, and result sends per
  // reducer (0: no limit beyond the window). Few flows per link share it evenly; see
  // reduction_server.h.
  int max_flows = 0;
  // Reduction Server only: kBF16 or kF16 sends kF32 data to the reducers in that type and back,
  // reduced there in float32 (reduction_server.h, "Wire compression"); anything else, or data of
  // another type, crosses as it is.
  DataType wire_type = DataType::kF32;
  // Recursive doubling and the ring as a stage of a larger call: see AgreementSeed (nullptr: the
  // call is its own).
  const AgreementSeed* agreement = nullptr;
  // What this worker called before this call (the Communicator keeps it; the same on every worker
  // whose calls were the same). Headers carry its digest.
  CallHistory history;
  // When set, every wait of the call goes through it (stalled_call_check.h): workers whose calls
  // differ enough to run different algorithms then fail within a fraction of a second.
  StalledCallCheck* stall_check = nullptr;
};

// The all-reduce call `options` of worker `rank`, as agreement headers carry it.
inline AgreementCall AllreduceCallOf(const AllreduceOptions& options, int rank) {
  return AgreementCall{.count = options.count,
                       .type = static_cast<uint8_t>(options.type),
                       .op = static_cast<uint8_t>(options.op),
                       .rank = rank,
                       .history = options.history.digest};
}

// "1000 f32 (sum)": an all-reduce call as errors quote it (the values may come from a peer, and
// need not be valid).
inline std::string DescribeAllreduceCall(uint64_t count, uint8_t type, uint8_t op) {
  const auto t = static_cast<DataType>(type);
  const auto o = static_cast<ReduceOp>(op);
  return std::to_string(count) + " " +
         (IsValid(t) ? std::string(DataTypeName(t)) : "type " + std::to_string(type)) + " (" +
         (IsValid(o) ? std::string(ReduceOpName(o)) : "op " + std::to_string(op)) + ")";
}
inline std::string DescribeAllreduceCall(const AgreementCall& c) {
  return DescribeAllreduceCall(c.count, c.type, c.op);
}

// kInvalidArgument "<what>: the workers disagree: <worker> called <theirs>, this worker <mine>
// (...; <also>)": how an all-reduce that compares the workers' calls fails when they differ.
inline Status AllreduceDisagreement(std::string_view what, const std::string& worker,
                                    const std::string& theirs, const std::string& mine,
                                    std::string_view also = {}) {
  return InvalidArgument(std::string(what) + ": the workers disagree: " + worker + " called " +
                         theirs + ", this worker " + mine +
                         " (every worker must make the same all-reduce calls, in the same order" +
                         (also.empty() ? "" : "; " + std::string(also)) + ")");
}

// kInvalidArgument "<what>: rank 5 is not a worker of 4" unless transport rank `rank` is one of
// the call's workers.
inline Status CheckAllreduceWorker(int rank, const AllreduceOptions& options,
                                   std::string_view what) {
  if (options.num_workers > 0 && rank < options.num_workers) return Status::Ok();
  return InvalidArgument(std::string(what) + ": rank " + std::to_string(rank) +
                         " is not a worker of " + std::to_string(options.num_workers));
}

}  // namespace cohort::collective
