#include "collective/algorithms/reduction_server.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <string>

#include "collective/algorithms/round_verdicts.h"
#include "collective/kernels/reduce.h"

namespace cohort::collective {
namespace {

size_t ChunkElems(size_t chunk_bytes, size_t es) { return std::max<size_t>(1, chunk_bytes / es); }

// The smallest chunk a call is cut into (ReductionServerChunkBytes), where the call is larger.
constexpr size_t kSmallestChunkBytes = 4096;

// Whether `type` data crosses the network as `wire` (wire compression: float32 as bf16 or f16).
bool CompressedOnTheWire(DataType type, DataType wire) {
  return type == DataType::kF32 && (wire == DataType::kBF16 || wire == DataType::kF16);
}

// What a reducer takes from a worker's round header before it serves the round: a kind a worker
// sends, a reduction, a wire type and a window that workers make, chunks of whole elements no
// more than the call's or kSmallestChunkBytes (ReductionServerChunkBytes gives no more: its
// smallest chunk is that many bytes), and few enough chunks that their tags' steps stay below the
// verdict's. kDataLoss naming the field.
Status CheckRoundHeader(const RoundHeader& h) {
  auto bad = [](const std::string& what) { return DataLoss("round header: " + what); };
  if (h.kind != RoundHeader::kRound && h.kind != RoundHeader::kStop)
    return bad("kind " + std::to_string(h.kind) + " is not one a worker sends");
  if (h.kind == RoundHeader::kStop) return Status::Ok();
  const auto type = static_cast<DataType>(h.type);
  if (Status s = CheckReduction("round header", type, static_cast<ReduceOp>(h.op)); !s.ok())
    return DataLoss(s.message());
  const auto wire = static_cast<DataType>(h.wire_type);
  if (wire != type && !CompressedOnTheWire(type, wire))
    return bad("wire type " + std::to_string(h.wire_type) + " for " +
               std::string(DataTypeName(type)));
  if (h.window < 1 || h.window > kMaxRoundWindow)
    return bad("window " + std::to_string(h.window) + " (1 to " + std::to_string(kMaxRoundWindow) +
               ")");
  const size_t es = DataTypeSize(type);
  if (h.count > std::numeric_limits<uint64_t>::max() / es)
    return bad("count " + std::to_string(h.count) + " of " + std::to_string(es) + "-byte elements");
  if (h.chunk_bytes < es || h.chunk_bytes % es != 0 ||
      h.chunk_bytes / es > std::max<uint64_t>(h.count, kSmallestChunkBytes)) {
    return bad("chunks of " + std::to_string(h.chunk_bytes) + " bytes for " +
               std::to_string(h.count) + " elements of " + std::to_string(es) + " bytes");
  }
  const uint64_t chunks = (h.count + h.chunk_bytes / es - 1) / (h.chunk_bytes / es);
  if (chunks + 1 >= kVerdictStep)
    return bad(std::to_string(chunks) + " chunks (fewer than " + std::to_string(kVerdictStep - 1) +
               ")");
  return Status::Ok();
}

// This machine's memory, in bytes (ReductionServerOptions::max_round_bytes of 0).
size_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<size_t>::max();
  return static_cast<size_t>(pages) * static_cast<size_t>(page);
}

}  // namespace

size_t ReductionServerChunkBytes(size_t count, size_t element_bytes, int num_reducers,
                                 size_t chunk_bytes, int chunks_per_reducer) {
  const size_t m = static_cast<size_t>(std::max(1, num_reducers));
  size_t chunk = ChunkElems(chunk_bytes, element_bytes);
  // Fill and drain: aim for chunks_per_reducer chunks per reducer, not below the floor (per-message
  // costs) nor above chunk_bytes.
  const size_t target = static_cast<size_t>(std::max(4, chunks_per_reducer)) * m;
  if (count < chunk * target) {
    chunk = std::min(chunk, std::max(ChunkElems(kMinPipelineChunkBytes, element_bytes),
                                     (count + target - 1) / target));
  }
  // At least four per reducer: with fewer, waiting for the first chunk is much of a small call.
  const size_t min_chunks = 4 * m;
  if (count < chunk * min_chunks) {
    chunk = std::max(ChunkElems(kSmallestChunkBytes, element_bytes),
                     (count + min_chunks - 1) / min_chunks);
  }
  return chunk * element_bytes;
}

