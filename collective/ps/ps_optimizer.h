// Server-side optimizers of the parameter server: SGD, momentum (heavy ball, PyTorch's form) and
// Adam. One update reads the gradient g (already summed over whatever the server aggregated) and
// scales it by `scale` first; the server passes rescale (default 1/num_workers) so that one
// synchronous step on the sum of n workers' gradients equals one step on their mean.
//
//   sgd:      w -= lr * g
//   momentum: m = momentum * m + g;  w -= lr * m
//   adam:     m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//             w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)    (t: this update's
//             number, from 1)
//
// Arithmetic is in the parameter type (f32 or f64), element by element in index order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "collective/types.h"
#include "common/status.h"

namespace cohort::collective::ps {

enum class OptimizerKind : uint8_t { kSgd = 0, kMomentum = 1, kAdam = 2 };

std::string_view OptimizerKindName(OptimizerKind kind);
std::optional<OptimizerKind> ParseOptimizerKind(std::string_view name);

// What the job chooses (through the chief's InitModel, or cohort-ps flags for a server run by
// hand). Fixed-layout and trivially copyable: it travels on the wire.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  uint8_t reserved[3] = {0, 0, 0};
  // Staleness bound: < 0 asynchronous (every push is applied at once as its own update);
  // >= 0 bounded staleness (SSP): the pushes of clock c are summed and applied as one update once
  // every worker has finished clock c, and a worker at clock c may read only after the slowest
  // reached c - staleness. 0 is synchronous.
  int32_t staleness = -1;
  double learning_rate = 0.01;
  double momentum = 0.9;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  // Multiplies every gradient before the update; 0 means 1/num_workers.
  double rescale = 0.0;

  Status Validate() const;
  // Optimizer state slots per parameter (0, 1 or 2).
  int state_slots() const {
    return kind == OptimizerKind::kSgd ? 0 : kind == OptimizerKind::kMomentum ? 1 : 2;
  }
  std::string ToString() const;
};

// Applies one update to n parameters of `type` at w with state m, v (unused slots may be null)
// from gradient g. `t` is the 1-based number of this update (Adam's bias correction).
void ApplyUpdate(const OptimizerConfig& config, DataType type, void* w, void* m, void* v,
                 const void* g, size_t n, uint64_t t, double scale);

}  // namespace cohort::collective::ps
