// Study: trials launched up to parallel_trials and max_trials, final metrics, the best trial,
// failures, infeasible trials, early stopping through the median rule, exhaustion and restore.
#include "coordinator/tuning/study.h"

#include <gtest/gtest.h>

#include "common/messaging.h"
#include "coordinator/tuning/study_info.h"
#include "tests/tuning/test_functions.h"

namespace cohort::coordinator::tuning {
namespace {

StudySpec QuadraticStudy(SearchAlgorithm algorithm, int max_trials, int parallel) {
  StudySpec spec =
      testing::MinimizeStudy({testing::DoubleParam("x", 0, 1)}, algorithm, 5, max_trials);
  spec.metric_id = "score";
  spec.goal = MetricGoal::kMaximize;
  spec.parallel_trials = parallel;
  spec.max_failed_trials = 2;
  return spec;
}

double Score(const Assignment& a) { return 1.0 - (a[0].number - 0.6) * (a[0].number - 0.6); }

TEST(StudyTest, RunsToMaxTrialsKeepingParallelTrialsBusy) {
  auto study = Study::Create(QuadraticStudy(SearchAlgorithm::kBayesian, 7, 3));
  ASSERT_TRUE(study.ok()) << study.status().ToString();
  Study& s = **study;
  auto first = s.NextTrials();
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 3u);
  EXPECT_EQ((*first)[0].trial_id, "1");
  EXPECT_EQ((*first)[2].job.name, "synthetic_trial_3");
  EXPECT_EQ(s.active_trials(), 3);
  EXPECT_TRUE(s.NextTrials()->empty());  // all slots busy
  int launched = 3;
  while (s.state() == StudyState::kActive) {
    // Finish the oldest active trial with its score, then top up.
    const Trial* active = nullptr;
    for (const auto& t : s.trials()) {
      if (t.state == TrialState::kActive) {
        active = &t;
        break;
      }
    }
    ASSERT_NE(active, nullptr);
    std::string id = active->id;
    double score = Score(active->parameters);
    ASSERT_TRUE(s.AddMeasurement(id, 1, {{"score", score - 0.1}, {"other", 5}}).ok());
    ASSERT_TRUE(s.AddMeasurement(id, 2, {{"score", score}}).ok());
    ASSERT_TRUE(s.TrialJobEnded(id, true, "").ok());
    auto more = s.NextTrials();
    ASSERT_TRUE(more.ok());
    launched += static_cast<int>(more->size());
    EXPECT_LE(s.active_trials(), 3);
  }
  EXPECT_EQ(launched, 7);
  EXPECT_EQ(s.state(), StudyState::kSucceeded);
  const Trial* best = s.BestTrial();
  ASSERT_NE(best, nullptr);
  for (const auto& t : s.trials()) {
    EXPECT_EQ(t.state, TrialState::kSucceeded);
    ASSERT_TRUE(t.final_metric.has_value());
    EXPECT_DOUBLE_EQ(*t.final_metric, Score(t.parameters));  // the last measurement
    EXPECT_LE(*t.final_metric, *best->final_metric);
  }
}

TEST(StudyTest, FailsAfterMaxFailedTrials) {
  auto study = Study::Create(QuadraticStudy(SearchAlgorithm::kRandom, 10, 2));
  ASSERT_TRUE(study.ok());
  Study& s = **study;
  ASSERT_EQ(s.NextTrials()->size(), 2u);
  ASSERT_TRUE(s.TrialJobEnded("1", false, "exit code 1").ok());
  EXPECT_EQ(s.state(), StudyState::kActive);
  ASSERT_EQ(s.NextTrials()->size(), 1u);
  ASSERT_TRUE(s.TrialJobEnded("2", true, "").ok());  // no metric reported
  EXPECT_EQ(s.FindTrial("2")->state, TrialState::kInfeasible);
  ASSERT_EQ(s.NextTrials()->size(), 1u);
  ASSERT_TRUE(s.TrialJobEnded("3", false, "exit code 2").ok());
  EXPECT_EQ(s.state(), StudyState::kFailed);
  EXPECT_NE(s.message().find("2 trials failed"), std::string::npos);
  EXPECT_EQ(s.FindTrial("1")->message, "exit code 1");
  EXPECT_TRUE(s.NextTrials()->empty());
  EXPECT_EQ(s.BestTrial(), nullptr);
  EXPECT_EQ(s.TrialJobEnded("9", true, "").code(), StatusCode::kNotFound);
}

TEST(StudyTest, MedianRuleStopsABadTrial) {
  StudySpec spec = QuadraticStudy(SearchAlgorithm::kRandom, 10, 1);
  spec.early_stopping = EarlyStoppingSpec{true, 2, 2};
  auto study = Study::Create(spec);
  ASSERT_TRUE(study.ok());
  Study& s = **study;
  for (int i = 1; i <= 2; ++i) {
    auto launch = s.NextTrials();
    ASSERT_EQ(launch->size(), 1u);
    std::string id = (*launch)[0].trial_id;
    for (int step = 1; step <= 3; ++step) {
      auto stop = s.AddMeasurement(id, step, {{"score", 0.8 + 0.01 * step}});
      ASSERT_TRUE(stop.ok());
      EXPECT_FALSE(*stop);  // fewer than min_trials completed
    }
    ASSERT_TRUE(s.TrialJobEnded(id, true, "").ok());
  }
  auto launch = s.NextTrials();
  ASSERT_EQ(launch->size(), 1u);
  std::string id = (*launch)[0].trial_id;
  EXPECT_FALSE(*s.AddMeasurement(id, 1, {{"score", 0.1}}));  // min_steps 2
  EXPECT_TRUE(*s.AddMeasurement(id, 2, {{"score", 0.15}}));  // far below the median
  EXPECT_EQ(s.FindTrial(id)->state, TrialState::kStopping);
  EXPECT_TRUE(s.NextTrials()->empty());  // still occupies its slot until its job ends
  ASSERT_TRUE(s.TrialJobEnded(id, false, "cancelled").ok());
  EXPECT_EQ(s.FindTrial(id)->state, TrialState::kStopped);
  EXPECT_DOUBLE_EQ(*s.FindTrial(id)->final_metric, 0.15);
  EXPECT_NE(s.FindTrial(id)->message.find("median"), std::string::npos);
  // A good trial runs on.
  launch = s.NextTrials();
  ASSERT_EQ(launch->size(), 1u);
  id = (*launch)[0].trial_id;
  EXPECT_FALSE(*s.AddMeasurement(id, 1, {{"score", 0.85}}));
  EXPECT_FALSE(*s.AddMeasurement(id, 2, {{"score", 0.9}}));
  EXPECT_EQ(s.FindTrial(id)->state, TrialState::kActive);
}

TEST(StudyTest, GridStudyEndsWhenExhausted) {
  ParameterSpec k;
  k.id = "k";
  k.type = ParameterType::kInteger;
  k.min = 1;
  k.max = 3;
  StudySpec spec = testing::MinimizeStudy({k}, SearchAlgorithm::kGrid, 0, 10);
  spec.parallel_trials = 2;
  auto study = Study::Create(spec);
  ASSERT_TRUE(study.ok());
  Study& s = **study;
  int launched = 0;
  while (s.state() == StudyState::kActive) {
    auto more = s.NextTrials();
    ASSERT_TRUE(more.ok());
    launched += static_cast<int>(more->size());
    for (const auto& t : *more) {
      ASSERT_TRUE(s.AddMeasurement(t.trial_id, 1, {{"value", 1.0}}).ok());
      ASSERT_TRUE(s.TrialJobEnded(t.trial_id, true, "").ok());
    }
    ASSERT_LE(launched, 3);
  }
  EXPECT_EQ(launched, 3);
  EXPECT_EQ(s.state(), StudyState::kSucceeded);
  EXPECT_NE(s.message().find("exhausted"), std::string::npos);
}

TEST(StudyTest, RestoredStudySuggestsTheSame) {
  StudySpec spec = QuadraticStudy(SearchAlgorithm::kRandom, 10, 1);
  auto a = Study::Create(spec);
  ASSERT_TRUE(a.ok());
  auto l1 = (*a)->NextTrials();
  ASSERT_TRUE((*a)->AddMeasurement("1", 1, {{"score", 0.5}}).ok());
  ASSERT_TRUE((*a)->TrialJobEnded("1", true, "").ok());
  auto l2 = (*a)->NextTrials();
  ASSERT_EQ(l2->size(), 1u);

  auto b = Study::Create(spec);  // as after a coordinator restart, from the journal
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->RestoreTrial("1", (*a)->trials()[0].parameters).ok());
  ASSERT_TRUE((*b)->AddMeasurement("1", 1, {{"score", 0.5}}).ok());
  ASSERT_TRUE((*b)->TrialJobEnded("1", true, "").ok());
  auto again = (*b)->NextTrials();
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].trial_id, "2");
  EXPECT_EQ((*b)->trials()[1].parameters, (*a)->trials()[1].parameters);
  (*b)->Cancel();
  EXPECT_EQ((*b)->state(), StudyState::kCancelled);
}

