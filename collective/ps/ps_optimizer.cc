#include "collective/ps/ps_optimizer.h"

#include <cmath>
#include <cstdio>

#include "common/enum_names.h"

namespace cohort::collective::ps {
namespace {

constexpr EnumName<OptimizerKind> kOptimizerKindNames[] = {{OptimizerKind::kSgd, "sgd"},
                                                           {OptimizerKind::kMomentum, "momentum"},
                                                           {OptimizerKind::kAdam, "adam"}};

template <typename T>
void Update(const OptimizerConfig& c, T* w, T* m, T* v, const T* g, size_t n, uint64_t t,
            double scale) {
  const T lr = static_cast<T>(c.learning_rate);
  const T s = static_cast<T>(scale);
  switch (c.kind) {
    case OptimizerKind::kSgd:
      for (size_t i = 0; i < n; ++i) w[i] -= lr * (g[i] * s);
      break;
    case OptimizerKind::kMomentum: {
      const T mu = static_cast<T>(c.momentum);
      for (size_t i = 0; i < n; ++i) {
        m[i] = mu * m[i] + g[i] * s;
        w[i] -= lr * m[i];
      }
      break;
    }
    case OptimizerKind::kAdam: {
      const T b1 = static_cast<T>(c.beta1);
      const T b2 = static_cast<T>(c.beta2);
      const T eps = static_cast<T>(c.epsilon);
      const T c1 = static_cast<T>(1.0 - std::pow(c.beta1, static_cast<double>(t)));
      const T c2 = static_cast<T>(1.0 - std::pow(c.beta2, static_cast<double>(t)));
      for (size_t i = 0; i < n; ++i) {
        const T gi = g[i] * s;
        m[i] = b1 * m[i] + (T(1) - b1) * gi;
        v[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
        w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
      }
      break;
    }
  }
}

}  // namespace

std::string_view OptimizerKindName(OptimizerKind kind) {
  return NameIn(kOptimizerKindNames, kind, "?");
}

std::optional<OptimizerKind> ParseOptimizerKind(std::string_view name) {
  return ValueIn(kOptimizerKindNames, name);
}

Status OptimizerConfig::Validate() const {
  if (kind != OptimizerKind::kSgd && kind != OptimizerKind::kMomentum &&
      kind != OptimizerKind::kAdam) {
    return InvalidArgument("optimizer: unknown kind " + std::to_string(static_cast<int>(kind)));
  }
  if (!std::isfinite(learning_rate) || learning_rate < 0)
    return InvalidArgument("optimizer: learning rate must be >= 0");
  if (!(momentum >= 0 && momentum < 1))
    return InvalidArgument("optimizer: momentum must be in [0, 1)");
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return InvalidArgument("optimizer: betas must be in [0, 1)");
  if (!(epsilon > 0)) return InvalidArgument("optimizer: epsilon must be > 0");
  if (!std::isfinite(rescale) || rescale < 0)
    return InvalidArgument("optimizer: rescale must be >= 0 (0: 1/workers)");
  return Status::Ok();
}

std::string OptimizerConfig::ToString() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s lr=%g momentum=%g beta1=%g beta2=%g eps=%g rescale=%g %s",
                std::string(OptimizerKindName(kind)).c_str(), learning_rate, momentum, beta1, beta2,
                epsilon, rescale,
                staleness < 0 ? "async" : ("staleness=" + std::to_string(staleness)).c_str());
  return buf;
}

void ApplyUpdate(const OptimizerConfig& config, DataType type, void* w, void* m, void* v,
                 const void* g, size_t n, uint64_t t, double scale) {
  if (type == DataType::kF64) {
    Update(config, static_cast<double*>(w), static_cast<double*>(m), static_cast<double*>(v),
           static_cast<const double*>(g), n, t, scale);
  } else {
    Update(config, static_cast<float*>(w), static_cast<float*>(m), static_cast<float*>(v),
           static_cast<const float*>(g), n, t, scale);
  }
}

}  // namespace cohort::collective::ps
