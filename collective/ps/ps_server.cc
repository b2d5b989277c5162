#include "collective/ps/ps_server.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <thread>

#include "collective/ps/ps_generation.h"
#include "common/checkpoint.h"
#include "common/logging.h"

namespace cohort::collective::ps {
namespace {

constexpr uint32_t kMetaMagic = 0x4d535043;  // "CPSM"
constexpr uint32_t kMetaVersion = 1;
constexpr uint64_t kMaxLayoutBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxKeyList = uint64_t{1} << 24;
// Values of a request that will be refused are still received (so the worker's send completes)
// up to this size, or the server's own share if larger.
constexpr uint64_t kMaxDrainBytes = uint64_t{256} << 20;

template <typename T>
void Append(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

template <typename T>
bool Take(std::string_view* in, T* v) {
  if (in->size() < sizeof(T)) return false;
  std::memcpy(v, in->data(), sizeof(T));
  in->remove_prefix(sizeof(T));
  return true;
}

template <typename T>
void AddInto(void* dst, const void* src, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) d[i] += s[i];
}

std::string OpName(PsOp op) {
  switch (op) {
    case PsOp::kInit: return "init";
    case PsOp::kPush: return "push";
    case PsOp::kPull: return "pull";
    case PsOp::kClock: return "clock";
    case PsOp::kShutdown: return "shutdown";
    case PsOp::kBye: return "bye";
    case PsOp::kBarrier: return "barrier";
  }
  return "op " + std::to_string(static_cast<int>(op));
}

}  // namespace

struct PsServer::Part {
  size_t key_index = 0;
  DataType type = DataType::kF32;
  uint64_t key_begin = 0;  // bytes within the key's value
  uint64_t key_end = 0;
  size_t count = 0;
  std::mutex mu;
  std::vector<char> w, m, v;                      // guarded by mu
  uint64_t t = 0;                                 // updates applied; guarded by mu
  std::map<int64_t, std::vector<char>> acc;       // SSP sums per clock; guarded by mu

  uint64_t bytes() const { return key_end - key_begin; }
};

struct PsServer::Request {
  RequestHeader h;
  std::vector<uint64_t> keys;  // explicit key list (empty for kKeyRange)
  const char* payload = nullptr;
  // Values received in their own message land in the serving thread's buffer, reused across
  // requests: fresh multi-MiB allocations are fresh mmaps, and UCX would register each anew.
  std::vector<char>* payload_storage = nullptr;
  std::string layout;
  Status problem;  // found while receiving: answered without handling
};

PsServer::PsServer(PsServerOptions options) : options_(std::move(options)) {
  clocks_.assign(std::max(1, options_.num_workers), 0);
  left_.assign(std::max(1, options_.num_workers), false);
  barriers_.assign(std::max(1, options_.num_workers), 0);
}

PsServer::~PsServer() = default;

bool PsServer::initialized() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return initialized_;
}

double PsServer::Scale() const {
  return optimizer_.rescale > 0 ? optimizer_.rescale : 1.0 / std::max(1, options_.num_workers);
}

Status PsServer::InitShard(const ModelLayout& layout, const OptimizerConfig& optimizer, const char* values,
                           size_t bytes) {
  COHORT_RETURN_IF_ERROR(optimizer.Validate());
  std::vector<uint64_t> boundaries = layout.ShardBoundaries(options_.num_servers);
  const uint64_t lo = boundaries[options_.server_index];
  const uint64_t hi = boundaries[options_.server_index + 1];
  if (values != nullptr && bytes != hi - lo) {
    return InvalidArgument("init: " + std::to_string(bytes) + " bytes of values, but server " +
                           std::to_string(options_.server_index) + " owns " + std::to_string(hi - lo) +
                           " bytes of this layout");
  }
  std::vector<std::unique_ptr<Part>> parts;
  std::vector<int> part_of_key(layout.num_keys(), -1);
  uint64_t off = 0;
  for (size_t i = 0; i < layout.num_keys(); ++i) {
    if (layout.offset(i) + layout.bytes(i) <= lo) continue;
    if (layout.offset(i) >= hi) break;
    KeyPart kp = PartOf(layout, i, lo, hi);
    if (kp.begin == kp.end) continue;
    auto p = std::make_unique<Part>();
    p->key_index = i;
    p->type = layout.keys()[i].type;
    p->key_begin = kp.begin;
    p->key_end = kp.end;
    p->count = p->bytes() / DataTypeSize(p->type);
    p->w.assign(p->bytes(), 0);
    if (values != nullptr) std::memcpy(p->w.data(), values + off, p->bytes());
    if (optimizer.state_slots() >= 1) p->m.assign(p->bytes(), 0);
    if (optimizer.state_slots() >= 2) p->v.assign(p->bytes(), 0);
    off += p->bytes();
    part_of_key[i] = static_cast<int>(parts.size());
    parts.push_back(std::move(p));
  }
  layout_ = layout;
  optimizer_ = optimizer;
  boundaries_ = std::move(boundaries);
  parts_ = std::move(parts);
  part_of_key_ = std::move(part_of_key);
  owned_bytes_ = hi - lo;
  return Status::Ok();
}

