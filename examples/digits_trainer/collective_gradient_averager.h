// CollectiveGradientAverager averages gradients across the ranks of a job through the collective
// library's Communicator (the Reduction Server when the job has reducers, the ring otherwise).
// The Communicator gives every rank the same result bits, which the trainer relies on.
//
// MakeGradientAveragerFromEnvironment() picks the averager for this process: a
// LocalGradientAverager when WORLD_SIZE is unset or 1, else a CollectiveGradientAverager built by
// Communicator::FromEnvironment() (RANK, WORLD_SIZE, COHORT_BOOTSTRAP_ADDR, COHORT_NUM_REDUCERS).
// A malformed RANK/WORLD_SIZE is kInvalidArgument; a failed connection is the Communicator's error.
#pragma once

#include <memory>

#include "collective/communicator.h"
#include "examples/digits_trainer/gradient_averager.h"

namespace cohort::examples {

class CollectiveGradientAverager : public GradientAverager {
 public:
  explicit CollectiveGradientAverager(std::unique_ptr<collective::Communicator> comm)
      : comm_(std::move(comm)) {}

  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->size(); }
  Status Average(float* data, size_t count) override;

 private:
  std::unique_ptr<collective::Communicator> comm_;
};

StatusOr<std::unique_ptr<GradientAverager>> MakeGradientAveragerFromEnvironment();

}  // namespace cohort::examples
