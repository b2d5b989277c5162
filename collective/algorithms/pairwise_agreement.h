// PairwiseAgreement: how the all-reduces that move data between pairs of workers (recursive
// doubling, halving-doubling, the ring) learn whether every worker made the same call (count, type,
// op), within the exchanges they make anyway: no round is added (nor a message, but a 64-byte one
// ahead of data too large to travel in it), and a disagreement fails every worker with
// kInvalidArgument naming a worker whose call differs from its own and both calls, instead of a
// truncated message, wrong results on some workers, or a wait until the deadline.
//
// Each exchange starts with a small header: the sender's call, the size of its data, and a pair
// of workers whose calls differ when the sender knows one (it saw it itself, or an earlier partner
// told it). Data of up to kAgreementInlineBytes (kAgreementInlineBytesSameHost between workers of
// one host; of a ring step, its first piece if that fits) travels in the header's message, which
// the receiver takes into a buffer of that fixed size posted before anything is sent, so a peer's
// message fits whatever its call; larger data follows as messages of its own (one, or the ring's
// pieces), received once the header is read. The receiver takes the data only when the header's
// call matches its own and neither side knew of a disagreement (both sides judge the same two
// headers alike); otherwise it drains the rest into scratch memory, so every send completes, and
// from then on it sends no data, only headers.
//
// Everyone learns: the steps pair the workers across the dimensions of a hypercube, one dimension
// a step, and after the step across dimension k every worker whose sub-cube of dimension k + 1
// holds two different calls knows a disagreement. (By induction: if one half of that sub-cube
// held one, all its workers knew it and tell their partners across; if each half is uniform and
// the halves differ, every pair across sees it.) A worker that sits the exchanges out (a worker
// count that is not a power of two) sends its call with its data and gets the verdict with the
// result. The ring's steps pass each worker's header to the next around the ring: after its first
// step every worker has compared its call with its left neighbour's, so if any two calls differ
// some worker knows, and the n - 1 steps after it carry that around to every worker (the ring has
// 2(n - 1)). A stage of a larger call starts knowing what an earlier stage found (AgreementSeed:
// the hierarchical all-reduce's host), and passes it on the same way. Cost: 64 bytes a message and
// a copy of the data that travels inline; a separate header message cost 20-40% of a 1-4 KiB
// all-reduce across hosts (bench/RESULTS.md, "Agreement").
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "collective/algorithms/allreduce_options.h"
#include "collective/algorithms/collective_call.h"

namespace cohort::collective {

// A header travels on step kAgreementHeaderStep + the step of its data (steps from kMaxDataStep up
// are headers: collective_call.h); the data not inline on the data's own steps.
constexpr uint32_t kAgreementHeaderStep = kMaxDataStep + 2;
// Data that travels in the header's message between hosts: all of it for the sizes kAuto sends by
// recursive doubling (8 KiB) and halving-doubling (64 KiB, half of it in the largest message),
// where a message more costs more than copying the data twice.
constexpr size_t kAgreementInlineBytes = size_t{32} << 10;
// Between two workers on one host over shared memory, where larger messages go by a zero-copy
// rendezvous that copying them into the header's message would lose (bench/RESULTS.md,
// "Agreement inside the ring").
constexpr size_t kAgreementInlineBytesSameHost = size_t{8} << 10;

// How many of `data_bytes`, sent in pieces of `piece_bytes` (0: one piece), travel in the header's
// message, given the pair's `limit`: the whole first piece when it is at most that, else nothing.
// A larger piece goes whole as a message of its own, as it would without the header (cut in two,
// it cost a rendezvous more per ring step over shared memory).
constexpr size_t AgreementInlineBytes(size_t data_bytes, size_t piece_bytes, size_t limit) {
  const size_t first = piece_bytes != 0 && piece_bytes < data_bytes ? piece_bytes : data_bytes;
  return first <= limit ? first : 0;
}

struct AgreementHeader {
  static constexpr uint32_t kMagic = 0x52474141;  // "AAGR"
  uint32_t magic = kMagic;
  // The data travels in pieces of this many bytes (0: one piece), piece k on the data's step + k,
  // the first one unless it came inline.
  uint32_t piece_bytes = 0;
  uint64_t data_bytes = 0;  // the sender's data, inline where InlineBytes says (0: none)
  AgreementCall sender;
  // Two workers whose calls differ, known to the sender; differ[0].rank < 0: it knows of none.
  AgreementCall differ[2];
};
static_assert(sizeof(AgreementHeader) == 88,
              "AgreementHeader travels as raw bytes: a change of it is a new kCollectiveProtocol "
              "(protocol.h)");

// The agreement state of one worker in one call. Not copyable (the transport holds pointers into
// its buffers); destroy it only after Finish, or after an error.
class PairwiseAgreement {
 public:
  // `what` prefixes errors ("recursive-doubling all-reduce"). With options.agreement, headers
  // announce its call and name job ranks, and a disagreement it knows is known from the start.
  PairwiseAgreement(Transport& transport, const AllreduceOptions& options, std::string what);
  PairwiseAgreement(const PairwiseAgreement&) = delete;
  PairwiseAgreement& operator=(const PairwiseAgreement&) = delete;

