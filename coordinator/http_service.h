// CoordinatorHttp is the coordinator's HTTP endpoint (DESIGN.md "HTTP"; --http-endpoint, default
// 127.0.0.1:7480, "none" turns it off): /metrics in the Prometheus text format, the read-only
// dashboard at / (plain HTML and JS; charts with Debian's Chart.js served from
// /usr/share/javascript), and the JSON API the dashboard polls:
//   /api/jobs?state=S&queue=Q&user=U&limit=N   newest first
//   /api/jobs/NAME                     the job, its replicas and events
//   /api/jobs/NAME/log?replica=R&bytes=N   the tail of the replica's latest attempt's log
//   /api/jobs/NAME/metrics             its training metrics
//   /api/nodes, /api/studies, /api/studies/NAME, /api/queues
// Everything is read from the latest CoordinatorSnapshot the loop published (Publish); logs from
// the log files the loop appends to. Auth: common/http_server.h (a token when bound beyond
// loopback).
//
// Thread safety: Publish from the loop; requests are served on the server's own threads.
#pragma once

#include <memory>
#include <mutex>
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

  // The renderings, public for tests.
  static std::string RenderMetrics(const CoordinatorSnapshot& s);

 private:
  CoordinatorHttp() = default;
  HttpResponse Metrics(const HttpRequest& r) const;
  HttpResponse Jobs(const HttpRequest& r) const;
  HttpResponse Job(const HttpRequest& r) const;
  HttpResponse Nodes(const HttpRequest& r) const;
  HttpResponse Studies(const HttpRequest& r) const;
  HttpResponse Queues(const HttpRequest& r) const;
  HttpResponse Static(const HttpRequest& r) const;

  mutable std::mutex mu_;
  std::shared_ptr<const CoordinatorSnapshot> snapshot_;  // guarded by mu_
  std::unique_ptr<HttpServer> server_;
};

}  // namespace cohort::coordinator
