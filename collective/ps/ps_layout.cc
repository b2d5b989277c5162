#include "collective/ps/ps_layout.h"

#include <algorithm>

#include "collective/ps/ps_bytes.h"

namespace cohort::collective::ps {
namespace {

constexpr uint32_t kLayoutMagic = 0x4c535043;  // "CPSL"

}  // namespace

bool IsParameterType(DataType type) { return type == DataType::kF32 || type == DataType::kF64; }

StatusOr<ModelLayout> ModelLayout::Create(std::vector<KeySpec> keys) {
  ModelLayout layout;
  layout.offsets_.push_back(0);
  for (size_t i = 0; i < keys.size(); ++i) {
    const KeySpec& k = keys[i];
    if (i > 0 && k.key <= keys[i - 1].key) {
      return InvalidArgument("model layout: keys must be strictly increasing (key " +
                             std::to_string(k.key) + " follows " + std::to_string(keys[i - 1].key) +
                             ")");
    }
    if (k.count == 0)
      return InvalidArgument("model layout: key " + std::to_string(k.key) + " has no elements");
    if (!IsParameterType(k.type)) {
      return InvalidArgument("model layout: key " + std::to_string(k.key) + " has type " +
                             std::string(DataTypeName(k.type)) + "; parameters are f32 or f64");
    }
    if (k.count > (uint64_t{1} << 40))
      return InvalidArgument("model layout: key " + std::to_string(k.key) + " is too large");
    layout.offsets_.push_back(layout.offsets_.back() + k.count * DataTypeSize(k.type));
  }
  layout.keys_ = std::move(keys);
  return layout;
}

StatusOr<ModelLayout> ModelLayout::FromCounts(const std::vector<uint64_t>& counts, DataType type) {
  std::vector<KeySpec> keys;
  for (size_t i = 0; i < counts.size(); ++i) keys.push_back(KeySpec{i, counts[i], type});
  return Create(std::move(keys));
}

std::optional<size_t> ModelLayout::IndexOf(uint64_t key) const {
  auto it = std::lower_bound(keys_.begin(), keys_.end(), key,
                             [](const KeySpec& k, uint64_t v) { return k.key < v; });
  if (it == keys_.end() || it->key != key) return std::nullopt;
  return static_cast<size_t>(it - keys_.begin());
}

std::vector<uint64_t> ModelLayout::ShardBoundaries(int num_servers) const {
  std::vector<uint64_t> b(static_cast<size_t>(num_servers) + 1, 0);
  const uint64_t total = total_bytes();
  b[num_servers] = total;
  for (int s = 1; s < num_servers; ++s) {
    const uint64_t target =
        static_cast<uint64_t>((static_cast<unsigned __int128>(total) * s) / num_servers);
    // The key containing `target`: the last offset <= target.
    auto it = std::upper_bound(offsets_.begin(), offsets_.end(), target);
    const size_t i = static_cast<size_t>(it - offsets_.begin()) - 1;
    uint64_t cut = target;
    if (i < keys_.size()) {
      const uint64_t es = DataTypeSize(keys_[i].type);
      cut = offsets_[i] + (target - offsets_[i]) / es * es;
    }
    b[s] = std::max(cut, b[s - 1]);
  }
  return b;
}

std::string ModelLayout::Serialize() const {
  std::string out;
  AppendBytes(&out, kLayoutMagic);
  AppendBytes(&out, static_cast<uint32_t>(keys_.size()));
  for (const KeySpec& k : keys_) {
    AppendBytes(&out, k.key);
    AppendBytes(&out, k.count);
    AppendBytes(&out, static_cast<uint8_t>(k.type));
  }
  return out;
}

StatusOr<ModelLayout> ModelLayout::Parse(std::string_view in) {
  uint32_t magic = 0, n = 0;
  if (!TakeBytes(&in, &magic) || magic != kLayoutMagic || !TakeBytes(&in, &n))
    return DataLoss("model layout: bad header");
  if (in.size() != static_cast<size_t>(n) * 17)
    return DataLoss("model layout: length does not match its key count");
  std::vector<KeySpec> keys(n);
  for (auto& k : keys) {
    uint8_t type = 0;
    (void)TakeBytes(&in, &k.key);
    (void)TakeBytes(&in, &k.count);
    (void)TakeBytes(&in, &type);
    if (!IsValid(static_cast<DataType>(type))) return DataLoss("model layout: bad type");
    k.type = static_cast<DataType>(type);
  }
  auto layout = Create(std::move(keys));
  if (!layout.ok()) return DataLoss(layout.status().message());
  return layout;
}

KeyPart PartOf(const ModelLayout& layout, size_t i, uint64_t lo, uint64_t hi) {
  const uint64_t ko = layout.offset(i);
  const uint64_t ke = ko + layout.bytes(i);
  KeyPart p;
  p.index = i;
  const uint64_t b = std::max(ko, lo);
  const uint64_t e = std::min(ke, hi);
  if (b < e) {
    p.begin = b - ko;
    p.end = e - ko;
  }
  return p;
}

std::vector<ServerSlice> SplitRequest(const ModelLayout& layout,
                                      const std::vector<uint64_t>& boundaries,
                                      std::span<const size_t> indices) {
  std::vector<ServerSlice> out;
  const int num_servers = static_cast<int>(boundaries.size()) - 1;
  uint64_t buffer_offset = 0;  // caller-buffer offset of the current key
  int s = 0;
  for (size_t j = 0; j < indices.size(); ++j) {
    const size_t i = indices[j];
    const uint64_t ko = layout.offset(i);
    const uint64_t ke = ko + layout.bytes(i);
    // Servers whose range overlaps [ko, ke), in order.
    while (s < num_servers && boundaries[s + 1] <= ko) ++s;
    for (int t = s; t < num_servers && boundaries[t] < ke; ++t) {
      const uint64_t b = std::max(ko, boundaries[t]);
      const uint64_t e = std::min(ke, boundaries[t + 1]);
      if (b >= e) continue;
      if (out.empty() || out.back().server != t) {
        out.push_back(ServerSlice{t, buffer_offset + (b - ko), buffer_offset + (b - ko), j, j});
      }
      ServerSlice& sl = out.back();
      sl.buffer_end = buffer_offset + (e - ko);
      sl.end_key = j + 1;
    }
    buffer_offset += ke - ko;
  }
  return out;
}

}  // namespace cohort::collective::ps
