#include "common/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace cohort {
namespace {

TEST(PrometheusText, FamilyWritesHelpAndType) {
  PrometheusText t;
  t.Family("cohort_jobs", PrometheusText::Type::kGauge, "Jobs by state.\nSecond \\ line");
  t.Sample("cohort_jobs", {{"state", "RUNNING"}, {"queue", "default"}}, 3);
  EXPECT_EQ(t.text(),
            "# HELP cohort_jobs Jobs by state.\\nSecond \\\\ line\n"
            "# TYPE cohort_jobs gauge\n"
            "cohort_jobs{state=\"RUNNING\",queue=\"default\"} 3\n");
}

TEST(PrometheusText, LabelValuesAreEscaped) {
  EXPECT_EQ(PrometheusText::EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  PrometheusText t;
  t.Family("x_total", PrometheusText::Type::kCounter, "h");
  t.Sample("x_total", {{"job", "we\"ird\n"}}, 1.5);
  EXPECT_NE(t.text().find("x_total{job=\"we\\\"ird\\n\"} 1.5\n"), std::string::npos) << t.text();
}

TEST(PrometheusText, ValuesIncludingSpecials) {
  EXPECT_EQ(PrometheusText::FormatValue(0), "0");
  EXPECT_EQ(PrometheusText::FormatValue(42), "42");
  EXPECT_EQ(PrometheusText::FormatValue(0.25), "0.25");
  EXPECT_EQ(PrometheusText::FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(PrometheusText::FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(PrometheusText::FormatValue(std::nan("")), "NaN");
}

TEST(PrometheusText, HistogramIsCumulativeWithInf) {
  Histogram h({0.1, 1});
  h.Observe(0.05);
  h.Observe(0.1);  // le is inclusive
  h.Observe(0.5);
  h.Observe(7);
  PrometheusText t;
  t.Family("d_seconds", PrometheusText::Type::kHistogram, "d");
  t.WriteHistogram("d_seconds", {{"k", "v"}}, h);
  EXPECT_EQ(t.text(),
            "# HELP d_seconds d\n# TYPE d_seconds histogram\n"
            "d_seconds_bucket{k=\"v\",le=\"0.1\"} 2\n"
            "d_seconds_bucket{k=\"v\",le=\"1\"} 3\n"
            "d_seconds_bucket{k=\"v\",le=\"+Inf\"} 4\n"
            "d_seconds_sum{k=\"v\"} 7.65\n"
            "d_seconds_count{k=\"v\"} 4\n");
}

TEST(PrometheusText, Names) {
  EXPECT_TRUE(PrometheusText::ValidMetricName("cohort_jobs:rate5m"));
  EXPECT_FALSE(PrometheusText::ValidMetricName("9jobs"));
  EXPECT_FALSE(PrometheusText::ValidMetricName("jobs-total"));
  EXPECT_TRUE(PrometheusText::ValidLabelName("le"));
  EXPECT_FALSE(PrometheusText::ValidLabelName("__name"));
  EXPECT_FALSE(PrometheusText::ValidLabelName("a:b"));
}

TEST(PrometheusTextDeathTest, InvalidNameAborts) {
  PrometheusText t;
  EXPECT_DEATH(t.Family("bad-name", PrometheusText::Type::kGauge, "h"), "invalid metric name");
}

}  // namespace
}  // namespace cohort