// ---- checkpoints ----

Status PsServer::Checkpoint() {
  std::lock_guard<std::mutex> lock(apply_mu_);
  if (!initialized()) return FailedPrecondition("checkpoint: the model is not initialized");
  return CheckpointLocked();
}

void PsServer::MaybeCheckpointLocked(int64_t step) {
  if (options_.checkpoint_dir.empty() || options_.checkpoint_every <= 0) return;
  if (step / options_.checkpoint_every <= last_checkpoint_step_ / options_.checkpoint_every) return;
  Status s = CheckpointLocked();
  if (!s.ok()) spdlog::error("parameter server {}: checkpoint at step {} failed: {}", options_.server_index, step,
                             s.ToString());
}

Status PsServer::CheckpointLocked() {
  if (options_.checkpoint_dir.empty()) return Status::Ok();
  int64_t applied;
  {
    std::lock_guard<std::mutex> lock(clock_mu_);
    applied = applied_clock_;
  }
  const uint64_t pushes = async_pushes_.load();
  const int64_t step = optimizer_.staleness >= 0 ? applied : static_cast<int64_t>(pushes / std::max(1, options_.num_workers));
  std::string shard;
  shard.reserve(owned_bytes_ * (1 + optimizer_.state_slots()) + parts_.size() * 8);
  {
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(parts_.size());
    for (auto& p : parts_) locks.emplace_back(p->mu);
    for (auto& p : parts_) {
      Append(&shard, p->t);
      shard.append(p->w.data(), p->w.size());
      shard.append(p->m.data(), p->m.size());
      shard.append(p->v.data(), p->v.size());
    }
  }
  std::string meta;
  Append(&meta, kMetaMagic);
  Append(&meta, kMetaVersion);
  Append(&meta, static_cast<int32_t>(options_.server_index));
  Append(&meta, static_cast<int32_t>(options_.num_servers));
  Append(&meta, optimizer_);
  Append(&meta, applied);
  Append(&meta, pushes);
  Append(&meta, step);
  meta += layout_.Serialize();
  CheckpointWriter writer(options_.checkpoint_dir, step);
  COHORT_RETURN_IF_ERROR(writer.AddFile("meta", meta));
  COHORT_RETURN_IF_ERROR(writer.AddFile("shard", shard));
  COHORT_ASSIGN_OR_RETURN(CheckpointInfo info, writer.Commit());
  last_checkpoint_step_ = step;
  checkpoints_.fetch_add(1);
  if (options_.keep_checkpoints > 0) {
    Status r = RetainLatest(options_.checkpoint_dir, options_.keep_checkpoints);
    if (!r.ok()) spdlog::warn("parameter server {}: {}", options_.server_index, r.ToString());
  }
  spdlog::debug("parameter server {}: checkpoint {}", options_.server_index, info.path);
  return Status::Ok();
}

