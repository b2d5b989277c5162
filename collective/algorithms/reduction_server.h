// Reduction Server all-reduce (the algorithm of Vertex AI's Reduction Server): n workers and m
// reducers on one transport (workers are ranks 0..n-1, reducers n..n+m-1). A buffer is cut into
// chunks (ReductionServerChunkBytes); chunk c goes to reducer c mod m. Each worker sends every
// chunk once and receives its reduction once, so each byte crosses a worker's link once each way
// (bound S/B, against the ring's 2(n-1)/n * S/B). Sends, sums and returns are pipelined: a reducer
// keeps `window` chunks in flight and sums contributions in worker-rank order as they arrive, which
// makes results bit-identical run to run.
//
// Order and flows: a worker sends its chunks group by group (one chunk per reducer), starting
// each group at reducer (rank mod m), and a reducer returns a chunk's result to worker
// (index + k) mod n k-th, so workers and reducers in step address different peers.
// AllreduceOptions::max_flows (COHORT_RS_MAX_FLOWS; 0 = no limit) caps the chunk sends a worker and
// the result sends a reducer keep outstanding, i.e. the TCP flows per link; the Communicator caps
// them at one across hosts, with small TCP send buffers, so that the order holds on the wire
// (kCrossHostMaxFlows in allreduce_options.h).
//
// Protocol per round: every worker sends each reducer a RoundHeader (count, type, op, chunk size,
// sequence number, wire type) on a fixed header tag, then its chunks on tags (seq, 1 + chunk). A
// header of kind kStop ends the reducer's service for this communicator generation. A header no
// worker makes (a kind, type, window or chunk size out of range, or more chunks than tags) ends
// it with kDataLoss naming the worker and the field, and a round whose buffers would take more
// than ReductionServerOptions::max_round_bytes with kResourceExhausted, before anything is
// allocated for it; the workers whose headers are in get a kAbort verdict with that code, and
// fail saying which (the reducer's log has the details). After a header no worker makes the
// reducer lingers as after a failure (below), so a worker whose header comes later hears the same
// instead of finding the reducer gone.
//
// Agreement: each worker gets one verdict per reducer and round, on tag (seq, kVerdictStep). Once a
// reducer has every worker's header it compares them: if they differ it answers each worker at
// once with kReject quoting the call of a worker that disagrees with this one; else it serves the
// round and answers kAccept after the round's last result. A worker watches its verdicts while it
// waits on its chunks, so a call whose workers disagree (count, type, op, ...) fails at once on
// every worker with kInvalidArgument naming the other worker and both calls, instead of waiting
// out the deadline; the reducer then ends its service with the same error. So a caller needs no
// agreement check of its own before a Reduction Server all-reduce (the torch backend skips its
// all-gather there).
//
// Failures: a reducer whose round fails because of one worker (gone: kUnavailable; silent past the
// round timeout: kDeadlineExceeded) answers every other worker with kAbort naming that worker and
// the code, so the others fail at once with that code, naming the worker that failed, rather than
// blaming the reducer or waiting out their deadline. The worker named is the one the reducer's
// transport found gone first (Transport::gone_peer), whichever receive failed: ranks that a
// launcher ends because of it (torchrun's) go soon after. It then lingers
// (ReductionServer::Linger): it answers each later round header with kAbort too, so a worker that
// was computing when the other died hears of it at its next call, however late, until every other
// worker has been told, has stopped or is gone, or `stop` is set; at most
// ReductionServerOptions::failure_linger (30 s by default), and 0.5 s more for a header already on
// its way (an overlapped call) where a receive is still posted. Only then does it end its service.
// A worker posts a round's verdict receive before its header, so an abort never comes before its
// receive (one for a call the worker abandoned meanwhile is never received; it is dropped when the
// worker's transport closes). Lingering is safe for a reducer process (cohort-reducer under
// Cohort's job controller, python -m cohort.torch.reducer under torchrun): whatever the workers do
// next ends it at once (restarted workers' old processes are gone; a worker that calls again is
// told, one that closes cleanly stops), and only a worker that neither calls, stops nor exits keeps
// it waiting, which delays that worker's own rebuild by at most failure_linger, within the connect
// timeout (60 s by default). Past the linger a worker's next call still fails at once naming the
// dead worker where its own transport saw it go (every worker has an endpoint to every other;
// round_verdicts.h). Closing the transport right after the notices cannot drop them: the UCX
// transport takes in what its peers still send before it closes (ucx_transport.h).
//
// Wire compression (AllreduceOptions::wire_type kBF16 or kF16, for kF32 data): a worker rounds
// each chunk to the wire type just before sending it (half the bytes), the reducer widens the n
// contributions to float32 and reduces them there in worker order, rounds the result once to the
// wire type and sends it back, and every worker widens that into its buffer. So every worker ends
// with identical bytes: result = widen(round(op over w of widen(round(x_w)))), float32 arithmetic
// in worker order; against the exact reduction of the rounded inputs it is off by one rounding of
// the result (plus float32 accumulation). Unlike summing in bf16 (torch's bf16_compress_hook), the
// error does not grow with the number of workers beyond the inputs' own rounding.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "collective/algorithms/allreduce_options.h"
#include "collective/algorithms/stalled_call_check.h"

