// GaussianProcess is the surrogate model of the Bayesian search: a zero-mean GP on the unit cube
// with a Matérn 5/2 kernel with one length scale per coordinate (ARD), a signal variance and a
// Gaussian noise variance:
//
//   k(a, b) = s2 * (1 + sqrt5 r + 5/3 r^2) * exp(-sqrt5 r),  r^2 = sum_i (a_i - b_i)^2 / l_i^2
//   K = k(X, X) + noise * I
//
// Hyperparameters live in log space, packed as theta = [log l_1 .. log l_d, log s2, log noise].
// Fit() maximises the log marginal likelihood plus weak log-normal priors on theta (MAP, which
// keeps small data sets from collapsing the length scales) with a compact L-BFGS from several
// starting points. The targets are expected to be standardised (mean 0, variance 1) by the
// caller. Linear algebra is Eigen's LLT; a kernel matrix that is not positive definite gets
// growing diagonal jitter before the fit gives up on that theta.
//
// Thread safety: a fitted GaussianProcess is immutable; Predict may be called concurrently.
#pragma once

#include <Eigen/Dense>
#include <cstdint>

#include "common/status.h"
#include "coordinator/tuning/tuning_rng.h"

namespace cohort::coordinator::tuning {

struct GpFitOptions {
  int restarts = 3;         // starting points: one default, the rest random
  int max_iterations = 60;  // L-BFGS iterations per start
  bool use_priors = true;   // MAP instead of plain maximum likelihood
};

class GaussianProcess {
 public:
  // Bounds of the search in log space (theta is clamped into them).
  static constexpr double kMinLogLength = -6.9;  // 0.001
  static constexpr double kMaxLogLength = 4.6;   // 100
  static constexpr double kMinLogSignal = -6.9;
  static constexpr double kMaxLogSignal = 4.6;
  static constexpr double kMinLogNoise = -13.8;  // 1e-6
  static constexpr double kMaxLogNoise = 1.0;

  // The model with given hyperparameters, conditioned on (x rows, y). Fails if the kernel matrix
  // stays singular even with jitter.
  static StatusOr<GaussianProcess> Create(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                          const Eigen::VectorXd& theta);
  // Fits theta on (x, y) and conditions on them.
  static StatusOr<GaussianProcess> Fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                       const GpFitOptions& options, TuningRng* rng);

  // The log marginal likelihood log p(y | X, theta) and, when `grad` is not null, its gradient
  // with respect to theta (analytic). Returns -infinity when K is not positive definite.
  static double LogMarginalLikelihood(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                      const Eigen::VectorXd& theta, Eigen::VectorXd* grad);
  // The weak prior added during a MAP fit, and its gradient.
  static double LogPrior(const Eigen::VectorXd& theta, Eigen::VectorXd* grad);
  // The default starting theta for d coordinates.
  static Eigen::VectorXd DefaultTheta(int d);

  // Same model (theta), conditioned on other data: used to add pending points with lies.
  StatusOr<GaussianProcess> Recondition(const Eigen::MatrixXd& x, const Eigen::VectorXd& y) const {
    return Create(x, y, theta_);
  }

  // Posterior mean and variance of the latent function (noise excluded) at each row of `xs`.
  void Predict(const Eigen::MatrixXd& xs, Eigen::VectorXd* mean, Eigen::VectorXd* variance) const;

  const Eigen::VectorXd& theta() const { return theta_; }
  int dims() const { return static_cast<int>(x_.cols()); }
  int size() const { return static_cast<int>(x_.rows()); }

 private:
  GaussianProcess() = default;

  Eigen::MatrixXd x_;
  Eigen::VectorXd theta_;
  Eigen::MatrixXd chol_l_;  // lower Cholesky factor of K
  Eigen::VectorXd alpha_;   // K^-1 y
};

// Matérn 5/2 ARD cross-covariance k(A, B) (noise excluded) for theta as above.
Eigen::MatrixXd Matern52(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b,
                         const Eigen::VectorXd& theta);

}  // namespace cohort::coordinator::tuning
