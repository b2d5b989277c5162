#include "agent/metric_tail.h"

#include <fmt/format.h>

#include "common/hypertune.h"
#include "common/logging.h"

namespace cohort::agent {

namespace {

class FileMetricTail : public MetricTail {
 public:
  FileMetricTail(const std::string& path, std::string job, std::string replica, std::string trial)
      : tailer_(path), job_(std::move(job)), replica_(std::move(replica)),
        trial_(std::move(trial)) {}

  void Poll() override {
    auto records = tailer_.Poll();
    if (!records.ok()) {
      if (!warned_) spdlog::warn("metric file {}: {}", tailer_.path(), records.status().ToString());
      warned_ = true;
      return;
    }
    for (const MetricRecord& record : *records) {
      wire::TrialMeasurementT m;
      m.job = job_;
      m.trial = record.trial.empty() ? trial_ : record.trial;
      m.step = record.step;
      m.timestamp = record.timestamp;
      m.replica = replica_;
      for (const auto& [tag, value] : record.metrics) {
        auto kv = std::make_unique<wire::KeyValueT>();
        kv->key = tag;
        kv->value = fmt::format("{}", value);
        m.metrics.push_back(std::move(kv));
      }
      queue_.push_back(std::move(m));
    }
  }

 private:
  MetricFileTailer tailer_;
  std::string job_, replica_, trial_;
  bool warned_ = false;
};

}  // namespace

std::unique_ptr<MetricTail> MetricTail::Create(const std::string& path, const std::string& job,
                                               const std::string& replica,
                                               const std::string& trial) {
  return std::make_unique<FileMetricTail>(path, job, replica, trial);
}

}  // namespace cohort::agent
