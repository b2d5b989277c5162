#include "coordinator/tuning/search_space.h"

#include <algorithm>
#include <cmath>

namespace cohort::coordinator::tuning {

namespace {

// A scale's monotone map f and its inverse, side by side, for a parameter on [lo, hi].
struct ScaleMap {
  double (*forward)(double v, double lo, double hi);
  double (*inverse)(double t, double lo, double hi);
};

ScaleMap MapOf(ScaleType scale) {
  switch (scale) {
    case ScaleType::kLog:
      return {[](double v, double, double) { return std::log(v); },
              [](double t, double, double) { return std::exp(t); }};
    case ScaleType::kReverseLog:
      return {[](double v, double lo, double hi) { return -std::log(hi + lo - v); },
              [](double t, double lo, double hi) { return hi + lo - std::exp(-t); }};
    case ScaleType::kLinear:
      break;
  }
  return {[](double v, double, double) { return v; }, [](double t, double, double) { return t; }};
}

// The numeric range a parameter is encoded over.
void Range(const ParameterSpec& p, double* lo, double* hi) {
  switch (p.type) {
    case ParameterType::kInteger:
      *lo = p.min - 0.5;
      *hi = p.max + 0.5;
      return;
    case ParameterType::kDiscrete:
      *lo = p.values.front();
      *hi = p.values.back();
      return;
    default:
      *lo = p.min;
      *hi = p.max;
  }
}

// A parameter's encoding: value v sits at (f(v) - f(lo)) / (f(hi) - f(lo)) of the unit interval.
struct UnitScale {
  explicit UnitScale(const ParameterSpec& p) : map(MapOf(p.scale)) {
    Range(p, &lo, &hi);
    flo = map.forward(lo, lo, hi);
    fhi = map.forward(hi, lo, hi);
  }
  double ToUnit(double v) const { return (map.forward(v, lo, hi) - flo) / (fhi - flo); }
  double FromUnit(double u) const { return map.inverse(flo + u * (fhi - flo), lo, hi); }

  ScaleMap map;
  double lo = 0, hi = 0, flo = 0, fhi = 0;
};

}  // namespace

SearchSpace::SearchSpace(const StudySpec& spec) : spec_(spec) {
  for (const auto& p : spec_.parameters) {
    offsets_.push_back(dims_);
    int w = p.type == ParameterType::kCategorical ? static_cast<int>(p.categories.size()) : 1;
    widths_.push_back(w);
    dims_ += w;
  }
  finite_size_ = GridSize(spec_);
}

double SearchSpace::ToUnit(size_t i, double value) const {
  const UnitScale scale(spec_.parameters[i]);
  if (!(scale.hi > scale.lo)) return 0.5;
  // Integers on a log scale: the bin of min starts at min - 0.5 > 0 since min >= 1.
  return std::clamp(scale.ToUnit(value), 0.0, 1.0);
}

double SearchSpace::FromUnit(size_t i, double unit) const {
  const ParameterSpec& p = spec_.parameters[i];
  unit = std::clamp(unit, 0.0, 1.0);
  if (p.type == ParameterType::kDiscrete) {
    // Nearest value in the encoded space.
    double best = p.values.front();
    double best_d = 1e300;
    for (double v : p.values) {
      double d = std::fabs(ToUnit(i, v) - unit);
      if (d < best_d) {
        best_d = d;
        best = v;
      }
    }
    return best;
  }
  const double v = UnitScale(p).FromUnit(unit);
  if (p.type == ParameterType::kInteger) return std::clamp(std::round(v), p.min, p.max);
  return std::clamp(v, p.min, p.max);
}

Eigen::VectorXd SearchSpace::Encode(const Assignment& assignment) const {
  Eigen::VectorXd x = Eigen::VectorXd::Zero(dims_);
  for (size_t i = 0; i < spec_.parameters.size() && i < assignment.size(); ++i) {
    const ParameterSpec& p = spec_.parameters[i];
    if (p.type == ParameterType::kCategorical) {
      auto it = std::find(p.categories.begin(), p.categories.end(), assignment[i].category);
      if (it != p.categories.end()) x[offsets_[i] + (it - p.categories.begin())] = 1.0;
    } else {
      x[offsets_[i]] = ToUnit(i, assignment[i].number);
    }
  }
  return x;
}

Assignment SearchSpace::Decode(const Eigen::VectorXd& unit) const {
  Assignment a(spec_.parameters.size());
  for (size_t i = 0; i < spec_.parameters.size(); ++i) {
    const ParameterSpec& p = spec_.parameters[i];
    if (p.type == ParameterType::kCategorical) {
      int best = 0;
      for (int k = 1; k < widths_[i]; ++k) {
        if (unit[offsets_[i] + k] > unit[offsets_[i] + best]) best = k;
      }
      a[i].category = p.categories[best];
    } else {
      a[i].number = FromUnit(i, unit[offsets_[i]]);
    }
  }
  return a;
}

Assignment SearchSpace::Sample(TuningRng* rng) const {
  Assignment a(spec_.parameters.size());
  for (size_t i = 0; i < spec_.parameters.size(); ++i) {
    const ParameterSpec& p = spec_.parameters[i];
    switch (p.type) {
      case ParameterType::kCategorical:
        a[i].category = p.categories[rng->UniformInt(p.categories.size())];
        break;
      case ParameterType::kDiscrete:
        a[i].number = p.values[rng->UniformInt(p.values.size())];
        break;
      case ParameterType::kDouble:
      case ParameterType::kInteger:
        a[i].number = FromUnit(i, rng->Uniform());
        break;
    }
  }
  return a;
}

Assignment SearchSpace::GridPoint(uint64_t index) const {
  Assignment a(spec_.parameters.size());
  for (size_t j = spec_.parameters.size(); j-- > 0;) {
    const ParameterSpec& p = spec_.parameters[j];
    // A double stands at its min (a grid has none; GridSize says so).
    const uint64_t n = GridCount(p).value_or(1);
    uint64_t k = index % n;
    index /= n;
    switch (p.type) {
      case ParameterType::kInteger:
        a[j].number = p.min + static_cast<double>(k);
        break;
      case ParameterType::kCategorical:
        a[j].category = p.categories[k];
        break;
      case ParameterType::kDiscrete:
        a[j].number = p.values[k];
        break;
      case ParameterType::kDouble:
        a[j].number = p.min;
        break;
    }
  }
  return a;
}

std::string SearchSpace::Key(const Assignment& assignment) const {
  std::string key;
  for (const auto& [id, text] : AssignmentToStrings(spec_, assignment)) {
    if (!key.empty()) key += ',';
    key += id + "=" + text;
  }
  return key;
}

}  // namespace cohort::coordinator::tuning
