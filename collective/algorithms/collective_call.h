// What the collectives other than the all-reduce share (broadcast, allgather, reduce-scatter,
// reduce, gather, scatter, alltoall, barrier, point-to-point): their common options, the call
// header that lets two workers check they are in the same call, and piecewise sends and receives.
//
// Call headers: at the start of a call a worker sends a small CallHeader (which collective, type,
// op, root, count, sequence number) to each peer it will receive from in that call, on one tag per
// call (step kCallHeaderStep), and checks the header it receives before it waits for data. So two
// workers that disagree (one calls allgather of 12 elements, the other of 10, or a broadcast) get
// kInvalidArgument naming the peer and both calls, instead of a truncated message or a wait until
// the deadline. A header goes only where data goes, so a disagreement is seen by the workers that
// receive from a disagreeing peer; the others finish or see their deadline pass (kDeadlineExceeded
// naming the peer they waited for). Two workers that both think they are the root of a broadcast
// receive from nobody: that goes unseen until the deadline.
//
// Tags: data of a call uses steps below kMaxDataStep with the call's sequence number;
// point-to-point messages use steps kPointToPointHeaderStep and kPointToPointDataStep with the
// user's tag in the sequence field, so they never match a collective's messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collective/algorithms/allreduce_options.h"
#include "collective/transport/transport.h"
#include "collective/types.h"
#include "common/flight_recorder.h"
#include "common/status.h"

namespace cohort::collective {

// Data steps are below this; the steps from here up are headers and point-to-point messages.
constexpr uint32_t kMaxDataStep = 1u << 27;
constexpr uint32_t kPointToPointHeaderStep = kMaxDataStep;
constexpr uint32_t kPointToPointDataStep = kMaxDataStep + 1;
// The last steps are taken: the Reduction Server's header (kHeaderStep, the last) and the UCX
// transport's hello (the one before). Call headers use the one before those, the Reduction
// Server's verdicts (kVerdictStep) the one before that.
constexpr uint32_t kCallHeaderStep = (1u << kTagStepBits) - 3;

// The options every collective takes (each algorithm's options struct derives from it).
struct CollectiveOptions {
  // Operation sequence number: the same on every worker for one call, distinct for calls that may
  // be in flight together (the Communicator counts calls).
  uint32_t seq = 0;
  // Every Wait of the call uses this deadline: a dead or silent peer turns into an error by then.
  Deadline deadline = Deadline::max();
  // Transport ranks 0..num_workers-1 take part (reducers, ranked after them, do not).
  int num_workers = 0;
  // Pipeline unit: large transfers are cut into messages of this many bytes (a whole number of
  // elements, at least one), which travel and are forwarded while later ones move.
  size_t chunk_bytes = kDefaultChunkBytes;
  // When set, every wait of the call goes through it (stalled_call_check.h): workers that made
  // different calls at this point (an allgather against an all-reduce, a barrier against a
  // broadcast) then fail within a fraction of a second, where no header of theirs met.
  StalledCallCheck* stall_check = nullptr;
  // What this worker called before this call (the Communicator keeps it; point-to-point messages,
  // outside the sequence, leave it empty). Call headers carry its digest.
  CallHistory history;
};

struct CallHeader {
  static constexpr uint32_t kMagic = 0x4c4c4343;  // "CCLL"
  uint32_t magic = kMagic;
  // Which call (a FlightOp: kBroadcast..kSend; the flight recorder's values, stable).
  uint8_t kind = 0;
  uint8_t type = 0;
  uint8_t op = 0;
  uint8_t reserved = 0;
  uint32_t seq = 0;
  int32_t root = -1;  // or the user's tag (point-to-point)
  uint64_t count = 0;
  uint32_t history = 0;  // CallHistory::digest of the sender's calls before this one
  uint32_t padding = 0;
};
static_assert(
    sizeof(CallHeader) == 32,
    "CallHeader travels as raw bytes: a change of it is a new kCollectiveProtocol (protocol.h)");

// A header for this worker's side of a call.
CallHeader MakeCallHeader(FlightOp kind, const CollectiveOptions& options, DataType type,
                          size_t count, int root = -1, ReduceOp op = ReduceOp::kSum);

// "worker 3".
std::string WorkerName(int rank);

// "allgather of 12 f32", "reduce of 10 f32 (max) to root 0", "barrier": a call of collective `kind`
// as errors quote it (the values may come from a peer, and need not be valid). `root`: a rooted
// collective's.
std::string DescribeCollectiveCall(FlightOp kind, uint64_t count, uint8_t type, uint8_t op,
                                   int root);

// "all-reduce of 1000 f32 (sum)", "barrier", "allgather of 8 i64 to root 0": a call of any
// collective, as stall notices and histories carry it.
std::string DescribeAnyCall(const AgreementCall& call);

// What a disagreement adds to the calls it quotes when another worker's call and this worker's are
// the same but for the calls before them (their history digests differ); all empty otherwise.
struct HistoryClauses {
  std::string theirs;  // " after other calls than this worker's"
  std::string mine;    // " after broadcast of 8 f32 from root 0", " as its first call"
  std::string also;    // why no earlier call found it
};
// `same_arguments`: the two calls are the same but for their histories; `before`: this worker's
// call before its own (rank < 0: none).
HistoryClauses DescribeHistories(bool same_arguments, const AgreementCall& before);

// Checks that `options` can run on `transport` (this rank is one of num_workers workers) and that
// `root`, when given (>= 0 or asked for), names a worker. `what` prefixes the error.
Status CheckCollective(const Transport& transport, const CollectiveOptions& options,
                       std::string_view what, int root = 0);

// The header exchange of one call: Send/Recv post; Check waits for one received header and
// compares it with this worker's; Finish waits for the sends. Destroying it cancels what is still
// posted (after an error). Not copyable or movable (the transport holds pointers into it).
class HeaderExchange {
 public:
  HeaderExchange(Transport& transport, const CallHeader& mine, const CollectiveOptions& options)
      : transport_(transport), mine_(mine), options_(options) {}
  HeaderExchange(const HeaderExchange&) = delete;
  HeaderExchange& operator=(const HeaderExchange&) = delete;

