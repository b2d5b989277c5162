#include "collective/ps/ps_shard.h"

#include <cstring>
#include <map>

#include "common/mutex.h"

namespace cohort::collective::ps {
namespace {

template <typename T>
void AddInto(void* dst, const void* src, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) d[i] += s[i];
}

}  // namespace

struct Shard::Part {
  size_t key_index = 0;
  DataType type = DataType::kF32;
  uint64_t key_begin = 0;  // bytes within the key's value
  uint64_t key_end = 0;
  size_t count = 0;
  mutable Mutex mu;
  std::vector<char> w GUARDED_BY(mu);
  std::vector<char> m GUARDED_BY(mu);
  std::vector<char> v GUARDED_BY(mu);
  uint64_t t GUARDED_BY(mu) = 0;                            // updates applied
  std::map<int64_t, std::vector<char>> acc GUARDED_BY(mu);  // SSP sums per clock

  uint64_t bytes() const { return key_end - key_begin; }
  void UpdateLocked(const char* g, double scale, const OptimizerConfig& optimizer) REQUIRES(mu) {
    ApplyUpdate(optimizer, type, w.data(), m.empty() ? nullptr : m.data(),
                v.empty() ? nullptr : v.data(), g, count, ++t, scale);
  }
};

Shard::Shard(int num_servers, int server_index)
    : num_servers_(num_servers), server_index_(server_index) {}

Shard::~Shard() = default;

Status Shard::Init(const ModelLayout& layout, const OptimizerConfig& optimizer, const char* values,
                   size_t bytes) {
  COHORT_RETURN_IF_ERROR(optimizer.Validate());
  const std::vector<uint64_t> boundaries = layout.ShardBoundaries(num_servers_);
  const uint64_t lo = boundaries[server_index_];
  const uint64_t hi = boundaries[server_index_ + 1];
  if (values != nullptr && bytes != hi - lo) {
    return InvalidArgument("init: " + std::to_string(bytes) + " bytes of values, but server " +
                           std::to_string(server_index_) + " owns " + std::to_string(hi - lo) +
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
    MutexLock lock(&p->mu);
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
  parts_ = std::move(parts);
  part_of_key_ = std::move(part_of_key);
  owned_bytes_ = hi - lo;
  return Status::Ok();
}

Status Shard::Resolve(const KeySelection& sel, Parts* parts) const {
  parts->clear();
  if (!IsValid(static_cast<DataType>(sel.type))) {
    return InvalidArgument("unknown data type " + std::to_string(sel.type));
  }
  const auto type = static_cast<DataType>(sel.type);
  std::vector<size_t> indices;
  if (sel.range) {
    auto first = layout_.IndexOf(sel.first_key);
    if (!first) return NotFound("unknown key " + std::to_string(sel.first_key));
    if (*first + sel.num_keys > layout_.num_keys()) {
      return NotFound("key range of " + std::to_string(sel.num_keys) + " keys from key " +
                      std::to_string(sel.first_key) + " runs past the model's last key");
    }
    for (size_t i = 0; i < sel.num_keys; ++i) indices.push_back(*first + i);
  } else {
    for (size_t j = 0; j < sel.keys.size(); ++j) {
      auto i = layout_.IndexOf(sel.keys[j]);
      if (!i) return NotFound("unknown key " + std::to_string(sel.keys[j]));
      if (j > 0 && sel.keys[j] <= sel.keys[j - 1]) {
        return InvalidArgument("keys must be strictly increasing");
      }
      indices.push_back(*i);
    }
  }
  uint64_t owned = 0;
  for (size_t i : indices) {
    const KeySpec& k = layout_.keys()[i];
    if (k.type != type) {
      return InvalidArgument("key " + std::to_string(k.key) + " holds " +
                             std::string(DataTypeName(k.type)) + ", the request sent " +
                             std::string(DataTypeName(type)));
    }
    const int p = part_of_key_[i];
    if (p < 0) {
      return InvalidArgument("key " + std::to_string(k.key) + " is not on parameter server " +
                             std::to_string(server_index_));
    }
    parts->push_back(parts_[p].get());
    owned += parts_[p]->bytes();
  }
  if (owned != sel.bytes) {
    return InvalidArgument("wrong size: the request carries " + std::to_string(sel.bytes) +
                           " bytes for its keys, but parameter server " +
                           std::to_string(server_index_) + " holds " + std::to_string(owned) +
                           " bytes of them");
  }
  return Status::Ok();
}

void Shard::Update(const Parts& parts, const char* g, double scale) {
  for (Part* p : parts) {
    MutexLock lock(&p->mu);
    p->UpdateLocked(g, scale, optimizer_);
    g += p->bytes();
  }
}

void Shard::Accumulate(const Parts& parts, int64_t clock, const char* g) {
  for (Part* p : parts) {
    MutexLock lock(&p->mu);
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

void Shard::ApplyAccumulated(int64_t first, int64_t end, double scale) {
  for (int64_t k = first; k < end; ++k) {
    for (auto& p : parts_) {
      MutexLock lock(&p->mu);
      auto it = p->acc.find(k);
      if (it == p->acc.end()) continue;
      p->UpdateLocked(it->second.data(), scale, optimizer_);
      p->acc.erase(it);
    }
  }
}

void Shard::DropAccumulated() {
  for (auto& p : parts_) {
    MutexLock lock(&p->mu);
    p->acc.clear();
  }
}

void Shard::Read(const Parts& parts, char* out) const {
  for (const Part* p : parts) {
    MutexLock lock(&p->mu);
    std::memcpy(out, p->w.data(), p->bytes());
    out += p->bytes();
  }
}

std::vector<char> Shard::Values() const {
  std::vector<char> out;
  for (const auto& p : parts_) {
    MutexLock lock(&p->mu);
    out.insert(out.end(), p->w.begin(), p->w.end());
  }
  return out;
}

// Locks every part at once (in key order, the only order parts are ever locked together).
std::string Shard::SaveState() const NO_THREAD_SAFETY_ANALYSIS {
  std::string state;
  state.reserve(owned_bytes_ * (1 + optimizer_.state_slots()) + parts_.size() * 8);
  for (const auto& p : parts_) p->mu.Lock();
  for (const auto& p : parts_) {
    state.append(reinterpret_cast<const char*>(&p->t), sizeof(p->t));
    state.append(p->w.data(), p->w.size());
    state.append(p->m.data(), p->m.size());
    state.append(p->v.data(), p->v.size());
  }
  for (const auto& p : parts_) p->mu.Unlock();
  return state;
}

Status Shard::LoadState(std::string_view state) {
  for (auto& p : parts_) {
    MutexLock lock(&p->mu);
    const size_t need = sizeof(uint64_t) + p->w.size() + p->m.size() + p->v.size();
    if (state.size() < need) return DataLoss("shard file is too short");
    std::memcpy(&p->t, state.data(), sizeof(p->t));
    state.remove_prefix(sizeof(p->t));
    for (auto* vec : {&p->w, &p->m, &p->v}) {
      std::memcpy(vec->data(), state.data(), vec->size());
      state.remove_prefix(vec->size());
    }
  }
  if (!state.empty()) return DataLoss("shard file is too long");
  return Status::Ok();
}

}  // namespace cohort::collective::ps