Status PsServer::Restore(const std::string& path) {
  std::string ckpt = path;
  if (!std::filesystem::exists(std::filesystem::path(path) / "MANIFEST")) {
    COHORT_ASSIGN_OR_RETURN(CheckpointInfo info, FindLatestValidCheckpoint(path));
    ckpt = info.path;
  } else {
    COHORT_RETURN_IF_ERROR(VerifyCheckpoint(path));
  }
  COHORT_ASSIGN_OR_RETURN(std::string meta, ReadCheckpointFile(ckpt, "meta"));
  COHORT_ASSIGN_OR_RETURN(std::string shard, ReadCheckpointFile(ckpt, "shard"));
  std::string_view in(meta);
  uint32_t magic = 0, version = 0;
  int32_t index = 0, servers = 0;
  OptimizerConfig optimizer;
  int64_t applied = 0, step = 0;
  uint64_t pushes = 0;
  if (!Take(&in, &magic) || magic != kMetaMagic || !Take(&in, &version) || version != kMetaVersion ||
      !Take(&in, &index) || !Take(&in, &servers) || !Take(&in, &optimizer) || !Take(&in, &applied) ||
      !Take(&in, &pushes) || !Take(&in, &step)) {
    return DataLoss("parameter-server checkpoint " + ckpt + ": bad meta file");
  }
  if (index != options_.server_index || servers != options_.num_servers) {
    return FailedPrecondition("checkpoint " + ckpt + " is of parameter server " + std::to_string(index) + " of " +
                              std::to_string(servers) + "; this is server " + std::to_string(options_.server_index) +
                              " of " + std::to_string(options_.num_servers));
  }
  COHORT_ASSIGN_OR_RETURN(ModelLayout layout, ModelLayout::Parse(in));
  std::lock_guard<std::mutex> apply_lock(apply_mu_);
  std::lock_guard<std::mutex> lock(state_mu_);
  COHORT_RETURN_IF_ERROR(InitShard(layout, optimizer, nullptr, 0));
  std::string_view sh(shard);
  for (auto& p : parts_) {
    const size_t need = sizeof(uint64_t) + p->w.size() + p->m.size() + p->v.size();
    if (sh.size() < need) return DataLoss("parameter-server checkpoint " + ckpt + ": shard file is too short");
    (void)Take(&sh, &p->t);
    for (auto* vec : {&p->w, &p->m, &p->v}) {
      std::memcpy(vec->data(), sh.data(), vec->size());
      sh.remove_prefix(vec->size());
    }
  }
  if (!sh.empty()) return DataLoss("parameter-server checkpoint " + ckpt + ": shard file is too long");
  {
    std::lock_guard<std::mutex> clock_lock(clock_mu_);
    applied_clock_ = applied;
    std::fill(clocks_.begin(), clocks_.end(), applied);
  }
  async_pushes_.store(pushes);
  last_checkpoint_step_ = step;
  restored_step_ = step;
  initialized_ = true;
  init_cv_.notify_all();
  spdlog::info("parameter server {}: restored {} (step {}, {} keys, {} bytes, {})", options_.server_index, ckpt, step,
               parts_.size(), owned_bytes_.load(), optimizer_.ToString());
  return Status::Ok();
}

// ---- requests ----

Status PsServer::ResolveParts(const Request& r, std::vector<Part*>* parts, uint64_t* owned) const {
  const RequestHeader& h = r.h;
  *owned = 0;
  parts->clear();
  if (!IsValid(static_cast<DataType>(h.type))) {
    return InvalidArgument("unknown data type " + std::to_string(h.type));
  }
  const auto type = static_cast<DataType>(h.type);
  std::vector<size_t> indices;
  if (h.flags & kKeyRange) {
    auto first = layout_.IndexOf(h.first_key);
    if (!first) return NotFound("unknown key " + std::to_string(h.first_key));
    if (*first + h.num_keys > layout_.num_keys()) {
      return NotFound("key range of " + std::to_string(h.num_keys) + " keys from key " + std::to_string(h.first_key) +
                      " runs past the model's last key");
    }
    for (size_t i = 0; i < h.num_keys; ++i) indices.push_back(*first + i);
  } else {
    for (size_t j = 0; j < r.keys.size(); ++j) {
      auto i = layout_.IndexOf(r.keys[j]);
      if (!i) return NotFound("unknown key " + std::to_string(r.keys[j]));
      if (j > 0 && r.keys[j] <= r.keys[j - 1]) return InvalidArgument("keys must be strictly increasing");
      indices.push_back(*i);
    }
  }
  for (size_t i : indices) {
    const KeySpec& k = layout_.keys()[i];
    if (k.type != type) {
      return InvalidArgument("key " + std::to_string(k.key) + " holds " + std::string(DataTypeName(k.type)) +
                             ", the request sent " + std::string(DataTypeName(type)));
    }
    const int p = part_of_key_[i];
    if (p < 0) {
      return InvalidArgument("key " + std::to_string(k.key) + " is not on parameter server " +
                             std::to_string(options_.server_index));
    }
    parts->push_back(parts_[p].get());
    *owned += parts_[p]->bytes();
  }
  if (*owned != h.payload_bytes) {
    return InvalidArgument("wrong size: the request carries " + std::to_string(h.payload_bytes) +
                           " bytes for its keys, but parameter server " + std::to_string(options_.server_index) +
                           " holds " + std::to_string(*owned) + " bytes of them");
  }
  return Status::Ok();
}

