// The median stopping rule stops a clearly bad trial and leaves a good one alone.
#include "coordinator/tuning/median_stopping.h"

#include <gtest/gtest.h>

namespace cohort::coordinator::tuning {
namespace {

std::vector<Measurement> Curve(std::initializer_list<double> values) {
  std::vector<Measurement> out;
  int64_t step = 100;
  for (double v : values) {
    out.push_back({step, v});
    step += 100;
  }
  return out;
}

EarlyStoppingSpec Median(int min_steps = 2, int min_trials = 3) {
  EarlyStoppingSpec e;
  e.median = true;
  e.min_steps = min_steps;
  e.min_trials = min_trials;
  return e;
}

// Three finished accuracy curves.
const std::vector<std::vector<Measurement>> kCompleted = {Curve({0.50, 0.70, 0.80, 0.85}),
                                                          Curve({0.55, 0.72, 0.82, 0.88}),
                                                          Curve({0.40, 0.65, 0.78, 0.84})};

TEST(MedianStoppingTest, StopsAClearlyBadTrial) {
  MedianStoppingRule rule(MetricGoal::kMaximize, Median());
  StoppingDecision d = rule.Evaluate(kCompleted, Curve({0.10, 0.12, 0.13}));
  EXPECT_TRUE(d.stop) << d.reason;
  EXPECT_EQ(d.compared, 3);
  EXPECT_DOUBLE_EQ(d.best, 0.13);
  // Running averages at step 300: (0.5+0.7+0.8)/3, (0.55+0.72+0.82)/3, (0.4+0.65+0.78)/3.
  EXPECT_NEAR(d.median, (0.50 + 0.70 + 0.80) / 3, 1e-12);
  EXPECT_NE(d.reason.find("worse than"), std::string::npos);
}

TEST(MedianStoppingTest, KeepsAGoodTrial) {
  MedianStoppingRule rule(MetricGoal::kMaximize, Median());
  StoppingDecision d = rule.Evaluate(kCompleted, Curve({0.52, 0.71, 0.81}));
  EXPECT_FALSE(d.stop) << d.reason;
  EXPECT_EQ(d.compared, 3);
  // A slow start that has caught up: its best beats the median of running averages.
  EXPECT_FALSE(rule.Evaluate(kCompleted, Curve({0.2, 0.3, 0.7})).stop);
}

TEST(MedianStoppingTest, WaitsForMinStepsAndMinTrials) {
  MedianStoppingRule rule(MetricGoal::kMaximize, Median(/*min_steps=*/3));
  EXPECT_FALSE(rule.Evaluate(kCompleted, Curve({0.1, 0.1})).stop);  // 2 < 3 measurements
  EXPECT_TRUE(rule.Evaluate(kCompleted, Curve({0.1, 0.1, 0.1})).stop);
  MedianStoppingRule four(MetricGoal::kMaximize, Median(2, /*min_trials=*/4));
  StoppingDecision d = four.Evaluate(kCompleted, Curve({0.1, 0.1, 0.1}));
  EXPECT_FALSE(d.stop);
  EXPECT_EQ(d.compared, 0);
  // Disabled rule never stops.
  EarlyStoppingSpec off = Median();
  off.median = false;
  EXPECT_FALSE(MedianStoppingRule(MetricGoal::kMaximize, off)
                   .Evaluate(kCompleted, Curve({0.0, 0.0, 0.0}))
                   .stop);
}

TEST(MedianStoppingTest, ComparesAtTheSameStep) {
  // At step 200 the completed trials averaged (0.5+0.7)/2 = 0.6, (0.55+0.72)/2, (0.4+0.65)/2:
  // median 0.6. A trial at 0.62 after two steps is fine, though below the finished curves' ends.
  MedianStoppingRule rule(MetricGoal::kMaximize, Median());
  StoppingDecision d = rule.Evaluate(kCompleted, Curve({0.5, 0.62}));
  EXPECT_FALSE(d.stop) << d.reason;
  EXPECT_NEAR(d.median, 0.6, 1e-12);
  // Completed trials with no measurement at or before the step do not count.
  std::vector<std::vector<Measurement>> late = kCompleted;
  late.push_back({{1000, 0.99}});
  EXPECT_EQ(rule.Evaluate(late, Curve({0.5, 0.62})).compared, 3);
}

TEST(MedianStoppingTest, MinimizeGoal) {
  std::vector<std::vector<Measurement>> losses = {Curve({2.0, 1.0, 0.5}), Curve({2.2, 1.1, 0.6}),
                                                  Curve({1.8, 0.9, 0.4})};
  MedianStoppingRule rule(MetricGoal::kMinimize, Median());
  EXPECT_TRUE(rule.Evaluate(losses, Curve({5.0, 4.8, 4.7})).stop);
  EXPECT_FALSE(rule.Evaluate(losses, Curve({1.9, 0.8, 0.3})).stop);
}

}  // namespace
}  // namespace cohort::coordinator::tuning
