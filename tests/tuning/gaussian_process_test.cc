// The Gaussian process: interpolation with small noise, the analytic log-likelihood gradient
// against finite differences, and a fit that recovers a sensible model.
#include "coordinator/tuning/gaussian_process.h"

#include <gtest/gtest.h>

#include <cmath>

#include "coordinator/tuning/bayesian_suggester.h"

namespace cohort::coordinator::tuning {
namespace {

Eigen::MatrixXd RandomPoints(int n, int d, uint64_t seed) {
  TuningRng rng(seed);
  Eigen::MatrixXd x(n, d);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) x(i, j) = rng.Uniform();
  }
  return x;
}

Eigen::VectorXd Smooth(const Eigen::MatrixXd& x) {
  Eigen::VectorXd y(x.rows());
  for (int i = 0; i < x.rows(); ++i) {
    y[i] = std::sin(5 * x(i, 0)) + 0.5 * std::cos(3 * x(i, x.cols() - 1));
  }
  return y;
}

TEST(GaussianProcessTest, PosteriorMeanInterpolatesWithSmallNoise) {
  Eigen::MatrixXd x = RandomPoints(15, 2, 1);
  Eigen::VectorXd y = Smooth(x);
  Eigen::VectorXd theta(4);
  theta << std::log(0.3), std::log(0.3), 0.0, std::log(1e-6);
  StatusOr<GaussianProcess> gp = GaussianProcess::Create(x, y, theta);
  ASSERT_TRUE(gp.ok()) << gp.status().ToString();
  Eigen::VectorXd mean, var;
  gp->Predict(x, &mean, &var);
  for (int i = 0; i < x.rows(); ++i) {
    EXPECT_NEAR(mean[i], y[i], 1e-3) << i;
    EXPECT_LT(var[i], 1e-4) << i;
  }
  // Far from the data the variance goes back towards the signal variance (1).
  Eigen::MatrixXd far(1, 2);
  far << 5.0, 5.0;
  gp->Predict(far, &mean, &var);
  EXPECT_NEAR(var[0], 1.0, 1e-6);
  EXPECT_NEAR(mean[0], 0.0, 1e-6);
}

TEST(GaussianProcessTest, LogLikelihoodGradientMatchesFiniteDifferences) {
  for (uint64_t seed : {3u, 4u, 5u}) {
    Eigen::MatrixXd x = RandomPoints(12, 3, seed);
    Eigen::VectorXd y = Smooth(x);
    y = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());
    TuningRng rng(seed * 17);
    Eigen::VectorXd theta(5);
    theta << std::log(rng.Uniform(0.1, 1.0)), std::log(rng.Uniform(0.1, 1.0)),
        std::log(rng.Uniform(0.1, 1.0)), rng.Uniform(-0.5, 0.5), std::log(rng.Uniform(0.01, 0.2));
    Eigen::VectorXd grad;
    double f = GaussianProcess::LogMarginalLikelihood(x, y, theta, &grad);
    ASSERT_TRUE(std::isfinite(f));
    ASSERT_EQ(grad.size(), 5);
    for (int i = 0; i < 5; ++i) {
      const double h = 1e-5;
      Eigen::VectorXd up = theta, down = theta;
      up[i] += h;
      down[i] -= h;
      double numeric = (GaussianProcess::LogMarginalLikelihood(x, y, up, nullptr) -
                        GaussianProcess::LogMarginalLikelihood(x, y, down, nullptr)) /
                       (2 * h);
      EXPECT_NEAR(grad[i], numeric, 1e-4 * std::max(1.0, std::fabs(numeric)))
          << "seed " << seed << " theta[" << i << "]";
    }
    // The prior's gradient too.
    Eigen::VectorXd pg;
    GaussianProcess::LogPrior(theta, &pg);
    for (int i = 0; i < 5; ++i) {
      const double h = 1e-5;
      Eigen::VectorXd up = theta, down = theta;
      up[i] += h;
      down[i] -= h;
      double numeric =
          (GaussianProcess::LogPrior(up, nullptr) - GaussianProcess::LogPrior(down, nullptr)) /
          (2 * h);
      EXPECT_NEAR(pg[i], numeric, 1e-6);
    }
  }
}

TEST(GaussianProcessTest, FitImprovesTheLikelihoodAndPredictsHeldOutPoints) {
  Eigen::MatrixXd x = RandomPoints(30, 2, 11);
  Eigen::VectorXd y = Smooth(x);
  TuningRng rng(1);
  GpFitOptions options;
  StatusOr<GaussianProcess> gp = GaussianProcess::Fit(x, y, options, &rng);
  ASSERT_TRUE(gp.ok()) << gp.status().ToString();
  double fitted = GaussianProcess::LogMarginalLikelihood(x, y, gp->theta(), nullptr);
  double start =
      GaussianProcess::LogMarginalLikelihood(x, y, GaussianProcess::DefaultTheta(2), nullptr);
  EXPECT_GT(fitted, start);
  Eigen::MatrixXd test = RandomPoints(50, 2, 99);
  Eigen::VectorXd truth = Smooth(test);
  Eigen::VectorXd mean, var;
  gp->Predict(test, &mean, &var);
  double rmse = std::sqrt((mean - truth).squaredNorm() / truth.size());
  EXPECT_LT(rmse, 0.15);
}

TEST(GaussianProcessTest, DuplicatePointsStillFactor) {
  Eigen::MatrixXd x(4, 1);
  x << 0.5, 0.5, 0.5, 0.2;
  Eigen::VectorXd y(4);
  y << 1, 1, 1, 0;
  Eigen::VectorXd theta(3);
  theta << std::log(0.3), 0.0, GaussianProcess::kMinLogNoise;
  StatusOr<GaussianProcess> gp = GaussianProcess::Create(x, y, theta);
  ASSERT_TRUE(gp.ok()) << gp.status().ToString();
}

TEST(ExpectedImprovementTest, Shape) {
  EXPECT_DOUBLE_EQ(ExpectedImprovement(1.0, 0.0, 0.5, 0.0), 0.5);
  EXPECT_DOUBLE_EQ(ExpectedImprovement(0.0, 0.0, 0.5, 0.0), 0.0);
  // Uncertainty is worth something even below the best; more of it is worth more.
  EXPECT_GT(ExpectedImprovement(0.0, 1.0, 0.5, 0.0), 0.0);
  EXPECT_GT(ExpectedImprovement(0.0, 2.0, 0.5, 0.0), ExpectedImprovement(0.0, 1.0, 0.5, 0.0));
  // At mean == best with unit variance EI = phi(0) = 0.3989.
  EXPECT_NEAR(ExpectedImprovement(0.5, 1.0, 0.5, 0.0), 0.398942, 1e-6);
}

}  // namespace
}  // namespace cohort::coordinator::tuning