Status PsServer::HandleInit(const Request& r, int64_t* clock) {
  COHORT_ASSIGN_OR_RETURN(ModelLayout layout, ModelLayout::Parse(r.layout));
  std::unique_lock<std::mutex> lock(state_mu_);
  if ((r.h.flags & kHasValues) && (r.h.flags & kReset) && initialized_) {
    // Replace the model: only sound while no other worker has a request in flight (benchmarks
    // reset between phases, behind a barrier).
    std::lock_guard<std::mutex> apply_lock(apply_mu_);
    std::lock_guard<std::mutex> clock_lock(clock_mu_);
    initialized_ = false;
    applied_clock_ = 0;
    std::fill(clocks_.begin(), clocks_.end(), 0);
    async_pushes_.store(0);
    last_checkpoint_step_ = 0;
  }
  if (!initialized_ && (r.h.flags & kHasValues)) {
    std::lock_guard<std::mutex> apply_lock(apply_mu_);
    COHORT_RETURN_IF_ERROR(InitShard(layout, options_.optimizer_override.value_or(r.h.optimizer), r.payload,
                                     r.h.payload_bytes));
    initialized_ = true;
    init_cv_.notify_all();
    spdlog::info("parameter server {}: model of {} keys initialized; this shard holds {} keys, {} bytes; {}",
                 options_.server_index, layout.num_keys(), parts_.size(), owned_bytes_.load(), optimizer_.ToString());
  }
  const Deadline deadline = SteadyClock::now() + options_.timeout;
  while (!initialized_) {
    if (failed_.load()) return Aborted("the generation ended while waiting for the chief's init");
    if (init_cv_.wait_until(lock, std::min(deadline, SteadyClock::now() + options_.poll_interval)) ==
            std::cv_status::timeout &&
        SteadyClock::now() >= deadline) {
      return DeadlineExceeded("the chief (worker 0) did not initialize the model within " +
                              FormatDuration(options_.timeout));
    }
  }
  if (!(layout == layout_)) {
    return InvalidArgument("init: the layout (" + std::to_string(layout.num_keys()) + " keys, " +
                           std::to_string(layout.total_bytes()) + " bytes) differs from the model this server holds (" +
                           std::to_string(layout_.num_keys()) + " keys, " + std::to_string(layout_.total_bytes()) +
                           " bytes)");
  }
  std::lock_guard<std::mutex> clock_lock(clock_mu_);
  *clock = applied_clock_;
  return Status::Ok();
}

Status PsServer::HandlePush(const Request& r, int worker) {
  if (!initialized()) return FailedPrecondition("push before the model is initialized (the chief calls InitModel)");
  if (shutdown_.load()) return FailedPrecondition("push after shutdown: parameter server " +
                                                  std::to_string(options_.server_index) + " accepts no more updates");
  std::vector<Part*> parts;
  uint64_t owned = 0;
  COHORT_RETURN_IF_ERROR(ResolveParts(r, &parts, &owned));
  const char* g = r.payload;
  if (optimizer_.staleness < 0) {
    const double scale = Scale();
    for (Part* p : parts) {
      std::lock_guard<std::mutex> lock(p->mu);
      ApplyUpdate(optimizer_, p->type, p->w.data(), p->m.empty() ? nullptr : p->m.data(),
                  p->v.empty() ? nullptr : p->v.data(), g, p->count, ++p->t, scale);
      g += p->bytes();
    }
    const uint64_t n = async_pushes_.fetch_add(1) + 1;
    if (options_.checkpoint_every > 0 && !options_.checkpoint_dir.empty() &&
        n % static_cast<uint64_t>(options_.num_workers) == 0) {
      std::lock_guard<std::mutex> lock(apply_mu_);
      MaybeCheckpointLocked(static_cast<int64_t>(n / options_.num_workers));
    }
  } else {
    int64_t clock;
    {
      std::lock_guard<std::mutex> lock(clock_mu_);
      clock = clocks_[worker];
    }
    for (Part* p : parts) {
      std::lock_guard<std::mutex> lock(p->mu);
      auto [it, fresh] = p->acc.try_emplace(clock);
      if (fresh) {
        it->second.assign(g, g + p->bytes());
      } else if (p->type == DataType::kF64) {
        AddInto<double>(it->second.data(), g, p->count);
      } else {
        AddInto<float>(it->second.data(), g, p->count);
      }
      g += p->bytes();
    }
  }
  pushes_.fetch_add(1);
  bytes_pushed_.fetch_add(owned);
  return Status::Ok();
}

int64_t PsServer::MinClockLocked() const {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    hi = std::max(hi, clocks_[w]);
    if (!left_[w]) lo = std::min(lo, clocks_[w]);
  }
  return lo == INT64_MAX ? hi : lo;  // everyone left: every pushed clock is final
}

