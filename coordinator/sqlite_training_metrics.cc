// SqliteStateStore's job_metrics table (coordinator/sqlite_state_store.h, training_metrics.h).
#include <spdlog/spdlog.h>

#include <charconv>
#include <cmath>

#include "common/prometheus_text.h"
#include "coordinator/sqlite_rows.h"
#include "coordinator/sqlite_state_store.h"

namespace cohort::coordinator {
namespace {

// CRC-32 of the row's columns, each framed with its length so bytes cannot move between them.
uint32_t MetricRowCrc(const TrainingMetric& m, const std::string& value) {
  return rows::RowCrc()
      .Add(m.job)
      .Add(std::to_string(m.step))
      .Add(std::to_string(m.time_ms))
      .Add(m.tag)
      .Add(m.replica)
      .Add(value)
      .value();
}

}  // namespace

Status SqliteStateStore::WriteTrainingMetric(const TrainingMetric& m) {
  if (!insert_training_metric_) {
    COHORT_ASSIGN_OR_RETURN(
        SqliteStatement st,
        db_->Prepare("INSERT OR IGNORE INTO job_metrics (job, step, time_ms, tag, replica, value, "
                     "row_crc) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
    insert_training_metric_ = std::make_unique<SqliteStatement>(std::move(st));
  }
  std::string value = PrometheusText::FormatValue(m.value);
  return insert_training_metric_->RunWith(m.job, m.step, m.time_ms, m.tag, m.replica, value,
                                          static_cast<int64_t>(MetricRowCrc(m, value)));
}

StatusOr<std::vector<TrainingMetric>> SqliteStateStore::ReadTrainingMetrics() {
  COHORT_ASSIGN_OR_RETURN(
      SqliteStatement st,
      db_->Prepare("SELECT job, step, time_ms, tag, replica, value, row_crc FROM job_metrics "
                   "ORDER BY job, step, time_ms, tag, replica"));
  std::vector<TrainingMetric> out;
  size_t damaged = 0;
  while (true) {
    COHORT_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    TrainingMetric m;
    m.job = st.Text(0);
    m.step = st.Int(1);
    m.time_ms = st.Int(2);
    m.tag = st.Text(3);
    m.replica = st.Text(4);
    std::string value = st.Text(5);
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), m.value);
    if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(m.value) ||
        static_cast<uint32_t>(st.Int(6)) != MetricRowCrc(m, value)) {
      ++damaged;
      continue;
    }
    out.push_back(std::move(m));
  }
  if (damaged > 0) {
    spdlog::error("state store: {} training metric rows of {} do not verify; dropped", damaged,
                  path_);
  }
  return out;
}

}  // namespace cohort::coordinator
