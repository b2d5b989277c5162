#include "examples/digits_trainer/mlp.h"

#include <algorithm>
#include <cmath>

namespace cohort::examples {

Mlp::Mlp(int hidden) : hidden_(hidden) {
  const size_t h = static_cast<size_t>(hidden);
  w1_ = 0;
  b1_ = w1_ + h * kDigitsFeatures;
  w2_ = b1_ + h;
  b2_ = w2_ + kDigitsClasses * h;
  num_params_ = b2_ + kDigitsClasses;
}

std::vector<float> Mlp::InitParams(Rng& rng) const {
  std::vector<float> params(num_params_, 0.0f);
  const double limit1 = std::sqrt(6.0 / kDigitsFeatures);
  for (size_t i = w1_; i < b1_; ++i) params[i] = static_cast<float>(rng.Uniform(-limit1, limit1));
  const double limit2 = std::sqrt(6.0 / (hidden_ + kDigitsClasses));
  for (size_t i = w2_; i < b2_; ++i) params[i] = static_cast<float>(rng.Uniform(-limit2, limit2));
  return params;
}

void Mlp::Forward(const float* params, const float* x, float* h, float* p) const {
  const float* w1 = params + w1_;
  const float* b1 = params + b1_;
  const float* w2 = params + w2_;
  const float* b2 = params + b2_;
  for (int j = 0; j < hidden_; ++j) {
    const float* row = w1 + static_cast<size_t>(j) * kDigitsFeatures;
    float sum = b1[j];
    for (int i = 0; i < kDigitsFeatures; ++i) sum += row[i] * x[i];
    h[j] = sum > 0.0f ? sum : 0.0f;
  }
  float max_logit = -INFINITY;
  for (int k = 0; k < kDigitsClasses; ++k) {
    const float* row = w2 + static_cast<size_t>(k) * hidden_;
    float sum = b2[k];
    for (int j = 0; j < hidden_; ++j) sum += row[j] * h[j];
    p[k] = sum;
    max_logit = std::max(max_logit, sum);
  }
  float total = 0.0f;
  for (int k = 0; k < kDigitsClasses; ++k) {
    p[k] = std::exp(p[k] - max_logit);
    total += p[k];
  }
  for (int k = 0; k < kDigitsClasses; ++k) p[k] /= total;
}

double Mlp::AccumulateGradient(const std::vector<float>& params, const Dataset& data,
                               const uint32_t* indices, size_t count, float* grad) const {
  std::vector<float> h(hidden_), dh(hidden_);
  float p[kDigitsClasses];
  const float* w2 = params.data() + w2_;
  float* gw1 = grad + w1_;
  float* gb1 = grad + b1_;
  float* gw2 = grad + w2_;
  float* gb2 = grad + b2_;
  double loss = 0.0;
  for (size_t n = 0; n < count; ++n) {
    const float* x = data.row(indices[n]);
    const int label = data.labels[indices[n]];
    Forward(params.data(), x, h.data(), p);
    loss += -std::log(std::max(p[label], 1e-30f));
    // dL/dlogits = p - onehot(label).
    p[label] -= 1.0f;
    std::fill(dh.begin(), dh.end(), 0.0f);
    for (int k = 0; k < kDigitsClasses; ++k) {
      const float d = p[k];
      gb2[k] += d;
      float* grow = gw2 + static_cast<size_t>(k) * hidden_;
      const float* wrow = w2 + static_cast<size_t>(k) * hidden_;
      for (int j = 0; j < hidden_; ++j) {
        grow[j] += d * h[j];
        dh[j] += d * wrow[j];
      }
    }
    for (int j = 0; j < hidden_; ++j) {
      if (h[j] <= 0.0f) continue;  // ReLU gate
      const float d = dh[j];
      gb1[j] += d;
      float* grow = gw1 + static_cast<size_t>(j) * kDigitsFeatures;
      for (int i = 0; i < kDigitsFeatures; ++i) grow[i] += d * x[i];
    }
  }
  return loss;
}

int Mlp::Predict(const std::vector<float>& params, const float* x) const {
  std::vector<float> h(hidden_);
  float p[kDigitsClasses];
  Forward(params.data(), x, h.data(), p);
  return static_cast<int>(std::max_element(p, p + kDigitsClasses) - p);
}

double Mlp::Accuracy(const std::vector<float>& params, const Dataset& data) const {
  if (data.size() == 0) return 0.0;
  size_t correct = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    if (Predict(params, data.row(i)) == data.labels[i]) ++correct;
  }
  return static_cast<double>(correct) / static_cast<double>(data.size());
}

}  // namespace cohort::examples