  // True once this worker knows that two workers' calls differ: it moves no more data.
  bool disagreement_known() const { return differ_[0].rank >= 0; }

  // Both ways with `peer` on data step `step`: sends this worker's header with `send` (no data
  // once a disagreement is known); receives the peer's, with its data into `into` (true: the
  // caller reduces it) or, when the calls differ or either side knew of a disagreement, drains
  // whatever the peer sent (false). Returns once both sides' messages are through.
  StatusOr<bool> Swap(int peer, uint32_t step, ConstBytes send, MutableBytes into);
  // One way, to `peer`: the header with `data` (none once a disagreement is known). Returns once
  // posted; Finish waits for the sends.
  Status Send(int peer, uint32_t step, ConstBytes data);
  // One way, from `peer`: as Swap's receiving half.
  StatusOr<bool> Receive(int peer, uint32_t step, MutableBytes into);
  // Waits for the sends Send and SendPieces posted.
  Status Finish();

  // One way, for data that moves in pieces (the ring): posts the header to `peer` with `data`
  // (none once a disagreement is known), inline as InlineBytes says and the rest in pieces
  // of `piece_bytes` (at most UINT32_MAX; 0: one piece), piece k on data step `step` + k. Returns
  // once posted; Finish waits for the sends.
  Status SendPieces(int peer, uint32_t step, ConstBytes data, size_t piece_bytes);
  // Posts the receive of `peer`'s header on data step `step`, for TakePieces: before this worker
  // sends, so the header never waits for its receive.
  StatusOr<Request> ExpectHeader(int peer, uint32_t step);
  // Waits for the header ExpectHeader posted (`header`). When this worker takes the data (true),
  // it must be `expected_bytes` in pieces of `piece_bytes` as SendPieces sends them; its inline
  // part (InlineBytes: the first piece, or nothing) is copied to `first_piece`, and the caller
  // receives the rest (piece k on `step` + k, the first unless it came inline). Otherwise (false)
  // every piece the peer sent has been drained.
  StatusOr<bool> TakePieces(int peer, uint32_t step, Request& header, size_t expected_bytes,
                            size_t piece_bytes, MutableBytes first_piece);
  // How many of `data_bytes` in pieces of `piece_bytes` travel in a header's message to or from
  // `peer`: AgreementInlineBytes with kAgreementInlineBytesSameHost where the two share a host
  // and its shared memory (the transport's placement), else kAgreementInlineBytes.
  size_t InlineBytes(int peer, size_t data_bytes, size_t piece_bytes) const;

  // OK, or kInvalidArgument naming a worker whose call differs from this worker's, and both
  // calls, once a disagreement is known.
  Status Verdict() const;

  // "worker 5": transport rank `peer` as errors name it, by its job rank where a seed maps them
  // (a stage's transport ranks are not the job's).
  std::string PeerName(int peer) const { return WorkerName(HeaderRank(peer)); }

 private:
  // Posts the receive of `peer`'s header (and inline data) into inbox_.
  StatusOr<Request> PostHeaderReceive(int peer, uint32_t step);
  // Posts this worker's header with `data` to `peer`: inline as InlineBytes says, the
  // rest in pieces of `piece_bytes` (0: one). The requests go to `out`.
  Status PostSends(int peer, uint32_t step, ConstBytes data, size_t piece_bytes,
                   std::vector<PeerRequest>* out);
  // Waits for the header posted on `request` from `peer`, checks it, takes in what it tells and
  // takes or drains the data, all of it into `into` in one piece. `open`: this worker would take
  // data in this step (it knew of no disagreement when it sent its own header, or, receiving one
  // way, it knows of none).
  StatusOr<bool> TakeHeader(int peer, uint32_t step, Request& request, bool open,
                            MutableBytes into);
  // TakeHeader's first part, for data of `expected_bytes` in pieces of `piece_bytes`: takes the
  // inline part into `first_piece` (true), or drains every piece (false).
  StatusOr<bool> TakeHead(int peer, uint32_t step, Request& request, bool open,
                          size_t expected_bytes, size_t piece_bytes, MutableBytes first_piece);
  // Receives and drops every piece the header `got` announces beyond its inline part.
  Status Drain(int peer, uint32_t step, const AgreementHeader& got);
  // Isend and Irecv with `peer` on `step`; a refusal names the peer.
  StatusOr<Request> PostSend(int peer, uint32_t step, ConstBytes data);
  StatusOr<Request> PostReceive(int peer, uint32_t step, MutableBytes into);
  // The rank `peer`'s headers carry: its job rank where a seed maps them.
  int HeaderRank(int peer) const;

  Transport& transport_;
  const AllreduceOptions& options_;
  const std::string what_;
  const AgreementCall mine_;
  AgreementCall differ_[2];
  // A received header and the data inline behind it: one receive at a time.
  std::unique_ptr<char[]> inbox_;
  // Sent headers with their inline data, kept while their sends are posted.
  std::deque<std::unique_ptr<char[]>> outboxes_;
  std::vector<PeerRequest> sends_;  // Send's, waited for by Finish
};

}  // namespace cohort::collective