struct ReductionServerCall::State {
  State(Transport& t, const AllreduceOptions& o, std::vector<char>* staging_buffer)
      : transport(t), options(o), staging(staging_buffer) {}

  Status Start();
  // Moves chunks until every one has been sent (`all`: and every result has come back).
  Status Drive(bool all);
  // Waits for the oldest request of `q`; an error names its chunk and reducer.
  struct Pending {
    Request req;
    size_t chunk;
  };
  Status WaitOldest(std::deque<Pending>& q, std::string_view what, std::string_view to_from) {
    Pending& f = q.front();
    return verdicts->WaitWatching(f.req, options.deadline,
                                  "all-reduce: " + std::string(what) + std::to_string(f.chunk) +
                                      std::string(to_from) +
                                      ReducerName(n + static_cast<int>(f.chunk % m), n));
  }
  size_t Elems(size_t c) const { return std::min(chunk_elems, options.count - c * chunk_elems); }

  Transport& transport;
  const AllreduceOptions options;
  std::unique_ptr<StalledCallCheck> stall_check;  // options.stall_check, when the call owns it
  std::vector<char>* const staging;
  int n = 0;
  int m = 0;
  bool compress = false;
  DataType wire = DataType::kF32;
  size_t wes = 0;  // bytes per element on the wire
  size_t chunk_elems = 0;
  char* on_wire = nullptr;  // what chunks are sent from and received into
  RoundHeader header;
  std::unique_ptr<RoundVerdicts> verdicts;
  std::vector<Request> header_sends;
  std::vector<size_t> order;  // chunks in sending order (see Start)
  // Chunks in flight: each has one send and one receive into the same place (the reducer answers
  // only after it has all of this chunk, so the send has finished reading). At most `max_sends`
  // sends are outstanding; result receives are posted with their send.
  std::deque<Pending> sends, recvs;
  size_t max_inflight = 0;
  size_t max_sends = 0;
  size_t next = 0;  // of `order`: the next chunk to send
  bool empty = false;
};

Status ReductionServerCall::State::Start() {
  n = options.num_workers;
  m = options.num_reducers;
  const int rank = transport.rank();
  if (m <= 0) return InvalidArgument("reduction server all-reduce needs at least one reducer");
  if (rank >= n) return InvalidArgument("reduction server all-reduce: rank is not a worker");
  if (transport.size() < n + m)
    return InvalidArgument("transport has fewer ranks than workers + reducers");
  empty = options.count == 0;
  if (empty) return Status::Ok();
  compress = CompressedOnTheWire(options.type, options.wire_type);
  wire = compress ? options.wire_type : options.type;
  const size_t es = DataTypeSize(options.type);
  wes = DataTypeSize(wire);
  // Chunks are sized by what crosses the network.
  chunk_elems = ReductionServerChunkBytes(options.count, wes, m, options.chunk_bytes,
                                          options.chunks_per_reducer) /
                wes;
  const size_t num_chunks = (options.count + chunk_elems - 1) / chunk_elems;
  if (num_chunks + 1 >= kVerdictStep) return InvalidArgument("too many chunks: raise chunk_bytes");
  // Compressed, chunks travel from and back into a buffer of wire-type elements (the caller's, so
  // that its pages are not faulted in anew every call).
  if (compress && staging->size() < options.count * wes) {
    *staging = std::vector<char>();  // the old contents are not needed: free before allocating
    staging->resize(options.count * wes);
  }
  on_wire = compress ? staging->data() : static_cast<char*>(options.data);

  header.type = static_cast<uint8_t>(options.type);
  header.op = static_cast<uint8_t>(options.op);
  header.window = static_cast<uint8_t>(std::clamp(options.window, 1, kMaxRoundWindow));
  header.seq = options.seq;
  header.count = options.count;
  header.chunk_bytes = chunk_elems * es;
  header.max_flows = static_cast<uint8_t>(std::clamp(options.max_flows, 0, 255));
  header.wire_type = static_cast<uint8_t>(wire);
  header.history = options.history.digest;
  verdicts = std::make_unique<RoundVerdicts>(transport, n, m, header, options.history.last,
                                             options.stall_check);
  COHORT_RETURN_IF_ERROR(verdicts->Post());
  for (int r = 0; r < m; ++r) {
    COHORT_ASSIGN_OR_RETURN(Request req, transport.Isend(n + r, MakeTag(0, kHeaderStep),
                                                         ConstBytes{&header, sizeof(header)}));
    header_sends.push_back(std::move(req));
  }

  // Send order: chunks go out group by group (group q = chunks q*m .. q*m+m-1, one per reducer),
  // and within a group worker w starts at reducer w mod m and goes round. While the workers keep
  // pace with each other, each sends to a different reducer at any moment, so a reducer's link
  // carries one incoming flow instead of n competing ones (which share a link unevenly, and the
  // slowest flow sets the pace of a chunk).
  order.reserve(num_chunks);
  const size_t groups = (num_chunks + m - 1) / m;
  for (size_t q = 0; q < groups; ++q) {
    for (int k = 0; k < m; ++k) {
      const size_t c = q * m + static_cast<size_t>((rank + k) % m);
      if (c < num_chunks) order.push_back(c);
    }
  }
  max_inflight = static_cast<size_t>(std::max(4, 2 * header.window * m));
  max_sends = options.max_flows > 0 ? static_cast<size_t>(options.max_flows) : max_inflight;
  return Status::Ok();
}

