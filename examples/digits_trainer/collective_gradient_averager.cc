#include "examples/digits_trainer/collective_gradient_averager.h"

#include <cstdio>
#include <string>

#include "common/env.h"

namespace cohort::examples {

Status CollectiveGradientAverager::Average(float* data, size_t count) {
  return comm_->Allreduce(data, count, collective::DataType::kF32, collective::ReduceOp::kAvg);
}

StatusOr<std::unique_ptr<GradientAverager>> MakeGradientAveragerFromEnvironment() {
  COHORT_ASSIGN_OR_RETURN(const int world_size, IntFromEnvironment("WORLD_SIZE", 1));
  COHORT_ASSIGN_OR_RETURN(const int rank, IntFromEnvironment("RANK", 0));
  if (world_size < 1) return InvalidArgument("WORLD_SIZE must be at least 1");
  if (rank < 0 || rank >= world_size) {
    return InvalidArgument("RANK=" + std::to_string(rank) +
                           " is outside WORLD_SIZE=" + std::to_string(world_size));
  }
  if (world_size == 1) return std::unique_ptr<GradientAverager>(new LocalGradientAverager());
  auto comm = collective::Communicator::FromEnvironment();
  if (!comm.ok()) return comm.status().WithContext("connecting rank " + std::to_string(rank));
  std::printf("rank %d of %d: gradients averaged by the %s all-reduce (%d reducers)\n", rank,
              world_size, std::string(collective::AlgorithmName((*comm)->AutoAlgorithm())).c_str(),
              (*comm)->num_reducers());
  std::fflush(stdout);
  return std::unique_ptr<GradientAverager>(new CollectiveGradientAverager(std::move(*comm)));
}

}  // namespace cohort::examples
