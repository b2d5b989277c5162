// GradientAverager is how the digits trainer combines the gradients of its data-parallel
// replicas: after Average() returns, every rank holds the element-wise mean of the buffers all
// ranks passed, bit for bit the same on every rank. The trainer calls it once per step with the
// same count on every rank.
//
// LocalGradientAverager is the single-process case (WORLD_SIZE unset or 1): the mean of one
// buffer is itself. CollectiveGradientAverager (collective_gradient_averager.h) goes through the
// collective library: the Reduction Server when the job has reducers, the ring otherwise.
//
// Errors: a peer that is gone or a collective that fails returns its Status; the trainer stops.
// Thread safety: one caller at a time.
#pragma once

#include <cstddef>

#include "common/status.h"

namespace cohort::examples {

class GradientAverager {
 public:
  virtual ~GradientAverager() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Replaces data[0..count) with its mean over all ranks.
  virtual Status Average(float* data, size_t count) = 0;
};

class LocalGradientAverager : public GradientAverager {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Status Average(float*, size_t) override { return Status::Ok(); }
};

}  // namespace cohort::examples
