#include "collective/ps/ps_server.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "collective/generation.h"
#include "collective/ps/ps_checkpoint.h"
#include "collective/ps/ps_framing.h"
#include "common/checkpoint.h"
#include "common/logging.h"

namespace cohort::collective::ps {
namespace {

// Values of a request that will be refused are still received (so the worker's send completes)
// up to this size, or the server's own share if larger: a bound on what a bad header costs.
constexpr uint64_t kMaxDrainBytes = uint64_t{256} << 20;

}  // namespace

struct PsServer::Request {
  RequestHeader h;
  std::vector<uint64_t> keys;  // explicit key list (empty for kKeyRange)
  const char* payload = nullptr;
  // Values received in their own message land in the serving thread's buffer, reused across
  // requests: fresh multi-MiB allocations are fresh mmaps, and UCX would register each anew.
  std::vector<char>* payload_storage = nullptr;
  std::string layout;
  Status problem;  // found while receiving: answered without handling

  KeySelection selection() const {
    KeySelection s;
    s.type = h.type;
    s.range = (h.flags & kKeyRange) != 0;
    s.first_key = h.first_key;
    s.num_keys = h.num_keys;
    s.keys = keys;
    s.bytes = h.payload_bytes;
    return s;
  }
};

PsServer::PsServer(PsServerOptions options)
    : options_(std::move(options)),
      shard_(options_.num_servers, options_.server_index),
      clocks_(options_.num_workers, options_.poll_interval) {}

PsServer::~PsServer() = default;

bool PsServer::initialized() const {
  MutexLock lock(&state_mu_);
  return initialized_;
}

double PsServer::Scale() const {
  const double rescale = shard_.optimizer().rescale;
  return rescale > 0 ? rescale : 1.0 / std::max(1, options_.num_workers);
}

// ---- checkpoints ----

Status PsServer::Checkpoint() {
  if (!initialized()) return FailedPrecondition("checkpoint: the model is not initialized");
  MutexLock lock(&apply_mu_);
  return CheckpointLocked();
}

void PsServer::MaybeCheckpointLocked(int64_t step) {
  if (options_.checkpoint_dir.empty() || options_.checkpoint_every <= 0) return;
  if (step / options_.checkpoint_every <= last_checkpoint_step_ / options_.checkpoint_every) return;
  Status s = CheckpointLocked();
  if (!s.ok()) {
    spdlog::error("parameter server {}: checkpoint at step {} failed: {}", options_.server_index,
                  step, s.ToString());
  }
}

Status PsServer::CheckpointLocked() {
  if (options_.checkpoint_dir.empty()) return Status::Ok();
  ShardCheckpoint c;
  c.server_index = options_.server_index;
  c.num_servers = options_.num_servers;
  c.optimizer = shard_.optimizer();
  c.applied_clock = clocks_.applied();
  c.async_pushes = async_pushes_.load();
  c.step = c.optimizer.staleness >= 0
               ? c.applied_clock
               : static_cast<int64_t>(c.async_pushes / std::max(1, options_.num_workers));
  c.layout = shard_.layout();
  c.state = shard_.SaveState();
  COHORT_ASSIGN_OR_RETURN(std::string path, WriteShardCheckpoint(options_.checkpoint_dir, c));
  last_checkpoint_step_ = c.step;
  checkpoints_.fetch_add(1);
  if (options_.keep_checkpoints > 0) {
    Status r = RetainLatest(options_.checkpoint_dir, options_.keep_checkpoints);
    if (!r.ok()) spdlog::warn("parameter server {}: {}", options_.server_index, r.ToString());
  }
  spdlog::debug("parameter server {}: checkpoint {}", options_.server_index, path);
  return Status::Ok();
}

Status PsServer::Restore(const std::string& path) {
  COHORT_ASSIGN_OR_RETURN(ShardCheckpoint c, ReadShardCheckpoint(path));
  if (c.server_index != options_.server_index || c.num_servers != options_.num_servers) {
    return FailedPrecondition(
        "checkpoint " + c.path + " is of parameter server " + std::to_string(c.server_index) +
        " of " + std::to_string(c.num_servers) + "; this is server " +
        std::to_string(options_.server_index) + " of " + std::to_string(options_.num_servers));
  }
  MutexLock lock(&state_mu_);
  MutexLock apply_lock(&apply_mu_);
  COHORT_RETURN_IF_ERROR(shard_.Init(c.layout, c.optimizer, nullptr, 0));
  Status loaded = shard_.LoadState(c.state);
  if (!loaded.ok()) {
    return DataLoss("parameter-server checkpoint " + c.path + ": " + loaded.message());
  }
  clocks_.ResetTo(c.applied_clock);
  async_pushes_.store(c.async_pushes);
  last_checkpoint_step_ = c.step;
  restored_step_ = c.step;
  initialized_ = true;
  init_cv_.NotifyAll();
  spdlog::info("parameter server {}: restored {} (step {}, {} keys, {} bytes, {})",
               options_.server_index, c.path, c.step, shard_.num_parts(), shard_.owned_bytes(),
               shard_.optimizer().ToString());
  return Status::Ok();
}

// ---- requests ----

PsServer::Handler PsServer::HandlerFor(PsOp op) {
  static constexpr std::pair<PsOp, Handler> kHandlers[] = {
      {PsOp::kInit, &PsServer::HandleInit},         {PsOp::kPush, &PsServer::HandlePush},
      {PsOp::kPull, &PsServer::HandlePull},         {PsOp::kClock, &PsServer::HandleClock},
      {PsOp::kShutdown, &PsServer::HandleShutdown}, {PsOp::kBye, &PsServer::HandleBye},
      {PsOp::kBarrier, &PsServer::HandleBarrier},
  };
  for (const auto& [o, handler] : kHandlers) {
    if (o == op) return handler;
  }
  return nullptr;
}

Status PsServer::HandleInit(const Call& c) {
  const Request& r = c.request;
  COHORT_ASSIGN_OR_RETURN(ModelLayout layout, ModelLayout::Parse(r.layout));
  MutexLock lock(&state_mu_);
  if ((r.h.flags & kHasValues) && (r.h.flags & kReset) && initialized_) {
    // Replace the model: only sound while no other worker has a request in flight (benchmarks
    // reset between phases, behind a barrier).
    MutexLock apply_lock(&apply_mu_);
    initialized_ = false;
    clocks_.ResetTo(0);
    async_pushes_.store(0);
    last_checkpoint_step_ = 0;
  }
  if (!initialized_ && (r.h.flags & kHasValues)) {
    MutexLock apply_lock(&apply_mu_);
    COHORT_RETURN_IF_ERROR(shard_.Init(layout, options_.optimizer_override.value_or(r.h.optimizer),
                                       r.payload, r.h.payload_bytes));
    initialized_ = true;
    init_cv_.NotifyAll();
    spdlog::info(
        "parameter server {}: model of {} keys initialized; this shard holds {} keys, {} bytes; {}",
        options_.server_index, layout.num_keys(), shard_.num_parts(), shard_.owned_bytes(),
        shard_.optimizer().ToString());
  }
  const Deadline deadline = SteadyClock::now() + options_.timeout;
  while (!initialized_) {
    if (failed_.load()) return Aborted("the generation ended while waiting for the chief's init");
    if (SteadyClock::now() >= deadline) {
      return DeadlineExceeded("the chief (worker 0) did not initialize the model within " +
                              FormatDuration(options_.timeout));
    }
    init_cv_.WaitUntil(&state_mu_, std::min(deadline, SteadyClock::now() + options_.poll_interval));
  }
  const ModelLayout& held = shard_.layout();
  if (!(layout == held)) {
    return InvalidArgument("init: the layout (" + std::to_string(layout.num_keys()) + " keys, " +
                           std::to_string(layout.total_bytes()) +
                           " bytes) differs from the model this server holds (" +
                           std::to_string(held.num_keys()) + " keys, " +
                           std::to_string(held.total_bytes()) + " bytes)");
  }
  return Status::Ok();
}

Status PsServer::HandlePush(const Call& c) {
  const Request& r = c.request;
  if (!initialized()) {
    return FailedPrecondition("push before the model is initialized (the chief calls InitModel)");
  }
  if (shutdown_.load()) {
    return FailedPrecondition("push after shutdown: parameter server " +
                              std::to_string(options_.server_index) + " accepts no more updates");
  }
  Shard::Parts parts;
  COHORT_RETURN_IF_ERROR(shard_.Resolve(r.selection(), &parts));
  if (shard_.optimizer().staleness < 0) {
    shard_.Update(parts, r.payload, Scale());
    const uint64_t n = async_pushes_.fetch_add(1) + 1;
    if (options_.checkpoint_every > 0 && !options_.checkpoint_dir.empty() &&
        n % static_cast<uint64_t>(options_.num_workers) == 0) {
      MutexLock lock(&apply_mu_);
      MaybeCheckpointLocked(static_cast<int64_t>(n / options_.num_workers));
    }
  } else {
    shard_.Accumulate(parts, clocks_.ClockAndApplied(c.worker).first, r.payload);
  }
  pushes_.fetch_add(1);
  bytes_pushed_.fetch_add(r.h.payload_bytes);
  return Status::Ok();
}

void PsServer::ApplyFinishedClocks() {
  MutexLock apply_lock(&apply_mu_);
  const auto [from, target] = clocks_.Unapplied();
  if (target <= from) return;
  shard_.ApplyAccumulated(from, target, Scale());
  clocks_.SetApplied(target);
  MaybeCheckpointLocked(target);
}

Status PsServer::HandleClock(const Call& c) {
  const bool finished = clocks_.Tick(c.worker);
  clock_count_.fetch_add(1);
  if (finished && initialized()) ApplyFinishedClocks();
  clocks_.Notify();
  return Status::Ok();
}

Status PsServer::HandlePull(const Call& c) {
  const Request& r = c.request;
  const uint64_t owned = shard_.owned_bytes();
  if (r.h.payload_bytes > owned) {
    c.pulled.resize(0);
    return InvalidArgument("wrong size: pull of " + std::to_string(r.h.payload_bytes) +
                           " bytes, but parameter server " + std::to_string(options_.server_index) +
                           " holds " + std::to_string(owned) + " bytes");
  }
  c.pulled.resize(r.h.payload_bytes);
  if (!initialized()) {
    return FailedPrecondition("pull before the model is initialized (the chief calls InitModel)");
  }
  Shard::Parts parts;
  COHORT_RETURN_IF_ERROR(shard_.Resolve(r.selection(), &parts));
  if (shard_.optimizer().staleness >= 0) {
    COHORT_RETURN_IF_ERROR(clocks_.WaitReadable(c.worker, shard_.optimizer().staleness,
                                                options_.timeout,
                                                [&] { return GenerationOver(c.stop); }));
  }
  shard_.Read(parts, c.pulled.data());
  pulls_.fetch_add(1);
  bytes_pulled_.fetch_add(r.h.payload_bytes);
  return Status::Ok();
}

Status PsServer::HandleShutdown(const Call& c) {
  if (!shutdown_.exchange(true)) {
    spdlog::info("parameter server {}: shutdown requested by worker {}", options_.server_index,
                 c.worker);
  }
  return Status::Ok();
}

Status PsServer::HandleBye(const Call& c) {
  const bool finished = clocks_.Leave(c.worker);
  if (finished && initialized()) ApplyFinishedClocks();
  clocks_.Notify();
  // Goodbye is a barrier: a worker whose process exits tears down its endpoints, which would
  // end the generation for everyone still working.
  return clocks_.WaitAllLeft(SteadyClock::now() + options_.timeout,
                             [&] { return GenerationOver(c.stop); });
}

Status PsServer::HandleBarrier(const Call& c) {
  return clocks_.Barrier(c.worker, SteadyClock::now() + options_.timeout,
                         [&] { return GenerationOver(c.stop); });
}

// ---- the serving loop ----

Status PsServer::ReceiveRequest(Transport& transport, int worker, const char* message, Request* r) {
  DecodedRequest d = DecodeRequest(message, kMaxRequestBytes);
  r->h = d.header;
  r->keys = std::move(d.keys);
  r->payload = d.payload;
  r->problem = d.problem;
  const RequestHeader& h = r->h;
  if (h.magic != kRequestMagic) {
    r->problem = DataLoss("bad request header from worker " + std::to_string(worker));
    return Status::Ok();
  }
  const Deadline deadline = SteadyClock::now() + options_.timeout;
  if (d.layout_follows) {
    r->layout.resize(h.layout_bytes);
    COHORT_ASSIGN_OR_RETURN(auto req,
                            transport.Irecv(worker, MessageTag(h.id, kKeysStep),
                                            MutableBytes{r->layout.data(), r->layout.size()}));
    COHORT_RETURN_IF_ERROR(
        req.Wait(deadline).WithContext("receiving a layout from worker " + std::to_string(worker)));
  }
  std::vector<collective::Request> recvs;
  if (d.keys_follow) {
    r->keys.resize(h.num_keys);
    COHORT_ASSIGN_OR_RETURN(auto req,
                            transport.Irecv(worker, MessageTag(h.id, kKeysStep),
                                            MutableBytes{r->keys.data(), r->keys.size() * 8}));
    recvs.push_back(std::move(req));
  }
  if (d.payload_follows) {
    // Received even when the request will be refused, so the worker's send completes; only a
    // size no shard of this server could hold is left unreceived.
    uint64_t limit = shard_.owned_bytes();
    if (h.op == PsOp::kInit) {
      auto layout = ModelLayout::Parse(r->layout);
      limit = layout.ok() ? layout->total_bytes() : 0;
    }
    limit = std::max(limit + kMaxRequestBytes, kMaxDrainBytes);
    if (h.payload_bytes > limit) {
      r->problem = InvalidArgument("wrong size: " + std::to_string(h.payload_bytes) +
                                   " bytes of values, but parameter server " +
                                   std::to_string(options_.server_index) + " holds only " +
                                   std::to_string(limit) + " bytes (values not received)");
    } else {
      if (r->payload_storage->size() < h.payload_bytes) r->payload_storage->resize(h.payload_bytes);
      r->payload = r->payload_storage->data();
      COHORT_ASSIGN_OR_RETURN(
          auto req, transport.Irecv(worker, MessageTag(h.id, kPayloadStep),
                                    MutableBytes{r->payload_storage->data(), h.payload_bytes}));
      recvs.push_back(std::move(req));
    }
  }
  for (auto& req : recvs) {
    COHORT_RETURN_IF_ERROR(req.Wait(deadline).WithContext(
        "receiving a " + OpName(h.op) + " from worker " + std::to_string(worker)));
  }
  return Status::Ok();
}

Status PsServer::Reply(Transport& transport, int worker, const Request& r, const Status& status,
                       const std::vector<char>& pulled) {
  const RequestHeader& h = r.h;
  const bool pull = h.op == PsOp::kPull && h.magic == kRequestMagic;
  const bool inline_data = pull && h.payload_bytes <= kInlineReplyBytes;
  ReplyHeader rh = MakeReplyHeader(h.id, status);
  const auto [clock, applied] = clocks_.ClockAndApplied(worker);
  rh.clock = h.op == PsOp::kInit ? applied : clock;
  rh.applied_clock = applied;
  rh.payload_bytes = status.ok() && pull ? h.payload_bytes : 0;
  const std::vector<char> message = EncodeReply(
      rh, inline_data && status.ok() ? ConstBytes{pulled.data(), h.payload_bytes} : ConstBytes{});
  const Deadline deadline = SteadyClock::now() + options_.timeout;
  COHORT_ASSIGN_OR_RETURN(auto send, transport.Isend(worker, MessageTag(h.id, kReplyStep),
                                                     ConstBytes{message.data(), message.size()}));
  collective::Request data;
  if (pull && !inline_data) {
    const size_t n = status.ok() ? h.payload_bytes : 0;
    COHORT_ASSIGN_OR_RETURN(
        data, transport.Isend(worker, MessageTag(h.id, kDataStep), ConstBytes{pulled.data(), n}));
  }
  COHORT_RETURN_IF_ERROR(
      send.Wait(deadline).WithContext("replying to worker " + std::to_string(worker)));
  if (data.valid()) {
    COHORT_RETURN_IF_ERROR(
        data.Wait(deadline).WithContext("sending values to worker " + std::to_string(worker)));
  }
  return Status::Ok();
}

Status PsServer::ServeWorker(Transport& transport, int worker, const std::atomic<bool>& stop) {
  std::vector<char> message(kMaxRequestBytes);
  std::vector<char> pulled;
  std::vector<char> payload;
  while (true) {
    COHORT_ASSIGN_OR_RETURN(
        auto req,
        transport.Irecv(worker, RequestTag(), MutableBytes{message.data(), message.size()}));
    while (!req.Poll(SteadyClock::now() + options_.poll_interval)) {
      if (stop.load()) return Cancelled("parameter server stopped");
      if (failed_.load()) return Aborted("the generation ended");
    }
    COHORT_RETURN_IF_ERROR(
        req.Wait(SteadyClock::now()).WithContext("waiting for worker " + std::to_string(worker)));
    Request r;
    r.payload_storage = &payload;
    COHORT_RETURN_IF_ERROR(ReceiveRequest(transport, worker, message.data(), &r));
    Status status = r.problem;
    if (status.ok()) {
      const Handler handler = HandlerFor(r.h.op);
      status =
          handler != nullptr
              ? (this->*handler)(Call{r, worker, stop, pulled})
              : InvalidArgument("unknown operation " + std::to_string(static_cast<int>(r.h.op)));
    }
    if (!status.ok()) {
      errors_.fetch_add(1);
      spdlog::debug("parameter server {}: {} from worker {} refused: {}", options_.server_index,
                    OpName(r.h.op), worker, status.ToString());
    }
    if (r.h.op == PsOp::kPull && pulled.size() < r.h.payload_bytes) pulled.resize(0);
    COHORT_RETURN_IF_ERROR(Reply(transport, worker, r, status, pulled));
    if (r.h.op == PsOp::kBye && status.ok()) return Status::Ok();
  }
}

Status PsServer::Serve(Transport& transport, const std::atomic<bool>& stop) {
  const int n = options_.num_workers;
  if (n < 1 || options_.num_servers < 1 || options_.server_index < 0 ||
      options_.server_index >= options_.num_servers) {
    return InvalidArgument("parameter server " + std::to_string(options_.server_index) + " of " +
                           std::to_string(options_.num_servers) + " for " + std::to_string(n) +
                           " workers is not valid");
  }
  if (transport.rank() != n + options_.server_index ||
      transport.size() != n + options_.num_servers) {
    return InvalidArgument("parameter server: transport rank " + std::to_string(transport.rank()) +
                           " of " + std::to_string(transport.size()) + " does not match server " +
                           std::to_string(options_.server_index));
  }
  {
    // A new generation: every worker starts at the applied clock; half-summed clocks are dropped.
    MutexLock apply_lock(&apply_mu_);
    clocks_.StartGeneration(n);
    shard_.DropAccumulated();
  }
  failed_.store(false);
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) {
    threads.emplace_back([&, w] {
      results[w] = ServeWorker(transport, w, stop);
      if (!results[w].ok()) {
        failed_.store(true);
        clocks_.Notify();
        init_cv_.NotifyAll();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (stop.load()) return Cancelled("parameter server stopped");
  // The first real error (others only followed it).
  for (const Status& s : results) {
    if (!s.ok() && s.code() != StatusCode::kAborted) return s;
  }
  for (const Status& s : results) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

PsServerStats PsServer::stats() const {
  PsServerStats s;
  s.pushes = pushes_.load();
  s.pulls = pulls_.load();
  s.clocks = clock_count_.load();
  s.errors = errors_.load();
  s.bytes_pushed = bytes_pushed_.load();
  s.bytes_pulled = bytes_pulled_.load();
  s.checkpoints = checkpoints_.load();
  s.applied_clock = clocks_.applied();
  s.max_read_gap = clocks_.max_read_gap();
  bool ssp;
  {
    MutexLock lock(&state_mu_);
    ssp = shard_.optimizer().staleness >= 0;
  }
  s.step = ssp ? s.applied_clock
               : static_cast<int64_t>(async_pushes_.load() / std::max(1, options_.num_workers));
  s.restored_step = restored_step_;
  return s;
}

std::vector<char> PsServer::Snapshot() const {
  if (!initialized()) return {};
  return shard_.Values();
}

Status RunParameterServer(Bootstrap& bootstrap, PsServer& server, const PsRunOptions& options,
                          const std::atomic<bool>& stop) {
  const PsServerOptions& so = server.options();
  const int rank = so.num_workers + so.server_index;
  Status last = Status::Ok();
  bool first = true;
  while (!stop.load()) {
    const auto wait =
        first ? std::max(options.rejoin_timeout, options.connect_timeout) : options.rejoin_timeout;
    first = false;
    auto generation =
        AwaitGeneration(bootstrap, options.key_prefix, rank, SteadyClock::now() + wait, &stop);
    if (!generation.ok()) {
      if (generation.status().code() == StatusCode::kCancelled) return Status::Ok();
      spdlog::info("parameter server {}: no workers (re)joined within {}; exiting", so.server_index,
                   FormatDuration(wait));
      return last;
    }
    spdlog::info("parameter server {}: joining generation {}", so.server_index, *generation);
    auto transport = OpenGenerationTransport(
        bootstrap, options.key_prefix, *generation, rank, so.num_workers + so.num_servers,
        options.connect_timeout, [n = so.num_workers](int r) { return PsRankName(r, n); });
    if (!transport.ok()) {
      last = transport.status();
      spdlog::warn("parameter server {}: {}", so.server_index, last.ToString());
      continue;
    }
    last = server.Serve(**transport, stop);
    const PsServerStats st = server.stats();
    spdlog::info(
        "parameter server {}: generation {} ended ({} pushes, {} pulls, {} refused, step {}): {}",
        so.server_index, *generation, st.pushes, st.pulls, st.errors, st.step, last.ToString());
    if (last.code() == StatusCode::kCancelled && stop.load()) return Status::Ok();
    if (last.ok() && server.shut_down()) return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace cohort::collective::ps