TEST(StudyInfoTest, WireRoundTrip) {
  auto study = Study::Create(QuadraticStudy(SearchAlgorithm::kRandom, 4, 2));
  ASSERT_TRUE(study.ok());
  Study& s = **study;
  ASSERT_EQ(s.NextTrials()->size(), 2u);
  ASSERT_TRUE(s.AddMeasurement("1", 10, {{"score", 0.75}}).ok());
  ASSERT_TRUE(s.TrialJobEnded("1", true, "").ok());
  ASSERT_TRUE(s.TrialJobEnded("2", false, "exit code 1").ok());

  StatusOr<Message> msg = Message::Parse(Encode(7, ToStudyInfo(s, 1000, 0)));
  ASSERT_TRUE(msg.ok()) << msg.status().ToString();
  const wire::StudyInfo* info = msg->As<wire::StudyInfo>();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->name()->str(), "synthetic");
  EXPECT_EQ(info->state()->str(), "ACTIVE");
  EXPECT_EQ(info->goal()->str(), "maximize");
  EXPECT_EQ(info->algorithm()->str(), "random");
  EXPECT_EQ(info->best_trial()->str(), "1");
  ASSERT_EQ(info->trials()->size(), 2u);
  const wire::TrialInfo* t1 = info->trials()->Get(0);
  EXPECT_EQ(t1->state()->str(), "SUCCEEDED");
  EXPECT_TRUE(t1->has_final_metric());
  EXPECT_DOUBLE_EQ(t1->final_metric(), 0.75);
  EXPECT_EQ(t1->job()->str(), "synthetic_trial_1");
  EXPECT_EQ(t1->steps(), 1);
  ASSERT_EQ(t1->parameters()->size(), 1u);
  EXPECT_EQ(t1->parameters()->Get(0)->key()->str(), "x");
  EXPECT_EQ(info->trials()->Get(1)->message()->str(), "exit code 1");

  wire::TrialMeasurementT m;
  m.job = "synthetic_trial_2";
  m.trial = "2";
  m.step = 3;
  for (auto [k, v] : {std::pair{"score", "0.5"}, std::pair{"loss", "1e-3"}}) {
    auto kv = std::make_unique<wire::KeyValueT>();
    kv->key = k;
    kv->value = v;
    m.metrics.push_back(std::move(kv));
  }
  StatusOr<Message> mm = Message::Parse(Encode(8, std::move(m)));
  ASSERT_TRUE(mm.ok());
  auto metrics = MeasurementMetrics(*mm->As<wire::TrialMeasurement>());
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_DOUBLE_EQ(metrics->at("score"), 0.5);
  EXPECT_DOUBLE_EQ(metrics->at("loss"), 0.001);

  wire::TrialMeasurementT bad;
  auto kv = std::make_unique<wire::KeyValueT>();
  kv->key = "score";
  kv->value = "high";
  bad.metrics.push_back(std::move(kv));
  StatusOr<Message> mb = Message::Parse(Encode(9, std::move(bad)));
  ASSERT_TRUE(mb.ok());
  EXPECT_EQ(MeasurementMetrics(*mb->As<wire::TrialMeasurement>()).status().code(),
            StatusCode::kInvalidArgument);

  // A metric name that is not UTF-8 (no agent reads one from JSON; the study's records are JSON)
  // is refused naming it, not kept to throw when the study is written.
  wire::TrialMeasurementT latin1;
  auto named = std::make_unique<wire::KeyValueT>();
  named->key = "perte\xe9";
  named->value = "0.5";
  latin1.metrics.push_back(std::move(named));
  StatusOr<Message> ml = Message::Parse(Encode(10, std::move(latin1)));
  ASSERT_TRUE(ml.ok());
  const Status refused = MeasurementMetrics(*ml->As<wire::TrialMeasurement>()).status();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "trial measurement: metric 'perte\xef\xbf\xbd': its name is not UTF-8");
}

}  // namespace
}  // namespace cohort::coordinator::tuning