Status ReductionServerCall::State::Drive(bool all) {
  auto* floats = static_cast<float*>(options.data);
  while (next < order.size() || !sends.empty() || (all && !recvs.empty())) {
    while (next < order.size() && sends.size() < max_sends && recvs.size() < max_inflight) {
      const size_t c = order[next];
      const int reducer = n + static_cast<int>(c % m);
      const size_t off = c * chunk_elems;
      const size_t bytes = Elems(c) * wes;
      const Tag tag = MakeTag(options.seq, 1 + static_cast<uint32_t>(c));
      if (compress) NarrowFromF32(wire, on_wire + off * wes, floats + off, Elems(c));
      Pending r{Request(), c}, snd{Request(), c};
      COHORT_ASSIGN_OR_RETURN(
          r.req, transport.Irecv(reducer, tag, MutableBytes{on_wire + off * wes, bytes}));
      recvs.push_back(std::move(r));
      COHORT_ASSIGN_OR_RETURN(
          snd.req, transport.Isend(reducer, tag, ConstBytes{on_wire + off * wes, bytes}));
      sends.push_back(std::move(snd));
      ++next;
    }
    if (!sends.empty()) {
      COHORT_RETURN_IF_ERROR(WaitOldest(sends, "sending chunk ", " to "));
      sends.pop_front();
      // Results are collected once the send window, not the receive window, is what blocks.
      if (next < order.size() && recvs.size() < max_inflight) continue;
    }
    // Once every chunk is posted, Send waits only for its sends: the results are Finish's.
    const bool all_posted = next == order.size();
    if (!recvs.empty() && (recvs.size() >= max_inflight || (all && all_posted))) {
      COHORT_RETURN_IF_ERROR(WaitOldest(recvs, "result of chunk ", " from "));
      if (compress) {
        const size_t c = recvs.front().chunk;
        WidenToF32(wire, floats + c * chunk_elems, on_wire + c * chunk_elems * wes, Elems(c));
      }
      recvs.pop_front();
    }
  }
  return Status::Ok();
}

ReductionServerCall::ReductionServerCall(Transport& transport, const AllreduceOptions& options,
                                         std::vector<char>* staging,
                                         std::unique_ptr<StalledCallCheck> stall_check)
    : state_(std::make_unique<State>(transport, options, staging)) {
  state_->stall_check = std::move(stall_check);
}

ReductionServerCall::~ReductionServerCall() = default;

Status ReductionServerCall::Send() {
  COHORT_RETURN_IF_ERROR(state_->Start());
  if (state_->empty) return Status::Ok();
  return state_->Drive(/*all=*/false);
}

Status ReductionServerCall::Finish() {
  State& s = *state_;
  if (s.empty) return Status::Ok();
  COHORT_RETURN_IF_ERROR(s.Drive(/*all=*/true));
  for (int r = 0; r < s.m; ++r) {
    COHORT_RETURN_IF_ERROR(
        s.verdicts->WaitWatching(s.header_sends[r], s.options.deadline,
                                 "all-reduce: header to " + ReducerName(s.n + r, s.n)));
  }
  // A reducer answers before it returns a result; one that owns no chunk of a small call is
  // waited for here.
  return s.verdicts->CheckAll(s.options.deadline);
}

