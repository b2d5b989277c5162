// Mlp is the classifier the digits trainer fits: 64 inputs -> `hidden` ReLU units -> 10 logits,
// with softmax cross-entropy loss. All parameters live in one flat float vector (W1, b1, W2, b2,
// row-major), so the gradient is one buffer for one all-reduce and the optimizer is a loop.
//
// Every computation runs in a fixed order, so the same inputs give the same bits.
// Thread safety: const methods may run concurrently; the object holds no mutable state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "examples/digits_trainer/digits_dataset.h"
#include "examples/digits_trainer/rng.h"

namespace cohort::examples {

class Mlp {
 public:
  explicit Mlp(int hidden);

  int hidden() const { return hidden_; }
  size_t num_params() const { return num_params_; }

  // He-uniform weights for the ReLU layer, Glorot-uniform for the output layer, zero biases.
  std::vector<float> InitParams(Rng& rng) const;

  // Adds the gradient of the summed loss over `data` rows indices[begin, end) to `grad`
  // (num_params floats) and returns the summed loss.
  double AccumulateGradient(const std::vector<float>& params, const Dataset& data,
                            const uint32_t* indices, size_t count, float* grad) const;

  // The predicted class of one example.
  int Predict(const std::vector<float>& params, const float* x) const;
  // Fraction of `data` classified correctly.
  double Accuracy(const std::vector<float>& params, const Dataset& data) const;

 private:
  // Hidden activations `h` and output probabilities `p` of one example.
  void Forward(const float* params, const float* x, float* h, float* p) const;

  int hidden_;
  size_t w1_, b1_, w2_, b2_;  // offsets into the flat parameter vector
  size_t num_params_;
};

}  // namespace cohort::examples
