// cohort-bench-tuning: how fast and how good the study search is (bench/RESULTS.md "Tuning").
//
//   cohort-bench-tuning [--mode compare|scaling|all] [--seeds 20] [--trials 30] [--max-n 500]
//
// compare: best value after --trials sequential trials on Branin (2-D) and Hartmann-6 (6-D), over
//   --seeds seeds, Bayesian (GP + EI) against random search; prints median and quartiles (both
//   functions are minimised; optima 0.397887 and -3.32237), and a 3-parallel Bayesian run.
// scaling: GP hyperparameter-fit time and whole-suggestion time (fit, constant-liar conditioning,
//   EI search) against the number of completed trials n, on Hartmann-6, up to --max-n.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "coordinator/tuning/bayesian_suggester.h"
#include "coordinator/tuning/gaussian_process.h"
#include "coordinator/tuning/search_space.h"
#include "tests/tuning/test_functions.h"

namespace tuning = cohort::coordinator::tuning;
namespace tt = cohort::coordinator::tuning::testing;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU time of this thread: on a shared, busy machine it says what the work costs; wall time also
// counts the time others held the cores.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * (v.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

void Compare(int seeds, int trials) {
  struct Problem {
    const char* name;
    cohort::StudySpec (*study)(cohort::SearchAlgorithm, uint64_t, int);
    double (*fn)(const std::vector<double>&);
    double optimum;
  };
  const Problem problems[] = {{"branin", tt::BraninStudy, tt::Branin, 0.397887},
                              {"hartmann6", tt::Hartmann6Study, tt::Hartmann6, -3.32237}};
  std::printf("# best value after %d trials over %d seeds (minimised)\n", trials, seeds);
  std::printf("%-10s %-14s %10s %10s %10s %10s %9s\n", "function", "algorithm", "optimum", "q25",
              "median", "q75", "cpu_s");
  for (const Problem& p : problems) {
    struct Variant {
      const char* name;
      cohort::SearchAlgorithm algorithm;
      int parallel;
    };
    for (Variant v : {Variant{"random", cohort::SearchAlgorithm::kRandom, 1},
                      Variant{"bayesian", cohort::SearchAlgorithm::kBayesian, 1},
                      Variant{"bayesian-par3", cohort::SearchAlgorithm::kBayesian, 3}}) {
      std::vector<double> best;
      double c0 = ThreadCpuSeconds();
      for (int s = 0; s < seeds; ++s) {
        best.push_back(tt::RunStudy(p.study(v.algorithm, s, trials), p.fn, trials, v.parallel));
      }
      double secs = ThreadCpuSeconds() - c0;
      std::printf("%-10s %-14s %10.5f %10.5f %10.5f %10.5f %9.2f\n", p.name, v.name, p.optimum,
                  Quantile(best, 0.25), Quantile(best, 0.5), Quantile(best, 0.75), secs);
      std::fflush(stdout);
    }
  }
}

void Scaling(int max_n) {
  std::printf(
      "# Hartmann-6 (6 dims), n completed random trials; fit = GP hyperparameter fit "
      "(3 restarts, L-BFGS); suggest = one whole Bayesian suggestion with 2 pending\n");
  std::printf("%6s %10s %10s %12s %12s %14s\n", "n", "fit_ms", "fit_cpu_ms", "suggest_ms",
              "suggest_cpu_ms", "suggestions_s");
  for (int n : {10, 25, 50, 100, 200, 300, 400, 500}) {
    if (n > max_n) break;
    cohort::StudySpec spec = tt::Hartmann6Study(cohort::SearchAlgorithm::kBayesian, 1, n + 10);
    tuning::SearchSpace space(spec);
    std::vector<tuning::TrialObservation> done;
    Eigen::MatrixXd x(n, space.dims());
    Eigen::VectorXd y(n);
    for (int i = 0; i < n; ++i) {
      tuning::TuningRng rng = tuning::TuningRng::ForTrial(99, i);
      cohort::Assignment a = space.Sample(&rng);
      std::vector<double> v;
      for (const auto& p : a) v.push_back(p.number);
      double f = tt::Hartmann6(v);
      x.row(i) = space.Encode(a).transpose();
      y[i] = f;
      done.push_back({a, f});
    }
    y = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());
    const int reps = n <= 100 ? 5 : (n <= 300 ? 2 : 1);
    double fit_s = 0, fit_cpu = 0;
    for (int r = 0; r < reps; ++r) {
      tuning::TuningRng rng(r);
      auto t0 = Clock::now();
      double c0 = ThreadCpuSeconds();
      auto gp = tuning::GaussianProcess::Fit(x, y, tuning::GpFitOptions{}, &rng);
      fit_cpu += ThreadCpuSeconds() - c0;
      fit_s += Seconds(t0, Clock::now());
      if (!gp.ok()) std::fprintf(stderr, "fit failed at n=%d\n", n);
    }
    fit_s /= reps;
    fit_cpu /= reps;
    tuning::BayesianSuggester bayes(spec);
    std::vector<cohort::Assignment> pending;
    for (int k = 0; k < 2; ++k) {
      tuning::TuningRng rng = tuning::TuningRng::ForTrial(7, k);
      pending.push_back(space.Sample(&rng));
    }
    double suggest_s = 0, suggest_cpu = 0;
    for (int r = 0; r < reps; ++r) {
      auto t0 = Clock::now();
      double c0 = ThreadCpuSeconds();
      auto a = bayes.Suggest(done, pending);
      suggest_cpu += ThreadCpuSeconds() - c0;
      suggest_s += Seconds(t0, Clock::now());
      if (!a.ok() || !a->has_value()) std::fprintf(stderr, "suggest failed at n=%d\n", n);
    }
    suggest_s /= reps;
    suggest_cpu /= reps;
    std::printf("%6d %10.1f %10.1f %12.1f %12.1f %14.2f\n", n, fit_s * 1e3, fit_cpu * 1e3,
                suggest_s * 1e3, suggest_cpu * 1e3, 1.0 / suggest_cpu);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "all";
  int seeds = 20, trials = 30, max_n = 500;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--mode") {
      mode = value();
    } else if (arg == "--seeds") {
      seeds = std::atoi(value().c_str());
    } else if (arg == "--trials") {
      trials = std::atoi(value().c_str());
    } else if (arg == "--max-n") {
      max_n = std::atoi(value().c_str());
    } else {
      std::fprintf(stderr,
                   "usage: cohort-bench-tuning [--mode compare|scaling|all] [--seeds N] "
                   "[--trials N] [--max-n N]\n");
      return 2;
    }
  }
  if (mode != "compare" && mode != "scaling" && mode != "all") {
    std::fprintf(stderr, "--mode: compare, scaling or all\n");
    return 2;
  }
  if (seeds < 1 || trials < 3 || max_n < 10) {
    std::fprintf(stderr, "--seeds >= 1, --trials >= 3, --max-n >= 10\n");
    return 2;
  }
  if (mode != "scaling") Compare(seeds, trials);
  if (mode != "compare") Scaling(max_n);
  return 0;
}