Status ReductionServerAllreduce(Transport& transport, const AllreduceOptions& options) {
  // Kept per thread: a fresh buffer per call would fault in its pages every time.
  thread_local std::vector<char> staging;
  ReductionServerCall call(transport, options, &staging);
  COHORT_RETURN_IF_ERROR(call.Send());
  return call.Finish();
}

Status SendStopToReducers(Transport& transport, int num_workers, int num_reducers,
                          Deadline deadline) {
  RoundHeader header;
  header.kind = RoundHeader::kStop;
  // Each reducer answers a stop with one of its own. A worker waits for that answer before it
  // closes its endpoints: over TCP, closing a socket that still holds unread input resets the
  // connection and drops what was queued to send, the stop itself included.
  std::vector<RoundHeader> answers(num_reducers);
  std::vector<Request> answer_recvs;
  std::vector<Request> sends;
  Status first;
  auto note = [&first](const Status& s) {
    if (!s.ok() && first.ok()) first = s;
  };
  for (int r = 0; r < num_reducers; ++r) {
    auto recv = transport.Irecv(num_workers + r, MakeTag(0, kHeaderStep),
                                MutableBytes{&answers[r], sizeof(RoundHeader)});
    if (!recv.ok()) {
      note(recv.status());
      continue;
    }
    answer_recvs.push_back(std::move(*recv));
    auto send = transport.Isend(num_workers + r, MakeTag(0, kHeaderStep),
                                ConstBytes{&header, sizeof(header)});
    if (!send.ok()) {
      note(send.status());
      continue;
    }
    sends.push_back(std::move(*send));
  }
  for (auto& s : sends) note(s.Wait(deadline));
  for (auto& r : answer_recvs) note(r.Wait(deadline));
  return first;
}

ReductionServer::ReductionServer(Transport& transport, ReductionServerOptions options)
    : transport_(transport), options_(options), index_(transport.rank() - options.num_workers) {}

