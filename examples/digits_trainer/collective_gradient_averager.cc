#include "examples/digits_trainer/collective_gradient_averager.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace cohort::examples {
namespace {

// Reads an integer variable; `fallback` when unset or empty.
StatusOr<int> IntFromEnv(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  const std::string_view text(value);
  int parsed = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgument(std::string(name) + "=" + value + " is not an integer");
  }
  return parsed;
}

}  // namespace

Status CollectiveGradientAverager::Average(float* data, size_t count) {
  return comm_->Allreduce(data, count, collective::DataType::kF32, collective::ReduceOp::kAvg);
}

StatusOr<std::unique_ptr<GradientAverager>> MakeGradientAveragerFromEnvironment() {
  COHORT_ASSIGN_OR_RETURN(const int world_size, IntFromEnv("WORLD_SIZE", 1));
  COHORT_ASSIGN_OR_RETURN(const int rank, IntFromEnv("RANK", 0));
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