  Status Send(int peer);
  Status Recv(int peer);
  // Waits for the header from `peer` (posted by Recv) and checks kind, type, op, root and count;
  // kInvalidArgument naming the peer and both calls when they differ. `expected_count`, when set,
  // replaces this worker's count in the comparison (alltoallv: what this worker expects from peer).
  Status Check(int peer, std::optional<uint64_t> expected_count = std::nullopt);
  Status Finish();

 private:
  struct Posted {
    int peer;
    Request request;
    std::unique_ptr<CallHeader> got;  // receives only
  };
  Transport& transport_;
  const CallHeader mine_;
  const CollectiveOptions options_;
  std::vector<Posted> sends_;
  std::vector<Posted> recvs_;
};

// Elements per piece for `type` under chunk_bytes (at least one).
size_t PieceElems(size_t chunk_bytes, DataType type);
// Pieces of a run of `elems` elements (zero for none).
inline size_t PieceCount(size_t elems, size_t piece_elems) {
  return (elems + piece_elems - 1) / piece_elems;
}

// One posted send or receive of a call, with the worker at the other end (for errors).
struct PeerRequest {
  int peer = -1;
  bool send = false;
  Request request;
};

// Posts the pieces of `elems` elements at `data` as sends to (or receives from) `peer` on steps
// first_step, first_step + 1, ..., appending the requests to `out`. kInvalidArgument when the steps
// would reach kMaxDataStep.
Status PostPieces(Transport& transport, bool send, int peer, uint32_t seq, uint32_t first_step,
                  void* data, size_t elems, DataType type, size_t piece_elems,
                  std::vector<PeerRequest>* out);
// Waits for one request (through `check` when given: stalled_call_check.h); an error says
// "<what>: sending to worker 3: ..." (or receiving from).
Status WaitFor(PeerRequest& request, Deadline deadline, std::string_view what,
               StalledCallCheck* check = nullptr);
// Waits for every request in `requests`, in order, as WaitFor does, and clears it.
Status WaitAll(std::vector<PeerRequest>* requests, Deadline deadline, std::string_view what,
               StalledCallCheck* check = nullptr);
// The same for one call of a collective: its deadline and stall check.
inline Status WaitFor(PeerRequest& request, const CollectiveOptions& options,
                      std::string_view what) {
  return WaitFor(request, options.deadline, what, options.stall_check);
}
inline Status WaitAll(std::vector<PeerRequest>* requests, const CollectiveOptions& options,
                      std::string_view what) {
  return WaitAll(requests, options.deadline, what, options.stall_check);
}

}  // namespace cohort::collective