Status ReductionServer::Serve(const std::atomic<bool>& stop) {
  const int n = options_.num_workers;
  if (index_ < 0 || index_ >= options_.num_reducers) {
    return InvalidArgument("reduction server: transport rank " + std::to_string(transport_.rank()) +
                           " is not a reducer");
  }
  std::vector<RoundHeader> headers(n);
  incoming_.assign(n, RoundHeader());
  header_reqs_.clear();
  header_reqs_.resize(n);
  stopped_.assign(n, false);
  std::vector<bool> arrived(n, false);
  // Worker w failed before its header came: the others hear which worker failed (see Failures),
  // those whose header is here at once.
  auto fail = [&](int w, const Status& error) {
    lost_worker_ = -1;
    const Status got = Blame(w, error);
    std::vector<bool> told(n, false);
    for (int v = 0; v < n; ++v) {
      if (!arrived[v] || v == lost_worker_ || v == w) continue;
      if (headers[v].kind == RoundHeader::kStop) {
        stopped_[v] = true;
      } else if (headers[v].magic == RoundHeader::kMagic) {
        SendAbort(v, headers[v].seq, lost_worker_, got.code());
        told[v] = true;
      }
    }
    return Linger(lost_worker_, got, told, stop)
        .WithContext("reducer " + std::to_string(index_) + ": waiting for worker " +
                     std::to_string(w));
  };
  // Worker w's round header is not one a worker makes (`why`): every other worker hears it, those
  // whose headers are in at once, the rest as theirs come while the reducer lingers, instead of
  // finding it gone.
  auto refuse = [&](int w, const Status& why) {
    return Linger(w, why, SendRefusals(headers, arrived, w, StatusCode::kDataLoss), stop);
  };
  while (true) {
    // Headers of the next round, one per worker still running (posted as the round before began).
    arrived.assign(n, false);
    Status post_error;
    if (const int w = PostHeaderReceives(&post_error); w >= 0) return fail(w, post_error);
    // Headers are taken as they arrive, so a stop is answered at once whatever order the workers
    // finish in (the worker waits for that answer before it closes), then checked in rank order.
    int missing = static_cast<int>(std::count(stopped_.begin(), stopped_.end(), false));
    while (missing > 0) {
      for (int w = 0; w < n; ++w) {
        if (stopped_[w] || arrived[w]) continue;
        // Idle wait: no deadline between rounds, but stay responsive to `stop` and dead peers.
        if (!header_reqs_[w].Poll(SteadyClock::now() + options_.poll_interval)) {
          if (stop.load()) return Cancelled("reducer stopped");
          continue;
        }
        arrived[w] = true;
        --missing;
        const Status got = header_reqs_[w].Wait(SteadyClock::now());
        header_reqs_[w] = Request();
        if (!got.ok()) return fail(w, got);
        headers[w] = incoming_[w];
        if (headers[w].magic != RoundHeader::kMagic)
          return refuse(w, DataLoss("reducer: bad round header from worker " + std::to_string(w)));
        if (Status s = CheckRoundHeader(headers[w]); !s.ok())
          return refuse(w, s.WithContext("reducer: worker " + std::to_string(w)));
        if (headers[w].kind == RoundHeader::kStop) AnswerStop(w);
      }
    }
    std::optional<RoundHeader> round;  // the call of the round's first worker
    int first = -1;
    int odd = -1;  // the first worker whose call differs from it
    for (int w = 0; w < n; ++w) {
      if (!arrived[w]) continue;
      const RoundHeader& h = headers[w];
      if (h.kind == RoundHeader::kStop) {
        stopped_[w] = true;
        continue;
      }
      if (!round) {
        round = h;
        first = w;
      } else if (odd < 0 && !SameCall(h, *round)) {
        odd = w;
      }
    }
    if (std::all_of(stopped_.begin(), stopped_.end(), [](bool b) { return b; }))
      return Status::Ok();
    if (!round) continue;
    if (std::any_of(stopped_.begin(), stopped_.end(), [](bool b) { return b; })) {
      return Aborted("reducer: some workers stopped while others started a round");
    }
    if (odd >= 0) {
      COHORT_RETURN_IF_ERROR(SendVerdicts(headers, first, odd));
      const bool same = SameRoundArguments(headers[odd], *round);
      return InvalidArgument("reducer: workers disagree on the all-reduce: worker " +
                             std::to_string(odd) + " sent " + DescribeRound(headers[odd]) +
                             (same ? " after other calls" : "") +
                             ", the first worker of the round " + DescribeRound(*round));
    }
    // The next round's headers are listened for while this one is served: a worker that fails
    // meanwhile, or whose next call comes first (an overlapped call), is then seen (Failures). A
    // refused receive is the round's failure too, which it meets.
    (void)PostHeaderReceives(&post_error);
    lost_worker_ = -1;
    if (Status s = ServeRound(*round); !s.ok()) {
      if (lost_worker_ < 0) {
        if (s.code() == StatusCode::kResourceExhausted)
          (void)SendRefusals(headers, arrived, -1, s.code());
        return s;
      }
      SendAborts(round->seq, lost_worker_, s.code());
      return Linger(lost_worker_, s, std::vector<bool>(n, true), stop);
    }
    COHORT_RETURN_IF_ERROR(SendVerdicts(headers, first, odd));
    for (Request& r : verdict_sends_) (void)r.Wait(SteadyClock::now() + options_.round_timeout);
    verdict_sends_.clear();
    ++rounds_;
  }
}

int ReductionServer::PostHeaderReceives(Status* error) {
  for (int w = 0; w < options_.num_workers; ++w) {
    if (stopped_[w] || header_reqs_[w].valid()) continue;
    auto recv = transport_.Irecv(w, MakeTag(0, kHeaderStep),
                                 MutableBytes{&incoming_[w], sizeof(RoundHeader)});
    if (!recv.ok()) {
      *error = recv.status();
      return w;
    }
    header_reqs_[w] = std::move(*recv);
  }
  return -1;
}

