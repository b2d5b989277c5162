#include "agent/metric_forwarder.h"

#include <fmt/format.h>

#include "common/logging.h"

namespace cohort::agent {

MetricForwarder::MetricForwarder(Outbox& outbox, Clock& clock, std::string key,
                                 std::shared_ptr<MetricFileReader> reader, std::string job,
                                 std::string replica, std::string trial,
                                 std::chrono::milliseconds poll_interval,
                                 std::chrono::milliseconds resend_after, uint64_t answered)
    : outbox_(outbox),
      clock_(clock),
      key_(std::move(key)),
      job_(std::move(job)),
      replica_(std::move(replica)),
      trial_(std::move(trial)),
      poll_interval_(poll_interval),
      resend_after_(resend_after),
      reader_(std::move(reader)),
      answered_(answered),
      skip_(answered) {}

void MetricForwarder::Forward(bool ended) {
  const std::chrono::milliseconds now(clock_.NowMs());
  if (final_reading_ == 0 && (now >= next_read_ || ended)) {
    const uint64_t reading = reader_->Request();
    next_read_ = now + poll_interval_;
    // Once the attempt has ended, nothing writes the file any more: that read is the last.
    if (ended) final_reading_ = reading;
  }
  TakeLines();
  if (queue_.empty() || !outbox_.Ready(stream(), resend_after_)) return;
  // The front stays queued until answered; the body is a copy.
  const wire::TrialMeasurementT& front = queue_.front();
  wire::TrialMeasurementT m;
  m.job = front.job;
  m.trial = front.trial;
  m.step = front.step;
  m.timestamp = front.timestamp;
  m.replica = front.replica;
  for (const auto& kv : front.metrics) m.metrics.push_back(std::make_unique<wire::KeyValueT>(*kv));
  wire::BodyUnion body;
  body.Set(std::move(m));
  outbox_.Send(stream(), answered_, std::move(body));
}

void MetricForwarder::OnAnswer(const Outbox::Answer& answer, const Status& error) {
  if (!answer.current) return;
  if (Outbox::Transient(error) || error.code() == StatusCode::kFailedPrecondition) {
    // Passing trouble: the measurement stays in flight and goes again after the resend interval.
    return;
  }
  if (!error.ok()) {
    spdlog::warn("coordinator rejected a measurement of {}/{}: {}", job_, replica_,
                 error.ToString());
  }
  if (!queue_.empty()) queue_.pop_front();
  ++answered_;
  outbox_.Settle(stream());
}

void MetricForwarder::TakeLines() {
  MetricFileReader::Lines lines = reader_->Take();
  if (final_reading_ != 0 && lines.done >= final_reading_) final_read_ = true;
  if (!lines.error.ok()) {
    if (!warned_) spdlog::warn("metric file {}: {}", reader_->path(), lines.error.ToString());
    warned_ = true;
  }
  for (const MetricRecord& record : lines.records) {
    if (skip_ > 0) {
      --skip_;
      continue;
    }
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

}  // namespace cohort::agent
