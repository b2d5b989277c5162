#include "coordinator/observability_service.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/job_usage.h"

namespace cohort::coordinator {

bool ObservabilityService::Handle(const RoutedMessage& m, int64_t now_ms) {
  switch (m.message.type()) {
    case wire::Body::GetJobMetrics:
      OnGetJobMetrics(m, *m.message.As<wire::GetJobMetrics>());
      return true;
    case wire::Body::GetUsage:
      OnGetUsage(m, *m.message.As<wire::GetUsage>(), now_ms);
      return true;
    default:
      return false;
  }
}

void ObservabilityService::OnGetJobMetrics(const RoutedMessage& m, const wire::GetJobMetrics& req) {
  std::string job = req.job() ? req.job()->str() : "";
  if (jobs_.FindJob(job) == nullptr) {
    outbox_.ToClient(m.peer,
                     EncodeError(m.message.request_id(), NotFound("no job named '" + job + "'")));
    return;
  }
  wire::JobMetricsT reply;
  reply.job = job;
  if (auto series = training_.Series(job)) {
    for (const TrainingMetric& t : *series) {
      auto p = std::make_unique<wire::MetricPointT>();
      p->step = t.step;
      p->time_ms = t.time_ms;
      p->tag = t.tag;
      p->value = t.value;
      p->replica = t.replica;
      reply.points.push_back(std::move(p));
    }
  }
  outbox_.ToClient(m.peer, Encode(m.message.request_id(), std::move(reply)));
}

void ObservabilityService::OnGetUsage(const RoutedMessage& m, const wire::GetUsage& req,
                                      int64_t now_ms) {
  UsageFilter filter;
  filter.user = req.user() ? req.user()->str() : "";
  filter.queue = req.queue() ? req.queue()->str() : "";
  filter.since_ms = req.since_ms();
  StatusOr<NodeSelector> selector = ParseNodeSelector(req.selector() ? req.selector()->str() : "");
  if (!selector.ok()) {
    outbox_.ToClient(m.peer,
                     EncodeError(m.message.request_id(),
                                 InvalidArgument("selector: " + selector.status().message())));
    return;
  }
  filter.selector = *std::move(selector);
  filter.by_label = req.by_label() ? req.by_label()->str() : "";
  if (!filter.by_label.empty()) {
    if (Status bad = CheckNodeLabel(filter.by_label, ""); !bad.ok()) {
      outbox_.ToClient(m.peer, EncodeError(m.message.request_id(),
                                           InvalidArgument("by_label: " + bad.message())));
      return;
    }
  }
  std::vector<const JobRecord*> jobs;
  jobs.reserve(jobs_.jobs().size());
  for (const auto& [name, job] : jobs_.jobs()) jobs.push_back(job.get());
  wire::UsageReportT reply;
  for (UsageRow& row : ComputeUsage(jobs, filter, now_ms)) {
    reply.rows.push_back(std::make_unique<UsageRow>(std::move(row)));
  }
  outbox_.ToClient(m.peer, Encode(m.message.request_id(), std::move(reply)));
}

}  // namespace cohort::coordinator