void PsServer::ApplyFinishedClocks() {
  std::lock_guard<std::mutex> apply_lock(apply_mu_);
  int64_t from, target;
  {
    std::lock_guard<std::mutex> lock(clock_mu_);
    from = applied_clock_;
    target = MinClockLocked();
  }
  if (target <= from) return;
  const double scale = Scale();
  for (int64_t k = from; k < target; ++k) {
    for (auto& p : parts_) {
      std::lock_guard<std::mutex> lock(p->mu);
      auto it = p->acc.find(k);
      if (it == p->acc.end()) continue;
      ApplyUpdate(optimizer_, p->type, p->w.data(), p->m.empty() ? nullptr : p->m.data(),
                  p->v.empty() ? nullptr : p->v.data(), it->second.data(), p->count, ++p->t, scale);
      p->acc.erase(it);
    }
  }
  {
    std::lock_guard<std::mutex> lock(clock_mu_);
    applied_clock_ = target;
  }
  clock_cv_.notify_all();
  MaybeCheckpointLocked(target);
}

Status PsServer::HandleClock(int worker) {
  bool advanced;
  {
    std::lock_guard<std::mutex> lock(clock_mu_);
    ++clocks_[worker];
    advanced = MinClockLocked() > applied_clock_;
  }
  clock_count_.fetch_add(1);
  if (advanced && initialized()) ApplyFinishedClocks();
  clock_cv_.notify_all();
  return Status::Ok();
}

Status PsServer::HandlePull(const Request& r, int worker, char* out, const std::atomic<bool>& stop) {
  if (!initialized()) return FailedPrecondition("pull before the model is initialized (the chief calls InitModel)");
  std::vector<Part*> parts;
  uint64_t owned = 0;
  COHORT_RETURN_IF_ERROR(ResolveParts(r, &parts, &owned));
  if (optimizer_.staleness >= 0) {
    std::unique_lock<std::mutex> lock(clock_mu_);
    const int64_t c = clocks_[worker];
    const Deadline deadline = SteadyClock::now() + options_.timeout;
    while (applied_clock_ < c - optimizer_.staleness) {
      if (stop.load() || failed_.load()) return Aborted("the server stopped while a read waited for slow workers");
      if (SteadyClock::now() >= deadline) {
        size_t slowest = 0;
        for (size_t w = 0; w < clocks_.size(); ++w) {
          if (!left_[w] && clocks_[w] < clocks_[slowest]) slowest = w;
        }
        return DeadlineExceeded("worker " + std::to_string(worker) + " at clock " + std::to_string(c) +
                                " waited " + FormatDuration(options_.timeout) + " for worker " +
                                std::to_string(slowest) + " (clock " + std::to_string(clocks_[slowest]) +
                                ") to reach clock " + std::to_string(c - optimizer_.staleness));
      }
      clock_cv_.wait_until(lock, std::min(deadline, SteadyClock::now() + options_.poll_interval));
    }
    max_read_gap_ = std::max(max_read_gap_, c - MinClockLocked());
  }
  for (Part* p : parts) {
    std::lock_guard<std::mutex> lock(p->mu);
    std::memcpy(out, p->w.data(), p->bytes());
    out += p->bytes();
  }
  pulls_.fetch_add(1);
  bytes_pulled_.fetch_add(owned);
  return Status::Ok();
}

Status PsServer::HandleBye(int worker, const std::atomic<bool>& stop) {
  std::unique_lock<std::mutex> lock(clock_mu_);
  left_[worker] = true;
  const bool advanced = MinClockLocked() > applied_clock_;
  lock.unlock();
  if (advanced && initialized()) ApplyFinishedClocks();
  clock_cv_.notify_all();
  // Goodbye is a barrier: a worker whose process exits tears down its endpoints, which would
  // end the generation for everyone still working.
  lock.lock();
  const Deadline deadline = SteadyClock::now() + options_.timeout;
  while (!std::all_of(left_.begin(), left_.end(), [](bool b) { return b; })) {
    if (stop.load() || failed_.load()) return Aborted("the generation ended before every worker said goodbye");
    if (SteadyClock::now() >= deadline) return DeadlineExceeded("not every worker said goodbye in time");
    clock_cv_.wait_until(lock, std::min(deadline, SteadyClock::now() + options_.poll_interval));
  }
  return Status::Ok();
}

