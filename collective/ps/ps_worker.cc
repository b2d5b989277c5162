#include "collective/ps/ps_worker.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "collective/generation.h"
#include "collective/ps/ps_framing.h"
#include "collective/store_bootstrap.h"
#include "common/env.h"
#include "common/logging.h"

namespace cohort::collective::ps {
struct PsWorker::Pending {
  struct One {
    int server = 0;
    PsOp op = PsOp::kPush;
    std::vector<char> request;
    std::vector<uint64_t> keys;
    std::vector<char> reply;
    void* pull_into = nullptr;
    size_t pull_bytes = 0;
    bool inline_pull = false;
    collective::Request send, keys_send, payload_send, reply_recv, data_recv;
  };
  std::vector<std::unique_ptr<One>> ones;
  std::string layout;
  FlightRecording recording;  // a push or pull, until Wait
};

uint32_t PsWorker::NextId() {
  const uint32_t id = next_id_;
  next_id_ = (next_id_ + 1) & ((1u << kTagSeqBits) - 1);
  if (next_id_ == 0) next_id_ = 1;
  return id;
}

StatusOr<std::unique_ptr<PsWorker>> PsWorker::Attach(std::unique_ptr<Transport> transport,
                                                     int num_workers, int num_servers,
                                                     PsWorkerOptions options) {
  if (transport == nullptr) return InvalidArgument("parameter-server worker: no transport");
  if (num_workers < 1 || num_servers < 1 || transport->size() != num_workers + num_servers ||
      transport->rank() >= num_workers) {
    return InvalidArgument("parameter-server worker: rank " + std::to_string(transport->rank()) +
                           " of a transport of " + std::to_string(transport->size()) +
                           " is not one of " + std::to_string(num_workers) + " workers with " +
                           std::to_string(num_servers) + " servers");
  }
  std::unique_ptr<PsWorker> w(new PsWorker());
  w->num_workers_ = num_workers;
  w->num_servers_ = num_servers;
  w->options_ = std::move(options);
  w->transport_ = std::move(transport);
  w->recorder_ = w->options_.flight_recorder != nullptr ? w->options_.flight_recorder
                                                        : FlightRecorder::ForProcess();
  if (w->recorder_ != nullptr) w->flight_comm_id_ = w->recorder_->RegisterCommunicator();
  return w;
}

StatusOr<std::unique_ptr<PsWorker>> PsWorker::Create(Bootstrap& bootstrap, int rank,
                                                     int num_workers, int num_servers,
                                                     PsWorkerOptions options) {
  if (num_workers < 1 || num_servers < 1 || rank < 0 || rank >= num_workers) {
    return InvalidArgument("parameter-server worker " + std::to_string(rank) + " of " +
                           std::to_string(num_workers) + " with " + std::to_string(num_servers) +
                           " servers is not valid");
  }
  std::string generation;
  if (rank == 0) {
    COHORT_ASSIGN_OR_RETURN(generation,
                            PublishGeneration(bootstrap, options.key_prefix, num_workers));
  } else {
    COHORT_ASSIGN_OR_RETURN(generation, AwaitGeneration(bootstrap, options.key_prefix, rank,
                                                        SteadyClock::now() + options.timeout));
  }
  COHORT_ASSIGN_OR_RETURN(
      auto transport,
      OpenGenerationTransport(bootstrap, options.key_prefix, generation, rank,
                              num_workers + num_servers, options.timeout,
                              [num_workers](int r) { return PsRankName(r, num_workers); }));
  return Attach(std::move(transport), num_workers, num_servers, std::move(options));
}

StatusOr<std::unique_ptr<PsWorker>> PsWorker::FromEnvironment() {
  COHORT_ASSIGN_OR_RETURN(int rank, IntFromEnvironment("RANK", 0));
  const char* nw = std::getenv("COHORT_NUM_WORKERS");
  COHORT_ASSIGN_OR_RETURN(int workers,
                          IntFromEnvironment(nw && *nw ? "COHORT_NUM_WORKERS" : "WORLD_SIZE", 1));
  int servers = 0;
  const char* addrs = std::getenv("COHORT_PS_ADDRS");
  if (addrs != nullptr && *addrs != '\0') {
    servers = 1 + static_cast<int>(std::count(addrs, addrs + std::strlen(addrs), ','));
  }
  COHORT_ASSIGN_OR_RETURN(servers, IntFromEnvironment("COHORT_NUM_PS", servers));
  if (servers == 0)
    return InvalidArgument("the job has no parameter servers (COHORT_PS_ADDRS is empty)");
  COHORT_ASSIGN_OR_RETURN(int timeout_ms, IntFromEnvironment("COHORT_COMM_TIMEOUT_MS", 60000));
  if (timeout_ms == 0) return InvalidArgument("COHORT_COMM_TIMEOUT_MS must be positive");
  PsWorkerOptions options;
  options.timeout = std::chrono::milliseconds(timeout_ms);
  COHORT_ASSIGN_OR_RETURN(JobBootstrap job, BootstrapFromEnvironment(rank == 0, options.timeout));
  COHORT_ASSIGN_OR_RETURN(auto worker, Create(*job.client, rank, workers, servers, options));
  worker->job_ = std::move(job);
  return worker;
}

PsWorker::~PsWorker() {
  if (transport_ != nullptr && !poisoned_) {
    pending_.clear();
    std::vector<ReplyHeader> replies;
    Status s = Broadcast(PsOp::kBye, &replies);
    if (!s.ok())
      spdlog::debug("parameter-server worker {}: goodbye: {}", transport_->rank(), s.ToString());
  }
  pending_.clear();
  transport_.reset();
  job_.client.reset();
  job_.server.reset();
}

Status PsWorker::Post(Pending* p, int server, RequestHeader h, std::span<const uint64_t> keys,
                      ConstBytes payload, MutableBytes pull_into, const std::string* layout) {
  auto one = std::make_unique<Pending::One>();
  one->server = server;
  one->op = h.op;
  const int peer = num_workers_ + server;
  if (layout != nullptr) h.layout_bytes = layout->size();
  h.clock = clock_;
  EncodedRequest encoded = EncodeRequest(h, keys, payload);
  h = encoded.header;
  one->request = std::move(encoded.message);
  if (encoded.keys_follow) one->keys.assign(keys.begin(), keys.end());

  // Receives first, so the reply never waits for a posted buffer.
  const bool pull = h.op == PsOp::kPull;
  one->inline_pull = pull && h.payload_bytes <= kInlineReplyBytes;
  one->pull_into = pull_into.data;
  one->pull_bytes = pull ? h.payload_bytes : 0;
  one->reply.resize(sizeof(ReplyHeader) + (one->inline_pull ? h.payload_bytes : 0));
  COHORT_ASSIGN_OR_RETURN(one->reply_recv,
                          transport_->Irecv(peer, MessageTag(h.id, kReplyStep),
                                            MutableBytes{one->reply.data(), one->reply.size()}));
  if (pull && !one->inline_pull) {
    COHORT_ASSIGN_OR_RETURN(one->data_recv,
                            transport_->Irecv(peer, MessageTag(h.id, kDataStep),
                                              MutableBytes{pull_into.data, h.payload_bytes}));
  }
  COHORT_ASSIGN_OR_RETURN(
      one->send,
      transport_->Isend(peer, RequestTag(), ConstBytes{one->request.data(), one->request.size()}));
  if (layout != nullptr) {
    COHORT_ASSIGN_OR_RETURN(one->keys_send,
                            transport_->Isend(peer, MessageTag(h.id, kKeysStep),
                                              ConstBytes{layout->data(), layout->size()}));
  } else if (!one->keys.empty()) {
    COHORT_ASSIGN_OR_RETURN(one->keys_send,
                            transport_->Isend(peer, MessageTag(h.id, kKeysStep),
                                              ConstBytes{one->keys.data(), one->keys.size() * 8}));
  }
  if (encoded.payload_follows) {
    COHORT_ASSIGN_OR_RETURN(one->payload_send,
                            transport_->Isend(peer, MessageTag(h.id, kPayloadStep), payload));
  }
  p->ones.push_back(std::move(one));
  return Status::Ok();
}

Status PsWorker::WaitPending(Pending* p, std::vector<ReplyHeader>* replies) {
  const Deadline deadline = SteadyClock::now() + options_.timeout;
  Status first;
  for (auto& one : p->ones) {
    const std::string server = "parameter server " + std::to_string(one->server);
    for (collective::Request* r :
         {&one->send, &one->keys_send, &one->payload_send, &one->reply_recv, &one->data_recv}) {
      if (!r->valid()) continue;
      Status s = r->Wait(deadline);
      if (!s.ok()) {
        poisoned_ = true;
        return s.WithContext(server);
      }
    }
    auto rh = DecodeReply(ConstBytes{one->reply.data(), one->reply.size()});
    if (!rh.ok()) {
      poisoned_ = true;
      return DataLoss(server + ": " + rh.status().message());
    }
    if (replies != nullptr) replies->push_back(*rh);
    const Status replied = ReplyStatus(*rh);
    if (!replied.ok()) {
      if (first.ok()) first = Status(replied.code(), server + ": " + replied.message());
      continue;
    }
    if (one->inline_pull && one->pull_bytes > 0) {
      std::memcpy(one->pull_into, one->reply.data() + sizeof(ReplyHeader), one->pull_bytes);
    }
  }
  return first;
}

StatusOr<RequestId> PsWorker::Issue(PsOp op, std::span<const uint64_t> keys, const void* send,
                                    void* recv, size_t bytes, DataType type) {
  const char* what = op == PsOp::kPush ? "push" : "pull";
  if (poisoned_)
    return Aborted(std::string(what) +
                   ": the worker is poisoned by an earlier transport error; rebuild it");
  if (layout_.num_keys() == 0) return FailedPrecondition(std::string(what) + " before InitModel");
  if (bytes > 0 && send == nullptr && recv == nullptr)
    return InvalidArgument(std::string(what) + ": null buffer");
  std::vector<size_t> indices;
  indices.reserve(keys.size());
  uint64_t total = 0;
  for (size_t j = 0; j < keys.size(); ++j) {
    if (j > 0 && keys[j] <= keys[j - 1])
      return InvalidArgument(std::string(what) + ": keys must be strictly increasing");
    auto i = layout_.IndexOf(keys[j]);
    if (!i) return NotFound(std::string(what) + ": unknown key " + std::to_string(keys[j]));
    const KeySpec& k = layout_.keys()[*i];
    if (k.type != type) {
      return InvalidArgument(std::string(what) + ": key " + std::to_string(k.key) + " holds " +
                             std::string(DataTypeName(k.type)) + ", not " +
                             std::string(DataTypeName(type)));
    }
    indices.push_back(*i);
    total += layout_.bytes(*i);
  }
  if (total != bytes) {
    return InvalidArgument(std::string(what) + ": wrong size: " + std::to_string(bytes) +
                           " bytes for keys holding " + std::to_string(total));
  }
  const bool range = indices.empty() || indices.back() - indices.front() + 1 == indices.size();
  auto pending = std::make_unique<Pending>();
  const uint32_t id = NextId();
  const std::vector<ServerSlice> slices = SplitRequest(layout_, boundaries_, indices);
  FlightRecord record;
  record.op = op == PsOp::kPush ? FlightOp::kPsPush : FlightOp::kPsPull;
  record.op_seq = static_cast<uint32_t>(next_request_);
  record.comm_id = flight_comm_id_;
  record.bytes = bytes;
  record.dtype = static_cast<uint8_t>(static_cast<uint8_t>(type) + 1);
  record.peer = slices.size() == 1 ? slices.front().server : -1;
  record.group_size = num_servers_;
  pending->recording = FlightRecording(recorder_, record);
  for (const ServerSlice& sl : slices) {
    RequestHeader h;
    h.op = op;
    h.type = static_cast<uint8_t>(type);
    h.id = id;
    h.payload_bytes = sl.buffer_end - sl.buffer_begin;
    std::span<const uint64_t> sub = keys.subspan(sl.first_key, sl.end_key - sl.first_key);
    if (range) {
      h.flags |= kKeyRange;
      h.first_key = sub.front();
      h.num_keys = static_cast<uint32_t>(sub.size());
    }
    ConstBytes payload;
    MutableBytes into;
    if (op == PsOp::kPush)
      payload = ConstBytes{static_cast<const char*>(send) + sl.buffer_begin, h.payload_bytes};
    if (op == PsOp::kPull)
      into = MutableBytes{static_cast<char*>(recv) + sl.buffer_begin, h.payload_bytes};
    Status s = Post(pending.get(), sl.server, h, sub, payload, into, nullptr);
    if (!s.ok()) {
      poisoned_ = true;
      pending->recording.Finish(s);
      return s;
    }
  }
  const RequestId rid = next_request_++;
  pending_[rid] = std::move(pending);
  return rid;
}

StatusOr<RequestId> PsWorker::Push(std::span<const uint64_t> keys, const void* data, size_t bytes,
                                   DataType type) {
  return Issue(PsOp::kPush, keys, data, nullptr, bytes, type);
}

StatusOr<RequestId> PsWorker::Pull(std::span<const uint64_t> keys, void* data, size_t bytes,
                                   DataType type) {
  return Issue(PsOp::kPull, keys, nullptr, data, bytes, type);
}

StatusOr<RequestId> PsWorker::PushAll(const void* data) {
  if (!all_keys_one_type_)
    return InvalidArgument("push: the model's keys have more than one type; name the keys");
  return Push(all_keys_, data, layout_.total_bytes(), layout_.keys().front().type);
}

StatusOr<RequestId> PsWorker::PullAll(void* data) {
  if (!all_keys_one_type_)
    return InvalidArgument("pull: the model's keys have more than one type; name the keys");
  return Pull(all_keys_, data, layout_.total_bytes(), layout_.keys().front().type);
}

Status PsWorker::Wait(RequestId id) {
  auto it = pending_.find(id);
  if (it == pending_.end())
    return NotFound("no outstanding parameter-server request " + std::to_string(id));
  std::unique_ptr<Pending> p = std::move(it->second);
  pending_.erase(it);
  Status s = WaitPending(p.get(), nullptr);
  p->recording.Finish(s);
  return s;
}

Status PsWorker::Broadcast(PsOp op, std::vector<ReplyHeader>* replies) {
  if (poisoned_) return Aborted("the worker is poisoned by an earlier transport error; rebuild it");
  Pending p;
  const uint32_t id = NextId();
  for (int s = 0; s < num_servers_; ++s) {
    RequestHeader h;
    h.op = op;
    h.id = id;
    Status st = Post(&p, s, h, {}, ConstBytes{}, MutableBytes{}, nullptr);
    if (!st.ok()) {
      poisoned_ = true;
      return st;
    }
  }
  return WaitPending(&p, replies);
}

Status PsWorker::Clock() {
  COHORT_RETURN_IF_ERROR(Broadcast(PsOp::kClock, nullptr));
  ++clock_;
  return Status::Ok();
}

Status PsWorker::Shutdown() { return Broadcast(PsOp::kShutdown, nullptr); }

Status PsWorker::Barrier() { return Broadcast(PsOp::kBarrier, nullptr); }

StatusOr<int64_t> PsWorker::InitModel(const ModelLayout& layout, const void* values,
                                      const OptimizerConfig& optimizer, bool reset) {
  if (poisoned_)
    return Aborted("init: the worker is poisoned by an earlier transport error; rebuild it");
  if (layout.num_keys() == 0) return InvalidArgument("init: the model has no keys");
  COHORT_RETURN_IF_ERROR(optimizer.Validate());
  layout_ = layout;
  boundaries_ = layout_.ShardBoundaries(num_servers_);
  all_keys_.clear();
  all_keys_one_type_ = true;
  for (const KeySpec& k : layout_.keys()) {
    all_keys_.push_back(k.key);
    if (k.type != layout_.keys().front().type) all_keys_one_type_ = false;
  }
  Pending p;
  p.layout = layout_.Serialize();
  const uint32_t id = NextId();
  for (int s = 0; s < num_servers_; ++s) {
    RequestHeader h;
    h.op = PsOp::kInit;
    h.id = id;
    ConstBytes payload;
    if (values != nullptr) {
      h.flags |= kHasValues;
      if (reset) h.flags |= kReset;
      h.optimizer = optimizer;
      h.payload_bytes = boundaries_[s + 1] - boundaries_[s];
      payload = ConstBytes{static_cast<const char*>(values) + boundaries_[s], h.payload_bytes};
    }
    Status st = Post(&p, s, h, {}, payload, MutableBytes{}, &p.layout);
    if (!st.ok()) {
      poisoned_ = true;
      return st;
    }
  }
  std::vector<ReplyHeader> replies;
  COHORT_RETURN_IF_ERROR(WaitPending(&p, &replies));
  int64_t clock = INT64_MAX;
  for (const ReplyHeader& r : replies) clock = std::min(clock, r.clock);
  clock_ = replies.empty() ? 0 : clock;
  return clock_;
}

StatusOr<ReplyHeader> PsWorker::RawRequest(int server, RequestHeader header,
                                           std::span<const uint64_t> keys, ConstBytes payload,
                                           MutableBytes pull_into) {
  if (server < 0 || server >= num_servers_)
    return InvalidArgument("no parameter server " + std::to_string(server));
  if (poisoned_) return Aborted("the worker is poisoned by an earlier transport error; rebuild it");
  header.id = NextId();
  Pending p;
  COHORT_RETURN_IF_ERROR(Post(&p, server, header, keys, payload, pull_into, nullptr));
  std::vector<ReplyHeader> replies;
  Status s = WaitPending(&p, &replies);
  if (replies.empty()) return s;
  return replies.front();
}

}  // namespace cohort::collective::ps