Status ReductionServer::SendVerdicts(const std::vector<RoundHeader>& headers, int first, int odd) {
  const int n = options_.num_workers;
  verdicts_.assign(n, RoundHeader());
  verdict_sends_.clear();
  for (int w = 0; w < n; ++w) {
    RoundHeader& v = verdicts_[w];
    if (odd < 0) {
      v.kind = RoundHeader::kAccept;
    } else {
      // Each worker hears of a call that differs from its own.
      const int quoted = SameCall(headers[w], headers[first]) ? odd : first;
      v = headers[quoted];
      v.kind = RoundHeader::kReject;
      v.worker = static_cast<uint16_t>(quoted);
    }
    // Best effort: a worker that is gone needs no verdict, and the next round's header wait
    // finds it gone and tells the others (see Failures).
    auto send = transport_.IsendNotice(w, MakeTag(headers[w].seq, kVerdictStep),
                                       ConstBytes{&v, sizeof(RoundHeader)});
    if (send.ok()) verdict_sends_.push_back(std::move(*send));
  }
  if (odd < 0) return Status::Ok();
  // The reducer stops serving after a rejection: give the verdicts a moment to leave first.
  for (Request& r : verdict_sends_) (void)r.Wait(SteadyClock::now() + options_.poll_interval);
  verdict_sends_.clear();
  return Status::Ok();
}

Status ReductionServer::Blame(int w, Status s) {
  if (s.ok() || lost_worker_ >= 0) return s;
  // The worker the transport found gone first is the cause, whichever request noticed (after it,
  // requests to the others are refused too; workers ended by their launcher because of it go
  // later); else the worker of the failed request.
  const int gone = transport_.gone_peer();
  if (gone < 0 || gone >= options_.num_workers) {
    lost_worker_ = w;
    return s;
  }
  lost_worker_ = gone;
  // Then the error is its being gone, even where a refused request says only "poisoned" or
  // names a worker that went after it.
  if (gone == w && s.code() == StatusCode::kUnavailable) return s;
  return Unavailable("worker " + std::to_string(gone) + " is gone" +
                     (s.code() == StatusCode::kUnavailable ? " first" : "") + " (" + s.message() +
                     ")");
}