Status PsServer::HandleBarrier(int worker, const std::atomic<bool>& stop) {
  std::unique_lock<std::mutex> lock(clock_mu_);
  const int64_t mine = ++barriers_[worker];
  clock_cv_.notify_all();
  const Deadline deadline = SteadyClock::now() + options_.timeout;
  auto all_here = [&] {
    for (size_t w = 0; w < barriers_.size(); ++w) {
      if (!left_[w] && barriers_[w] < mine) return false;
    }
    return true;
  };
  while (!all_here()) {
    if (stop.load() || failed_.load()) return Aborted("the generation ended during a barrier");
    if (SteadyClock::now() >= deadline) return DeadlineExceeded("not every worker reached the barrier in time");
    clock_cv_.wait_until(lock, std::min(deadline, SteadyClock::now() + options_.poll_interval));
  }
  return Status::Ok();
}

// ---- the serving loop ----

Status PsServer::ReceiveRequest(Transport& transport, int worker, const char* message, Request* r) {
  std::memcpy(&r->h, message, sizeof(RequestHeader));
  const RequestHeader& h = r->h;
  if (h.magic != kRequestMagic) {
    r->problem = DataLoss("bad request header from worker " + std::to_string(worker));
    return Status::Ok();
  }
  size_t off = sizeof(RequestHeader);
  const Deadline deadline = SteadyClock::now() + options_.timeout;
  std::vector<collective::Request> recvs;
  std::vector<char> key_bytes;
  const bool is_init = h.op == PsOp::kInit;
  const bool carries_values = h.op == PsOp::kPush || (is_init && (h.flags & kHasValues));
  // The key list (or the layout, for init).
  if (is_init) {
    if (h.layout_bytes > kMaxLayoutBytes) {
      r->problem = InvalidArgument("init: layout of " + std::to_string(h.layout_bytes) + " bytes is too large");
      return Status::Ok();
    }
    r->layout.resize(h.layout_bytes);
    COHORT_ASSIGN_OR_RETURN(auto req, transport.Irecv(worker, MessageTag(h.id, kKeysStep),
                                                      MutableBytes{r->layout.data(), r->layout.size()}));
    COHORT_RETURN_IF_ERROR(req.Wait(deadline).WithContext("receiving a layout from worker " + std::to_string(worker)));
  } else if (!(h.flags & kKeyRange) && (h.op == PsOp::kPush || h.op == PsOp::kPull)) {
    if (h.flags & kInlineKeys) {
      if (off + uint64_t{h.num_keys} * 8 > kMaxRequestBytes) {
        r->problem = DataLoss("request claims more inline keys than its message holds");
        return Status::Ok();
      }
      r->keys.resize(h.num_keys);
      std::memcpy(r->keys.data(), message + off, r->keys.size() * 8);
      off += r->keys.size() * 8;
    } else if (h.num_keys > 0) {
      if (h.num_keys > kMaxKeyList) {
        r->problem = InvalidArgument("request of " + std::to_string(h.num_keys) + " keys is too large");
        return Status::Ok();
      }
      r->keys.resize(h.num_keys);
      COHORT_ASSIGN_OR_RETURN(auto req, transport.Irecv(worker, MessageTag(h.id, kKeysStep),
                                                        MutableBytes{r->keys.data(), r->keys.size() * 8}));
      recvs.push_back(std::move(req));
    }
  }
  // The values.
  if (carries_values && h.payload_bytes > 0) {
    if (h.flags & kInlinePayload) {
      if (off + h.payload_bytes > kMaxRequestBytes) {
        r->problem = DataLoss("request claims more inline values than its message holds");
      } else {
        r->payload = message + off;
      }
    } else {
      // Received even when the request will be refused, so the worker's send completes; only a
      // size no shard of this server could hold is left unreceived.
      uint64_t limit = owned_bytes_.load();
      if (is_init) {
        auto layout = ModelLayout::Parse(r->layout);
        limit = layout.ok() ? layout->total_bytes() : 0;
      }
      limit = std::max(limit + kMaxRequestBytes, kMaxDrainBytes);
      if (h.payload_bytes > limit) {
        r->problem = InvalidArgument("wrong size: " + std::to_string(h.payload_bytes) + " bytes of values, but parameter server " +
                                     std::to_string(options_.server_index) + " holds only " +
                                     std::to_string(limit) + " bytes (values not received)");
      } else {
        if (r->payload_storage->size() < h.payload_bytes) r->payload_storage->resize(h.payload_bytes);
        r->payload = r->payload_storage->data();
        COHORT_ASSIGN_OR_RETURN(auto req, transport.Irecv(worker, MessageTag(h.id, kPayloadStep),
                                                          MutableBytes{r->payload_storage->data(), h.payload_bytes}));
        recvs.push_back(std::move(req));
      }
    }
  }
  for (auto& req : recvs) {
    COHORT_RETURN_IF_ERROR(req.Wait(deadline).WithContext("receiving a " + OpName(h.op) + " from worker " +
                                                          std::to_string(worker)));
  }
  return Status::Ok();
}

