#include "coordinator/tuning/bayesian_suggester.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

#include "coordinator/tuning/point_suggesters.h"

namespace cohort::coordinator::tuning {

namespace {

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }
double NormalPdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI); }

// Moves a point: a Gaussian step on numeric coordinates, and now and then another category.
Eigen::VectorXd Perturb(const SearchSpace& space, const Eigen::VectorXd& x, double sigma,
                        TuningRng* rng) {
  Eigen::VectorXd y = x;
  const size_t params = space.spec().parameters.size();
  for (size_t i = 0; i < params; ++i) {
    const int off = space.offset(i);
    if (space.is_categorical(i)) {
      if (rng->Uniform() < 0.15) {
        y.segment(off, space.width(i)).setZero();
        y[off + static_cast<int>(rng->UniformInt(space.width(i)))] = 1.0;
      }
    } else {
      y[off] = std::clamp(y[off] + sigma * rng->Normal(), 0.0, 1.0);
    }
  }
  return space.Snap(y);
}

}  // namespace

double ExpectedImprovement(double mean, double variance, double best, double xi) {
  const double sd = std::sqrt(std::max(variance, 0.0));
  const double improvement = mean - best - xi;
  if (sd < 1e-12) return std::max(improvement, 0.0);
  const double z = improvement / sd;
  return improvement * NormalCdf(z) + sd * NormalPdf(z);
}

