// CoordinatorHttp is the coordinator's HTTP endpoint (DESIGN.md "HTTP"; --http-endpoint, default
// 127.0.0.1:7480, "none" turns it off): /metrics in the Prometheus text format, the read-only
// dashboard at / (plain HTML and JS; charts with Debian's Chart.js served from
// /usr/share/javascript), and the JSON API the dashboard polls:
//   /api/jobs?state=S&queue=Q&user=U&name=TEXT&selector=SELECTOR&limit=N   newest first; the
//                                      selector matches the jobs' labels (as cohort list -l)
//   /api/jobs/NAME                     the job, its replicas (with what each running one uses:
//                                      ReplicaUsageToJson, null when nothing is known) and events
//   /api/jobs/NAME/log?replica=R&bytes=N   the tail of the replica's latest attempt's log
//   /api/jobs/NAME/metrics             its training metrics
//   /api/nodes?selector=SELECTOR       the nodes a label selector matches (as cohort nodes -l);
//                                      gpus_used: the GPUs replicas hold, cordoned_gpus;
//                                      admin_reason/_by/_since_ms: the note kept with a cordon;
//                                      &events_of=NODE: that node's `events` too (oldest first)
//   /api/studies, /api/studies/NAME
//   /api/arrays?state=S&user=U&queue=Q&name=TEXT   the job arrays, newest first (ArraysJson);
//                                      user: the owner ("unknown" where none, as a job's)
//   /api/arrays/NAME                   the array and its tasks by index (ArrayJson)
//   /api/queues                        the queues, configured and used (QueuesJson)
//   /api/usage?since=7d&user=U&queue=Q&selector=SELECTOR&by_label=KEY   accounting as cohort usage
//                                      --json has it (coordinator/job_usage.h): {since_ms, rows};
//                                      since is a duration ago, absent for all time
// Everything is read from the latest CoordinatorSnapshot the loop published (Publish); logs from
// the log files the loop appends to. Auth: common/http_server.h (a token when bound beyond
// loopback).
//
// Thread safety: Publish from the loop; requests are served on the server's own threads.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/http_server.h"
#include "common/status.h"
#include "coordinator/http_snapshot.h"

namespace cohort::coordinator {

class CoordinatorHttp {
 public:
  static StatusOr<std::unique_ptr<CoordinatorHttp>> Start(const HttpEndpoint& endpoint,
                                                          const std::string& token);
  void Publish(std::shared_ptr<const CoordinatorSnapshot> snapshot);
  std::shared_ptr<const CoordinatorSnapshot> snapshot() const;
  std::string url() const { return server_->url(); }

  // What /metrics derives from the jobs. Walking every job is the bulk of a scrape (about 3 ms of
  // CPU at 10,000 jobs), so a scrape reuses the walk of the last one while the loop has published
  // no new jobs map (it makes one only when a job changed): an idle cluster's scrape costs what
  // its series cost.
  struct JobAggregates {
    std::map<std::string, std::map<JobState, uint64_t>> by_queue;  // jobs by queue and state
    uint64_t restarts = 0;
    Histogram queue_wait{DurationBucketsSeconds()};
    Histogram to_running{DurationBucketsSeconds()};
    uint64_t gpus_held = 0;  // by replicas placed and not final
  };
  static JobAggregates AggregateJobs(const JobViewMap& jobs);

  // /api/queues: each configured queue as `cohort queues --json` has it (quotas, weight,
  // gpu_idle_limit_ms, gpus_used, waiting_jobs, ...; "configured": true), in config order, then
  // the queues only jobs name (a queue since removed; "configured": false); every row with its
  // jobs by state ("jobs") and the GPUs its jobs' unfinished replicas hold ("gpus_allocated").
  static nlohmann::json QueuesJson(const CoordinatorSnapshot& s);

  // /api/arrays: every job array, newest first, as `cohort arrays --json` has it (ArrayToJson of
  // coordinator/job_array.h's ListArrays), from the tasks among `jobs`.
  static nlohmann::json ArraysJson(const JobViewMap& jobs);
  // /api/arrays/NAME: the array, plus "task_list": each task as /api/jobs lists it, with its
  // "index", by index; nullopt when no job is a task of it.
  static std::optional<nlohmann::json> ArrayJson(const JobViewMap& jobs, const std::string& name);

  // The renderings, public for tests.
  static std::string RenderMetrics(const CoordinatorSnapshot& s, const JobAggregates& jobs);
  static std::string RenderMetrics(const CoordinatorSnapshot& s) {
    return RenderMetrics(s, AggregateJobs(*s.jobs));
  }

 private:
  CoordinatorHttp() = default;
  HttpResponse Metrics(const HttpRequest& r) const;
  // AggregateJobs of `jobs`, from the cache when the last scrape saw the same map.
  std::shared_ptr<const JobAggregates> Aggregates(
      const std::shared_ptr<const JobViewMap>& jobs) const;
  HttpResponse Jobs(const HttpRequest& r) const;
  HttpResponse Job(const HttpRequest& r) const;
  HttpResponse Nodes(const HttpRequest& r) const;
  HttpResponse Studies(const HttpRequest& r) const;
  HttpResponse Arrays(const HttpRequest& r) const;
  HttpResponse Queues(const HttpRequest& r) const;
  HttpResponse Usage(const HttpRequest& r) const;
  HttpResponse Static(const HttpRequest& r) const;

  mutable std::mutex mu_;
  std::shared_ptr<const CoordinatorSnapshot> snapshot_;  // guarded by mu_
  mutable std::mutex aggregates_mu_;
  mutable std::shared_ptr<const JobViewMap> aggregated_jobs_;  // guarded by aggregates_mu_
  mutable std::shared_ptr<const JobAggregates> aggregates_;    // of aggregated_jobs_; same guard
  std::unique_ptr<HttpServer> server_;
};

}  // namespace cohort::coordinator