Status ReductionServer::ServeRound(const RoundHeader& header) {
  const int n = options_.num_workers;
  const int m = options_.num_reducers;
  const auto type = static_cast<DataType>(header.type);
  const auto op = static_cast<ReduceOp>(header.op);
  const auto wire = static_cast<DataType>(header.wire_type);
  const bool compressed = wire != type;
  const size_t es = DataTypeSize(type);
  const size_t wes = DataTypeSize(wire);
  const size_t chunk_elems = ChunkElems(header.chunk_bytes, es);
  const size_t num_chunks = (header.count + chunk_elems - 1) / chunk_elems;
  const int window = header.window;
  const Deadline deadline = SteadyClock::now() + options_.round_timeout;

  // The chunks this reducer owns, in order: index_, index_ + m, ...
  const size_t num_owned = num_chunks > static_cast<size_t>(index_)
                               ? (num_chunks - static_cast<size_t>(index_) + m - 1) / m
                               : 0;
  auto owned = [&](size_t j) { return static_cast<size_t>(index_) + j * m; };
  if (num_owned == 0) return Status::Ok();
  const int slots = static_cast<int>(std::min<size_t>(window, num_owned));
  const size_t limit =
      options_.max_round_bytes > 0 ? options_.max_round_bytes : PhysicalMemoryBytes();
  if (chunk_elems * wes > limit / n / static_cast<size_t>(slots)) {
    return ResourceExhausted("reducer " + std::to_string(index_) + ": a round of " +
                             std::to_string(n) + " workers, " + std::to_string(slots) +
                             " chunks in flight of " + std::to_string(chunk_elems * wes) +
                             " bytes each needs more than the " + std::to_string(limit) +
                             " bytes this reducer may take (lower the chunk size or the window)");
  }
  buffers_.resize(static_cast<size_t>(window) * n);
  for (int s = 0; s < slots; ++s) {
    for (int w = 0; w < n; ++w) {
      auto& b = buffers_[static_cast<size_t>(s) * n + w];
      if (b.size() < chunk_elems * wes) b.resize(chunk_elems * wes);
    }
  }
  if (compressed && widened_.size() < chunk_elems) widened_.resize(chunk_elems);
  auto chunk_bytes = [&](size_t c) {
    return std::min(chunk_elems, header.count - c * chunk_elems) * wes;
  };
  auto buf = [&](size_t j, int w) { return buffers_[(j % slots) * n + w].data(); };

  std::vector<std::vector<Request>> recvs(slots);
  for (int s = 0; s < slots; ++s) recvs[s].resize(n);
  auto post_recvs = [&](size_t j) -> Status {
    const size_t c = owned(j);
    const Tag tag = MakeTag(header.seq, 1 + static_cast<uint32_t>(c));
    for (int w = 0; w < n; ++w) {
      auto recv = transport_.Irecv(w, tag, MutableBytes{buf(j, w), chunk_bytes(c)});
      COHORT_RETURN_IF_ERROR(Blame(w, recv.status()));
      recvs[j % slots][w] = std::move(*recv);
    }
    return Status::Ok();
  };
  // Results go out in posting order, chunk by chunk; for chunk j worker (index + k) mod n is
  // k-th, so reducers in step send to different workers. With max_flows > 0 at most that many
  // are outstanding (each worker's link then carries about one result flow); 0: all n of a chunk
  // at once plus the previous chunk's.
  struct Pending {
    Request req;
    size_t j;
    int w;      // the worker it goes to
    bool last;  // the chunk's last result: its slot is free once this one has gone
  };
  std::deque<Pending> sends;
  const size_t max_sends =
      header.max_flows > 0 ? header.max_flows : std::numeric_limits<size_t>::max();
  auto wait_front = [&]() -> Status {
    Pending& f = sends.front();
    COHORT_RETURN_IF_ERROR(Blame(f.w, f.req.Wait(deadline))
                               .WithContext("reducer " + std::to_string(index_) +
                                            ": returning chunk " + std::to_string(owned(f.j))));
    const bool last = f.last;
    const size_t j = f.j;
    sends.pop_front();
    if (last && j + slots < num_owned) COHORT_RETURN_IF_ERROR(post_recvs(j + slots));
    return Status::Ok();
  };

  for (int j = 0; j < slots; ++j) COHORT_RETURN_IF_ERROR(post_recvs(j));
  for (size_t j = 0; j < num_owned; ++j) {
    const size_t c = owned(j);
    const size_t elems = chunk_bytes(c) / wes;
    // Sum in worker-rank order: deterministic regardless of arrival order. Compressed: in float32,
    // rounded to the wire type once, into worker 0's buffer, which goes back.
    for (int w = 0; w < n; ++w) {
      COHORT_RETURN_IF_ERROR(Blame(w, recvs[j % slots][w].Wait(deadline))
                                 .WithContext("reducer " + std::to_string(index_) + ": chunk " +
                                              std::to_string(c) + " from worker " +
                                              std::to_string(w)));
      if (compressed) {
        if (w == 0) WidenToF32(wire, widened_.data(), buf(j, 0), elems);
        if (w > 0) ReduceWidenedInto(wire, op, widened_.data(), buf(j, w), elems);
      } else if (w > 0) {
        ReduceInto(type, op, buf(j, 0), buf(j, w), elems);
      }
    }
    if (compressed) {
      if (op == ReduceOp::kAvg) ScaleForAverage(DataType::kF32, widened_.data(), elems, n);
      NarrowFromF32(wire, buf(j, 0), widened_.data(), elems);
    } else if (op == ReduceOp::kAvg) {
      ScaleForAverage(type, buf(j, 0), elems, n);
    }
    const Tag tag = MakeTag(header.seq, 1 + static_cast<uint32_t>(c));
    for (int k = 0; k < n; ++k) {
      while (sends.size() >= max_sends) COHORT_RETURN_IF_ERROR(wait_front());
      const int w = (index_ + k) % n;
      auto send = transport_.Isend(w, tag, ConstBytes{buf(j, 0), chunk_bytes(c)});
      COHORT_RETURN_IF_ERROR(Blame(w, send.status()));
      sends.push_back(Pending{std::move(*send), j, w, k == n - 1});
    }
    // The previous chunk's results must have gone before its slot takes the chunk `slots` ahead;
    // with one slot, this chunk's.
    const size_t done_below = slots == 1 ? j + 1 : j;
    while (!sends.empty() && sends.front().j < done_below) COHORT_RETURN_IF_ERROR(wait_front());
  }
  while (!sends.empty()) COHORT_RETURN_IF_ERROR(wait_front());
  return Status::Ok();
}

}  // namespace cohort::collective