namespace cohort::collective {

// The header tag's step (the last); the verdict's is below the UCX transport's hello and the call
// headers' (collective_call.h); data chunks use steps 1..kVerdictStep-1.
constexpr uint32_t kHeaderStep = (1u << kTagStepBits) - 1;
constexpr uint32_t kVerdictStep = (1u << kTagStepBits) - 4;
// The most chunks per reducer a worker keeps in flight (RoundHeader::window; AllreduceOptions::
// window is clamped to it).
constexpr int kMaxRoundWindow = 64;

struct RoundHeader {
  static constexpr uint32_t kMagic = 0x43524f55;  // "CROU"
  enum Kind : uint8_t { kRound = 1, kStop = 2, kAccept = 3, kReject = 4, kAbort = 5 };
  uint32_t magic = kMagic;
  uint8_t kind = kRound;
  uint8_t type = 0;
  uint8_t op = 0;  // kAbort: the StatusCode of the worker's failure
  uint8_t window = 0;
  uint32_t seq = 0;
  uint8_t max_flows = 0;  // AllreduceOptions::max_flows of the workers (reducers: result sends)
  uint8_t wire_type = 0;  // the DataType chunks travel as: `type`, or kBF16/kF16 for kF32 data
  uint16_t worker = 0;    // kReject: the worker whose call the verdict quotes; kAbort: who failed
  uint64_t count = 0;
  uint64_t chunk_bytes = 0;
  uint32_t history = 0;  // CallHistory::digest of the worker's calls before this one
  uint32_t reserved = 0;
};
static_assert(
    sizeof(RoundHeader) == 40,
    "RoundHeader travels as raw bytes: a change of it is a new kCollectiveProtocol (protocol.h)");

// Worker side; called by every worker with the same arguments (data aside). Send, then Finish,
// of a ReductionServerCall.
Status ReductionServerAllreduce(Transport& transport, const AllreduceOptions& options);

// One worker's part of one all-reduce, in two halves, so that a caller can keep its link busy
// across consecutive calls: Send returns once every chunk of this worker has been sent (results
// may still be on their way back), Finish once every result is in `options.data`. The next call's
// Send may run while this call's Finish does, on another thread: the reducers serve calls in
// order, and the next call's header and chunks wait in their receive queues (UCX's unexpected
// messages) until this call's round is done, so its pipeline is full when it begins. Between Send
// and Finish the caller must neither touch `options.data` nor start a call that writes to it.
//
// Thread safety: Send, then Finish, each once, one thread at a time (they may be two threads).
// `staging` (wire compression: the chunks' narrow copies; grown as needed) belongs to this call
// until Finish returns. Destroying a call abandons what it has in flight (each request's wait is
// bounded).
class ReductionServerCall {
 public:
  // `stall_check`, when given, is options.stall_check, which the call then owns (it lives as long
  // as the call, wherever the call is moved).
  ReductionServerCall(Transport& transport, const AllreduceOptions& options,
                      std::vector<char>* staging,
                      std::unique_ptr<StalledCallCheck> stall_check = nullptr);
  ~ReductionServerCall();
  ReductionServerCall(const ReductionServerCall&) = delete;
  ReductionServerCall& operator=(const ReductionServerCall&) = delete;

