// Options shared by the all-reduce algorithms (gloo style: free functions taking a Transport and
// an options struct, so new options never break callers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collective/transport/transport.h"
#include "collective/types.h"

namespace cohort::collective {

// Default pipeline unit of both algorithms across hosts. Small enough that filling and draining
// the Reduction Server's pipeline costs little link time (about 2 x workers x chunk per call),
// large enough that per-message costs stay small; at or below the UCX transport's eager limit, so
// no chunk waits for a rendezvous handshake. Measured in bench/RESULTS.md ("Chunk size and eager
// sends"): on 1 Gbit/s links 128 KiB chunks sent eagerly reach 87-98% of the link for 16-256 MiB,
// 1 MiB chunks by rendezvous 75%.
constexpr size_t kDefaultChunkBytes = size_t{128} << 10;
// The pipeline unit when every rank shares one host over shared memory: there, a piece above the
// eager limit moves in one zero-copy (cma) rendezvous, and 128 KiB eager pieces (copied twice
// through shared memory, more of them per call) made the one-host ring slower and erratic.
constexpr size_t kSameHostChunkBytes = size_t{1} << 20;

// Reduction Server across hosts: a buffer is cut into at least this many chunks per reducer (but
// none below kMinPipelineChunkBytes), so that filling and draining the pipeline, which costs about
// 2 x workers x chunk of link time per call, stays small next to the call. On 1 Gbit/s links with 4
// workers and 4 reducers this took 1-8 MiB calls from 63-80% of the link to 85-98%; 8 KiB chunks
// cost more per message than they saved (bench/RESULTS.md, "Chunks per reducer").
constexpr int kPipelineChunksPerReducer = 64;
constexpr size_t kMinPipelineChunkBytes = size_t{16} << 10;

// Offsets of n near-equal blocks of `count` elements (n + 1 entries): block i holds count/n
// elements, the first count%n blocks one more, and a run of blocks is contiguous.
inline std::vector<size_t> BlockOffsets(size_t count, int n) {
  std::vector<size_t> offset(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i)
    offset[i + 1] = offset[i] + count / n + (static_cast<size_t>(i) < count % n ? 1 : 0);
  return offset;
}

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
};

}  // namespace cohort::collective