Status PsServer::Reply(Transport& transport, int worker, const Request& r, const Status& status,
                       std::vector<char>* pulled) {
  const RequestHeader& h = r.h;
  const bool pull = h.op == PsOp::kPull && h.magic == kRequestMagic;
  const bool inline_data = pull && h.payload_bytes <= kInlineReplyBytes;
  std::vector<char> message(sizeof(ReplyHeader) + (inline_data && status.ok() ? h.payload_bytes : 0));
  ReplyHeader rh;
  rh.id = h.id;
  rh.code = static_cast<uint8_t>(status.code());
  const std::string text = status.ok() ? "" : status.message();
  rh.message_size = static_cast<uint32_t>(std::min(text.size(), kReplyMessageBytes - 1));
  std::memcpy(rh.message, text.data(), rh.message_size);
  {
    std::lock_guard<std::mutex> lock(clock_mu_);
    rh.clock = r.h.op == PsOp::kInit ? applied_clock_ : clocks_[worker];
    rh.applied_clock = applied_clock_;
  }
  rh.payload_bytes = status.ok() && pull ? h.payload_bytes : 0;
  std::memcpy(message.data(), &rh, sizeof(rh));
  if (inline_data && status.ok()) std::memcpy(message.data() + sizeof(rh), pulled->data(), h.payload_bytes);
  const Deadline deadline = SteadyClock::now() + options_.timeout;
  COHORT_ASSIGN_OR_RETURN(auto send, transport.Isend(worker, MessageTag(h.id, kReplyStep),
                                                     ConstBytes{message.data(), message.size()}));
  collective::Request data;
  if (pull && !inline_data) {
    const size_t n = status.ok() ? h.payload_bytes : 0;
    COHORT_ASSIGN_OR_RETURN(data, transport.Isend(worker, MessageTag(h.id, kDataStep), ConstBytes{pulled->data(), n}));
  }
  COHORT_RETURN_IF_ERROR(send.Wait(deadline).WithContext("replying to worker " + std::to_string(worker)));
  if (data.valid()) {
    COHORT_RETURN_IF_ERROR(data.Wait(deadline).WithContext("sending values to worker " + std::to_string(worker)));
  }
  return Status::Ok();
}

Status PsServer::ServeWorker(Transport& transport, int worker, const std::atomic<bool>& stop) {
  std::vector<char> message(kMaxRequestBytes);
  std::vector<char> pulled;
  std::vector<char> payload;
  while (true) {
    COHORT_ASSIGN_OR_RETURN(auto req, transport.Irecv(worker, RequestTag(), MutableBytes{message.data(), message.size()}));
    while (!req.Poll(SteadyClock::now() + options_.poll_interval)) {
      if (stop.load()) return Cancelled("parameter server stopped");
      if (failed_.load()) return Aborted("the generation ended");
    }
    COHORT_RETURN_IF_ERROR(req.Wait(SteadyClock::now()).WithContext("waiting for worker " + std::to_string(worker)));
    Request r;
    r.payload_storage = &payload;
    COHORT_RETURN_IF_ERROR(ReceiveRequest(transport, worker, message.data(), &r));
    Status status = r.problem;
    bool bye = false;
    if (status.ok()) {
      switch (r.h.op) {
        case PsOp::kInit: {
          int64_t clock = 0;
          status = HandleInit(r, &clock);
          break;
        }
        case PsOp::kPush:
          status = HandlePush(r, worker);
          break;
        case PsOp::kPull:
          pulled.resize(r.h.payload_bytes <= owned_bytes_.load() ? r.h.payload_bytes : 0);
          status = r.h.payload_bytes <= owned_bytes_.load()
                       ? HandlePull(r, worker, pulled.data(), stop)
                       : InvalidArgument("wrong size: pull of " + std::to_string(r.h.payload_bytes) +
                                         " bytes, but parameter server " + std::to_string(options_.server_index) +
                                         " holds " + std::to_string(owned_bytes_.load()) + " bytes");
          break;
        case PsOp::kClock:
          status = HandleClock(worker);
          break;
        case PsOp::kShutdown:
          if (!shutdown_.exchange(true)) {
            spdlog::info("parameter server {}: shutdown requested by worker {}", options_.server_index, worker);
          }
          break;
        case PsOp::kBarrier:
          status = HandleBarrier(worker, stop);
          break;
        case PsOp::kBye:
          status = HandleBye(worker, stop);
          bye = true;
          break;
        default:
          status = InvalidArgument("unknown operation " + std::to_string(static_cast<int>(r.h.op)));
      }
    }
    if (!status.ok()) {
      errors_.fetch_add(1);
      spdlog::debug("parameter server {}: {} from worker {} refused: {}", options_.server_index, OpName(r.h.op), worker,
                    status.ToString());
    }
    if (r.h.op == PsOp::kPull && pulled.size() < r.h.payload_bytes) pulled.resize(0);
    COHORT_RETURN_IF_ERROR(Reply(transport, worker, r, status, &pulled));
    if (bye && status.ok()) return Status::Ok();
  }
}