  // Checks the arguments, sends the header and every chunk (collecting the results that come
  // back meanwhile).
  Status Send();
  // Collects the remaining results and the reducers' verdicts.
  Status Finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The chunk size a call of `count` elements of `element_bytes` each is cut into: chunk_bytes;
// smaller, down to kMinPipelineChunkBytes, where that gives a reducer fewer than
// chunks_per_reducer chunks; smaller still, down to 4 KiB, where a reducer would get fewer than
// four (every reducer's link should carry its share, and each should pipeline: a reducer returns
// nothing until all n copies of its first chunk are in). A whole number of elements.
size_t ReductionServerChunkBytes(size_t count, size_t element_bytes, int num_reducers,
                                 size_t chunk_bytes, int chunks_per_reducer);

// Tells every reducer that this worker is done (reducers return from Serve once all workers
// have) and waits, until `deadline`, for each reducer's answer, so that closing the transport
// afterwards cannot drop the stop in flight. Best effort: errors are returned but leave nothing
// pending.
Status SendStopToReducers(Transport& transport, int num_workers, int num_reducers,
                          Deadline deadline);

struct ReductionServerOptions {
  int num_workers = 0;
  int num_reducers = 0;
  // How long one round may take once its header arrived; a silent worker past it is an error.
  std::chrono::milliseconds round_timeout{60000};
  // How often an idle reducer checks `stop` while waiting for the next round.
  std::chrono::milliseconds poll_interval{100};
  // How long a reducer that lost a worker, or refused one's header, may linger telling the others
  // (see Failures).
  std::chrono::milliseconds failure_linger{30000};
  // The most a round's chunk buffers (window x workers x chunk) may take; a round that needs
  // more fails with kResourceExhausted before anything is allocated. 0: this machine's memory.
  size_t max_round_bytes = 0;
};

// ReductionServer is the reducer side: it owns the reducer's chunk buffers and serves rounds on a
// transport whose rank is num_workers + reducer index.
//
// Thread safety: one thread calls Serve. Lifetime: `transport` must outlive this object.
class ReductionServer {
 public:
  ReductionServer(Transport& transport, ReductionServerOptions options);

  // Serves rounds until every worker sent kStop (returns OK), `stop` becomes true (kCancelled),
  // or a worker is gone or a round fails (that error: kUnavailable, kDeadlineExceeded, ...; after
  // lingering, see Failures).
  Status Serve(const std::atomic<bool>& stop);
  // Rounds served so far.
  uint64_t rounds() const { return rounds_; }

 private:
  // Serves one round (of a header CheckRoundHeader passed); a failure caused by one worker sets
  // lost_worker_ to it.
  Status ServeRound(const RoundHeader& header);
  // `s`, after noting that worker `w` caused it (when it is an error), or rather a worker the
  // transport knows to be gone (then kUnavailable).
  Status Blame(int w, Status s);
  // Answers each worker's header of a round (see Agreement): accepted when `odd` < 0, else each
  // worker is rejected quoting a call that differs from its own (worker `odd`'s or `first`'s).
  Status SendVerdicts(const std::vector<RoundHeader>& headers, int first, int odd);
  // Tells every worker but `lost` (SendAborts), or worker `to` (SendAbort), that round `seq`
  // failed because of worker `lost` (see Failures); best effort, each send waited for briefly.
  void SendAborts(uint32_t seq, int lost, StatusCode code);
  void SendAbort(int to, uint32_t seq, int lost, StatusCode code);
  // Tells each worker whose round header is in (`arrived`) that this reducer refuses the round
  // with `code` (kDataLoss: worker `about`'s header is not one a worker makes;
  // kResourceExhausted: the round's buffers), and gives the notices a moment to leave. Returns
  // which workers it told.
  std::vector<bool> SendRefusals(const std::vector<RoundHeader>& headers,
                                 const std::vector<bool>& arrived, int about, StatusCode code);
  // Answers worker `worker`'s stop (see SendStopToReducers); best effort.
  void AnswerStop(int worker);
  // Posts a header receive for each running worker that has none; returns the first worker whose
  // receive was refused (its error in `error`), or -1.
  int PostHeaderReceives(Status* error);
  // Worker `lost` failed this generation with `why` (the workers in `told` already know): tells
  // the others as their headers come (see Failures); returns `why`.
  Status Linger(int lost, const Status& why, std::vector<bool> told, const std::atomic<bool>& stop);

  Transport& transport_;
  ReductionServerOptions options_;
  int index_;
  uint64_t rounds_ = 0;
  int lost_worker_ = -1;  // the worker whose failure ended the round being served (-1: none)
  std::vector<std::vector<char>> buffers_;  // window * num_workers chunk buffers
  std::vector<float> widened_;              // wire compression: one chunk's float32 reduction
  std::vector<RoundHeader> verdicts_;       // this round's answer to each worker
  std::vector<Request> verdict_sends_;
  std::vector<RoundHeader> incoming_;  // each worker's next header, as it arrives
  std::vector<Request> header_reqs_;   // the receive of each worker's next header
  std::vector<bool> stopped_;          // workers that sent kStop
};

}  // namespace cohort::collective
