#include "coordinator/tuning/gaussian_process.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <utility>

namespace cohort::coordinator::tuning {

namespace {

constexpr double kSqrt5 = 2.23606797749978969640;
constexpr double kLog2Pi = 1.83787706640934548356;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Weak priors (means and standard deviations in log space).
constexpr double kPriorLogLengthMean = -0.9163;  // ln 0.4
constexpr double kPriorLogLengthSd = 1.5;
constexpr double kPriorLogSignalMean = 0.0;
constexpr double kPriorLogSignalSd = 1.5;
constexpr double kPriorLogNoiseMean = -6.9;  // ln 1e-3
constexpr double kPriorLogNoiseSd = 3.0;

Eigen::VectorXd Clamp(Eigen::VectorXd theta) {
  const int d = static_cast<int>(theta.size()) - 2;
  for (int i = 0; i < d; ++i) {
    theta[i] = std::clamp(theta[i], GaussianProcess::kMinLogLength, GaussianProcess::kMaxLogLength);
  }
  theta[d] = std::clamp(theta[d], GaussianProcess::kMinLogSignal, GaussianProcess::kMaxLogSignal);
  theta[d + 1] =
      std::clamp(theta[d + 1], GaussianProcess::kMinLogNoise, GaussianProcess::kMaxLogNoise);
  return theta;
}

// Scaled squared distances between the rows of za and zb (already divided by the length scales).
Eigen::MatrixXd SquaredDistances(const Eigen::MatrixXd& za, const Eigen::MatrixXd& zb) {
  Eigen::VectorXd na = za.rowwise().squaredNorm();
  Eigen::VectorXd nb = zb.rowwise().squaredNorm();
  Eigen::MatrixXd d2 = -2.0 * za * zb.transpose();
  d2.colwise() += na;
  d2.rowwise() += nb.transpose();
  return d2.cwiseMax(0.0);
}

Eigen::MatrixXd ScaleRows(const Eigen::MatrixXd& x, const Eigen::VectorXd& theta) {
  const int d = static_cast<int>(x.cols());
  Eigen::VectorXd inv_l = (-theta.head(d)).array().exp();
  return x * inv_l.asDiagonal();
}

// Cholesky of K with growing diagonal jitter; false when K stays indefinite.
bool Factor(const Eigen::MatrixXd& k, double signal, Eigen::LLT<Eigen::MatrixXd>* llt,
            double* jitter) {
  double add = 0.0;
  for (int attempt = 0; attempt < 6; ++attempt) {
    if (add == 0.0) {
      llt->compute(k);
    } else {
      Eigen::MatrixXd kk = k;
      kk.diagonal().array() += add;
      llt->compute(kk);
    }
    if (llt->info() == Eigen::Success) {
      *jitter = add;
      return true;
    }
    add = (add == 0.0) ? 1e-10 * std::max(signal, 1e-6) : add * 100.0;
  }
  return false;
}

// Minimises f with L-BFGS (memory 6), theta kept inside the box by projection.
// fn returns the value and fills the gradient; +infinity marks an infeasible point.
Eigen::VectorXd Lbfgs(const std::function<double(const Eigen::VectorXd&, Eigen::VectorXd*)>& fn,
                      Eigen::VectorXd theta, int max_iterations, double* best_value) {
  constexpr int kMemory = 6;
  theta = Clamp(std::move(theta));
  Eigen::VectorXd g(theta.size());
  double f = fn(theta, &g);
  *best_value = f;
  if (!std::isfinite(f)) return theta;
  std::deque<std::pair<Eigen::VectorXd, Eigen::VectorXd>> memory;  // (s, y)
  for (int it = 0; it < max_iterations; ++it) {
    // Two-loop recursion: d = -H g.
    Eigen::VectorXd q = g;
    std::vector<double> alphas(memory.size());
    for (size_t k = memory.size(); k-- > 0;) {
      const auto& [s, y] = memory[k];
      alphas[k] = s.dot(q) / y.dot(s);
      q -= alphas[k] * y;
    }
    if (!memory.empty()) {
      const auto& [s, y] = memory.back();
      q *= s.dot(y) / y.squaredNorm();
    } else {
      double gmax = g.cwiseAbs().maxCoeff();
      q *= gmax > 1.0 ? 1.0 / gmax : 1.0;
    }
    for (size_t k = 0; k < memory.size(); ++k) {
      const auto& [s, y] = memory[k];
      double beta = y.dot(q) / y.dot(s);
      q += (alphas[k] - beta) * s;
    }
    Eigen::VectorXd dir = -q;
    if (dir.dot(g) >= 0) {
      memory.clear();
      dir = -g / std::max(1.0, g.cwiseAbs().maxCoeff());
    }
    // Backtracking (Armijo) on the projected step.
    double step = 1.0;
    bool accepted = false;
    Eigen::VectorXd next, next_g(theta.size());
    double next_f = 0;
    for (int ls = 0; ls < 30; ++ls) {
      next = Clamp(theta + step * dir);
      next_f = fn(next, &next_g);
      if (std::isfinite(next_f) && next_f <= f + 1e-4 * g.dot(next - theta)) {
        accepted = true;
        break;
      }
      step *= 0.5;
    }
    if (!accepted) break;
    Eigen::VectorXd s = next - theta;
    Eigen::VectorXd y = next_g - g;
    const double change = f - next_f;
    theta = next;
    f = next_f;
    g = next_g;
    if (s.dot(y) > 1e-12) {
      memory.emplace_back(std::move(s), std::move(y));
      if (memory.size() > static_cast<size_t>(kMemory)) memory.pop_front();
    }
    if (change < 1e-9 * std::max(1.0, std::fabs(f))) break;
    // A gradient that only points out of the box is also a stop.
    Eigen::VectorXd projected = Clamp(theta - g) - theta;
    if (projected.cwiseAbs().maxCoeff() < 1e-6) break;
  }
  *best_value = f;
  return theta;
}

}  // namespace

Eigen::MatrixXd Matern52(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b,
                         const Eigen::VectorXd& theta) {
  const int d = static_cast<int>(a.cols());
  const double s2 = std::exp(theta[d]);
  Eigen::MatrixXd r = SquaredDistances(ScaleRows(a, theta), ScaleRows(b, theta)).cwiseSqrt();
  return (s2 * (1.0 + kSqrt5 * r.array() + (5.0 / 3.0) * r.array().square()) *
          (-kSqrt5 * r.array()).exp())
      .matrix();
}

Eigen::VectorXd GaussianProcess::DefaultTheta(int d) {
  Eigen::VectorXd theta(d + 2);
  theta.head(d).setConstant(std::log(0.5));
  theta[d] = 0.0;
  theta[d + 1] = std::log(1e-3);
  return theta;
}

double GaussianProcess::LogPrior(const Eigen::VectorXd& theta, Eigen::VectorXd* grad) {
  const int d = static_cast<int>(theta.size()) - 2;
  double lp = 0.0;
  auto term = [&](int i, double mean, double sd) {
    double z = (theta[i] - mean) / sd;
    lp += -0.5 * z * z;
    if (grad != nullptr) (*grad)[i] = -z / sd;
  };
  if (grad != nullptr) grad->setZero(theta.size());
  for (int i = 0; i < d; ++i) term(i, kPriorLogLengthMean, kPriorLogLengthSd);
  term(d, kPriorLogSignalMean, kPriorLogSignalSd);
  term(d + 1, kPriorLogNoiseMean, kPriorLogNoiseSd);
  return lp;
}

double GaussianProcess::LogMarginalLikelihood(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                              const Eigen::VectorXd& theta, Eigen::VectorXd* grad) {
  const int n = static_cast<int>(x.rows());
  const int d = static_cast<int>(x.cols());
  const double s2 = std::exp(theta[d]);
  const double noise = std::exp(theta[d + 1]);
  Eigen::MatrixXd z = ScaleRows(x, theta);
  Eigen::MatrixXd r = SquaredDistances(z, z).cwiseSqrt();
  Eigen::ArrayXXd e = (-kSqrt5 * r.array()).exp();
  Eigen::MatrixXd kf =
      (s2 * (1.0 + kSqrt5 * r.array() + (5.0 / 3.0) * r.array().square()) * e).matrix();
  Eigen::MatrixXd k = kf;
  k.diagonal().array() += noise;
  Eigen::LLT<Eigen::MatrixXd> llt;
  double jitter = 0;
  if (!Factor(k, s2, &llt, &jitter)) return kNegInf;
  Eigen::VectorXd alpha = llt.solve(y);
  const Eigen::MatrixXd& l = llt.matrixLLT();
  double log_det_half = l.diagonal().array().log().sum();
  double lml = -0.5 * y.dot(alpha) - log_det_half - 0.5 * n * kLog2Pi;
  if (grad == nullptr) return lml;

  grad->setZero(d + 2);
  // K^-1 = L^-T L^-1: one triangular inverse and a symmetric product (cheaper than solving
  // against the identity).
  Eigen::MatrixXd l_inv = l.triangularView<Eigen::Lower>().solve(Eigen::MatrixXd::Identity(n, n));
  Eigen::MatrixXd k_inv = Eigen::MatrixXd::Zero(n, n);
  k_inv.selfadjointView<Eigen::Lower>().rankUpdate(l_inv.transpose());
  k_inv.triangularView<Eigen::StrictlyUpper>() = k_inv.transpose();
  Eigen::MatrixXd w = alpha * alpha.transpose() - k_inv;
  // dk/dlog l_i = s2 * 5/3 * (1 + sqrt5 r) * exp(-sqrt5 r) * (z_ai - z_bi)^2.
  Eigen::MatrixXd g = (s2 * (5.0 / 3.0) * (1.0 + kSqrt5 * r.array()) * e * w.array()).matrix();
  Eigen::VectorXd row_sums = g.rowwise().sum();
  Eigen::MatrixXd gz = g * z;  // n x d
  for (int i = 0; i < d; ++i) {
    // 0.5 * sum_ab G_ab (z_ai - z_bi)^2 = sum_a z_ai^2 rowsum_a - z_i' G z_i  (G symmetric)
    (*grad)[i] = z.col(i).array().square().matrix().dot(row_sums) - z.col(i).dot(gz.col(i));
  }
  (*grad)[d] = 0.5 * (w.array() * kf.array()).sum();
  (*grad)[d + 1] = 0.5 * noise * w.trace();
  return lml;
}

StatusOr<GaussianProcess> GaussianProcess::Create(const Eigen::MatrixXd& x,
                                                  const Eigen::VectorXd& y,
                                                  const Eigen::VectorXd& theta) {
  const int d = static_cast<int>(x.cols());
  if (theta.size() != d + 2 || y.size() != x.rows()) {
    return InvalidArgument("gaussian process: theta or targets do not match the inputs");
  }
  GaussianProcess gp;
  gp.x_ = x;
  gp.theta_ = theta;
  Eigen::MatrixXd k = Matern52(x, x, theta);
  k.diagonal().array() += std::exp(theta[d + 1]);
  Eigen::LLT<Eigen::MatrixXd> llt;
  double jitter = 0;
  if (!Factor(k, std::exp(theta[d]), &llt, &jitter)) {
    return Internal("gaussian process: kernel matrix is not positive definite");
  }
  gp.chol_l_ = llt.matrixL();
  gp.alpha_ = llt.solve(y);
  return gp;
}

StatusOr<GaussianProcess> GaussianProcess::Fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                               const GpFitOptions& options, TuningRng* rng) {
  const int d = static_cast<int>(x.cols());
  auto objective = [&](const Eigen::VectorXd& theta, Eigen::VectorXd* grad) {
    double v = LogMarginalLikelihood(x, y, theta, grad);
    if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
    if (options.use_priors) {
      Eigen::VectorXd prior_grad;
      v += LogPrior(theta, &prior_grad);
      *grad += prior_grad;
    }
    *grad = -*grad;
    return -v;
  };
  Eigen::VectorXd best = DefaultTheta(d);
  double best_value = std::numeric_limits<double>::infinity();
  for (int start = 0; start < std::max(1, options.restarts); ++start) {
    Eigen::VectorXd theta0 = DefaultTheta(d);
    if (start > 0) {
      for (int i = 0; i < d; ++i) theta0[i] = rng->Uniform(std::log(0.05), std::log(2.0));
      theta0[d] = rng->Uniform(-1.0, 1.0);
      theta0[d + 1] = rng->Uniform(std::log(1e-5), std::log(1e-1));
    }
    double value = 0;
    Eigen::VectorXd theta = Lbfgs(objective, theta0, options.max_iterations, &value);
    if (value < best_value) {
      best_value = value;
      best = theta;
    }
  }
  return Create(x, y, best);
}

void GaussianProcess::Predict(const Eigen::MatrixXd& xs, Eigen::VectorXd* mean,
                              Eigen::VectorXd* variance) const {
  const int d = dims();
  Eigen::MatrixXd ks = Matern52(xs, x_, theta_);  // m x n
  *mean = ks * alpha_;
  Eigen::MatrixXd v = chol_l_.triangularView<Eigen::Lower>().solve(ks.transpose());  // n x m
  const double s2 = std::exp(theta_[d]);
  *variance = (s2 - v.colwise().squaredNorm().array()).cwiseMax(1e-12).matrix().transpose();
}

}  // namespace cohort::coordinator::tuning
