#include "collective/algorithms/reduction_server.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>

#include "collective/kernels/reduce.h"

namespace cohort::collective {
namespace {

size_t ChunkElems(size_t chunk_bytes, size_t es) { return std::max<size_t>(1, chunk_bytes / es); }

std::string ReducerName(int rank, int num_workers) {
  return "reducer " + std::to_string(rank - num_workers);
}

}  // namespace

Status ReductionServerAllreduce(Transport& transport, const AllreduceOptions& options) {
  const int n = options.num_workers;
  const int m = options.num_reducers;
  const int rank = transport.rank();
  if (m <= 0) return InvalidArgument("reduction server all-reduce needs at least one reducer");
  if (rank >= n) return InvalidArgument("reduction server all-reduce: rank is not a worker");
  if (transport.size() < n + m) return InvalidArgument("transport has fewer ranks than workers + reducers");
  if (options.count == 0) return Status::Ok();
  const size_t es = DataTypeSize(options.type);
  // Chunks of chunk_bytes, but smaller (not below 4 KiB) when that leaves a reducer fewer than two
  // chunks: every reducer's link should carry its share, and each should pipeline.
  size_t chunk_elems = ChunkElems(options.chunk_bytes, es);
  const size_t min_chunks = 2 * static_cast<size_t>(m);
  if (options.count < chunk_elems * min_chunks) {
    chunk_elems = std::max(ChunkElems(4096, es), (options.count + min_chunks - 1) / min_chunks);
  }
  const size_t num_chunks = (options.count + chunk_elems - 1) / chunk_elems;
  if (num_chunks >= kHeaderStep) return InvalidArgument("too many chunks: raise chunk_bytes");
  auto* data = static_cast<char*>(options.data);

  RoundHeader header;
  header.type = static_cast<uint8_t>(options.type);
  header.op = static_cast<uint8_t>(options.op);
  header.window = static_cast<uint8_t>(std::clamp(options.window, 1, 64));
  header.seq = options.seq;
  header.count = options.count;
  header.chunk_bytes = chunk_elems * es;
  std::vector<Request> header_sends;
  for (int r = 0; r < m; ++r) {
    COHORT_ASSIGN_OR_RETURN(Request req, transport.Isend(n + r, MakeTag(0, kHeaderStep),
                                                         ConstBytes{&header, sizeof(header)}));
    header_sends.push_back(std::move(req));
  }

  // Sliding window of chunks in flight: each has one send and one receive into the same place
  // (the reducer answers only after it has all of this chunk, so the send has finished reading).
  struct InFlight {
    Request send;
    Request recv;
    size_t chunk;
  };
  std::deque<InFlight> inflight;
  const size_t max_inflight = static_cast<size_t>(std::max(4, 2 * header.window * m));
  size_t next = 0;
  while (next < num_chunks || !inflight.empty()) {
    while (next < num_chunks && inflight.size() < max_inflight) {
      const int reducer = n + static_cast<int>(next % m);
      const size_t off = next * chunk_elems;
      const size_t bytes = std::min(chunk_elems, options.count - off) * es;
      const Tag tag = MakeTag(options.seq, 1 + static_cast<uint32_t>(next));
      InFlight f;
      f.chunk = next;
      COHORT_ASSIGN_OR_RETURN(f.recv, transport.Irecv(reducer, tag, MutableBytes{data + off * es, bytes}));
      COHORT_ASSIGN_OR_RETURN(f.send, transport.Isend(reducer, tag, ConstBytes{data + off * es, bytes}));
      inflight.push_back(std::move(f));
      ++next;
    }
    InFlight& f = inflight.front();
    const int reducer = n + static_cast<int>(f.chunk % m);
    COHORT_RETURN_IF_ERROR(f.send.Wait(options.deadline).WithContext(
        "all-reduce: sending chunk " + std::to_string(f.chunk) + " to " + ReducerName(reducer, n)));
    COHORT_RETURN_IF_ERROR(f.recv.Wait(options.deadline).WithContext(
        "all-reduce: result of chunk " + std::to_string(f.chunk) + " from " + ReducerName(reducer, n)));
    inflight.pop_front();
  }
  for (int r = 0; r < m; ++r) {
    COHORT_RETURN_IF_ERROR(header_sends[r].Wait(options.deadline).WithContext(
        "all-reduce: header to " + ReducerName(n + r, n)));
  }
  return Status::Ok();
}

Status SendStopToReducers(Transport& transport, int num_workers, int num_reducers, Deadline deadline) {
  RoundHeader header;
  header.kind = RoundHeader::kStop;
  std::vector<Request> sends;
  Status first;
  for (int r = 0; r < num_reducers; ++r) {
    auto req = transport.Isend(num_workers + r, MakeTag(0, kHeaderStep), ConstBytes{&header, sizeof(header)});
    if (!req.ok()) {
      if (first.ok()) first = req.status();
      continue;
    }
    sends.push_back(std::move(*req));
  }
  for (auto& s : sends) {
    Status st = s.Wait(deadline);
    if (!st.ok() && first.ok()) first = st;
  }
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
  std::vector<bool> stopped(n, false);
  while (true) {
    // Headers of the next round, one per worker still running, in rank order.
    std::vector<Request> reqs(n);
    for (int w = 0; w < n; ++w) {
      if (stopped[w]) continue;
      COHORT_ASSIGN_OR_RETURN(reqs[w], transport_.Irecv(w, MakeTag(0, kHeaderStep),
                                                        MutableBytes{&headers[w], sizeof(RoundHeader)}));
    }
    std::optional<RoundHeader> round;
    for (int w = 0; w < n; ++w) {
      if (stopped[w]) continue;
      // Idle wait: no deadline between rounds, but stay responsive to `stop` and to dead peers.
      while (!reqs[w].Poll(SteadyClock::now() + options_.poll_interval)) {
        if (stop.load()) return Cancelled("reducer stopped");
      }
      COHORT_RETURN_IF_ERROR(reqs[w].Wait(SteadyClock::now()).WithContext(
          "reducer " + std::to_string(index_) + ": waiting for worker " + std::to_string(w)));
      const RoundHeader& h = headers[w];
      if (h.magic != RoundHeader::kMagic) return DataLoss("reducer: bad round header from worker " + std::to_string(w));
      if (h.kind == RoundHeader::kStop) {
        stopped[w] = true;
        continue;
      }
      if (!round) {
        round = h;
      } else if (h.count != round->count || h.type != round->type || h.op != round->op ||
                 h.seq != round->seq || h.chunk_bytes != round->chunk_bytes) {
        return InvalidArgument("reducer: workers disagree on the all-reduce (worker " + std::to_string(w) +
                               " sent count " + std::to_string(h.count) + ", expected " +
                               std::to_string(round->count) + ")");
      }
    }
    if (std::all_of(stopped.begin(), stopped.end(), [](bool b) { return b; })) return Status::Ok();
    if (!round) continue;
    if (std::any_of(stopped.begin(), stopped.end(), [](bool b) { return b; })) {
      return Aborted("reducer: some workers stopped while others started a round");
    }
    COHORT_RETURN_IF_ERROR(ServeRound(*round));
    ++rounds_;
  }
}

Status ReductionServer::ServeRound(const RoundHeader& header) {
  const int n = options_.num_workers;
  const int m = options_.num_reducers;
  if (!IsValid(static_cast<DataType>(header.type)) || !IsValid(static_cast<ReduceOp>(header.op))) {
    return DataLoss("reducer: bad type or op in round header");
  }
  const auto type = static_cast<DataType>(header.type);
  const auto op = static_cast<ReduceOp>(header.op);
  const size_t es = DataTypeSize(type);
  const size_t chunk_elems = ChunkElems(header.chunk_bytes, es);
  const size_t num_chunks = (header.count + chunk_elems - 1) / chunk_elems;
  const int window = std::max<int>(1, header.window);
  const Deadline deadline = SteadyClock::now() + options_.round_timeout;

  // The chunks this reducer owns, in order.
  std::vector<size_t> owned;
  for (size_t c = index_; c < num_chunks; c += m) owned.push_back(c);
  if (owned.empty()) return Status::Ok();
  const int slots = std::min<int>(window, static_cast<int>(owned.size()));
  buffers_.resize(static_cast<size_t>(window) * n);
  for (int s = 0; s < slots; ++s) {
    for (int w = 0; w < n; ++w) {
      auto& b = buffers_[static_cast<size_t>(s) * n + w];
      if (b.size() < chunk_elems * es) b.resize(chunk_elems * es);
    }
  }
  auto chunk_bytes = [&](size_t c) { return std::min(chunk_elems, header.count - c * chunk_elems) * es; };
  auto buf = [&](size_t j, int w) { return buffers_[(j % slots) * n + w].data(); };

  std::vector<std::vector<Request>> recvs(slots);
  std::vector<std::vector<Request>> sends(slots);
  for (int s = 0; s < slots; ++s) {
    recvs[s].resize(n);
    sends[s].resize(n);
  }
  auto post_recvs = [&](size_t j) -> Status {
    const size_t c = owned[j];
    const Tag tag = MakeTag(header.seq, 1 + static_cast<uint32_t>(c));
    for (int w = 0; w < n; ++w) {
      COHORT_ASSIGN_OR_RETURN(recvs[j % slots][w],
                              transport_.Irecv(w, tag, MutableBytes{buf(j, w), chunk_bytes(c)}));
    }
    return Status::Ok();
  };
  auto wait_sends = [&](size_t j) -> Status {
    for (int w = 0; w < n; ++w) {
      COHORT_RETURN_IF_ERROR(sends[j % slots][w].Wait(deadline).WithContext(
          "reducer " + std::to_string(index_) + ": returning chunk " + std::to_string(owned[j]) +
          " to worker " + std::to_string(w)));
    }
    return Status::Ok();
  };

  for (int j = 0; j < slots; ++j) COHORT_RETURN_IF_ERROR(post_recvs(j));
  for (size_t j = 0; j < owned.size(); ++j) {
    const size_t c = owned[j];
    const size_t elems = chunk_bytes(c) / es;
    // Sum in worker-rank order: deterministic regardless of arrival order.
    for (int w = 0; w < n; ++w) {
      COHORT_RETURN_IF_ERROR(recvs[j % slots][w].Wait(deadline).WithContext(
          "reducer " + std::to_string(index_) + ": chunk " + std::to_string(c) + " from worker " +
          std::to_string(w)));
      if (w > 0) ReduceInto(type, op, buf(j, 0), buf(j, w), elems);
    }
    if (op == ReduceOp::kAvg) ScaleForAverage(type, buf(j, 0), elems, n);
    const Tag tag = MakeTag(header.seq, 1 + static_cast<uint32_t>(c));
    for (int w = 0; w < n; ++w) {
      COHORT_ASSIGN_OR_RETURN(sends[j % slots][w],
                              transport_.Isend(w, tag, ConstBytes{buf(j, 0), chunk_bytes(c)}));
    }
    if (slots == 1) {
      COHORT_RETURN_IF_ERROR(wait_sends(j));
      if (j + 1 < owned.size()) COHORT_RETURN_IF_ERROR(post_recvs(j + 1));
    } else if (j > 0) {
      // The previous chunk's slot is free once its results have gone out: refill it.
      COHORT_RETURN_IF_ERROR(wait_sends(j - 1));
      if (j - 1 + slots < owned.size()) COHORT_RETURN_IF_ERROR(post_recvs(j - 1 + slots));
    }
  }
  if (slots > 1) COHORT_RETURN_IF_ERROR(wait_sends(owned.size() - 1));
  return Status::Ok();
}

}  // namespace cohort::collective
