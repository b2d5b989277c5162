#include "examples/digits_trainer/rng.h"

#include <limits>
#include <sstream>
#include <utility>

namespace cohort::examples {

uint64_t Rng::UniformInt(uint64_t n) {
  // Reject the top partial bucket so every residue is equally likely.
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x;
  do {
    x = engine_();
  } while (x >= limit);
  return x % n;
}

double Rng::Uniform(double lo, double hi) {
  const double unit = static_cast<double>(engine_() >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
  return lo + (hi - lo) * unit;
}

void Rng::Shuffle(std::vector<uint32_t>& values) {
  for (size_t i = values.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(UniformInt(i));
    std::swap(values[i - 1], values[j]);
  }
}

std::string Rng::SaveState() const {
  std::ostringstream out;
  out << engine_;
  return out.str();
}

Status Rng::LoadState(const std::string& state) {
  std::istringstream in(state);
  std::mt19937_64 engine;
  in >> engine;
  if (in.fail()) return DataLoss("random generator state does not parse");
  engine_ = engine;
  return Status::Ok();
}

}  // namespace cohort::examples
