// Shard is one parameter server's share of the model (ps-lite's KVServer storage): the parts of
// the layout's keys that fall in this server's byte range (ps_layout.h), with their optimizer
// state, and for bounded staleness the summed pushes of each unfinished clock. It knows nothing of
// workers or the wire: the server resolves a request's keys to parts here, then updates or reads
// them.
//
// Arithmetic: an update is ApplyUpdate (ps_optimizer.h) on one part at a time in key order; SSP
// sums add each push into its clock's sum in arrival order, and a finished clock's sum is applied
// as one update. A part counts its updates (Adam's t).
//
// Thread safety: each part has its own mutex, so updates, sums and reads of parts are safe from
// any thread and each part's update is atomic. Init and LoadState replace the whole shard and must
// not run alongside any other call (the server publishes the shard only after them).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collective/ps/ps_layout.h"
#include "collective/ps/ps_optimizer.h"
#include "common/status.h"

namespace cohort::collective::ps {

// The keys a request names: `num_keys` consecutive layout keys from `first_key` (range), or the
// strictly increasing `keys`; all of `type`, `bytes` of values on this server.
struct KeySelection {
  uint8_t type = 0;  // DataType as sent
  bool range = false;
  uint64_t first_key = 0;
  uint32_t num_keys = 0;
  std::span<const uint64_t> keys;
  uint64_t bytes = 0;
};

class Shard {
 public:
  struct Part;
  // Parts in key order, as a request touches them.
  using Parts = std::vector<Part*>;

  Shard(int num_servers, int server_index);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Replaces the shard with this server's parts of `layout`: values from `values` (exactly the
  // bytes this server owns, in order) or zero, optimizer state zero, no updates counted.
  Status Init(const ModelLayout& layout, const OptimizerConfig& optimizer, const char* values,
              size_t bytes);

  const ModelLayout& layout() const { return layout_; }
  const OptimizerConfig& optimizer() const { return optimizer_; }
  // Bytes of the model on this server (0 before Init). Safe to read at any time.
  uint64_t owned_bytes() const { return owned_bytes_.load(); }
  size_t num_parts() const { return parts_.size(); }

  // The parts `selection` touches. kNotFound for an unknown key or a range past the last key;
  // kInvalidArgument for an unknown type, unsorted keys, a type mismatch, a key not on this
  // server, or `bytes` other than what this server holds of those keys.
  Status Resolve(const KeySelection& selection, Parts* parts) const;

  // One optimizer update per part from `gradients` (the parts' bytes, concatenated).
  void Update(const Parts& parts, const char* gradients, double scale);
  // Adds `gradients` into the parts' sums for `clock`.
  void Accumulate(const Parts& parts, int64_t clock, const char* gradients);
  // Applies, clock by clock from `first` to `end` (exclusive), each part's sum as one update and
  // drops it.
  void ApplyAccumulated(int64_t first, int64_t end, double scale);
  // Drops every sum (a new generation: half-summed clocks are lost).
  void DropAccumulated();
  // Copies the parts' values into `out`, concatenated.
  void Read(const Parts& parts, char* out) const;
  // Every part's values in key order.
  std::vector<char> Values() const;

  // Values, optimizer state and update counts, all parts read at one instant (checkpoints):
  // per part, u64 updates then values, first and second optimizer slots.
  std::string SaveState() const;
  // Loads what SaveState wrote for the same layout and optimizer (after Init with no values).
  // kDataLoss naming what is wrong when the size does not match.
  Status LoadState(std::string_view state);

 private:
  const int num_servers_;
  const int server_index_;
  ModelLayout layout_;
  OptimizerConfig optimizer_;
  std::vector<std::unique_ptr<Part>> parts_;  // in key order
  std::vector<int> part_of_key_;              // layout index -> parts_ index or -1
  std::atomic<uint64_t> owned_bytes_{0};
};

}  // namespace cohort::collective::ps
