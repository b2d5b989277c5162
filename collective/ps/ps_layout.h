// ModelLayout describes the parameters a parameter server holds: a list of keys, each a dense
// vector of `count` elements of one floating-point type (f32 or f64), in increasing key order.
// The flattened model is the concatenation of the keys' values in that order.
//
// Sharding (key ranges balanced by bytes): the flattened model's bytes are cut into num_servers
// contiguous ranges of (nearly) equal size, each cut snapped down to an element boundary of the
// key it falls in. Server s owns bytes [boundary[s], boundary[s+1]); a key larger than a share
// is split across servers, so a one-key model still spreads over all of them. Every worker and
// server computes the same boundaries from the same layout, so nobody has to ask.
//
// A request names a sorted list of keys; its values are the concatenation of those keys' values.
// The bytes of that buffer that belong to server s are always one contiguous range (the keys a
// server owns are consecutive in key order), which lets workers send from and receive into the
// caller's buffer without copying.
//
// Thread safety: immutable after Create; share freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "collective/types.h"
#include "common/status.h"

namespace cohort::collective::ps {

struct KeySpec {
  uint64_t key = 0;
  uint64_t count = 0;  // elements, at least 1
  DataType type = DataType::kF32;

  bool operator==(const KeySpec&) const = default;
};

// Whether the parameter server can hold values of `type` (f32, f64).
bool IsParameterType(DataType type);

class ModelLayout {
 public:
  ModelLayout() = default;
  // Keys must be strictly increasing, each with count >= 1 and a parameter type.
  static StatusOr<ModelLayout> Create(std::vector<KeySpec> keys);
  // One key per size: keys 0..n-1, all of `type` (a convenience for tests and benchmarks).
  static StatusOr<ModelLayout> FromCounts(const std::vector<uint64_t>& counts, DataType type);

  const std::vector<KeySpec>& keys() const { return keys_; }
  size_t num_keys() const { return keys_.size(); }
  uint64_t total_bytes() const { return offsets_.empty() ? 0 : offsets_.back(); }
  // Index of `key` in keys(), or nullopt.
  std::optional<size_t> IndexOf(uint64_t key) const;
  // Byte offset of key index i in the flattened model, and its size in bytes.
  uint64_t offset(size_t i) const { return offsets_[i]; }
  uint64_t bytes(size_t i) const { return offsets_[i + 1] - offsets_[i]; }

  // num_servers + 1 byte offsets: server s owns [b[s], b[s+1]).
  std::vector<uint64_t> ShardBoundaries(int num_servers) const;

  // Stable binary encoding (little-endian): u32 magic, u32 n, then n x (u64 key, u64 count,
  // u8 type).
  std::string Serialize() const;
  static StatusOr<ModelLayout> Parse(std::string_view bytes);

  bool operator==(const ModelLayout& o) const { return keys_ == o.keys_; }

 private:
  std::vector<KeySpec> keys_;
  std::vector<uint64_t> offsets_;  // num_keys + 1
};

// The part of one requested key that one server owns.
struct KeyPart {
  size_t index = 0;    // key index in the layout
  uint64_t begin = 0;  // byte range within the key's value
  uint64_t end = 0;
};

// How one request (a sorted key list) splits over the servers: for each server with any part,
// the contiguous byte range of the caller's buffer and the keys (those that overlap the server).
struct ServerSlice {
  int server = 0;
  uint64_t buffer_begin = 0;  // bytes of the caller's buffer
  uint64_t buffer_end = 0;
  size_t first_key = 0;  // positions in the request's key list: [first_key, end_key)
  size_t end_key = 0;
};

// Splits a request. `indices` are layout indices, strictly increasing.
std::vector<ServerSlice> SplitRequest(const ModelLayout& layout,
                                      const std::vector<uint64_t>& boundaries,
                                      std::span<const size_t> indices);

// The part of key index `i` inside [lo, hi) of the flattened model (empty: begin == end).
KeyPart PartOf(const ModelLayout& layout, size_t i, uint64_t lo, uint64_t hi);

}  // namespace cohort::collective::ps