Status PsServer::Serve(Transport& transport, const std::atomic<bool>& stop) {
  const int n = options_.num_workers;
  if (n < 1 || options_.num_servers < 1 || options_.server_index < 0 || options_.server_index >= options_.num_servers) {
    return InvalidArgument("parameter server " + std::to_string(options_.server_index) + " of " +
                           std::to_string(options_.num_servers) + " for " + std::to_string(n) + " workers is not valid");
  }
  if (transport.rank() != n + options_.server_index || transport.size() != n + options_.num_servers) {
    return InvalidArgument("parameter server: transport rank " + std::to_string(transport.rank()) + " of " +
                           std::to_string(transport.size()) + " does not match server " +
                           std::to_string(options_.server_index));
  }
  {
    // A new generation: every worker starts at the applied clock; half-summed clocks are dropped.
    std::lock_guard<std::mutex> apply_lock(apply_mu_);
    std::lock_guard<std::mutex> lock(clock_mu_);
    clocks_.assign(n, applied_clock_);
    left_.assign(n, false);
    barriers_.assign(n, 0);
    for (auto& p : parts_) {
      std::lock_guard<std::mutex> part_lock(p->mu);
      p->acc.clear();
    }
  }
  failed_.store(false);
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) {
    threads.emplace_back([&, w] {
      results[w] = ServeWorker(transport, w, stop);
      if (!results[w].ok()) {
        failed_.store(true);
        clock_cv_.notify_all();
        init_cv_.notify_all();
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
  {
    std::lock_guard<std::mutex> lock(clock_mu_);
    s.applied_clock = applied_clock_;
    s.max_read_gap = max_read_gap_;
  }
  bool ssp;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    ssp = optimizer_.staleness >= 0;
  }
  s.step = ssp ? s.applied_clock
                                     : static_cast<int64_t>(async_pushes_.load() / std::max(1, options_.num_workers));
  s.restored_step = restored_step_;
  return s;
}

std::vector<char> PsServer::Snapshot() const {
  std::vector<char> out;
  if (!initialized()) return out;
  for (const auto& p : parts_) {
    std::lock_guard<std::mutex> lock(p->mu);
    out.insert(out.end(), p->w.begin(), p->w.end());
  }
  return out;
}

Status RunParameterServer(Bootstrap& bootstrap, PsServer& server, const PsRunOptions& options,
                          const std::atomic<bool>& stop) {
  const PsServerOptions& so = server.options();
  std::string last_generation;
  Status last = Status::Ok();
  bool first = true;
  while (!stop.load()) {
    const auto wait = first ? std::max(options.rejoin_timeout, options.connect_timeout) : options.rejoin_timeout;
    first = false;
    auto generation = AwaitGeneration(bootstrap, options.key_prefix, last_generation, SteadyClock::now() + wait, &stop,
                                      so.num_workers + so.server_index);
    if (!generation.ok()) {
      if (generation.status().code() == StatusCode::kCancelled) return Status::Ok();
      spdlog::info("parameter server {}: no workers (re)joined within {}; exiting", so.server_index,
                   FormatDuration(wait));
      return last;
    }
    last_generation = *generation;
    spdlog::info("parameter server {}: joining generation {}", so.server_index, last_generation);
    auto transport = MakePsTransport(bootstrap, options.key_prefix, last_generation, so.num_workers + so.server_index,
                                     so.num_workers, so.num_servers, options.connect_timeout);
    if (!transport.ok()) {
      last = transport.status();
      spdlog::warn("parameter server {}: {}", so.server_index, last.ToString());
      continue;
    }
    last = server.Serve(**transport, stop);
    const PsServerStats st = server.stats();
    spdlog::info("parameter server {}: generation {} ended ({} pushes, {} pulls, {} refused, step {}): {}",
                 so.server_index, last_generation, st.pushes, st.pulls, st.errors, st.step, last.ToString());
    if (last.code() == StatusCode::kCancelled && stop.load()) return Status::Ok();
    if (last.ok() && server.shut_down()) return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace cohort::collective::ps