StatusOr<std::optional<Assignment>> BayesianSuggester::Suggest(
    const std::vector<TrialObservation>& completed, const std::vector<Assignment>& pending) {
  const StudySpec& spec = space_.spec();
  COHORT_ASSIGN_OR_RETURN(std::vector<Assignment> seen, TriedAssignments(spec, completed, pending));
  std::vector<size_t> real;  // indices into completed with a usable metric
  for (size_t i = 0; i < completed.size(); ++i) {
    if (completed[i].final_metric && std::isfinite(*completed[i].final_metric)) real.push_back(i);
  }
  const uint64_t n = seen.size();
  const int initial = options_.initial_random_trials >= 0
                          ? options_.initial_random_trials
                          : std::max<int>(2, static_cast<int>(spec.parameters.size()) + 1);
  auto random_draw = [&]() -> StatusOr<std::optional<Assignment>> {
    return RandomSuggester::Draw(space_, spec.seed, n, seen);
  };
  if (n < static_cast<uint64_t>(initial) || real.size() < 2) return random_draw();

  const std::optional<uint64_t> finite = space_.finite_size();
  std::unordered_set<std::string> seen_keys;
  if (finite) {
    for (const auto& a : seen) seen_keys.insert(space_.Key(a));
    if (seen_keys.size() >= *finite) return std::optional<Assignment>();
  }

  // 1. Data: maximise sign * metric, standardised.
  const int dims = space_.dims();
  const double sign = spec.goal == MetricGoal::kMaximize ? 1.0 : -1.0;
  Eigen::MatrixXd x(real.size(), dims);
  Eigen::VectorXd y(real.size());
  for (size_t r = 0; r < real.size(); ++r) {
    x.row(r) = space_.Encode(completed[real[r]].parameters).transpose();
    y[r] = sign * *completed[real[r]].final_metric;
  }
  const double mean = y.mean();
  double sd = std::sqrt((y.array() - mean).square().sum() / static_cast<double>(y.size()));
  if (!(sd > 1e-12)) sd = 1.0;
  Eigen::VectorXd ys = (y.array() - mean) / sd;

  TuningRng rng = TuningRng::ForTrial(spec.seed, n, /*stream=*/1);
  GpFitOptions fit = options_.fit;
  if (options_.adaptive_restarts) {
    if (real.size() > 250) {
      fit.restarts = std::min(fit.restarts, 1);
    } else if (real.size() > 100) {
      fit.restarts = std::min(fit.restarts, 2);
    }
  }
  StatusOr<GaussianProcess> fitted = GaussianProcess::Fit(x, ys, fit, &rng);
  if (!fitted.ok()) return random_draw();

  // 2. Constant liar for pending and failed trials.
  std::vector<Eigen::VectorXd> lies;
  for (const auto& a : pending) lies.push_back(space_.Encode(a));
  for (const auto& t : completed) {
    if (!t.final_metric || !std::isfinite(*t.final_metric))
      lies.push_back(space_.Encode(t.parameters));
  }
  const GaussianProcess* model = &*fitted;
  std::optional<GaussianProcess> with_lies;
  if (!lies.empty()) {
    Eigen::MatrixXd xa(x.rows() + static_cast<int>(lies.size()), dims);
    Eigen::VectorXd ya(xa.rows());
    xa.topRows(x.rows()) = x;
    ya.head(x.rows()) = ys;
    const double lie = ys.minCoeff();
    for (size_t k = 0; k < lies.size(); ++k) {
      xa.row(x.rows() + static_cast<int>(k)) = lies[k].transpose();
      ya[x.rows() + static_cast<int>(k)] = lie;
    }
    StatusOr<GaussianProcess> gp = fitted->Recondition(xa, ya);
    if (gp.ok()) {
      with_lies = std::move(*gp);
      model = &*with_lies;
    }
  }
  const double best = ys.maxCoeff();

  // 3. Candidates: random, plus perturbations of the best trials.
  const int random_count = options_.random_candidates >= 0 ? options_.random_candidates
                                                           : std::min(4000, 1000 + 200 * dims);
  std::vector<size_t> order(real.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ys[a] > ys[b]; });
  const int top = std::min<int>(5, static_cast<int>(order.size()));
  const int local_per_top = 60;
  Eigen::MatrixXd cand(random_count + top * local_per_top, dims);
  int c = 0;
  for (int k = 0; k < random_count; ++k)
    cand.row(c++) = space_.Encode(space_.Sample(&rng)).transpose();
  for (int t = 0; t < top; ++t) {
    Eigen::VectorXd base = x.row(order[t]).transpose();
    for (int k = 0; k < local_per_top; ++k) {
      double sigma = 0.02 + 0.15 * rng.Uniform();
      cand.row(c++) = Perturb(space_, base, sigma, &rng).transpose();
    }
  }

  auto score = [&](const Eigen::MatrixXd& pts) {
    Eigen::VectorXd mu, var;
    model->Predict(pts, &mu, &var);
    Eigen::VectorXd ei(pts.rows());
    for (int i = 0; i < pts.rows(); ++i) {
      ei[i] = ExpectedImprovement(mu[i], var[i], best, options_.exploration_xi);
      if (finite && seen_keys.count(space_.Key(space_.Decode(pts.row(i).transpose()))) > 0) {
        ei[i] = -1.0;  // already tried
      }
    }
    return ei;
  };
  Eigen::VectorXd ei = score(cand);

  // 4. Local refinement of the best candidates.
  std::vector<int> idx(cand.rows());
  std::iota(idx.begin(), idx.end(), 0);
  const int starts = std::min<int>(options_.refine_starts, static_cast<int>(idx.size()));
  std::partial_sort(idx.begin(), idx.begin() + starts, idx.end(),
                    [&](int a, int b) { return ei[a] > ei[b]; });
  Eigen::VectorXd best_point = cand.row(idx[0]).transpose();
  double best_ei = ei[idx[0]];
  constexpr int kBatch = 8;
  for (int s = 0; s < starts; ++s) {
    Eigen::VectorXd cur = cand.row(idx[s]).transpose();
    double cur_ei = ei[idx[s]];
    double sigma = 0.1;
    for (int step = 0; step < options_.refine_steps; ++step) {
      Eigen::MatrixXd props(kBatch, dims);
      for (int b = 0; b < kBatch; ++b) props.row(b) = Perturb(space_, cur, sigma, &rng).transpose();
      Eigen::VectorXd pe = score(props);
      int arg = 0;
      pe.maxCoeff(&arg);
      if (pe[arg] > cur_ei) {
        cur = props.row(arg).transpose();
        cur_ei = pe[arg];
      } else {
        sigma *= 0.85;
      }
      if (sigma < 1e-4) break;
    }
    if (cur_ei > best_ei) {
      best_ei = cur_ei;
      best_point = cur;
    }
  }
  if (best_ei < 0) return random_draw();  // every candidate was already tried
  return std::optional<Assignment>(space_.Decode(best_point));
}

}  // namespace cohort::coordinator::tuning
